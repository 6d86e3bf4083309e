"""Array cotangents: the Bag of Efficient CHAD (Smeding & Vákár), §7 and §8.1, collect and scatter.

    D[Array τ]₂ = Bag (Z × D[τ]₂)

    data Bag = BEmpty | BOne (Z × D[τ]₂) | BPlus Bag Bag | BArray (Array (Z × D[τ]₂))

BEmpty, BOne and BPlus are §7's free monoid (constant-time zero, one-hot and
addition, by construction). BArray is §8.1's extra constructor: a whole array of
(index, cotangent) pairs inserted in constant time. It is stored as two parallel
arrays, `vals` and `idx`; `idx is None` means the identity indices 0..len-1 (the
dense cotangent of a whole array, as produced by map, fold and JSON input).

`plusv`/`zerov`/`phi`/`size` of chad.linear reach the methods `plus`, `zero`,
`phi` and `size` below through the registration of the array type former
(chad/arrays/__init__.py), so bags are ordinary cotangent values for every
EVM. A bag is used affinely, and `collect` costs (in the cost model, see
docs/cost-model.md) one step per constructor plus one per BArray entry: linear
in the work spent building the bag.

Dense arrays of element cotangents (the results of `scatter`, `zeros`) are
numpy float64 arrays when the element cotangent type is LR, tuples otherwise.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from attrs import frozen

from chad.compile import kernels, shifts
from chad.compile.ieee import quiet
from chad.compile.known import NO_NEG_ZERO, ONE_HOT, is_iota
from chad.compile.order import add_rows, column_sums
from chad.compile.scaled import ScaledRows
from chad.errors import EvalError
from chad.linear import LR, LType, plusv, size as size_of, zerov



class Bag:
    """Base class of bag values (immutable)."""

    __slots__ = ()

    def plus(self, other) -> tuple["Bag", int]:
        """plusv on bags: constant time (BPlus), cost 1."""
        if other is None or other is BEMPTY:
            return self, 1
        if self is BEMPTY:
            return other, 1
        if not isinstance(other, Bag):
            raise TypeError(f"cannot add the bag {self!r} and {other!r}")
        return BPlus(self, other), 1

    def phi(self) -> int:
        return self.size()


class BEmptyBag(Bag):
    __slots__ = ()

    def size(self) -> int:
        return 1

    def __repr__(self) -> str:
        return "BEmpty"


BEMPTY = BEmptyBag()


class BOne(Bag):
    """A one-hot cotangent: the pair (index, cotangent of that element)."""

    __slots__ = ("index", "value")

    def __init__(self, index: int, value):
        self.index = index
        self.value = value

    def size(self) -> int:
        return 1 + size_of(self.value)

    def __repr__(self) -> str:
        return f"BOne({self.index}, {self.value!r})"


class BPlus(Bag):
    __slots__ = ("left", "right", "_size")

    def __init__(self, left: Bag, right: Bag):
        self.left = left
        self.right = right
        self._size = None

    def size(self) -> int:
        if self._size is None:  # iterative: BPlus chains can be very deep
            total = 0
            stack = [self]
            while stack:
                b = stack.pop()
                if isinstance(b, BPlus):
                    if b._size is not None:
                        total += b._size
                        continue
                    total += 1
                    stack.append(b.right)
                    stack.append(b.left)
                else:
                    total += b.size()
            self._size = total
        return self._size

    def __repr__(self) -> str:
        return f"BPlus({self.left!r}, {self.right!r})"


class BArray(Bag):
    """§8.1's BArray: the pairs (idx[k], vals[k]); idx None = (k, vals[k])."""

    __slots__ = ("vals", "idx", "_size")

    def __init__(self, vals, idx=None):
        if idx is not None and len(idx) != len(vals):
            raise ValueError("BArray: idx and vals differ in length")
        if idx is not None and is_iota(idx):
            idx = None  # 0..len-1 by construction (chad/compile/known.py): the same pairs
        self.vals = vals
        self.idx = idx
        self._size = None

    def __len__(self) -> int:
        return len(self.vals)

    def size(self) -> int:
        if self._size is None:
            v = self.vals
            if isinstance(v, np.ndarray) and v.dtype == np.float64:
                self._size = 1 + len(v)
            else:
                self._size = 1 + sum(size_of(x) for x in v)
        return self._size

    def __repr__(self) -> str:
        return f"BArray({list(self.vals)!r}, idx={None if self.idx is None else list(self.idx)})"


