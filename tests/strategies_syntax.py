"""Hypothesis strategies for the syntax: types, and core terms of the shapes that the
surface language can express (everything the parser can produce).

    types()                    source types
    surface_terms(defs=...)    core terms; `Call` only to the names in `defs`
    surface_programs()         programs whose defs call only defs above them

The names of variables (NAMES) and of defs (DEF_NAMES) are disjoint, so no local
variable shadows a def (a shadowed def cannot be called, so `Call` under such a
binder has no surface syntax). NAMES includes `p_1`, `p_2`: the names the parser
uses for desugaring, to exercise the printer's choice of sugar.

Not generated (no surface syntax): resolved operators (IADD, ...), negative or
non-finite literal constants, lambdas with `captures`, target-language nodes.
"""

from __future__ import annotations

import functools

from hypothesis import strategies as st

from chad.terms import (Ann, App, Build, Call, Case, Def, Fold, Fst, Index, Inl, Inr, Lam,
                        Length, Let, MapA, Pair, Param, Prim, Program, Snd, Unit, Var)
from chad.types import BOOL, R, UNIT, Z, ArrayT, Fun, Prod, Sum

NAMES = ("x", "y", "z", "acc", "x'", "_t", "v2", "p_1", "p_2")
DEF_NAMES = ("g", "h", "main", "k'")
BINARY_OPS = ("ADD", "MUL", "DIV", "LT", "LE", "GT", "GE", "EQ", "POW", "AND", "OR",
              "MAX", "MIN", "IDIV", "IMOD")
UNARY_OPS = ("SIGN", "EXP", "LOG", "SIN", "COS", "TANH", "SQRT", "TOREAL", "SUM", "ABS",
             "ATAN", "LOG1P", "NOT")

names = st.sampled_from(NAMES)

# Non-negative finite floats (literals are unsigned), with the interesting ones often.
literal_floats = st.one_of(
    st.sampled_from([0.0, 1.0, 0.5, 1e-300, 2.5e10, 5e-324, 1e16, 1.7976931348623157e308,
                     123456789.125, 0.1, 3e-7]),
    st.floats(min_value=0.0, allow_nan=False, allow_infinity=False).map(abs),
)
literal_ints = st.one_of(st.integers(0, 20), st.integers(0, 10**30))


_BASE_TYPES = st.sampled_from([R, Z, UNIT, BOOL])
_I = {k: st.integers(0, k) for k in range(1, 64)}  # pre-built: drawing is then cheap
_BOOLS = st.booleans()


def _type(draw, budget: list[int]):
    budget[0] -= 1
    if budget[0] <= 0 or draw(_I[2]) == 0:
        return draw(_BASE_TYPES)
    kind = draw(_I[3])
    if kind == 3:
        return ArrayT(_type(draw, budget))
    return (Prod, Sum, Fun)[kind](_type(draw, budget), _type(draw, budget))


def types(max_size: int = 6):
    """Source types with at most about max_size constructors."""
    size = st.integers(1, max_size)
    return st.composite(lambda draw: _type(draw, [draw(size)]))()


_TYPES4 = types(4)
_OPT_TYPES4 = st.none() | _TYPES4
_BINOPS = st.sampled_from(BINARY_OPS)
_UNOPS = st.sampled_from(UNARY_OPS)
_UNARY_NODES = st.sampled_from([Fst, Snd, Inl, Inr, Length])


# The forms of surface_terms, each a function (draw, sub) -> term, where sub() draws
# a sub-term.
def _binop(op, a, b):
    return Prim(op, Pair(a, b))


def _letpair(p, x, y, e, b):
    return Let(p, e, Let(x, Fst(Var(p)), Let(y, Snd(Var(p)), b)))


def _app_of(q, f):
    return App(f, Var(q))


def _name(draw):
    return draw(names)


