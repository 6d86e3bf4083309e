"""Forward mode (chad/transform/forward.py, chad/forward_api.py;
docs/forward-mode.md): jvp against central finite differences and against the
reverse mode (the duality <vjp(ct), t> = <ct, jvp(t)>) on generated programs of
every feature, jacfwd against a Jacobian assembled from chad.vjp rows, tangents
of integers, and bad tangents."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import chad
import chad.values
from chad.costmodel.generators import chains, programs
from chad.errors import UsageError
from chad.forward_api import hessian, jacfwd, jvp, jvp_cost
from chad.tangents import discrete
from chad.types import ArrayT, Int, Prod, R, Real, Sum
from chad.values import Inj
from tests.fd import fd_gradient

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))

FEATURES = {
    "first-order": {},
    "arrays": {"arrays": True},
    "functions": {"functions": True},
    "loops": {"loops": True},
    "all": {"arrays": True, "functions": True, "loops": True},
}


# ----------------------------------------------------------------- helpers


def random_tangent(ty, value, rng):
    """A tangent of the value's shape (None where no real occurs)."""
    if discrete(ty):
        return None
    match ty:
        case Real():
            return float(rng.normal())
        case Prod(a, b):
            return (random_tangent(a, value[0], rng), random_tangent(b, value[1], rng))
        case Sum(a, b):
            side = value.side
            return Inj(side, random_tangent(a if side == 0 else b, value.value, rng))
        case ArrayT(e):
            return [random_tangent(e, value[i], rng) for i in range(len(value))]
    raise TypeError(ty)


def random_cotangent(ty, value, rng):
    """A dense cotangent of the value's shape (JSON form: a sum as {"inl": ...})."""
    if discrete(ty):
        return None
    match ty:
        case Real():
            return float(rng.normal())
        case Prod(a, b):
            return [random_cotangent(a, value[0], rng), random_cotangent(b, value[1], rng)]
        case Sum(a, b):
            side = value.side
            return {("inl", "inr")[side]: random_cotangent(a if side == 0 else b, value.value,
                                                           rng)}
        case ArrayT(e):
            return [random_cotangent(e, value[i], rng) for i in range(len(value))]
    raise TypeError(ty)


def as_inj(ty, ct):
    """The JSON form of a cotangent with its sums as Inj (for tests.fd.pair_with)."""
    if ct is None or discrete(ty):
        return None
    match ty:
        case Prod(a, b):
            return (as_inj(a, ct[0]), as_inj(b, ct[1]))
        case Sum(a, b):
            key = next(iter(ct))
            side = 0 if key == "inl" else 1
            return Inj(side, as_inj(a if side == 0 else b, ct[key]))
        case ArrayT(e):
            return [as_inj(e, c) for c in ct]
    return ct


def inner(ty, ct, t) -> float:
    """<ct, t>: a (sparse or dense) cotangent against a tangent of the same value."""
    if ct is None or t is None or discrete(ty):
        return 0.0
    match ty:
        case Real():
            return float(ct) * float(t)
        case Prod(a, b):
            return inner(a, ct[0], t[0]) + inner(b, ct[1], t[1])
        case Sum(a, b):
            assert ct.side == t.side
            return inner(a if t.side == 0 else b, ct.value, t.value)
        case ArrayT(e):
            assert len(ct) == len(t)
            return sum(inner(e, c, x) for c, x in zip(ct, t))
    return 0.0


def same(x, y) -> bool:
    """Equal values, reals to 1e-12 relative (the simplifier may reorder a sum)."""
    if isinstance(x, Inj) or isinstance(y, Inj):
        return type(x) is type(y) and x.side == y.side and same(x.value, y.value)
    if isinstance(x, (tuple, list, np.ndarray)):
        return len(x) == len(y) and all(same(a, b) for a, b in zip(x, y))
    if isinstance(x, float) or isinstance(y, float):
        return x == pytest.approx(y, rel=1e-12, abs=1e-300, nan_ok=True)
    return x == y


def leaf(t, path):
    for p in path:
        t = t.value if p == "inj" else t[p]
    return t


def directional_fd(case, ct, tangents):
    """<ct, J t> by central differences (None where the program has a kink)."""
    d = case.defn
    fd = fd_gradient(lambda a: chad.run(case.program, a)[0], d.params, list(case.args),
                     ct, d.result)
    if fd is None:
        return None
    return sum(g * float(leaf(tangents[i], path)) for (i, path), g in fd.items())


