r"""Forward-mode CHAD: Vákár & Smeding, *CHAD: Combinatory Homomorphic Automatic
Differentiation*, §7.3-7.4 (the forward rules), with the linear map applied to
the tangent of the context as it is built.

The paper's forward transformation gives, for Γ ⊢ t : τ, the pair

    D(t) : D(τ)₁ × (D(Γ)₂ ⊸ D(τ)₂)

and jvp applies the linear map once, to the tangent v of the context. Here the
map is applied as it is built (the paper's §11.1, "interleaving"): the tangent
of every context variable x is the target variable d$x, and F(t) evaluates to
the pair (primal, tangent), that is ⟨D(t)₁, D(t)₂ • v⟩. Every rule below is the
paper's rule with `λv.` dropped and `proj_idx(x) v` read as d$x, so a variable
costs O(1) and F(t) costs a constant times t (docs/forward-mode.md):

    F(x)              = ⟨x, d$x⟩
    F(let x = e in b) = let r = F(e) in let x = fst r in let d$x = snd r in F(b)
    F(op e)           = let r = F(e) in let a = fst r in let da = snd r in
                        ⟨op a, Dop(a; da)⟩          (Dop: the primitive's `tangent`)
    F(())             = ⟨(), ()⟩
    F(⟨e1, e2⟩)       = let r1 = F(e1) in let r2 = F(e2) in
                        ⟨⟨fst r1, fst r2⟩, ⟨snd r1, snd r2⟩⟩
    F(fst e)          = let r = F(e) in ⟨fst (fst r), fst (snd r)⟩     (snd alike)
    F(inl e)          = let r = F(e) in ⟨inl (fst r), snd r⟩           (inr alike)
    F(case e of inl x -> a | inr y -> b)
                      = let r = F(e) in let dv = snd r in case fst r of
                          inl x -> let d$x = dv in F(a) | inr y -> let d$y = dv in F(b)

Tangent types (dense; the zero tangent of a discrete type is ()):

    D(R)₂ = R     D(Z)₂ = D(())₂ = ()     D(σ × τ)₂ = D(σ)₂ × D(τ)₂
    D(σ + τ)₂ at inl x is D(σ)₂ at x (the tangent of the injected value: the
             paper's sum types, where the tangent space depends on the side)
    D(Array τ)₂ = Array D(τ)₂, of the primal's length
    D(σ → τ)₂ = (): folded into the primal, see chad/functions/forward.py

Second derivatives (the Hessian, chad/forward_api.py): `forward_def(d, 2)`
transforms the forward derivative again, a run of order 2 whose tangent
variables are dd$x (dd$d$x for the tangent of d$x); the target forms of a
forward derivative have forward rules too (unzip, g$F calls, the linear
primitives LADD, LSCALE, LNEG, LZERO and LZERO's argument LUnit).

The rules of the other forms (arrays, functions, loops) are in the table
chad.tables.FORWARD, declared by their extension through chad/extend.py
(`register_node(forward=...)`); this module imports no extension.
"""

from __future__ import annotations

from types import GeneratorType

from chad import tables
from chad.errors import UsageError
from chad.primitives import PRIMITIVES
from chad.terms import (
    Ann, Case, Def, Fst, Inl, Inr, Let, LUnit, Pair, Prim, Snd, Term, Unit, Var,
)

from .common import Fresh


def tangent_name(x: str, order: int = 1) -> str:
    """The target variable holding the tangent of the variable x: d$x, and for
    the forward derivative of a forward derivative (order 2, the Hessian)
    dd$x. It contains '$', which no source name does, and a fresh name is
    stem$<number>, so it never captures or shadows another variable."""
    return "d" * order + "$" + x


def tangent_names(names, order: int = 1) -> list[str]:
    """The variables of the order-th forward derivative of a function of
    `names`: each name followed by its tangent, for order 1, 2, ... in turn
    (order 2: x, dd$x, d$x, dd$d$x)."""
    out = list(names)
    for k in range(1, order + 1):
        out = [m for n in out for m in (n, tangent_name(n, k))]
    return out


