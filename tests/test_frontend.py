"""The Python front end (chad/frontend/): each decorated function against the
same program written in the text language (values, gradients, and the
interpreter's step counts) and against Python running the function itself."""

from __future__ import annotations

import math

import numpy as np
import pytest

import chad
from chad import Array
from chad.frontend.values import decoder
from tests.fd import fd_gradient

OFFSET = 0.25  # a module-level constant: becomes a literal


@chad.function
def basic(x: float, y: float) -> float:
    return x * y + math.sin(x)


@chad.function
def poly(x: float) -> float:
    return 3 * x ** 2 - 2 * x + 1 + OFFSET


@chad.function
def branchy(x: float, y: float) -> float:
    z = x * y
    if z > 0:
        w = z
    else:
        w = 0.1 * z
    return w + x


@chad.function
def power_sum(x: float, n: int) -> float:
    s = 0.0
    p = 1.0
    for i in range(n):
        p = p * x
        s = s + p
    return s


@chad.function
def dot_sq(a: Array[float], b: Array[float]) -> float:
    c = [a[i] * b[i] for i in range(len(a))]
    return sum(c[i] ** 2 for i in range(len(c)))


@chad.function
def exps(a: Array[float]) -> Array[float]:
    return [math.exp(v) for v in a]


@chad.function
def polar(r: float, t: float) -> tuple[float, float]:
    x, y = r * math.cos(t), r * math.sin(t)
    return x + y, x * y


@chad.function
def sq(x: float) -> float:
    return x * x


@chad.function
def uses(x: float, y: float) -> float:
    scale = lambda v: v * y  # noqa: E731

    def shift(v: float) -> float:
        return v + y
    return sq(scale(x)) + shift(x)


@chad.function
def mixed(x: float, n: int) -> float:
    k = n // 2 + n % 3
    if k > 1 and x > 0 or not (x < -1):
        return max(x, float(k))
    return min(abs(x), 2.0)


@chad.function
def matvec(m: Array[Array[float]], v: Array[float]) -> Array[float]:
    return [sum(m[i][j] * v[j] for j in range(len(v))) for i in range(len(m))]


@chad.function
def triple(p: tuple[float, float, float]) -> float:
    a, b, c = p
    return a * b - c + p[2]


@chad.function
def loop_range2(x: float, lo: int, hi: int) -> float:
    acc = x
    for i in range(lo, hi):
        acc = acc * 0.5 + i
    return acc


@chad.function
def early(x: float) -> float:
    if x < 0.0:
        return -x
    y = x * 2.0
    return y + 1.0


PAIRS = [
    (basic, "def basic(x : R, y : R) : R = x * y + sin x", [(2.0, 3.0), (-1.5, 0.5)]),
    (poly, "def poly(x : R) : R = 3.0 * x ** 2 - 2.0 * x + 1.0 + 0.25", [(1.5,), (-2.0,)]),
    (branchy, "def branchy(x : R, y : R) : R = let z = x * y in "
              "let w = (if z > 0.0 then z else 0.1 * z) in w + x", [(2.0, 3.0), (2.0, -3.0)]),
    (power_sum, r"def power_sum(x : R, n : Z) : R = let s = 0.0 in let p = 1.0 in "
                r"let (k, p, s) = iter n (\t -> let (i, p, s) = t in let p = p * x in "
                r"let s = s + p in (i + 1, p, s)) (0, p, s) in s", [(0.7, 5), (1.3, 0)]),
    (dot_sq, r"def dot_sq(a : Array R, b : Array R) : R = "
             r"let c = build (length a) (\i -> a ! i * b ! i) in "
             r"sum (build (length c) (\j -> c ! j ** 2))",
     [(np.array([1.0, 2.0, -3.0]), np.array([0.5, 0.25, 2.0]))]),
    (exps, r"def exps(a : Array R) : Array R = map (\v -> exp v) a", [(np.array([0.1, -1.0]),)]),
    (polar, "def polar(r : R, t : R) : R * R = let (x, y) = (r * cos t, r * sin t) in "
            "(x + y, x * y)", [(2.0, 0.3)]),
    (uses, "def sq(x : R) : R = x * x\n"
           "def uses(x : R, y : R) : R = sq(let v = x in v * y) + (let v = x in v + y)",
     [(1.5, -0.5)]),
    (mixed, "def mixed(x : R, n : Z) : R = let k = div(n, 2) + mod(n, 3) in "
            "if (if (if k > 1 then x > 0.0 else false) then true else not (x < -1.0)) "
            "then max(x, toreal k) else min(abs x, 2.0)",
     [(1.5, 4), (-2.5, 1), (-0.5, 0), (3.0, 7)]),
    (matvec, r"def matvec(m : Array (Array R), v : Array R) : Array R = "
             r"build (length m) (\i -> sum (build (length v) (\j -> m ! i ! j * v ! j)))",
     [(np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5]]), np.array([2.0, -1.0]))]),
    (triple, "def triple(p : R * R * R) : R = let (a, b, c) = p in a * b - c + snd (snd p)",
     [((1.0, 2.0, 3.0),)]),
    (loop_range2, r"def loop_range2(x : R, lo : Z, hi : Z) : R = let acc = x in "
                  r"let (k, acc) = iter (hi - lo) (\t -> let (i, acc) = t in "
                  r"let acc = acc * 0.5 + toreal i in (i + 1, acc)) (lo, acc) in acc",
     [(3.0, 2, 6), (3.0, 5, 1)]),
    (early, "def early(x : R) : R = if x < 0.0 then -x else let y = x * 2.0 in y + 1.0",
     [(-1.5,), (2.0,)]),
]
IDS = [f.__name__ for f, _t, _a in PAIRS]


