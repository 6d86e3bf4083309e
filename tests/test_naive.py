"""Naive CHAD (Efficient CHAD (Smeding & Vákár), Fig. 2 + Fig. 4, chad/transform/naive.py): gradients equal
to the efficient transform's and to finite differences; its step counts grow with
the size of types and contexts where the efficient ones do not (§4, Table 1)."""

from __future__ import annotations

import math

import pytest

from chad.api import cost, grad
from chad.checker import check_program
from chad.terms import (
    Ann, Case, Def, Fst, Inl, Inr, Let, Pair, Param, Prim, Program, Snd, Unit, Var,
)
from chad.transform.naive import SPEC as NAIVE
from chad.transform.naive import dense_type
from chad.transform.naive_terms import (
    DCast, DDensify, DZero, EVOneHot, EVPlus, EVZero, dplus, dzero, ev_to_cells, tsize,
)
from chad.transform.registry import CTG
from chad.linear import LPairT, LSumT, L_R, L_UN
from chad.types import R, UNIT, Z, Prod, Sum
from chad.values import Inj
from chad.costmodel.evaluate import Evaluator
from tests.fd import fd_gradient, get

# ----------------------------------------------------------------- a tiny term builder
# (core terms, typed by the checker; the same programs in surface syntax are in the
# docstrings so they can be read)


def v(name):
    return Var(name)


def lit(c):
    return Prim("LIT", Unit(), float(c))


def ilit(n):
    return Prim("ILIT", Unit(), int(n))


def op(name, *args):
    arg = args[0] if len(args) == 1 else Pair(args[0], args[1])
    return Prim(name, arg)


def add(a, b):
    return op("ADD", a, b)


def mul(a, b):
    return op("MUL", a, b)


def if_(c, a, b):
    return Case(c, "_t", a, "_f", b)


def program(params, result, body) -> Program:
    d = Def("f", tuple(Param(n, t) for n, t in params), result, body)
    return check_program(Program((d,)))


# ----------------------------------------------------------------- the programs

