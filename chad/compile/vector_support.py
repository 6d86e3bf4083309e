"""What vectorised array code (chad/compile/vectorise.py) calls at run time.

A build or map body batched over its loop runs as numpy operations on arrays
with one axis per enclosing loop of the vectorised region: a region nested D
deep holds every batched value as an array of rank D, whose axis k is the loop
at depth k (size 1 where the value does not depend on that loop), so numpy's
broadcasting lines the loops up. These helpers move values in and out of that
form and check what the evaluator checks (indices in range, a build's size not
negative): where the evaluator raises, they raise too (the compiled backend then
replays the call on the evaluator, whose error is reported: docs/compiler.md,
"Errors"); where it does not, neither do they.
"""

from __future__ import annotations

import math

import numpy as np

from chad.primitives import _toreal

from . import shifts
from .ieee import quiet
from .kernels import fuse, running, select, select_ints
from .known import (
    NO_NEG_ZERO, ONE_HOT, MatrixRows, clear_of_negative_zero, iota, matrix_of,
)
from .order import row_dots, row_sums


def _shape(rank: int, axis: int, n: int) -> tuple:
    shape = [1] * rank
    shape[axis] = n
    return tuple(shape)


def loop_size(n: int, live) -> int:
    """The size n of a loop nested in loops of `live` elements: a negative n
    fails (the evaluator's error) only where an element runs the loop, and is
    no element (0) where none does."""
    if n < 0:
        if live:
            _check_size(n)
        return 0
    return n


def _check_size(n) -> None:
    if n < 0:
        raise ValueError(f"build of negative size {n}")


def vtoreal(x):
    """toreal of a batched integer: an int64 array as float64 (round to
    nearest, as float(n)); an array of exact Python ints (beyond int64: viadd)
    element by element as the evaluator's toreal, an infinity beyond the float
    range (numpy would raise OverflowError)."""
    x = np.asarray(x)
    if x.dtype == object:
        return np.array([_toreal(int(v)) for v in x.ravel()],
                        dtype=np.float64).reshape(x.shape)
    return x.astype(np.float64)


def vpowi(x, n):
    """x ** n (n : Z) batched, by the evaluator's rules (primitives._powi):
    numpy's power of |x| to n as a float (an infinity for an n beyond the
    float range), the sign from the parity of n itself, zero to a negative
    power an infinity. numpy's power, like its exp, may differ from math.pow
    in the last bit (docs/compiler.md, "Vectorisation")."""
    x = np.asarray(x, dtype=np.float64)
    n = np.asarray(n)
    if n.ndim == 0 and n.dtype != object:  # one exponent for all (`(y - p) ** 2`)
        k = int(n)
        with quiet():
            if k == 2:  # |x| * |x|: numpy's power of |x| to 2.0 is its square
                return np.square(x)
            if k == 1:  # |x| to 1.0 is |x|, signed as x: x itself (a new array)
                return x.copy()
            if k == 0:  # anything to 0.0 is 1.0 (NaN and zero included)
                return np.ones(x.shape)
            r = np.power(np.abs(x), float(k))
            if k < 0:
                r = np.where(x == 0.0, np.inf, r)
            return np.copysign(r, x) if k % 2 == 1 else r
    if n.dtype == object:  # exact integers beyond int64 (viadd)
        ints = [int(v) for v in n.ravel()]
        e = np.array([_toreal(v) for v in ints], dtype=np.float64).reshape(n.shape)
        odd = np.array([v % 2 == 1 for v in ints], dtype=bool).reshape(n.shape)
        neg = np.array([v < 0 for v in ints], dtype=bool).reshape(n.shape)
    else:
        e = n.astype(np.float64)
        odd = n % 2 == 1  # numpy's % of int64 is Python's (floor) modulo
        neg = n < 0
    with quiet():
        r = np.power(np.abs(x), e)
        r = np.where((x == 0.0) & neg, np.inf, r)
        return np.where(odd & np.signbit(x), -r, r)


def vindex(n: int, axis: int, rank: int, live: int = 1):
    """The loop index of the loop at `axis` (0 .. n-1), as an Array Z on that
    axis; `live`: the number of elements of the loops around it (loop_size)."""
    n = loop_size(n, live)
    if rank == 1:
        return iota(n)  # recorded: a build of it is an identity index array
    # recorded as a line (chad/compile/shifts.py): 2 * i + 1 is one too, its
    # bounds known and its gathers slices
    shape = _shape(rank, axis, n)
    made = shifts.recent_line(shape, 1, 0)
    return made if made is not None else shifts.line(
        np.arange(n, dtype=np.int64).reshape(shape), 1, 0)


