"""What the reverse pass of a build nested in a build calls at run time, when
both loops are batched (chad/arrays/nested.py; docs/compiler.md, "Nested
loops"): the outer loop's n elements are axis 0, the inner loop's m elements
axis 1.

* A real cell of every (outer, inner) element pair is an n x m array (`vadd2`):
  added to elementwise, as the evaluator adds to each element's cell.
* A bag cell of every outer element (the cotangent of a row) keeps its adds as
  they come (`RowBags`: BArrays of the rows of an n x m array, or another such
  cell), and builds element i's bag from them, in the order and with the
  additions (`plusv`) the evaluator makes: no number is added here, so the bags
  and everything summed from them later are the evaluator's, bit for bit.
* An add of such bags to a cell shared by the outer elements is n adds, in the
  elements' order (`vbagadd`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import numpy as np

from chad.compile.known import NO_NEG_ZERO, clear_of_negative_zero, iota, is_iota
from chad.compile.scaled import ScaledRows
from chad.compile.shapes import broadcast, view
from chad.compile.support import padd
from chad.compile.vector_support import (
    Fallback, PerElement, numbers_array, place, vgather, vtake2,
)

from chad.compile.ieee import quiet
from chad.compile.kernels import rows
from chad.linear import LR

from .bag import BEMPTY, Bag, BArray, BChain, BRows, to_dense

_I64 = np.dtype(np.int64)


class RowBags(PerElement):
    """The bag cells of n outer elements: the common initial bag, then the
    adds in order, each ("rows", vals, idx) — BArray (vals[i], idx) for
    element i — or ("cell", RowBags) — that cell's bag of element i."""

    __slots__ = ("init", "items")

    def __init__(self, init=BEMPTY) -> None:
        self.init = init
        self.items: list = []

    def bag(self, i: int):
        if len(self.items) == 1 and self.init is BEMPTY:  # plusv(b, BEmpty) is b
            return item_bag(self.items[0], i)
        acc = self.init
        for item in self.items:
            acc = padd(item_bag(item, i), acc)
        return acc

    def finals(self, n: int) -> tuple:
        rows = self._rows()
        if rows is not None and rows.shape[0] == n:
            return RowsTuple(rows)
        return tuple(self.bag(i) for i in range(n))

    def _rows(self):
        """The matrix whose rows are the elements' bags (at the identity
        indices), when this cell's only add is one, maybe through cells."""
        cell = self
        while len(cell.items) == 1 and cell.init is BEMPTY:
            kind, x, idx = cell.items[0]
            if kind == "rows":
                ok = idx is None or (is_iota(idx) and len(idx) == x.shape[1])
                return x if ok and x.ndim == 2 else None
            if kind != "cell":
                return None
            cell = x
        return None


class RowsTuple(Sequence):
    """The n bags BArray (matrix[i]), as a sequence (the evaluation rule's
    array of the elements' final cells): `matrix` for a dense sum of all rows
    at once (chad/arrays/cotangents.py); the bags themselves are made only
    when something reads them."""

    __slots__ = ("matrix", "_bags")

    def __init__(self, matrix: np.ndarray) -> None:
        self.matrix = matrix
        self._bags = None

    def __len__(self) -> int:
        return len(self.matrix)

    def __getitem__(self, i):
        return self._items()[i]

    def __iter__(self):
        return iter(self._items())

    def _items(self) -> tuple:
        if self._bags is None:
            self._bags = tuple([BArray(row) for row in self.matrix])
        return self._bags


class PairOnes:
    """The bag cells of every (outer, inner) element pair in a `run` in an
    inner loop (an inlined call's array parameter: kmeans' `sqdist(ps, i, zs,
    c)`): the one-hot adds made to them, in order, each (idx, vals), two n x m
    arrays (element pair (i, j)'s bag: BOne (idx[i, j], vals[i, j]) of each
    add, chained newest first)."""

    __slots__ = ("adds",)

    def __init__(self) -> None:
        self.adds: list = []

    def add(self, idx, vals, shape: tuple) -> None:
        # (the forward pass's reads checked these indices: within int64)
        self.adds.append((broadcast(idx, shape, _I64), broadcast(vals, shape)))

    def stacked(self, shape: tuple) -> tuple:
        """(idx, vals), n x m x K: the K adds of every element pair in order."""
        if not self.adds:
            return np.zeros(shape + (0,), dtype=np.int64), np.zeros(shape + (0,))
        return (np.stack([i for i, _ in self.adds], axis=2),
                np.stack([v for _, v in self.adds], axis=2))


