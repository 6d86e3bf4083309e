"""Kill the mutants of chad/costmodel/evaluate.py that the golden corpus, the oracle and the
documented-rule tests let survive (`make mutate`, docs/mutation-report.md).

Exact values and step counts of target terms evaluated by the Evaluator directly: the
paths below (`run` with an environment that is a variable, `pure` of a non-unit value,
applying a built-in function value) are never taken by the derivatives CHAD builds, so
only a direct term shows them.
"""

from __future__ import annotations

import pytest

import chad

from chad import features

features.load()

from chad.api import make_evm  # noqa: E402
from chad.terms import Prim, PureEVM, RunEVM, Unit, Var  # noqa: E402
from chad.costmodel.evaluate import Evaluator  # noqa: E402

EVMS = ["array", "map", "parallel", "spec"]


def lit(c: float) -> Prim:
    return Prim("LIT", Unit(), const=c)


@pytest.mark.parametrize("evm", EVMS)
def test_run_evaluates_its_environment_in_the_current_environment(evm):
    # run (pure 3.0) z, z = (2.0, ()): 1 + c(pure 3.0) 3 + c(z) 1 + (1 + |Γ| 1 + run of pure 1) = 8
    ev = Evaluator(evm=make_evm(evm))
    value, steps = ev.eval(RunEVM(PureEVM(lit(3.0)), Var("z")), {"z": (2.0, None)})
    assert value == (3.0, (2.0, None))
    assert steps == 8


@pytest.mark.parametrize("evm", EVMS)
def test_pure_returns_its_value(evm):
    # run (pure z) z: the result is z itself; 1 + 2 + 1 + (1 + 1 + 1) = 7
    ev = Evaluator(evm=make_evm(evm))
    value, steps = ev.eval(RunEVM(PureEVM(Var("z")), Var("z")), {"z": (2.0, None)})
    assert value == ((2.0, None), (2.0, None))
    assert steps == 7


def test_apply_calls_a_builtin_function_value_on_its_argument():
    # extensions may pass Python callables as function values: (result, steps) as they return
    assert Evaluator().apply(lambda x: (x * 2, 5), 21) == (42, 5)


def _defs(text):
    from chad.api import _defs, load

    return _defs(load(text))


def test_evaluate_uses_its_term_environment_defs_and_evm():
    from chad.terms import Call
    from chad.costmodel.evaluate import evaluate

    defs = _defs("def g(x : R) : R = x")
    # run (pure (g(3.0))) z: 1 + (1 + (1 + 2 + 1)) + 1 + (1 + 1 + 1) = 10
    term = RunEVM(PureEVM(Call("g", (lit(3.0),))), Var("z"))
    assert evaluate(term, {"z": (2.0, None)}, defs=defs, evm=make_evm("array")) == ((3.0, (2.0, None)), 10)
    assert evaluate(Var("z"), {"z": 7.0}) == (7.0, 1)


def test_an_ascription_costs_nothing_extra():
    # the type checker removes `e : T`; its rule, reached directly, is the rule of e
    from chad.terms import Ann, Pair
    from chad.types import Prod, Real

    ev = Evaluator()
    assert ev.eval(Ann(Pair(Var("x"), lit(1.0)), Prod(Real(), Real())), {"x": 4.0}) == ((4.0, 1.0), 4)


SHADOW = "def f(x : R) : R = let y = x in (let y = 3.0 in y) * y"


def test_an_inner_binder_restores_the_shadowed_variable():
    # y is rebound inside the left factor; the right factor reads the outer y again
    assert chad.run(SHADOW, [5.0]) == (15.0, 9)
    r = chad.cost(SHADOW, [5.0])
    assert (r.primal_steps, r.gradient_steps) == (9, 165)
    assert chad.grad(SHADOW)(5.0) == (15.0, (3.0,))


def test_bind_leaves_the_environment_as_it_was():
    ev = Evaluator()
    env = {}
    assert ev.bind(env, "x", 1.0, Var("x")) == (1.0, 1)
    assert env == {}  # a new name is removed again
    env = {"x": 2.0}
    assert ev.bind(env, "x", 1.0, Var("x")) == (1.0, 1)
    assert env == {"x": 2.0}  # a shadowed one is restored
