"""A nested loop's block of products kept as its factors
(chad/compile/scaled.py): the cotangent of `v ! j` in `m ! i ! j * v ! j`,
d[i] * m[i][j] added to the element pairs' cells, summed over the outer
elements without the block being made (`kernels.colsum` given the factors), and made,
bit for bit the block of products, wherever anything else reads it. Against
the block made by numpy and a Python loop of float operations, and compiled
gradients against the interpreter on the three runtimes."""

from __future__ import annotations

import math

import numpy as np
import pytest

import chad
from chad.compile import kernels, order
from chad.compile.scaled import ScaledRows

SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 1e308, -1e308, 5e-324, math.inf, -math.inf,
                    math.nan, 1e16, -1e16, 0.1, 3.0])


def _values(rng, shape):
    pick = rng.integers(0, 3, size=shape)
    wide = rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 17, size=shape)
    return np.where(pick == 0, rng.choice(SPECIAL, size=shape), wide)


def _same(a, b) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False
    a, b = np.where(np.isnan(a), np.nan, a), np.where(np.isnan(b), np.nan, b)
    return a.tobytes() == b.tobytes()


def _loop(col, mat, add, start):
    n, m = mat.shape
    out = [0.0 if start is None else float(start[j]) for j in range(m)]
    for i in range(n):
        for j in range(m):
            p = float(col[i]) * float(mat[i, j])
            out[j] = out[j] + (p if add is None else p + add)
    return np.array(out)


def _blocks(rng, n, m):
    col, mat = _values(rng, (n,)), _values(rng, (n, m))
    wide = np.empty((n, 2 * m))
    wide[:, ::2] = mat
    yield col, mat
    yield col[::-1], mat[::-1]          # a chain's last add first
    yield col, wide[:, ::2]             # strided columns
    yield col, np.asfortranarray(mat)


@pytest.mark.parametrize("shape", [(1, 1), (3, 2), (7, 5), (40, 130), (0, 3)])
@pytest.mark.parametrize("add", [None, 0.0, -0.0, 1.5])
def test_column_sums_of_a_kept_block_are_the_loops(kernels_impl, shape, add):
    """column_sums and add_rows of a ScaledRows (from its factors with the C
    loop, from the made block without it) are the loop's: each product, the
    add, then the rows one after the other."""
    rng = np.random.default_rng(hash((shape, add)) % 2 ** 32)
    with np.errstate(all="ignore"):
        for col, mat in _blocks(rng, *shape):
            if shape[0]:
                assert _same(order.column_sums(ScaledRows(col, mat, add)), _loop(col, mat, add, None))
            start = _values(rng, (shape[1],))
            got = order.add_rows(start.copy(), ScaledRows(col, mat, add))
            assert _same(got, _loop(col, mat, add, start))


def test_the_made_block_is_the_products_and_reads_as_an_array():
    rng = np.random.default_rng(3)
    col, mat = _values(rng, (6,)), _values(rng, (6, 4))
    with np.errstate(all="ignore"):
        want = col.reshape(-1, 1) * mat + 0.5
        s = ScaledRows(col, mat, 0.5)
        assert s.shape == (6, 4) and len(s) == 6 and s.ndim == 2 and s.dtype == np.float64
        assert _same(np.asarray(s), want) and _same(s[2], want[2]) and _same(s[::-1], want[::-1])
        assert _same(np.stack(list(s)), want)
        r = s.reversed()
        assert _same(np.asarray(r), want[::-1])
        assert np.asarray(s) is np.asarray(s)  # made once
        assert _same(np.asarray(s.reversed()), want[::-1])
        # once made, its sums are the made block's (numpy's or the short-row loop)
        assert _same(order.column_sums(s), _loop(col, mat, 0.5, None))


