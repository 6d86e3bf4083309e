"""Index arrays known to be a loop index shifted and clamped, for the compiled
runtime.

A stencil reads its neighbours at clamped indices (examples/stencil.chad:
`a ! clamp(i - 1, n)`, `clamp` an `if` that returns 0 below 0 and n - 1 above
n - 1). Vectorised over the build's loop (chad/compile/vectorise.py), that index
is `clip(iota + c, lo, hi)`; its gather in the forward pass and, in Efficient
CHAD (Smeding & Vákár), §8.1, the scatter of the gather's cotangents in the
reverse pass, read it. Made by `add` (iota, or such an array, plus an integer)
and `clamp` (`vector_support.vclamp`, the `if` recognised by
chad/compile/clamps.py), it is recorded here with its shift c and bounds, so:

* its bounds check is O(1): the array never decreases, so its least and
  greatest elements are its first and last;
* its gather (`gather`) is three slices: the first element copied into the
  leading clamped run, a contiguous slice, the last element into the
  trailing run (no fancy indexing);
* its scatter (`scatter`) is the two clamped runs' adds, in order, and one
  elementwise add of the slice in between (every index there is hit once).

Lines (`line`, `affine`): a nested region's loop index, on its axis of a
block, and it times an integer >= 0 or plus an integer, recorded as
s * arange(size) + c in C order (any shape): their bound is O(1), their
gather a strided slice (`line_gather`) and, for s >= 1, their scatter one
elementwise add of a strided slice (every index once: np.add.at's adds).

Every element gets the same additions in the same order as np.add.at's (in
index order k = 0, 1, ...: the leading run, then the slice, then the trailing
run), so the values are the same bits. A recorded array is read-only for good
(a view of a read-only array, whose WRITEABLE flag numpy refuses to set:
known.iota's device), so its fact cannot go stale; compiled code never hands
one to a caller (vector_support.vout copies it). Facts are known by the array's
identity while it lives, as in chad/compile/known.py.
"""

from __future__ import annotations

import numpy as np

from . import kernels
from .known import Known, is_iota

_I64 = 2 ** 63


# the recorded arrays, by identity (chad/compile/known.py), with their facts:
# FACTS clip(arange(n) + c, lo, hi) as (c, lo, hi); LINES s * arange(size) + c
# in C order as (s, c)
FACTS = Known()
LINES = Known()

_RECENT: list = []  # the last few recorded arrays, given again for the same fact
RECENT = 4
_RECENT_LINES: list = []  # the same for lines
RECENT_LINES = 8


def _recent_in(table: Known, recent: list, shape: tuple, f):
    """A recorded array of that shape and fact made lately, or None."""
    for a in recent:
        if a.shape == shape and table.fact(a) == f:
            return a
    return None


def _record_in(table: Known, recent: list, keep: int, values: np.ndarray, f) -> np.ndarray:
    """values (a new int64 array holding what f says) made read-only for good
    and recorded with f; the recorded view is returned, and kept among the
    `keep` last (a function called repeatedly at one size makes its index
    arrays once, as known.iota)."""
    if values.base is not None:  # (a view: numpy would let its owner be written)
        values = values.copy()
    values.flags.writeable = False
    a = values[...]
    table.add(a, f)
    recent.insert(0, a)
    del recent[keep:]
    return a


def _recent(n: int, shift: int, lo, hi):
    return _recent_in(FACTS, _RECENT, (n,), (shift, lo, hi))


def _record(values: np.ndarray, shift: int, lo, hi) -> np.ndarray:
    """values (clip(arange(n) + shift, lo, hi)) recorded (_record_in)."""
    return _record_in(FACTS, _RECENT, RECENT, values, (shift, lo, hi))


def fact(a):
    """(c, lo, hi) when a is recorded as clip(arange(len(a)) + c, lo, hi)
    (lo, hi None: no bound; lo <= hi when both are given), iota's (0, None,
    None), else None."""
    f = FACTS.fact(a)
    if f is not None:
        return f
    if is_iota(a):
        return 0, None, None
    return None


