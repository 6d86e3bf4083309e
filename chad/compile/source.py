"""Source rewrites for the compiled path only: a checked def body made easier to
transform and to vectorise, before the CHAD transformation (or, for the
primal, before simplification). The counting evaluator never sees these terms
(its step counts are the unchanged program's); the meaning is the same.

* **Let-bound lambdas** `let f = \\x -> b in e`, where every use of f in e is
  applied (`f a`, as `map f xs` is parsed: `map (p. f p) xs`) and f is used
  once or b is small: each `f a` becomes `b[x := a]` (a a variable) or
  `let x = a in b`, and the `let f` goes. Then the transformation sees a map
  whose body is the lambda's, not an application of a closure value (CHAD of a
  closure value: an opaque backpropagator, so no batched reverse pass).
* **Applied lambda literals** `(\\x -> b) a` likewise (`map (\\(x : R) -> b) xs`:
  an annotated lambda is parsed as a function value applied to the element).
* **Let-bound integer indices** in a loop body (`let j = i - 1 in ... a ! (if
  j < 0 then 0 else j)`) substituted into their uses, and maps over an
  `Array Z` read as indices made builds (chad/compile/index_lets.py), so the
  read is a gather CHAD hoists out of the loop.
* **Calls** (with `calls`, the primal path) of a small def that calls no def:
  `g(a1, ..., an)` becomes `let t1 = a1 in ... let p1 = t1 in ... g's body`
  (as chad/functions/compiled.py inlines a derivative's calls in target terms),
  so a `build` whose body calls `clamp` can be batched.

Names: the term is first renamed apart when a name is bound twice (the
simplifier's `uniquify`), so no substitution captures; a lambda's copies keep
its binder names, all distinct from the names around the use. Capture lists are
recomputed afterwards (the simplifier's `tidy`). One loop over an explicit
stack: a deep program (10,000 nested lets) needs no deep Python stack.
Bounded like the target inliner: at most BUDGET nodes added per term.
"""

from __future__ import annotations

import itertools

import attrs

from chad.terms import App, Build, Call, Lam, Length, Let, MapA, Var, rewrite, shape, subterms

from chad.types import ArrayT, Int

from .index_lets import inline_index_lets
from .rows import hoist_rows

SMALL_LAMBDA = 200   # a lambda used more than once is inlined up to this size
SMALL_DEF = 400      # a def's body inlined at its calls up to this size
BUDGET = 60_000

_TEMPS = itertools.count(1)


def _size(t) -> int:
    return sum(1 for _ in subterms(t))


def _candidates(body, calls: dict | None, rows: bool) -> bool:
    """Whether body has anything this pass rewrites (else it is left as is)."""
    for n in subterms(body):
        cls = type(n)
        if cls is Let and type(n.rhs) is Lam:
            return True
        if cls is App and type(n.fn) is Lam:
            return True
        if cls is Call and calls and n.name in calls:
            return True
        if rows and cls is Build and type(n.size) is Length:  # a row to hoist, maybe (rows.py)
            return True
        if cls is Let and isinstance(getattr(n.rhs, "ty", None), Int):  # (index_lets.py)
            return True
        if cls is MapA and isinstance(getattr(n.arr, "ty", None), ArrayT) \
                and isinstance(n.arr.ty.elem, Int):  # a map over indices (index_lets.py)
            return True
    return False


def small_defs(defs) -> dict:
    """The defs whose calls the primal path inlines: a body calling only small
    defs before it in the program (inlined there in turn), of at most
    SMALL_DEF nodes with theirs (a callee's counted at each of its calls)."""
    out = {}
    sizes = {}
    for d in defs:
        size = 0
        for n in subterms(d.body):
            size += 1
            if type(n) is Call:
                if n.name not in out:
                    break
                size += sizes[n.name]
        else:
            if size <= SMALL_DEF:
                out[d.name] = d
                sizes[d.name] = size
    return out


def expand_call(t: Call, d):
    """The call t of def d as `let t1 = a1 in ... let p1 = t1 in ... d's body`:
    the arguments evaluated first, in order, as the call evaluates them; the
    fresh temporaries keep an argument from seeing an earlier parameter."""
    temps = [f"arg$c{next(_TEMPS)}" for _ in t.args]  # no source name has '$'
    out = d.body
    for p, a in reversed(list(zip(d.params, temps))):
        out = Let(p.name, Var(a, loc=t.loc, ty=p.ty), out, loc=t.loc, ty=t.ty)
    for a, e in reversed(list(zip(temps, t.args))):
        out = Let(a, e, out, loc=t.loc, ty=t.ty)
    return out


def rewritten(prog) -> bool:
    """Whether the compiled derivatives of prog see a rewritten program (a
    lambda inlined, a row hoisted). Their gradients are then the interpreter's
    up to the order of some additions: CHAD sums the cotangents a closure's body
    gives its captured variables in the closure's cotangent before adding them
    to the variables; inlined, the body adds them to the variables directly; a
    hoisted row's cotangent is summed before it is added to its array (within
    1e-12 relative; docs/compiler.md, "Vectorisation")."""
    return any(prepare_body(d.body, [p.name for p in d.params]) is not d.body
               for d in prog.defs)


