"""Hypothesis strategies for well-typed programs, their arguments and sparse
cotangents (public API for research users).

    from costmodel.generators import programs
    @given(programs(max_depth=4))
    def test(case): case.defn, case.args, case.ctg

Programs are typed core terms (every node has `.ty`), built directly so they need
neither parser nor checker; `GenCase.source()` prints them in surface syntax.
First-order with sums (pairs, sums, `sign`-based case, lets, every scalar
primitive); size and depth are parameters; hypothesis shrinks towards small
programs (literals and variables first).
"""

from __future__ import annotations

import math
from typing import Any

from attrs import frozen
from hypothesis import strategies as st

from chad.primitives import PRIMITIVES, SIGN_T
from chad.terms import (
    Case, Def, Fst, Inl, Inr, Let, Param, Pair, Prim, Program, Snd, Unit, Var,
)
from chad.types import BOOL, UNIT, Int, Prod, R, Real, Sum, Type, UnitT, Z
from chad.values import Inj

# Unary real primitives that are total and tame on the inputs we generate.
SAFE_UNARY = ("NEG", "SIN", "COS", "TANH")


@frozen
class GenCase:
    """A generated program with arguments and a (sparse) output cotangent."""

    defn: Def
    args: tuple
    ctg: Any
    value: Any = None

    @property
    def program(self) -> Program:
        return Program((self.defn,))

    def source(self) -> str:
        from chad.printer import print_program

        return print_program(self.program)


# ----------------------------------------------------------------- types
def types(max_depth: int = 2) -> st.SearchStrategy[Type]:
    base = st.sampled_from([R, R, R, Z, UNIT])
    if max_depth <= 0:
        return base
    return st.one_of(
        base,
        st.builds(Prod, types(max_depth - 1), types(max_depth - 1)),
        st.builds(Sum, types(max_depth - 1), types(max_depth - 1)),
    )


# ----------------------------------------------------------------- values
def values_of(ty: Type) -> st.SearchStrategy:
    match ty:
        case Real():
            return st.floats(-2.0, 2.0, allow_nan=False).map(lambda x: round(x, 3))
        case Int():
            return st.integers(-3, 3)
        case UnitT():
            return st.none()
        case Prod(a, b):
            return st.tuples(values_of(a), values_of(b))
        case Sum(a, b):
            return st.one_of(values_of(a).map(lambda v: Inj(0, v)),
                             values_of(b).map(lambda v: Inj(1, v)))
    raise NotImplementedError(str(ty))


def sparse_ctgs(ty: Type, value) -> st.SearchStrategy:
    """Cotangents for `value : ty`, pairs and sums sometimes the sparse zero."""
    match ty:
        case Real():
            return st.floats(-2.0, 2.0, allow_nan=False).map(lambda x: round(x, 3))
        case Int() | UnitT():
            return st.none()
        case Prod(a, b):
            return st.one_of(st.none(), st.tuples(sparse_ctgs(a, value[0]),
                                                  sparse_ctgs(b, value[1])))
        case Sum(a, b):
            inner = a if value.side == 0 else b
            return st.one_of(st.none(), sparse_ctgs(inner, value.value).map(
                lambda c: Inj(value.side, c)))
    raise NotImplementedError(str(ty))