def vtake(a, n: int, axis: int, rank: int, live: int = 1):
    """`a ! i` for every i < n, i the loop at `axis`: a's first n elements on
    that axis (a view; an IndexError if a is shorter, as the evaluator's).
    `live`: the number of elements of the region's loops (0: no element runs,
    nothing is read, no error)."""
    n = loop_size(n, live)
    a = np.asarray(a)
    if not live:
        return np.zeros(_shape(rank, axis, n), dtype=a.dtype if a.dtype != object else None)
    if len(a) < n:
        raise IndexError(f"index {len(a)} out of range for an array of length {len(a)}")
    return a[:n].reshape(_shape(rank, axis, n))


def numbers_array(a):
    """a as a 1-D numpy array of numbers, for a read of an untyped array in a
    nested forward pass: an Array R, or an Array Z of int64 (an array literal,
    a tuple, as one); anything else (an array of arrays, integers beyond int64)
    fails the region's guard (Fallback)."""
    if type(a) is not np.ndarray:
        if type(a) is not tuple or not all(type(x) is float or type(x) is int for x in a):
            raise Fallback("not an array of numbers")
        try:
            a = np.asarray(a) if a else np.zeros(0)
        except OverflowError:
            raise Fallback("integers beyond int64") from None
    if a.ndim != 1 or a.dtype not in _NUMBERS:
        raise Fallback("not an array of numbers")
    return a


def vtake_numbers(a, n: int, axis: int, rank: int, live: int = 1):
    """vtake of an untyped array read as numbers (numbers_array)."""
    return vtake(numbers_array(a), n, axis, rank, live)


_NUMBERS = (np.dtype(np.float64), np.dtype(np.int64))


def vgather(a, idx, live: int = 1):
    """`a ! j` for a batched integer j: fancy indexing after the evaluator's
    bounds check (numpy would wrap a negative index); `live` as vtake's."""
    a = np.asarray(a)
    idx = np.asarray(idx)
    if not live:
        return np.zeros(idx.shape, dtype=a.dtype if a.dtype != object else None)
    out = shifts.gather(a, idx)  # a shifted, clamped loop index: slices
    if out is None:
        out = shifts.line_gather(a, idx)  # s * i + c: a strided slice
    if out is not None:
        return out
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= len(a)):
        raise IndexError("an index out of range")
    if idx.dtype == object:  # exact integers (vint), in range: int64 now
        idx = idx.astype(np.int64)
    return a[idx]


# Integer arithmetic on batched values: the language's integers do not wrap,
# numpy's int64 do. Where the operands' magnitudes guarantee an int64 result
# (one reduction per operand), the int64 operation; otherwise the operation on
# arrays of Python ints (dtype object), exact as the evaluator's. Comparisons,
# np.where, gathers and toreal read either kind.

_I64 = 2 ** 63


def _ibound(x) -> int:
    """The largest magnitude in x (an int64 or object array, or an integer)."""
    if isinstance(x, np.ndarray):
        if not x.size:
            return 0
        known = shifts.bound(x)  # a loop's index shifted, clamped, scaled: no pass
        if known is not None:
            return known
        return max(abs(int(x.max())), abs(int(x.min())))
    return abs(int(x))


def _exact(x):
    return x.astype(object) if isinstance(x, np.ndarray) and x.dtype != object else x


def viadd(x, y):
    """x + y on Z, batched (module note above)."""
    out = shifts.add(x, y)  # a loop's index plus an integer (chad/compile/shifts.py)
    if out is None:
        out = shifts.line_add(x, y)
    if out is not None:
        return out
    if _ibound(x) + _ibound(y) < _I64:
        return np.add(x, y)
    return np.add(_exact(x), _exact(y))


def vimul(x, y):
    """x * y on Z, batched."""
    out = shifts.line_mul(x, y)  # a loop's index times an integer: recorded
    if out is not None:
        return out
    bx, by = _ibound(x), _ibound(y)
    if bx < _I64 and by < _I64 and bx * by < _I64:  # (numpy takes each as an int64)
        return np.multiply(x, y)
    return np.multiply(_exact(x), _exact(y))


def vwhere(c, a, b):
    """`if c then a else b` for a batched Bool c: np.where where both branches'
    integers fit int64; else on Python ints (np.where turns a Python int
    between 2**63 and 2**64 into uint64, without an error, and raises beyond)."""
    if _fits(a) and _fits(b):
        return select_ints(c, a, b)  # (np.where but for int64 operands: kernels.py)
    return np.where(c, _objects(a), _objects(b))


