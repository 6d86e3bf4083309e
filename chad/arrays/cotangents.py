"""Array cotangents at the boundary (docs/language.md): JSON in, dense out.

    input   null -> BEmpty (the sparse zero); a list of the array's length ->
            BArray of the element cotangents (each decoded with its own sparsity)
    output  the dense cotangent: an array of the same length (numpy float64 for
            Array R, a tuple otherwise), zeros filled in; JSON: a list
"""

from __future__ import annotations

import sys

import numpy as np

from chad import cotangents as C
from chad.errors import UsageError
from chad.linear import LR
from chad.transform.common import D2
from chad.types import ArrayT, Int, Real, UnitT
from chad.values import _short

from chad.compile.ieee import quiet
from chad.compile.known import NO_NEG_ZERO, MatrixRows
from chad.compile.order import column_sums
from chad.compile.scaled import ScaledRows

from .bag import BEMPTY, Bag, BArray, BPlus, leaves, to_dense
from .evaluate import element
from .nested_support import RowsTuple

_SOLE = 4  # references to a matrix only a bag holds, seen in _rows_at_once


def ctg_from_json(ty: ArrayT, j, path: str, primal=None):
    if j is None:
        return BEMPTY
    if isinstance(j, Bag):
        return j
    if isinstance(j, np.ndarray):
        j = j.tolist()
    if not isinstance(j, (list, tuple)):
        raise UsageError(f"{path}: expected a list or null (cotangent of {ty}), got {_short(j)}")
    if primal is not None and len(j) != len(primal):
        raise UsageError(f"{path}: expected a list of length {len(primal)} (the length of "
                         f"the array), got one of length {len(j)}")
    elems = [C.ctg_from_json(ty.elem, x, f"{path}[{i}]",
                             None if primal is None else element(primal, i))
             for i, x in enumerate(j)]
    if isinstance(ty.elem, Real):
        return BArray(np.asarray(elems, dtype=np.float64))
    return BArray(tuple(elems))


def densify(ty: ArrayT, primal, ct):
    n = len(primal)
    if isinstance(ty.elem, (Int, UnitT)):  # (C.densify's None for every element)
        return (None,) * n
    rows = _rows_at_once(ty, primal, ct, n)
    if rows is not None:
        return rows
    lt = D2(ty.elem)
    dense = to_dense(BEMPTY if ct is None else ct, n, lt)
    if isinstance(lt, LR) and isinstance(ty.elem, Real):
        return dense
    # Dense cotangents of non-real elements are tuples (of None for Z, () and Bool).
    return tuple(C.densify(ty.elem, element(primal, i), dense[i]) for i in range(n))


def dense_to_json(ty: ArrayT, v):
    return [C.dense_to_json(ty.elem, x) for x in v]


def _rows_at_once(ty: ArrayT, primal, ct, n: int):
    """The dense cotangent of an Array (Array R) whose bag's leaves all hold
    the rows of an n x m matrix at the identity indices (`_matrix_of`: a
    RowsTuple of a nested loop's reverse pass, one per outer element when an
    outer loop's elements add to the same rows, or a tuple of BArrays of m
    reals) and whose rows have the primal's lengths: each element 0.0 + its
    values in the leaves' order, as collect, scatter's plusv per row and each
    row's dense sum give it, in one pass (several matrices: their column sums,
    chad/compile/order.py); else None."""
    if ct is None or not (isinstance(ty.elem, ArrayT) and isinstance(ty.elem.elem, Real)):
        return None
    if type(ct) is BArray:
        mats = [_matrix_of(ct, n)]
    elif type(ct) is BPlus:
        mats = [_matrix_of(b, n) for b, _nodes in leaves(ct) if b is not BEMPTY]
    else:
        return None
    if not mats or mats[0] is None:
        return None
    shape = mats[0].shape
    if any(m is None or m.shape != shape for m in mats[1:]):
        return None
    if not (type(primal) is MatrixRows and primal.shape() == shape):
        for row in primal:
            if len(row) != shape[1]:
                return None
    with quiet():
        if len(mats) == 1:
            mat = mats[0]
            if (type(mat) is ScaledRows and not mat.made and mat.free_of_negative_zero()
                    and sys.getrefcount(mat) <= _SOLE):
                # a block of products kept as its factors (chad/compile/
                # scaled.py) that only the bag holds and that nothing made
                # yet (so no one else holds its array: a made one may be
                # held, or be a view of another's): made now, in one pass,
                # and given up as the matrix below is (recorded as that is)
                return tuple(NO_NEG_ZERO.add(mat.array()))
            if (mat in NO_NEG_ZERO and mat.flags.writeable and mat.flags.owndata
                    and sys.getrefcount(mat) <= _SOLE):
                # sums from +0.0, to which adding 0.0 changes nothing, that
                # only the bag holds (its RowsTuple's slot, the list, the
                # name, getrefcount's argument): the bag gives them up
                return tuple(mat)
            return tuple(np.add(mat, 0.0))
        block = np.stack(mats).reshape(len(mats), -1)
        return tuple(column_sums(block).reshape(shape))


def _matrix_of(b, n: int):
    """The n x m float64 matrix of a leaf BArray (identity indices) of n rows,
    each BArray (identity indices) of m reals; else None."""
    if type(b) is not BArray or b.idx is not None or len(b.vals) != n:
        return None
    vals = b.vals
    if type(vals) is RowsTuple:
        mat = vals.matrix
        return mat if mat.ndim == 2 and mat.dtype == np.float64 else None
    if type(vals) is not tuple or not n:
        return None
    rows = []
    for r in vals:
        if not (type(r) is BArray and r.idx is None and type(r.vals) is np.ndarray
                and r.vals.ndim == 1 and r.vals.dtype == np.float64):
            return None
        rows.append(r.vals)
    m = len(rows[0])
    if m < 1 or any(len(r) != m for r in rows):
        return None
    return np.stack(rows)
