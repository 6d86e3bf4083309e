"""Efficient CHAD on generated first-order programs (docs/cost-model.md): gradients against
finite differences, every EVM against the formalisation's LACM, TH1 and TH2."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from chad.api import cost, grad, make_evm
from chad.linear import phi, size
from chad.proofs.statements import TH1_C, TH2_C, TH2_C1, TH2_C2
from chad.terms import Def, Pair, Param, Prim, Program, Var
from chad.transform.efficient import chad_def, gradient_term
from chad.transform.registry import CTG
from chad.types import R, Prod
from chad.costmodel.evaluate import Evaluator, env_tuple_to_cells
from chad.costmodel.generators import is_finite, programs, sparse_ctgs
from tests.fd import fd_gradient, get, near_sign_tie, real_leaves

EVMS = ["spec", "map", "array", "parallel"]
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def xy_def():
    x, y = Var("x", ty=R), Var("y", ty=R)
    return Def("f", (Param("x", R), Param("y", R)), R,
               Prim("MUL", Pair(x, y, ty=Prod(R, R)), ty=R))


def test_formalisation_numbers_for_x_times_y():
    r = cost(Program((xy_def(),)), [2.0, 3.0], 1.0)
    assert (r.primal_steps, r.gradient_steps) == (4, 84)
    assert r.bound == 5 + 34 * 4 + 1 + 4 * 2 and r.holds


def test_gradient_of_x_times_y():
    value, g = grad(Program((xy_def(),)))(2.0, 3.0)
    assert value == 6.0 and g == (3.0, 2.0)


def _evaluate_def(case, args):
    return Evaluator().eval(case.defn.body, {p.name: a for p, a in zip(case.defn.params, args)})[0]


@SETTINGS
@given(programs(max_depth=4))
def test_gradient_matches_finite_differences(case):
    assume(is_finite(case.value))
    params = case.defn.params
    assume(not near_sign_tie(case.defn.body, dict(zip([p.name for p in params], case.args))))
    fd = fd_gradient(lambda a: _evaluate_def(case, a), params, case.args, case.ctg, case.defn.result)
    assume(fd is not None)
    # A second step size must agree, else we sit on a kink (a sign tie).
    fd2 = fd_gradient(lambda a: _evaluate_def(case, a), params, case.args, case.ctg,
                      case.defn.result, h=1e-4)
    assume(fd2 is not None and all(abs(fd[k] - fd2[k]) < 1e-3 * (1 + abs(fd[k])) for k in fd))
    value, g = grad(case.program, evm="array")(*case.args, ctg=case.ctg)
    for (i, path), expected in fd.items():
        got = get(g[i], path)
        assert math.isclose(got, expected, rel_tol=1e-4, abs_tol=1e-5), (i, path, got, expected)


@SETTINGS
@given(programs(max_depth=4))
def test_every_evm_gives_the_same_gradient_and_steps(case):
    results = {}
    for evm in EVMS:
        r = cost(case.program, list(case.args), case.ctg, evm=evm)
        _, g = grad(case.program, evm=evm)(*case.args, ctg=case.ctg)
        results[evm] = (r.gradient_steps, g)
    assert len({repr(v) for v in results.values()}) == 1, results


@SETTINGS
@given(programs(max_depth=4))
def test_th2_holds(case):
    r = cost(case.program, list(case.args), case.ctg)
    assert r.gradient_steps <= (TH2_C1 + TH2_C * r.primal_steps + size(case.ctg)
                                + TH2_C2 * len(case.defn.params))


@SETTINGS
@given(programs(max_depth=4), st.data())
def test_th1_holds_with_potential(case, data):
    """TH1: crun + ccall + cmonad - φ(ctg) - φ'(denvin) + φ'(denvout) - |Γ| <= 34 cost(t)
    (34: TH1_C of chad/proofs/statements.py),
    for an arbitrary (sparse) incoming environment cotangent denvin."""
    d = case.defn
    env = {p.name: a for p, a in zip(d.params, case.args)}
    primal_cost = Evaluator().eval(d.body, dict(env))[1]
    evm = make_evm("spec")
    ev = Evaluator(evm=evm)
    (_, bp), crun = ev.eval(chad_def(d), dict(env))
    action, ccall = ev.apply(bp, case.ctg)
    denvin = [data.draw(sparse_ctgs(p.ty, a)) for p, a in zip(d.params, case.args)]
    _, denvout, cmonad = evm.run(action, list(denvin))
    lhs = (crun + ccall + cmonad - phi(case.ctg) - sum(map(phi, denvin))
           + sum(map(phi, denvout)) - len(d.params))
    assert lhs <= TH1_C * primal_cost


@SETTINGS
@given(programs(max_depth=3))
def test_gradient_term_cost_is_forward_plus_backward(case):
    """The vjp path (forward, then backward) reports exactly TH2's cost."""
    d = case.defn
    env = {p.name: a for p, a in zip(d.params, case.args)}
    ev = Evaluator(evm=make_evm("array"))
    (_, bp), cf = ev.eval(chad_def(d), dict(env))
    from chad.transform.efficient import backward

    cells, cb = backward(ev, bp, case.ctg, d)
    (_, tup), total = Evaluator(evm=make_evm("array")).eval(gradient_term(d), {**env, CTG: case.ctg})
    assert cf + cb == total
    assert repr(cells) == repr(env_tuple_to_cells(tup))


@pytest.mark.parametrize("evm", EVMS)
def test_sparse_and_materialised_zero_cotangents_are_costed_apart(evm):
    """A null pair cotangent is the formalisation's `nothing`: lfst/lsnd of it
    cost 1 + argument + zerov (the corrected rule), a materialised [0, 0] 1 +
    argument; and its size is 1 rather than 3."""
    from chad.terms import Fst, Snd

    x = Var("x", ty=Prod(R, R))
    body = Pair(Fst(x, ty=R), Snd(x, ty=R), ty=Prod(R, R))
    prog = Program((Def("f", (Param("x", Prod(R, R)),), Prod(R, R), body),))
    sparse = cost(prog, [[1.0, 2.0]], None, evm=evm)
    dense = cost(prog, [[1.0, 2.0]], (0.0, 0.0), evm=evm)
    assert sparse.gradient_steps == dense.gradient_steps + 2
    assert (sparse.ctg_size, dense.ctg_size) == (1, 3)
