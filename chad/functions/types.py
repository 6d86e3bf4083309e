"""Types, cotangent types and runtime values of closure conversion (Efficient CHAD (Smeding & Vákár), appendix C) and of the naive higher-order CHAD (Efficient CHAD (Smeding & Vákár), §9).

Typed closure conversion (Minamide et al.; Efficient CHAD (Smeding & Vákár), appendix C) sends

    [τ -> σ]^CC := Σ_{α:Type} α × ((α × τ^CC) ->□ σ^CC)

`ClosureT(τ, σ)` is that Σ-type, `ClosedFun(τ, σ)` the type τ ->□ σ of *closed*
functions and `TyVar` the abstract α inside an unpack. A closure value is a
`Packed(tag, (env, closed_fn))`, the tag being the type ρ of the captured
environment (a nested pair ρ1 × (ρ2 × ... × ())): the paper's type tags with
decidable equality (its footnote 28).

Cotangents (efficient):  D2[τ ->□ σ] := ()   and   D2[Σα. τ] := Σα. D2[τ],
implemented, like sparse sums, as 1 ⊔ (Σα. D2τ): `None` (the zero) or
`LPacked(tag, d)`. Cotangents (naive, §9): D2[τ -> σ] := List(D1τ × D2σ), the log
of the function's invocations: `None` (the empty log), `LogOne(arg, ctg)` or
`LogCat(a, b)` (a ++ b in O(1), the Bag of footnote 25).

Both representations have `None` as their zero, so one cotangent type, `LFunT`,
serves both transforms: its zero costs 1, and `plusv` dispatches on the values.
The abstract α has cotangent type `LAbstract`; its zero is `None` too, because the
environment types ρ are always a pair or () (whose zeros are `None`).
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from chad.linear import LType, phi, plusv, size
from chad.types import ArrayT, Fun, Prod, Sum, Type, UnitT, show_type

# ----------------------------------------------------------------- source-side types


@frozen
class ClosedFun(Type):
    """τ ->□ σ: closed functions (no captured context)."""

    arg: Type
    res: Type

    def __str__(self) -> str:
        return f"({show_type_cc(self.arg)} ->[] {show_type_cc(self.res)})"


@frozen
class ClosureT(Type):
    """Σα. α × ((α × arg) ->□ res): a closure-converted function type."""

    arg: Type
    res: Type

    def __str__(self) -> str:
        return f"(Σα. α * (α * {show_type_cc(self.arg)} ->[] {show_type_cc(self.res)}))"


@frozen
class TyVar(Type):
    """The abstract environment type α bound by an unpack."""

    name: str = "α"

    def __str__(self) -> str:
        return self.name


def show_type_cc(t: Type) -> str:
    if isinstance(t, (ClosedFun, ClosureT, TyVar)):
        return str(t)
    try:
        return show_type(t)
    except TypeError:
        return repr(t)


def cc_type(t: Type) -> Type:
    """τ^CC: function types become closure (Σ) types, everything else recursively."""
    match t:
        case Fun(a, b):
            return ClosureT(cc_type(a), cc_type(b))
        case Prod(a, b):
            return Prod(cc_type(a), cc_type(b))
        case Sum(a, b):
            return Sum(cc_type(a), cc_type(b))
        case ArrayT(e):
            return ArrayT(cc_type(e))
    return t


def env_type(types) -> Type:
    """The environment tuple type ρ1 × (ρ2 × ... × ()) of a closure's captures."""
    out: Type = UnitT()
    for ty in reversed(list(types)):
        out = Prod(ty, out)
    return out


# ----------------------------------------------------------------- cotangent types


@frozen
class LFunT(LType):
    """D2 of a function (closure) type: a packed environment cotangent (efficient)
    or a log of invocations (naive); both have the zero `None`."""

    def zero(self):
        return None, 1


@frozen
class LAbstract(LType):
    """D2 of the abstract environment type α: zero `None` (ρ is a pair or ())."""

    def zero(self):
        return None, 1


L_FUN = LFunT()
L_ABSTRACT = LAbstract()


# ----------------------------------------------------------------- runtime values


@frozen(eq=False)
class Packed:
    """pack_ρ v: a closure-converted function value; v = (env tuple, closed fn)."""

    tag: Any
    value: Any

    def __repr__(self) -> str:
        return f"<closure env:{show_type_cc(self.tag)}>"


@frozen(eq=False)
class ClosedFn:
    """A closed function of the fused form: applied to (env tuple, argument), its
    body runs with `param` and the `captures` bound to the argument and the
    environment's components (MkClosure / CApp in terms.py)."""

    param: str
    captures: tuple
    body: Any

    def __repr__(self) -> str:
        return f"<closed fn \\{self.param}>"


@frozen
class LPacked:
    """A non-zero cotangent of a Σ-type: the tag and a cotangent of (env, closed fn)."""

    tag: Any
    value: Any

    def plus(self, y):
        """plusv on Σ: as on sums, componentwise when the tags agree. Tags of
        cotangents that meet are always equal (they belong to one closure value);
        like the formalisation's sums we return the zero otherwise."""
        if isinstance(y, LPacked) and y.tag == self.tag:
            z, cz = plusv(self.value, y.value)
            return LPacked(self.tag, z), 1 + cz
        return None, 1

    def phi(self) -> int:
        return 1 + phi(self.value)

    def size(self) -> int:
        return 1 + size(self.value)


class CatBag:
    """A non-empty bag with O(1) `+` (a free commutative monoid): leaves hold
    (key, cotangent); `None`, the zero, never occurs inside (plusv handles it).
    Used for the cotangent of a closure's environment (key: capture index) and
    for naive §9's log of invocations (key: the argument's primal)."""

    __slots__ = ()

    def plus(self, y):
        return self._cat(self, y), 1

    def entries(self) -> list:
        """The (key, cotangent) pairs of the leaves, left to right."""
        out, stack = [], [self]
        while stack:
            x = stack.pop()
            if isinstance(x, self._cat):
                stack.append(x.right)
                stack.append(x.left)
            elif x is not None:
                out.append((x.key, x.ctg))
        return out

    def phi(self) -> int:
        return self.size()

    def size(self) -> int:
        n, stack = 0, [self]
        while stack:
            x = stack.pop()
            if x is None:
                continue
            n += 1
            if isinstance(x, self._cat):
                stack.extend((x.left, x.right))
            else:
                n += size(x.ctg)
        return n


class _EnvBag(CatBag):
    __slots__ = ()


@frozen(eq=False)
class EnvOne(_EnvBag):
    index: int
    ctg: Any

    @property
    def key(self):
        return self.index


@frozen(eq=False)
class EnvCat(_EnvBag):
    left: Any
    right: Any


class _Log(CatBag):
    __slots__ = ()


@frozen(eq=False)
class LogOne(_Log):
    arg: Any
    ctg: Any

    @property
    def key(self):
        return self.arg


@frozen(eq=False)
class LogCat(_Log):
    left: Any
    right: Any


_EnvBag._cat = EnvCat
_Log._cat = LogCat
