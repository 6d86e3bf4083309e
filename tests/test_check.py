"""`chad check` and chad/costmodel/criterion.py (docs/complexity-checker.md): the efficient transform
passes on generated programs with a fitted c; the naive first-order and naive
higher-order transforms are refuted with a printed, reproducible counterexample."""

from __future__ import annotations

import json
import re

import pytest

import chad
from chad.api import cost
from chad.cli import main
from chad.costmodel.criterion import Constants, Measurement, ProgressBar, measure, run_check
from chad.costmodel.fit import smallest_c


def _efficient_passes(n: int, seed: int):
    r = run_check("efficient", programs=n, seed=seed)
    assert r.holds, r.counterexample.render()
    assert r.generated == n and len(r.observations) == n
    fit = smallest_c(r.observations)
    assert 1 <= fit.c <= 34  # the fitted c, next to the proved 34
    return r, fit


def test_efficient_passes_on_300_generated_programs():
    _efficient_passes(300, seed=0)


@pytest.mark.long
def test_efficient_passes_on_2000_generated_programs():
    r, fit = _efficient_passes(2000, seed=2024)
    print(f"2000 programs: smallest c = {fit.c}, max ratio {r.max_ratio:.1f}")


def test_naive_first_order_is_refuted_with_a_reproducible_counterexample(capsys):
    """`chad check --transform naive --seed 1` exits 1, prints the shrunk program,
    and the printed `chad cost` line reproduces the violation."""
    code = main(["check", "--transform", "naive", "--seed", "1"])
    out = capsys.readouterr().out
    assert code == 1
    assert "VIOLATION" in out and "def f(" in out
    m = re.search(r"^  (chad cost (\S+) --args '(.*)' --ctg '?(.*?)'? --transform naive "
                  r"--evm array)$", out, re.M)
    assert m, out
    path, args, ctg = m.group(2), json.loads(m.group(3)), json.loads(m.group(4))
    assert main(["cost", path, "--args", json.dumps(args), "--ctg", json.dumps(ctg),
                 "--transform", "naive", "--json"]) == 1
    rep = json.loads(capsys.readouterr().out)
    assert rep["holds"] is False
    assert f"gradient_steps {rep['gradient_steps']} > bound {rep['bound']}" in out


def test_naive_higher_order_is_refuted_with_a_counterexample(capsys):
    r = run_check("naive-ho", programs=200, seed=2,
                  features={"arrays": False, "functions": True})
    assert not r.holds
    ce = r.counterexample
    assert ce.error is None and not ce.observation.holds()
    path = ce.write()
    text = ce.render(path)
    print(text)
    assert "\\" in ce.source()  # it has a lambda
    # the printed `chad cost` command reproduces it
    assert ce.command(path).startswith("chad cost ")
    capsys.readouterr()
    assert main(["cost", path, "--args", json.dumps(ce.case.args_json()), "--ctg",
                 json.dumps(ce.case.ctg_json()), "--transform", "naive-ho", "--json"]) == 1
    rep = json.loads(capsys.readouterr().out)
    assert (rep["holds"], rep["gradient_steps"]) == (False, ce.observation.gradient_steps)
    # the efficient transform on the same program is within the bound
    eff = measure(ce.case.program, ce.case.args, ce.case.ctg, "efficient")
    assert eff.holds()
    assert eff.gradient_steps < ce.observation.gradient_steps


def test_efficient_with_too_small_a_constant_is_caught():
    """With c = 10 even the efficient transform violates: the checker finds it."""
    r = run_check("efficient", programs=100, seed=0, constants=Constants(10, 5, 4))
    assert not r.holds
    o = r.counterexample.observation
    assert o.holds(Constants()) and not o.holds(Constants(10, 5, 4))


def test_chains_find_and_shrink_a_per_construct_violation():
    """Chains (one construct nested) expose per-construct constants: with c = 15
    the first-order efficient transform fails on a chain, shrunk to a short one."""
    r = run_check("efficient", programs=200, seed=0, shape="chains",
                  features={"arrays": False, "functions": False}, constants=Constants(15, 5, 4))
    assert not r.holds
    o = r.counterexample.observation
    assert o.holds(Constants()) and not o.holds(Constants(15, 5, 4))
    assert len(r.counterexample.source()) < 400


def test_deterministic_given_the_seed():
    a = run_check("efficient", programs=25, seed=7)
    b = run_check("efficient", programs=25, seed=7)
    assert [o.as_row() for o in a.observations] == [o.as_row() for o in b.observations]
    c = run_check("efficient", programs=25, seed=8)
    assert [o.as_row() for o in a.observations] != [o.as_row() for o in c.observations]