class BRows(BArray):
    """n adds of `BArray (rows[k])` (identity indices) to one cell, k = 0 ..
    n-1 in that order: as a bag, the BArray of their pairs in the order their
    chain BPlus(b_{n-1}, ... BPlus(b_0, cell)) lists them (last row first). Its
    pairs are made only when something collects them; a dense sum reads the
    rows themselves (`_dense_parts`: the same additions, in the same order,
chad/compile/order.py).
    Made by a nested loop's reverse pass (chad/arrays/nested_support.py)."""

    __slots__ = ("rows", "_vals", "_idx")

    def __init__(self, rows: np.ndarray):
        self.rows = rows
        self._vals = self._idx = None
        self._size = None

    @property
    def vals(self):
        if self._vals is None:
            self._vals = np.ascontiguousarray(self.rows[::-1]).reshape(-1)
        return self._vals

    @property
    def idx(self):
        if self._idx is None:
            n, m = self.rows.shape
            self._idx = np.tile(np.arange(m, dtype=np.int64), n)
        return self._idx


def last_first(parts: list, n: int, m: int, dtype):
    """The rows of a chain of adds, last add first: element i's parts (n x m
    each) in order, for i = 0 .. n-1, is the chain; its rows reversed, each
    row's m values in order, flat, copied once."""
    out = np.empty((n, len(parts), m), dtype=dtype)
    back = out[::-1, ::-1]  # row (i, p) of the chain at the reversed place
    size = out.itemsize
    row = np.dtype((np.void, m * size)) if m else None
    rows = out.view(row)[..., 0][::-1, ::-1] if m and n else None  # each row one item
    for p, x in enumerate(parts):
        x = np.asarray(x)
        if rows is not None and x.dtype == dtype and x.shape == (n, m) and x.strides[1] == size:
            # rows of m adjacent values copied whole (numpy's copy of the
            # values one by one runs an inner loop of m per row: 3 times slower)
            if x.strides[0] == m * size:
                rows[:, p] = x.view(row)[:, 0]
                continue
            if x.strides[0] == 0:  # the same row for every element
                rows[:, p] = np.ascontiguousarray(x[0]).view(row)[0]
                continue
        back[:, p] = x
    return out.reshape(-1)



class BChain(BArray):
    """The adds an outer loop's n elements make to one cell, each of P bags of
    m pairs at indices of their own (element i's p-th add: `parts[p]`, a pair
    of n x m arrays, its values and int64 indices, row i), in the order
    0, 1, ..., n-1, each element's in order: as a bag, the BArray of their
    pairs in the order their chain of BPlus lists them (element n-1's last add
    first, each add's m pairs in order). Its pairs are made only when
    something collects them; a scatter adds them from the rows themselves
    (chad/compile/kernels.py, chain: the same additions, in the same order).
    Made by a nested loop's reverse pass (chad/arrays/nested_support.py)."""

    __slots__ = ("parts", "n", "m", "_vals", "_idx")

    def __init__(self, parts: list, n: int, m: int):
        self.parts, self.n, self.m = parts, n, m
        self._vals = self._idx = None
        self._size = None

    def __len__(self) -> int:
        return self.n * len(self.parts) * self.m

    def size(self) -> int:
        return 1 + len(self)

    @property
    def vals(self):
        if self._vals is None:
            self._vals = last_first([x for x, _ix in self.parts], self.n, self.m, np.float64)
        return self._vals

    @property
    def idx(self):
        if self._idx is None:
            self._idx = last_first([ix for _x, ix in self.parts], self.n, self.m, np.int64)
        return self._idx

    def scatter_into(self, out: np.ndarray):
        """Its pairs added into out (1-D float64) in order: True, False at an
        index out of range, None without the C loop."""
        return kernels.chain(out, tuple(x for x, _ix in self.parts),
                             tuple(ix for _x, ix in self.parts))


