"""`chad check --mode forward` (chad/check_forward_cli.py,
chad/costmodel/forward_check.py; docs/forward-mode.md): the criterion
jvp <= c*primal + c' over generated programs, its z3 fit, its counterexamples and
its usage errors."""

from __future__ import annotations

import json

import pytest

from chad.cli import main
from chad.costmodel.forward_check import (
    DEFAULT, ForwardConstants, ForwardObservation, fit, observe, run_forward_check,
)
from chad.costmodel.generators import chains
from chad.forward_api import jvp_cost


def test_holds_with_the_default_constants_and_reports_the_fit(capsys):
    assert main(["check", "--mode", "forward", "--programs", "25", "--seed", "2",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["holds"] and out["mode"] == "forward"
    assert out["constants"] == {"c": DEFAULT.c, "c1": DEFAULT.c1}
    rows = out["observations"]
    assert len(rows) >= 25
    # the fitted c is the smallest covering every observation with c' fixed
    c = out["fitted"]["c"]
    assert all(g <= DEFAULT.c1 + c * p for p, g, _n in rows)
    assert any(g > DEFAULT.c1 + (c - 1) * p for p, g, _n in rows)
    assert c <= DEFAULT.c
    # the joint fit covers them too
    j = out["joint"]
    assert all(g <= j["c1"] + j["c"] * p for p, g, _n in rows)


def test_text_report(capsys):
    assert main(["check", "--mode", "forward", "--programs", "10", "--features",
                 "first-order"]) == 0
    out = capsys.readouterr().out
    assert "forward mode" in out and "z3 (Optimize)" in out and "no violation" in out


def test_a_violation_is_shrunk_and_reported(capsys):
    assert main(["check", "--mode", "forward", "--programs", "30", "--constants", "2,0",
                 "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    cex = out["counterexample"]
    assert not out["holds"] and cex["error"] is None
    assert cex["jvp_steps"] > 2 * cex["primal_steps"]
    assert "def f(" in cex["program"]


@pytest.mark.parametrize("argv", [
    ["--constants", "1,2,3"], ["--constants", "a,b"], ["--family", "op_fst"],
    ["--transform", "naive"], ["--programs", "0"], ["--features", "graphs"],
])
def test_usage_errors(argv, capsys):
    assert main(["check", "--mode", "forward"] + argv) == 2
    assert "usage error" in capsys.readouterr().err


def test_fit_against_hand_computed_constants():
    obs = [ForwardObservation(10, 100, 1), ForwardObservation(1, 14, 1),
           ForwardObservation(10, 90, 1)]
    # c' = 4: c >= (100 - 4) / 10 -> 10 and c >= 14 - 4 = 10
    assert fit(obs, 4).c == 10
    # jointly: 100 <= c' + 10c, 14 <= c' + c; minimal c + c' is c = 10, c' = 4
    # (c = 9 needs c' = 10: sum 19 > 14)
    j = fit(obs)
    assert (j.c, j.c1) == (10, 4)


def test_observation_is_the_api_measurement():
    """The checker's numbers are those of chad.forward_api.jvp_cost (both count on
    the evaluator; the tangent only changes values, not steps)."""
    from hypothesis import given, settings

    @settings(max_examples=10, deadline=None, derandomize=True)
    @given(chains(8, arrays=True, functions=True))
    def prop(case):
        o = observe(case)
        tangents = [None if isinstance(a, int) else (1.0 if isinstance(a, float) else
                                                       [1.0] * len(a)) for a in case.args]
        c = jvp_cost(case.program, None, list(case.args), tangents)
        assert (o.primal_steps, o.jvp_steps) == (c.primal_steps, c.jvp_steps)

    prop()


def test_constants_parse():
    assert ForwardConstants.parse("26, 8") == ForwardConstants(26, 8)
    assert ForwardConstants(3, 1).bound(10) == 31
    r = run_forward_check(programs=5, constants=ForwardConstants(1000, 0))
    assert r.holds and r.generated == 5