def recorded(a) -> bool:
    """a is a recorded index array: iota, a shifted and clamped one, a line."""
    return a in FACTS or a in LINES or is_iota(a)


def bound(a) -> int | None:
    """The largest magnitude in a recorded array (its first or last element
    in C order: it never decreases, a line's scale being at least 0), or
    None for an array not recorded."""
    if not recorded(a):
        return None
    if not a.size:
        return 0
    flat = a.reshape(-1)
    return max(abs(int(flat[0])), abs(int(flat[-1])))


def add(x, y):
    """x + y on Z for a recorded x and an integer y (either order): a new
    recorded array, or None (then the general path) when neither operand is
    so or the sum might leave int64."""
    if type(y) is not int and type(x) is int:
        x, y = y, x
    if type(y) is not int or not -_I64 <= y < _I64:  # (numpy's int64 add of y)
        return None
    f = fact(x)
    if f is None:
        return None
    if len(x) and max(abs(int(x[0]) + y), abs(int(x[-1]) + y)) >= _I64:
        return None
    c, lo, hi = f
    fact2 = (c + y, None if lo is None else lo + y, None if hi is None else hi + y)
    made = _recent(len(x), *fact2)
    return made if made is not None else _record(np.add(x, y), *fact2)


def clamp(x, lo: int, hi: int):
    """clip(x, lo, hi) for a recorded x and integers lo <= hi within int64:
    a new array, recorded when it is one (the bounds' intersection not
    empty), or None for an x not recorded."""
    f = fact(x)
    if f is None:
        return None
    c, l0, h0 = f
    new_lo = lo if l0 is None else max(l0, lo)
    new_hi = hi if h0 is None else min(h0, hi)
    if new_lo > new_hi:  # (every element one bound: not a shifted index)
        return np.clip(x, lo, hi)
    made = _recent(len(x), c, new_lo, new_hi)
    return made if made is not None else _record(np.clip(x, lo, hi), c, new_lo, new_hi)


def _runs(f, m: int) -> tuple[int, int]:
    """(L, R): elements 0..L-1 are clamped to lo, R..m-1 to hi, L..R-1 are
    i + c."""
    c, lo, hi = f
    left = 0 if lo is None else min(max(lo - c, 0), m)
    right = m if hi is None else min(max(hi - c + 1, 0), m)
    return left, right


def gather(a, idx):
    """a[idx] for a 1-D numpy a and a recorded idx, or None (not recorded,
    empty, or an index out of range: the caller's path reports it)."""
    f = fact(idx)
    if f is None or type(a) is not np.ndarray or a.ndim != 1:
        return None
    m = len(idx)
    if not m or int(idx[0]) < 0 or int(idx[-1]) >= len(a):
        return None
    left, right = _runs(f, m)
    c = f[0]
    out = np.empty(m, dtype=a.dtype)
    if left:
        out[:left] = a[f[1]]
    out[left:right] = a[left + c:right + c]
    if right < m:
        out[right:] = a[f[2]]
    return out


def scatter(out: np.ndarray, idx, vals) -> bool | None:
    """out[idx[k]] += vals[k] in order k = 0, 1, ... (np.add.at's additions)
    for a recorded idx and 1-D float64 out and vals: True; None when idx is
    not recorded or an index is out of range (nothing added: the caller's
    path then runs and reports it)."""
    f = fact(idx)
    if f is None:
        return _line_scatter(out, idx, vals)
    if type(vals) is not np.ndarray or vals.dtype != np.float64 or vals.shape != idx.shape:
        return None
    m = len(idx)
    if not m:
        return True
    if int(idx[0]) < 0 or int(idx[-1]) >= len(out):
        return None
    left, right = _runs(f, m)
    c = f[0]
    if left:
        _run_adds(out, f[1], vals[:left])
    if left < right:
        part = out[left + c:right + c]
        np.add(part, vals[left:right], out=part)
    if right < m:
        _run_adds(out, f[2], vals[right:])
    return True