# ----------------------------------------------------------------- terms
class _Gen:
    def __init__(self, draw, max_depth: int):
        self.draw = draw
        self.max_depth = max_depth
        self.counter = 0

    def fresh(self) -> str:
        self.counter += 1
        return f"v{self.counter}"

    def term(self, ctx: list[tuple[str, Type]], ty: Type, depth: int):
        draw = self.draw
        vars_ = [n for n, t in reversed(ctx) if t == ty]
        # Visible names only (a later binder shadows an earlier one).
        seen, visible = set(), []
        for n, t in reversed(ctx):
            if n not in seen:
                seen.add(n)
                if t == ty:
                    visible.append(n)
        vars_ = visible
        leaf = depth >= self.max_depth
        choices = []
        if vars_:
            choices.append("var")
        choices.extend(self._intro_forms(ty))
        if not leaf:
            choices.extend(["let", "case", "sign", "fst", "snd"])
            choices.extend(self._compound_forms(ty))
        kind = draw(st.sampled_from(choices))
        return getattr(self, "k_" + kind)(ctx, ty, depth, vars_)

    def _intro_forms(self, ty):
        match ty:
            case Real():
                return ["lit"]
            case Int():
                return ["ilit"]
            case UnitT():
                return ["unit"]
            case Prod():
                return ["pair"]
            case Sum():
                return ["inj"]
        return []

    def _compound_forms(self, ty):
        match ty:
            case Real():
                return ["binop", "binop", "unop"]
            case Int():
                return ["ibinop"]
        return []

    # leaves and introductions
    def k_var(self, ctx, ty, depth, vars_):
        return Var(self.draw(st.sampled_from(vars_)), ty=ty)

    def k_lit(self, ctx, ty, depth, vars_):
        c = self.draw(st.sampled_from([0.5, 1.0, 2.0, 1.5, 0.25, 3.0]))
        return Prim("LIT", Unit(ty=UNIT), c, ty=R)

    def k_ilit(self, ctx, ty, depth, vars_):
        return Prim("ILIT", Unit(ty=UNIT), self.draw(st.integers(0, 3)), ty=Z)

    def k_unit(self, ctx, ty, depth, vars_):
        return Unit(ty=UNIT)

    def k_pair(self, ctx, ty, depth, vars_):
        return Pair(self.term(ctx, ty.left, depth + 1), self.term(ctx, ty.right, depth + 1), ty=ty)

    def k_inj(self, ctx, ty, depth, vars_):
        if self.draw(st.booleans()):
            return Inl(self.term(ctx, ty.left, depth + 1), ty=ty)
        return Inr(self.term(ctx, ty.right, depth + 1), ty=ty)

    # eliminations and binders
    def k_binop(self, ctx, ty, depth, vars_):
        op = self.draw(st.sampled_from(["ADD", "MUL"]))
        return Prim(op, Pair(self.term(ctx, R, depth + 1), self.term(ctx, R, depth + 1),
                             ty=Prod(R, R)), ty=R)

    def k_ibinop(self, ctx, ty, depth, vars_):
        op = self.draw(st.sampled_from(["IADD", "IMUL"]))
        return Prim(op, Pair(self.term(ctx, Z, depth + 1), self.term(ctx, Z, depth + 1),
                             ty=Prod(Z, Z)), ty=Z)

    def k_unop(self, ctx, ty, depth, vars_):
        op = self.draw(st.sampled_from(SAFE_UNARY))
        return Prim(op, self.term(ctx, R, depth + 1), ty=R)

    def k_let(self, ctx, ty, depth, vars_):
        sigma = self.draw(types(1))
        name = self.fresh()
        rhs = self.term(ctx, sigma, depth + 1)
        body = self.term(ctx + [(name, sigma)], ty, depth + 1)
        return Let(name, rhs, body, ty=ty)

    def k_case(self, ctx, ty, depth, vars_):
        a, b = self.draw(types(1)), self.draw(types(1))
        scrut = self.term(ctx, Sum(a, b), depth + 1)
        x, y = self.fresh(), self.fresh()
        return Case(scrut, x, self.term(ctx + [(x, a)], ty, depth + 1),
                    y, self.term(ctx + [(y, b)], ty, depth + 1), ty=ty)

    def k_sign(self, ctx, ty, depth, vars_):
        """case sign e of { inl s -> case s of {...} | inr z -> ... }"""
        e = self.term(ctx, R, depth + 1)
        s, n, p, z = self.fresh(), self.fresh(), self.fresh(), self.fresh()
        inner = Case(Var(s, ty=BOOL), n, self.term(ctx + [(s, BOOL), (n, UNIT)], ty, depth + 1),
                     p, self.term(ctx + [(s, BOOL), (p, UNIT)], ty, depth + 1), ty=ty)
        return Case(Prim("SIGN", e, ty=SIGN_T), s, inner,
                    z, self.term(ctx + [(z, UNIT)], ty, depth + 1), ty=ty)

    def k_fst(self, ctx, ty, depth, vars_):
        other = self.draw(types(1))
        return Fst(self.term(ctx, Prod(ty, other), depth + 1), ty=ty)

    def k_snd(self, ctx, ty, depth, vars_):
        other = self.draw(types(1))
        return Snd(self.term(ctx, Prod(other, ty), depth + 1), ty=ty)


@st.composite
def terms_in(draw, ctx: list[tuple[str, Type]], ty: Type, max_depth: int = 4):
    """A typed term of type ty in context ctx (list of (name, type))."""
    return _Gen(draw, max_depth).term(list(ctx), ty, 0)


@st.composite
def programs(draw, max_depth: int = 4, max_params: int = 3, result: Type | None = None,
             param_types: st.SearchStrategy | None = None) -> GenCase:
    """A one-def program `f(x1 : T1, ...) : T = body` with arguments and a sparse
    cotangent for its result (the body is evaluated to pick the sum sides)."""
    from costmodel.evaluate import Evaluator

    n = draw(st.integers(1, max_params))
    ptys = [draw(param_types or types(2)) for _ in range(n)]
    params = tuple(Param(f"x{i + 1}", t) for i, t in enumerate(ptys))
    ty = result if result is not None else draw(types(1))
    body = draw(terms_in([(p.name, p.ty) for p in params], ty, max_depth))
    defn = Def("f", params, ty, body)
    args = tuple(draw(values_of(t)) for t in ptys)
    value, _ = Evaluator().eval(body, {p.name: a for p, a in zip(params, args)})
    ctg = draw(sparse_ctgs(ty, value))
    return GenCase(defn, args, ctg, value)


def is_finite(v) -> bool:
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, tuple):
        return all(is_finite(x) for x in v)
    if isinstance(v, Inj):
        return is_finite(v.value)
    return True


__all__ = ["GenCase", "programs", "terms_in", "types", "values_of", "sparse_ctgs",
           "is_finite", "PRIMITIVES"]
