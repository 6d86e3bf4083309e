"""The C loops of dense sums (chad/compile/kernels.py): `colsum` (a block of
rows' column sums, chad/compile/order.py), `scatter` (np.add.at's additions,
chad/arrays/bag.py `_add_at`) and `chain` (a nested loop's chain of adds of
rows at indices, `BChain`), each against a plain Python loop of IEEE
additions in the evaluator's order, bit for bit, with the C loops and with
numpy's fallbacks (the `kernels_impl` fixture)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from chad.arrays.bag import BArray, BChain, BEMPTY, BPlus, collect, last_first, scatter_reals
from chad.arrays.nested_support import _indices, shared_adds
from chad.compile import kernels, order
from chad.linear import LR

SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 1e308, -1e308, 5e-324, math.inf, -math.inf,
                    math.nan, 2.0 ** 53, 1.0, 0.1, -0.3, 1e16, -1e16])


def _values(rng, shape):
    """Values whose sums depend on the order: specials, cancelling magnitudes."""
    pick = rng.integers(0, 3, size=shape)
    special = rng.choice(SPECIAL, size=shape)
    wide = rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 17, size=shape)
    return np.where(pick == 0, special, wide)


def _same(a, b) -> bool:
    """The same bits, every NaN one (the evaluator's NaN signs and payloads
    are not promised: docs/compiler.md)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype == np.float64:
        a, b = np.where(np.isnan(a), np.nan, a), np.where(np.isnan(b), np.nan, b)
    return a.tobytes() == b.tobytes()


def _column_loop(block, start=None):
    n, m = block.shape
    out = [0.0 if start is None else float(start[j]) for j in range(m)]
    for r in range(n):
        for j in range(m):
            out[j] = out[j] + float(block[r, j])
    return np.array(out, dtype=np.float64)


def _layouts(rng, n, m):
    base = _values(rng, (n, m))
    wide = np.empty((n, 2 * m))
    wide[:, ::2] = base
    yield base
    yield base[::-1]                      # a chain's last add first
    yield wide[:, ::2]                    # strided columns
    yield np.asfortranarray(base)
    if n:
        yield np.broadcast_to(base[0], (n, m))


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (3, 2), (40, 5), (129, 5), (2, 128),
                                   (5, 129), (300, 1), (0, 3)])
def test_column_sums_and_add_rows_are_the_loop(kernels_impl, shape):
    rng = np.random.default_rng(hash(shape) % 2 ** 32)
    for block in _layouts(rng, *shape):
        if shape[0]:
            assert _same(order.column_sums(block), _column_loop(block))
        start = _values(rng, (shape[1],))
        want = _column_loop(block, start)
        assert _same(order.add_rows(start.copy(), block), want)


def test_colsum_starts_from_plus_zero_and_reads_any_layout():
    if not kernels.native():
        pytest.skip("the C extension is not built")
    block = np.array([[-0.0, -0.0], [-0.0, 1.0]])
    assert _same(kernels.colsum(block), np.array([0.0, 1.0]))
    assert _same(kernels.colsum(block, np.array([-0.0, -0.0])), np.array([-0.0, 1.0]))
    start = np.array([1.0, 2.0])
    out = np.empty(2)
    kernels._native.colsum(None, block, None, start, start)  # out may be start itself
    assert _same(start, np.array([1.0, 3.0]))
    for bad in (np.zeros(3), np.zeros((2, 2), dtype=np.int64), np.zeros((2, 2), dtype=">f8")):
        with pytest.raises(TypeError):
            kernels._native.colsum(None, bad, None, None, out)
    with pytest.raises(ValueError):
        kernels._native.colsum(None, np.zeros((2, 3)), None, None, out)


def _scatter_loop(out, idx, vals):
    out = out.copy()
    for i, v in zip(idx, vals):
        out[i] = float(out[i]) + float(v)
    return out


