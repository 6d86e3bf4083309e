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

`select(c, a, b)`: np.where(c, a, b) of reals (an `if` batched over a loop:
chad/compile/vectorise.py, switch.py), without a branch per element: on a
random mask np.where took 3.0 ns an element for 10^5 elements, the C loop
0.4 ns. `select_ints`: the same for int64 integers (`_vwhere`), on their 64
bits.

`tree(rows, is_max)`: the value and leaf of the evaluator's balanced fold
tree of max (min) over each short row of a nested loop (chad/arrays/folds.py
vtree2: kmeans' nearest centre): numpy's argmax along a row of 5 costs about
17 ns a row plus the take of the values; the C loop runs the tree's combines
over blocks of rows without a branch.

`colsum(block, start, col, add)`: each column's sum of a block of rows, row
after row (chad/compile/order.py: the dense sum of a chain of rows): numpy's
axis-0 reduce adds in that order too, but its inner loop runs along a row:
1.5 ms for 10^5 rows of 5, the loop 0.35 ms. Given a column of factors (and
a real to add), the block is that of the products col[i] * block[i][j]
(+ add), summed from its factors, never made (chad/compile/scaled.py);
`scaled(col, block, add)` makes such a block, in one pass.
`scatter(out, idx, vals)`: np.add.at's additions, in the same order
(chad/arrays/bag.py: the pairs of a bag at indices): np.add.at took 1.2 ms
for 10^6 pairs. `chain(out, vals, idx)`: the same for the pairs of a chain
of adds of rows (a nested loop's adds to a shared cell at indices), read
from the rows themselves instead of the pairs' two arrays made first.

`dots(a, b)`: np.sum of each row of the products a * b (a sum over an inner
loop of a product: a matrix-vector product's rows, chad/compile/order.py
row_dots), in numpy's pairwise order, without the block of products: 0.27
ms for 1000 x 1000 from memory, numpy's product and reduce 1.03 ms.

`fuse(code, *leaves)`: a batched expression of +, -, * and / (and unary
minus) over float64 arrays in one pass, blocks of 256 elements through every
operation (chad/compile/fusion.py): the same operations on the same
operands, so the same values, without an array per operation.

Where the extension was not built (no C compiler when chad was installed), or
with the environment variable CHAD_NATIVE=0, np.cumsum, np.where and
np.argmax (or the tree's levels of np.where) run. The loops over many
elements are built for AVX2 as well as the baseline (`WIDE_LOOP` in the C
file), one chosen when the module loads.
"""

from __future__ import annotations

import os

import numpy as np

from .fusion import evaluate
from .ieee import quiet
from .shapes import broadcast

try:
    if os.environ.get("CHAD_NATIVE", "").strip() == "0":
        raise ImportError("CHAD_NATIVE=0")
    from . import _kernels as _native
except ImportError:  # not built: numpy's running sums
    _native = None

_F64 = np.dtype(np.float64)
if _native is not None:
    _native.fuse_setup(np.ndarray, np.empty)


def fuse(code: bytes, *leaves):
    """`_vfuse`: the elementwise expression of `code` (chad/compile/fusion.py)
    over its leaves, in one pass in C for float64 arrays and reals that
    broadcast; else computed by Python's operators, one after the other."""
    if _native is not None:
        out = _native.fuse(code, leaves)
        if out is not None:
            return out
    return evaluate(code, leaves)


def native() -> bool:
    """Whether the C loops run (else numpy's: np.cumsum, np.where)."""
    return _native is not None


def _flat(a) -> np.ndarray:
    """a as a 1-D array of float64 (a view where it can be: a broadcast of one
    value keeps its zero stride)."""
    a = np.asarray(a)
    if a.dtype != _F64:
        a = a.astype(_F64)
    return a if a.ndim == 1 else a.reshape(-1)


def running(parts: list, masks: list, n: int, start, negs=None):
    """The running sum of the parts' values from start (a float; None: from the
    first value added), in the evaluator's order (module doc): its last value,
    or None when no value was added (whatever start). parts[p] holds n x w_p
    values, element by element; masks[p] None or a bool array of n; negs None
    or a list as long, negs[p] true where part p's adds are of its values
    negated (numpy's `-x`, made as the sum reads them: no pass of its own)."""
    parts = [_flat(p) for p in parts]
    masks = [None if m is None else _mask(m, n) for m in masks]
    if _native is not None:
        return _native.running(tuple(parts), tuple(masks), n, None if start is None
                               else float(start), None if negs is None else tuple(negs))
    if negs is not None:
        parts = [np.negative(p) if neg else p for p, neg in zip(parts, negs)]
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
    values, w >= 1 when start is None) from start[i] (an array of n, or one
    real for every row; None: from the row's first value)."""
    values = _flat(values)
    w = values.size // n if n else 0
    if start is not None:
        start = broadcast(start, (n,))
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
    """select of operands broadcast together (one dimension), or of blocks of a
    region of rank 2 or more, read flat when each is the whole C-ordered block
    or one value; else np.where. (c has SELECT_MIN elements or more, so it is
    never the one value.)"""
    shape = np.broadcast_shapes(c.shape, np.shape(x), np.shape(y))
    if len(shape) != 1 and not all(_flat_block(v, shape) for v in (c, x, y)):
        return np.where(c, a, b)
    out = np.empty(shape, dtype=_F64)
    flat = out.reshape(-1)
    size = flat.shape
    _native.select(_operand_of(c, shape, size), _operand_of(x, shape, size),
                   _operand_of(y, shape, size), flat)
    return out


def _flat_block(v, shape: tuple) -> bool:
    return type(v) is float or v.size == 1 or (v.shape == shape and v.flags.c_contiguous)


def _operand_of(v, shape: tuple, size: tuple):
    """An operand of the C select, 1-D: the block read flat, its one value as a
    Python float, or (one dimension) its broadcast."""
    if type(v) is float:
        return v
    if v.shape == shape:
        return v.reshape(-1)
    if v.size == 1 and v.dtype == _F64:
        return float(v.reshape(()))
    return np.broadcast_to(v, size)


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


def colsum(block: np.ndarray, start=None, col=None, add=None):
    """A new array: start (or +0.0) + block[0] + block[1] + ... in every column
    of the 2-D float64 block, one addition after the other; with col (n reals)
    the block is that of the products col[i] * block[i][j] (+ add, a real),
    computed as numpy computes them, never made (chad/compile/scaled.py). None
    without the C loop (chad/compile/order.py then has numpy's)."""
    if _native is None:
        return None
    # (a block not 2-D: the C loop's TypeError, not an error of the sizing)
    dims = _dims(block)
    out = np.empty(dims[1] if len(dims) == 2 else 0, dtype=_F64)
    _native.colsum(col, block, add, start, out)
    return out


def _dims(x) -> tuple:
    """x's shape (np.shape's, without its dispatch for an array)."""
    return x.shape if type(x) is np.ndarray else np.shape(x)


def scaled(col: np.ndarray, block: np.ndarray, add=None):
    """A new C-ordered array: col[i] * block[i][j] (+ add, a real), each
    element as numpy's multiply and add compute it, in one pass
    (chad/compile/scaled.py); None without the C loop."""
    if _native is None:
        return None
    dims = _dims(block)
    out = np.empty(dims if len(dims) == 2 else (0, 0), dtype=_F64)
    _native.scaled(col, block, add, out)
    return out


def dots(a: np.ndarray, b: np.ndarray):
    """A new array: np.sum of each row of a * b (a and b 2-D float64 arrays of
    shapes that broadcast, any strides), each row's products summed pairwise
    as numpy sums a contiguous row, without the block of products
    (chad/compile/order.py, row_dots); None without the C loop."""
    if _native is None:
        return None
    da, db = _dims(a), _dims(b)
    rows = (db[0] if da[0] == 1 else da[0]) if len(da) == 2 == len(db) else 0
    out = np.empty(rows, dtype=_F64)
    _native.dots(a, b, out)
    return out


def scatter(out: np.ndarray, idx: np.ndarray, vals: np.ndarray):
    """out[idx[k]] += vals[k] for k in order, in place (1-D float64 out and
    vals, int64 idx): True, or False at the first index outside the array
    (out then holds the adds before it); None without the C loop (np.add.at
    then)."""
    if _native is None:
        return None
    return _native.scatter(out, idx, vals)


def chain(out: np.ndarray, vals: tuple, idx: tuple):
    """The pairs of a chain of adds of rows at indices (chad/arrays/bag.py,
    BChain: P parts of n x m values and int64 indices) added into the 1-D
    float64 out in the chain's order: True, or False (out unchanged) when an
    index is outside out; None without the C loop (the bag's pairs are then
    made and scattered)."""
    if _native is None:
        return None
    return _native.chain(out, vals, idx)


def tree(rows, is_max: bool):
    """(values, leaves) of the evaluator's balanced fold tree of max (is_max)
    or min over each row of the 2-D float64 array rows (chad/arrays/folds.py
    vtree2): the C loop's, or None without it (numpy's argmax then)."""
    if _native is None:
        return None
    vals = np.empty(rows.shape[0], dtype=_F64)
    leaves = np.empty(rows.shape[0], dtype=np.int64)
    _native.tree(rows, is_max, vals, leaves)
    return vals, leaves
