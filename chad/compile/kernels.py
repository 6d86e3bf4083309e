"""Loops numpy lacks, in C where it was built (chad/compile/_kernels.c), with
numpy's equivalents, which give the same values, otherwise (docs/compiler.md,
"Native loops").

Running sums in the evaluator's order: the sums of a vectorised reverse
pass's adds to a cell.

The evaluator adds an EVM cell's contributions one after the other (Efficient
CHAD (Smeding & Vákár), §5: `add` on a cell), so the compiled backend, to give
its values bit for bit, sums them sequentially: s = ((s + x0) + x1) + ...
numpy has no sequential reduction (np.sum is pairwise) but np.cumsum, which
stores every partial sum; the C extension chad.compile._kernels (setup.py)
makes the same additions in a loop that stores nothing, about 4 times as
fast.

`running(parts, masks, n, start)`: the sum of a shared cell's adds in a pass
(vector_support.Pass.flush): element 0's adds (part 0's, part 1's, ...), then
element 1's, ...; a part's mask drops the elements that did not run its add.
`rows(values, n, start)`: each outer element's sum of its w adds (an inner
loop's, chad/arrays/nested_support.py: inner_adds).
"""

from __future__ import annotations

import os

import numpy as np

from .ieee import quiet

try:
    if os.environ.get("CHAD_NATIVE", "").strip() == "0":
        raise ImportError("CHAD_NATIVE=0")
    from . import _kernels as _native
except ImportError:  # not built: numpy's running sums
    _native = None

_F64 = np.dtype(np.float64)


def native() -> bool:
    """Whether the C loops run (else np.cumsum)."""
    return _native is not None


def _flat(a) -> np.ndarray:
    """a as a 1-D array of float64 (a view where it can be: a broadcast of one
    value keeps its zero stride)."""
    a = np.asarray(a)
    if a.dtype != _F64:
        a = a.astype(_F64)
    return a if a.ndim == 1 else a.reshape(-1)


def running(parts: list, masks: list, n: int, start):
    """The running sum of the parts' values from start (a float; None: from the
    first value added), in the evaluator's order (module doc): its last value,
    or None when no value was added (whatever start). parts[p] holds n x w_p values, element by
    element; masks[p] None or a bool array of n."""
    parts = [_flat(p) for p in parts]
    masks = [None if m is None else _mask(m, n) for m in masks]
    if _native is not None:
        return _native.running(tuple(parts), tuple(masks), n, None if start is None
                               else float(start))
    return _numpy_running(parts, masks, n, start)


def _mask(m, n: int) -> np.ndarray:
    """A mask as a 1-D bool array of n (one bool: for every element)."""
    m = np.asarray(m, dtype=bool)
    if m.size == 1 and n != 1:
        return np.broadcast_to(m.reshape(()), (n,))
    return m.reshape(-1)


def _numpy_running(parts: list, masks: list, n: int, start):
    if any(p.size % n if n else p.size for p in parts):
        raise ValueError("running: a part is not n rows")
    if not n or not parts:
        return None
    if len(parts) == 1 and masks[0] is None:
        seq = parts[0]
    else:
        rows = [p.reshape(n, -1) for p in parts]
        seq = np.concatenate(rows, axis=1)
        if any(m is not None for m in masks):  # the adds each element made
            keep = np.concatenate([
                np.ones(r.shape, dtype=bool) if m is None
                else np.broadcast_to(m.reshape(n, 1), r.shape)
                for r, m in zip(rows, masks)], axis=1)
            seq = seq[keep]
        seq = seq.reshape(-1)
    if not seq.size:
        return None
    if start is not None:
        seq = np.concatenate((np.asarray([start], dtype=_F64), seq))
    with quiet():
        return float(np.cumsum(seq)[-1])


