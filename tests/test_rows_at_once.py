"""chad/arrays/cotangents.py `_rows_at_once` over several leaves (the rows an
outer loop's elements each add to a shared matrix: the MLP batch's weights) and
chad/arrays/bag.py's stacked runs in `dense_real` (a bias added to by every
element of an outer loop): bit for bit the row-by-row path (collect, scatter's
plusv per row, each row's dense sum) and a Python chain of float adds."""

from __future__ import annotations

import math

import numpy as np
import pytest

import chad
from chad import cotangents as C
from chad.arrays import cotangents as AC
from chad.arrays.bag import BEMPTY, BArray, BPlus, dense_real, to_dense
from chad.arrays.evaluate import element
from chad.arrays.nested_support import RowsTuple
from chad.transform.common import D2
from chad.types import ArrayT, Real

MATRIX = ArrayT(ArrayT(Real()))


def _bits(rows) -> bytes:
    """The bytes of the values, every NaN the same NaN: when two NaNs meet,
    which one an add returns (its sign) differs between Python and numpy
    already for one elementwise add (docs/compiler.md, "Values")."""
    a = np.array(rows, dtype=np.float64)
    a[np.isnan(a)] = np.nan
    return a.tobytes()


def _row_by_row(ct, primal):
    """The general path of densify (what it did before the fast path)."""
    n = len(primal)
    dense = to_dense(ct, n, D2(MATRIX.elem))
    return tuple(C.densify(MATRIX.elem, element(primal, i), dense[i]) for i in range(n))


def _chain(mats):
    out = np.zeros(mats[0].shape)
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            acc = 0.0
            for m in mats:
                acc = acc + float(m[i, j])
            out[i, j] = acc
    return out


def _cancelling(rng, k, n, m):
    mats = rng.standard_normal((k, n, m)) * 10.0 ** rng.integers(-8, 9, (k, n, m))
    mats[0] = 1e17
    mats[1:k - 1:2] = 1.0
    mats[k - 1] = -1e17
    special = rng.random((k, n, m)) < 0.05
    mats[special] = rng.choice((0.0, -0.0, math.inf, -math.inf, math.nan), int(special.sum()))
    return list(mats)


def _chain_bag(leaves):
    bag = leaves[0]
    for b in leaves[1:]:
        bag = BPlus(bag, b)
    return bag


@pytest.mark.parametrize("k,n,m", [(2, 1, 1), (3, 2, 5), (8, 4, 3), (64, 20, 10), (9, 1, 7)])
@pytest.mark.parametrize("kind", ["rows", "tuples", "mixed"])
def test_several_leaves_of_rows(k, n, m, kind):
    rng = np.random.default_rng(k * 100 + n * 10 + m)
    mats = _cancelling(rng, k, n, m)
    leaves = []
    for t, mat in enumerate(mats):
        as_rows = kind == "rows" or (kind == "mixed" and t % 2 == 0)
        leaves.append(BArray(RowsTuple(mat) if as_rows else tuple(BArray(r) for r in mat)))
    bag = _chain_bag(leaves)
    if kind == "mixed" and k > 2:
        bag = BPlus(BEMPTY, BPlus(leaves[0], _chain_bag(leaves[1:])))  # another tree shape
    primal = tuple(np.zeros(m) for _ in range(n))
    got = AC._rows_at_once(MATRIX, primal, bag, n)
    assert got is not None
    assert _bits(got) == _bits(_row_by_row(bag, primal)) == _bits(_chain(mats))
    assert _bits(AC.densify(MATRIX, primal, bag)) == _bits(got)


def test_leaves_it_does_not_take():
    primal = (np.zeros(2), np.zeros(2))
    mat = np.ones((2, 2))
    for bag in (BArray(RowsTuple(mat), np.array([1, 0])),                 # not the identity
                BPlus(BArray(RowsTuple(mat)), BArray(RowsTuple(np.ones((2, 3))))),
                BArray((BArray(np.ones(2)), BArray(np.ones(3)))),          # ragged
                BArray((BArray(np.ones(2)), BEMPTY))):
        assert AC._rows_at_once(MATRIX, primal, bag, 2) is None
    # the primal's rows are longer than the cotangent's: the general path decides
    assert AC._rows_at_once(MATRIX, (np.zeros(3), np.zeros(3)), BArray(RowsTuple(mat)), 2) is None


@pytest.mark.parametrize("k", [1, 7, 8, 9, 64])
def test_a_long_run_of_arrays_summed_as_a_block(k):
    rng = np.random.default_rng(k)
    mats = [m[0] for m in _cancelling(rng, max(k, 2), 1, 20)][:k]
    bag = _chain_bag([BArray(v) for v in mats])
    got = dense_real(bag, 20)
    want = np.zeros(20)
    for j in range(20):
        acc = 0.0
        for v in mats:
            acc = acc + float(v[j])
        want[j] = acc
    assert _bits(got) == _bits(want)


BATCH = """\
def batch(w : Array (Array R), b : Array R, xs : Array (Array R)) : R =
  sum (build (length xs) (\\k ->
    sum (build (length w) (\\i ->
      b ! i * sum (build (length (xs ! k)) (\\j -> w ! i ! j * xs ! k ! j))))))
"""


@pytest.mark.parametrize("evm", ["array", "map", "parallel"])
def test_a_batch_sharing_a_matrix_is_the_interpreters(evm):
    rng = np.random.default_rng(7)
    w = tuple(rng.standard_normal((6, 4)) * 10.0 ** rng.integers(-6, 7, (6, 4)))
    b = rng.standard_normal(6)
    xs = tuple(rng.standard_normal((12, 4)) * 1e3)
    got = chad.grad(BATCH, evm=evm)(w, b, xs)
    want = chad.grad(BATCH, evm=evm, backend="interp")(w, b, xs)
    assert got[0] == want[0]
    for g, h in zip(got[1], want[1]):
        assert _bits(g) == _bits(h)
