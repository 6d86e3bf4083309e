"""Integer indices in loop bodies, source rewrites for the compiled path only
(chad/compile/source.py): in the body of a `build`, a let of an integer that
an array read uses as its index is substituted into its uses:

    build n (\\i -> let j = i - 1 in ... a ! (if j < 0 then 0 else j) ...)
      ==>  build n (\\i -> ... a ! (if i - 1 < 0 then 0 else i - 1) ...)

(or in the right-hand side of such a let) when the right-hand side cannot
fail (chad/compile/failing.py: no index, no division on Z, no call) and is
small (at most SMALL nodes, EXPANDED with the lets it reads substituted, and
BUDGET added to the body in all), in the parts of the body evaluated once per
element (not in a lambda, a case's branches, an inner loop or an `iter`,
which may run 0 times: there a hoisted read could fail where the program's
does not). Its value is the same (integers are exact), computed where it is
used. What changes is the
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

A let of the loop's own read (`let j = ks ! i` in `build (length ks) (\\i ->
...)`) counts as unable to fail (i < length ks: as chad/compile/rows.py's
row reads). And a `map (\\k -> e) ks` over a variable ks of type Array Z
whose element is read as an index in e (an embedding lookup: `map (\\k ->
w ! k) ks`) becomes `build (length ks) (\\i -> e[k := ks ! i])`: the same
reads in the same order (those of ks cannot fail), and then CHAD's gathers.
"""

from __future__ import annotations

from chad.terms import (
    Ann, Build, Case, Fold, Fst, Index, Inl, Inr, Length, Let, MapA, Pair, Prim, Snd, Unit, Var,
    children, free_vars, rewrite, subterms,
)
from chad.simplify.names import Fresh
from chad.types import ArrayT, Int

from .failing import safe
from .rows import names_of

SMALL = 40      # the largest right-hand side substituted (nodes)
EXPANDED = 200  # ... and with the lets it reads substituted
BUDGET = 4000   # the most nodes the substitutions may add to a body
# the nodes whose children are all evaluated once when the node is
_ONCE = (Let, Prim, Pair, Fst, Snd, Index, Length, Ann, Var, Unit, Inl, Inr)


def inline_index_lets(body):
    """body with the lets of the module doc substituted and its maps over
    index arrays made builds; body itself when there is none. Names must be
    unique in body (no substitution captures)."""
    body = _index_maps(body)
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
            out.update(_in_loop(t.body, _loop_read(t)))
    return out


def _loop_read(t: Build):
    """For `build (length a) (i. ...)`: a test of `a ! i` (which cannot fail
    there: i < length a, and names are unique), else None."""
    size = t.size
    while type(size) is Ann:
        size = size.expr
    if type(size) is not Length or type(size.expr) is not Var:
        return None
    a, i = size.expr.name, t.name
    return lambda u: (type(u) is Index and type(u.arr) is Var and u.arr.name == a
                      and type(u.idx) is Var and u.idx.name == i)


def _safe_here(rhs, loop_read) -> bool:
    """rhs cannot fail in the build's body: safe, its reads `a ! i` of the
    loop's own array at the loop's index aside (`let j = ks ! i`)."""
    if loop_read is not None:
        rhs = rewrite(rhs, lambda u: Unit() if loop_read(u) else u)
    return safe(rhs)


def _in_loop(body, loop_read=None) -> dict:
    """The lets of a build's body to substitute: in the parts evaluated once
    per element whenever the element is (lets, primitives, pairs, reads, a
    case's scrutinee, a nested loop's size or array: never a lambda's body,
    a case's branches, a loop's body, an `iter` or anything else that may run
    its parts any number of times, 0 included), an integer let that cannot
    fail and is small, read in the index of a read of an array the body does
    not bind, or by another such let (`let j = i - 1 in let k = clamp j in
    a ! k`); none when the substitutions would add more than BUDGET nodes."""
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
            if isinstance(getattr(t.rhs, "ty", None), Int) and _small(t.rhs) \
                    and _safe_here(t.rhs, loop_read):
                candidates[t.name] = t.rhs
        if cls in _ONCE:
            stack.extend(children(t))
        elif cls is Case:
            stack.append(t.scrut)
        elif cls is Build:
            stack.append(t.size)
        elif cls in (Fold, MapA):
            stack.append(t.arr)
    in_index: set = set()
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
    return _bounded(out, body)


def _index_maps(body):
    """`map (k. e) ks` with ks a variable of type Array Z and k read as an
    index in e becomes `build (length ks) (i. e[k := ks ! i])` (module doc)."""
    if not any(type(t) is MapA for t in subterms(body)):
        return body
    fresh = Fresh(names_of(body))

    def post(t):
        if type(t) is not MapA or type(t.arr) is not Var:
            return t
        ty = getattr(t.arr, "ty", None)
        if not (isinstance(ty, ArrayT) and isinstance(ty.elem, Int)):
            return t
        k = t.name
        if not any(type(u) is Index and type(u.arr) is Var and k in free_vars(u.idx)
                   for u in subterms(t.body)):
            return t
        i = fresh("i")  # (no source name has '$')
        read = Index(t.arr, Var(i, loc=t.loc, ty=Int()), loc=t.loc, ty=Int())
        new_body = rewrite(t.body, lambda u: read if type(u) is Var and u.name == k else u)
        size = Length(t.arr, loc=t.loc, ty=Int())
        return Build(size, i, new_body, loc=t.loc, ty=t.ty)

    return rewrite(body, lambda t: t, post)


def _bounded(lets: dict, body) -> dict:
    """lets without those whose right-hand side, with the lets it reads
    substituted, is larger than EXPANDED (`let j1 = j0 + j0 in let j2 = j1 + j1
    ...` doubles at each step); none when every use substituted would add more
    than BUDGET nodes."""
    size: dict = {}
    for x in lets:  # (each right-hand side's lets first: an explicit stack)
        stack = [x]
        while stack:
            y = stack[-1]
            if y in size:
                stack.pop()
                continue
            leaves = list(_leaves(lets[y]))
            deps = [z for z in leaves if z in lets and z not in size]
            if deps:
                stack.extend(dict.fromkeys(deps))
                continue
            size[y] = sum(size[z] if z in lets else 1 for z in leaves)
            stack.pop()
    kept = {x: e for x, e in lets.items() if size[x] <= EXPANDED}
    uses: dict = {}
    for t in subterms(body):
        if type(t) is Var and t.name in kept:
            uses[t.name] = uses.get(t.name, 0) + 1
    if sum(n * size[x] for x, n in uses.items()) > BUDGET:
        return {}
    return kept


def _leaves(t):
    """t's nodes, a variable by its name (the others None)."""
    for u in subterms(t):
        yield u.name if type(u) is Var else None


def _small(t) -> bool:
    n = 0
    for _ in subterms(t):
        n += 1
        if n > SMALL:
            return False
    return True
