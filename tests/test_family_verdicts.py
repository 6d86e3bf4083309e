"""A family verdict says what it is (chad/costmodel/families.py `scope`,
`proved`): z3 decides the bound for the fitted formulas, exact on the training
sizes and checked at held-back ones; only a first-order family under the
efficient transform is covered for every n, by the formalisation's proof."""

from __future__ import annotations

import json

from chad.cli import main
from chad.costmodel.families import study


def test_a_first_order_family_is_proved_by_the_formalisation():
    r = study("op_fst", "efficient")
    assert r.within and r.proved
    assert "held-back n = 24, 32" in r.scope and "proved for every n" in r.scope


def test_other_verdicts_are_fits_checked_on_held_back_sizes(capsys):
    for name, transform in (("nested_lambdas", "efficient"), ("op_fst", "naive")):
        r = study(name, transform)
        assert not r.proved
        assert "an extrapolation past" in r.scope and "proved" not in r.scope
    assert main(["check", "--family", "nested_lambdas", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)["results"][0]
    assert res["proved"] is False and "not a proof" in res["scope"]
    assert main(["check", "--family", "op_fst"]) == 0
    out = capsys.readouterr().out
    assert "what this verdict is: exact fits on n = 2, 3," in out
    assert "for every n, of the fitted formulas" in out


def test_a_smaller_constant_is_not_covered_by_the_proof():
    from chad.costmodel.measure import Constants

    r = study("op_fst", "efficient", constants=Constants(20, 5, 4))
    assert r.within and not r.proved