@pytest.mark.parametrize("seed", range(12))
def test_scatter_is_add_at_in_order(kernels_impl, seed):
    """bag._add_at: np.add.at's additions (repeated indices in order), from
    the C loop and from numpy."""
    from chad.arrays.bag import _add_at

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    k = int(rng.integers(0, 300))
    idx = rng.integers(0, n, size=k)
    vals = _values(rng, (k,))
    out0 = _values(rng, (n,))
    out = out0.copy()
    with np.errstate(all="ignore"):  # (scatter_reals runs it quietly too)
        assert _add_at(out, idx, vals) is True
    assert _same(out, _scatter_loop(out0, idx, vals))
    for bad in (-1, n, n + 5):
        if k:
            wrong = idx.copy()
            wrong[k // 2] = bad
            with np.errstate(all="ignore"):
                assert _add_at(out0.copy(), wrong, vals) is False


def test_scatter_stops_at_the_first_index_out_of_range():
    if not kernels.native():
        pytest.skip("the C extension is not built")
    out = np.zeros(3)
    assert kernels.scatter(out, np.array([0, 2, 3, 1]), np.array([1.0, 2.0, 4.0, 8.0])) is False
    assert _same(out, np.array([1.0, 0.0, 2.0]))
    with pytest.raises(TypeError):
        kernels.scatter(out, np.array([0.0]), np.array([1.0]))
    with pytest.raises(ValueError):
        kernels.scatter(out, np.array([0, 1]), np.array([1.0]))


def _chain_loop(out, parts, n, m):
    """The chain's pairs in its bag's order: element n-1's adds first, its
    last part first, each row's pairs in order."""
    out = out.copy()
    for i in range(n - 1, -1, -1):
        for x, ix in reversed(parts):
            for j in range(m):
                out[ix[i, j]] = float(out[ix[i, j]]) + float(x[i, j])
    return out


def _parts(rng, n, m, p, size):
    out = []
    for k in range(p):
        layout = rng.integers(0, 3)
        x = _values(rng, (n, m))
        if layout == 1 and n:
            x = np.broadcast_to(x[0], (n, m))
        elif layout == 2:
            x = x[::-1]
        shape = rng.integers(0, 3)
        if shape == 0:
            ix = np.broadcast_to(rng.integers(0, size, size=m), (n, m))   # the same for each row
        elif shape == 1:
            ix = np.broadcast_to(rng.integers(0, size, size=(n, 1)), (n, m))  # one per row
        else:
            ix = rng.integers(0, size, size=(n, m))
        out.append((x, ix.astype(np.int64)))
    return out


@pytest.mark.parametrize("seed", range(20))
def test_a_chain_scatters_as_its_pairs(kernels_impl, seed):
    """A BChain scattered (the C loop from its rows, or its pairs made) is
    the loop over its pairs, and its pairs (collect) are last_first's; after
    another bag's pairs, in the chain's place."""
    rng = np.random.default_rng(seed)
    n, m, p = int(rng.integers(0, 9)), int(rng.integers(1, 6)), int(rng.integers(1, 4))
    size = int(rng.integers(1, 12))
    parts = _parts(rng, n, m, p, size)
    chain = BChain(parts, n, m)
    want = _chain_loop(np.zeros(size), parts, n, m)
    assert _same(scatter_reals(chain, size), want)
    assert len(chain) == n * m * p and chain.size() == 1 + n * m * p
    pairs, _work = collect(BPlus(chain, BEMPTY), LR())
    assert _same(pairs.vals, last_first([x for x, _ in parts], n, m, np.float64))
    assert _same(pairs.idx, last_first([ix for _, ix in parts], n, m, np.int64))
    first = BArray(_values(rng, (size,)))
    both = scatter_reals(BPlus(first, chain), size)
    assert _same(both, _chain_loop(np.zeros(size) + first.vals, parts, n, m))


@pytest.mark.parametrize("seed", range(6))
def test_chains_of_broadcast_index_rows_are_the_loop(kernels_impl, seed):
    """gmm's chains: every element's adds at the same indices, no cell twice
    (column sums of the rows last first, kept apart: the C loop's first
    path), or one cell per element's row, cells shared by elements (a sum
    kept in a register along the row); values whose sums depend on the
    order, every row layout."""
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(2, 400)), int(rng.integers(1, 8))
    cols = rng.permutation(2 * m + 3)[:2 * m]

    def _values(rng, shape):  # cancelling magnitudes (a few specials would make most sums NaN)
        x = rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 17, size=shape)
        if seed == 0:
            x.flat[rng.integers(0, x.size, size=3)] = [-0.0, math.inf, 5e-324]
        return x

    for layout in range(3):
        parts = []
        for k in range(2):
            x = _values(rng, (n, m))
            x = x[::-1] if layout == 1 else np.asfortranarray(x) if layout == 2 else x
            parts.append((x, np.broadcast_to(cols[k * m:(k + 1) * m].astype(np.int64), (n, m))))
        size = 2 * m + 3
        assert _same(scatter_reals(BChain(parts, n, m), size),
                     _chain_loop(np.zeros(size), parts, n, m))
        rows = [(_values(rng, (n, m)),
                 np.broadcast_to(rng.integers(0, 7, size=(n, 1)).astype(np.int64), (n, m)))
                for _k in range(2)]
        assert _same(scatter_reals(BChain(rows, n, m), 7), _chain_loop(np.zeros(7), rows, n, m))
    # a cell twice among the indices: the general loop, the same sums
    twice = [(_values(rng, (n, 3)), np.broadcast_to(np.array([1, 0, 1], dtype=np.int64), (n, 3)))]
    assert _same(scatter_reals(BChain(twice, n, 3), 2), _chain_loop(np.zeros(2), twice, n, 3))


