"""Tangents at the boundary of forward mode: decoding the tangents given to `jvp`,
encoding the tangent of its result, and zero tangents (docs/forward-mode.md).

Inside the forward derivative (chad/transform/forward.py) a tangent has the
tangent type of its primal's type: a float for R, () (None) for Z and (), a pair
for a pair, the tangent of the injected value for a sum, a sequence of the
elements' tangents for an array. At the boundary:

  * a type with no R in it (Z, (), Bool, Array Z, ...) is *discrete*: its tangent
    is given and returned as None;
  * R: a float; a pair: a tuple or list of two; an array: a list, tuple or numpy
    array of the primal's length (returned as a numpy array for Array R, a tuple
    otherwise); a sum: `Inj` or {"inl": t} / {"inr": t} on the side of the
    primal's value (returned as `Inj`), or None when that side has no real.

A tangent that does not fit is a UsageError naming its path, e.g. `tangents[1][0]`.
"""

from __future__ import annotations

import numpy as np

from .errors import UsageError
from .types import ArrayT, Fun, Int, Prod, Real, Sum, Type, UnitT
from .values import Inj, value_to_json


def discrete(ty: Type) -> bool:
    """True when no real occurs in ty (outside a function type): its tangent is ()."""
    match ty:
        case Real():
            return False
        case Prod(a, b) | Sum(a, b):
            return discrete(a) and discrete(b)
        case ArrayT(e):
            return discrete(e)
    return True


def zero_tangent(ty: Type, value):
    """The zero tangent at `value` of type ty (internal representation)."""
    match ty:
        case Real():
            return 0.0
        case Int() | UnitT() | Fun():
            return None
        case Prod(a, b):
            return (zero_tangent(a, value[0]), zero_tangent(b, value[1]))
        case Sum(a, b):
            return zero_tangent(a if value.side == 0 else b, value.value)
        case ArrayT(e):
            if isinstance(e, Real):
                return np.zeros(len(value))
            return tuple(zero_tangent(e, value[i]) for i in range(len(value)))
    raise UsageError(f"no tangent for the type {ty}")


def _short(j) -> str:
    s = repr(j)
    return s if len(s) <= 60 else s[:57] + "..."


def tangent_from_user(ty: Type, value, j, path: str):
    """The internal tangent at `value` of type ty given as j (see the module doc)."""
    if discrete(ty):
        if j is not None:
            raise UsageError(f"{path}: the tangent of a value of type {ty} (no real in it) "
                             f"is None (null in JSON), got {_short(j)}")
        return zero_tangent(ty, value)
    match ty:
        case Real():
            if isinstance(j, (bool, np.bool_)) or not isinstance(j, (int, float, np.integer,
                                                                        np.floating)):
                raise UsageError(f"{path}: expected a real tangent (a float) for {ty}, "
                                 f"got {_short(j)}")
            return float(j)
        case Prod(a, b):
            if not isinstance(j, (list, tuple)) or len(j) != 2:
                raise UsageError(f"{path}: expected a pair of tangents (a tuple of 2) for {ty}, "
                                 f"got {_short(j)}")
            return (tangent_from_user(a, value[0], j[0], f"{path}[0]"),
                    tangent_from_user(b, value[1], j[1], f"{path}[1]"))
        case Sum(a, b):
            side = value.side
            name = ("inl", "inr")[side]
            payload = a if side == 0 else b
            if j is None and discrete(payload):  # no real on the value's side
                return zero_tangent(payload, value.value)
            if isinstance(j, Inj):
                got, inner = j.side, j.value
            elif isinstance(j, dict) and len(j) == 1 and next(iter(j)) in ("inl", "inr"):
                got, inner = (0 if next(iter(j)) == "inl" else 1), next(iter(j.values()))
            else:
                raise UsageError(f"{path}: expected the tangent of a sum as Inj or "
                                 f'{{"{name}": ...}} (the side of the value), got {_short(j)}')
            if got != side:
                raise UsageError(f"{path}: the tangent is on the {('inl', 'inr')[got]} side "
                                 f"but the value is {name}: a tangent stays on the value's side")
            return tangent_from_user(a if side == 0 else b, value.value, inner, f"{path}.{name}")
        case ArrayT(e):
            if isinstance(j, np.ndarray):
                if j.ndim == 0 or (j.ndim > 1 and not isinstance(e, ArrayT)):
                    raise UsageError(f"{path}: expected a 1-D array of {len(value)} tangent(s) "
                                     f"for {ty}, got an array of shape {j.shape}")
                j = list(j)
            if not isinstance(j, (list, tuple)):
                raise UsageError(f"{path}: expected a list of {len(value)} tangent(s) for {ty}, "
                                 f"got {_short(j)}")
            if len(j) != len(value):
                raise UsageError(f"{path}: expected {len(value)} tangent(s), one per element of "
                                 f"the array, got {len(j)}")
            items = [tangent_from_user(e, value[i], x, f"{path}[{i}]") for i, x in enumerate(j)]
            return np.asarray(items, dtype=np.float64) if isinstance(e, Real) else tuple(items)
    raise UsageError(f"{path}: cannot give a tangent of type {ty}")


def tangent_to_user(ty: Type, value, t):
    """The tangent t of a result `value` of type ty, as returned to users."""
    if discrete(ty):
        return None
    match ty:
        case Real():
            return float(t)
        case Prod(a, b):
            return (tangent_to_user(a, value[0], t[0]), tangent_to_user(b, value[1], t[1]))
        case Sum(a, b):
            side = value.side
            return Inj(side, tangent_to_user(a if side == 0 else b, value.value, t))
        case ArrayT(e):
            if isinstance(e, Real):
                return np.asarray(t, dtype=np.float64)
            return tuple(tangent_to_user(e, value[i], t[i]) for i in range(len(value)))
    raise UsageError(f"cannot return a tangent of type {ty}")


def tangent_to_json(ty: Type, value, t):
    """A tangent as returned by `tangent_to_user`, as JSON data (`chad jvp`): reals
    as value_to_json writes them (non-finite as "inf", "-inf", "nan"), pairs and
    arrays as lists, a sum as {"inl": t} or {"inr": t}, a discrete one as null."""
    if discrete(ty) or t is None:
        return None
    match ty:
        case Real():
            return value_to_json(ty, t)
        case Prod(a, b):
            return [tangent_to_json(a, value[0], t[0]), tangent_to_json(b, value[1], t[1])]
        case Sum(a, b):
            side = value.side
            return {("inl", "inr")[side]: tangent_to_json(a if side == 0 else b, value.value,
                                                          t.value)}
        case ArrayT(e):
            return [tangent_to_json(e, value[i], t[i]) for i in range(len(value))]
    raise UsageError(f"cannot write a tangent of type {ty}")