def ones_bag(idx, vals):
    """The bag of a chain of one-hot adds, given as rows (each row's adds in
    order, the rows in order): the adds' pairs in the order the chain lists
    them (the last first), one BArray (or BEmpty for none)."""
    if not idx.size:
        return BEMPTY
    # reversed views (a bag's arrays are never changed in place; the scatter
    # reads any strides)
    return BArray(vals.reshape(-1)[::-1], idx.reshape(-1)[::-1])


def item_bag(item, i: int):
    """Element i's bag of an add of RowBags: BArray (vals[i]) at idx (a row of
    idx when each element has its own indices: an n x m array), or the
    element's bag of another cell."""
    kind, x, idx = item
    if kind == "ones":  # element i's inner elements' one-hot adds, in order
        return ones_bag(idx[i], x[i])
    if kind != "rows":
        return x.bag(i)
    if idx is not None and getattr(idx, "ndim", 1) == 2:
        idx = idx[i]
    return BArray(x[i], idx)


def bag_cells(cells: list, base: int) -> None:
    """The per-element cells that start as a bag (sequenceScoped's initial
    values): RowBags from that bag."""
    for level in range(base, len(cells)):
        if isinstance(cells[level], Bag):
            cells[level] = RowBags(cells[level])


def vbagadd(cells: list, level: int, run, n: int, item) -> None:
    """`add level b` by every outer element, b a bag of rows (item): into the
    element's own cell (level >= base), kept in order; to a cell shared by the
    elements, kept until the pass ends (`shared_adds`: element 0's adds, then
    element 1's, ..., as the evaluator runs them)."""
    if level >= len(cells):
        raise IndexError(f"add: level {level} out of range for {len(cells)} cells")
    if level >= run.base:
        cell = cells[level]
        if type(cell) is not RowBags:
            cell = cells[level] = RowBags(BEMPTY if cell is None else cell)
        cell.items.append(item)
        return
    later = run.later.get(level)
    if later is None:
        later = run.later[level] = (partial(shared_adds, n=n), [])
    later[1].append(item)


def shared_adds(cells: list, level: int, items: list, n: int) -> None:
    """The adds of bags of rows that n outer elements make to one shared cell,
    in the evaluator's order: element i's adds (in the order of `items`), for
    i = 0 .. n-1, each `cell = plusv(b, cell)` (a forked half's cells log them:
    chad/compile/parallel_support.py). When every add is of rows at the
    identity indices, the same chain of adds is one BRows bag of the rows
    interleaved in that order."""
    if not n:  # no outer element: no add
        return
    if type(cells) is list and len(items) == 1:  # (the two cases below, for one add)
        kind, x, idx = items[0]
        if kind == "ones":
            cells[level] = padd(ones_bag(idx, x), cells[level])
            return
        if kind == "rows" and (idx is None or is_iota(idx)) and x.ndim == 2 and x.shape[0] == n:
            cells[level] = padd(BRows(x), cells[level])
            return
    if type(cells) is list and all(kind == "ones" for kind, _x, _idx in items):
        # one-hot adds of every element's inner elements: element 0's items in
        # order, then element 1's, ...: one chain, one BArray
        if len(items) == 1:
            _kind, vals, idx = items[0]
        else:
            vals = np.concatenate([x.reshape(n, -1) for _kind, x, _idx in items], axis=1)
            idx = np.concatenate([ix.reshape(n, -1) for _kind, _x, ix in items], axis=1)
        cells[level] = padd(ones_bag(idx, vals), cells[level])
        return
    if type(cells) is list and all(kind == "rows" and (idx is None or is_iota(idx))
                                   and x.ndim == 2 and x.shape[0] == n
                                   for kind, x, idx in items):
        widths = {x.shape[1] for _kind, x, _idx in items}
        if len(widths) == 1:
            rows = items[0][1] if len(items) == 1 else \
                np.stack([x for _kind, x, _idx in items], axis=1).reshape(n * len(items), -1)
            cells[level] = padd(BRows(rows), cells[level])
            return
    if type(cells) is list and n and all(kind == "rows" and x.ndim == 2 and x.shape[0] == n
                                         for kind, x, _idx in items):
        # rows at indices of their own (an outer product's `a ! i`): the chain
        # as one bag of its pairs, last add first (made only if collected)
        widths = {x.shape[1] for _kind, x, _idx in items}
        if len(widths) == 1:
            m = widths.pop()
            parts = [(broadcast(x, (n, m)), _indices(ix, n, m)) for _kind, x, ix in items]
            cells[level] = padd(BChain(parts, n, m), cells[level])
            return
    for i in range(n):
        for item in items:
            cells[level] = padd(item_bag(item, i), cells[level])