# ----------------------------------------------------------------- lines: s * i + c


def recent_line(shape: tuple, scale: int, shift: int):
    """A recorded line of that shape, scale and shift made lately, or None."""
    return _recent_in(LINES, _RECENT_LINES, shape, (scale, shift))


def line(values: np.ndarray, scale: int, shift: int) -> np.ndarray:
    """values (a new int64 array, scale * arange(values.size) + shift in C
    order) recorded as a line (_record_in), kept among the RECENT_LINES last."""
    return _record_in(LINES, _RECENT_LINES, RECENT_LINES, values, (scale, shift))


def affine(a):
    """(s, c) when a is recorded as s * arange(a.size) + c (C order; iota's
    (1, 0), a shifted index's when unclamped), else None."""
    f = LINES.fact(a)
    if f is not None:
        return f
    f = fact(a)
    if f is not None and f[1] is None and f[2] is None:
        return 1, f[0]
    return None


def _line_op(x, scale: int, shift: int):
    """The line x * scale + shift of a recorded line x (both ints), or None
    when x is not one or the result might leave int64."""
    f = affine(x)
    # (numpy's int64 operation takes scale and shift as int64s themselves)
    if f is None or x.dtype != np.int64 or not (-_I64 <= shift < _I64 and 0 <= scale < _I64):
        return None
    s, c = f
    s2, c2 = s * scale, c * scale + shift
    last = c2 + s2 * (x.size - 1) if x.size else c2
    if not (-_I64 <= c2 < _I64 and -_I64 <= last < _I64):
        return None
    made = recent_line(x.shape, s2, c2)
    if made is not None:
        return made
    return line(np.add(np.multiply(x, scale), shift) if scale != 1 else np.add(x, shift),
                s2, c2)


def line_add(x, y):
    """x + y on Z for a recorded line x and an int y (either order), or None."""
    if type(y) is not int and type(x) is int:
        x, y = y, x
    if type(y) is not int:
        return None
    return _line_op(x, 1, y)


def line_mul(x, y):
    """x * y on Z for a recorded line x and an int y >= 0 (either order), or None."""
    if type(y) is not int and type(x) is int:
        x, y = y, x
    if type(y) is not int or y < 0:
        return None
    return _line_op(x, y, 0)


def line_gather(a, idx):
    """a[idx] for a 1-D numpy a and a recorded line idx of a scale >= 1: a
    strided slice of a copied in idx's shape (a new array, as fancy indexing
    gives: the callers may hand it over or take it as their own), or None
    (not such an idx, empty, or an index out of range: the caller's path
    reports it)."""
    f = affine(idx)
    if f is None or type(a) is not np.ndarray or a.ndim != 1 or f[0] < 1 or not idx.size:
        return None
    s, c = f
    last = c + s * (idx.size - 1)
    if c < 0 or last >= len(a):
        return None
    return a[c:last + 1:s].reshape(idx.shape).copy()


def _line_scatter(out: np.ndarray, idx, vals) -> bool | None:
    """scatter's adds for a recorded line of a scale >= 1 (every index hit
    once, in order): one elementwise add of a strided slice of out."""
    f = affine(idx)
    if (f is None or f[0] < 1 or type(vals) is not np.ndarray or vals.dtype != np.float64
            or vals.shape != idx.shape or out.ndim != 1):
        return None
    if not idx.size:
        return True
    s, c = f
    last = c + s * (idx.size - 1)
    if c < 0 or last >= len(out):
        return None
    part = out[c:last + 1:s]
    np.add(part, vals.reshape(-1), out=part)
    return True


def _run_adds(out: np.ndarray, j: int, vals: np.ndarray) -> None:
    """out[j] += each of vals, one after the other."""
    if len(vals) == 1:
        out[j] = out[j] + vals[0]
        return
    idx = np.full(len(vals), j, dtype=np.int64)
    if kernels.scatter(out, idx, vals) is None:  # (no C loop)
        np.add.at(out, idx, vals)
