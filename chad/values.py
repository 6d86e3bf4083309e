"""Runtime values of the source language, and their JSON encoding (docs/language.md).

    R -> float        Z -> int         () -> None        A * B -> tuple (a, b)
    A + B -> Inj(0, a) for inl, Inj(1, b) for inr
    Array R -> numpy float64 1-D array; Array Z -> numpy int64 1-D array;
    Array of anything else -> tuple of element values
    A -> B -> a closure object of the evaluator

`Inj` also represents the injections of sparse sum cotangents (linear.py).

Numbers in JSON: one policy for input and output
------------------------------------------------
The same rules hold for all JSON that the command line reads (`--args`, `--ctg`)
and writes (the values, gradients and reports of `run`, `grad`, `cost`, `show`
and `check`), and for JSON-form arguments and cotangents given to the library.

* JSON is strict (RFC 8259). Python's extensions `NaN`, `Infinity` and
  `-Infinity` are not JSON: on input they are a usage error, and they are never
  written.
* A non-finite real is one of the strings "inf", "-inf" and "nan" (exactly
  these, lower case), wherever an R is expected: an argument, a cotangent, an
  element of a pair, a sum or an array. Results and gradients are written the
  same way, so every output can be given back as an input. Any other string
  ("Infinity", "NaN", "1.0") where an R is expected is a usage error.
* A real is a float64. A number beyond its range (magnitude above about
  1.8e308), such as `1e400` or an integer like 10**400 given for an R, is a usage
  error naming the place (`args[0]: the number 1e400 is too large for a float`),
  just as the literal `1e400` in a program is a parse error at its line and
  column. Nothing overflows to infinity silently: write "inf" for an infinity.
  A number too small for a float rounds to 0.0 (or a subnormal), in JSON as in
  programs: `1e-400` is 0.0.
* An R may be given as an integer (`3` is 3.0); a Z must be an integer, of any
  size, with two limits. The elements of an `Array Z` are 64-bit integers
  (-2**63 .. 2**63-1): an argument outside that range is a usage error and a
  computed element outside it a runtime error. An integer has at most 4300
  digits (Python's int/str conversion limit, `sys.get_int_max_str_digits()`):
  a longer one is a usage error in JSON as a longer literal is a parse error in a
  program, and a result that long is a runtime error instead of output.
* A program has no literal for an infinity or a NaN; it computes them
  (`exp 1000.0`, `log 0.0`) or takes them as arguments.

`parse_json` is the reader and `dumps` the writer of these rules; a JSON number
that does not fit (a float token beyond range, an integer token too long) is read
as an `OutOfRange` holding its text, so that the error names the path
(`args[1][0]`) where it was used.
"""

from __future__ import annotations

import json
import math
import sys

import numpy as np
from attrs import frozen

from .deep import run_deep
from .errors import EvalError, UsageError
from .types import ArrayT, Fun, Int, Prod, Real, Sum, Type, UnitT

# The non-finite reals as JSON strings, both ways.
NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
NONFINITE_TEXT = '"inf", "-inf" or "nan"'
FLOAT_MAX_TEXT = "about 1.8e308"
INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1


@frozen
class Inj:
    """A sum value: side 0 is inl, side 1 is inr."""

    side: int
    value: object


TRUE = Inj(0, None)
FALSE = Inj(1, None)


@frozen
class OutOfRange:
    """A JSON number token that fits no Python number: a float token beyond float
    range (`1e400`) or an integer token with too many digits. The decoders turn it
    into an error naming its path."""

    text: str
    is_int: bool = False


def is_number(j) -> bool:
    return isinstance(j, (int, float, np.integer, np.floating)) and not isinstance(j, bool)


def real_from_json(j, path: str, what: str = "R") -> float:
    """An R from JSON (or a Python number): a number in float range or one of the
    strings "inf", "-inf", "nan". `what` names the expected thing in messages."""
    if isinstance(j, str) and j in NONFINITE:
        return NONFINITE[j]
    if isinstance(j, OutOfRange):
        raise UsageError(_too_large(j.text, path))
    if not is_number(j):
        hint = f"; a non-finite real is one of the strings {NONFINITE_TEXT}" \
            if isinstance(j, str) else ""
        raise UsageError(f"{path}: expected a number ({what}), got {_short(j)}{hint}")
    try:
        return float(j)
    except OverflowError:  # an int beyond float range
        raise UsageError(_too_large(_short_int(j), path)) from None