PROGRAMS = {
    # f(x : R, y : R) : R = x * y
    "mul": ([("x", R), ("y", R)], R, mul(v("x"), v("y")), [2.0, 3.0], 1.0),
    # let a = x * y in let b = a + x in b * a + let a = b in a * a   (shadowing)
    "lets": ([("x", R), ("y", R)], R,
             Let("a", mul(v("x"), v("y")), Let("b", add(v("a"), v("x")),
                 add(mul(v("b"), v("a")), Let("a", v("b"), mul(v("a"), v("a")))))),
             [1.5, -0.7], 1.0),
    # let s = (fst p * q, snd p + q) in fst s * snd s + fst p
    "pairs": ([("p", Prod(R, R)), ("q", R)], R,
              Let("s", Pair(mul(Fst(v("p")), v("q")), add(Snd(v("p")), v("q"))),
                  add(mul(Fst(v("s")), Snd(v("s"))), Fst(v("p")))),
              [(0.3, -1.2), 2.5], 1.0),
    # nested pairs, unit and Z components; a pair result with a dense cotangent
    "nested": ([("p", Prod(R, Prod(UNIT, Prod(Z, R)))), ("y", R)], Prod(R, Prod(R, R)),
               Let("z", Snd(Snd(v("p"))),
                   Pair(mul(Fst(v("p")), Snd(v("z"))),
                        Pair(op("TOREAL", Fst(v("z"))), mul(v("y"), Fst(v("p")))))),
               [(1.1, (None, (3, -0.4))), 0.9], [1.0, [-2.0, 0.5]]),
    # case on a sum argument
    "sum_arg": ([("x", Sum(R, Prod(R, R))), ("y", R)], R,
                Case(v("x"), "a", mul(v("a"), v("y")),
                     "b", add(mul(Fst(v("b")), Snd(v("b"))), v("y"))),
                [{"inr": [0.5, -2.0]}, 1.25], 1.0),
    "sum_arg_left": ([("x", Sum(R, Prod(R, R))), ("y", R)], R,
                     Case(v("x"), "a", mul(v("a"), v("y")),
                          "b", add(mul(Fst(v("b")), Snd(v("b"))), v("y"))),
                     [{"inl": 0.5}, 1.25], 1.0),
    # sums built inside: let z = (inl (x * y) : R + R * R) in case z of ...
    "sum_built": ([("x", R), ("y", R)], R,
                  Let("z", Ann(Inl(mul(v("x"), v("y"))), Sum(R, Prod(R, R))),
                      Let("w", Ann(Inr(Pair(v("x"), v("z"))), Sum(UNIT, Prod(R, Sum(R, Prod(R, R))))),
                          Case(v("w"), "u", lit(0.0),
                               "q", Case(Snd(v("q")), "a", mul(mul(v("a"), v("a")), Fst(v("q"))),
                                         "b", Fst(v("b")))))),
                  [0.8, -1.3], 1.0),
    # a sum result: the cotangent is on the value's side, or the sparse zero
    "sum_result": ([("x", R), ("y", R)], Sum(Prod(R, R), R),
                   if_(op("LT", v("x"), v("y")),
                       Ann(Inl(Pair(mul(v("x"), v("y")), v("x"))), Sum(Prod(R, R), R)),
                       Ann(Inr(v("y")), Sum(Prod(R, R), R))),
                   [0.5, 2.0], {"inl": [1.0, 3.0]}),
    "sum_result_sparse_zero": ([("x", R), ("y", R)], Sum(Prod(R, R), R),
                               Ann(Inl(Pair(mul(v("x"), v("y")), v("x"))), Sum(Prod(R, R), R)),
                               [0.5, 2.0], {"inl": None}),
    # case on sign: inl inl negative, inl inr positive, inr zero
    "sign": ([("x", R), ("y", R)], R,
             Case(op("SIGN", v("x")),
                  "s", Case(v("s"), "n", op("NEG", mul(v("x"), v("y"))), "p", mul(v("x"), mul(v("x"), v("y")))),
                  "z", v("y")),
             [-0.6, 1.7], 1.0),
    "sign_pos": ([("x", R), ("y", R)], R,
                 Case(op("SIGN", v("x")),
                      "s", Case(v("s"), "n", op("NEG", mul(v("x"), v("y"))), "p", mul(v("x"), mul(v("x"), v("y")))),
                      "z", v("y")),
                 [0.6, 1.7], 1.0),
    # every real primitive
    "reals": ([("x", R), ("y", R)], R,
              add(add(op("DIV", op("EXP", v("x")), op("SQRT", v("y"))),
                      mul(op("LOG", v("y")), op("SIN", v("x")))),
                  add(op("COS", mul(v("x"), v("y"))),
                      add(op("TANH", op("NEG", v("x"))), lit(3.0)))),
              [0.4, 1.9], 1.0),
    # integer primitives, comparisons on R and Z, literals, TOREAL
    "ints": ([("x", R), ("n", Z)], R,
             Let("m", op("IADD", op("IMUL", v("n"), ilit(3)), op("INEG", ilit(2))),
                 if_(op("ILT", v("m"), ilit(100)),
                     if_(op("LE", v("x"), lit(5.0)),
                         if_(op("GT", v("x"), lit(-5.0)),
                             if_(op("GE", v("x"), v("x")),
                                 if_(op("EQ", v("x"), lit(7.0)), lit(0.0),
                                     mul(op("TOREAL", v("m")), mul(v("x"), v("x")))),
                                 lit(1.0)),
                             lit(2.0)),
                         lit(3.0)),
                     if_(op("IGT", v("m"), v("n")), lit(4.0),
                         if_(op("ILE", v("m"), v("n")), lit(5.0),
                             if_(op("IGE", v("m"), v("n")), lit(6.0),
                                 if_(op("IEQ", v("m"), v("n")), lit(7.0), v("x"))))))),
             [1.3, 4], 1.0),
    # an unused parameter of a big type and a unit parameter
    "unused": ([("a", Prod(R, Prod(R, R))), ("u", UNIT), ("x", R)], R,
               mul(v("x"), v("x")), [(1.0, (2.0, 3.0)), None, 3.0], 1.0),
    # a bare variable of pair type as the result, sparse (null) cotangent parts
    "identity_pair": ([("p", Prod(R, Prod(R, R)))], Prod(R, Prod(R, R)),
                      v("p"), [(1.0, (2.0, 3.0))], [2.0, None]),
}


