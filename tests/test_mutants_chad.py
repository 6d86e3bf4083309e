"""Kill the mutants of the CHAD rules (chad/transform/efficient.py) that the golden corpus,
the oracle and the documented-rule tests let survive (`make mutate`,
docs/mutation-report.md): exact gradients and gradient step counts through `chad.cost` and
`chad.grad`.
"""

from __future__ import annotations

import pytest

import chad

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
