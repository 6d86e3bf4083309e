"""The code of call plans (plans.py): a `Writer` of generated Python, and, per
front-end type, the statements that convert one value between Python and the
compiled backend's representation: arguments in, values out, gradients out
(from the sparse cotangent cells), cotangents in, and forward mode's tangents
in and out.

The representation is the one the text API builds (chad/values.py
`value_from_json`, chad/cotangents.py `ctg_from_json` and `densify`,
chad/tangents.py, after the front end's chad/frontend/values.py), with the same
result bit for bit: a float argument is the float, a tuple nested pairs,
`chad.Array[float]` a copy of the float64 array, `chad.Array[chad.Array[float]]`
a tuple of row copies; a gradient or a result in nested pairs is read into a
flat tuple. Only the exact types are read inline (a float, an int, a bool, a
tuple or list of the right length, a 1-D or 2-D float64 numpy array); any
other value at a position (an int for a float, a list for an array, ...) is
converted there by the general converters, and types without an inline form
(arrays of ints or of tuples, ...) always are. A general converter may raise:
the plan then takes its general path (plans.py).

Each function emits statements into the Writer and returns the expression of
the converted value; generated code names only generated identifiers (`t3`,
`_k5`) and reprs of ints, every object it uses is a constant of the Writer's
namespace. The convention is the compiled backend's (docs/compiler.md); no
paper section is followed here.
"""

from __future__ import annotations

import threading
import types
from contextlib import contextmanager

import numpy as np

from chad.cotangents import ctg_from_json, densify
from chad.tangents import discrete, tangent_from_user, tangent_to_user
from chad.types import BOOL, ArrayT, R, Z
from chad.values import FALSE, TRUE, value_from_json

from .annotations import TupleT, chad_type
from .values import cotangent_encoder, decoder, encoder, tangent_encoder

F64 = np.dtype(np.float64)


class Writer:
    """The source of one generated function and the namespace of its constants."""

    def __init__(self) -> None:
        self.ns: dict = {"_ndarray": np.ndarray, "_f64": F64, "_TRUE": TRUE, "_FALSE": FALSE}
        self.lines: list[str] = []
        self.depth = 0
        self.count = 0

    def const(self, obj) -> str:
        name = f"_k{len(self.ns)}"
        self.ns[name] = obj
        return name

    def tmp(self) -> str:
        self.count += 1
        return f"t{self.count}"

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    @contextmanager
    def block(self, head: str):
        self.emit(head)
        self.depth += 1
        yield
        self.depth -= 1

    def function(self, name: str):
        """Compile the source (once per source text: it depends on the types
        alone); the function called name, run in this namespace."""
        source = "\n".join(self.lines) + "\n"
        with _LOCK:
            code = _CODE.get(source)
        if code is None:
            code = compile(source, "<chad call plan>", "exec")
            with _LOCK:
                if len(_CODE) >= CODE_CACHE:
                    _CODE.pop(next(iter(_CODE)))
                _CODE[source] = code
        exec(_fresh(code), self.ns)
        fn = self.ns[name]
        fn.source = source
        return fn


def _fresh(code: types.CodeType) -> types.CodeType:
    """A copy of code and of the functions' code in it: plans share compiled
    code but not code objects, whose specialised instructions (CPython's
    adaptive interpreter) would otherwise alternate between the plans'
    namespaces (a hot loop calling two plans of one signature ran 1.5 times
    slower)."""
    return code.replace(co_consts=tuple(_fresh(c) if isinstance(c, types.CodeType) else c
                                        for c in code.co_consts))


CODE_CACHE = 256
_CODE: dict[str, object] = {}  # source -> its code object (oldest first)
_LOCK = threading.Lock()


def _unpack(w: Writer, v: str, n: int) -> list[str]:
    """Names for the n components of the nested pairs v = (c0, (c1, ... cn-1))."""
    names = [w.tmp() for _ in range(n)]
    rest = v
    for k in range(n - 2):
        nxt = w.tmp()
        w.emit(f"{names[k]}, {nxt} = {rest}")
        rest = nxt
    w.emit(f"{names[-2]}, {names[-1]} = {rest}")
    return names


def _pairs(exprs: list[str]) -> str:
    out = exprs[-1]
    for e in reversed(exprs[:-1]):
        out = f"({e}, {out})"
    return out


def _needs_primal(ty) -> bool:
    """Whether converting a cotangent or gradient of ty reads the primal value."""
    if ty in (R, Z, BOOL):
        return False
    if isinstance(ty, TupleT):
        return any(_needs_primal(e) for e in ty.elems)
    return True


# ------------------------------------------------------------------ arguments in

