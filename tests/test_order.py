"""chad/compile/order.py: column sums of a block of rows at numpy speed, bit
for bit the evaluator's chain of adds (0.0 + r_0 + r_1 + ...), and the dense
sum of a BRows bag that uses them."""

from __future__ import annotations

import numpy as np
import pytest

from chad.arrays.bag import BEMPTY, BArray, BPlus, BRows, dense_real, to_dense
from chad.compile import order
from chad.linear import LR, plusv


def _bits(a) -> bytes:
    return np.asarray(a, dtype=np.float64).tobytes()


def _chain(block):
    """The evaluator's order, one Python float at a time."""
    n, m = block.shape
    out = []
    for j in range(m):
        acc = 0.0
        for k in range(n):
            acc = acc + float(block[k, j])
        out.append(acc)
    return np.array(out)


def _cancelling(rng, n, m):
    """Values where any other order of the additions gives another sum."""
    block = rng.standard_normal((n, m)) * 10.0 ** rng.integers(-10, 11, (n, m))
    block[0] = 1e17
    block[1:n - 1:2] = 1.0
    if n > 2:
        block[n - 1] = -1e17
    return block


SHAPES = [(1, 1), (1, 5), (2, 2), (3, 1), (7, 2), (8, 2), (9, 3), (64, 10), (200, 1),
          (300, 7), (1000, 2), (5, 1000)]


@pytest.mark.parametrize("shape", SHAPES)
def test_column_sums_are_the_chain(shape):
    rng = np.random.default_rng(sum(shape))
    block = _cancelling(rng, *shape)
    assert _bits(order.column_sums(block)) == _bits(_chain(block))
    rev = block[::-1]  # a reversed view, as BRows reads its rows
    assert _bits(order.column_sums(rev)) == _bits(_chain(np.ascontiguousarray(rev)))


@pytest.mark.parametrize("shape", SHAPES)
def test_add_rows_is_the_chain(shape):
    rng = np.random.default_rng(7 + sum(shape))
    block = _cancelling(rng, *shape)
    start = rng.standard_normal(shape[1]) * 1e16
    want = _chain(np.concatenate((start[None, :], block)))
    assert _bits(order.add_rows(start.copy(), block)) == _bits(want)


def test_signed_zeros_infinities_and_nan():
    z = -0.0
    block = np.array([[z, z, 1.0, np.inf, np.nan, z],
                      [z, 0.0, -1.0, -np.inf, 1.0, z],
                      [z, z, z, 1.0, z, 2.0]])
    for b in (block, block[::-1], np.tile(block, (5, 1))):
        assert _bits(order.column_sums(b)) == _bits(_chain(np.ascontiguousarray(b)))


def test_columns_and_broadcast_rows_take_the_loop_or_agree():
    rng = np.random.default_rng(3)
    big = _cancelling(rng, 50, 6)
    cols = big.T  # rows not contiguous: strides (8, 48)
    assert _bits(order.column_sums(cols)) == _bits(_chain(np.ascontiguousarray(cols)))
    rows = np.broadcast_to(big[0], (40, 6))  # one row n times (stride 0)
    assert _bits(order.column_sums(rows)) == _bits(_chain(np.ascontiguousarray(rows)))


def test_the_probe_decides(monkeypatch):
    """With the probe failing, the loop gives the same result."""
    rng = np.random.default_rng(11)
    block = _cancelling(rng, 100, 4)
    fast = order.column_sums(block)
    monkeypatch.setattr(order, "_CHECKED", [False])
    assert _bits(order.column_sums(block)) == _bits(fast)
    assert order._probe() is True  # numpy as installed sums row after row