def test_a_chain_with_an_index_out_of_range_is_left_to_the_general_path(kernels_impl):
    parts = [(np.ones((3, 2)), np.array([[0, 1], [1, 5], [0, 0]], dtype=np.int64))]
    assert scatter_reals(BChain(parts, 3, 2), 3) is None
    parts = [(np.ones((3, 2)), np.array([[0, 1], [1, -1], [0, 0]], dtype=np.int64))]
    assert scatter_reals(BChain(parts, 3, 2), 3) is None


def test_shared_adds_of_rows_at_indices_make_one_chain():
    """A nested loop's adds of rows at indices of their own to a shared cell:
    one BChain of the items, whose pairs are the chain of each element's adds
    (the general path, `padd` per element and item) in the same order."""
    from chad.arrays.nested_support import item_bag
    from chad.compile.support import padd

    rng = np.random.default_rng(3)
    n, m = 6, 3
    items = [("rows", _values(rng, (n, m)), rng.integers(0, 7, size=(n, m))),
             ("rows", _values(rng, (n, m)), np.arange(m))]
    cells = [None]
    shared_adds(cells, 0, items, n)
    assert type(cells[0]) is BChain
    loop = None
    for i in range(n):
        for item in items:
            loop = padd(item_bag(item, i), loop)
    want, _ = collect(loop, LR())
    got, _ = collect(cells[0], LR())
    assert _same(got.vals, want.vals)
    want_idx = np.arange(len(want.vals)) if want.idx is None else want.idx
    assert _same(got.idx, np.asarray(want_idx, dtype=np.int64))
    assert _same(_indices(None, 2, 3), np.broadcast_to(np.arange(3), (2, 3)))


def test_the_chain_loop_checks_every_index_before_adding():
    """An index out of range anywhere (in a part whose rows are all the same,
    or in the last row the loop reaches): False, and nothing added."""
    if not kernels.native():
        pytest.skip("the C extension is not built")
    good = np.array([[0, 1], [1, 2], [2, 0]], dtype=np.int64)
    for bad in (np.array([[0, 1], [1, 2], [2, 3]]), np.array([[-1, 1], [1, 2], [2, 0]]),
                np.broadcast_to(np.array([0, 9]), (3, 2))):
        out = np.arange(3.0)
        vals = (np.ones((3, 2)), np.ones((3, 2)))
        assert kernels.chain(out, vals, (good, bad.astype(np.int64))) is False
        assert _same(out, np.arange(3.0))
    out = np.zeros(3)
    assert kernels.chain(out, (np.ones((3, 2)),), (good,)) is True
    assert _same(out, np.array([2.0, 2.0, 2.0]))
    with pytest.raises(ValueError):
        kernels.chain(out, (np.ones((3, 2)),), (good[:2],))
    with pytest.raises(TypeError):
        kernels.chain(out, (np.ones((3, 2)),), (good.astype(np.float64),))
