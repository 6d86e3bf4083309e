"""Kill the mutants of the CHAD rules (chad/transform/efficient.py) and of naive CHAD's dense
operations (chad/transform/naive_terms.py) that the golden corpus, the oracle and the
documented-rule tests let survive (`make mutate`, docs/mutation-report.md): exact gradients
and gradient step counts through `chad.cost` and `chad.grad`; the explicit stack that runs the
core rules (deep programs within a small recursion limit) and the ways a subclass reaches them;
each dense node's value and step count against the cost table of chad/transform/naive_terms.py.
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


# ---------------------------------------------------------------------------------------
# The CHAD rules' two ways in (chad/transform/efficient.py): the core rules are generators
# run on an explicit stack by `Chad.__call__`; a subclass that overrides a rule (as the
# proofs' mutated rules do, chad/proofs/derive.py) reaches the others through the public
# methods `let`, `prim`, `pair`, `fst`, `snd`, `inj`, `case` and `_project`.

ALL_RULES = """def f(x : R, y : R) : R =
  let p = (x * y, x) in
  let s = (inl(fst(p)) : R + R) in
  let z = case s of { inl a -> a * snd(p) | inr b -> b } in
  let w = case (inr(y) : R + R) of { inl a -> a | inr b -> b * x } in
  let u = () in
  z + w