def _scale(x):
    return 1.0 + abs(x)


# ----------------------------------------------------------------- generated programs


def strategy(feature: str):
    """Generated programs of the feature: random ones (of any result type, and of
    result R, whose derivative is more often nonzero) and chains of constructs
    (chad/costmodel/generators.py, the programs of `chad check`)."""
    kw = FEATURES[feature]
    options = [programs(max_depth=5, finite=True, **kw),
               programs(max_depth=5, finite=True, result=R, **kw)]
    if not kw.get("loops") or kw.get("arrays"):
        options.append(chains(16, arrays=kw.get("arrays", False),
                              functions=kw.get("functions", False)))
    return st.one_of(*options)


@pytest.mark.parametrize("feature", list(FEATURES))
@SETTINGS
@given(data=st.data())
def test_jvp_matches_finite_differences_and_vjp(feature, data):
    case = data.draw(strategy(feature))
    d = case.defn
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    tangents = [random_tangent(p.ty, a, rng) for p, a in zip(d.params, case.args)]
    value, tout = jvp(case.program, None, list(case.args), tangents, backend="interp")
    # the value is the primal's
    assert repr(value) == repr(chad.run(case.program, list(case.args))[0])
    # the compiled backend (simplified, generated Python) gives the same
    cvalue, ctout = jvp(case.program, None, list(case.args), tangents)
    assert same(cvalue, value) and same(ctout, tout)
    ct = as_inj(d.result, random_cotangent(d.result, value, rng))
    lhs = inner(d.result, ct, tout)
    # duality with the reverse mode: <vjp(ct), t> = <ct, jvp(t)>
    _v, back = chad.vjp(case.program, backend="interp")(*case.args)
    grads = back(ct)
    rhs = sum(inner(p.ty, g, t) for p, g, t in zip(d.params, grads, tangents))
    if np.isfinite(lhs) and np.isfinite(rhs):
        assert lhs == pytest.approx(rhs, rel=1e-7, abs=1e-7 * _scale(rhs))
    # finite differences, where the program is smooth at the arguments
    fd = directional_fd(case, ct, tangents)
    assume(fd is not None and np.isfinite(fd) and np.isfinite(lhs))
    assert lhs == pytest.approx(fd, rel=1e-3, abs=1e-3 * _scale(fd))


@pytest.mark.parametrize("feature", ["first-order", "all"])
@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_forward_cost_is_a_constant_times_the_primal(feature, data):
    """The steps of the jvp stay within the bound that `chad check --mode forward`
    checks (its default constants), on each generated program."""
    from chad.costmodel.forward_check import DEFAULT

    case = data.draw(programs(max_depth=4, **FEATURES[feature]))
    d = case.defn
    rng = np.random.default_rng(0)
    tangents = [random_tangent(p.ty, a, rng) for p, a in zip(d.params, case.args)]
    c = jvp_cost(case.program, None, list(case.args), tangents)
    assert c.jvp_steps <= DEFAULT.c * c.primal_steps + DEFAULT.c1, c


# ----------------------------------------------------------------- examples


MLP = """
def layer(w : Array R, x : Array R) : R = tanh (sum (build (length x) (\\i -> w ! i * x ! i)))
def f(w : Array R, x : Array R, b : R) : Array R =
  build 3 (\\j -> layer(map (\\v -> v * toreal (j + 1)) w, x) + b * toreal j)
"""

EXAMPLES = [
    ("def f(x : R, y : R) : R = x * y + sin x", [2.0, 3.0]),
    ("def f(a : Array R) : Array R = map (\\x -> x * x + exp x) a", [[0.5, -1.0, 2.0]]),
    ("def f(a : Array R, x : R) : R = fold (\\p -> fst p * snd p) (map (\\y -> y + x) a)",
     [[0.5, -1.5, 2.0, 1.25], 0.3]),
    ("def f(x : R, n : Z) : Array R = scan (\\p -> let (h, e) = p in h * e + x) x "
     "(build n (\\i -> toreal i))", [0.7, 4]),
    ("def f(x : R, a : Array R) : Array R = iter 3 (\\v -> map (\\y -> sin (y * x)) v) a",
     [1.3, [0.1, 0.2]]),
    (MLP, [[0.1, -0.2, 0.3], [1.0, 2.0, -1.0], 0.5]),
]