def vclamp(x, lo, hi, below_first: bool, below_strict: bool, above_strict: bool):
    """`if x < lo then lo else if x > hi then hi else x` for a batched integer
    x and unbatched lo, hi (chad/compile/clamps.py: either test first, each
    strict or not, as the flags say): np.clip when lo <= hi (then every
    reading of the `if` is the clip), recorded as a shifted loop index when x
    is one (chad/compile/shifts.py); otherwise the `if` itself, np.where of
    its comparisons, as the general batching rule computes it."""
    if type(lo) is int and type(hi) is int and -_I64 <= lo <= hi < _I64 and \
            type(x) is np.ndarray and x.dtype == np.int64:
        out = shifts.clamp(x, lo, hi)
        return np.clip(x, lo, hi) if out is None else out
    below = (x < lo) if below_strict else (x <= lo)
    above = (x > hi) if above_strict else (x >= hi)
    if below_first:
        return vwhere(below, lo, vwhere(above, hi, x))
    return vwhere(above, hi, vwhere(below, lo, x))


def _fits(x) -> bool:
    """x (a real, or an integer or array of them) needs no Python ints."""
    if isinstance(x, np.ndarray):
        return x.dtype != object
    return isinstance(x, float) or -_I64 <= x < _I64


def _objects(x):
    """x as an array of Python ints (an integer: a 0-d one)."""
    if isinstance(x, np.ndarray):
        return _exact(x)
    out = np.empty((), dtype=object)
    out[()] = x
    return out


def vineg(x):
    """-x on Z, batched."""
    if _ibound(x) < _I64:
        return np.negative(x)
    return np.negative(_exact(x))


def vtake2(rows, n: int, axis: int, m: int, axis2: int, rank: int, live: int = 1):
    """`rows ! i ! j` for i < n at `axis` and j < m at `axis2`: the rectangular
    block of an array of arrays, as one 2-D array on those two axes; `live` as
    vtake's (and with m = 0 no row is read)."""
    n, m = loop_size(n, live), loop_size(m, live)
    if not live or not m:
        return place(np.zeros((n, m)), n, axis, m, axis2, rank)
    if len(rows) < n:
        raise IndexError(f"index {len(rows)} out of range for an array of length {len(rows)}")
    mat = matrix_of(rows, n, m)
    if mat is not None:  # the rows of one matrix (known.MatrixRows): no copy
        return place(mat, n, axis, m, axis2, rank)
    first = np.asarray(rows[0]) if n else np.empty(0)
    if n and first.ndim == 1 and len(first) == m:
        try:  # rows of length m: one copy in C (about twice the loop's speed)
            mat = np.array(rows[:n] if len(rows) > n else rows, dtype=first.dtype)
        except ValueError:  # ragged: the loop below finds the evaluator's error
            mat = None
        if mat is not None and mat.shape == (n, m):
            return place(mat, n, axis, m, axis2, rank)
    mat = np.empty((n, m), dtype=first.dtype)
    for r in range(n):
        row = rows[r]
        if len(row) < m:
            raise IndexError(f"index {len(row)} out of range for an array of length {len(row)}")
        mat[r] = row[:m]
    return place(mat, n, axis, m, axis2, rank)


def place(mat, n: int, axis: int, m: int, axis2: int, rank: int):
    """The n x m block mat on the region's axes `axis` and `axis2`."""
    if axis > axis2:
        mat = mat.T
    shape = [1] * rank
    shape[axis] = n
    shape[axis2] = m
    return mat.reshape(shape)


def vsum(x, n: int, axis: int, rank: int, live: int = 1):
    """`sum` over the loop at `axis` (n elements), keeping the axis (size 1).
    A value independent of that loop is summed n times, as the evaluator does.
    Along the contiguous last axis of a C-ordered array numpy sums each row
    pairwise, the evaluator's order (np.sum of the row); along any other axis,
    or an axis whose elements are not adjacent in memory (a transposed block:
    `m ! i ! j` summed over i), it adds row by row, another order: the summed
    axis is made the contiguous last one first (a copy only then)."""
    n = loop_size(n, live)  # (live: the elements of the loops around it)
    x = np.asarray(x, dtype=np.float64)
    if x.ndim < rank:
        x = x.reshape((1,) * (rank - x.ndim) + x.shape)
    if x.shape[axis] != n:
        shape = list(x.shape)
        shape[axis] = n
        x = np.broadcast_to(x, shape)
    with quiet():
        if x.ndim > 1 and not _sums_pairwise(x, axis):
            y = np.ascontiguousarray(np.moveaxis(x, axis, -1))
            return np.moveaxis(np.add.reduce(y, axis=-1, keepdims=True), -1, axis)
        tail = x.ndim - 1 - axis  # axes after it (of size 1: rows of a C-ordered x)
        if tail == 0 or x.flags.c_contiguous and all(d == 1 for d in x.shape[axis + 1:]):
            # short rows: numpy's additions in one C loop
            out = row_sums(x.reshape(x.shape[:axis + 1]) if tail else x)
            if out is not None:
                return out.reshape(out.shape + (1,) * tail) if tail else out
        # np.sum's own reduce, without its wrapper
        return np.add.reduce(x, axis=axis, keepdims=True)


