"""Binder names for the simplifier: fresh names, and making every binder unique.

The CHAD transformation (Efficient CHAD, Smeding & Vákár, Fig. 7) gives every
binder it generates a fresh name containing '$', but it reuses the source
variable names for the primal variables, and a source program may rebind a
name (`let x = x + 1 in ...`) or bind the same name in both branches of a
case. The simplifier works under the Barendregt convention instead: after
`uniquify`, no name is bound twice and no binder has the name of a free
variable, so moving a term under a binder can never capture one of its free
variables, and a substitution needs no renaming ("Secrets of the Glasgow
Haskell Compiler inliner", Peyton Jones & Marlow, §3). The rewrites keep the
convention: they move terms and duplicate only binder-free ones (atoms, pairs
of atoms), and each binder they create has a fresh name.

The one exception is a closure node other than `Lam` whose captured names are
at the same time the names its body binds (the functions extension's
MkClosure): its body is a closed scope where those names are rebound on
purpose. `uniquify` renames such a body's references when the captured
variable is renamed outside, and the rewriting pass never substitutes into,
nor carries facts into, such a body.

Fresh names are `name + "$s" + counter`, never a name that occurs anywhere in
the term.
"""

from __future__ import annotations

import re

import attrs

from chad.terms import Lam, Term, shape

_SUFFIX = re.compile(r"\$s\d+$")
_MISSING = object()


class Fresh:
    """Fresh names `base$sN`, avoiding every name in `taken` (which it extends)."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = taken
        self.counter = 0
        self._bases: dict[str, str] = {}

    def __call__(self, name: str) -> str:
        base = self._bases.get(name)
        if base is None:
            base = self._bases[name] = _SUFFIX.sub("", name) if "$s" in name else name
        while True:
            self.counter += 1
            new = f"{base}$s{self.counter}"
            if new not in self.taken:
                self.taken.add(new)
                return new


def _names(v) -> tuple[str, ...]:
    if v is None:
        return ()
    if type(v) is str:
        return (v,)
    return tuple(v)


def is_opaque(t) -> bool:
    """A closure node other than Lam: its body sees only its own binders."""
    sh = shape(t)
    return sh.closure and type(t) is not Lam


class _Uniquify:
    def __init__(self, fresh: Fresh, free) -> None:
        self.fresh = fresh
        self.bound: set[str] = set(free)
        self.ren: dict[str, str] = {}

    def go(self, t: Term) -> Term:
        sh = shape(t)
        ren = self.ren
        changes: dict = {}
        for f in sh.reads:
            v = getattr(t, f)
            if v is None:
                continue
            nv = ren.get(v, v) if type(v) is str else tuple(ren.get(x, x) for x in v)
            if nv != v:
                changes[f] = nv
        if not sh.children:
            return attrs.evolve(t, **changes) if changes else t
        opaque = sh.closure and type(t) is not Lam
        newb: dict = {}
        for _child, bfields in sh.binds:
            for bf in bfields:
                if bf in newb:
                    continue
                v = getattr(t, bf)
                if bf in sh.reads:  # tied to the names read (a closure's captures)
                    newb[bf] = changes.get(bf, v)
                    continue
                if v is None:
                    newb[bf] = None
                    continue
                out = []
                for x in _names(v):
                    y = self.fresh(x) if x in self.bound else x
                    self.bound.add(y)
                    out.append(y)
                nv = out[0] if type(v) is str else tuple(out)
                newb[bf] = nv
                if nv != v:
                    changes[bf] = nv
        binds = dict(sh.binds)
        for f in sh.children:
            v = getattr(t, f)
            if v is None:
                continue
            pairs = []
            for bf in binds.get(f, ()):
                pairs.extend(zip(_names(getattr(t, bf)), _names(newb[bf])))
            saved = None
            if opaque:
                saved = self.ren
                self.ren = {old: new for old, new in pairs if old != new}
                olds = ()
            else:
                olds = [(old, ren.get(old, _MISSING)) for old, _ in pairs]
                for old, new in pairs:
                    ren[old] = new
            if type(v) is tuple:
                nv = tuple(self.go(c) for c in v)
                if any(a is not b for a, b in zip(nv, v)):
                    changes[f] = nv
            else:
                nv = self.go(v)
                if nv is not v:
                    changes[f] = nv
            if opaque:
                self.ren = saved
            else:
                for old, prev in reversed(olds):
                    if prev is _MISSING:
                        del ren[old]
                    else:
                        ren[old] = prev
        return attrs.evolve(t, **changes) if changes else t


def uniquify(term: Term, fresh: Fresh, free) -> Term:
    """term with every binder renamed that repeats a name bound before it (in
    pre-order) or a free variable's name; references follow. Recursive: run it
    on a big-stack thread (chad.deep.run_deep)."""
    return _Uniquify(fresh, free).go(term)