def _same(a, b):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, np.ndarray) or isinstance(b, (np.ndarray, list)):
        np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float),
                                   rtol=1e-12, atol=1e-12)
    else:
        assert a == pytest.approx(b, rel=1e-12, abs=1e-12)


def _python_shape(v):
    """A value of the Python function itself, as the decorated call returns it."""
    if isinstance(v, list):
        return np.array([_python_shape(x) for x in v])
    if isinstance(v, tuple):
        return tuple(_python_shape(x) for x in v)
    return v


@pytest.mark.parametrize("f,text,cases", PAIRS, ids=IDS)
def test_value_matches_python_and_text(f, text, cases):
    prog, name = chad.resolve(f)
    tprog, tname = chad.resolve(text)
    assert name == tname
    for args in cases:
        got = f(*args)
        _same(got, _python_shape(f.__wrapped__(*args)))  # Python running it
        # the text program, on the same chad values
        vals = f.encode_args(args)
        decode = decoder(f.result_type)
        _same(got, decode(chad.primal(tprog, tname)(*vals)))
        # the interpreter: the same value and the same number of steps
        v1, s1 = chad.run(prog, vals, name)
        v2, s2 = chad.run(tprog, vals, tname)
        assert s1 == s2
        _same(decode(v1), got)
        _same(decode(v2), got)


@pytest.mark.parametrize("f,text,cases", PAIRS, ids=IDS)
def test_gradients_match_text_and_fd(f, text, cases):
    prog, name = chad.resolve(f)
    tprog, tname = chad.resolve(text)
    d = prog.find(name)
    for args in cases:
        vals = f.encode_args(args)
        ctg = _ones_like(f.result_type, f(*args))
        for backend in ("compiled", "interp"):
            v1, g1 = chad.grad(prog, name, backend=backend)(*vals, ctg=ctg)
            v2, g2 = chad.grad(tprog, tname, backend=backend)(*vals, ctg=ctg)
            for a, b in zip(g1, g2):
                _same_grad(a, b)
        # against central differences of <ctg, f(x)>
        primal = chad.primal(prog, name)
        fd = fd_gradient(lambda a: primal(*a), d.params, vals, ctg, d.result)
        assert fd, "not differentiable at these arguments"
        for (i, path), expected in fd.items():
            got = g1[i]
            for step in path:
                got = got[step]
            assert got == pytest.approx(expected, rel=1e-5, abs=1e-6), (i, path)


def _has_real(ty):
    from chad.types import ArrayT, Prod, Real
    return isinstance(ty, Real) or (isinstance(ty, Prod) and (_has_real(ty.left) or _has_real(
        ty.right))) or (isinstance(ty, ArrayT) and _has_real(ty.elem))


def _ones_like(ty, value):
    from chad.frontend.annotations import TupleT
    from chad.types import ArrayT, R
    if ty == R:
        return 1.0
    if isinstance(ty, TupleT):
        parts = [_ones_like(t, v) for t, v in zip(ty.elems, value)]
        out = parts[-1]
        for p in reversed(parts[:-1]):
            out = (p, out)
        return out
    if isinstance(ty, ArrayT) and ty.elem == R:
        return np.linspace(0.5, 1.5, len(value))
    return None


def _same_grad(a, b):
    if isinstance(a, tuple):
        for x, y in zip(a, b):
            _same_grad(x, y)
    elif a is None or b is None:
        assert a is None and b is None
    else:
        np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float),
                                   rtol=1e-12, atol=1e-12)