def vsumprod(a, b, n: int, axis: int, rank: int, live: int = 1):
    """vsum(a * b, n, axis, rank, live): a sum over an inner loop of a
    product of two batched reals (`sum (build m (\\j -> m ! i ! j * v ! j))`,
    rewritten so after the generated code is made: chad/compile/fusion.py,
    summed_product). Over the last axis of a 2-D block the C loop sums each
    row's products as numpy's reduce of the block would (order.row_dots),
    without making it; anything else makes the product and sums it."""
    if rank == 2 and axis == 1:
        out = row_dots(a, b, loop_size(n, live))
        if out is not None:
            return out
    elif rank > 2 and axis == 2:
        out = _sliced_dots(a, b, loop_size(n, live), rank)
        if out is not None:
            return out
    return vsum(a * b, n, axis, rank, live)


SLICED_DOTS = 1 << 20  # products above which a region of rank 3 or more sums them by slices


def _sliced_dots(a, b, m: int, rank: int):
    """vsumprod over axis 2 of a region of rank >= 3 (a layer of a network
    applied to each input of a batch) whose block of products would hold more
    than SLICED_DOTS reals: row_dots of one slice along axis 0 at a time
    (the same sums), so that the block is never made; else None."""
    if not (type(a) is np.ndarray and type(b) is np.ndarray and a.ndim == rank == b.ndim
            and all(d == 1 for d in a.shape[3:]) and all(d == 1 for d in b.shape[3:])):
        return None
    try:
        shape = np.broadcast_shapes(a.shape[:2], b.shape[:2])
    except ValueError:  # (the product's own error, below)
        return None
    if shape[0] * shape[1] * m <= SLICED_DOTS:
        return None
    a3, b3 = a.reshape(a.shape[:3]), b.reshape(b.shape[:3])
    out = np.empty(shape + (1,) * (rank - 2))
    for k in range(shape[0]):
        rows = row_dots(a3[k if len(a3) > 1 else 0], b3[k if len(b3) > 1 else 0], m)
        if rows is None:
            return None
        out[k] = np.broadcast_to(rows.reshape(rows.shape + (1,) * (rank - 3)), out.shape[1:])
    return out


def _sums_pairwise(x, axis: int) -> bool:
    """numpy reduces x along axis pairwise, as np.sum of each row: the axis is
    the innermost one with more than one element, and its elements adjacent
    in memory (then C order puts the other axes outside it)."""
    if x.shape[axis] <= 1:
        return True
    for k in range(axis + 1, x.ndim):
        if x.shape[k] > 1:
            return False
    if x.strides[axis] != x.itemsize:
        return False
    return all(x.shape[k] <= 1 or abs(x.strides[k]) >= x.itemsize * x.shape[axis]
               for k in range(axis))


def vout(x, n: int, rank: int, dtype, fresh: bool, private: bool = False):
    """The Array R / Array Z of a vectorised build or map of n elements from its
    batched body x (rank `rank`, axis 0 the loop): a 1-D array owning its data
    (never a view of an input), but for the recorded identity in `private` code."""
    _check_size(n)
    # (recorded arrays are arrays of indices, int64: never a float64 array's)
    if (type(x) is not np.ndarray or x.dtype != _F64) and shifts.recorded(x) \
            and x.dtype == dtype:
        if x.shape == (n,):
            # `build n (\i -> i)`, the loop index itself (chad/compile/known.py), or
            # it shifted and clamped (chad/compile/shifts.py), in a derivative's
            # code (`private`: its index arrays never reach the caller): the
            # recorded read-only array; elsewhere a new one, which the caller may change
            return x if private else np.array(x)
        fresh = False  # (a recorded line, read-only: copied below)
    x = np.asarray(x)
    if x.dtype != dtype:
        x = x.astype(dtype)
        fresh = True
    x = x.reshape(x.shape[:1] if x.ndim else ())
    if x.shape == (n,):
        return x if fresh else np.array(x, dtype=dtype)
    return np.array(np.broadcast_to(x, (n,)), dtype=dtype)


