"""Facts about arrays known by construction, for the compiled runtime.

The gathers of Efficient CHAD (Smeding & Vákár), §8.1, read an array through an
index array; a build's read `a ! i` at its own loop index gives the index array
`build n (\\i -> i)`, the identity 0..n-1. Compiled vectorised code
(chad/compile/vector_support.py) makes that array with `iota` and records it in
IOTA, so that the gather can be a view (no copy, no bounds check past the
length) and the bag `BArray idx vals` can drop its indices (a dense cotangent,
added without a scatter by index).

NO_NEG_ZERO records arrays of cotangent sums that started from a real other
than -0.0 (the per-element cells of a vectorised reverse pass): in
round-to-nearest such a sum is never -0.0, so adding 0.0 to each element, as
turning a bag into a dense array does, changes nothing, and `to_dense` may
skip that pass (chad/arrays/bag.py).

ONE_HOT records the leaf cotangents of a fold by max or min (`unTree`: +0.0
but at the winning element, read-only), with that element's index: added to
an array of sums (NO_NEG_ZERO), they change that one element (adding +0.0
changes no sum that is not -0.0), so `to_dense` adds that element alone.

Nothing else is changed: the values are the same as through the general path,
and the counting evaluator, which never records an array here, takes its
general path. An array is known by its identity (`id`) while it lives: a weak
reference checks that the object at that id is still the recorded one.
"""

from __future__ import annotations

import math
import weakref

import numpy as np


class _Ref(weakref.ref):
    """A weak reference that remembers the id it is filed under (and a fact
    about the array, for ONE_HOT)."""

    __slots__ = ("key", "fact")


class Known:
    """A set of live arrays, by identity."""

    __slots__ = ("_refs", "_drop")

    def __init__(self) -> None:
        self._refs: dict[int, weakref.ref] = {}
        refs = self._refs

        def drop(ref) -> None:  # one callback for all (no closure made per add)
            if refs.get(ref.key) is ref:
                del refs[ref.key]

        self._drop = drop

    def add(self, a: np.ndarray, fact=None) -> np.ndarray:
        ref = _Ref(a, self._drop)
        ref.key = key = id(a)
        ref.fact = fact
        self._refs[key] = ref
        return a

    def __contains__(self, a) -> bool:
        r = self._refs.get(id(a))
        return r is not None and r() is a

    def fact(self, a):
        """The fact recorded with a, or None if a is not recorded."""
        r = self._refs.get(id(a))
        return r.fact if r is not None and r() is a else None

    def __len__(self) -> int:
        return len(self._refs)


IOTA = Known()
NO_NEG_ZERO = Known()
ONE_HOT = Known()  # read-only arrays of +0.0 but at one index, the recorded fact


def clear_of_negative_zero(start) -> bool:
    """Sums started from `start` are never -0.0 (round to nearest: x + y is
    -0.0 only for -0.0 + -0.0): start a real other than -0.0. Such an array
    may be recorded in NO_NEG_ZERO."""
    return isinstance(start, float) and not (start == 0.0 and math.copysign(1.0, start) < 0.0)


_RECENT: list = []  # the last few iotas made, reused (arrays are never changed in place)
RECENT = 2


def iota(n: int) -> np.ndarray:
    """0..n-1 as an int64 array, recorded as an identity index array; one of
    the last RECENT made is given again for the same n, so a function called
    repeatedly at one size makes it once. It can never be changed: a view of a
    read-only array, whose WRITEABLE flag numpy refuses to set (a recorded
    array changed in place would no longer be the identity). Compiled code
    never hands it to a caller (vector_support.vout copies it there)."""
    for a in _RECENT:
        if len(a) == n:
            return a
    base = np.arange(n, dtype=np.int64)
    base.flags.writeable = False
    a = base[:]
    IOTA.add(a)
    _RECENT.insert(0, a)
    del _RECENT[RECENT:]
    return a


_IOTA_REFS = IOTA._refs


def is_iota(a) -> bool:
    """a was made by `iota` (so it is 0..len(a)-1) and is still alive
    (`a in IOTA`, without the method call: it is asked several times per call)."""
    r = _IOTA_REFS.get(id(a))
    return r is not None and r() is a



class MatrixRows(tuple):
    """An Array (Array R) of float64 rows that may be the rows of one matrix:
    the tuple of the rows, with that matrix (a C-ordered n x m float64 array)
    given or made from the rows at the first batched read of every row
    (vector_support.vtake2, through `matrix_of`) and kept, so that reading the
    rows again (in every element of an outer loop, in the reverse pass) does
    not copy them again. Made for compiled code's arguments
    (chad/compile/convert.py); arrays are never changed in place, so the
    matrix stays the rows' copy."""

    def __new__(cls, rows, matrix=None):
        out = super().__new__(cls, rows)
        out._matrix = matrix
        return out

    @property
    def matrix(self):
        """The matrix of the rows, or None for rows of different lengths."""
        mat = self._matrix
        if mat is None:
            try:
                mat = np.array(self, dtype=np.float64) if len(self) else None
            except ValueError:  # rows of different lengths
                mat = None
            if mat is None or mat.ndim != 2:
                mat = False
            self._matrix = mat
        return mat if mat is not False else None

    def shape(self):
        """The matrix's shape when it is made, else None (nothing is made)."""
        mat = self._matrix
        return mat.shape if mat is not None and mat is not False else None


def matrix_of(rows, n: int, m: int):
    """The n x m block of the first n rows' first m elements when rows is a
    MatrixRows of one length at least m (a view of its matrix), else None."""
    if type(rows) is MatrixRows:
        mat = rows.matrix
        if mat is not None and mat.shape[0] >= n and mat.shape[1] >= m:
            return mat[:n, :m]
    return None