def _indices(idx, n: int, m: int):
    """The n x m array of an add's indices (None: the identity of each row)."""
    if idx is None:
        return view(iota(m), (n, m))
    idx = np.asarray(idx, dtype=np.int64)
    return idx if idx.ndim == 2 else view(idx, (n, m))


def vgather_numbers(a, idx, live: int = 1):
    """A gather of an untyped array by batched indices in a nested forward
    pass (an outer product's `a ! i`): an array of numbers
    (vector_support.numbers_array), else the region's guard fails."""
    return vgather(numbers_array(a), idx, live)


def vgather_reals(a, idx, live: int = 1):
    """`a ! j` for a batched integer j of an untyped array in a nested forward
    pass (a target term: kmeans' `ps ! (2 * i)` after CHAD): a must be an
    Array R (a float64 array), else the region's guard fails (Fallback)."""
    if not (type(a) is np.ndarray and a.dtype == np.float64 and a.ndim == 1):
        raise Fallback("not an array of reals")
    return vgather(a, idx, live)


def vdense_bags(cell, n: int, m: int):
    """scatter (zeros m) (collect b_i) for each outer element's bag b_i of a
    bag cell (RowBags, or a bag every element shares): an n x m array. Element
    i's bag is its adds chained newest first (`padd(new, cell)`: BPlus(new,
    cell)), so each entry is 0.0 + the newest add's value + the one before
    ...; when every add is a whole row at the identity indices that is a few
    elementwise adds, else each element's bag is made dense on its own
    (bag.to_dense, the evaluator's scatter)."""
    m = max(m, 0)  # (a negative size: only where no outer element runs the loop)
    if type(cell) is RowBags:
        items = cell.items
        if (cell.init is BEMPTY and items and all(
                kind == "rows" and x.ndim == 2 and x.shape == (n, m)
                and (idx is None or (getattr(idx, "ndim", 1) == 1 and len(idx) == m
                                     and is_iota(idx)))
                for kind, x, idx in items)):
            with quiet():
                out = np.add(items[-1][1], 0.0)
                for _kind, x, _idx in reversed(items[:-1]):
                    np.add(out, x, out=out)
            return out
        bags = [cell.bag(i) for i in range(n)]
    else:
        bags = [cell] * n
    out = np.zeros((n, m))
    for i, bag in enumerate(bags):
        out[i] = to_dense(BEMPTY if bag is None else bag, m, LR())
    return out


def rows_of(vals, n: int):
    """A BArray's values in a nested reverse pass: an n x m array (a value of
    the outer loop only is the same row for every element; a block of
    products, `vadd_scaled`'s, as it is)."""
    if type(vals) is ScaledRows and len(vals) == n:
        return vals
    x = np.asarray(vals, dtype=np.float64)
    if x.ndim == 2 and x.shape[0] == n:
        return x
    return np.broadcast_to(x.reshape(-1) if x.ndim <= 1 else x, (n,) + x.shape[1:])


def vadd2(cells: list, level: int, v, shape: tuple, adopt: bool = False) -> None:
    """`add level v` by every (outer, inner) element pair, into their own
    real cells (an array of `shape`, made by the first add from the cells'
    initial real, then added to in place). `adopt`: v was computed for this
    add alone (as vector_support.vadd's), so the first add may keep it as
    the cells' array instead of a copy."""
    cur = cells[level]
    if type(cur) is np.ndarray and cur.shape == shape:
        np.add(cur, v, out=cur)
        return
    if not (type(v) is np.ndarray and v.shape == shape and v.dtype == np.float64):
        v = np.broadcast_to(np.asarray(v, dtype=np.float64), shape)
    elif adopt and v.flags.writeable and v.flags.owndata:
        # plusv(v, None) is v itself; else v + the initial real, in v
        cells[level] = v if cur is None else np.add(v, cur, out=v)
        return
    # plusv(v, None) is v itself; else v + the cells' initial real (a new array)
    cells[level] = np.array(v) if cur is None else np.add(v, cur)