def vrows(x, n: int, m: int, rank: int, dtype):
    """The Array (Array R) of a vectorised build of builds: the tuple of rows of
    the n x m block x (axes 0 and 1), each a 1-D array."""
    _check_size(n)
    _check_size(m)
    x = np.asarray(x, dtype=dtype)
    if x.ndim < rank:
        x = x.reshape((1,) * (rank - x.ndim) + x.shape)
    x = x.reshape(x.shape[:2])
    mat = np.array(np.broadcast_to(x, (n, m)), dtype=dtype)
    return tuple(mat)


HELPERS = {"_np": np, "_quiet": quiet, "_vindex": vindex, "_vtake": vtake, "_vtoreal": vtoreal,
           "_vpowi": vpowi,
           "_vgather": vgather,
           "_vtake2": vtake2, "_vtake_numbers": vtake_numbers, "_vsum": vsum, "_vsumprod": vsumprod, "_vout": vout, "_vrows": vrows,
           "_f64": np.float64, "_i64": np.int64, "_ndarray": np.ndarray,
           "_viadd": viadd, "_vimul": vimul, "_vineg": vineg, "_vwhere": vwhere,
           "_vclamp": vclamp,
           "_vselect": select, "_vfuse": fuse}


# ----------------------------------------------------------------- reverse passes


class VecBack:
    """The n backpropagators of a vectorised map's forward pass (the second
    component of `unzipMap`), as ONE batched function: fn(captured...,
    d, cells, base, n) runs all n of them on the array d of their cotangents,
    the cells from `base` on holding one array per scope (an element's cell at
    its index; `vadd`). Anything but `sequenceScoped` that reads it as the array of
    closures gets those, from `lazy` (the per-element code, run once).

    `nested` (a loop nested in the body, chad/arrays/nested.py): what else the
    function handles — `nested.accepts(init)` for scopes whose cells are not
    reals, `nested.ready(depth)` whether the levels its inner loops add to are
    theirs at this depth of the cells (else `sequenceScoped` runs the
    per-element closures, before anything changed)."""

    __slots__ = ("fn", "caps", "n", "lazy", "pairs", "nested", "masked", "_items")

    def __init__(self, fn, n: int, caps: tuple, lazy, pairs: bool = False,
                 nested=None, masked: tuple = ()) -> None:
        self.fn = fn
        self.n = n
        self.caps = caps
        self.lazy = lazy     # the per-element code: (ys, closures), or with `pairs`
        self.pairs = pairs   # the array of pairs (y, closure)
        self.nested = nested
        self.masked = masked  # the levels its branches add to (vaddm: chad/compile/switch.py)
        self._items = None

    def run(self, d, cells: list, base: int) -> list:
        """Run the n backpropagators; the per-element cells' final values
        (from `base` on), each an array this run made, the initial value or
        a PerElement."""
        run = Pass(base)
        if self.nested is None and d.strides == (0,) and self.n:
            # every element's cotangent the same real (sum's: BFill, a
            # broadcast view): that real, a Python float, so what the pass
            # computes from it alone (d * w, then * 0.01) is one number, not
            # an array of n equal ones; numpy broadcasts it where it meets an
            # array, to the same values (the nested passes reshape d: kept)
            d = float(d[0])
        self.fn(*self.caps, d, cells, run, self.n)
        run.flush(cells)
        return [c if j + base in run.owned or c is None or type(c) is float
                or isinstance(c, PerElement) else np.array(c, dtype=np.float64)
                for j, c in enumerate(cells[base:])]

    def _closures(self):
        if self._items is None:
            out = self.lazy()
            self._items = tuple(p[1] for p in out) if self.pairs else out[1]
        return self._items

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        return self._closures()[i]

    def __iter__(self):
        return iter(self._closures())


class Pass:
    """One batched run of a VecBack: the first per-element cell (`base`) and
    the contributions to each shared cell, kept to be added in the evaluator's
    order when the run ends (`flush`)."""

    __slots__ = ("base", "pending", "owned", "later")

    def __init__(self, base: int) -> None:
        self.base = base
        self.pending: dict[int, list] = {}
        self.owned: set[int] = set()  # per-element cells holding an array vadd made
        # contributions of other kinds to shared cells (bags of rows: chad/arrays/
        # nested_support.py), level -> (how to add them, their list), added last
        self.later: dict[int, tuple] = {}

    def flush(self, cells: list) -> None:
        """Add the contributions to the shared cells. The evaluator runs element
        0's adds, then element 1's, ...: row i of each part is element i's
        adds (w of them: an inner loop's, in their order), the parts in the
        order of the adds, so the running sum (kernels.running: one addition
        after the other from the cell's value) gives its result bit for bit.
        Each part is (values, the mask of the elements that added, or None,
        whether its adds are of the values negated)."""
        shared = getattr(cells, "fork_base", 0)  # a forked half's cells (parallel_support)
        for level, parts in self.pending.items():
            negs = [neg for _v, _m, neg in parts]
            spec = ([v for v, _m, _neg in parts], [m for _v, m, _neg in parts],
                    len(parts[0][0]), negs if any(negs) else None)
            if level < shared:  # a cell of the forking thread: summed at the join
                cells.defer(level, spec, sum_into)
            else:
                cells[level] = sum_into(spec, cells[level])
        for level, (add_all, items) in self.later.items():
            add_all(cells, level, items)


