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

from chad.terms import Lam, Term, note_field, shape

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
        """t renamed. One loop over an explicit stack of the nodes whose fields
        are being renamed: a deep term needs no deep Python stack."""
        frames: list = []
        while True:
            frame = self._enter(t)
            if type(frame) is _Frame:
                nxt = self._next(frame)
                if nxt is not None:
                    frames.append(frame)
                    t = nxt
                    continue
                r = frame.result()
            else:
                r = frame
            while frames:
                frame = frames[-1]
                frame.items.append(r)
                nxt = self._next(frame)
                if nxt is not None:
                    t = nxt
                    break
                frames.pop()
                r = frame.result()
            else:
                return r

    def _enter(self, t: Term):
        """t's reads renamed and its binders chosen: the renamed t when it has no
        children, else the frame of its fields."""
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
        return _Frame(t, sh, ren, changes, newb)

    def _next(self, frame: "_Frame"):
        """The next child of the frame's node to rename (the renaming of its
        field in force), or None when every field is done."""
        t = frame.t
        while True:
            if frame.field is not None:
                if len(frame.items) < len(frame.kids):
                    return frame.kids[len(frame.items)]
                self._end_field(frame)
            if frame.fi >= len(frame.fields):
                return None
            f = frame.fields[frame.fi]
            frame.fi += 1
            v = getattr(t, f)
            if v is None:
                continue
            pairs = []
            for bf in frame.binds.get(f, ()):
                pairs.extend(zip(_names(getattr(t, bf)), _names(frame.newb[bf])))
            ren = frame.ren
            if frame.opaque:
                frame.saved = self.ren
                self.ren = {old: new for old, new in pairs if old != new}
                frame.olds = ()
            else:
                frame.olds = [(old, ren.get(old, _MISSING)) for old, _ in pairs]
                for old, new in pairs:
                    ren[old] = new
            frame.field, frame.value = f, v
            frame.kids = v if type(v) is tuple else (v,)
            frame.items = []

    def _end_field(self, frame: "_Frame") -> None:
        note_field(frame.changes, frame.field, frame.value, frame.items)
        if frame.opaque:
            self.ren = frame.saved
        else:
            ren = frame.ren
            for old, prev in reversed(frame.olds):
                if prev is _MISSING:
                    del ren[old]
                else:
                    ren[old] = prev
        frame.field = None


class _Frame:
    """A node whose fields _Uniquify.go is renaming: the renaming it started
    with, its changed fields, its new binder names, the current field (its
    value, kids and the renamed ones so far) and what to undo after it."""

    __slots__ = ("t", "fields", "binds", "opaque", "ren", "changes", "newb", "fi", "field",
                 "value", "kids", "items", "saved", "olds")

    def __init__(self, t, sh, ren, changes, newb) -> None:
        self.t, self.fields, self.binds = t, sh.children, dict(sh.binds)
        self.opaque = sh.closure and type(t) is not Lam
        self.ren, self.changes, self.newb = ren, changes, newb
        self.fi, self.field, self.value, self.kids, self.items = 0, None, None, (), []
        self.saved, self.olds = None, ()

    def result(self) -> Term:
        return attrs.evolve(self.t, **self.changes) if self.changes else self.t


def uniquify(term: Term, fresh: Fresh, free) -> Term:
    """term with every binder renamed that repeats a name bound before it (in
    pre-order) or a free variable's name; references follow."""
    return _Uniquify(fresh, free).go(term)
