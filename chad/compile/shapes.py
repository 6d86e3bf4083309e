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
    return np.broadcast_to(np.asarray(x, dtype=dtype), shape)