def test_the_c_loop_rejects_what_it_cannot_read():
    if not kernels.native():
        pytest.skip("the C extension is not built")
    out = np.empty(3)
    with pytest.raises(ValueError):
        kernels._native.colsum(np.ones(2), np.ones((3, 3)), None, None, out)
    with pytest.raises(TypeError):
        kernels._native.colsum(np.ones(3), np.ones((3, 3), dtype=np.int64), None, None, out)
    with pytest.raises(TypeError):
        kernels._native.colsum(np.ones(3), np.ones((3, 3)), "x", None, out)


SMV = ("def f(m : Array (Array R), v : Array R) : R = "
       "sum (build (length m) (\\i -> sum (build (length v) (\\j -> m ! i ! j * v ! j))))")
PROGRAMS = {
    "smv": SMV,
    # two adds to v ! j's cell: the second finds the kept block and makes it
    "two_adds": ("def f(m : Array (Array R), v : Array R) : R = "
                 "sum (build (length m) (\\i -> sum (build (length v) (\\j -> "
                 "m ! i ! j * v ! j + v ! j * m ! i ! j * 3.0))))"),
    # the factor of the outer loop is a captured real's product with d
    "scaled_outer": ("def f(m : Array (Array R), v : Array R, a : Array R, c : R) : R = "
                     "sum (build (length m) (\\i -> let s = a ! i * c in "
                     "sum (build (length v) (\\j -> m ! i ! j * s * v ! j))))"),
    # an array of the outer element read by the inner index: its own bag cell
    "outer_row": ("def f(m : Array (Array R), v : Array R) : R = "
                  "sum (build (length m) (\\i -> let r = map (\\x -> x * 2.0) v in "
                  "sum (build (length v) (\\j -> m ! i ! j * r ! j))))"),
    # the result an array: the cotangents reach v through a build of builds
    "matvec": ("def f(m : Array (Array R), v : Array R) : Array R = "
               "build (length m) (\\i -> sum (build (length v) (\\j -> m ! i ! j * v ! j)))"),
}


def _args(name, rng, n, m):
    mat = [_values(rng, (m,)) for _ in range(n)]
    args = [mat, _values(rng, (m,))]
    if name == "scaled_outer":
        args += [_values(rng, (n,)), float(rng.choice([1.0, -0.0, 2.5]))]
    return args


def _flat(x):
    if isinstance(x, (tuple, list)):
        out = [_flat(e) for e in x]
        return np.concatenate([np.atleast_1d(o) for o in out]) if out else np.zeros(0)
    return np.atleast_1d(np.asarray(x, dtype=np.float64))


