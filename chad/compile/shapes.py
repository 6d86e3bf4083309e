"""Broadcasting in the support code of vectorised loops, without numpy's
Python-level wrapper where there is nothing to broadcast.

`np.broadcast_to` costs about 3 µs a call, most of it argument checking; in
a small loop's reverse pass (kmeans and gmm over 10^3 points) it ran 11 to 18
times a call, mostly on arrays already of the shape asked for. `broadcast`
gives such an array itself. Its callers only read the result (or copy it),
as they did the view np.broadcast_to gave: the memory read is the same.
"""

from __future__ import annotations

import numpy as np

_F64 = np.dtype(np.float64)


def broadcast(x, shape: tuple, dtype=_F64):
    """x as an array of `dtype` and `shape`: x itself when it already is one,
    else np.broadcast_to's read-only view (after a conversion to dtype)."""
    if type(x) is np.ndarray and x.shape == shape and x.dtype == dtype:
        return x
    return view(np.asarray(x, dtype=dtype), shape)


def view(x, shape: tuple):
    """np.broadcast_to(x, shape) for an array x: the same read-only view,
    made by the ndarray constructor over x's memory (strides of 0 along the
    broadcast axes) where x is C-contiguous, at a third of np.broadcast_to's
    cost; np.broadcast_to itself otherwise (and for its errors)."""
    if type(x) is not np.ndarray or not x.flags.c_contiguous or x.ndim > len(shape) \
            or not x.size:
        return np.broadcast_to(x, shape)
    if x.ndim == 2 == len(shape):  # (the common case, without the loop below)
        (n, m), (a, b), (sa, sb) = shape, x.shape, x.strides
        if (a == n or a == 1) and (b == m or b == 1):
            out = np.ndarray(shape, x.dtype, x, 0, (sa if a == n else 0, sb if b == m else 0))
            out.setflags(write=False)
            return out
        return np.broadcast_to(x, shape)  # (its error)
    lead = len(shape) - x.ndim
    strides = [0] * lead
    for d, n, st in zip(shape[lead:], x.shape, x.strides):
        if n == d:
            strides.append(st)
        elif n == 1:
            strides.append(0)
        else:
            return np.broadcast_to(x, shape)  # (its error)
    out = np.ndarray(shape, x.dtype, x, 0, tuple(strides))
    out.flags.writeable = False
    return out