def _argument_general(ty):
    """A Python value of type ty -> its compiled value, the general way."""
    enc, cty = encoder(ty), chad_type(ty)
    return lambda v: value_from_json(cty, enc(v, "argument"), "args")


def argument(w: Writer, ty, v: str) -> str:
    """Statements converting the Python value named v; the compiled value's expression."""
    general = w.const(_argument_general(ty))
    if ty == R or ty == Z:
        exact = "float" if ty == R else "int"
        with w.block(f"if type({v}) is not {exact}:"):
            w.emit(f"{v} = {general}({v})")
        return v
    t = w.tmp()
    if ty == BOOL:
        with w.block(f"if {v} is True:"):
            w.emit(f"{t} = _TRUE")
        with w.block(f"elif {v} is False:"):
            w.emit(f"{t} = _FALSE")
    elif isinstance(ty, TupleT):
        n = len(ty.elems)
        with w.block(f"if (type({v}) is tuple or type({v}) is list) and len({v}) == {n}:"):
            names = [w.tmp() for _ in range(n)]
            w.emit(f"{', '.join(names)} = {v}")
            parts = [argument(w, e, x) for e, x in zip(ty.elems, names)]
            w.emit(f"{t} = {_pairs(parts)}")
    elif ty == ArrayT(R):
        with w.block(f"if type({v}) is _ndarray and {v}.ndim == 1 and {v}.dtype == _f64:"):
            w.emit(f"{t} = {v}.copy()")
    elif ty == ArrayT(ArrayT(R)):
        row = w.tmp()
        with w.block(f"if type({v}) is _ndarray and {v}.ndim == 2 and {v}.dtype == _f64:"):
            w.emit(f"{t} = tuple([{row}.copy() for {row} in {v}])")
    else:
        w.emit(f"{t} = {general}({v})")
        return t
    with w.block("else:"):
        w.emit(f"{t} = {general}({v})")
    return t


# ------------------------------------------------------------------ values out

def value(w: Writer, ty, v: str, gradient: bool = False) -> str:
    """Statements converting the compiled value named v (a name this may rebind)
    to the Python value (chad/frontend/values.py `decoder`); its expression."""
    if gradient and (ty in (Z, BOOL) or (isinstance(ty, ArrayT) and ty.elem in (Z, BOOL))):
        return "None"
    general = w.const(decoder(ty, gradient))
    if ty == R or ty == Z:
        exact = "float" if ty == R else "int"
        with w.block(f"if type({v}) is not {exact}:"):
            w.emit(f"{v} = {general}({v})")
        return v
    if ty == ArrayT(R):
        with w.block(f"if type({v}) is not _ndarray or {v}.dtype != _f64:"):
            w.emit(f"{v} = {general}({v})")
        return v
    if isinstance(ty, TupleT):
        t = w.tmp()

        def read():
            names = _unpack(w, v, len(ty.elems))
            parts = [value(w, e, x, gradient) for e, x in zip(ty.elems, names)]
            w.emit(f"{t} = ({', '.join(parts)},)")

        if not gradient:
            read()
            return t
        with w.block(f"if {v} is None:"):  # (a gradient may be the sparse zero)
            w.emit(f"{t} = {general}({v})")
        with w.block("else:"):
            read()
        return t
    return f"{general}({v})"


def _gradient_general(ty):
    """(primal value, sparse cotangent cell) -> the gradient as Python gives it."""
    cty, dec = chad_type(ty), decoder(ty, gradient=True)
    return lambda p, c: dec(densify(cty, p, c))


def gradient(w: Writer, ty, c: str, p: str) -> str:
    """Statements converting the sparse cotangent cell c of an argument whose
    compiled value is p to the dense gradient in the argument's shape (densify,
    then the front end's decoder); its expression."""
    if ty in (Z, BOOL) or (isinstance(ty, ArrayT) and ty.elem in (Z, BOOL)):
        return "None"
    general = w.const(_gradient_general(ty))
    if ty == R:
        with w.block(f"if type({c}) is not float:"):
            w.emit(f"{c} = {general}(None, {c})")
        return c
    if isinstance(ty, TupleT):
        t = w.tmp()
        with w.block(f"if {c} is None:"):
            w.emit(f"{t} = {general}({p}, {c})")
        with w.block("else:"):
            n = len(ty.elems)
            cells = _unpack(w, c, n)
            prims = _unpack(w, p, n) if _needs_primal(ty) else [None] * n
            parts = [gradient(w, e, x, q) for e, x, q in zip(ty.elems, cells, prims)]
            w.emit(f"{t} = ({', '.join(parts)},)")
        return t
    return f"{general}({p}, {c})"


# ------------------------------------------------------------------ cotangents in

