"""A block of products an outer loop's element and its inner elements make
together, kept as its two factors until something reads it as an array.

In a nested loop's reverse pass (docs/compiler.md, "Nested loops") the
cotangent of a vector read in the inner body, `v ! j` in
`m ! i ! j * v ! j`, is the outer element's cotangent times the matrix, `d[i]
* m[i][j]`, added to the element pair's cell (which starts from a real), and
then summed over the outer elements into v's cell, row after row (the
transposed matrix-vector product, in the evaluator's order). numpy computes
the n x m block of products, adds the cell's start to it, and sums its
columns: three passes over a block that is written only to be read once.

`ScaledRows(col, mat, start)` is that block, `col[i] * mat[i][j] + start`,
unmade (mat may repeat one row: the cotangent of `m ! i ! j` there, d[i] *
v[j], an outer product). Its column sums (`colsum`) are one C loop over mat
(chad/compile/kernels.py, `colsum` given the factors: the same
multiplications and additions in the same order); made, it is one C pass
(`kernels.scaled`). Anything else that reads it gets the array, made once,
through numpy's `__array__` (and indexing, iteration, `len`): the same values
the block of products would have had, bit for bit, and so do Python's
operators and any other attribute of an array: a kept block can be a let's
final cotangent in the inner body, which the generated code goes on
computing with (`x * 2.0`, `-x`).
"""

from __future__ import annotations

import numpy as np

from . import kernels
from .ieee import quiet
from .known import clear_of_negative_zero

_F64 = np.dtype(np.float64)


class ScaledRows:
    """The n x m block col[i] * mat[i][j] (+ start), made on first use."""

    __slots__ = ("col", "mat", "start", "_array")

    ndim = 2
    dtype = _F64

    def __init__(self, col: np.ndarray, mat: np.ndarray, start) -> None:
        self.col = col        # n reals (1-D)
        self.mat = mat        # n x m reals
        self.start = start    # a real added to every product, or None
        self._array = None

    @property
    def shape(self) -> tuple:
        return self.mat.shape

    def __len__(self) -> int:
        return self.mat.shape[0]

    def array(self) -> np.ndarray:
        """The block (made once): the products, then the start added, as the
        adds of the element pairs' cells compute them."""
        if self._array is None:
            a = kernels.scaled(self.col, self.mat, self.start)  # one pass, where built
            if a is None:
                with quiet():
                    a = np.multiply(self.col.reshape(-1, 1), self.mat)
                    if self.start is not None:
                        np.add(a, self.start, out=a)
            self._array = a
        return self._array

    @property
    def made(self) -> bool:
        """Whether the block itself exists (someone may hold it, or a view)."""
        return self._array is not None

    def free_of_negative_zero(self) -> bool:
        """Its products plus a real other than -0.0: never -0.0, so adding
        0.0 to it changes nothing (chad/compile/known.py)."""
        return clear_of_negative_zero(self.start)

    def __array__(self, dtype=None, copy=None):
        a = self.array()
        if dtype is not None and np.dtype(dtype) != a.dtype:
            return a.astype(dtype)
        return a.copy() if copy else a  # (np.array(block): a copy of its own)

    def __getitem__(self, key):
        return self.array()[key]

    def __iter__(self):
        return iter(self.array())

    def __getattr__(self, name: str):
        # anything else an array has (strides, flags, reshape, T, ...) is
        # the made block's; numpy's own protocols go through __array__
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.array(), name)

    def reversed(self) -> "ScaledRows":
        """Its rows in the other order (views of the factors)."""
        out = ScaledRows(self.col[::-1], self.mat[::-1], self.start)
        if self._array is not None:
            out._array = self._array[::-1]
        return out


def _made(name: str):
    def operator(self, *args):
        return getattr(self.array(), name)(*args)

    operator.__name__ = name
    return operator


# Python's operators on the block (the generated code's `x * 2.0`, `-x`) are
# the made block's: a kept block may be a let's final cotangent, which the
# code goes on computing with
for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__",
              "__rmod__", "__pow__", "__rpow__", "__matmul__", "__rmatmul__", "__neg__",
              "__pos__", "__abs__", "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
    setattr(ScaledRows, _name, _made(_name))
ScaledRows.__hash__ = None  # (as an array's)


def colsum(block: ScaledRows, start=None):
    """start (or +0.0) + block[0] + block[1] + ... in every column, row after
    row (chad/compile/order.py column_sums / add_rows for this block), from
    its factors where the C loop is built; None without it."""
    if block.made:
        return None
    return kernels.colsum(block.mat, start, block.col, block.start)
