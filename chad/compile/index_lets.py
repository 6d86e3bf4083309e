"""Let-bound integer indices, a source rewrite for the compiled path only
(chad/compile/source.py): in the body of a `build` or a `map`, a let of an
integer that an array read uses as its index is substituted into its uses:

    build n (\\i -> let j = i - 1 in ... a ! (if j < 0 then 0 else j) ...)
      ==>  build n (\\i -> ... a ! (if i - 1 < 0 then 0 else i - 1) ...)

(or in the right-hand side of such a let) when the right-hand side cannot
fail (chad/compile/failing.py: no index, no division on Z, no call) and is
small (at most SMALL nodes), in the parts of the body CHAD's gathers search. Its value is the
same (integers are exact), computed where it is used. What changes is the
derivative: CHAD's gathers (Efficient CHAD (Smeding & Vákár), §8.1; chad/
arrays/transform.py, `extract_gathers`) read `a` at an index that depends on
the loop index only, so the read is hoisted into a gather by an index array
(batched: chad/compile/vectorise.py, and a clamped one chad/compile/shifts.py)
and the elements' cotangents to `a` are one bag; read through the let-bound
variable, each element made a one-hot add to `a`'s cell, which no vectorised
reverse pass handles (the loop ran element by element). The gather's
cotangents are then added in the index array's order, the one-hot adds in
the chain's: where two elements read one position, its sum may round
differently (a rewritten program: docs/compiler.md, "Vectorisation").
"""

from __future__ import annotations

from chad.terms import (
    Build, Case, Fold, Index, Lam, Let, MapA, Var, children, free_vars, rewrite, subterms,
)
from chad.types import Int

from .failing import safe

SMALL = 40  # the largest right-hand side substituted (nodes)


def inline_index_lets(body):
    """body with the lets of the module doc substituted; body itself when
    there is none. Names must be unique in body (no substitution captures)."""
    lets = _eligible(body)
    if not lets:
        return body

    def pre(t):
        while True:
            cls = type(t)
            if cls is Let and t.name in lets:
                t = t.body
            elif cls is Var and t.name in lets:
                t = lets[t.name]
            else:
                return t

    return rewrite(body, pre)


def _eligible(body) -> dict:
    """The lets to substitute: name -> right-hand side."""
    out: dict = {}
    for t in subterms(body):
        if type(t) is Build:
            out.update(_in_loop(t.body))
    return out


def _in_loop(body) -> dict:
    """The lets of a build's body to substitute: in the parts CHAD's
    extract_gathers searches (evaluated once per element: not a lambda's body,
    a case's branches, a nested loop's body), an integer let that cannot fail,
    small, read in the index of a read of an array the body does not bind, or
    by another such let (`let j = i - 1 in let k = clamp j in a ! k`)."""
    in_index: set = set()
    bound: set = set()
    candidates: dict = {}
    reads: list = []
    stack = [body]
    while stack:
        t = stack.pop()
        cls = type(t)
        if cls is Index and type(t.arr) is Var:
            reads.append(t)
        elif cls is Let:
            bound.add(t.name)
            if isinstance(getattr(t.rhs, "ty", None), Int) and safe(t.rhs) and _small(t.rhs):
                candidates[t.name] = t.rhs
        if cls is Lam:
            continue
        if cls is Case:
            stack.append(t.scrut)
        elif cls is Build:
            stack.append(t.size)
        elif cls in (Fold, MapA):
            stack.append(t.arr)
        else:
            stack.extend(children(t))
    for t in reads:
        if t.arr.name not in bound:
            in_index.update(free_vars(t.idx))
    todo = [x for x in candidates if x in in_index]
    out: dict = {}
    while todo:
        x = todo.pop()
        if x in out:
            continue
        out[x] = candidates[x]
        todo.extend(y for y in free_vars(candidates[x]) if y in candidates and y not in out)
    return out


def _small(t) -> bool:
    n = 0
    for _ in subterms(t):
        n += 1
        if n > SMALL:
            return False
    return True