def test_measure_agrees_with_chad_cost():
    from chad.costmodel.families import t_magic

    inst = t_magic(8)
    r = cost(inst.program, inst.args, inst.ctg, transform="naive")
    o = measure(inst.program, inst.args, inst.ctg, "naive")
    assert o.as_row() == [r.primal_steps, r.gradient_steps, r.ctg_size, r.params]
    o2 = measure(inst.program, inst.args, inst.ctg, "efficient", "map", with_work=True)
    assert o2.work > 0 and o2.holds()
    assert measure(inst.program, inst.args, inst.ctg, "efficient", "map").work is None


def test_cli_efficient_reports_the_fitted_c(capsys):
    assert main(["check", "--transform", "efficient", "--programs", "40", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"the largest c seen over \d+ measured program.*: c = \d+ +\(<= 34; a lower bound", out), out
    assert "no violation" in out


def test_cli_json_and_plot(capsys, tmp_path):
    png = tmp_path / "check.png"
    assert main(["check", "--programs", "20", "--seed", "3", "--json", "--plot", str(png)]) == 0
    d = json.loads(capsys.readouterr().out)
    (res,) = d["results"]
    assert d["holds"] and res["holds"] and res["programs"] == 20
    assert res["fitted"]["c"] <= 34 and res["constants"] == {"c": 34, "c1": 5, "c2": 4}
    assert len(res["observations"]) == 20 and res["counterexample"] is None
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_first_order_features_and_constants(capsys):
    assert main(["check", "--programs", "10", "--features", "first-order", "--constants",
                 "34,5,4", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)["results"][0]
    assert res["features"] == {"arrays": False, "functions": False, "loops": False}


@pytest.mark.parametrize("argv, msg", [
    (["--constants", "34,5"], "three constants"),
    (["--constants", "a,b,c"], "integers"),
    (["--transform", "magic"], "unknown transform"),
    (["--programs", "0"], "at least 1"),
    (["--plot", "x.pdf"], ".png"),
    (["--features", "sets"], "unknown feature"),
    (["--features", "loops", "--transform", "naive"], "does not support loops"),
    (["--family", "op_fst", "--stats"], "a family (--family) has none"),
])
def test_cli_usage_errors_exit_2(capsys, argv, msg):
    assert main(["check"] + argv) == 2
    cap = capsys.readouterr()
    assert msg in cap.err and cap.out == ""


def test_progress_bar_only_on_a_terminal():
    import io

    class Tty(io.StringIO):
        def isatty(self):
            return True

    quiet, loud = io.StringIO(), Tty()
    for stream in (quiet, loud):
        bar = ProgressBar("check", stream=stream)
        bar(5, 10)
        bar(10, 10)
        bar.close()
    assert quiet.getvalue() == ""
    assert "10/10" in loud.getvalue() and "#" in loud.getvalue()


def test_observation_arithmetic():
    o = Measurement(10, 300, 2, 3)
    assert o.bound() == 5 + 340 + 2 + 12 and o.holds()
    assert o.needed_c == pytest.approx((300 - 5 - 2 - 12) / 10)
    assert not o.holds(Constants(20, 5, 4))
    assert Constants.parse("1,2,3") == Constants(1, 2, 3)


def test_verdicts_per_fragment_say_what_covers_them(capsys):
    """The largest c seen is reported per fragment, as a lower bound, next to the
    constant it is held to; "proved" only for the efficient transform's first-order
    fragment (the formalisation's), never for arrays, functions or other transforms."""
    from chad.costmodel.criterion import fragment_of

    assert fragment_of(chad.load("def f(x : R) : R = sin x * x\n")) == "first-order"
    assert fragment_of(chad.load("def f(a : Array R) : R = sum a\n")) == "arrays"
    assert fragment_of(chad.load("def f(x : R) : R = (\\(y : R) -> y) x\n")) == "functions"
    assert main(["check", "--programs", "60", "--seed", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    frags = {f["fragment"]: f for f in out["results"][0]["fragments"]}
    assert set(frags) == {"first-order", "arrays", "functions"}
    assert sum(f["programs"] for f in frags.values()) == len(out["results"][0]["observations"])
    assert frags["first-order"]["covered_by"].startswith("proved")
    assert frags["arrays"]["covered_by"].startswith("not proved")
    assert frags["functions"]["covered_by"].startswith("not proved")
    for f in frags.values():
        assert 0 <= f["largest_c_seen"] <= 34 == f["held_to"]
    main(["check", "--transform", "naive", "--seed", "2"])
    text = capsys.readouterr().out
    assert "first-order:" in text and "proved by" not in text