def jacrev(program, args, argnum):
    """The Jacobian from the reverse mode: one chad.vjp row per output element."""
    value, back = chad.vjp(program, backend="interp")(*args)
    if isinstance(value, float):
        return np.asarray(back(1.0)[argnum], dtype=float)
    rows = []
    for k in range(len(value)):
        ct = [0.0] * len(value)
        ct[k] = 1.0
        rows.append(np.asarray(back(ct)[argnum], dtype=float))
    return np.stack(rows)


@pytest.mark.parametrize("program,args", EXAMPLES)
def test_jacfwd_equals_jacrev(program, args):
    d = chad.load(program).find(None)
    for k, p in enumerate(d.params):
        if isinstance(p.ty, Int):
            continue
        jf = jacfwd(program, None, k)(*args)
        jr = jacrev(program, args, k)
        assert jf.shape == jr.shape
        np.testing.assert_allclose(jf, jr, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("program,args", EXAMPLES)
def test_jvp_of_examples_matches_finite_differences(program, args):
    prog = chad.load(program)
    d = prog.find(None)
    values = [chad.values.value_from_json(p.ty, a) for p, a in zip(d.params, args)]
    rng = np.random.default_rng(7)
    tangents = [random_tangent(p.ty, v, rng) for p, v in zip(d.params, values)]
    value, tout = jvp(prog, None, args, tangents)
    ct = as_inj(d.result, random_cotangent(d.result, value, rng))
    case = type("Case", (), {"defn": d, "program": prog, "args": values})
    fd = directional_fd(case, ct, tangents)
    assert fd is not None
    assert inner(d.result, ct, tout) == pytest.approx(fd, rel=1e-5, abs=1e-7)


def test_jacfwd_against_finite_differences_and_argnums_tuple():
    f = chad.primal(MLP, backend="interp")
    args = [np.array([0.1, -0.2, 0.3]), np.array([1.0, 2.0, -1.0]), 0.5]
    jw, jb = jacfwd(MLP, None, (0, 2))(*args)
    assert jw.shape == (3, 3) and jb.shape == (3,)
    h = 1e-6
    for i in range(3):
        up, down = [a.copy() if isinstance(a, np.ndarray) else a for a in args], list(args)
        up[0] = args[0].copy()
        up[0][i] += h
        down[0] = args[0].copy()
        down[0][i] -= h
        np.testing.assert_allclose(jw[:, i], (f(*up) - f(*down)) / (2 * h), rtol=1e-5)
    np.testing.assert_allclose(jb, [0.0, 1.0, 2.0], rtol=1e-9)
    scalar = jacfwd("def f(x : R) : R = x * x * x", None)(2.0)
    assert scalar.shape == () and float(scalar) == pytest.approx(12.0)


def test_jvp_of_calls_and_closures():
    prog = """
    def g(y : R, k : Z) : R = y ** k
    def f(x : R, w : R) : R =
      let h = \\(z : R) -> w * z + g(z, 2) in
      let k = \\(z : R) -> h (h z) in
      k x + k w
    """
    value, t = jvp(prog, None, [0.3, 1.2], [1.0, -2.0])
    f = chad.primal(prog, backend="interp")
    h = 1e-6
    fd = (f(0.3 + h, 1.2 - 2 * h) - f(0.3 - h, 1.2 + 2 * h)) / (2 * h)
    assert value == pytest.approx(f(0.3, 1.2))
    assert t == pytest.approx(fd, rel=1e-6)


def test_tangents_of_integers_sums_and_pairs():
    prog = ("def f(n : Z, p : R * Z, s : R + Z, b : Bool) : (R * Z) + R = "
            "case s of { inl x -> inl (x * fst p, n + snd p) | inr k -> inr (toreal k) }")
    v, t = jvp(prog, None, [3, (2.0, 4), Inj(0, 1.5), True],
               [None, (1.0, None), Inj(0, 2.0), None])
    assert v == Inj(0, (3.0, 7))
    assert t == Inj(0, (1.0 * 1.5 + 2.0 * 2.0, None))
    v, t = jvp(prog, None, [3, (2.0, 4), {"inr": 5}, False], [None, [0.0, None], None, None])
    assert v == Inj(1, 5.0) and t == Inj(1, 0.0)
    # an integer result has the tangent None
    assert jvp("def f(x : R) : Z = floor x", None, [2.5], [1.0]) == (2, None)


@pytest.mark.parametrize("tangents,message", [
    ([1.0], "tangents: f takes 2 argument"),
    ([1.0, [1.0]], "tangents[1]: expected 2 tangent(s)"),
    ([1.0, np.ones((2, 2))], "tangents[1]: expected a 1-D array"),
    (["x", [1.0, 2.0]], "tangents[0]: expected a real tangent"),
    ([None, [1.0, 2.0]], "tangents[0]: expected a real tangent"),
    ([1.0, [1.0, 2.0], 3], "tangents: f takes 2"),
])
def test_bad_tangents_are_usage_errors(tangents, message):
    with pytest.raises(UsageError) as e:
        jvp("def f(x : R, a : Array R) : R = x * sum a", None, [1.0, [1.0, 2.0]], tangents)
    assert message in str(e.value)


def test_bad_tangents_of_integers_and_sums():
    with pytest.raises(UsageError, match=r"tangents\[0\]: the tangent of a value of type Z"):
        jvp("def f(n : Z, x : R) : R = toreal n * x", None, [2, 1.0], [1.0, 1.0])
    with pytest.raises(UsageError, match="a tangent stays on the value's side"):
        jvp("def f(s : R + R) : R = case s of { inl x -> x | inr y -> y }", None,
            [Inj(0, 1.0)], [Inj(1, 1.0)])
    with pytest.raises(UsageError, match="jacfwd supports R and Array R"):
        jacfwd("def f(x : R) : R * R = (x, x)", None)(1.0)
    with pytest.raises(UsageError, match="argnums"):
        jacfwd("def f(x : R) : R = x", None, 1)


def test_jvp_cost_counts_both():
    c = jvp_cost("def f(x : R, y : R) : R = x * y", None, [2.0, 3.0], [1.0, 0.0])
    assert c.primal_steps == chad.run("def f(x : R, y : R) : R = x * y", [2.0, 3.0])[1]
    assert c.jvp_steps > c.primal_steps


# every primitive with a real result and a real argument, in surface syntax
SURFACE = {
    "ADD": "x + y", "MUL": "x * y", "DIV": "x / y", "POW": "x ** y", "POWI": "x ** 3",
    "MAX": "max(x, y)", "MIN": "min(x, y)", "NEG": "-x", "EXP": "exp x", "LOG": "log x",
    "SIN": "sin x", "COS": "cos x", "TANH": "tanh x", "SQRT": "sqrt x", "ABS": "abs x",
    "ATAN": "atan x", "LOG1P": "log1p x", "SUM": "sum [x, y, x * y]",
}


def test_every_real_primitive_against_vjp_and_finite_differences():
    """Each primitive's tangent (chad/primitives.py) against its transposed
    derivative and central differences, at points away from kinks; the table
    must name every primitive from reals to a real."""
    from chad.primitives import PRIMITIVES, zero_tangent

    real_prims = {n for n, p in PRIMITIVES.items()
                  if p.tangent not in (None, zero_tangent) and p.res == R
                  and not discrete(p.arg) and p.derivative is not None}
    assert real_prims <= set(SURFACE), sorted(real_prims - set(SURFACE))
    for op, expr in SURFACE.items():
        prog = f"def f(x : R, y : R) : R = {expr}"
        for x, y in [(0.7, 1.3), (1.9, 0.4), (2.5, -1.5)]:
            value, t = jvp(prog, None, [x, y], [0.6, -0.8])
            _v, back = chad.vjp(prog, backend="interp")(x, y)
            gx, gy = back(1.0)
            assert t == pytest.approx(0.6 * gx - 0.8 * gy, rel=1e-12, abs=1e-12), op
            f = chad.primal(prog, backend="interp")
            h = 1e-6
            fd = (f(x + 0.6 * h, y - 0.8 * h) - f(x - 0.6 * h, y + 0.8 * h)) / (2 * h)
            assert t == pytest.approx(fd, rel=1e-5, abs=1e-6), (op, x, y)


# ----------------------------------------------------------------- Hessian (forward over forward)


HESSIAN_PROGRAM = """
def g(y : R, w : R) : R = y * y * w
def f(a : Array R, x : R) : R =
  let s = scan (\\p -> let (h, e) = p in tanh (h * e + x)) 0.5 a in
  let k = \\(z : R) -> g(z, x) + sin z in
  fold (\\p -> fst p + snd p) (iter 2 (\\v -> map (\\z -> k z * x) v) s)
    + sum (build (length a) (\\i -> a ! i * a ! (length a - 1 - i)))
    + (if x < 1.0 then x ** 3 else exp x) / (1.0 + max(x, 0.2) * abs x)
"""


def grad_fd_jacobian(program, args, argnum, h=1e-5):
    """The Hessian by central differences of the reverse gradient (chad.grad)."""
    g = chad.grad(program, backend="interp")
    x = args[argnum]
    if isinstance(x, float):
        up, down = list(args), list(args)
        up[argnum], down[argnum] = x + h, x - h
        return np.asarray((g(*up)[1][argnum] - g(*down)[1][argnum]) / (2 * h))
    cols = []
    for j in range(len(x)):
        up, down = list(args), list(args)
        up[argnum], down[argnum] = x.copy(), x.copy()
        up[argnum][j] += h
        down[argnum][j] -= h
        cols.append((np.asarray(g(*up)[1][argnum]) - np.asarray(g(*down)[1][argnum])) / (2 * h))
    return np.stack(cols, axis=-1)


@pytest.mark.parametrize("backend", ["interp", "compiled"])
def test_hessian_against_finite_differences_of_the_gradient(backend):
    args = [np.array([0.3, -0.5, 0.8]), 0.4]
    for k in (0, 1):
        hf = hessian(HESSIAN_PROGRAM, None, k, backend=backend)(*args)
        fd = grad_fd_jacobian(HESSIAN_PROGRAM, args, k)
        assert hf.shape == fd.shape == ((3, 3) if k == 0 else ())
        np.testing.assert_allclose(hf, fd, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(hf, np.transpose(hf), rtol=1e-12, atol=1e-12)


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(case=st.one_of(chains(6, arrays=True, functions=True),
                      programs(max_depth=4, finite=True, result=R, arrays=True,
                               functions=True, loops=True)))
def test_hessian_of_generated_programs(case):
    """On generated programs with a real result: the Hessian with respect to each
    real parameter (arrays of at most 4 elements: n² runs) against central
    differences of the reverse gradient, where the program is smooth (two step
    sizes agree)."""
    d = case.defn
    assume(isinstance(d.result, Real))
    args = [np.array(a, dtype=float) if isinstance(p.ty, ArrayT) and isinstance(p.ty.elem, Real)
            else a for p, a in zip(d.params, case.args)]
    for k, p in enumerate(d.params):
        if not (isinstance(p.ty, Real) or (isinstance(p.ty, ArrayT) and
                                            isinstance(p.ty.elem, Real) and len(args[k]) <= 4)):
            continue
        hf = hessian(case.program, None, k, backend="interp")(*args)
        h = 1e-4
        fd1 = grad_fd_jacobian(case.program, args, k, h)
        fd2 = grad_fd_jacobian(case.program, args, k, h / 2)
        if not np.allclose(fd1, fd2, rtol=1e-3, atol=1e-5):  # a kink near the point
            continue
        np.testing.assert_allclose(hf, fd2, rtol=1e-3, atol=1e-4)


def test_hessian_usage_errors():
    with pytest.raises(UsageError, match="hessian supports a result of type R"):
        hessian("def f(x : R) : R * R = (x, x)", None)
    with pytest.raises(UsageError, match="argnums"):
        hessian("def f(x : R) : R = x", None, 2)
    with pytest.raises(UsageError, match="supports R and Array R"):
        hessian("def f(n : Z, x : R) : R = x", None, 0)(1, 2.0)


# a case whose two branches both make the right injection of a literal: its
# left branch never runs, but the simplified tangent there projects a literal
DEAD_BRANCH = [
    "def f(x : R) : R = let s = if x > 0.0 then (inr 2.0 : R * R + R) else "
    "(inr 0.5 : R * R + R) in case s of { inl p -> fst p * x | inr y -> y * x }",
    "def f(x : R) : R = let s = if x > 0.0 then (inr 2.0 : R * R + R) else "
    "(inr 0.5 : R * R + R) in case s of { inl p -> snd p | inr y -> y }",
]


@pytest.mark.parametrize("text", DEAD_BRANCH)
@pytest.mark.filterwarnings("error::SyntaxWarning")
@pytest.mark.parametrize("x", [1.5, -2.0])
def test_a_projected_literal_in_a_dead_branch_compiles(text, x):
    """The generated code never subscripts a literal (`0.0[0]`, `None[1]`:
    Python's SyntaxWarning, an internal compiler error under -W error)."""
    want = jvp(text, None, [x], [1.0], backend="interp")
    assert jvp(text, None, [x], [1.0]) == want
    assert chad.grad(text)(x) == chad.grad(text, backend="interp")(x)
