"""Types from Python annotations: `float` is R, `int` is Z, `bool` is Bool,
`tuple[A, B, ...]` nested pairs `A * (B * ...)`, `chad.Array[T]` (or
`list[T]`) `Array T`; `chad.Array[chad.Array[float]]` is a nested array.

Annotations are read from the ast of the `def` and resolved as names (never
evaluated as strings), so `from __future__ import annotations` makes no
difference.
"""

from __future__ import annotations

import ast

from attrs import frozen

from chad.types import BOOL, ArrayT, Prod, R, Type, Z

from .errors import UnsupportedError

_HINT = ("annotate with float, int, bool, tuple[...] or chad.Array[T] "
         "(a 1-D array of T; nest for more dimensions)")


@frozen
class TupleT:
    """A Python tuple type (n >= 2 components): in chad, nested pairs
    `A * (B * ...)`. Kept apart from a pair whose second component is a tuple,
    so that `a, b, c = t` and `t[2]` know the tuple's length."""

    elems: tuple


def chad_type(t) -> Type:
    """The chad type of a front-end type."""
    if isinstance(t, TupleT):
        out = chad_type(t.elems[-1])
        for e in reversed(t.elems[:-1]):
            out = Prod(chad_type(e), out)
        return out
    if isinstance(t, ArrayT):
        return ArrayT(chad_type(t.elem))
    return t


def python_name(t) -> str:
    """How a front-end type is written in Python."""
    if t == R:
        return "float"
    if t == Z:
        return "int"
    if t == BOOL:
        return "bool"
    if isinstance(t, TupleT):
        return "tuple[" + ", ".join(python_name(e) for e in t.elems) + "]"
    if isinstance(t, ArrayT):
        return f"chad.Array[{python_name(t.elem)}]"
    return str(t)


def from_chad(t: Type):
    """The front-end type of a chad type (a pair is a 2-tuple)."""
    if isinstance(t, Prod):
        return TupleT((from_chad(t.left), from_chad(t.right)))
    if isinstance(t, ArrayT):
        return ArrayT(from_chad(t.elem))
    return t


class Array:
    """`chad.Array[T]`: the annotation of a 1-D array of T (numpy arrays and lists
    are accepted at call time); `chad.Array[chad.Array[float]]` is 2-D."""

    def __class_getitem__(cls, item):
        return _ArrayOf(item)


class _ArrayOf:
    __slots__ = ("elem",)

    def __init__(self, elem):
        self.elem = elem

    def __repr__(self) -> str:
        return f"chad.Array[{getattr(self.elem, '__name__', self.elem)!s}]"


def annotation_type(node: ast.expr | None, resolve, loc, what: str) -> Type:
    """The chad type of the annotation `node` (`resolve` maps an ast Name or
    Attribute to the Python object it names, or raises)."""
    if node is None:
        raise UnsupportedError(f"{what} has no type annotation: {_HINT}", loc(None))
    return _type(node, resolve, loc, what)


def _from_object(obj):
    """The type a Python annotation object denotes (float, tuple[float, int],
    chad.Array[float], ...), or None."""
    if obj is float:
        return R
    if obj is int:
        return Z
    if obj is bool:
        return BOOL
    if isinstance(obj, _ArrayOf):
        elem = _from_object(obj.elem)
        return ArrayT(elem) if elem is not None else None
    origin, args = getattr(obj, "__origin__", None), getattr(obj, "__args__", None)
    if origin is None or not args:
        return None
    parts = [_from_object(a) for a in args]
    if any(p is None for p in parts):
        return None
    if origin is tuple and len(parts) >= 2:
        return TupleT(tuple(parts))
    if origin is list and len(parts) == 1:
        return ArrayT(parts[0])
    return None


def _type(node: ast.expr, resolve, loc, what: str) -> Type:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            raise UnsupportedError(f"{what}: the annotation {node.value!r} is not a type: {_HINT}",
                                   loc(node)) from None
    if isinstance(node, (ast.Name, ast.Attribute)):
        obj = resolve(node)
        alias = _from_object(obj)  # a type alias: Vec = tuple[float, float, float]
        if alias is not None:
            return alias
        if obj is float:
            return R
        if obj is int:
            return Z
        if obj is bool:
            return BOOL
        if obj is Array or obj is list or obj is tuple:
            raise UnsupportedError(f"{what}: {ast.unparse(node)} needs its element types, "
                                   "e.g. chad.Array[float] or tuple[float, int]", loc(node))
    if isinstance(node, ast.Subscript):
        head = resolve(node.value) if isinstance(node.value, (ast.Name, ast.Attribute)) else None
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head is Array or head is list:
            if len(args) != 1:
                raise UnsupportedError(f"{what}: an array has one element type, e.g. "
                                       "chad.Array[float]", loc(node))
            return ArrayT(_type(args[0], resolve, loc, what))
        if head is tuple:
            if len(args) < 2 or any(isinstance(a, ast.Constant) and a.value is Ellipsis
                                    for a in args):
                raise UnsupportedError(f"{what}: a tuple type needs at least two fixed "
                                       "element types, e.g. tuple[float, float]", loc(node))
            return TupleT(tuple(_type(a, resolve, loc, what) for a in args))
    raise UnsupportedError(f"{what}: the annotation {ast.unparse(node)} is not supported: {_HINT}",
                           loc(node))