@frozen
class BagT(LType):
    """The linear type Bag (Z × elem): D[Array τ]₂ with elem = D[τ]₂."""

    elem: LType

    def zero(self):
        return BEMPTY, 1


def as_bag(x) -> Bag:
    """None (a sparse zero that reached an array position) is BEmpty."""
    return BEMPTY if x is None else x


# ----------------------------------------------------------------- collect / scatter


class Pairs:
    """The result of `collect`: an array of (index, cotangent) pairs, stored as an
    int64 index array (None: the identity 0..len-1) and the cotangents (a float64
    array when the element cotangent type is LR, a list otherwise)."""

    __slots__ = ("idx", "vals")

    def __init__(self, idx, vals):
        self.idx = idx
        self.vals = vals

    def __len__(self) -> int:
        return len(self.vals)

    def __repr__(self) -> str:
        idx = range(len(self.vals)) if self.idx is None else self.idx
        return f"Pairs({list(zip(map(int, idx), list(self.vals)))!r})"


def leaves(bag):
    """The leaves of a bag's tree of BPlus, left to right, each with the number
    of constructors visited to reach it (itself and the BPlus nodes above it not
    counted yet). Iterative: BPlus chains can be very deep."""
    stack = [bag]
    nodes = 0
    while stack:
        b = stack.pop()
        nodes += 1
        if isinstance(b, BPlus):
            stack.append(b.right)
            stack.append(b.left)
        else:
            yield b, nodes
            nodes = 0


def collect(bag, elem_lt: LType) -> tuple[Pairs, int]:
    """Flatten a bag into its pairs, left to right; (pairs, work) where work is
    the number of constructors visited plus the number of BArray entries."""
    bag = as_bag(bag)
    if isinstance(bag, BArray):  # the common dense case: no copy
        vals = bag.vals
        if isinstance(elem_lt, LR) and not isinstance(vals, np.ndarray):
            vals = np.asarray(vals, dtype=np.float64)
        return Pairs(bag.idx, vals), 1 + len(vals)
    real = isinstance(elem_lt, LR)
    idx_parts: list = []
    val_parts: list = []
    one_idx: list = []
    one_val: list = []
    work = 0

    def flush():
        if one_idx:
            idx_parts.append(np.asarray(one_idx, dtype=np.int64))
            val_parts.append(np.asarray(one_val, dtype=np.float64) if real else list(one_val))
            one_idx.clear()
            one_val.clear()

    for b, nodes in leaves(bag):
        work += nodes
        if isinstance(b, BOne):
            one_idx.append(b.index)
            one_val.append(b.value)
        elif isinstance(b, BArray):
            flush()
            n = len(b.vals)
            work += n
            idx_parts.append(np.arange(n, dtype=np.int64) if b.idx is None
                             else np.asarray(b.idx, dtype=np.int64))
            if real:
                val_parts.append(np.asarray(b.vals, dtype=np.float64))
            else:
                val_parts.append(list(b.vals))
        elif b is BEMPTY or b is None:
            pass
        else:
            raise TypeError(f"collect: not a bag: {b!r}")
    flush()
    if not idx_parts:
        idx = np.zeros(0, dtype=np.int64)
        vals = np.zeros(0) if real else []
    elif len(idx_parts) == 1:
        idx, vals = idx_parts[0], val_parts[0]
    else:
        idx = np.concatenate(idx_parts)
        if real:
            vals = np.concatenate(val_parts)
        else:
            vals = [v for part in val_parts for v in part]
    return Pairs(idx, vals), work


def zeros(n: int, elem_lt: LType):
    """A dense array of n zero cotangents; (array, cost n)."""
    if isinstance(elem_lt, LR):
        return np.zeros(n), n
    z, _ = zerov(elem_lt)
    return (z,) * n, n


