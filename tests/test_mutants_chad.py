"""Kill the mutants of the CHAD rules (chad/transform/efficient.py) and of naive CHAD's dense
operations (chad/transform/naive_terms.py) that the golden corpus, the oracle and the
documented-rule tests let survive (`make mutate`, docs/mutation-report.md): exact gradients
and gradient step counts through `chad.cost` and `chad.grad`; each dense node's value and step
count against the cost table of chad/transform/naive_terms.py.
"""

from __future__ import annotations

import pytest

import chad
from chad.costmodel.evaluate import Evaluator
from chad.errors import EvalError
from chad.linear import L_R, L_UN, LPairT, LSumT, LType
from chad.terms import Var
from chad.transform.naive_terms import (
    DCast, DDensify, DZero, EVOneHot, EVPlus, EVSplit, EVZero, ev_to_cells, tsize,
)
from chad.values import Inj

# The zero cotangent of an injection is cast to the zero of the injected side's D2 type
# (chad (inl e) = ... lamwith [r] \d -> app (snd r) (lcastl d (zero of D2 σ))): here that side
# is a pair, the other side a real, so taking the other side's zero (0.0) breaks the pair rule.
INJ = [
    ("def f(x : R, y : R) : (R * R) + R = inl((x, y))", 0),
    ("def f(x : R, y : R) : R + (R * R) = inr((x, y))", 1),
]


@pytest.mark.parametrize("text,side", INJ)
def test_zero_cotangent_of_an_injection_is_the_zero_of_its_own_side(text, side):
    r = chad.cost(text, [2.0, 3.0], ctg=None)
    assert (r.primal_steps, r.gradient_steps, r.bound) == (4, 73, 150)
    value, grads = chad.grad(text)(2.0, 3.0, ctg=None)
    assert (value.side, value.value) == (side, (2.0, 3.0))
    assert grads == (0.0, 0.0)


# The let and case rules push the bound variable with its type on the context: the naive
# transform (same rules, mode "naive") reads those types for its dense environment cells.
BOUND = [
    ("def f(x : R) : R = let y = x * 2.0 in y * x", (10, 193, 162, 350), (8.0, (8.0,))),
    ("def f(x : R) : R = case (inl(x) : R + R) of { inl y -> y * x | inr w -> w }",
     (7, 128, 118, 248), (4.0, (4.0,))),
]


@pytest.mark.parametrize("text,counts,grad", BOUND)
def test_bound_variables_carry_their_type_into_the_context(text, counts, grad):
    primal, efficient, naive, bound = counts
    r = chad.cost(text, [2.0])
    assert (r.primal_steps, r.gradient_steps, r.bound) == (primal, efficient, bound)
    n = chad.cost(text, [2.0], transform="naive")
    assert (n.primal_steps, n.gradient_steps) == (primal, naive)
    assert chad.grad(text)(2.0) == grad
    assert chad.grad(text, transform="naive")(2.0) == grad


def test_backward_reports_the_rest_of_th2_exactly():
    # x * y at (2, 3), ctg 1.0: forward pass + backward = TH2's 84 (the formalisation's number)
    from chad.api import _defs, load, make_evm
    from chad.transform.efficient import backward, chad_def
    from chad.costmodel.evaluate import Evaluator

    d = _defs(load("def f(x : R, y : R) : R = x * y"))["f"]
    ev = Evaluator(evm=make_evm("array"))
    (value, bp), cf = ev.eval(chad_def(d), {"x": 2.0, "y": 3.0})
    cells, cb = backward(ev, bp, 1.0, d)
    assert value == 6.0
    assert cells == [3.0, 2.0]
    assert (cf, cb) == (25, 59)  # 25 + 59 = 84


# ---------------------------------------------------------------------------------------
# Naive CHAD's dense operations (Fig. 4), node by node, against the cost table of
# chad/transform/naive_terms.py (docs/naive-chad.md). Variables cost 1.

PAIR = LPairT(L_R, LPairT(L_UN, L_R))  # dense zero (0.0, (None, 0.0)): 5 nodes
SUM = LSumT(L_R, PAIR)


def test_tsize_counts_the_nodes_of_the_dense_zero():
    assert (tsize(L_R), tsize(L_UN), tsize(SUM)) == (1, 1, 1)  # a sum's zero is one node
    assert tsize(PAIR) == 5
    assert tsize(LPairT(L_R, PAIR)) == tsize(LPairT(PAIR, L_R)) == 1 + 1 + 5
    assert tsize(LPairT(SUM, LPairT(PAIR, L_UN))) == 1 + 1 + (1 + 5 + 1)
    with pytest.raises(EvalError):
        tsize(LType())


