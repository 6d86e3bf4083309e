"""Python values in and out of chad functions, by the front-end type.

In: a float parameter takes a Python or numpy number, an int one an integer (not
a float), a bool one a bool, a tuple one a tuple or list of the right length,
`chad.Array[float]` a 1-D numpy array (or a list) of numbers,
`chad.Array[chad.Array[float]]` a 2-D array (or a list of rows). Anything else
is a `UsageError` naming the argument and what was expected.

Out: float, int, bool, tuples as Python tuples, arrays as numpy arrays (an
array of equal-length arrays as a 2-D array). Gradients take the same shapes
(an int's gradient is None); cotangents are given in the result's shape.

Each converter is built once per type (closures), so a call pays only the checks.
"""

from __future__ import annotations

import numpy as np

from chad.errors import UsageError
from chad.tangents import discrete as no_float
from chad.types import BOOL, ArrayT, R, Z
from chad.values import FALSE, TRUE, Inj

from .annotations import TupleT, chad_type, python_name


def describe(v) -> str:
    if isinstance(v, np.ndarray):
        return f"a numpy array of shape {v.shape} and dtype {v.dtype}"
    if isinstance(v, (list, tuple)):
        return f"a {type(v).__name__} of length {len(v)}"
    return f"{type(v).__name__} {v!r}"[:80]


def _text(path) -> str:
    """A path as text: a string, or (parent path, index) built lazily, so that a
    call formats no path unless it fails."""
    if isinstance(path, str):
        return path
    parts = []
    while not isinstance(path, str):
        path, k = path
        parts.append(f"[{k}]")
    return path + "".join(reversed(parts))


def _bad(path, ty, v):
    raise UsageError(f"{_text(path)}: expected {python_name(ty)}, got {describe(v)}")


def _nested_pairs(ty, parts):
    """A Python tuple of len(parts) elements -> chad's nested pairs (a, (b, c)),
    each element converted by its part."""
    n = len(parts)

    def tup(v, path):
        if not isinstance(v, (tuple, list)) or len(v) != n:
            _bad(path, ty, v)
        out = parts[-1](v[-1], (path, n - 1))
        for k in range(n - 2, -1, -1):
            out = (parts[k](v[k], (path, k)), out)
        return out
    return tup


def encoder(ty):
    """value, path -> the chad value (what chad.api's decoders take)."""
    if ty == R:
        def real(v, path):
            if type(v) is float:
                return v
            if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(
                    v, (bool, np.bool_)):
                try:
                    return float(v)
                except OverflowError:
                    raise UsageError(f"{_text(path)}: the number {v} is too large for a float") from None
            if isinstance(v, np.ndarray) and v.shape == () and v.dtype.kind in "fiu":
                return float(v)
            _bad(path, ty, v)
        return real
    if ty == Z:
        def integer(v, path):
            if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
                return int(v)
            _bad(path, ty, v)
        return integer
    if ty == BOOL:
        def boolean(v, path):
            if isinstance(v, (bool, np.bool_)):
                return TRUE if v else FALSE
            _bad(path, ty, v)
        return boolean
    if isinstance(ty, TupleT):
        return _nested_pairs(ty, [encoder(e) for e in ty.elems])
    if isinstance(ty, ArrayT):
        elem = ty.elem
        if elem in (R, Z):
            kinds, dtype = ("fiu", np.float64) if elem == R else ("iu", np.int64)

            def flat(v, path):
                if type(v) is np.ndarray and v.ndim == 1 and v.dtype == dtype:
                    return v
                if isinstance(v, np.ndarray):
                    if v.ndim != 1 or v.dtype.kind not in kinds:
                        _bad(path, ty, v)
                    return v.astype(dtype)
                if isinstance(v, (list, tuple)):
                    one = encoder(elem)
                    items = [one(x, (path, i)) for i, x in enumerate(v)]
                    try:
                        return np.array(items, dtype=dtype)
                    except OverflowError:
                        raise UsageError(f"{_text(path)}: an element is outside the 64-bit range of "
                                         "an array of ints") from None
                _bad(path, ty, v)
            return flat
        inner = encoder(elem)

        def nested(v, path):
            if not isinstance(v, (np.ndarray, list, tuple)) or (
                    isinstance(v, np.ndarray) and v.ndim < 1):
                _bad(path, ty, v)
            return [inner(x, (path, i)) for i, x in enumerate(v)]
        return nested
    raise AssertionError(ty)