def test_to_source_shows_the_program():
    text = chad.to_source(power_sum)
    assert text.startswith("def power_sum(x : R, n : Z) : R =")
    assert "iter n" in text
    # the callee comes first
    src = chad.to_source(uses)
    assert src.index("def sq(") < src.index("def uses(")


def test_module_constant_is_a_literal():
    assert "0.25" in chad.to_source(poly)
    assert poly(1.0) == pytest.approx(poly.__wrapped__(1.0))


def test_call_returns_python_types():
    assert type(basic(2.0, 3.0)) is float
    r = polar(2.0, 0.3)
    assert type(r) is tuple and len(r) == 2
    e = exps(np.array([0.0, 1.0]))
    assert isinstance(e, np.ndarray) and e.dtype == np.float64
    m = matvec(np.eye(2), np.array([1.0, 2.0]))
    assert isinstance(m, np.ndarray)
    # numpy and Python numbers and lists are accepted
    assert basic(np.float64(2.0), 3) == basic(2.0, 3.0)
    assert dot_sq([1.0, 2.0], [3, 4]) == dot_sq(np.array([1.0, 2.0]), np.array([3.0, 4.0]))


@chad.function
def ints_and_bools(n: int, flag: bool) -> tuple[int, bool]:
    m = n * n - 3
    return m % 5, flag and m > 0


@chad.function
def closure_late(x: float) -> float:
    y = 1.0
    f = lambda v: v + y  # noqa: E731  (y is read when f is called)
    y = 2.0
    return f(x)


@chad.function
def lambda_shadow(x: float) -> float:
    g = lambda y: x + y  # noqa: E731
    h = lambda x: g(x * 10.0)  # noqa: E731  (g's x is the outer x)
    return h(1.0)


@chad.function
def chained(x: float, y: float) -> bool:
    return 0.0 < x <= y < 10


@chad.function
def floats_mod(x: float, y: float) -> float:
    return x % y + x // y + int(x) + abs(-3) + max(2, 5, 3) + min(1, -1)


@chad.function
def negative_index(a: Array[float]) -> float:
    return a[-1] - a[0] + len(a)


@chad.function
def aug(x: float) -> float:
    s = 0
    for i in range(4):
        s += i
        s *= 1.5
    return s + x


@chad.function
def nested_loops(x: float, n: int) -> float:
    total = 0.0
    for i in range(n):
        for j in range(i):
            total = total + x * j
    return total


@chad.function
def if_expr_and_unpack(x: float) -> tuple[float, tuple[float, float]]:
    a, (b, c) = x, (x + 1, x - 1)
    s = a if a > b else c
    return s, (b, c)


CASES = [
    (ints_and_bools, [(4, True), (1, True), (3, False)]),
    (closure_late, [(1.0,)]),
    (lambda_shadow, [(0.5,)]),
    (chained, [(1.0, 2.0), (3.0, 2.0), (1.0, 10.0), (-1.0, 2.0)]),
    (floats_mod, [(7.5, 2.0), (-7.5, 2.0), (7.5, -2.0)]),
    (negative_index, [(np.array([1.0, 2.0, 5.0]),)]),
    (aug, [(1.0,)]),
    (nested_loops, [(1.5, 4), (1.5, 0)]),
    (if_expr_and_unpack, [(2.0,)]),
    (early, [(-3.0,), (3.0,)]),
]


@pytest.mark.parametrize("f,cases", CASES, ids=[f.__name__ for f, _c in CASES])
def test_semantics_match_python(f, cases):
    for args in cases:
        got = f(*args)
        want = _python_shape(f.__wrapped__(*args))
        _same(got, want)
        if isinstance(want, (bool, int, float)):  # (a numpy float64 is a float)
            kind = bool if isinstance(want, bool) else int if isinstance(want, int) else float
            assert type(got) is kind


def test_loop_with_int_state_widened_to_float():
    assert aug(1.0) == pytest.approx(aug.__wrapped__(1.0))
    assert "toreal" in chad.to_source(aug) or "0.0" in chad.to_source(aug)


@chad.function
def calls_a_later_def(x: float) -> float:
    return defined_later(x) * 2.0


@chad.function
def defined_later(x: float) -> float:
    return x + 1.0


def test_a_callee_defined_below_is_found_at_first_use():
    assert calls_a_later_def(1.5) == 5.0
    assert chad.to_source(calls_a_later_def).startswith("def defined_later(")


def test_closed_over_constants_become_literals():
    k, w = 3, 0.5

    @chad.function
    def scaled(x: float) -> float:
        return k * x + w

    assert scaled(2.0) == 6.5
    src = chad.to_source(scaled)
    assert "(3.0 * x)" in src and "0.5" in src and "k" not in src.split("=", 1)[1]