def scatter(dense, pairs: Pairs, elem_lt: LType):
    """Add every pair into a copy of the dense array: (result, work), work = the
    sum of the plusv costs (1 per pair for reals). Linear time."""
    n = len(dense)
    m = len(pairs)
    idx = pairs.idx
    if idx is not None and m:
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= n:
            bad = lo if lo < 0 else hi
            raise EvalError(f"internal: cotangent index {bad} out of range for an array of length {n}")
    elif idx is None and m > n:
        raise EvalError(f"internal: a cotangent of length {m} for an array of length {n}")
    if isinstance(elem_lt, LR):
        if idx is None and m == n and m:
            with quiet():  # IEEE (inf + -inf is NaN), no numpy warning
                # dense + vals elementwise: the additions below, in one pass
                return np.add(np.asarray(dense, dtype=np.float64), pairs.vals,
                              dtype=np.float64), m
        out = np.array(dense, dtype=np.float64, copy=True)
        if m:
            with quiet():  # IEEE (inf + -inf is NaN), no numpy warning
                if idx is None:
                    out[:m] += pairs.vals
                else:
                    out += np.bincount(idx, weights=pairs.vals, minlength=n)
        return out, m
    out = list(dense)
    work = 0
    it = range(m) if idx is None else idx.tolist()
    for k, i in enumerate(it):
        out[i], c = plusv(out[i], pairs.vals[k])
        work += c
    return tuple(out), work


def dense_of(items: list, elem_lt: LType):
    """A dense array of element cotangents from a Python list."""
    if isinstance(elem_lt, LR):
        return np.asarray([0.0 if x is None else x for x in items], dtype=np.float64)
    return tuple(items)


def fill(n: int, x) -> np.ndarray:
    """n copies of the real x as one read-only view of a single element (as
    np.broadcast_to, at a quarter of its cost). The last one of 1.0 (a
    gradient's output cotangent) is given again for the same n: it can never
    be changed (numpy refuses to make it writeable)."""
    if x == 1.0 and n == _ONES[0]:
        return _ONES[1]
    one = np.array([x], dtype=np.float64)
    if x == 1.0:  # (a view of a read-only array: never made writeable again)
        one.flags.writeable = False
    out = np.ndarray((n,), np.float64, one, 0, (0,))
    out.flags.writeable = False
    if x == 1.0:
        _ONES[0], _ONES[1] = n, out
    return out


_ONES: list = [-1, None]  # fill's last n copies of 1.0: (n, the array)


def dense_real(bag, n: int, take: bool = False):
    """scatter (zeros n) (collect bag) for real elements where the bag is one
    BArray of n reals at the identity indices: 0.0 + v for each v, in one pass
    (the zeros are never made); else None. With `take`, an array of sums that
    has no -0.0 (chad/compile/known.py), for which 0.0 + v is v, and that
    nothing but the bag holds (as numpy's own elision of temporaries, by its
    reference count) is the result itself: the bag, used affinely, gives it up."""
    if type(bag) is BRows and bag.rows.ndim == 2 and bag.rows.shape[1] == n:
        # its rows are the parts of a sum, last row first (as _dense_parts lists
        # them): 0.0 + each row in turn; no rows, or rows of other numbers: None
        rows = bag.rows
        if not len(rows) or rows.dtype != np.float64:
            return None
        with quiet():
            return column_sums(rows.reversed() if type(rows) is ScaledRows else rows[::-1])
    if type(bag) is BArray and bag.idx is None:
        v = bag.vals
        if isinstance(v, np.ndarray) and v.dtype == np.float64 and v.shape == (n,):
            if take and v in NO_NEG_ZERO and sys.getrefcount(v) <= _SOLE and v.flags.writeable:
                return v
            with quiet():
                if v.strides == (0,) and n:  # a fill (BFill): n copies of one real
                    return fill(n, v[0] + 0.0)
                return np.add(v, 0.0)
    elif type(bag) is BPlus:
        parts = _dense_parts(bag, n)
        if take and parts and len(parts) == 2 and parts[0].ndim == parts[1].ndim == 1:
            done = _add_one_hot(parts, n)
            if done is not None:
                return done
        if (take and parts and len(parts) == 2 and parts[0].ndim == parts[1].ndim == 1
                and parts[0] in NO_NEG_ZERO):
            # 0.0 + w1 is w1, and w1 + w2 is w2 + w1: added into whichever of
            # the two only the bag holds (references: the bag's slot, the list,
            # the name, getrefcount's argument)
            for k in (1, 0):
                w = parts[k]
                if (w.flags.writeable and w.flags.owndata and w.strides == (8,)
                        and sys.getrefcount(w) <= _SOLE + 1):
                    with quiet():
                        np.add(w, parts[1 - k], out=w)
                    return w
        if parts:
            # collect's pairs, scattered with bincount: each element is
            # 0.0 + w1 + w2 + ... in the bag's order (and adding the zeros
            # after that changes nothing: a sum from +0.0 is never -0.0); a
            # block of rows (BRows), or a long run of arrays stacked into one,
            # adds its rows in turn (chad/compile/order.py)
            parts = _blocks(parts)
            first = parts[0]
            with quiet():
                out = column_sums(first) if first.ndim == 2 else np.add(first, 0.0)
                for w in parts[1:]:
                    if w.ndim == 1:
                        np.add(out, w, out=out)
                    else:
                        out = add_rows(out, w)
            return out
    return None


