"""Row hoisting, a source rewrite for the compiled path only (chad/compile/source.py):
in `build (length a) (i. body)`, the row `a ! i` that body reads inside a nested
loop becomes one let at the top of body:

    build (length a) (i. ... build n (j. a ! i ! j * v ! j) ...)
      ==>  build (length a) (i. let r = a ! i in ... build n (j. r ! j * v ! j) ...)

when the body reads the row once, as `a ! i ! j` directly in a build over j
(and maybe its length, which has no cotangent):
then each position of the row gets one cotangent at most, so the gradient is
the unchanged program's bit for bit (two reads of a row would sum their
cotangents in another order). The value is the same, and `a ! i` cannot fail
there (i < length a, and a is the same variable: names are unique when this
pass runs), so it may be read before anything else of body. What changes is the derivative: CHAD of `a ! i ! j`
inside the inner build reads the row through a gather of `a` by the index
array `[i, i, ...]`, so each inner element's cotangent cell is a bag of the
whole row (one-hot at j), which no vectorised reverse pass handles. Reading a
row variable, the inner build is a dot product's: its cells are reals, its
forward and reverse passes are batched (chad/compile/vectorise.py), and the
row's cotangent goes to `a` once per i (CHAD of index, Efficient CHAD (Smeding
& Vákár), §8). Which read fails first may change (CHAD's gathers read the
row before the inner loop runs): errors of rewritten programs are reported by
replaying the call on the interpreter (chad/api_core.py).
"""

from __future__ import annotations

import itertools

from chad.terms import (
    Ann, Build, Fold, Index, Lam, Length, Let, MapA, Var, children, rewrite, shape, subterms,
)
from chad.types import ArrayT

_ROWS = itertools.count(1)
_LOOPS = (Build, MapA, Fold, Lam)  # a nested body run once per element


def hoist_rows(body):
    """body with every row read once as `a ! i ! j` in a build over j hoisted
    (module doc); body itself when there is none. Names must be unique in body."""
    taken = names_of(body)
    return rewrite(body, lambda t: t, lambda t: _hoist(t, taken))


def _array_var(t) -> str | None:
    t = _bare(t)
    return t.name if type(t) is Var else None


def _row_read(t, a: str, i: str) -> bool:
    """t is `a ! i` of an array of arrays."""
    return (type(t) is Index and isinstance(t.ty, ArrayT) and _array_var(t.arr) == a
            and _array_var(t.idx) == i)


def _hoist(t, taken: set):
    if type(t) is not Build:
        return t
    size = t.size
    while type(size) is Ann:
        size = size.expr
    a = _array_var(size.expr) if type(size) is Length else None
    if a is None:
        return t
    first = _sole_read(t.body, a, t.name)
    if first is None:
        return t
    name = next(f"row$h{k}" for k in itertools.count(next(_ROWS)) if f"row$h{k}" not in taken)
    taken.add(name)  # no source name has '$'; a Program built in Python might
    row = Var(name, loc=first.loc, ty=first.ty)
    body = rewrite(t.body, lambda u: row if _row_read(u, a, t.name) else u)
    hoisted = Let(row.name, first, body, loc=first.loc, ty=t.body.ty)
    return Build(t.size, t.name, hoisted, loc=t.loc, ty=t.ty)


def _sole_read(body, a: str, i: str):
    """The row read `a ! i` when body reads it once, as `a ! i ! j` directly in
    the body of a build over j (no other loop in between): then every position
    of the row gets one cotangent at most, and the gradient is bit for bit the
    unchanged program's. Else None."""
    reads, found = 0, None
    stack = [(body, None)]  # the binder of the build directly around, or None
    while stack:
        u, loop = stack.pop()
        if _row_read(u, a, i):
            reads += 1
            continue
        if type(u) is Length and _row_read(_bare(u.expr), a, i):
            continue  # the row's length: no cotangent (read as the row variable's)
        if type(u) is Index and _row_read(u.arr, a, i) and loop is not None \
                and _array_var(u.idx) == loop:
            found = u.arr
        cls = type(u)
        for c in children(u):
            if cls is Build and c is u.body:
                inner = u.name
            elif cls in _LOOPS:
                inner = None if c is not getattr(u, "size", None) else loop
            else:
                inner = loop
            stack.append((c, inner))
    return found if reads == 1 else None


def _bare(t):
    while type(t) is Ann:
        t = t.expr
    return t


def names_of(t) -> set:
    """Every name t reads or binds."""
    out = set()
    for n in subterms(t):
        if type(n) is Var:
            out.add(n.name)
        for _child, fields in shape(n).binds:
            for f in fields:
                v = getattr(n, f)
                out.update(v if type(v) is tuple else (v,))
    return out
