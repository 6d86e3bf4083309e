"""The translated expression (`Ex`: chad text as position-tagged fragments
and its front-end type), a callee's `Signature`, and chad literals written
from Python numbers through repr only."""

from __future__ import annotations

import ast
import itertools
import math

from attrs import frozen

from .emit import Frag

MACRO_IDS = itertools.count(1)  # one per lambda or nested def (scope.Macro.uid)


@frozen
class Ex:
    frag: object  # Frag or str
    ty: object
    lit: int | None = None  # the value of an int literal (to write it as a real)
    parts: tuple | None = None  # the components of a tuple expression


@frozen
class Signature:
    """A decorated function as a callee: its def name, parameters and result."""

    name: str
    params: tuple  # (python name, type)
    result: object


def real_literal(x: float) -> str:
    """The chad text of a float (from repr only)."""
    x = float(x)
    if math.isnan(x):
        return "(0.0 / 0.0)"
    if math.isinf(x):
        return "(1.0 / 0.0)" if x > 0 else "((- 1.0) / 0.0)"
    text = repr(abs(x))
    if "." not in text and "e" not in text:  # (repr of a float always has one)
        text += ".0"
    return f"(- {text})" if math.copysign(1.0, x) < 0 else text


def int_literal(n: int) -> str:
    n = int(n)
    return f"(- {abs(n)!r})" if n < 0 else repr(n)


def atomic(frag) -> bool:
    """frag is a name or an unsigned literal (safe to repeat)."""
    while isinstance(frag, Frag) and len(frag.parts) == 1:
        frag = frag.parts[0]
    return isinstance(frag, str) and frag[:1] not in ("(", "[", "-", "") and " " not in frag


def int_constant(node) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        k = int_constant(node.operand)
        return -k if k is not None else None
    return None