class Forward:
    """One forward transformation run: fresh names, and the order of the tangents
    it introduces (1; 2 when transforming a forward derivative again). The
    source context is not needed: a variable's tangent is found by name."""

    def __init__(self, fresh: Fresh | None = None, order: int = 1):
        self.fresh = fresh or Fresh()
        self.order = order

    def tangent(self, x: str) -> str:
        """The variable holding the tangent of x in this run."""
        return tangent_name(x, self.order)

    def __call__(self, t: Term) -> Term:
        """F(t). The rules of the core forms below are generators that yield each
        sub-term whose F they need and get it back; they run here on an explicit
        stack, so a chain of 10,000 lets or a sum of 10,000 terms needs no deep
        Python stack. An extension's rule (chad.tables.FORWARD) is a function
        that calls back here for its sub-terms."""
        steps = self._steps(t)
        if type(steps) is not GeneratorType:
            return steps
        stack = [steps]
        value = None
        try:
            while True:
                try:
                    sub = stack[-1].send(value)
                except StopIteration as done:
                    stack.pop()
                    if not stack:
                        return done.value
                    value = done.value
                    continue
                steps = self._steps(sub)
                if type(steps) is GeneratorType:
                    stack.append(steps)
                    value = None
                else:
                    value = steps
        finally:
            for g in reversed(stack):  # an error: close the pending rules
                g.close()

    def _steps(self, t: Term):
        """The rule for t: a generator (a core form) or F(t) itself."""
        match t:
            case Var():
                return Pair(Var(t.name), Var(self.tangent(t.name)))
            case Let():
                return self.let(t)
            case Prim():
                return self.prim(t)
            case Unit() | LUnit():  # LUnit: LZERO's argument, in a forward derivative
                return Pair(Unit(), Unit())
            case Pair():
                return self.pair(t)
            case Fst():
                return self.project(t, Fst)
            case Snd():
                return self.project(t, Snd)
            case Inl():
                return self.inj(t, Inl)
            case Inr():
                return self.inj(t, Inr)
            case Case():
                return self.case(t)
            case Ann():
                return self.ann(t)
        rule = tables.FORWARD.get(type(t))
        if rule is None:
            raise UsageError(f"forward mode does not support {type(t).__name__} yet")
        return rule(self, t)

    def bind(self, name: str, r: str, body: Term) -> Term:
        """let name = fst r in let d$name = snd r in body: a source binder and its
        tangent, from the forward pair r."""
        return Let(name, Fst(Var(r)), Let(self.tangent(name), Snd(Var(r)), body))

    # The rules: generators (see __call__).
    def let(self, t: Let):
        r = self.fresh("r")
        rhs = yield t.rhs
        return Let(r, rhs, self.bind(t.name, r, (yield t.body)))

    def prim(self, t: Prim):
        p = PRIMITIVES.get(t.op)
        if p is None or p.tangent is None:
            raise UsageError(f"forward mode: the primitive {t.op} has no tangent rule")
        if type(t.arg) in (Unit, LUnit):  # a literal, a zero: no argument to differentiate
            return Pair(Prim(t.op, Unit(), t.const, loc=t.loc), p.tangent(Unit(), Unit()))
        r, a, da = self.fresh("r"), self.fresh("a"), self.fresh("da")
        return Let(r, (yield t.arg), Let(a, Fst(Var(r)), Let(da, Snd(Var(r)), Pair(
            Prim(t.op, Var(a), t.const, loc=t.loc), p.tangent(Var(a), Var(da))))))

    def pair(self, t: Pair):
        r1, r2 = self.fresh("r"), self.fresh("r")
        left = yield t.left
        right = yield t.right
        return Let(r1, left, Let(r2, right, Pair(
            Pair(Fst(Var(r1)), Fst(Var(r2))), Pair(Snd(Var(r1)), Snd(Var(r2))))))

    def project(self, t, proj):
        r = self.fresh("r")
        return Let(r, (yield t.expr), Pair(proj(Fst(Var(r))), proj(Snd(Var(r)))))

    def inj(self, t, inj):
        r = self.fresh("r")
        return Let(r, (yield t.expr), Pair(inj(Fst(Var(r))), Snd(Var(r))))

    def case(self, t: Case):
        r, dv = self.fresh("r"), self.fresh("dv")
        left = Let(self.tangent(t.lname), Var(dv), (yield t.lbody))
        right = Let(self.tangent(t.rname), Var(dv), (yield t.rbody))
        return Let(r, (yield t.scrut), Let(dv, Snd(Var(r)), Case(
            Fst(Var(r)), t.lname, left, t.rname, right, loc=t.loc)))

    def ann(self, t: Ann):
        return (yield t.expr)


def forward_def(d: Def, order: int = 1) -> Term:
    """F(body) of a checked def: a term in the environment of its parameters and
    their tangents (tangent_names of them), whose value is (result, tangent).
    order 2: F(F(body)), the forward derivative of the forward derivative (its
    value ((result, tangent), (its tangents))), for second derivatives."""
    term = d.body
    fresh = Fresh()
    for k in range(1, order + 1):
        term = Forward(fresh, k)(term)
    return term