"""


def _through_super(fst_by_project: bool):
    from chad.terms import Fst, LPair
    from chad.transform.common import zerot
    from chad.transform.efficient import Chad

    class ThroughSuper(Chad):
        """Every core rule overridden by a call of the inherited public method."""

        def let(self, t):
            return super().let(t)

        def prim(self, t):
            return super().prim(t)

        def pair(self, t):
            return super().pair(t)

        def fst(self, t):
            if not fst_by_project:
                return super().fst(t)
            ty = t.expr.ty  # the fst rule written out, as chad/transform/efficient.py's `_fst`
            return self._project(t, Fst, lambda d: LPair(d, zerot(ty.right)))

        def snd(self, t):
            return super().snd(t)

        def inj(self, t, inj, cast, side):
            return super().inj(t, inj, cast, side)

        def case(self, t):
            return super().case(t)

    return ThroughSuper


def _gradient(chad_class, text, args, ctg=1.0):
    """TH2's left side (chad/transform/efficient.py `gradient_term`) with chad_class's
    derivative: the parameter cotangents and the step count."""
    from chad.api import _defs, load, make_evm
    from chad.terms import App, RunEVM, Snd
    from chad.transform.common import Context, zero_env_term
    from chad.transform.efficient import cells_of
    from chad.transform.registry import CTG

    d = _defs(load(text))["f"]
    term = RunEVM(App(Snd(chad_class(Context.of_params(d.params))(d.body)), Var(CTG)),
                  zero_env_term([p.ty for p in d.params]))
    env = {p.name: a for p, a in zip(d.params, args)} | {CTG: ctg}
    value, steps = Evaluator(evm=make_evm("array")).eval(term, env)
    return cells_of(value), steps


@pytest.mark.parametrize("fst_by_project", [False, True])
def test_a_subclass_reaches_every_core_rule_through_its_public_method(fst_by_project):
    from chad.transform.efficient import Chad

    x, y, h = 2.0, 3.0, 1e-6
    f = chad.grad(ALL_RULES)
    # f = x*y*x + y*x: df/dx = 2xy + y = 15, df/dy = x^2 + x = 6
    fd = ((f(x + h, y, ctg=1.0)[0] - f(x - h, y, ctg=1.0)[0]) / (2 * h),
          (f(x, y + h, ctg=1.0)[0] - f(x, y - h, ctg=1.0)[0]) / (2 * h))
    assert fd == pytest.approx((15.0, 6.0), rel=1e-6)
    cls = _through_super(fst_by_project)
    grads, steps = _gradient(cls, ALL_RULES, [x, y])
    assert grads == [15.0, 6.0]
    # the same derivative term as the core rules' generators, so the same gradient step count
    # (TH2's left side, which chad.cost reports and tests/test_oracle.py pins to the oracle)
    assert (grads, steps) == _gradient(Chad, ALL_RULES, [x, y])
    assert steps == chad.cost(ALL_RULES, [x, y]).gradient_steps
    for text, _side in INJ:  # the zero cotangent of an injection: the zero of its own side
        assert _gradient(cls, text, [2.0, 3.0], ctg=None) == ([0.0, 0.0], 73)


def _deep(n: int) -> str:
    lines = ["def f(x : R) : R =", "  let x0 = x in"]
    lines += [f"  let x{i} = x{i - 1} * 2.0 + x in" for i in range(1, n)]
    return "\n".join(lines + [f"  x{n - 1}"]) + "\n"


@pytest.mark.parametrize("text", [_deep(3000), "def f(x : R) : R = " + " + ".join(["x"] * 3000) + "\n"])
def test_deep_programs_need_no_deeper_python_stack_than_a_shallow_one(text):
    """Chad.__call__ runs the core rules on its own stack (docs/compiler.md, "Deep programs"):
    3000 nested lets, or a sum of 3000 terms, transform within a recursion limit of 1000."""
    import sys

    from chad.api import _defs, load
    from chad.transform.common import Context
    from chad.transform.efficient import Chad

    d = _defs(load(text))["f"]
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        term = Chad(Context.of_params(d.params))(d.body)
    finally:
        sys.setrecursionlimit(limit)
    assert type(term).__name__ == "Let"


def test_another_mode_falls_back_to_the_efficient_rules_of_extensions():
    """A transform whose mode registers no rule of its own for a node class (naive-ho for
    arrays: chad/functions/naive_ho.py, "every other construct uses the efficient rules")
    takes the rule registered under "efficient"."""
    import numpy as np

    text = "def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> a ! i * b ! i))\n"
    a, b = [1.0, 2.0, 3.0], [4.0, -5.0, 6.0]
    value, (ga, gb) = chad.grad(text, transform="naive-ho")(a, b)
    assert value == 1.0 * 4.0 - 2.0 * 5.0 + 3.0 * 6.0
    assert np.array_equal(ga, b) and np.array_equal(gb, a)  # d(a.b)/da = b, d(a.b)/db = a
    assert (chad.cost(text, [a, b], transform="naive-ho").gradient_steps
            == chad.cost(text, [a, b]).gradient_steps)  # no function: the same rules


def test_the_derivatives_primitive_keeps_the_source_location_of_its_error():
    """A runtime error of a primitive (docs/language.md: div(i, 0) is "division by zero",
    with the program's location) raised while the derivative's forward pass runs names the
    primitive's line and column in the source, as the primal's does."""
    from chad.transform.efficient import Chad

    text = "def f(x : R, n : Z) : R =\n  let k = div(n, 0) in\n  x * x\n"
    with pytest.raises(EvalError) as primal:
        chad.cost(text, [2.0, 7])
    with pytest.raises(EvalError) as derivative:
        _gradient(Chad, text, [2.0, 7])  # the gradient term only
    for e in (primal, derivative):
        assert "2:11" in str(e.value) and "division by zero: div(7, 0)" in str(e.value)


def test_a_subclass_that_overrides_call_sees_every_sub_term():
    """naive-ho (chad/functions/naive_ho.py) overrides `__call__` for lambda and app; a lambda
    under a let must still reach it, so its derivative has the log fold of the context half
    (D_Γ[λx. t] = ... logfold ...), which the efficient rule has not."""
    from chad.api import _defs, load
    from chad.functions.naive_ho import NaiveHOChad
    from chad.functions.terms import LogFold
    from chad.terms import subterms
    from chad.transform.common import Context
    from chad.transform.efficient import Chad

    text = "def f(x : R) : R = let g = \\y -> y * x in g x\n"
    d = _defs(load(text))["f"]
    logfolds = [sum(isinstance(u, LogFold) for u in subterms(cls(Context.of_params(d.params))(d.body)))
                for cls in (NaiveHOChad, Chad)]
    assert logfolds == [1, 0]
    assert chad.grad(text, transform="naive-ho")(3.0) == (9.0, (6.0,))  # x^2: 2x