def sum_into(spec: tuple, cur):
    """A shared cell's value cur after a pass's adds to it, spec = (parts,
    masks, n, negs) (kernels.running); cur itself when no element added anything."""
    parts, masks, n, negs = spec
    total = running(parts, masks, n, cur, negs)
    return cur if total is None else total


def _operand(cells: list, level: int, v, n: int):
    """An add's value as an array of n reals, after the evaluator's check of
    the level; and whether it was one already (not a broadcast view)."""
    if level >= len(cells):
        raise IndexError(f"add: level {level} out of range for {len(cells)} cells")
    if type(v) is np.ndarray and v.dtype == _F64 and v.shape == (n,):
        return v, True
    return np.broadcast_to(np.asarray(v, dtype=np.float64), (n,)), False


def vaddm(cells: list, level: int, run: Pass, v, n: int, mask) -> None:
    """`add level v` run by the elements where the bool array mask holds (a
    branch of a case: chad/compile/switch.py), the others adding nothing: an
    element's own cell is added to where the mask holds (kernels.select); for
    a shared cell the masked-out elements' values are dropped when
    `Pass.flush` sums them (each element's adds, in order). Inside the
    batched function's `quiet()` block, as vadd."""
    v, _whole = _operand(cells, level, v, n)
    if n == 0:
        return
    if level < run.base:
        run.pending.setdefault(level, []).append((v, mask, False))
        return
    cur = cells[level]
    if cur is None:  # vseq runs such a pass element by element (VecBack.masked)
        raise RuntimeError(f"internal: a branch's add to cell {level}, which has no value")
    # cur: the initial real, an array not made here, or one this pass owns; a
    # new array either way (an add in place under the mask, `where=`, branches
    # on every element as np.where does)
    cells[level] = select(mask, v + cur, cur)
    run.owned.add(level)


def vadd(cells: list, level: int, run: Pass, v, n: int, adopt: bool = False,
         neg: bool = False) -> None:
    """`add level v` run by all n elements: into the per-element cells (level >=
    base) elementwise (the evaluator's per-element additions); to a cell below,
    shared by the elements, kept for `Pass.flush`. `adopt`: v was computed for
    this add alone (the generated code holds it nowhere else), so a per-element
    cell may take it over and add into it in place instead of copying it.
    `neg`: the add is of -v (numpy's negation of v, which the generated code
    does not make): a shared cell's running sum negates as it reads, no pass
    of its own; a per-element cell gets -v, made here (then adopted).
    Called by the batched backpropagators only, inside their `quiet()` block
    (chad/compile/vectorise.py, back_function): numpy's warnings are off."""
    v, whole = _operand(cells, level, v, n)
    if n == 0:
        return
    if level < run.base:
        run.pending.setdefault(level, []).append((v, None, neg))
        return
    if neg:
        v, whole, adopt = -v, True, True
    if adopt:
        flags = v.flags
        adopt = whole and flags.writeable and flags.owndata
    cur = cells[level]
    owned = run.owned
    if cur is None:
        cells[level] = v if adopt else v.copy()
    elif level in owned:
        # an array made below, owned by this cell alone: added to in place
        # (v + cur and cur + v are the same IEEE sums)
        np.add(cur, v, out=cur)
        return
    elif adopt:
        np.add(v, cur, out=v)  # the initial real (or an array) plus v, in v
        cells[level] = v
    else:  # the scope's initial real (vseq), or an array not made here
        cells[level] = v + cur
    owned.add(level)


_F64 = np.dtype(np.float64)


class PerElement:
    """The n cells of a scope, one per element, that are not reals (bags of a
    nested loop's rows: chad/arrays/nested_support.py): `finals(n)`, the
    tuple of the n final cells (the evaluation rule's array of them), and
    `bag(i)`, element i's."""

    __slots__ = ()

    def finals(self, n: int) -> tuple:
        raise NotImplementedError

    def bag(self, i: int):
        raise NotImplementedError