def _too_large(text: str, path: str) -> str:
    return (f"{path}: the number {text} is too large for a float (the largest is "
            f"{FLOAT_MAX_TEXT}); write the string \"inf\" or \"-inf\" for an infinity")


def int_from_json(j, path: str) -> int:
    """A Z from JSON: an integer of any size (at most the digits Python converts)."""
    if isinstance(j, np.integer) and not isinstance(j, np.timedelta64):
        j = int(j)
    if isinstance(j, OutOfRange) and j.is_int:
        raise UsageError(f"{path}: the integer {_short(j)} is too long ({_digits(j.text)} "
                         f"digits; at most {sys.get_int_max_str_digits()})")
    if not isinstance(j, int) or isinstance(j, bool):
        raise UsageError(f"{path}: expected an integer (Z), got {_short(j)}")
    return j


def _digits(text: str) -> int:
    return len(text.lstrip("-"))


def value_from_json(ty: Type, j, path: str = "args"):
    """Decode a JSON value of type ty; errors name the offending path."""
    match ty:
        case Real():
            return real_from_json(j, path)
        case Int():
            return int_from_json(j, path)
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
            if isinstance(elem, Real):  # fast paths, with the same result as below
                if type(j) is np.ndarray and j.ndim == 1 and j.dtype == np.float64:
                    return j.copy()
                if type(j) in (list, tuple) and all(type(x) is float for x in j):
                    return np.array(j, dtype=np.float64)
            if isinstance(elem, Int):  # (a bool array is no Array Z: the path below says so)
                fast = _int64_array(j)
                if fast is not None:
                    return fast
            if isinstance(j, np.ndarray) and j.ndim == 0:
                raise UsageError(f"{path}: expected a list ({ty}), got {_short(j)}")
            if isinstance(j, (tuple, np.ndarray)):
                j = list(j)
            if not isinstance(j, list):
                raise UsageError(f"{path}: expected a list ({ty}), got {_short(j)}")
            items = [value_from_json(elem, x, f"{path}[{i}]") for i, x in enumerate(j)]
            if isinstance(elem, Int):
                for i, x in enumerate(items):
                    if not INT64_MIN <= x <= INT64_MAX:
                        raise UsageError(f"{path}[{i}]: {_short_int(x)} is outside the range "
                                         f"of an element of {ty}: 64-bit integers, "
                                         f"-2**63 .. 2**63-1")
            return make_array(elem, items)
        case Fun():
            raise UsageError(f"{path}: a function ({ty}) cannot be given as JSON")
    raise UsageError(f"{path}: unsupported type {ty}")


def _injection(j, path, ty):
    if not isinstance(j, dict) or len(j) != 1 or next(iter(j)) not in ("inl", "inr"):
        raise UsageError(f'{path}: expected {{"inl": ...}} or {{"inr": ...}} ({ty}), got {_short(j)}')
    key = next(iter(j))
    return (0 if key == "inl" else 1), j[key]


def _int64_array(j):
    """A new int64 array of j's elements when j is a 1-D numpy array of
    integers or a list of ints, all within int64; else None (the general
    path then decodes j, or reports the element that is not so)."""
    if type(j) is np.ndarray:
        if j.ndim != 1 or j.dtype.kind not in "iu":
            return None
        if j.dtype.kind == "u" and j.dtype.itemsize == 8 and j.size and int(j.max()) > INT64_MAX:
            return None
        return j.astype(np.int64)
    if type(j) in (list, tuple) and all(type(x) is int for x in j):
        try:
            return np.array(j, dtype=np.int64)
        except OverflowError:
            return None
    return None


def make_array(elem: Type, items: list):
    """The array representation for elements of type elem."""
    if isinstance(elem, Real):
        return np.asarray(items, dtype=np.float64)
    if isinstance(elem, Int):
        try:
            return np.asarray(items, dtype=np.int64)
        except OverflowError:
            bad = next(x for x in items if not INT64_MIN <= x <= INT64_MAX)
            raise EvalError(f"an element of an Array Z is outside the 64-bit range "
                            f"-2**63 .. 2**63-1: {_short_int(bad)}") from None
    return tuple(items)


def value_to_json(ty: Type, v):
    """Encode a value of type ty as JSON-ready Python data."""
    match ty:
        case Real():
            return _float(v)
        case Int():
            return _int_out(int(v))
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


