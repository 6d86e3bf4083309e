"""Column sums of a block of rows in the evaluator's order, at numpy speed.

The evaluator adds a chain of dense cotangents one after the other: the dense
sum of n rows r_0 .. r_{n-1} (a cell shared by the elements of a nested loop,
chad/arrays/bag.py `BRows`) is `((0.0 + r_0) + r_1) + ... + r_{n-1}` in every
column. A Python loop of n numpy adds gives exactly that, at about a
microsecond per row.

`np.add.reduce(block, axis=0)` on a block whose rows are contiguous and at
least two long adds row after row (its inner loop runs along a row, adding it
to the running row of sums): the same additions in the same order, starting
from r_0 instead of 0.0 + r_0. The two differ only where the running sum is
-0.0 (0.0 + -0.0 is 0.0), and since a sum started from +0.0 is never -0.0 in
round-to-nearest, `reduce(...) + 0.0` is the loop's result, bit for bit.
Along a single column (rows one long) numpy sums pairwise instead, another
order: those blocks take the loop. The order numpy uses is an implementation
choice, not a documented promise, so it is checked once, on blocks built for
the orders to differ (`_probe`), and the loop is used if numpy ever sums
another way; tests/test_order.py compares both on cancelling values.

Where the C extension is built (chad/compile/kernels.py) its loop `colsum`
makes the same additions, in the same order, for rows of up to COLSUM_MAX
values: numpy's reduce over rows of 2 or 5 values is about four times as
slow (its inner loop runs along a row).

Row sums (`row_sums`): a batched `sum` over an inner loop is numpy's
reduce along each contiguous row, which is np.sum of the row, the
evaluator's value (chad/compile/vector_support.py, vsum). For rows shorter
than 8 numpy's pairwise sum adds the row left to right from +0.0
(((0.0 + x_0) + x_1) + ...); it calls its inner loop once a row, about
3 ns an element at rows of 5 (gmm's sum over 5 components), where the C loop
`kernels.rows` from a start of +0.0 makes the same additions at a fifth of
the cost. That too is numpy's implementation, checked once on rows built for
the orders to differ (`_rows_probe`); numpy's reduce runs if it ever differs.
Rows of 8 to 128 (a layer's sum over its inputs in a batch: 1280 rows of 10,
where numpy's reduce spends most of its time starting rows) are numpy's
eight running sums, which `kernels.dots` makes for a row of products: a row
times a row of ones is the row, so its sums are numpy's (`_dots_probe`):
20 against numpy's 33 µs at 1280 rows of 10. Longer rows: numpy's reduce.
"""

from __future__ import annotations

import numpy as np

from chad.compile import kernels
from chad.compile.ieee import quiet
from chad.compile.scaled import ScaledRows, colsum as scaled_colsum
from chad.compile.shapes import view

_F64 = np.dtype(np.float64)
# rows up to this long: the C loop (4x numpy's reduce at 5 columns); longer
# ones numpy's reduce, whose vector instructions the portable C build lacks
COLSUM_MAX = 128
_CHECKED: list[bool | None] = [None]


def column_sums(block: np.ndarray) -> np.ndarray:
    """A new array: 0.0 + block[0] + block[1] + ... in every column, in that
    order (block a 2-D float64 array with at least one row)."""
    if type(block) is ScaledRows:  # a block of products kept as its factors
        out = scaled_colsum(block)
        if out is not None:
            return out
        block = np.asarray(block)
    n, m = block.shape
    if block.dtype == _F64 and n and m <= COLSUM_MAX:
        out = kernels.colsum(block)  # the C loop, where built
        if out is not None:
            return out
    with quiet():
        if (m >= 2 and block.dtype == _F64 and block.strides[1] == 8
                and abs(block.strides[0]) >= 8 * m and _reduce_is_sequential()):
            out = np.add.reduce(block, axis=0)
            np.add(out, 0.0, out=out)
            return out
        return _loop(block)


def _loop(block: np.ndarray) -> np.ndarray:
    out = np.add(block[0], 0.0)
    for k in range(1, block.shape[0]):
        np.add(out, block[k], out=out)
    return out


def _reduce_is_sequential() -> bool:
    if _CHECKED[0] is None:
        _CHECKED[0] = _probe()
    return _CHECKED[0]


def _probe() -> bool:
    """numpy's axis-0 reduce equals the loop on blocks where any other order
    of the additions gives another result (a large value, small ones, its
    negation: left to right the small ones are lost, paired they are not),
    forwards and through a reversed view, at a few shapes."""
    rng = np.random.default_rng(20261128)
    for n, m in ((3, 2), (9, 2), (17, 3), (40, 8), (129, 5), (1000, 2)):
        block = rng.standard_normal((n, m)) * 10.0 ** rng.integers(-8, 9, (n, m))
        block[0] = 1e17
        block[1:n - 1:2] = 1.0
        block[n - 1] = -1e17
        for b in (block, block[::-1]):
            with quiet():
                got = np.add.reduce(b, axis=0) + 0.0
            if got.tobytes() != _loop(b).tobytes():
                return False
    return True


ROW_SUM_MAX = 7  # numpy sums rows of 8 or more with eight accumulators
_ROWS_CHECKED: list[bool | None] = [None]


ROW_DOTS_MAX = 128  # rows up to this long (numpy's one block of eight sums): kernels.dots
_ONES: dict[int, np.ndarray] = {}


