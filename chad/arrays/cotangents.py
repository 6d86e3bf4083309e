"""Array cotangents at the boundary (docs/language.md): JSON in, dense out.

    input   null -> BEmpty (the sparse zero); a list of the array's length ->
            BArray of the element cotangents (each decoded with its own sparsity)
    output  the dense cotangent: an array of the same length (numpy float64 for
            Array R, a tuple otherwise), zeros filled in; JSON: a list
"""

from __future__ import annotations

import numpy as np

from chad import cotangents as C
from chad.errors import UsageError
from chad.linear import LR
from chad.transform.common import D2
from chad.types import ArrayT, Real
from chad.values import _short

from chad.compile.ieee import quiet
from chad.compile.known import MatrixRows

from .bag import BEMPTY, Bag, BArray, to_dense
from .evaluate import element
from .nested_support import RowsTuple


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
    """The dense cotangent of an Array (Array R) whose bag is one BArray of the
    rows of a matrix (RowsTuple, a nested loop's reverse pass) and whose rows
    have the primal's lengths: 0.0 + each element, as the rows one by one
    would give it, in one pass; else None."""
    if not (type(ct) is BArray and ct.idx is None and type(ct.vals) is RowsTuple
            and isinstance(ty.elem, ArrayT) and isinstance(ty.elem.elem, Real)):
        return None
    mat = ct.vals.matrix
    if mat.shape[0] != n or mat.dtype != np.float64:
        return None
    m = mat.shape[1]
    if not (type(primal) is MatrixRows and primal.shape() == mat.shape):
        for row in primal:
            if len(row) != m:
                return None
    with quiet():
        return tuple(np.add(mat, 0.0))
