"""Runtime values of the source language, and their JSON encoding (docs/language.md).

    R -> float        Z -> int         () -> None        A * B -> tuple (a, b)
    A + B -> Inj(0, a) for inl, Inj(1, b) for inr
    Array R -> numpy float64 1-D array; Array Z -> numpy int64 1-D array;
    Array of anything else -> tuple of element values
    A -> B -> a closure object of the evaluator

`Inj` also represents the injections of sparse sum cotangents (linear.py).
"""

from __future__ import annotations

import json
import math

import numpy as np
from attrs import frozen

from .errors import UsageError
from .types import ArrayT, Fun, Int, Prod, Real, Sum, Type, UnitT


@frozen
class Inj:
    """A sum value: side 0 is inl, side 1 is inr."""

    side: int
    value: object


TRUE = Inj(0, None)
FALSE = Inj(1, None)


def is_number(j) -> bool:
    return isinstance(j, (int, float, np.integer, np.floating)) and not isinstance(j, bool)


def value_from_json(ty: Type, j, path: str = "args"):
    """Decode a JSON value of type ty; errors name the offending path."""
    match ty:
        case Real():
            if not is_number(j):
                raise UsageError(f"{path}: expected a number (R), got {_short(j)}")
            return float(j)
        case Int():
            if isinstance(j, np.integer):
                j = int(j)
            if not isinstance(j, int) or isinstance(j, bool):
                raise UsageError(f"{path}: expected an integer (Z), got {_short(j)}")
            return j
        case UnitT():
            if j is not None:
                raise UsageError(f"{path}: expected null (()), got {_short(j)}")
            return None
        case Prod(a, b):
            if not isinstance(j, (list, tuple)) or len(j) != 2:
                raise UsageError(f"{path}: expected a pair [a, b] ({ty}), got {_short(j)}")
            return (value_from_json(a, j[0], f"{path}[0]"), value_from_json(b, j[1], f"{path}[1]"))
        case Sum(a, b):
            if ty == Sum(UnitT(), UnitT()) and isinstance(j, bool):
                return TRUE if j else FALSE
            if isinstance(j, Inj):
                j = {("inl", "inr")[j.side]: j.value}
            side, inner = _injection(j, path, ty)
            return Inj(side, value_from_json(a if side == 0 else b, inner,
                                             f"{path}.{'inl' if side == 0 else 'inr'}"))
        case ArrayT(elem):
            if isinstance(j, (tuple, np.ndarray)):
                j = list(j)
            if not isinstance(j, list):
                raise UsageError(f"{path}: expected a list ({ty}), got {_short(j)}")
            items = [value_from_json(elem, x, f"{path}[{i}]") for i, x in enumerate(j)]
            return make_array(elem, items)
        case Fun():
            raise UsageError(f"{path}: a function ({ty}) cannot be given as JSON")
    raise UsageError(f"{path}: unsupported type {ty}")


def _injection(j, path, ty):
    if not isinstance(j, dict) or len(j) != 1 or next(iter(j)) not in ("inl", "inr"):
        raise UsageError(f'{path}: expected {{"inl": ...}} or {{"inr": ...}} ({ty}), got {_short(j)}')
    key = next(iter(j))
    return (0 if key == "inl" else 1), j[key]


def make_array(elem: Type, items: list):
    """The array representation for elements of type elem."""
    if isinstance(elem, Real):
        return np.asarray(items, dtype=np.float64)
    if isinstance(elem, Int):
        return np.asarray(items, dtype=np.int64)
    return tuple(items)


def value_to_json(ty: Type, v):
    """Encode a value of type ty as JSON-ready Python data."""
    match ty:
        case Real():
            return _float(v)
        case Int():
            return int(v)
        case UnitT():
            return None
        case Prod(a, b):
            return [value_to_json(a, v[0]), value_to_json(b, v[1])]
        case Sum(UnitT(), UnitT()):
            return v.side == 0
        case Sum(a, b):
            if v.side == 0:
                return {"inl": value_to_json(a, v.value)}
            return {"inr": value_to_json(b, v.value)}
        case ArrayT(elem):
            return [value_to_json(elem, x) for x in v]
        case Fun():
            return "<function>"
    raise TypeError(f"unsupported type {ty}")


def env_tuple_to_cells(d) -> list:
    """The formalisation's LEt tuple (c0, (c1, ... ())) to a list of cells."""
    cells = []
    while d is not None:
        cells.append(d[0])
        d = d[1]
    return cells


def cells_to_env_tuple(cells: list):
    """A list of cells to the formalisation's LEt tuple (c0, (c1, ... ()))."""
    d = None
    for c in reversed(cells):
        d = (c, d)
    return d


def _float(x) -> float | str:
    x = float(x)
    if math.isfinite(x):
        return x
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def _short(j) -> str:
    s = json.dumps(j)
    return s if len(s) <= 40 else s[:37] + "..."
