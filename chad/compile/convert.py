"""Fast conversions at the boundary of compiled code: arguments in, cotangents
in, dense gradients out, specialised once per type.

Each converter handles the common shapes (floats, pairs of them, float arrays)
with the result the general functions give (chad/values.py `value_from_json`,
chad/cotangents.py `ctg_from_json` and `densify`), and hands anything else to
those functions, which also produce the error messages. A compiled gradient of
`x * y + sin x` spends most of its time here unless this is fast.
"""

from __future__ import annotations

import numpy as np

from chad.compile.known import MatrixRows
from chad.cotangents import _codec, ctg_from_json, densify
from chad.types import ArrayT, Int, Prod, Real, Type, UnitT

_SLOW = object()
_NDARRAY = {np.ndarray}
_F64 = np.dtype(np.float64)


def _fast_value(ty: Type, copy: bool = True):
    """value -> the decoded value, or _SLOW when the general path must decide.
    An Array R given as a float64 numpy array is copied, unless `copy` is False:
    for a call whose results cannot hold the array (compiled code never changes
    an array in place), so that nothing the caller does to it later changes them."""
    if isinstance(ty, Real):
        return lambda j: j if type(j) is float else _SLOW
    if isinstance(ty, Prod):
        fa, fb = _fast_value(ty.left, copy), _fast_value(ty.right, copy)

        def pair(j):
            if type(j) is not tuple and type(j) is not list or len(j) != 2:
                return _SLOW
            a = fa(j[0])
            if a is _SLOW:
                return _SLOW
            b = fb(j[1])
            if b is _SLOW:
                return _SLOW
            return (a, b)

        return pair
    if isinstance(ty, ArrayT) and isinstance(ty.elem, Real):
        def floats(j):
            if type(j) is np.ndarray and j.ndim == 1 and j.dtype == np.float64:
                return j.copy() if copy else j
            return _SLOW

        return floats
    if isinstance(ty, ArrayT) and isinstance(ty.elem, ArrayT) and isinstance(ty.elem.elem, Real):
        def rows(j):
            # a 2-D float64 array, or a list or tuple of float64 rows (a matrix
            # as the API takes it): the tuple of the rows, copied unless `copy`
            # is False; without copies (a call whose results cannot hold the
            # rows, so the caller never sees this type) a known.MatrixRows,
            # whose matrix vectorised code reads at once
            if type(j) is np.ndarray:
                if j.ndim != 2 or j.dtype != np.float64:
                    return _SLOW
                if copy:  # rows the results may hold: each its own copy, as below
                    return tuple([r.copy() for r in j])
                mat = np.ascontiguousarray(j)
                return MatrixRows(tuple(mat), mat)
            if type(j) is not list and type(j) is not tuple:
                return _SLOW
            if not copy and len(j) > 1 and set(map(type, j)) == _NDARRAY \
                    and all(r.dtype is _F64 and r.ndim == 1 for r in j):
                return MatrixRows(j)  # the matrix made if vectorised code reads it
            for r in j:
                if not (type(r) is np.ndarray and r.ndim == 1 and r.dtype == np.float64):
                    return _SLOW
            return tuple([r.copy() for r in j]) if copy else tuple(j)

        return rows
    return lambda j: _SLOW


def arguments(params, copy: bool = True) -> callable:
    """args -> the list of parameter values (decode_args' values); `copy` as
    for _fast_value."""
    fast = [_fast_value(p.ty, copy) for p in params]
    n = len(params)
    if all(isinstance(p.ty, Real) for p in params):
        def reals(args, slow):
            if len(args) == n:
                for a in args:
                    if type(a) is not float:
                        return slow(args)
                return args
            return slow(args)

        return reals

    def decode(args, slow):
        if len(args) == n:
            out = []
            for f, a in zip(fast, args):
                v = f(a)
                if v is _SLOW:
                    break
                out.append(v)
            else:
                return out
        return slow(args)

    return decode


def value_independent(ty: Type) -> bool:
    """True when decoding a cotangent of ty needs no primal value (no sums or
    arrays, whose cotangents are checked against the value's sides and lengths)."""
    if isinstance(ty, (Real, Int, UnitT)):
        return True
    if isinstance(ty, Prod):
        return value_independent(ty.left) and value_independent(ty.right)
    return False


def cotangent(ty: Type) -> callable:
    """ctg -> the sparse cotangent (ctg_from_json's), for value-independent ty."""
    if isinstance(ty, Real):
        return lambda j: j if type(j) is float else ctg_from_json(ty, j, "ctg")
    fast = _fast_value(ty)

    def decode(j):
        v = fast(j)
        return ctg_from_json(ty, j, "ctg") if v is _SLOW else v

    return decode


def _fast_dense(ty: Type):
    if isinstance(ty, Real):
        return lambda v, c: c if type(c) is float else densify(ty, v, c)
    if isinstance(ty, Prod):
        fa, fb = _fast_dense(ty.left), _fast_dense(ty.right)

        def pair(v, c):
            if c is None:
                return densify(ty, v, c)
            return (fa(v[0], c[0]), fb(v[1], c[1]))

        return pair
    ext = _codec(ty, "densify")  # a type former's own (arrays): looked up once
    if ext is not None:
        return lambda v, c: ext(ty, v, c)
    return lambda v, c: densify(ty, v, c)


def gradients(params) -> callable:
    """(values, cells) -> the dense gradient, one per parameter."""
    fast = [_fast_dense(p.ty) for p in params]
    if all(isinstance(p.ty, Real) for p in params):
        def reals(vals, cells):
            return tuple([c if type(c) is float else densify(Real(), None, c) for c in cells])

        return reals

    def dense(vals, cells):
        return tuple([f(v, c) for f, v, c in zip(fast, vals, cells)])

    return dense
