"""Row hoisting, a source rewrite for the compiled path only (chad/compile/source.py):
in `build (length a) (i. body)`, the row `a ! i` that body reads inside a nested
loop becomes one let at the top of body:

    build (length a) (i. ... build n (j. a ! i ! j * v ! j) ...)
      ==>  build (length a) (i. let r = a ! i in ... build n (j. r ! j * v ! j) ...)

The value is the same and `a ! i` cannot fail there (i < length a, and a is the
same variable: names are unique when this pass runs), so it may be read before
anything else of body. What changes is the derivative: CHAD of `a ! i ! j`
inside the inner build reads the row through a gather of `a` by the index
array `[i, i, ...]`, so each inner element's cotangent cell is a bag of the
whole row (one-hot at j), which no vectorised reverse pass handles. Reading a
row variable, the inner build is a dot product's: its cells are reals, its
forward and reverse passes are batched (chad/compile/vectorise.py), and the
row's cotangent goes to `a` once per i (CHAD of index, Efficient CHAD (Smeding
& Vákár), §8). The gradient is the same up to the grouping of the additions a
row position receives (docs/compiler.md, "Vectorisation"): bit for bit when
each position gets one contribution, as in a matrix-vector product.
"""

from __future__ import annotations

import itertools

from chad.terms import (
    Ann, Build, Fold, Index, Lam, Length, Let, MapA, Var, children, rewrite, subterms,
)
from chad.types import ArrayT

_ROWS = itertools.count(1)
_LOOPS = (Build, MapA, Fold, Lam)  # a nested body run once per element


def hoist_rows(body):
    """body with every row read inside a nested loop hoisted (module doc);
    body itself when there is none. Names must be unique in body."""
    return rewrite(body, lambda t: t, _hoist)


def _array_var(t) -> str | None:
    while type(t) is Ann:
        t = t.expr
    return t.name if type(t) is Var else None


def _row_read(t, a: str, i: str) -> bool:
    """t is `a ! i` of an array of arrays."""
    return (type(t) is Index and isinstance(t.ty, ArrayT) and _array_var(t.arr) == a
            and _array_var(t.idx) == i)


def _hoist(t):
    if type(t) is not Build:
        return t
    size = t.size
    while type(size) is Ann:
        size = size.expr
    a = _array_var(size.expr) if type(size) is Length else None
    if a is None or not _nested_read(t.body, a, t.name):
        return t
    first = next(n for n in subterms(t.body) if _row_read(n, a, t.name))
    row = Var(f"row$h{next(_ROWS)}", loc=first.loc, ty=first.ty)  # no source name has '$'
    body = rewrite(t.body, lambda u: row if _row_read(u, a, t.name) else u)
    hoisted = Let(row.name, first, body, loc=first.loc, ty=t.body.ty)
    return Build(t.size, t.name, hoisted, loc=t.loc, ty=t.ty)


def _nested_read(body, a: str, i: str) -> bool:
    """body reads `a ! i` inside a loop nested in it."""
    stack = [(body, False)]
    while stack:
        u, inner = stack.pop()
        if inner and _row_read(u, a, i):
            return True
        inner = inner or type(u) in _LOOPS
        stack.extend((c, inner) for c in children(u))
    return False
