"""Scopes of the Python front end: which chad name (and type) each Python
local has at a point of the translation.

A `Frame` is one Python scope: the decorated function's (its locals keep their
Python spelling, see names.py), or a lambda's, a nested def's or a
comprehension's (every name bound there is fresh, so it never shadows a name an
outer function's body refers to). Reassigning a local gives it a new `let`
(SSA); branches work on copies of the frame. A lambda or nested def is a
`Macro`: it is translated where it is called, in its defining frame *as it is
at the call* (found by the frame's `fid`), which is Python's late binding of
closures.
"""

from __future__ import annotations

import ast
import itertools

from attrs import frozen

_FIDS = itertools.count(1)


@frozen
class Var:
    name: str  # the chad name
    ty: object  # the front-end type


@frozen
class Macro:
    node: ast.AST  # an ast.Lambda or ast.FunctionDef
    fid: int  # the frame it was defined in
    uid: int  # one per definition (to detect recursion)


@frozen
class Dropped:
    """A Python local that has no value here (assigned in only one branch of an
    if, or only inside a loop): using it is an error with this reason."""

    reason: str


class Frame:
    def __init__(self, parent: "Frame | None", fresh: bool, fid: int | None = None):
        self.parent = parent
        self.fresh = fresh
        self.fid = next(_FIDS) if fid is None else fid
        self.vars: dict[str, Var | Macro | Dropped] = {}

    def copy(self) -> "Frame":
        f = Frame(self.parent, self.fresh, self.fid)
        f.vars = dict(self.vars)
        return f

    def lookup(self, name: str):
        f = self
        while f is not None:
            if name in f.vars:
                return f.vars[name]
            f = f.parent
        return None

    def find(self, fid: int) -> "Frame | None":
        f = self
        while f is not None:
            if f.fid == fid:
                return f
            f = f.parent
        return None