def test_dzero_and_evzero():
    ev = Evaluator()
    assert ev.eval(DZero(PAIR), {}) == ((0.0, (None, 0.0)), 5)
    z, c = ev.eval(EVZero((L_R, PAIR, SUM)), {})
    assert ev_to_cells(z) == [0.0, (0.0, (None, 0.0)), None]
    assert c == 1 + (1 + 1) + (1 + 5) + (1 + 1)


def test_dcast_returns_its_side_or_the_dense_zero():
    ev = Evaluator()
    d = Var("d")
    # the cotangent is on the cast's side: 1 + c(e)
    assert ev.eval(DCast(1, PAIR, d), {"d": Inj(1, (1.0, (None, 2.0)))}) == ((1.0, (None, 2.0)), 1 + 1)
    assert ev.eval(DCast(0, L_R, d), {"d": Inj(0, 3.0)}) == (3.0, 1 + 1)
    # the zero, or the other side: + tsize(lt) for building the dense zero
    assert ev.eval(DCast(1, PAIR, d), {"d": None}) == ((0.0, (None, 0.0)), 1 + 1 + 5)
    assert ev.eval(DCast(0, PAIR, d), {"d": Inj(1, 3.0)}) == ((0.0, (None, 0.0)), 1 + 1 + 5)


def test_densify_builds_the_dense_value():
    ev = Evaluator()
    lt = LPairT(L_R, LSumT(L_R, PAIR))
    r, c = ev.eval(DDensify(lt, Var("c")), {"c": (2.0, Inj(1, None))})
    assert r == (2.0, Inj(1, (0.0, (None, 0.0))))
    assert c == 1 + (1 + 1 + (1 + 5))  # c(e) + pair, R, sum and the dense zero of PAIR
    r, c = ev.eval(DDensify(lt, Var("c")), {"c": (None, Inj(0, 4.0))})
    assert (r, c) == ((0.0, Inj(0, 4.0)), 1 + (1 + 1 + (1 + 1)))


def test_evonehot_puts_the_value_in_its_cell():
    ev = Evaluator()
    lts = (L_R, PAIR, SUM)
    o, c = ev.eval(EVOneHot(lts, 1, "p", Var("d")), {"d": (1.0, (None, 2.0))})
    assert ev_to_cells(o) == [0.0, (1.0, (None, 2.0)), None]
    assert c == 1 + 1 + 3 + (1 + 1)  # node, c(v), one per cell, the other cells' zeros
    o, c = ev.eval(EVOneHot(lts, 0, "x", Var("d")), {"d": 4.0})
    assert ev_to_cells(o) == [4.0, (0.0, (None, 0.0)), None]
    assert c == 1 + 1 + 3 + (5 + 1)


def test_evplus_adds_cell_by_cell_left_to_right():
    ev = Evaluator()
    lts = (L_R, PAIR, SUM)

    def env(*cells):
        out = None
        for x in cells:
            out = (out, x)
        return out

    a = env(1.0, (1.0, (None, 2.0)), Inj(0, 3.0))
    b = env(2.0, (3.0, (None, 4.0)), None)
    s, c = ev.eval(EVPlus(lts, Var("a"), EVSplit(Var("b"))), {"a": a, "b": b})
    assert ev_to_cells(s) == [3.0, (4.0, (None, 6.0)), Inj(0, 3.0)]
    # node + c(a) + c(split b) (1 + 1) + per cell 1 + its plus: R 1, PAIR 1 + 1 + (1 + 1 + 1),
    # SUM (the left one non-zero) 1 + (1 + cast of the zero: its tsize 1) + the inner R plus 1
    assert c == 1 + 1 + 2 + (1 + 1) + (1 + 5) + (1 + 4)
    s, c = ev.eval(EVPlus(lts, Var("b"), Var("a")), {"a": a, "b": b})
    assert ev_to_cells(s) == [3.0, (4.0, (None, 6.0)), Inj(0, 3.0)]
    assert c == 1 + 1 + 1 + (1 + 1) + (1 + 5) + (1 + 1)  # the left one the zero: 1


def test_evsplit_is_the_identity():
    ev = Evaluator()
    e = ((None, 1.0), 2.0)
    assert ev.eval(EVSplit(Var("e")), {"e": e}) == (e, 1 + 1)
    assert ev.eval(EVSplit(EVSplit(Var("e"))), {"e": e}) == (e, 1 + 1 + 1)
