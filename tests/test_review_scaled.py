"""Review of the kept block of products (chad/compile/scaled.py, ScaledRows;
chad/arrays/nested_support.py, vadd_scaled; chad/arrays/nested.py,
Exec._add_scaled): compiled gradients and vjps against the interpreter, bit
for bit (NaN payload and sign excepted), on the three runtimes.

Found (fixed since; the tests kept): a kept block that is a let's final
cotangent in the inner body met the generated code's Python operators
(`x * 2.0`, `x * c`, `-x`), which ScaledRows lacked (an internal compiler
error where the interpreter gives the gradient); and `np.array(block)` was
not a copy. Held: 92 tests (program shapes, sizes 0 and 1, forks at grain 1,
array results with special output cotangents, vjp twice, the MLP with kept
blocks on and off, vadd_scaled against vadd_in of the product)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import chad
from chad.compile import scaled

SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 1e308, -1e308, 5e-324, math.inf, -math.inf,
                    math.nan, 1e16, -1e16, 0.1, 3.0])
EVMS = ["array", "map", "parallel"]


def _values(rng, shape):
    pick = rng.integers(0, 3, size=shape)
    wide = rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 17, size=shape)
    return np.where(pick == 0, rng.choice(SPECIAL, size=shape), wide)


def _flat(x):
    if x is None:
        return np.zeros(0)
    if isinstance(x, (tuple, list)):
        out = [_flat(e) for e in x]
        return np.concatenate([np.atleast_1d(o) for o in out]) if out else np.zeros(0)
    return np.atleast_1d(np.asarray(x, dtype=np.float64))


def _same(a, b) -> bool:
    a, b = _flat(a), _flat(b)
    if a.shape != b.shape:
        return False
    a, b = np.where(np.isnan(a), np.nan, a), np.where(np.isnan(b), np.nan, b)
    return a.tobytes() == b.tobytes()


def _grads(text, args, evm, **kw):
    with np.errstate(all="ignore"):
        want = chad.grad(text, evm=evm, backend="interp")(*args, **kw)
        got = chad.grad(text, evm=evm)(*args, **kw)
    return got, want


HEAD = "def f(m : Array (Array R), a : Array R, v : Array R) : R = "


def _inner(body: str) -> str:
    return HEAD + ("sum (build (length m) (\\i -> sum (build (length v) (\\j -> "
                   + body + "))))")


def _mav(rng, n, m, rows=True):
    mat = _values(rng, (n, m))
    return [list(mat) if rows else mat, _values(rng, (n,)), _values(rng, (m,))]


# --- bugs -------------------------------------------------------------------

# A CHAD `let` in the inner body whose cotangent cell's first add is
# (outer real) * (real of both loops): vadd_scaled keeps the block as a
# ScaledRows, final2 hands it on as the let's final cotangent, and the
# generated code then computes with it using Python operators. ScaledRows has
# no arithmetic dunders: `ScaledRows * 2.0` and `-ScaledRows` raise TypeError
# (ndarray on the other side only works through ndarray's reflected operator).
LET_PROGRAMS = {
    # y's cotangent d * (a!i * v!j); m!i!j's cotangent is y's times 2.0
    "let_times_literal": _inner("let y = m ! i ! j * 2.0 in y * (a ! i * v ! j)"),
    # m!i!j's cotangent is -(y's cotangent)
    "let_negated": _inner("let y = -(m ! i ! j) in y * (a ! i * v ! j)"),
    # a subtraction's right operand: the cotangent negated
    "let_subtracted": _inner("let y = v ! j - m ! i ! j in y * (a ! i * v ! j)"),
    # a division by a literal: the cotangent times the reciprocal
    "let_divided": _inner("let y = m ! i ! j / 2.0 in y * (a ! i * v ! j)"),
}


@pytest.mark.parametrize("evm", ["array", "parallel"])
@pytest.mark.parametrize("name", sorted(LET_PROGRAMS))
def test_a_kept_block_as_a_lets_cotangent_in_python_arithmetic(name, evm, kept):
    """FOUND (fixed): an inner `let y = <linear in m!i!j> in y * (a!i * v!j)`: y's
    cotangent cell gets d * (a!i*v!j), kept as a ScaledRows; the let's final
    cotangent is then scaled by a literal or negated with Python operators in
    the generated code (`v * 2.0`, `-v`), and ScaledRows supports neither:
    TypeError, reported as an internal compiler error where the interpreter
    returns the gradient. Repro: chad.grad(_inner("let y = m ! i ! j * 2.0 in
    y * (a ! i * v ! j)"))([[1.0, 2.0]], [3.0], [4.0, 5.0])."""
    rng = np.random.default_rng(7)
    text = LET_PROGRAMS[name]
    for n, m in ((1, 1), (3, 4), (2, 5)):
        args = _mav(rng, n, m)
        got, want = _grads(text, args, evm)
        assert _same(got[0], want[0])
        assert _same(got[1], want[1]), (n, m)
    assert kept[0]


SCALAR = ("def f(m : Array (Array R), a : Array R, v : Array R, c : R) : R = "
          "sum (build (length m) (\\i -> sum (build (length v) (\\j -> "
          "let y = m ! i ! j * c in y * (a ! i * v ! j)))))")


@pytest.mark.parametrize("evm", ["array", "parallel"])
def test_a_kept_block_as_a_lets_cotangent_times_a_scalar_parameter(evm):
    """FOUND (fixed): as above with a real parameter c (an unbatched Python float in
    the generated code): m!i!j's cotangent is `ScaledRows * c`, TypeError.
    Repro: chad.grad(SCALAR)([[1.0, 2.0]], [3.0], [4.0, 5.0], 1.5)."""
    args = [[[1.0, 2.0], [3.0, -0.0]], [3.0, 0.5], [4.0, 5.0], 1.5]
    want = chad.grad(SCALAR, evm=evm, backend="interp")(*args)
    got = chad.grad(SCALAR, evm=evm)(*args)
    assert _same(got[1], want[1])


def test_a_kept_block_as_a_lets_cotangent_small_repro():
    """FOUND (fixed; the smallest reproduction of the above, array runtime, plain
    values): a let's cotangent kept as ScaledRows, then `* 2.0`."""
    text = _inner("let y = m ! i ! j * 2.0 in y * (a ! i * v ! j)")
    args = [[[1.0, 2.0]], [3.0], [4.0, 5.0]]
    want = chad.grad(text, backend="interp")(*args)
    got = chad.grad(text)(*args)
    assert _same(got[1], want[1])


def test_np_array_of_a_kept_block_is_a_copy():
    """FOUND (latent, fixed): ScaledRows.__array__ ignored numpy 2's `copy` argument
    and always returns its cached block, so `np.array(s)` (copy=True, whose
    contract is a new array) aliases the block every later reader of s gets:
    a caller that copies a cell with np.array and then adds into the copy in
    place (as vadd2 does with `np.array(v)`) changes the kept block under
    every other reader. Repro: s = ScaledRows(np.ones(2), np.ones((2, 2)),
    None); c = np.array(s); c += 1.0; np.asarray(s) is now all 2.0."""
    s = scaled.ScaledRows(np.array([1.0, 2.0]), np.ones((2, 3)), None)
    c = np.array(s)
    c += 1.0
    assert _same(np.asarray(s), np.array([[1.0] * 3, [2.0] * 3]))
    s2 = scaled.ScaledRows(np.array([1.0, 2.0]), np.ones((2, 3)), 0.5)
    np.asarray(s2)  # made
    assert not np.shares_memory(np.array(s2, copy=True), np.asarray(s2))


# --- passing checks -----------------------------------------------------------

SMV = ("def f(m : Array (Array R), v : Array R) : R = "
       "sum (build (length m) (\\i -> sum (build (length v) (\\j -> m ! i ! j * v ! j))))")
PROGRAMS = {
    "smv": SMV,
    # three factors: (m!i!j * a!i) * v!j, m!i!j * (a!i * v!j), the outer one last
    "three_left": _inner("m ! i ! j * a ! i * v ! j"),
    "three_right": _inner("m ! i ! j * (a ! i * v ! j)"),
    "outer_last": _inner("(v ! j * m ! i ! j) * a ! i"),
    # a product under a negation, and subtracted
    "negated": _inner("-(m ! i ! j * v ! j)"),
    "subtracted": _inner("a ! i - m ! i ! j * v ! j"),
    # the same factor twice, and a square of a product
    "square": _inner("let y = m ! i ! j * v ! j in y * y"),
    "same_row_twice": _inner("m ! i ! j * m ! i ! j * v ! j"),
    # more adds to the same cells after the kept block
    "plus_vj": _inner("m ! i ! j * a ! i * v ! j + v ! j"),
    "two_products": _inner("m ! i ! j * v ! j + a ! i * v ! j"),
    "scaled_sum": HEAD + ("sum (build (length m) (\\i -> a ! i * sum (build (length v) "
                          "(\\j -> m ! i ! j * v ! j))))"),
    "squared_sum": HEAD + ("sum (build (length m) (\\i -> let s = sum (build (length v) "
                           "(\\j -> m ! i ! j * v ! j)) in s * s))"),
    "literal_sum": HEAD + ("sum (build (length m) (\\i -> 2.0 * sum (build (length v) "
                           "(\\j -> m ! i ! j * v ! j))))"),
    # gathers at indices of their own (BChain of the kept rows)
    "reversed_v": _inner("m ! i ! j * a ! i * v ! (length v - 1 - j)"),
    "reversed_a": _inner("m ! i ! j * a ! (length a - 1 - i) * v ! j"),
    "rotated_v": _inner("m ! i ! j * v ! (mod(j + 1, length v))"),
    "division": _inner("m ! i ! j * v ! j / a ! i"),
    "sum_of_both": _inner("(m ! i ! j + a ! i) * v ! j"),
    # a let's cotangent kept, then multiplied by arrays only (works)
    "let_times_arrays": _inner("let y = sqrt (m ! i ! j) in y * (a ! i * v ! j)"),
    "chain_of_lets": HEAD + ("sum (build (length a) (\\i -> sum (build (length v) (\\j -> "
                             "let y = a ! i * v ! j in let z = y * (a ! i + v ! j) in "
                             "z * (a ! i - v ! j)))))"),
}
NOT_KEPT = {"same_row_twice"}  # (not batched over both loops)
SIZES = ((1, 1), (1, 4), (4, 1), (3, 4), (0, 2), (2, 0), (0, 0))


def _args(name, rng, n, m, rows):
    if name == "smv":
        mat = _values(rng, (n, m))
        return [list(mat) if rows else mat, _values(rng, (m,))]
    return _mav(rng, n, m, rows)


@pytest.mark.parametrize("evm", EVMS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_gradients_are_the_interpreters(name, evm, kept):
    rng = np.random.default_rng(sum(map(ord, name)))
    text = PROGRAMS[name]
    for n, m in SIZES:
        for rows in (True, False):
            args = _args(name, rng, n, m, rows)
            got, want = _grads(text, args, evm)
            assert _same(got[0], want[0]), (n, m, rows)
            assert _same(got[1], want[1]), (n, m, rows)
    if evm != "map" and name not in NOT_KEPT:
        assert kept[0], "the kept block never ran"


def test_kept_blocks_on_forked_halves(forking, kept):
    """The parallel runtime forking at grain 1: the halves' cells are
    ForkCells (no kept block there), the inline half's a list."""
    rng = np.random.default_rng(11)
    for name in ("smv", "three_left", "square", "two_products", "plus_vj"):
        for n, m in ((2, 3), (5, 4), (1, 1)):
            args = _args(name, rng, n, m, True)
            got, want = _grads(PROGRAMS[name], args, "parallel")
            assert _same(got[1], want[1]), (name, n, m)


MATVEC = ("def f(m : Array (Array R), v : Array R) : Array R = "
          "build (length m) (\\i -> sum (build (length v) (\\j -> m ! i ! j * v ! j)))")


@pytest.mark.parametrize("evm", EVMS)
@pytest.mark.parametrize("fill", [-0.0, math.nan, math.inf, None, "values"])
def test_an_array_result_and_the_backpropagator_called_twice(evm, fill):
    rng = np.random.default_rng(13)
    for n, m in ((1, 1), (3, 4), (4, 1), (0, 2), (2, 0)):
        mat = _values(rng, (n, m))
        v = _values(rng, (m,))
        ctg = (None if fill is None else
               list(_values(rng, (n,))) if fill == "values" else [fill] * n)
        with np.errstate(all="ignore"):
            _, back = chad.vjp(MATVEC, evm=evm)(mat, v)
            _, want = chad.vjp(MATVEC, evm=evm, backend="interp")(list(mat), v)
            w = want(ctg)
            assert _same(back(ctg), w)
            assert _same(back(ctg), w)  # again: nothing kept from the first call changed


def _made_now(cells, level, first, buf, col, mat, shape):
    """vadd_scaled without the kept block: the product made, added as before."""
    from chad.arrays.nested_support import vadd_in
    with np.errstate(all="ignore"):
        vadd_in(cells, level, first, buf, np.multiply(col, mat), shape, True)


def test_the_mlp_on_a_batch_is_the_same_without_kept_blocks(monkeypatch, kept):
    """benchmarks/bench_vectorised.py's MLP on a batch (its tanh, exp and log
    are numpy's, within an ulp of the interpreter's): the compiled gradient
    with the kept blocks is bit for bit the one with every product made."""
    import importlib.util
    import pathlib
    from chad.arrays import nested
    path = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "bench_vectorised.py"
    spec = importlib.util.spec_from_file_location("bench_vectorised_review", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rng = np.random.default_rng(17)
    cases = [(n, evm, bench.args_of("mlp-batch", n, rng)) for n in (1, 8) for evm in EVMS]
    with np.errstate(all="ignore"):
        with_kept = [chad.grad(bench.MLP_TEXT, evm=evm)(*args) for _n, evm, args in cases]
        assert kept[0]
        monkeypatch.setattr(nested, "vadd_scaled", _made_now)
        text = bench.MLP_TEXT + "\n"  # (another text: compiled again, with _made_now)
        made = [chad.grad(text, evm=evm)(*args) for _n, evm, args in cases]
        for (n, evm, _a), g, w in zip(cases, with_kept, made):
            assert _same(g[0], w[0]) and _same(g[1], w[1]), (n, evm)
            want = chad.grad(bench.MLP_TEXT, evm=evm, backend="interp")(*_a)
            assert np.allclose(_flat(g[1]), _flat(want[1]), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("init", [None, 0.0, -0.0, 1.5, math.nan])
@pytest.mark.parametrize("later", [0, 1, 2])
def test_vadd_scaled_is_vadd_in_of_the_product(init, later):
    """Unit level: vadd_scaled then `later` more adds (in place) to the same
    element pairs' cell, read through final2, is vadd_in of the product made
    first; an add below `first` (a cell of the outer element) is buffered as
    the product."""
    from chad.arrays.nested_support import final2, vadd_in, vadd_scaled
    rng = np.random.default_rng(23)
    n, m = 4, 3
    col, mat = _values(rng, (n, 1)), _values(rng, (n, m))
    more = [_values(rng, (n, m)) for _ in range(later)]
    with np.errstate(all="ignore"):
        a, b = [None, init], [None, init]
        vadd_scaled(a, 1, 1, {}, col, mat, (n, m))
        vadd_in(b, 1, 1, {}, np.multiply(col, mat), (n, m), True)
        for x in more:
            vadd_in(a, 1, 1, {}, x.copy(), (n, m), True)
            vadd_in(b, 1, 1, {}, x.copy(), (n, m), True)
        assert _same(np.asarray(final2(a[1], init, (n, m))), final2(b[1], init, (n, m)))
        buf_a, buf_b = {}, {}
        vadd_scaled([0.0, None], 0, 1, buf_a, col, mat, (n, m))
        vadd_in([0.0, None], 0, 1, buf_b, np.multiply(col, mat), (n, m), True)
        assert _same(buf_a[0][0], buf_b[0][0])