def rows(values, n: int, start) -> np.ndarray:
    """A new array of n reals: row i's running sum of values' row i (n x w
    values, w >= 1 when start is None) from start[i] (an array of n; None:
    from the row's first value)."""
    values = _flat(values)
    w = values.size // n if n else 0
    if start is not None:
        start = np.broadcast_to(np.asarray(start, dtype=_F64), (n,))
    if _native is not None:
        out = np.empty(n, dtype=_F64)
        _native.rows(values, n, start, out)
        return out
    if not n:
        return np.zeros(0)
    seq = values.reshape(n, w)
    if start is not None:
        seq = np.concatenate((start[:, None], seq), axis=1)
    with quiet():
        return np.ascontiguousarray(np.cumsum(seq, axis=1)[:, -1])


SELECT_MIN = 512  # fewer elements: np.where (the mask's branches cost less than a call)


def select(c, a, b):
    """np.where(c, a, b) for a bool array c and reals a, b (arrays of float64
    or floats), bit for bit, by the C loop where the three are one-dimensional
    after broadcasting (or views of one C-ordered block)."""
    if _native is None or type(c) is not np.ndarray or c.dtype != np.bool_ \
            or c.size < SELECT_MIN:
        return np.where(c, a, b)
    x, y = _real_operand(a), _real_operand(b)
    if x is None or y is None:
        return np.where(c, a, b)
    shape = c.shape
    if len(shape) == 1 and _whole_or_one(x, shape) and _whole_or_one(y, shape):
        out = np.empty(shape, dtype=_F64)
        _native.select(c, x, y, out)
        return out
    return _select_block(c, x, y, a, b)


def _whole_or_one(x, shape: tuple) -> bool:
    return type(x) is float or x.shape == shape


def _select_block(c, x, y, a, b):
    """select of operands broadcast together, or of blocks of a region of rank
    2 or more: flat when each is the whole block, C-ordered, or one value;
    else np.where."""
    x, y = (np.array(v, dtype=_F64) if type(v) is float else v for v in (x, y))
    shape = np.broadcast_shapes(c.shape, x.shape, y.shape)
    if not all(v.shape == shape and v.flags.c_contiguous or v.size == 1 for v in (c, x, y)):
        if len(shape) != 1:
            return np.where(c, a, b)
    out = np.empty(shape, dtype=_F64)
    flat = out.reshape(-1)
    size = flat.shape
    c, x, y = (v.reshape(-1) if v.shape == shape else v for v in (c, x, y))
    _native.select(c if c.shape == size else np.broadcast_to(c, size),
                   _one_or_all(x, size), _one_or_all(y, size), flat)
    return out


def _one_or_all(x, size: tuple):
    """An operand of the C select: the array of all elements, or its one value
    as a Python float."""
    if x.shape == size:
        return x
    if x.size == 1:
        return float(x.reshape(()))
    return np.broadcast_to(x, size)


def _real_operand(x):
    """x as a float or an array of float64 (no copy), or None (np.where decides
    the type)."""
    if type(x) is float:
        return x
    if type(x) is np.float64:
        return float(x)
    if type(x) is np.ndarray and x.dtype == _F64:
        return x
    return None


_I64 = np.dtype(np.int64)


def select_ints(c, a, b):
    """np.where(c, a, b) for a bool array c and int64 integers a, b (int64
    arrays, or Python ints within int64), bit for bit: the C select on their
    64 bits (read as float64, never computed with); else np.where."""
    if _native is None or type(c) is not np.ndarray or c.dtype != np.bool_ \
            or c.ndim != 1 or c.size < SELECT_MIN:
        return np.where(c, a, b)
    x, y = _int_bits(a, c.shape), _int_bits(b, c.shape)
    if x is None or y is None:
        return np.where(c, a, b)
    out = np.empty(c.shape, dtype=_I64)
    _native.select(c, x, y, out.view(_F64))
    return out


def _int_bits(x, shape: tuple):
    """x's 64 bits as a 1-D float64 array of `shape` (a view; an int as a
    broadcast of one), or None (np.where decides)."""
    if type(x) is np.ndarray:
        return x.view(_F64) if x.dtype == _I64 and x.shape == shape else None
    if type(x) is int and -2 ** 63 <= x < 2 ** 63:
        return np.broadcast_to(np.array(x, dtype=_I64).view(_F64), shape)
    return None