_RUN = 8  # arrays in a row from which one stacked block is cheaper than their adds


def _blocks(parts: list) -> list:
    """parts with every run of at least _RUN consecutive arrays replaced by
    the block of them as rows (the same additions in the same order)."""
    if len(parts) < _RUN:
        return parts
    out: list = []
    run: list = []
    for w in parts + [None]:
        if w is not None and w.ndim == 1:
            run.append(w)
            continue
        if len(run) >= _RUN:
            out.append(np.stack(run))
        else:
            out.extend(run)
        run = []
        if w is not None:
            out.append(w)
    return out


def _add_one_hot(parts: list, n: int):
    """0.0 + w1 + w2 for each element, of a bag's two arrays, when one is a
    fold's leaf cotangents (ONE_HOT: +0.0 but at element k) and the other an
    array of sums without -0.0 (NO_NEG_ZERO) that only the bag holds: that
    array with element k set to 0.0 + w1[k] + w2[k] (elsewhere the sum is
    0.0 + w + 0.0 or 0.0 + 0.0 + w, which is w: no pass); else None."""
    for i in (0, 1):
        k = ONE_HOT.fact(parts[i])
        w = parts[1 - i]  # (referred to by the bag, the list, w and getrefcount)
        if (k is not None and w in NO_NEG_ZERO and w.flags.writeable and w.flags.owndata
                and w.strides == (8,) and sys.getrefcount(w) <= _SOLE + 1):
            w[k] = (0.0 + float(parts[0][k])) + float(parts[1][k])
            return w
    return None


def _dense_parts(bag, n: int) -> list | None:
    """The arrays of a tree of BPlus over BEmpty and BArrays of n reals at the
    identity indices, left to right (a BRows: the block of its rows in the
    pairs' order, last row first); None for any other bag."""
    parts = []
    for b, _nodes in leaves(bag):
        if type(b) is BRows:
            rows = b.rows
            if not (rows.dtype == np.float64 and rows.ndim == 2 and rows.shape[1] == n):
                return None
            if len(rows):
                parts.append(rows.reversed() if type(rows) is ScaledRows else rows[::-1])
        elif type(b) is BArray and b.idx is None:
            v = b.vals
            if not (isinstance(v, np.ndarray) and v.dtype == np.float64 and v.shape == (n,)):
                return None
            parts.append(v)
        elif b is not BEMPTY:
            return None
    return parts


# references to an array held only by a bag, seen in dense_real: the bag's
# slot, the local name and getrefcount's argument
_SOLE = 3


