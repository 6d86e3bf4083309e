"""Pieces shared by the CHAD transformations: the dual type map D2, term-level
zeros (`zerot`), fresh names and the context of levels.

Efficient CHAD (Smeding & Vákár), appendix B: `D2τ'`, `zerot`, `zero-env-term`. Type formers of
extensions give their D2 and zerot through chad/extend.py (`TypeFormer`).
"""

from __future__ import annotations

import itertools

from attrs import define, field

from chad import tables
from chad.linear import L_R, L_UN, LPairT, LSumT, LType
from chad.terms import LPairZero, LSumZero, LUnit, Pair, Prim, Term, Unit
from chad.types import Int, Prod, Real, Sum, Type, UnitT

def D2(t: Type) -> LType:
    """The dual (cotangent) type D[τ]₂ as a linear type."""
    match t:
        case Real():
            return L_R
        case Int() | UnitT():
            return L_UN
        case Prod(a, b):
            return LPairT(D2(a), D2(b))
        case Sum(a, b):
            return LSumT(D2(a), D2(b))
    former = tables.TYPES.get(type(t))
    if former is not None:
        return former.D2(t)
    raise NotImplementedError(f"no cotangent type for {t} yet")


def zerot(t: Type) -> Term:
    """A target term producing the zero cotangent of source type t."""
    match t:
        case Real():
            return Prim("LZERO", LUnit())
        case Int() | UnitT():
            return LUnit()
        case Prod():
            return LPairZero()
        case Sum():
            return LSumZero()
    former = tables.TYPES.get(type(t))
    if former is not None:
        return former.zerot(t)
    raise NotImplementedError(f"no zero for {t} yet")


def zero_env_term(types: list[Type]) -> Term:
    """`zero-env-term Γ`: the tuple (zero, (zero, ... ())) in level order."""
    t: Term = Unit()
    for ty in reversed(types):
        t = Pair(zerot(ty), t)
    return t


@define
class Fresh:
    """Generator of target names. They contain '$', which no source name can, so
    they never capture or shadow a source variable."""

    counter: itertools.count = field(factory=lambda: itertools.count(1))

    def __call__(self, stem: str) -> str:
        return f"{stem}${next(self.counter)}"


@define
class Context:
    """The typing context Γ of the source term being transformed.

    Maps each source variable to its level (position from the bottom) and type;
    `bind` pushes a binder for the duration of a `with` block.
    """

    levels: dict[str, int] = field(factory=dict)
    types: list[Type] = field(factory=list)

    @classmethod
    def of_params(cls, params) -> "Context":
        ctx = cls()
        for p in params:
            ctx.levels[p.name] = len(ctx.types)
            ctx.types.append(p.ty)
        return ctx

    def level(self, name: str) -> int:
        return self.levels[name]

    def push(self, name: str, ty: Type):
        old = self.levels.get(name)
        self.levels[name] = len(self.types)
        self.types.append(ty)
        return (name, old)

    def pop(self, token) -> None:
        name, old = token
        self.types.pop()
        if old is None:
            del self.levels[name]
        else:
            self.levels[name] = old