def _int_out(n: int) -> int:
    """n, if it can be written: an int beyond Python's int/str limit cannot."""
    if n.bit_length() > 14_000:  # 4300 decimal digits is about 14,284 bits
        try:
            str(n)
        except ValueError:
            raise EvalError(f"the result holds an integer of about {int(n.bit_length() * 0.30103)} "
                            f"digits, more than the {sys.get_int_max_str_digits()} that "
                            "can be written") from None
    return n


def _float(x) -> float | str:
    """A real for JSON: itself if finite, else "inf", "-inf" or "nan"."""
    x = float(x)
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


# ----------------------------------------------------------------- reading and writing


def parse_json(text: str, what: str):
    """Read the JSON `text` given as `what` (e.g. "--args") under the policy above.

    Runs on a big stack (chad.deep): a deeply nested text is read, never a crash."""
    def constant(name):
        raise UsageError(f"{what}: {name} is not JSON; write a non-finite real as one of "
                         f"the strings {NONFINITE_TEXT}")

    def parse_float(s):
        x = float(s)
        return OutOfRange(s) if math.isinf(x) else x

    def parse_int(s):
        try:
            return int(s)
        except ValueError:  # more digits than Python converts
            return OutOfRange(s, is_int=True)

    try:
        return run_deep(json.loads, text, parse_float=parse_float, parse_int=parse_int,
                        parse_constant=constant)
    except json.JSONDecodeError as e:
        raise UsageError(f"{what}: not valid JSON ({e.msg} at position {e.pos}): "
                         f"{_clip(text)}") from None
    except RecursionError:
        raise UsageError(f"{what}: nested too deeply") from None


def dumps(obj) -> str:
    """Strict JSON text of obj: a non-finite float anywhere in it is written as
    "inf", "-inf" or "nan", never as NaN / Infinity."""
    def write():
        try:
            return json.dumps(obj, allow_nan=False)
        except ValueError:  # a non-finite float (values and gradients have none: _float)
            return json.dumps(_finite_json(obj), allow_nan=False)

    return run_deep(write)


def _finite_json(obj):
    if isinstance(obj, float):
        return _float(obj)
    if isinstance(obj, dict):
        return {k: _finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite_json(v) for v in obj]
    return obj


def _clip(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit - 3] + "...")


def _short_int(n: int) -> str:
    """An int for a message: its digits, or its size if it has too many."""
    if n.bit_length() <= 100:
        return str(n)
    if n.bit_length() <= 14_000:  # str() works below 4300 digits
        s = str(n)
        return f"{s[:12]}...({len(s.lstrip('-'))} digits)"
    return f"(an integer of about {int(n.bit_length() * 0.30103)} digits)"


def _short(j, limit: int = 40) -> str:
    """A JSON-ish rendering of j for a message, at most `limit` characters; it looks
    only at what it shows, so a huge or deeply nested value costs nothing."""
    out: list[str] = []
    _render(j, out, limit + 1)
    s = "".join(out)
    return s if len(s) <= limit else s[:limit - 3] + "..."


def _render(j, out: list[str], budget: int) -> int:
    if budget <= 0:
        return budget
    if isinstance(j, np.ndarray):
        j = j.tolist() if j.size <= budget else list(j[:budget])
    if isinstance(j, np.generic):
        j = j.item()
    if isinstance(j, (list, tuple, dict)):
        items = iter(j.items()) if isinstance(j, dict) else j
        out.append("{" if isinstance(j, dict) else "[")
        budget -= 1
        for i, x in enumerate(items):
            if budget <= 0:
                return budget
            if i:
                out.append(", ")
                budget -= 2
            if isinstance(j, dict):
                budget = _render(x[0], out, budget)
                out.append(": ")
                budget = _render(x[1], out, budget - 2)
            else:
                budget = _render(x, out, budget)
        out.append("}" if isinstance(j, dict) else "]")
        return budget - 1
    if isinstance(j, OutOfRange):
        s = j.text if len(j.text) <= 60 else j.text[:20] + "..."
    elif isinstance(j, bool) or j is None or isinstance(j, str):
        s = json.dumps(j if not isinstance(j, str) or len(j) <= budget else j[:budget])
    elif isinstance(j, int):
        s = _short_int(j)
    elif isinstance(j, float):
        s = json.dumps(_float(j))
    else:
        s = f"<{type(j).__name__}>"
    out.append(s)
    return budget - len(s)