def vaddpair(cells: list, level: int, a, b, shape: tuple) -> None:
    """`add level (a, b)` by every element pair into their own pair cells
    (None: the sparse zero pair): componentwise, as plusv adds pairs; the
    cell a list of two n x m arrays of its own."""
    cur = cells[level]
    if cur is None:
        cells[level] = [np.array(broadcast(x, shape)) for x in (a, b)]
        return
    np.add(cur[0], a, out=cur[0])
    np.add(cur[1], b, out=cur[1])


def vadd_scaled(cells: list, level: int, first: int, buf: dict, col, mat, shape: tuple) -> None:
    """vadd_in of the product col * mat (an outer element's real, n x 1,
    times the element pair's, n x m), computed for this add alone: the first
    add to an element pair's cell that holds its initial real keeps the
    product unmade (chad/compile/scaled.py: its column sums, the transposed
    matrix-vector product, are then one pass over mat); anything else adds
    the product as vadd_in does."""
    if (level >= first and type(cells) is list and level < len(cells)
            and (cells[level] is None or type(cells[level]) is float)
            and type(col) is np.ndarray and type(mat) is np.ndarray
            and col.dtype == mat.dtype == np.float64 and col.shape == (shape[0], 1)
            and (mat.shape == shape or mat.shape == (1, shape[1]))):
        # (a value of the inner loop only, 1 x m: the same row for every
        # outer element, an outer product's)
        cells[level] = ScaledRows(col.reshape(-1), broadcast(mat, shape), cells[level])
        return
    with quiet():
        v = np.multiply(col, mat)
    vadd_in(cells, level, first, buf, v, shape, True)


def vadd_in(cells: list, level: int, first: int, buf: dict, v, shape: tuple,
            adopt: bool = False) -> None:
    """`add level v` in an inner loop: into the element pairs' own cells
    (level >= first, the inner loop's first cell: vadd2, `adopt` as there); to
    a cell of the outer element or a shared one, kept in `buf` until the loop
    ends (`inner_adds`)."""
    if level >= first:
        vadd2(cells, level, v, shape, adopt)
        return
    buf.setdefault(level, []).append(broadcast(v, shape))


def inner_adds(cells: list, run, buf: dict, shape: tuple) -> None:
    """The adds an inner loop made to cells not its own, in the evaluator's
    order: outer element i's are those of its inner elements j = 0 .. m-1, each
    element's in program order. To the outer element's own real cell (level >=
    run.base): the running sum of them from the cell's value, along each row
    (chad/compile/kernels.py, rows: one addition after the other); to a
    shared cell: a part of the pass's adds to it (vector_support.Pass.flush
    sums them all, in order)."""
    n, m = shape
    if not n:  # no outer element: nothing was added
        buf.clear()
        return
    for level, parts in buf.items():
        if type(parts[0]) is PairOnes:  # bags of one-hot adds (a run's cells)
            _ones_adds(cells, run, level, parts, shape)
            continue
        seq = parts[0] if len(parts) == 1 else np.stack(parts, axis=2)
        seq = np.array(seq, dtype=np.float64).reshape(n, -1)  # row i: element i's adds
        if level >= run.base:
            cur = cells[level]
            if cur is not None or seq.shape[1]:
                cells[level] = rows(seq, n, cur)
                run.owned.add(level)
        elif seq.shape[1]:  # (an empty inner loop adds nothing)
            run.pending.setdefault(level, []).append((seq, None, False))
    buf.clear()


def _ones_adds(cells: list, run, level: int, parts: list, shape: tuple) -> None:
    """An inner loop's adds of its element pairs' bags of one-hot adds to a
    cell of the outer element or a shared one: element pair (i, j)'s bags in
    program order, j = 0 .. m-1; one item ("ones", vals, idx: n x m x K) of
    the outer element's adds, as vbagadd keeps them."""
    stacks = [p.stacked(shape) for p in parts]
    if len(stacks) == 1:
        idx, vals = stacks[0]
    else:
        idx = np.concatenate([i for i, _ in stacks], axis=2)
        vals = np.concatenate([v for _, v in stacks], axis=2)
    vbagadd(cells, level, run, shape[0], ("ones", vals, idx))