def _final(cell, init, n: int):
    """A kept scope's cells as the rule's array: never added to, its initial
    value (0.0 for none); else the array of the n cells, recorded as free of
    -0.0 when the sums started from a real other than -0.0 (chad/compile/known.py)."""
    if isinstance(cell, PerElement):
        return cell.finals(n)
    if cell is None:
        return np.zeros(n)
    if type(cell) is float:
        return np.full(n, cell)
    if clear_of_negative_zero(init):
        NO_NEG_ZERO.add(cell)
    return cell


def _nested(items: list):
    out = None
    for r in reversed(items):
        out = (r, out)
    return out


def vseq(fns, ctgs, inits: tuple, keep: tuple):
    """sequenceScoped inits keep fns ctgs as one batched action when fns is a
    VecBack, the cotangents an Array R and the scopes' initial values reals or
    None; else None (the evaluation rule runs, per element). Its result: the
    arrays of the kept scopes' final cells, as the rule's (dense_of: a cell never
    added to is 0.0). With nothing kept (a nested loop's backpropagators whose
    actions return unit only): the last element's scopes' final cells and its
    action's result, as the rule's chain of scopes returns them."""
    if type(fns) is not VecBack:
        return None
    nested = fns.nested
    if not keep and (nested is None or not nested.unit_result):
        return None
    n = fns.n
    if not (isinstance(ctgs, np.ndarray) and ctgs.dtype == _F64 and ctgs.shape == (n,)):
        return None
    for i in inits:  # (a loop, not a generator: this runs once per call of a gradient)
        if not (i is None or type(i) is float or (nested is not None and nested.accepts(i))):
            return None

    def act(cells: list):
        base = len(cells)
        if nested is not None and not nested.ready(base + len(inits)):
            return _one_by_one(fns, ctgs, inits, keep, cells)
        if fns.masked and any(base <= lv < base + len(inits) and inits[lv - base] is None
                              for lv in fns.masked):
            # a branch adds to an element's cell that starts as no value: the
            # elements of the other branch keep none, which one array cannot hold
            return _one_by_one(fns, ctgs, inits, keep, cells)
        # every element's cell starts at the same real: one Python float for
        # all of them until the first add makes the array (vadd)
        cells.extend(inits)
        try:
            finals = fns.run(ctgs, cells, base)
        finally:
            del cells[base:]
        if not keep:
            return _last_scopes([_element(c, n - 1) for c in finals], None) if n else None
        return _nested([_final(finals[j], inits[j], n) for j in keep])

    return act


def _element(cell, i: int):
    """Element i's final cell of a batched scope (an array of them, the common
    initial value, or a PerElement)."""
    if isinstance(cell, PerElement):
        return cell.bag(i)
    if type(cell) is np.ndarray:
        return float(cell[i])
    return cell


def _last_scopes(cells: list, result):
    """(cell_0, (cell_1, ... (cell_k, result))): what a chain of scopes returns."""
    out = result
    for c in reversed(cells):
        out = (c, out)
    return out


def _one_by_one(fns: VecBack, ctgs, inits: tuple, keep: tuple, cells: list):
    """sequenceScoped on the per-element closures, one element after the
    other (as the evaluation rule: each element's scopes pushed with the
    initial values, its action run on its cotangent, the kept cells stored):
    the kept cells as the rule's arrays (reals: an array, 0.0 for a cell never
    added to; other cells: the tuple of them)."""
    n, base = fns.n, len(cells)
    closures = fns._closures()
    slots = [[None] * n for _ in keep]
    last = None
    for i in range(n):
        cells.extend(inits)
        try:
            r = closures[i](float(ctgs[i]))(cells)
            for slot, j in zip(slots, keep):
                slot[i] = cells[base + j]
            if not keep and i == n - 1:
                last = _last_scopes(cells[base:], r)
        finally:
            del cells[base:]
    if not keep:
        return last
    out = []
    for slot, j in zip(slots, keep):
        if inits[j] is None or type(inits[j]) is float:
            out.append(np.asarray([0.0 if x is None else x for x in slot], dtype=np.float64))
        else:
            out.append(tuple(slot))
    return _nested(out)


class Fallback(Exception):
    """A guard of a nested forward pass failed: the per-element code runs
    instead (nothing the region computed is kept)."""


def row_length(rows_, n: int) -> int:
    """The common length of the first n rows (`length (m ! i)`, a sum or a map
    over each row, batched); ragged rows fail the region's guard (Fallback)."""
    if not n:
        return 0
    if type(rows_) is MatrixRows:  # (rows of one matrix: its width, without reading them)
        shape = rows_.shape()
        if shape is not None and n <= shape[0]:
            return shape[1]
    m = len(rows_[0])
    for i in range(1, n):
        if len(rows_[i]) != m:
            raise Fallback("ragged rows")
    return m


FELL_BACK = [0]  # how many nested forward passes ran their per-element code (for tests)


