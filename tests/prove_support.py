"""Shared by the per-rule proof tests (tests/test_prove*.py): reading z3
expressions at concrete values, the generated cotangents as evaluator values,
a dense-zero node for the "make a cotangent dense" mutations, and the check that
a symbolic evaluation instantiated with concrete sub-costs gives the counting
evaluator's numbers exactly (docs/proofs.md, "What is assumed, and how it is tested")."""

from __future__ import annotations

import z3
from attrs import frozen

from chad.costmodel.generators import ctg_to_json
from chad.cotangents import ctg_from_json
from chad.linear import phi
from chad.proofs.statements import TH1_C
from chad.proofs.symbolic import OpaqueCtg
from chad.terms import Term, node


def _value(expr, values: dict) -> int:
    if isinstance(expr, int):
        return expr
    subst = [(z3.Int(n), z3.IntVal(v)) for n, v in values.items()]
    return z3.simplify(z3.substitute(expr, *subst) if subst else expr).as_long()


def _holds(b, values: dict) -> bool:
    subst = [(z3.Int(n), z3.IntVal(v)) for n, v in values.items()]
    return z3.is_true(z3.simplify(z3.substitute(b, *subst) if subst else b))


def _sparse(ty, ct, primal):
    """A generated cotangent as the evaluator's value (arrays' become bags)."""
    return ctg_from_json(ty, ctg_to_json(ty, ct), primal=primal)


@node()
@frozen
class DenseZero(Term):
    """A dense zero of type ty (naive CHAD, §4): size(ty) steps, potential size(ty)."""

    ty: object


def _dense_zero_rule(se, t, env):
    s = se.sym("size", lo=1)
    return OpaqueCtg(None, s), s


def assert_matches_concrete(se, ob, *, primal_cost, crun, ccall, cmonad, ctg, denvin,
                            denvout, potential=phi):
    """The obligation `ob` of a symbolic evaluation `se` backed by concrete
    sub-costs: its primal cost, the three costs and the potentials are the
    counting evaluator's, its hypotheses hold, and so does TH1 for each sub-term."""
    assert ob.error is None, ob.error
    vals = se.values
    assert _value(ob.P, vals) == primal_cost
    assert _value(ob.parts["crun"], vals) == crun
    assert _value(ob.parts["ccall"], vals) == ccall
    assert _value(ob.parts["cmonad"], vals) == cmonad
    assert _value(ob.parts["phi_ctg"], vals) == potential(ctg)
    assert _value(ob.parts["phi_in"], vals) == sum(map(potential, denvin))
    assert _value(ob.parts["phi_out"], vals) == sum(map(potential, denvout))
    assert repr(list(ob.parts["out"])) == repr(list(denvout))
    for h in ob.hyps:
        assert _holds(h, vals), h
    for lhs, P, _mult in ob.sub_hyps:
        assert _value(lhs, vals) <= TH1_C * _value(P, vals)
