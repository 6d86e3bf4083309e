"""The extension surface (chad/extend.py), used the way docs/extending.md shows:
a new node declared and registered from outside the core, then evaluated,
differentiated and printed by the unchanged core; and the rule that an
extension adds but never overrides."""

from __future__ import annotations

import pytest
from attrs import field, frozen

from chad import extend, tables
from chad.target_printer import show_term
from chad.terms import Program, App, Def, Fst, Lam, Let, Pair, Param, Snd, Term, Var
from chad.transform.efficient import Chad, gradient_term
from chad.transform.registry import CTG
from chad.types import R
from chad.costmodel.evaluate import Evaluator
from chad.runtime import make_evm


def _meta():
    return field(default=None, eq=False, kw_only=True, repr=False)


@extend.node("expr")
@frozen
class Double(Term):
    """`double e` = 2 * e on reals; linear, so it is its own transpose."""

    expr: Term
    loc: object = _meta()
    ty: object = _meta()


def eval_double(ev, t, env):
    v, c = ev.eval(t.expr, env)
    return 2.0 * v, 1 + c


def chad_double(chad: Chad, t: Double) -> Term:
    # let r = chad e in pair (double (fst r)) (lamwith [r] \d -> app (snd r) (double d))
    r, d = chad.fresh("r"), chad.fresh("d")
    return Let(r, chad(t.expr), Pair(Double(Fst(Var(r))),
                                     Lam(d, None, App(Snd(Var(r)), Double(Var(d))), (r,))))


def show_double(t, one):
    return f"double {one(t.expr, 3)}", 2


@pytest.fixture(scope="module", autouse=True)
def registered():
    extend.register_node(Double, eval=eval_double, chad=chad_double, show=show_double,
                         compiled="eval")
    yield
    for table, key in ((tables.EVAL, Double), (tables.CHAD, ("efficient", Double)),
                       (tables.SHOW, Double), (tables.COMPILE, Double)):
        del table[key]


def test_a_new_node_is_evaluated_differentiated_and_printed():
    body = Double(Var("x", ty=R), ty=R)
    d = Def("f", (Param("x", R),), R, body)
    value, steps = Evaluator().eval(body, {"x": 1.5})
    assert (value, steps) == (3.0, 2)
    grad = gradient_term(d)
    (_, cells), _ = Evaluator({}, make_evm("array")).eval(grad, {"x": 1.5, CTG: 1.0})
    assert cells[0] == 2.0
    assert "double" in show_term(grad)


def test_a_new_node_is_compiled_through_its_evaluation_rule():
    import chad
    from chad.compile import backend

    body = Double(Var("x", ty=R), ty=R)
    prog = Program((Def("f", (Param("x", R),), R, body),))
    assert chad.grad(prog)(1.5) == chad.grad(prog, backend="interp")(1.5) == (3.0, (2.0,))
    assert chad.primal(prog)(1.5) == 3.0
    assert "_run_rule(" in backend.primal_module(prog, prog.defs[0]).source


def test_registering_a_different_rule_for_a_taken_key_is_refused():
    from chad.terms import Build

    with pytest.raises(ValueError, match="already registered"):
        extend.register_node(Build, eval=eval_double)
    extend.register_node(Double, eval=eval_double)  # the same rule again: fine


def test_a_node_without_a_shape_cannot_be_registered():
    @frozen
    class NoShape(Term):
        expr: Term

    with pytest.raises(TypeError, match="@node"):
        extend.register_node(NoShape, eval=eval_double)