def prepare_body(body, params, calls: dict | None = None, rows: bool = True):
    """body (a checked def body in the context of `params`) with the rewrites of
    the module doc; body itself when none applies."""
    if not _candidates(body, calls, rows):
        return body
    from chad.simplify.captures import tidy
    from chad.simplify.names import Fresh, uniquify
    from chad.simplify.occurrences import analyse

    orig = body
    if calls:
        body = _Rewriter({}, calls, lambdas=False).go(body)  # calls first, then lambdas
    called = body
    occ = analyse(body)
    if occ.dup or set(params) & set(occ.infos):
        body = uniquify(body, Fresh(set(occ.names) | set(params)), set(occ.free) | set(params))
    renamed = body
    # before the lambdas are inlined: their copies keep the lambda's binder
    # names, and index_lets keys its lets by name
    body = inline_index_lets(body)
    lams = _inlinable(body)
    new = _Rewriter(lams, None).go(body)
    if rows:
        new = hoist_rows(new)
    if new is renamed:  # nothing but names renamed apart, maybe: the body as it was
        return orig if called is orig else renamed
    return tidy(new)


def _inlinable(body) -> dict:
    """name -> its number of uses, for each let-bound lambda whose uses are all
    applications (and which is used once or small); names are unique here."""
    lets: dict[str, Lam] = {}
    uses: dict[str, int] = {}
    heads: dict[str, int] = {}
    for n in subterms(body):
        cls = type(n)
        if cls is Let and type(n.rhs) is Lam:
            lets[n.name] = n.rhs
        elif cls is Var:
            uses[n.name] = uses.get(n.name, 0) + 1
        elif cls is App and type(n.fn) is Var:
            heads[n.fn.name] = heads.get(n.fn.name, 0) + 1
    out = {}
    for name, lam in lets.items():
        k = uses.get(name, 0)
        if k == heads.get(name, 0) and (k <= 1 or _size(lam) <= SMALL_LAMBDA):
            out[name] = k
    return out


class _Rewriter:
    """The rewrite, post-order, with the let-bound lambdas (rewritten) known
    when their let's body is entered."""

    def __init__(self, names: dict, calls: dict | None, lambdas: bool = True) -> None:
        self.names = names            # the let-bound lambdas to inline: uses left
        self.lambdas = lambdas        # applied lambdas too (names unique)
        self.calls = calls or {}
        self.lams: dict[str, Lam] = {}
        self.added = 0

    def go(self, t):
        return rewrite(t, self._pre, self._post, self._child_done)

    def _child_done(self, node, k: int, r) -> None:
        if type(node) is Let and k == 0 and node.name in self.names and type(r) is Lam:
            self.lams[node.name] = r  # its rewritten lambda, for the body

    def _pre(self, t):
        """Calls expanded before their arguments are walked (the expansion's
        lets hold the arguments)."""
        while type(t) is Call and t.name in self.calls and self.added < BUDGET:
            d = self.calls[t.name]
            self.added += _size(d.body)
            t = expand_call(t, d)
        return t

    def _post(self, t):
        cls = type(t)
        if cls is Let and t.name in self.lams and not self.names[t.name]:
            return t.body  # every use inlined: the lambda is not needed
        if cls is App and self.lambdas:
            fn = t.fn
            if type(fn) is Var and fn.name in self.lams:
                lam = self.lams[fn.name]
            elif type(fn) is Lam:
                lam = fn
            else:
                return t
            if self.added >= BUDGET and type(fn) is Var:
                return t
            if type(fn) is Var:
                self.names[fn.name] -= 1
            self.added += _size(lam.body)
            if type(t.arg) is Var and not _binds(lam.body, t.arg.name):
                return _rename(lam.body, lam.name, t.arg)
            return Let(lam.name, t.arg, lam.body, loc=t.loc, ty=t.ty)
        return t


def _binds(t, name: str) -> bool:
    """Some binder in t binds `name`."""
    for n in subterms(t):
        for _child, bfields in shape(n).binds:
            for bf in bfields:
                v = getattr(n, bf)
                if v == name or (type(v) is tuple and name in v):
                    return True
    return False


def _rename(t, x: str, var: Var):
    """t with the free variable x replaced by the variable `var` (x is not
    rebound in t, nor is var's name)."""
    y = var.name
    return rewrite(t, lambda u: _reads(u, x, y, var))


def _reads(t, x: str, y: str, var: Var):
    if type(t) is Var:
        return attrs.evolve(var, loc=t.loc) if t.name == x else t
    changes = {}
    for f in shape(t).reads:
        v = getattr(t, f)
        if type(v) is tuple and x in v:
            changes[f] = tuple(y if n == x else n for n in v)
        elif v == x:
            changes[f] = y
    return attrs.evolve(t, **changes) if changes else t