def fell_back() -> None:
    FELL_BACK[0] += 1


HELPERS.update({"_VecBack": VecBack, "_vadd": vadd, "_vaddm": vaddm, "_vseq": vseq,
                "_VFallback": Fallback,
                "_vfell": fell_back})


class VecPairs:
    """The array of pairs (y, backpropagator) of a vectorised build's forward
    pass: `unzip` takes its ys and its VecBack (`vunzip`); anything else reading
    it as the tuple of pairs gets that, from the per-element code (run once)."""

    __slots__ = ("ys", "back", "_items")

    def __init__(self, ys, back: VecBack) -> None:
        self.ys = ys
        self.back = back
        self._items = None

    def _pairs(self):
        if self._items is None:
            self._items = self.back.lazy()
        return self._items

    def __len__(self) -> int:
        return self.back.n

    def __getitem__(self, i):
        return self._pairs()[i]

    def __iter__(self):
        return iter(self._pairs())


def vunzip(x):
    """unzip of a VecPairs: (ys, the batched backpropagator); else None."""
    if type(x) is VecPairs:
        return (x.ys, x.back)
    return None


def visf64(a) -> bool:
    """a is an Array R (a 1-D float64 numpy array)."""
    return type(a) is np.ndarray and a.dtype == np.float64 and a.ndim == 1


HELPERS.update({"_VecPairs": VecPairs, "_vunzip": vunzip, "_visf64": visf64})


def _extreme(a, pick):
    """pick(a) (np.max / np.min) as a Python float where any order of
    comparisons gives it: a non-empty Array R without NaN, the result not a
    zero (a tie of 0.0 and -0.0 depends on the order); else None (the
    evaluator's fold then runs)."""
    if type(a) is not np.ndarray or a.dtype != np.float64 or a.ndim != 1 or not len(a):
        return None
    r = float(pick(a))
    if r != r or r == 0.0:  # np.max / np.min propagate NaN: r is NaN iff a has one
        return None
    return r


def vmax(a):
    return _extreme(a, np.max)


def vmin(a):
    return _extreme(a, np.min)


HELPERS.update({"_vmax": vmax, "_vmin": vmin})


class VecTree:
    """The reduction tree of `fold` by max (min) in a derivative (FoldTree),
    without the tree: the array has no NaN, so the balanced fold's result is its
    leftmost largest (smallest) element, at `index` (np.argmax's first
    occurrence: a tie, 0.0 against -0.0 included, goes to the left as the
    fold's `b if b > a else a` does), and the reverse pass routes the whole
    cotangent to that element. `real()` builds the evaluator's tree (the
    per-element code) for any other use."""

    __slots__ = ("value", "index", "n", "lazy", "_tree")

    def __init__(self, value: float, index: int, n: int, lazy) -> None:
        self.value = value
        self.index = index
        self.n = n
        self.lazy = lazy
        self._tree = None

    def real(self):
        if self._tree is None:
            self._tree = self.lazy()
        return self._tree


def vtree(a, is_max: bool, lazy):
    """A VecTree of `fold max` (is_max) or `fold min` over a, or None (the
    per-element code runs): a must be a non-empty Array R without NaN."""
    if not visf64(a) or not len(a):
        return None
    k = int(np.argmax(a) if is_max else np.argmin(a))
    v = float(a[k])
    if v != v:  # np.argmax / argmin give the first NaN if there is one
        return None
    return VecTree(v, k, len(a), lazy)


def vreal(tree):
    return tree.real() if type(tree) is VecTree else tree


def vuntree(d, tree):
    """unTree of a VecTree: the action whose result is the leaf cotangents, d
    at the winning element and 0.0 elsewhere (0.0 everywhere for d = 0.0: the
    tree's additions are of 0.0s); None (the evaluation rule on the real tree)
    for d = -0.0, whose sign the tree's additions (d + 0.0 at each level) may
    change."""
    if type(tree) is not VecTree:
        return None
    base = np.zeros(tree.n)
    if d is not None:
        if not isinstance(d, float) or (d == 0.0 and math.copysign(1.0, d) < 0.0):
            return None
        if d != 0.0:
            base[tree.index] = d
    # never changed, so what ONE_HOT records stays true: a view of a read-only
    # array, whose WRITEABLE flag numpy refuses to set (known.iota's device)
    base.flags.writeable = False
    out = base[:]
    NO_NEG_ZERO.add(out)  # zeros and d, which is not -0.0
    ONE_HOT.add(out, tree.index)

    def act(cells):
        return out

    return act


HELPERS.update({"_vtree": vtree, "_vreal": vreal, "_vuntree": vuntree})
