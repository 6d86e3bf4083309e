"""chad/compile/fusion.py and kernels.fuse: a batched block's arithmetic in one
pass. The C loop against numpy's operators one after the other (the
expression as the generator wrote it), bit for bit: NaNs of both signs,
infinities, signed zeros, broadcasting, reversed, transposed and strided
views. Where two NaNs meet in one operation IEEE leaves open which of them is
the result (docs/compiler.md, "Values"), so a NaN is compared as a NaN."""

from __future__ import annotations

import math

import numpy as np
import pytest

import chad
from chad.compile import backend, kernels
from chad.compile.fusion import MAX_LEAVES, evaluate, fused

SPECIAL = [0.0, -0.0, math.nan, -math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324, 1.0]


@pytest.fixture
def impl(kernels_impl):
    return kernels_impl


def _code_and_leaves(call: str, env: dict):
    """The code and the leaves' values of a `_vfuse(...)` call."""
    assert call.startswith("_vfuse(b'")
    head, _, rest = call[len("_vfuse("):-1].partition(", ")
    return eval(head), eval(f"({rest},)", {"_np": np}, env)


def _same(got, want) -> bool:
    """The same bits, a NaN matching any NaN."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if want.dtype != np.float64:
        return np.array_equal(got, want, equal_nan=want.dtype.kind == "f")
    got, want = got.reshape(-1), want.reshape(-1)
    gn, wn = np.isnan(got), np.isnan(want)
    return bool((gn == wn).all()
                and (got[~gn].view(np.int64) == want[~wn].view(np.int64)).all())


def _value(rng, shape, special: bool):
    if shape is None:
        return float(rng.choice(SPECIAL + [0.5, -2.0])) if special else float(rng.normal())
    a = rng.normal(size=shape) * rng.choice([1e-8, 1.0, 1e8], size=shape)
    if special and a.size:
        k = int(rng.integers(0, a.size + 1))
        a.flat[rng.integers(0, a.size, size=k)] = rng.choice(SPECIAL, size=k)
    r = rng.random()
    if r < 0.2 and a.ndim and a.shape[-1] > 1:
        a = a[..., ::-1]                            # negative strides
    elif r < 0.3 and a.ndim == 2:
        a = np.asfortranarray(a)                    # transposed layout
    elif r < 0.4 and a.ndim:
        wide = np.zeros(a.shape[:-1] + (2 * a.shape[-1],))
        wide[..., ::2] = a
        a = wide[..., ::2]                          # every other element
    return a


def _expression(rng, names, depth):
    if depth == 0 or rng.random() < 0.25:
        if rng.random() < 0.85:
            return str(rng.choice(names))
        return repr(float(rng.choice([1.0, 0.5, -0.0, 2.0])))
    if rng.random() < 0.2:
        return f"(-{_expression(rng, names, depth - 1)})"
    op = str(rng.choice(["+", "-", "*", "/"]))
    return f"({_expression(rng, names, depth - 1)} {op} {_expression(rng, names, depth - 1)})"


@pytest.mark.parametrize("seed", range(12))
def test_the_loop_is_numpys_operations_one_after_the_other(impl, seed):
    rng = np.random.default_rng(seed)
    ran = 0
    for trial in range(120):
        dims = [int(d) for d in rng.integers(0, 7, size=int(rng.integers(1, 4)))]
        if trial % 4 == 0:
            dims = [int(rng.integers(0, 3000))]     # several blocks, a last short one
        elif trial % 4 == 1:
            dims = [int(rng.integers(1, 4)), 700]    # rows longer than a block
        env = {}
        for k in range(int(rng.integers(1, 5))):
            shape = None if rng.random() < 0.2 else \
                [d if rng.random() < 0.7 else 1 for d in dims][int(rng.integers(0, len(dims))):]
            env[f"v{k + 1}"] = _value(rng, shape, special=seed % 2 == 0)
        text = _expression(rng, list(env), 4)
        call = fused(text)
        if call is None:
            continue
        code, leaves = _code_and_leaves(call, env)
        with np.errstate(all="ignore"):
            try:
                want = eval(text, {}, env)
            except ZeroDivisionError:  # reals only: Python's own division
                continue
            got = kernels.fuse(code, *leaves)
        assert type(got) is type(want)
        assert _same(got, want), (text, {k: getattr(v, "shape", v) for k, v in env.items()})
        if isinstance(want, np.ndarray) and not np.isnan(want).any():
            assert got.tobytes() == want.tobytes()
        ran += 1
    assert ran > 60


def test_negation_is_the_sign_bit(impl):
    """-x of a NaN flips its sign, as numpy's negative: a + (-b) is not a - b."""
    for sign in (1.0, -1.0):
        b = np.array([math.copysign(math.nan, sign), -0.0, 0.0, 2.0])
        a = np.array([1.0, 0.0, 0.0, 1.0])
        got = kernels.fuse(b"01~+", a, b)
        want = a + (-b)
        assert got.tobytes() == want.tobytes()
        assert np.signbit(got[0]) == (sign > 0)


def test_leaves_the_kernel_does_not_take_get_numpys_operators(impl):
    """Integers, other dtypes, 0-d arrays and numpy scalars, lists, big-endian
    arrays: the expression computed by Python's operators (evaluate), with
    their results and their errors."""
    a = np.arange(6.0).reshape(2, 3)
    cases = [
        (np.arange(3), 2.0), (np.arange(3.0, dtype=np.float32), 2.0), (np.float64(3.0), 2.0),
        (np.array(3.0), 2.0), (a.astype(">f8"), 1.5), (np.array([1, 0], dtype=np.int8), 0.5),
        (3, 2.0), (2.5, 0.5),
    ]
    for x, y in cases:
        with np.errstate(all="ignore"):
            got = kernels.fuse(b"01*0~+", x, y)
            want = x * y + (-x)
        assert type(got) is type(want) and _same(got, want), (x, y)
    with pytest.raises(ValueError):
        kernels.fuse(b"01*0+", a, np.ones(4))  # shapes that do not broadcast: numpy's error
    with pytest.raises(TypeError):
        kernels.fuse(b"01*0+", [1.0, 2.0], 2.0)  # a list: Python's
    with pytest.raises(TypeError):
        kernels.fuse(b"01*0~+", np.array([True, False]), 0.5)  # numpy's refusal of -bool