@pytest.mark.parametrize("evm", ["array", "map", "parallel"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_gradients_with_a_kept_block_are_the_interpreters(name, evm):
    rng = np.random.default_rng(len(name))
    text = PROGRAMS[name]
    for n, m in ((1, 1), (3, 4), (6, 2), (2, 9)):
        args = _args(name, rng, n, m)
        ctg = None if name != "matvec" else list(_values(rng, (n,)))
        kw = {} if ctg is None else {"ctg": ctg}
        with np.errstate(all="ignore"):
            got = chad.grad(text, evm=evm)(*args, **kw)
            want = chad.grad(text, evm=evm, backend="interp")(*args, **kw)
        assert _same(_flat(got[0]), _flat(want[0]))
        assert _same(_flat(got[1]), _flat(want[1])), (n, m)


def test_the_transposed_product_is_summed_from_the_factors(monkeypatch):
    """The sum of a matrix-vector product's gradient: v's cotangent is
    the C loop's from the factors (the block of products never made), the same bits as
    with the kept block switched off (every product then made and added)."""
    if not kernels.native():
        pytest.skip("the C extension is not built")
    from chad.arrays import nested
    from chad.arrays.nested_support import vadd_in

    calls = []
    real = kernels.colsum
    monkeypatch.setattr(kernels, "colsum", lambda *a: calls.append(len(a) > 2 and a[2] is not None) or real(*a))
    rng = np.random.default_rng(5)
    args = _args("smv", rng, 50, 40)
    kept = chad.grad(SMV)(*args)
    assert any(calls)
    def made_now(cells, level, first, buf, col, mat, shape):  # the product, as before
        with np.errstate(all="ignore"):
            vadd_in(cells, level, first, buf, np.multiply(col, mat), shape, True)

    monkeypatch.setattr(nested, "vadd_scaled", made_now)
    calls.clear()
    made = chad.grad(SMV + " ")(*args)  # (another text: compiled again, with made_now)
    assert not any(calls)
    assert _same(_flat(kept), _flat(made))


@pytest.mark.parametrize("add", [None, 0.0, -0.0, 2.5, math.nan])
def test_the_block_made_in_one_pass_is_numpys(add):
    """kernels.scaled (the block made, one pass) against numpy's multiply
    and add of the real, bit for bit, on every layout (a broadcast row: an
    outer product's)."""
    if not kernels.native():
        pytest.skip("the C extension is not built")
    rng = np.random.default_rng(11)
    with np.errstate(all="ignore"):
        for col, mat in list(_blocks(rng, 5, 7)) + [(_values(rng, (5,)),
                                                     np.broadcast_to(_values(rng, (7,)), (5, 7)))]:
            want = np.multiply(col.reshape(-1, 1), mat)
            if add is not None:
                want = np.add(want, add)
            got = kernels.scaled(col, mat, add)
            assert got.flags.c_contiguous and _same(got, want)
            assert _same(np.asarray(ScaledRows(col, mat, add)), want)
    with pytest.raises(ValueError):
        kernels._native.scaled(np.ones(2), np.ones((3, 3)), None, np.empty((3, 3)))
    with pytest.raises(ValueError):
        kernels._native.scaled(np.ones(3), np.ones((3, 3)), None, np.empty((3, 2)))


def test_a_kept_block_is_given_up_only_when_only_its_bag_holds_it():
    """_rows_at_once gives a kept block's rows without adding 0.0 only when
    its start is a real other than -0.0 and nothing but the bag holds it."""
    from chad.arrays.bag import BArray
    from chad.arrays.cotangents import _rows_at_once
    from chad.arrays.nested_support import RowsTuple
    from chad.types import ArrayT, Real

    ty, primal = ArrayT(ArrayT(Real())), tuple(np.zeros(3) for _ in range(2))
    col, mat = np.array([1.0, -1.0]), np.array([[0.0, 1.0, 2.0], [0.0, -3.0, 4.0]])

    def run(start, keep=False):
        kept = RowsTuple(ScaledRows(col, mat, start))  # the bag's only reference
        held = kept.matrix if keep else None
        rows = _rows_at_once(ty, primal, BArray(kept), 2)
        block = kept.matrix
        given = block._array is not None and rows[0].base is block._array
        del held
        return rows, given

    for start, keep, given in ((0.0, False, True), (0.0, True, False), (None, False, False),
                               (-0.0, False, False), (1.5, False, True)):
        rows, was = run(start, keep)
        assert was == given, (start, keep)
        want = col.reshape(-1, 1) * mat + (0.0 if start is None else start) + 0.0
        assert _same(np.stack(rows), want)  # (-1.0 * 0.0 is -0.0: 0.0 added)


def test_the_outer_products_are_kept_too(monkeypatch):
    """The sum of a matrix-vector product: m ! i ! j's cotangent (d times v,
    an outer product) and v ! j's (d times m) are both kept; the gradient is
    the interpreter's."""
    kept = []
    real = ScaledRows.__init__

    def init(self, col, mat, start):
        kept.append(mat.strides[0] == 0)
        real(self, col, mat, start)

    monkeypatch.setattr(ScaledRows, "__init__", init)
    rng = np.random.default_rng(2)
    args = _args("smv", rng, 4, 3)
    got = chad.grad(SMV)(*args)
    assert True in kept and False in kept
    want = chad.grad(SMV, backend="interp")(*args)
    assert _same(_flat(got), _flat(want))