def _cotangent_general(ty):
    """(Python cotangent, primal value) -> the compiled (sparse) cotangent."""
    enc, cty = cotangent_encoder(ty), chad_type(ty)
    return lambda c, p: ctg_from_json(cty, enc(c, "cotangent"), "ctg", p)


def cotangent(w: Writer, ty, c: str, p: str) -> str:
    """Statements converting the Python cotangent c of a result whose compiled
    value is p; the compiled cotangent's expression."""
    if ty in (Z, BOOL):
        return "None"
    general = w.const(_cotangent_general(ty))
    if ty == R:
        with w.block(f"if type({c}) is not float:"):
            w.emit(f"{c} = {general}({c}, None)")
        return c
    if isinstance(ty, TupleT):
        t, n = w.tmp(), len(ty.elems)
        with w.block(f"if {c} is None:"):
            w.emit(f"{t} = None")
        with w.block(f"elif (type({c}) is tuple or type({c}) is list) and len({c}) == {n}:"):
            names = [w.tmp() for _ in range(n)]
            w.emit(f"{', '.join(names)} = {c}")
            prims = _unpack(w, p, n) if _needs_primal(ty) else [None] * n
            parts = [cotangent(w, e, x, q) for e, x, q in zip(ty.elems, names, prims)]
            w.emit(f"{t} = {_pairs(parts)}")
        with w.block("else:"):
            w.emit(f"{t} = {general}({c}, {p})")
        return t
    return f"{general}({c}, {p})"


# ------------------------------------------------------------------ tangents (forward mode)

def _tangent_general(ty):
    """(Python tangent, the argument's compiled value) -> the compiled tangent
    (the front end's tangent encoder, then chad/tangents.py's)."""
    enc, cty = tangent_encoder(ty), chad_type(ty)
    return lambda d, p: tangent_from_user(cty, p, enc(d, "tangents"), "tangents")


def tangent(w: Writer, ty, d: str, p: str) -> str:
    """Statements converting the Python tangent d of an argument whose compiled
    value is p; the compiled tangent's expression."""
    general = w.const(_tangent_general(ty))
    t = w.tmp()
    if ty == R:
        with w.block(f"if type({d}) is not float:"):
            w.emit(f"{d} = {general}({d}, {p})")
        return d
    if ty in (Z, BOOL):  # no real: the tangent is None (given as None)
        with w.block(f"if {d} is not None:"):
            w.emit(f"{d} = {general}({d}, {p})")
        return "None"
    if isinstance(ty, TupleT) and not discrete(chad_type(ty)):
        n = len(ty.elems)
        with w.block(f"if (type({d}) is tuple or type({d}) is list) and len({d}) == {n}:"):
            names = [w.tmp() for _ in range(n)]
            w.emit(f"{', '.join(names)} = {d}")
            prims = _unpack(w, p, n) if _needs_primal(ty) else [None] * n
            parts = [tangent(w, e, x, q) for e, x, q in zip(ty.elems, names, prims)]
            w.emit(f"{t} = {_pairs(parts)}")
    elif ty == ArrayT(R):
        with w.block(f"if type({d}) is _ndarray and {d}.ndim == 1 and {d}.dtype == _f64 "
                     f"and len({d}) == len({p}):"):
            w.emit(f"{t} = {d}.copy()")
    else:
        w.emit(f"{t} = {general}({d}, {p})")
        return t
    with w.block("else:"):
        w.emit(f"{t} = {general}({d}, {p})")
    return t


def _tangent_out_general(ty):
    """(the result's compiled value, its compiled tangent) -> the Python tangent."""
    cty, dec = chad_type(ty), decoder(ty, gradient=True)
    return lambda v, t: dec(tangent_to_user(cty, v, t))


def tangent_out(w: Writer, ty, t: str, v: str) -> str:
    """Statements converting the compiled tangent t of a result whose compiled
    value is v to the Python tangent; its expression."""
    if ty in (Z, BOOL):
        return "None"
    general = w.const(_tangent_out_general(ty))
    if ty == R:
        with w.block(f"if type({t}) is not float:"):
            w.emit(f"{t} = {general}({v}, {t})")
        return t
    if ty == ArrayT(R):
        with w.block(f"if type({t}) is not _ndarray or {t}.dtype != _f64:"):
            w.emit(f"{t} = {general}({v}, {t})")
        return t
    if isinstance(ty, TupleT) and not discrete(chad_type(ty)):
        n = len(ty.elems)
        tans = _unpack(w, t, n)
        vals = _unpack(w, v, n) if _needs_primal(ty) else [None] * n
        parts = [tangent_out(w, e, x, q) for e, x, q in zip(ty.elems, tans, vals)]
        return f"({', '.join(parts)},)"
    return f"{general}({v}, {t})"