_FORMS = [
    lambda d, s: Let(_name(d), s(), s()),
    lambda d, s: _binop(d(_BINOPS), s(), s()),
    lambda d, s: Prim("NEG", s()),
    lambda d, s: _binop("ADD", s(), Prim("NEG", s())),  # a - b
    lambda d, s: Prim(d(_UNOPS), s()),
    lambda d, s: Pair(s(), s()),
    lambda d, s: d(_UNARY_NODES)(s()),
    lambda d, s: Case(s(), _name(d), s(), _name(d), s()),
    lambda d, s: (lambda n: Case(s(), n, s(), n, s()))(_name(d)),  # if-shaped
    lambda d, s: Lam(_name(d), d(_OPT_TYPES4), s()),
    lambda d, s: App(s(), s()),
    lambda d, s: Ann(s(), d(_TYPES4)),
    lambda d, s: Index(s(), s()),
    lambda d, s: Build(s(), _name(d), s()),
    lambda d, s: (lambda q: Build(s(), q, _app_of(q, s())))(_name(d)),
    lambda d, s: Fold(_name(d), s(), s()),
    lambda d, s: (lambda q: Fold(q, _app_of(q, s()), s()))(_name(d)),
    lambda d, s: MapA(_name(d), s(), s()),
    lambda d, s: (lambda q: MapA(q, _app_of(q, s()), s()))(_name(d)),
    lambda d, s: _letpair(_name(d), _name(d), _name(d), s(), s()),
]
# Operators matter most for precedence and parentheses: draw them more often.
_WEIGHTS = [2, 6, 2, 3, 1, 1, 2, 1, 1, 2, 3, 1, 2, 1, 1, 1, 1, 1, 1, 1]
_FORM_INDEX = [k for k, w in enumerate(_WEIGHTS) for _ in range(w)]
_DEF_STRATEGIES: dict[tuple, object] = {}


def _leaf(draw):
    kind = draw(_I[4])
    if kind == 0:
        return Var(draw(names))
    if kind == 1:
        return Prim("LIT", Unit(), draw(literal_floats))
    if kind == 2:
        return Prim("ILIT", Unit(), draw(literal_ints))
    if kind == 3:
        return Unit()
    return Ann((Inl if draw(_BOOLS) else Inr)(Unit()), BOOL)


def _term(draw, budget: list[int], defs) -> object:
    budget[0] -= 1
    if budget[0] <= 0 or draw(_I[3]) == 0:
        return _leaf(draw)

    def sub():
        return _term(draw, budget, defs)

    k = draw(_I[len(_FORM_INDEX) - (0 if defs else 1)])
    if k == len(_FORM_INDEX):  # a call of a def
        g = _DEF_STRATEGIES.get(defs)
        if g is None:
            g = _DEF_STRATEGIES[defs] = st.sampled_from(defs)
        return Call(draw(g), tuple(sub() for _ in range(draw(_I[3]))))
    return _FORMS[_FORM_INDEX[k]](draw, sub)


def surface_terms(defs=DEF_NAMES, max_size: int = 40):
    """Core terms of surface-expressible shapes, of at most about max_size nodes;
    `Call` only to the names in `defs`."""
    defs = tuple(defs)
    size = st.integers(1, max_size)
    return st.composite(lambda draw: _term(draw, [draw(size)], defs))()


_PARAMS = st.lists(st.tuples(names, types(3)), max_size=3)
_TYPES3 = types(3)


@st.composite
def surface_programs(draw, max_defs: int = 3, max_size: int = 25):
    n = draw(st.integers(0, min(max_defs, len(DEF_NAMES))))
    defs = []
    for k in range(n):
        params = draw(_PARAMS)
        body = _term(draw, [draw(st.integers(1, max_size))], DEF_NAMES[:k])
        defs.append(Def(DEF_NAMES[k], tuple(Param(x, t) for x, t in params), draw(_TYPES3),
                        body))
    return Program(tuple(defs))


# ----------------------------------------------------------------- deep programs
DEEP = 10_000


def deep_let_source(n: int = DEEP) -> str:
    """`def f(x0 : R) : R = let x1 = 1.0 in let x2 = x1 + 1.0 in ... x{n}`, one let
    per line, as print_program lays it out."""
    return ("def f(x0 : R) : R =\n  let x1 = 1.0 in\n"
            + "".join(f"  let x{i + 1} = x{i} + 1.0 in\n" for i in range(1, n)) + f"  x{n}\n")


@functools.lru_cache(maxsize=None)
def parsed_deep_lets():
    """parse_program(deep_let_source()), parsed once per test process."""
    from chad.parser import parse_program

    return parse_program(deep_let_source())
