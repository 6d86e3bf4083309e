"""Sparse cotangent values and their monoid structure (Efficient CHAD (Smeding & Vákár), §4, appendix B
`spec.linear-types`).

Linear types (the formalisation's LTyp) and their representation:

    LUn        ()      -> None
    LR         real    -> float
    LPair a b  a (x) b -> None ("nothing", the sparse zero) or a tuple (x, y)
    LSum a b   a (+) b -> None ("nothing") or values.Inj(side, x)

`zerov`, `plusv`, `phi` and `size` are the formalisation's functions with their
costs: zero and plusv return (value, steps). plusv does not need the type: the
representation tells the cases apart exactly as the formalisation's clauses do.
Linear types and cotangent values of extensions (bags, closures) are looked up in
the tables filled through chad/extend.py (`LinearType`, `CotangentValue`).
"""

from __future__ import annotations

from attrs import frozen

from . import tables
from .values import Inj


class LType:
    __slots__ = ()


@frozen
class LUn(LType):
    pass


@frozen
class LR(LType):
    pass


@frozen
class LPairT(LType):
    left: LType
    right: LType


@frozen
class LSumT(LType):
    left: LType
    right: LType


L_UN = LUn()
L_R = LR()


def zerov(lt: LType):
    """The formalisation's `zerov`: the zero of lt and its cost (always 1)."""
    match lt:
        case LUn():
            return None, 1
        case LR():
            return 0.0, 1
        case LPairT() | LSumT():
            return None, 1
    zero = tables.LINEAR_ZERO.get(type(lt))  # extension types (arrays, closures)
    if zero is not None:
        return zero(lt)
    raise TypeError(f"no zero for linear type {lt!r}")


def plusv(x, y):
    """The formalisation's `plusv`: x + y and its cost."""
    if y is None:  # (x, nothing) and (tt, tt)
        return x, 1
    if x is None:
        return y, 1
    if isinstance(x, float):
        return x + y, 1
    if isinstance(x, tuple):
        a, ca = plusv(x[0], y[0])
        b, cb = plusv(x[1], y[1])
        return (a, b), 1 + ca + cb
    if isinstance(x, Inj):
        if isinstance(y, Inj) and x.side == y.side:
            z, cz = plusv(x.value, y.value)
            return Inj(x.side, z), 1 + cz
        return None, 1  # the formalisation returns zero on mismatched sides
    ops = tables.cotangent_ops(x)  # extension values (bags, ...)
    if ops is not None:
        return ops.plus(x, y)
    if isinstance(x, (int,)) and not isinstance(x, bool):
        return float(x) + float(y), 1
    raise TypeError(f"cannot add cotangents {x!r} and {y!r}")


def phi(x) -> int:
    """The potential function φ (c_φ = 1)."""
    if x is None or isinstance(x, float):
        return 1
    if isinstance(x, tuple):
        return 1 + phi(x[0]) + phi(x[1])
    if isinstance(x, Inj):
        return 1 + phi(x.value)
    ops = tables.cotangent_ops(x)
    if ops is not None:
        return ops.phi(x)
    return 1


def size(x) -> int:
    """size of a cotangent value (TH2); equal to φ on the formalisation's types."""
    if x is None or isinstance(x, float):
        return 1
    if isinstance(x, tuple):
        return 1 + size(x[0]) + size(x[1])
    if isinstance(x, Inj):
        return 1 + size(x.value)
    ops = tables.cotangent_ops(x)
    if ops is not None:
        return ops.size(x)
    return 1
