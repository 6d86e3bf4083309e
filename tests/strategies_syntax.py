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

from hypothesis import strategies as st

from chad.terms import (Ann, App, Build, Call, Case, Def, Fold, Fst, Index, Inl, Inr, Lam,
                        Length, Let, MapA, Pair, Param, Prim, Program, Snd, Unit, Var)
from chad.types import BOOL, R, UNIT, Z, ArrayT, Fun, Prod, Sum

NAMES = ("x", "y", "z", "acc", "x'", "_t", "v2", "p_1", "p_2")
DEF_NAMES = ("g", "h", "main", "k'")
BINARY_OPS = ("ADD", "MUL", "DIV", "LT", "LE", "GT", "GE", "EQ")
UNARY_OPS = ("SIGN", "EXP", "LOG", "SIN", "COS", "TANH", "SQRT", "TOREAL", "SUM")

names = st.sampled_from(NAMES)

# Non-negative finite floats (literals are unsigned), with the interesting ones often.
literal_floats = st.one_of(
    st.sampled_from([0.0, 1.0, 0.5, 1e-300, 2.5e10, 5e-324, 1e16, 1.7976931348623157e308,
                     123456789.125, 0.1, 3e-7]),
    st.floats(min_value=0.0, allow_nan=False, allow_infinity=False).map(abs),
)
literal_ints = st.one_of(st.integers(0, 20), st.integers(0, 10**30))


def _type(draw, budget: list[int]):
    budget[0] -= 1
    if budget[0] <= 0 or draw(st.integers(0, 2)) == 0:
        return draw(st.sampled_from([R, Z, UNIT, BOOL]))
    kind = draw(st.integers(0, 3))
    if kind == 3:
        return ArrayT(_type(draw, budget))
    return (Prod, Sum, Fun)[kind](_type(draw, budget), _type(draw, budget))


def types(max_size: int = 6):
    """Source types with at most about max_size constructors."""
    return st.composite(lambda draw: _type(draw, [draw(st.integers(1, max_size))]))()


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
    lambda d, s: _binop(d(st.sampled_from(BINARY_OPS)), s(), s()),
    lambda d, s: Prim("NEG", s()),
    lambda d, s: _binop("ADD", s(), Prim("NEG", s())),  # a - b
    lambda d, s: Prim(d(st.sampled_from(UNARY_OPS)), s()),
    lambda d, s: Pair(s(), s()),
    lambda d, s: d(st.sampled_from([Fst, Snd, Inl, Inr, Length]))(s()),
    lambda d, s: Case(s(), _name(d), s(), _name(d), s()),
    lambda d, s: (lambda n: Case(s(), n, s(), n, s()))(_name(d)),  # if-shaped
    lambda d, s: Lam(_name(d), d(st.none() | types(4)), s()),
    lambda d, s: App(s(), s()),
    lambda d, s: Ann(s(), d(types(4))),
    lambda d, s: Index(s(), s()),
    lambda d, s: Build(s(), _name(d), s()),
    lambda d, s: (lambda q: Build(s(), q, _app_of(q, s())))(_name(d)),
    lambda d, s: Fold(_name(d), s(), s()),
    lambda d, s: (lambda q: Fold(q, _app_of(q, s()), s()))(_name(d)),
    lambda d, s: MapA(_name(d), s(), s()),
    lambda d, s: (lambda q: MapA(q, _app_of(q, s()), s()))(_name(d)),
    lambda d, s: _letpair(_name(d), _name(d), _name(d), s(), s()),
]


def _leaf(draw):
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return Var(draw(names))
    if kind == 1:
        return Prim("LIT", Unit(), draw(literal_floats))
    if kind == 2:
        return Prim("ILIT", Unit(), draw(literal_ints))
    if kind == 3:
        return Unit()
    return Ann((Inl if draw(st.booleans()) else Inr)(Unit()), BOOL)


def _term(draw, budget: list[int], defs) -> object:
    budget[0] -= 1
    if budget[0] <= 0 or draw(st.integers(0, 3)) == 0:
        return _leaf(draw)

    def sub():
        return _term(draw, budget, defs)

    k = draw(st.integers(0, len(_FORMS) - (0 if defs else 1)))
    if k == len(_FORMS):  # a call of a def
        g = draw(st.sampled_from(tuple(defs)))
        return Call(g, tuple(sub() for _ in range(draw(st.integers(0, 3)))))
    return _FORMS[k](draw, sub)


def surface_terms(defs=DEF_NAMES, max_size: int = 40):
    """Core terms of surface-expressible shapes, of at most about max_size nodes;
    `Call` only to the names in `defs`."""
    defs = tuple(defs)
    return st.composite(lambda draw: _term(draw, [draw(st.integers(1, max_size))], defs))()


@st.composite
def surface_programs(draw, max_defs: int = 3, max_size: int = 25):
    n = draw(st.integers(0, min(max_defs, len(DEF_NAMES))))
    defs = []
    for k in range(n):
        params = draw(st.lists(st.tuples(names, types(3)), max_size=3))
        body = _term(draw, [draw(st.integers(1, max_size))], DEF_NAMES[:k])
        defs.append(Def(DEF_NAMES[k], tuple(Param(x, t) for x, t in params), draw(types(3)),
                        body))
    return Program(tuple(defs))