def row_sums(x: np.ndarray):
    """np.add.reduce(x, axis=-1, keepdims=True) for a C-ordered float64 x
    whose rows have 1 to ROW_DOTS_MAX elements, by a C loop when numpy sums
    such rows as it does here (`_rows_probe`, `_dots_probe`); else None (the
    caller's reduce). Rows of 1 to ROW_SUM_MAX: kernels.rows; longer ones
    numpy's pairwise order, as kernels.dots sums each row's products with a
    row of ones (x * 1.0 is x: the same sums, where two NaNs meet maybe the
    other NaN)."""
    w = x.shape[-1] if x.ndim else 0
    if not (0 < w <= ROW_DOTS_MAX and x.dtype == _F64 and x.flags.c_contiguous
            and kernels.native()):
        return None
    if w > ROW_SUM_MAX:
        if _DOTS_CHECKED[0] is None:
            _DOTS_CHECKED[0] = _dots_probe()
        if not _DOTS_CHECKED[0]:
            return None
        ones = _ONES.get(w)
        if ones is None:
            ones = _ONES[w] = np.ones((1, w))
            ones.flags.writeable = False
        out = kernels.dots(x.reshape(-1, w), ones)
        return None if out is None else out.reshape(x.shape[:-1] + (1,))
    if _ROWS_CHECKED[0] is None:
        _ROWS_CHECKED[0] = _rows_probe()
    if not _ROWS_CHECKED[0]:
        return None
    n = x.size // w
    return kernels.rows(x.reshape(-1), n, 0.0).reshape(x.shape[:-1] + (1,))


def _rows_probe() -> bool:
    """numpy's reduce along rows of 1 to ROW_SUM_MAX elements is the sum
    from +0.0 left to right, on rows where other orders differ: large values
    with small ones and their negations, and signed zeros."""
    rng = np.random.default_rng(20261128)
    for w in range(1, ROW_SUM_MAX + 1):
        x = rng.standard_normal((300, w)) * 10.0 ** rng.integers(-8, 17, (300, w))
        x[rng.random((300, w)) < 0.2] = -0.0
        x[::7, 0] = 1e17
        x[::7, -1] = -1e17
        with quiet():
            want = np.add.reduce(x, axis=-1, keepdims=True)
        got = np.empty((300, 1))
        for i in range(300):
            s = 0.0
            for v in x[i].tolist():
                s = s + v
            got[i, 0] = s
        if want.tobytes() != got.tobytes():
            return False
    return True


_DOTS_CHECKED: list[bool | None] = [None]


def row_dots(a, b, m: int):
    """np.sum of each row of a * b, as an n x 1 array (vector_support.vsum
    of the product over its last axis), for 2-D float64 arrays a and b
    whose shapes broadcast to rows of m (an n x m block of products,
    summed over its inner loop: a matrix-vector product's rows), by the C
    loop `kernels.dots`, which never makes the block, when numpy sums as it
    does here (`_dots_probe`); else None (the caller's product and reduce)."""
    if not (type(a) is np.ndarray and type(b) is np.ndarray and a.ndim == 2 == b.ndim
            and a.dtype == _F64 == b.dtype and kernels.native()):
        return None
    rows = b.shape[0] if a.shape[0] == 1 else a.shape[0]
    if (b.shape[0] not in (1, rows) or a.shape[1] not in (1, m)
            or b.shape[1] not in (1, m)):
        return None
    if _DOTS_CHECKED[0] is None:
        _DOTS_CHECKED[0] = _dots_probe()
    if not _DOTS_CHECKED[0]:
        return None
    if a.shape[1] != m != b.shape[1]:  # (the C loop broadcasts the rest)
        a, b = view(a, (rows, m)), view(b, (rows, m))
    return kernels.dots(a, b).reshape(rows, 1)


def _dots_probe() -> bool:
    """numpy's reduce along the rows of a block of products is the C loop's
    sum (numpy's pairwise sum from +0.0), on rows where other orders differ
    (values of magnitudes 10^-8 to 10^8 and signed zeros; short rows, rows
    about the block of 128 and split ones), through reversed and broadcast
    views too."""
    rng = np.random.default_rng(20261128)
    for m in (*range(0, 20), 127, 128, 129, 136, 255, 257, 1000, 1031, 8193, 20011):
        a = rng.standard_normal((3, m)) * 10.0 ** rng.integers(-8, 9, (3, m))
        a[rng.random((3, m)) < 0.1] = -0.0
        v = rng.standard_normal((1, m)) * 10.0 ** rng.integers(-8, 9, (1, m))
        for x, y in ((a, v), (a[::-1], a), (a[:, ::-1], v)):
            with quiet():
                want = np.add.reduce(x * y, axis=1, keepdims=True)
            got = kernels.dots(x, y)
            if got is None or got.tobytes() != want.tobytes():
                return False
    return True


def add_rows(out: np.ndarray, block: np.ndarray) -> np.ndarray:
    """out + block[0] + block[1] + ... in every column, in that order: in out
    (row by row), or, for a longer block, a new array (one reduce over out
    stacked above the block in a C-ordered copy: numpy adds its rows in turn
    only when each row is contiguous)."""
    if type(block) is ScaledRows:  # a block of products kept as its factors
        got = scaled_colsum(block, out)
        if got is not None:
            return got
        block = np.asarray(block)
    n, m = block.shape
    if block.dtype == _F64 and out.dtype == _F64 and out.ndim == 1 and m <= COLSUM_MAX:
        got = kernels.colsum(block, out)  # the C loop, where built
        if got is not None:
            return got
    with quiet():
        if n >= 8 and m >= 2 and _reduce_is_sequential():
            stacked = np.empty((n + 1, m))  # C-ordered, whatever block's layout
            stacked[0] = out
            stacked[1:] = block
            return np.add.reduce(stacked, axis=0)
        for k in range(n):
            np.add(out, block[k], out=out)
    return out