def final2(cell, init, shape: tuple):
    """An inner scope's kept cells, as an array of `shape`: never added to,
    its initial value (0.0 for none); else the cells' array, recorded as free
    of -0.0 when the sums started from a real other than -0.0 (as
    vector_support's `_final`: chad/compile/known.py); a block of products
    added once (`vadd_scaled`) as it is."""
    if type(cell) is ScaledRows:
        return cell
    if type(cell) is np.ndarray and cell.shape == shape:
        if clear_of_negative_zero(init):
            NO_NEG_ZERO.add(cell)
        return cell
    return np.full(shape, 0.0 if init is None else init)


def flat(x, n: int):
    """A batched real that depends on the outer loop only, as an array of n."""
    x = np.asarray(x, dtype=np.float64)
    if x.size == n:
        return x.reshape(n)
    return np.broadcast_to(x.reshape(-1)[:1] if x.size == 1 else x, (n,))


def vtake2c(rows_, n: int, axis: int, cols, m: int, axis2: int, rank: int, live: int = 1):
    """`(gather (rows ! i) cols) ! j` for i < n at `axis` and j < m at `axis2`:
    the rows' elements at cols[:m], as one block (an IndexError where the
    evaluator's gather or index fails; `live` as vector_support.vtake's)."""
    if not live or not m:
        return vtake2(rows_, n, axis, m, axis2, rank, 0)
    cols = np.asarray(cols)
    if m > len(cols):
        raise IndexError(f"index {len(cols)} out of range for an array of length {len(cols)}")
    if is_iota(cols):
        return vtake2(rows_, n, axis, m, axis2, rank)
    width = len(cols)
    block = vtake2(rows_, n, 0, _reach(rows_, n, cols), 1, 2).reshape(n, -1)
    picked = block[:, cols[:m].astype(np.int64)] if width else block[:, :0]
    return place(picked, n, axis, m, axis2, rank)


def _reach(rows_, n: int, cols) -> int:
    """How far into every row the gather reads (every index checked against
    every row, as the evaluator's gather of each row checks them)."""
    if not len(cols):
        return 0
    lo, hi = int(np.min(cols)), int(np.max(cols))
    if lo < 0:
        raise IndexError(f"index {lo} out of range")
    shortest = min((len(rows_[i]) for i in range(n)), default=hi + 1)
    if hi >= shortest:
        raise IndexError(f"index {hi} out of range for an array of length {shortest}")
    return shortest


class LoopAdds:
    """What an inner loop of a nested reverse pass adds to, recorded when its
    code is made: opened after `scopes` scopes of the outer element, with
    `cells` cells of its own; the absolute levels of its adds of reals
    (`vadd_in`), of its adds of pairs as (position among its cells, level)
    (`vaddpair`), and of its adds of bags of one-hot adds (PairOnes)."""

    __slots__ = ("scopes", "cells", "levels", "pairs", "bags")

    def __init__(self, scopes: int, cells: int) -> None:
        self.scopes, self.cells = scopes, cells
        self.levels: list = []
        self.pairs: list = []
        self.bags: list = []

    def fits(self, depth: int) -> bool:
        """At `depth` cells when the outer element's action starts: its adds
        of reals go to cells that exist then (its own, the outer element's or
        shared ones), of pairs to its own pair cell at that position, of bags
        to cells that are not its own."""
        first = depth + self.scopes
        return (all(lv < first + self.cells for lv in self.levels)
                and all(lv == first + pos for pos, lv in self.pairs)
                and all(lv < first for lv in self.bags))


class Nested:
    """What a nested batched backpropagator handles (vector_support.VecBack's
    `nested`): bag scopes; its inner loops' adds (LoopAdds), which must fit
    the depth of the run."""

    __slots__ = ("loops", "unit_result", "_ready")

    def __init__(self, loops: tuple, unit_result: bool = True) -> None:
        self.loops = loops
        self.unit_result = unit_result  # its actions return unit (pure () or adds)
        self._ready: dict[int, bool] = {}  # depth -> ready (the loops' records are final)

    def accepts(self, init) -> bool:
        return isinstance(init, Bag)

    def ready(self, depth: int) -> bool:
        got = self._ready.get(depth)
        if got is None:
            got = self._ready[depth] = all(loop.fits(depth) for loop in self.loops)
        return got