def decoder(ty, gradient: bool = False):
    """chad value -> Python value (gradient=True: an int's or bool's is None)."""
    if ty == R:
        return float
    if ty == Z:
        return (lambda v: None) if gradient else int
    if ty == BOOL:
        return (lambda v: None) if gradient else (
            lambda v: v.side == 0 if isinstance(v, Inj) else bool(v))
    if isinstance(ty, TupleT):
        parts = [decoder(e, gradient) for e in ty.elems]
        n = len(parts)

        def tup(v):
            out = []
            for k in range(n - 1):
                if v is None:
                    out.append(parts[k](None))
                    continue
                out.append(parts[k](v[0]))
                v = v[1]
            out.append(parts[-1](v))
            return tuple(out)
        return tup
    if isinstance(ty, ArrayT):
        if ty.elem == R:
            return lambda v: np.asarray(v, dtype=np.float64)
        if ty.elem in (Z, BOOL):
            if gradient:
                return lambda v: None
            if ty.elem == Z:
                return lambda v: np.asarray(v, dtype=np.int64)
            one = decoder(BOOL)
            return lambda v: np.array([one(x) for x in v], dtype=bool)
        inner = decoder(ty.elem, gradient)

        def nested(v):
            parts = [inner(x) for x in v]
            if parts and all(isinstance(p, np.ndarray) for p in parts) and len(
                    {p.shape for p in parts}) == 1:
                return np.stack(parts)
            return parts
        return nested
    raise AssertionError(ty)


def cotangent_encoder(ty):
    """A cotangent in the result's Python shape -> chad's (None: zero)."""
    if ty == R:
        one = encoder(R)

        def real(v, path):
            if v is None:
                return 0.0
            return one(v, path)
        return real
    if ty in (Z, BOOL):
        return lambda v, path: None
    if isinstance(ty, TupleT):
        nest = _nested_pairs(ty, [cotangent_encoder(e) for e in ty.elems])
        return lambda v, path: None if v is None else nest(v, path)
    if isinstance(ty, ArrayT):
        if ty.elem in (Z, BOOL):
            return lambda v, path: None
        enc = encoder(ty) if ty.elem == R else None
        inner = cotangent_encoder(ty.elem)

        def arr(v, path):
            if v is None:
                return None
            if enc is not None:
                return enc(v, path)
            if not isinstance(v, (np.ndarray, list, tuple)):
                _bad(path, ty, v)
            return [inner(x, (path, i)) for i, x in enumerate(v)]
        return arr
    raise AssertionError(ty)


def tangent_encoder(ty):
    """A tangent in the argument's Python shape -> the shape forward mode reads
    (chad/tangents.py): nested pairs for a tuple, and None for a tail of the
    nesting with no float in it (the tangent of (x, m, n) with ints m, n is
    (t, None), not (t, (None, None))); None for an int or a bool (a tangent
    with no real in it) and, for a float, the zero tangent."""
    if ty == R:
        one = encoder(R)

        def real(v, path):
            return 0.0 if v is None else one(v, path)
        return real
    if ty in (Z, BOOL):
        def discrete(v, path):
            if v is not None:
                raise UsageError(f"{_text(path)}: the tangent of {python_name(ty)} is None (it has no float), "
                                 f"got {describe(v)}")
            return None
        return discrete
    if isinstance(ty, TupleT):
        parts = [tangent_encoder(e) for e in ty.elems]
        n = len(parts)
        # a tail (b, (c, ...)) with no float in it has the tangent None, not a pair
        no_real = [no_float(chad_type(TupleT(ty.elems[k:]))) for k in range(n - 1)]

        def tup(v, path):
            if v is None:
                v = (None,) * n
            if not isinstance(v, (tuple, list)) or len(v) != n:
                _bad(path, ty, v)
            out = parts[-1](v[-1], (path, n - 1))
            for k in range(n - 2, -1, -1):
                head = parts[k](v[k], (path, k))
                out = None if no_real[k] else (head, out)
            return out
        return tup
    if isinstance(ty, ArrayT):
        if ty.elem in (Z, BOOL):
            return tangent_encoder(ty.elem)
        if ty.elem == R:
            return encoder(ty)
        inner = tangent_encoder(ty.elem)

        def arr(v, path):
            if not isinstance(v, (np.ndarray, list, tuple)):
                _bad(path, ty, v)
            return [inner(x, (path, i)) for i, x in enumerate(v)]
        return arr
    raise AssertionError(ty)