@pytest.mark.parametrize("n_rows", [1, 2, 9, 40])
def test_dense_sum_of_brows_is_the_chain_of_adds(n_rows):
    rng = np.random.default_rng(n_rows)
    m = 6
    rows = _cancelling(rng, n_rows, m)
    rows[rows.shape[0] // 2, 1] = -0.0
    chain = BEMPTY  # cell = plusv(BArray(rows[k]), cell), k = 0 .. n-1
    for k in range(n_rows):
        chain, _ = plusv(BArray(rows[k].copy()), chain)
    want = to_dense(chain, m, LR())
    assert _bits(dense_real(BRows(rows), m)) == _bits(want)
    assert _bits(want) == _bits(_chain(np.ascontiguousarray(rows[::-1])))  # last row first
    # a BRows after another add, and a dense array after it
    first = BArray(rng.standard_normal(m) * 1e16)
    later = BArray(rng.standard_normal(m))
    got = dense_real(BPlus(later, BPlus(BRows(rows), first)), m)
    plain = BPlus(later, BPlus(chain, first))
    assert _bits(got) == _bits(to_dense(plain, m, LR()))


# vector_support.vsum: a batched `sum` over a loop is np.sum of each row (the
# evaluator's pairwise sum), whatever the block's layout: a transposed block
# (`m ! i ! j` summed over i) is reduced along a contiguous copy

TRANSPOSED_MV = ("def f(m : Array (Array R), v : Array R) : Array R = "
                 "build (length v) (\\j -> sum (build (length m) (\\i -> m ! i ! j * v ! i)))")


@pytest.mark.parametrize("layout", ["C", "F", "T", "broadcast", "reversed"])
@pytest.mark.parametrize("axis", [0, 1])
def test_vsum_is_np_sum_of_each_row(layout, axis):
    from chad.compile.vector_support import vsum

    rng = np.random.default_rng(3)
    base = _cancelling(rng, 37, 37)
    x = {"C": base, "F": np.asfortranarray(base), "T": base.T, "reversed": base[::-1, ::-1],
         "broadcast": np.broadcast_to(base[0], (37, 37))}[layout]
    if axis == 0:
        x_rows = np.ascontiguousarray(x.T)
    else:
        x_rows = np.ascontiguousarray(x)
    want = np.array([np.sum(r) for r in x_rows])
    got = vsum(x, 37, axis, 2).reshape(-1)
    assert _bits(got) == _bits(want)


@pytest.mark.parametrize("evm", ["array", "parallel", "map"])
@pytest.mark.parametrize("n", [1, 9, 40])
def test_a_transposed_matrix_vector_product_is_the_interpreters(n, evm):
    import chad

    rng = np.random.default_rng(n)
    m = tuple(rng.normal(size=n) * 10.0 ** rng.integers(-8, 9, n) for _ in range(n))
    v = rng.normal(size=n)
    assert _bits(chad.primal(TRANSPOSED_MV)(m, v)) == \
        _bits(chad.primal(TRANSPOSED_MV, backend="interp")(m, v))
    ctg = list(rng.normal(size=n))
    got = chad.grad(TRANSPOSED_MV, evm=evm)(m, v, ctg=ctg)
    want = chad.grad(TRANSPOSED_MV, backend="interp", evm=evm)(m, v, ctg=ctg)
    assert _bits(got[0]) == _bits(want[0]) and _bits(got[1][1]) == _bits(want[1][1])
    assert [_bits(r) for r in got[1][0]] == [_bits(r) for r in want[1][0]]


@pytest.mark.parametrize("width", [*range(1, 12), 16, 17, 64, 127, 128, 129, 300])
def test_row_sums_are_numpys_reduce_of_each_row(width, monkeypatch):
    """Rows of 1 to 7: the C loop from +0.0 (numpy's own additions, as its
    probe found); rows of 8 to 128: kernels.dots with a row of ones (numpy's
    eight running sums); longer rows, and without the C loop: None (numpy's
    reduce runs). Cancelling magnitudes, signed zeros, infinities; rank 2
    and 3."""
    from chad.compile import kernels
    rng = np.random.default_rng(width)
    for shape in ((500, width), (3, 40, width), (1, width)):
        x = rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 17, shape)
        x[rng.random(shape) < 0.2] = -0.0
        x[rng.random(shape) < 0.02] = np.inf
        x.reshape(-1, width)[::9, 0] = 1e17
        x.reshape(-1, width)[::9, -1] = -1e17
        got = order.row_sums(x)
        if width > order.ROW_DOTS_MAX or not kernels.native():
            assert got is None
            continue
        want = np.add.reduce(x, axis=-1, keepdims=True)
        assert got.shape == want.shape and _bits(got) == _bits(want)
        if width > 1:  # rows not contiguous: numpy's reduce
            assert order.row_sums(x[..., ::-1]) is None
    monkeypatch.setattr(order, "_ROWS_CHECKED", [False])  # numpy summing otherwise
    assert order.row_sums(np.ones((4, 3))) is None
    monkeypatch.setattr(order, "_DOTS_CHECKED", [False])
    assert order.row_sums(np.ones((4, 9))) is None


def test_the_rows_probe_finds_numpys_order():
    """The probe holds on this numpy (else vsum keeps numpy's reduce, and this
    test says so)."""
    assert order._rows_probe()