def test_the_code_must_be_an_expression_of_its_leaves():
    if not kernels.native():
        pytest.skip("the C extension is not built")
    x = np.ones(3)
    for code, leaves in [(b"01", (x, x)), (b"0+", (x,)), (b"02+", (x, x)), (b"0a", (x,)),
                         (b"0", (x,)), (b"", ())]:
        with pytest.raises(ValueError):
            kernels._native.fuse(code, leaves)


def test_the_fused_call_of_an_expression():
    assert fused("((p1 * c2) * (1.0 + (-(c3 * c3))))") == "_vfuse(b'01*233*~+*', p1, c2, 1.0, c3)"
    assert fused("(v1 + (-_f2(v3, 1, 2)))") == "_vfuse(b'01~+', v1, _f2(v3, 1, 2))"
    assert fused("(v1 * (-2.5)) + v2") == "_vfuse(b'01*2+', v1, -2.5, v2)"
    # one operation, not arithmetic, an integer, `not`: left as they are
    for text in ["(v1 + v2)", "(-v1)", "_np.exp(v1)", "(v1 + 2) * v3", "(not v1) * v2 + v3",
                 "v1 * v2 < v3", "(~v1) * v2 + v3"]:
        assert fused(text) is None, text
    # any other expression is a leaf, evaluated as an argument
    assert fused("(v1 @ v2) + v3 * v1") == "_vfuse(b'012*+', v1 @ v2, v3, v1)"
    assert fused("(v1 + (v1 * v1))") == "_vfuse(b'000*+', v1)"  # a name read twice: one leaf
    many = " + ".join(f"v{k}" for k in range(MAX_LEAVES + 1))
    assert fused(many) is None
    assert all(not c.isalpha() or c.isupper() for c in fused("(v1 + v2) * (v3 - v4) / v5")[8:14])


def test_leaves_are_evaluated_once_left_to_right():
    seen = []

    def leaf(k, v):
        seen.append(k)
        return v

    env = {"f1": leaf, "x2": np.arange(4.0)}
    text = "((f1(1, x2) * f1(2, x2)) + (-f1(3, x2)))"
    code, leaves = _code_and_leaves(fused(text), env)
    assert seen == [1, 2, 3]
    assert _same(kernels.fuse(code, *leaves), evaluate(code, leaves))


GMM_LIKE = (
    "def f(a : Array R, xs : Array R) : R = sum (build (length xs) (\\i -> "
    "sum (build (length a) (\\c -> let z = (xs ! i - a ! c) * exp (a ! c) in "
    "a ! c - 0.5 * (z * z) - xs ! i * a ! c))))"
)


def test_a_block_of_reals_is_fused_and_a_row_is_not():
    """The gradient of a nested loop (gmm's shape) computes its blocks' arithmetic
    with `_vfuse`; a single loop's arrays are left to numpy (measured: no faster
    there, its operands in memory either way)."""
    prog = chad.load(GMM_LIKE)
    assert "_vfuse(" in backend.gradient_module(prog, prog.find(None)).source
    flat = chad.load("def f(w : R, xs : Array R) : R = sum (map (\\x -> (x - w) * (x + w) * w) xs)")
    assert "_vfuse(" not in backend.gradient_module(flat, flat.find(None)).source


@pytest.mark.parametrize("evm", ["array", "parallel"])
def test_fused_gradients_are_the_interpreters(evm):
    from tests.test_vectorise import agree
    rng = np.random.default_rng(3)
    compiled = chad.grad(GMM_LIKE, evm=evm)
    interp = chad.grad(GMM_LIKE, backend="interp")
    for a, xs in [(rng.normal(size=4), rng.normal(size=50)),
                  (np.array([0.0, -0.0, 1e308]), np.array([1.0, math.nan, -0.0, 2.0])),
                  (np.array([-math.inf, 2.0]), np.array([1e-300, -1e300]))]:
        agree(compiled(a, xs), interp(a, xs), False)


def test_a_broadcast_view_is_np_broadcast_tos():
    """shapes.view: np.broadcast_to's read-only view, made over a contiguous
    array's memory (the same values, shape and errors)."""
    from chad.compile.shapes import view
    rng = np.random.default_rng(9)
    for xs, shape in [((5,), (3, 5)), ((3, 1), (3, 4)), ((1, 4), (2, 3, 4)), ((), (2, 2)),
                      ((2, 3), (2, 3)), ((0,), (2, 0)), ((4,), (0, 4))]:
        for x in (rng.normal(size=xs), np.arange(int(np.prod(xs)), dtype=np.int64).reshape(xs)):
            got, want = view(x, shape), np.broadcast_to(x, shape)
            assert got.shape == want.shape and got.dtype == want.dtype
            assert np.array_equal(got, want) and not got.flags.writeable
    x = rng.normal(size=(4, 6))[:, ::2]  # not contiguous: numpy's own
    assert np.array_equal(view(x, (2, 4, 3)), np.broadcast_to(x, (2, 4, 3)))
    with pytest.raises(ValueError):
        view(np.ones(3), (2, 4))