def _load(name):
    params, result, body, args, ctg = PROGRAMS[name]
    return program(params, result, body), args, ctg


def _close(a, b, tol=1e-9):
    """Dense cotangents equal up to rounding (floats, tuples, Inj, None)."""
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=tol, abs_tol=tol)
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(_close(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, Inj):
        return isinstance(b, Inj) and a.side == b.side and _close(a.value, b.value, tol)
    return a == b


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_naive_gradient_equals_efficient(name):
    prog, args, ctg = _load(name)
    value_n, g_n = grad(prog, transform="naive")(*args, ctg=ctg)
    value_e, g_e = grad(prog, transform="efficient")(*args, ctg=ctg)
    assert value_n == value_e
    assert _close(g_n, g_e), (g_n, g_e)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_naive_gradient_matches_finite_differences(name):
    from chad.api import decode_args
    from chad.cotangents import ctg_from_json

    prog, args, ctg = _load(name)
    d = prog.defs[-1]
    env = decode_args(d, args)
    vals = [env[p.name] for p in d.params]

    def f(a):
        return Evaluator().eval(d.body, {p.name: x for p, x in zip(d.params, a)})[0]

    ct = ctg_from_json(d.result, ctg, "ctg", f(vals))
    fd = fd_gradient(f, d.params, vals, ct, d.result)
    assert fd is not None
    _, g = grad(prog, transform="naive")(*args, ctg=ctg)
    for (i, path), expected in fd.items():
        got = get(g[i], path)
        assert math.isclose(got, expected, rel_tol=1e-5, abs_tol=1e-6), (i, path, got, expected)


def _forward_backward(prog, args, ctg):
    """(cells, forward steps, backward steps) via the SPEC's two halves."""
    from chad.api import decode_args
    from chad.cotangents import ctg_from_json

    d = prog.defs[-1]
    env = decode_args(d, args)
    ev = Evaluator({dd.name: dd for dd in prog.defs})
    (value, bp), cf = ev.eval(NAIVE.forward_term(d), dict(env))
    ct = ctg_from_json(d.result, ctg, "ctg", value)
    cells, cb = NAIVE.backward(ev, bp, ct, d)
    return env, ct, cells, cf, cb


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_gradient_term_costs_forward_plus_backward(name):
    prog, args, ctg = _load(name)
    d = prog.defs[-1]
    env, ct, cells, cf, cb = _forward_backward(prog, args, ctg)
    evv, steps = Evaluator().eval(NAIVE.gradient_term(d), {**env, CTG: ct})
    assert steps == cf + cb
    assert ev_to_cells(evv) == cells
    assert cost(prog, args, ctg, transform="naive").gradient_steps == steps


# ----------------------------------------------------------------- the dense operations


def test_dense_zero_and_plus_cost_the_size_of_the_type():
    lt = dense_type(Prod(R, Prod(UNIT, Prod(R, Sum(R, R)))))
    z, c = dzero(lt)
    assert z == (0.0, (None, (0.0, None)))
    assert c == tsize(lt) == 7
    s, cs = dplus(lt, (1.0, (None, (2.0, Inj(1, 3.0)))), (4.0, (None, (5.0, None))))
    assert s == (5.0, (None, (7.0, Inj(1, 3.0))))
    # 3 pair nodes + R + () + R + the sum (1 + cast of the zero: 1 + 1 + inner R plus: 1)
    assert cs == 3 + 1 + 1 + 1 + (1 + 2 + 1)
    assert dplus(lt, z, z)[1] == 7  # adding zeros is not free either


def test_environment_operations():
    lts = (L_R, LPairT(L_R, L_R), L_UN)
    ev = Evaluator()
    z, cz = ev.eval(EVZero(lts), {})
    assert ev_to_cells(z) == [0.0, (0.0, 0.0), None] and cz == 1 + (1 + 1) + (1 + 3) + (1 + 1)
    o, co = ev.eval(EVOneHot(lts, 1, "p", Var("d")), {"d": (1.0, 2.0)})
    assert ev_to_cells(o) == [0.0, (1.0, 2.0), None] and co == 1 + 1 + 3 + 1 + 1
    s, cs = ev.eval(EVPlus(lts, EVOneHot(lts, 0, "x", Var("a")), EVOneHot(lts, 1, "p", Var("d"))),
                    {"a": 5.0, "d": (1.0, 2.0)})
    assert ev_to_cells(s) == [5.0, (1.0, 2.0), None]
    # node + one-hot at 0 (node, var, 3 cells, zeros (0, 0) and ()) + co
    # + 3 cells + the cell additions (R: 1, pair: 3, (): 1)
    assert cs == 1 + (1 + 1 + 3 + (3 + 1)) + co + 3 + (1 + 3 + 1)


def test_densify_and_cast():
    ev = Evaluator()
    lt = LPairT(L_R, LPairT(LSumT(L_R, LPairT(L_R, L_R)), L_R))
    r, c = ev.eval(DDensify(lt, Var("c")), {"c": (2.0, None)})
    assert r == (2.0, (None, 0.0)) and c == 1 + 1 + 1 + 3
    r, c = ev.eval(DCast(1, LPairT(L_R, L_R), Var("c")), {"c": None})
    assert r == (0.0, 0.0) and c == 1 + 1 + 3
    r, c = ev.eval(DCast(1, LPairT(L_R, L_R), Var("c")), {"c": Inj(1, (1.0, 2.0))})
    assert r == (1.0, 2.0) and c == 2
    assert ev.eval(DZero(lt), {})[1] == tsize(lt) == 5  # the sum zero is one node


def test_show_prints_the_dense_operations():
    from chad.target_printer import show_term

    prog, _, _ = _load("sum_built")
    text = show_term(NAIVE.gradient_term(prog.defs[-1]))
    for word in ("onehot[", "+ev[", "split", "dcastl", "densify", "dzero", "evzero["):
        assert word in text, word
    assert "<" not in text  # every node has a printer (unknown ones print as <Name>)


def test_unsupported_forms_are_usage_errors():
    from chad.errors import UsageError
    from chad.types import ArrayT

    d = Def("f", (Param("a", ArrayT(R)),), R, Var("a", ty=ArrayT(R)))
    with pytest.raises(UsageError):
        NAIVE.forward_term(d)


# ----------------------------------------------------------------- §4: op(fst x, ..., fst x)


def nested_type(k: int):
    """R * (R * (... * R)) with k reals."""
    t = R
    for _ in range(k - 1):
        t = Prod(R, t)
    return t


def nested_value(k: int):
    val = float(k)
    for i in range(k - 1, 0, -1):
        val = (float(i), val)
    return val


def fst_family(k: int, m: int) -> Program:
    """f(x : R * (R * ...)) : R = fst x + fst x + ... + fst x   (m uses, k reals)."""
    body = Fst(v("x"))
    for _ in range(m - 1):
        body = add(body, Fst(v("x")))
    return program([("x", nested_type(k))], R, body)


def family_steps(k: int, m: int, transform: str) -> int:
    return cost(fst_family(k, m), [nested_value(k)], 1.0, transform=transform).gradient_steps


def test_fst_family_gradient():
    for transform in ("naive", "efficient"):
        _, (g,) = grad(fst_family(5, 4), transform=transform)(nested_value(5))
        assert g == (4.0, (0.0, (0.0, (0.0, 0.0))))


def test_fst_family_naive_grows_with_the_type_efficient_does_not():
    m = 4
    naive = {k: family_steps(k, m, "naive") for k in (8, 64)}
    eff = {k: family_steps(k, m, "efficient") for k in (8, 64)}
    assert eff[64] == eff[8]
    # each of the m fst's builds a dense zero of the k-1 tail (2k - 3 nodes) and each
    # of the m - 1 additions of the x cells walks the whole pair (2k - 1 nodes)
    assert naive[64] - naive[8] >= (2 * m + 2 * (m - 1)) * 56
    # linear in k: the same growth again from 64 to 120
    assert family_steps(120, m, "naive") - naive[64] == naive[64] - naive[8]


def test_fst_family_is_linear_in_uses_for_both_but_naive_with_slope_k():
    k = 32
    n = [family_steps(k, m, "naive") for m in (2, 4, 8)]
    e = [family_steps(k, m, "efficient") for m in (2, 4, 8)]
    assert e[2] - e[1] == 2 * (e[1] - e[0])  # efficient: constant per use
    assert n[2] - n[1] == 2 * (n[1] - n[0])  # naive: also linear in m ...
    assert (n[1] - n[0]) > 4 * k * 2 - 10    # ... but each use costs O(k)


# ----------------------------------------------------------------- environment size


def let_chain(n: int) -> Program:
    """f(x : R) : R = let x1 = x * x in let x2 = x1 * x in ... in xn."""
    body = v(f"x{n}")
    for i in range(n, 0, -1):
        prev = "x" if i == 1 else f"x{i - 1}"
        body = Let(f"x{i}", mul(v(prev), v("x")), body)
    return program([("x", R)], R, body)


def test_let_chain_naive_is_quadratic_in_the_context():
    def steps(n, t):
        return cost(let_chain(n), [1.01], 1.0, transform=t).gradient_steps

    e = [steps(n, "efficient") for n in (10, 20, 40)]
    nv = [steps(n, "naive") for n in (10, 20, 40)]
    assert e[2] - e[1] == 2 * (e[1] - e[0])  # efficient: linear in n
    # naive: the second difference is positive (quadratic in n: EV of size |G| per node)
    assert (nv[2] - nv[1]) > 3 * (nv[1] - nv[0])
    _, (g_n,) = grad(let_chain(10), transform="naive")(1.01)
    _, (g_e,) = grad(let_chain(10), transform="efficient")(1.01)
    assert math.isclose(g_n, g_e) and math.isclose(g_n, 11 * 1.01 ** 10)


def test_surface_syntax():
    text = "def f(x : R * (R * R), y : R) : R = let a = fst x * y in a + fst x + snd (snd x)\n"
    for t in ("naive", "efficient"):
        _, g = grad(text, transform=t)(((1.0, (2.0, 3.0))), 4.0)
        assert g == ((5.0, (0.0, 1.0)), 1.0)


# ----------------------------------------------------------------- generated programs

try:
    from hypothesis import HealthCheck, given, settings

    from chad.costmodel.generators import programs as _programs
except ImportError:  # pragma: no cover - the generators are optional here
    _programs = None


if _programs is not None:

    @settings(max_examples=40, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(_programs(max_depth=4))
    def test_generated_programs_naive_equals_efficient(case):
        args, ctg = list(case.args), case.ctg
        try:
            _, g_e = grad(case.program, transform="efficient")(*args, ctg=ctg)
        except Exception as e:  # a runtime error of the program itself: same for naive
            with pytest.raises(type(e)):
                grad(case.program, transform="naive")(*args, ctg=ctg)
            return
        _, g_n = grad(case.program, transform="naive")(*args, ctg=ctg)
        assert _close(g_n, g_e, 1e-9) or repr(g_n) == repr(g_e), (g_n, g_e)
        d = case.defn
        ev = Evaluator()
        env = {p.name: a for p, a in zip(d.params, args)}
        (value, bp), cf = ev.eval(NAIVE.forward_term(d), dict(env))
        cells, cb = NAIVE.backward(ev, bp, ctg, d)
        _, steps = Evaluator().eval(NAIVE.gradient_term(d), {**env, CTG: ctg})
        assert steps == cf + cb
