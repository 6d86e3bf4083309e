"""Cotangents at the boundary: JSON in (sparse, docs/language.md) and dense out.

On input a cotangent keeps its sparsity: `null` for a pair or a sum is the sparse
zero (the formalisation's `nothing`), `[0.0, 0.0]` a materialised pair. A
cotangent that does not match its type, or the side of the value's sum, is an
error naming the path (e.g. `ctg[1].inl`). On output gradients are dense: zeros
filled in, in the shape of the argument, a sum on the side of the argument's value.
Type formers of extensions (arrays, functions) give their own conversions through
chad/extend.py (`TypeFormer`).
"""

from __future__ import annotations

from typing import Any

from . import tables
from .errors import UsageError
from .types import Fun, Int, Prod, Real, Sum, Type, UnitT
from .values import Inj, _float, _short, real_from_json

def _codec(ty: Type, which: str):
    former = tables.TYPES.get(type(ty))
    return None if former is None else getattr(former, which)


def ctg_from_json(ty: Type, j, path: str = "ctg", primal=None):
    """Decode a (sparse) cotangent of type ty; `primal` is the value it belongs to."""
    match ty:
        case Real():
            return real_from_json(j, path, "cotangent of R")
        case Int() | UnitT():
            if j is not None:
                raise UsageError(f"{path}: the cotangent of {ty} is null, got {_short(j)}")
            return None
        case Prod(a, b):
            if j is None:
                return None
            if not isinstance(j, (list, tuple)) or len(j) != 2:
                raise UsageError(f"{path}: expected [da, db] or null (cotangent of {ty}), got {_short(j)}")
            pa, pb = (None, None) if primal is None else primal
            return (ctg_from_json(a, j[0], f"{path}[0]", pa), ctg_from_json(b, j[1], f"{path}[1]", pb))
        case Sum(UnitT(), UnitT()) if j is None or isinstance(j, bool):
            return None
        case Sum(a, b):
            if j is None:
                return None
            if isinstance(j, Inj):
                j = {("inl", "inr")[j.side]: j.value}
            if not isinstance(j, dict) or len(j) != 1 or next(iter(j)) not in ("inl", "inr"):
                raise UsageError(f'{path}: expected {{"inl": d}}, {{"inr": d}} or null (cotangent of {ty}), got {_short(j)}')
            key = next(iter(j))
            side = 0 if key == "inl" else 1
            if isinstance(primal, Inj) and primal.side != side:
                raise UsageError(f"{path}.{key}: the value is on the other side of the sum "
                                 f"({('inl', 'inr')[primal.side]}), so its cotangent must be too")
            inner = primal.value if isinstance(primal, Inj) else None
            return Inj(side, ctg_from_json(a if side == 0 else b, j[key], f"{path}.{key}", inner))
        case Fun():
            if j is not None:
                raise UsageError(f"{path}: the cotangent of a function is null")
            return None
    ext = _codec(ty, "ctg_from_json")
    if ext is not None:
        return ext(ty, j, path, primal)
    raise UsageError(f"{path}: cotangents of {ty} are not supported")


def densify(ty: Type, primal, ct):
    """The dense cotangent of a value `primal` of type ty from a sparse one."""
    match ty:
        case Real():
            return 0.0 if ct is None else float(ct)
        case Int() | UnitT() | Fun():
            return None
        case Prod(a, b):
            ca, cb = (None, None) if ct is None else ct
            return (densify(a, primal[0], ca), densify(b, primal[1], cb))
        case Sum(a, b):
            inner = ct.value if isinstance(ct, Inj) and ct.side == primal.side else None
            return Inj(primal.side, densify(a if primal.side == 0 else b, primal.value, inner))
    ext = _codec(ty, "densify")
    if ext is not None:
        return ext(ty, primal, ct)
    raise TypeError(f"cannot densify a cotangent of {ty}")


def dense_to_json(ty: Type, v) -> Any:
    """JSON of a dense cotangent (Z, () and Bool cotangents are null)."""
    match ty:
        case Real():
            return _float(v)
        case Int() | UnitT() | Fun():
            return None
        case Prod(a, b):
            return [dense_to_json(a, v[0]), dense_to_json(b, v[1])]
        case Sum(UnitT(), UnitT()):
            return None
        case Sum(a, b):
            return {("inl", "inr")[v.side]: dense_to_json(a if v.side == 0 else b, v.value)}
    ext = _codec(ty, "dense_to_json")
    if ext is not None:
        return ext(ty, v)
    raise TypeError(f"cannot encode a cotangent of {ty}")