def scatter_reals(bag, n: int) -> np.ndarray | None:
    """scatter (zeros n) (collect bag) for real elements, leaf by leaf: a new
    array, or None for a bag of other leaves (or one the general path must
    report). Every element gets 0.0 + its pairs' values one after the other,
    in the bag's order, as collect's pairs scattered (bincount adds a bin's
    values in the pairs' order from +0.0): a whole array (identity indices) is
    one elementwise add, indexed pairs are `np.add.at` (unbuffered, in index
    order), runs of BOne one `np.add.at`, a block of rows add_rows. Without
    the concatenation of every leaf's pairs that collect makes. A first leaf
    of n reals at the identity indices is added to the zeros as it makes them
    (0.0 + v, one pass: the zeros never made)."""
    out = None
    one_idx: list = []
    one_val: list = []
    with quiet():
        for b, _nodes in leaves(bag):
            t = type(b)
            if t is BOne:
                one_idx.append(b.index)
                one_val.append(b.value)
                continue
            if out is None:
                v = b.vals if t is BArray and b.idx is None and not one_idx else None
                if type(v) is np.ndarray and v.dtype == np.float64 and v.shape == (n,):
                    out = np.add(0.0, v)
                    continue
                out = np.zeros(n)
            if one_idx and not _add_at(out, one_idx, one_val):
                return None
            one_idx, one_val = [], []
            if t is BChain:
                done = b.scatter_into(out)
                if done is None:  # (no C loop: its pairs, made)
                    done = _add_at(out, b.idx, b.vals)
                if not done:
                    return None
            elif t is BRows:
                rows = b.rows
                if not (rows.dtype == np.float64 and rows.ndim == 2 and rows.shape[1] == n):
                    return None
                if len(rows):
                    out = add_rows(out, rows[::-1])
            elif t is BArray:
                v = b.vals
                if not (type(v) is np.ndarray and v.dtype == np.float64 and v.ndim == 1):
                    return None
                if b.idx is None:
                    m = len(v)
                    if m > n:
                        return None
                    np.add(out[:m], v, out=out[:m])
                elif not _add_at(out, b.idx, v):
                    return None
            elif not (b is BEMPTY or b is None):
                return None
        if out is None:
            out = np.zeros(n)
        if one_idx and not _add_at(out, one_idx, one_val):
            return None
    return out


def _add_at(out: np.ndarray, idx, vals) -> bool:
    """out[idx[k]] += vals[k] for k in order; False when an index is out of
    range or a value is not a real (out then holds some of the adds, and the
    caller drops it)."""
    if shifts.scatter(out, idx, vals):  # a loop index shifted and clamped: slices
        return True
    idx = np.asarray(idx)
    if not len(idx):
        return True
    if idx.dtype.kind not in "iu":  # (Python ints beyond int64: object)
        return False
    idx = idx.astype(np.int64, copy=False)
    vals = np.asarray(vals)
    if vals.dtype != np.float64 or vals.shape != idx.shape:
        return False
    done = kernels.scatter(out, idx, vals) if idx.ndim == 1 else None
    if done is not None:  # the C loop (where built): the same additions
        return done
    if idx.min() < 0:
        return False
    try:  # (an index past the end: numpy's IndexError)
        np.add.at(out, idx, vals)
    except IndexError:
        return False
    return True


def to_dense(bag, n: int, elem_lt: LType):
    """scatter (zeros n) (collect bag), without the costs."""
    if isinstance(elem_lt, LR):
        out = dense_real(bag, n, take=True)
        if out is not None:
            return out if out.flags.writeable else np.array(out)
        out = scatter_reals(BEMPTY if bag is None else bag, n)
        if out is not None:
            return out
    z, _ = zeros(n, elem_lt)
    pairs, _ = collect(bag, elem_lt)
    out, _ = scatter(z, pairs, elem_lt)
    return out


# ----------------------------------------------------------------- fold trees (Fig. 10)


class Leaf:
    """Tree a f: a leaf holds an element of the folded array and its position."""

    __slots__ = ("value", "index")

    def __init__(self, value, index: int):
        self.value = value
        self.index = index

    def __repr__(self) -> str:
        return f"Leaf({self.value!r})"


class Node:
    """Tree a f: Node t1 a f t2 — the combined value and the combine's backpropagator."""

    __slots__ = ("left", "value", "bp", "right")

    def __init__(self, left, value, bp, right):
        self.left = left
        self.value = value
        self.bp = bp
        self.right = right

    def __repr__(self) -> str:
        return f"Node({self.left!r}, {self.value!r}, {self.right!r})"


def get_a(tree) -> Any:
    """getA (Fig. 10)."""
    return tree.value
