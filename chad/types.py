"""Source types of the language (docs/language.md, "Types").

    T ::= R | Z | () | T * T | T + T | Array T | T -> T | Bool

`Bool` is an alias for `() + ()` (true = inl (), false = inr ()).
Types are immutable attrs classes so they can be compared, hashed and matched.
Printing follows the surface grammar: `*` binds tighter than `+`, `+` tighter than
`->`; `*` and `+` associate to the right (as `->` does), so `A * B * C` is
`A * (B * C)`; a left-nested product prints with parentheses.
"""

from __future__ import annotations

from attrs import frozen


class Type:
    """Base class of source types."""

    __slots__ = ()

    def __str__(self) -> str:
        return show_type(self)


@frozen
class Real(Type):
    pass


@frozen
class Int(Type):
    pass


@frozen
class UnitT(Type):
    pass


@frozen
class Prod(Type):
    left: Type
    right: Type


@frozen
class Sum(Type):
    left: Type
    right: Type


@frozen
class ArrayT(Type):
    elem: Type


@frozen
class Fun(Type):
    arg: Type
    res: Type


R = Real()
Z = Int()
UNIT = UnitT()
BOOL = Sum(UNIT, UNIT)

# Precedence levels used by the printer: higher binds tighter.
_PREC_FUN, _PREC_SUM, _PREC_PROD, _PREC_APP = 0, 1, 2, 3


def show_type(t: Type, prec: int = _PREC_FUN) -> str:
    """Surface syntax of a type, parenthesised only where needed."""
    match t:
        case Real():
            return "R"
        case Int():
            return "Z"
        case UnitT():
            return "()"
        case ArrayT(elem):
            return _paren(prec > _PREC_PROD, "Array " + show_type(elem, _PREC_APP))
        case Prod(a, b):
            s = show_type(a, _PREC_PROD + 1) + " * " + show_type(b, _PREC_PROD)
            return _paren(prec > _PREC_PROD, s)
        case Sum(a, b):
            s = show_type(a, _PREC_SUM + 1) + " + " + show_type(b, _PREC_SUM)
            return _paren(prec > _PREC_SUM, s)
        case Fun(a, b):
            s = show_type(a, _PREC_FUN + 1) + " -> " + show_type(b, _PREC_FUN)
            return _paren(prec > _PREC_FUN, s)
    raise TypeError(f"not a type: {t!r}")


def _paren(cond: bool, s: str) -> str:
    return f"({s})" if cond else s


def is_first_order(t: Type) -> bool:
    """True when no function type occurs in `t`."""
    match t:
        case Fun():
            return False
        case Prod(a, b) | Sum(a, b):
            return is_first_order(a) and is_first_order(b)
        case ArrayT(e):
            return is_first_order(e)
    return True


def holds_array(t: Type) -> bool:
    """True when a value of `t` may contain an array (or a function, which may
    capture one)."""
    match t:
        case ArrayT() | Fun():
            return True
        case Prod(a, b) | Sum(a, b):
            return holds_array(a) or holds_array(b)
    return False
