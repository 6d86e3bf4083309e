"""Efficient reverse CHAD: the formalisation's `chad` (Efficient CHAD (Smeding & Vákár), Fig. 7 and
appendix B), on typed core terms.

    chad t : D1τ × (D2τ -> EVM Γ ())

The output of each rule has exactly the shape of the Agda definition (same lets,
pairs, projections and closures with the same captured variables), so the step
counts of the generated code are the formalisation's. Variables are names: the
primal of source variable `x` is the target variable `x`; every other binder is a
fresh name containing '$'. `lamwith vars body` is `Lam(param, None, body, vars)`.

The rules of other node classes (arrays, functions) are looked up in the table
chad.tables.CHAD, filled through chad/extend.py (`register_node(chad=...)`), under
this transformation's `mode` first and then under "efficient".
"""

from __future__ import annotations

from types import GeneratorType

from chad import tables
from chad.primitives import PRIMITIVES
from chad.terms import (
    AddEVM, App, BindEVM, Case, Def, Fst, Inl, Inr, Lam, LCastL, LCastR, Let, LFst,
    LInl, LInr, LPair, LSnd, Pair, Prim, PureEVM, RunEVM, ScopeEVM, Snd, Term,
    ThenEVM, Unit, Var,
)
from chad.types import Prod, Sum
from chad.values import env_tuple_to_cells

from .common import D2, Context, Fresh, zero_env_term, zerot
from chad.extend import register_transform

from .registry import CTG, TransformSpec

class Chad:
    """One transformation run: fresh names and the source context.

    `mode` names the transform whose rules this run uses (subclasses for other
    transforms set their own; rules not registered for it are the efficient ones).
    """

    mode = "efficient"

    def __init__(self, ctx: Context, fresh: Fresh | None = None):
        self.ctx = ctx
        self.fresh = fresh or Fresh()

    def __call__(self, t: Term) -> Term:
        """chad t. The core rules below are generators that yield each sub-term
        whose derivative they need and get it back; they run here on an explicit
        stack, so a chain of 10,000 lets or a sum of 10,000 terms needs no deeper
        Python stack than one let. An extension's rule (chad.tables.CHAD) is a
        function that calls back here for its sub-terms."""
        steps = self._steps(t)
        if type(steps) is not GeneratorType:
            return steps
        return self._drive(steps)

    def _drive(self, steps) -> Term:
        """Run a core rule's generator and those of the sub-terms it yields."""
        plain = type(self).__call__ is Chad.__call__  # else (a subclass) recurse through it
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
                steps = self._steps(sub) if plain else self(sub)
                if type(steps) is GeneratorType:
                    stack.append(steps)
                    value = None
                else:
                    value = steps
        finally:
            for g in reversed(stack):  # an error: unwind the pending rules (their ctx pops)
                g.close()

    def _steps(self, t: Term):
        """The rule for t: the generator of a core rule, or the derivative itself
        (an extension's rule, or a core rule a subclass overrides)."""
        cls = type(t)
        core = _CORE.get(cls)
        if core is not None:
            name, steps, *extra = core
            if getattr(type(self), name) is getattr(Chad, name):
                return steps(self, t, *extra)
            return getattr(self, name)(t, *extra)
        rule = tables.CHAD.get((self.mode, cls)) or tables.CHAD.get(("efficient", cls))
        if rule is None:
            raise NotImplementedError(f"CHAD of {cls.__name__} is not supported yet")
        return rule(self, t)

    # chad (var idx) = pair (var idx) (lamwith [] (\d -> addevm idx d))
    def var(self, t: Var) -> Term:
        d = self.fresh("d")
        level = self.ctx.level(t.name)
        # (ty: the variable's type, for the simplifier: an add to a cell of
        # unit cotangents, an integer's, changes nothing)
        return Pair(Var(t.name), Lam(d, None, AddEVM(level, t.name, Var(d),
                                                     ty=self.ctx.types[level]), ()))

    # chad (let e1 e2) =
    #   let r1 = chad e1 in let x = fst r1 in let r2 = chad e2 in
    #   pair (fst r2) (lamwith [r2, r1] \d ->
    #     bind (scope (zerot σ) (app (snd r2) d)) (lamwith [r1] \p -> app (snd r1) (fst p)))
    def let(self, t: Let) -> Term:
        return self._drive(self._let(t))

    def _let(self, t: Let):
        r1, r2, d, p = self.fresh("r"), self.fresh("r"), self.fresh("d"), self.fresh("p")
        sigma = t.rhs.ty
        c1 = yield t.rhs
        token = self.ctx.push(t.name, sigma)
        try:
            c2 = yield t.body
        finally:
            self.ctx.pop(token)
        back = Lam(d, None, BindEVM(
            ScopeEVM(zerot(sigma), App(Snd(Var(r2)), Var(d))),
            Lam(p, None, App(Snd(Var(r1)), Fst(Var(p))), (r1,))), (r2, r1))
        return Let(r1, c1, Let(t.name, Fst(Var(r1)), Let(r2, c2, Pair(Fst(Var(r2)), back))))

    # chad (prim op e) = let r = chad e in
    #   pair (prim op (fst r)) (lamwith [r] \d -> app (snd r) (dprim op (fst r) d))
    # dprim op p d = let a = p in let c = d in dprim' op
    def prim(self, t: Prim) -> Term:
        return self._drive(self._prim(t))

    def _prim(self, t: Prim):
        r, d, a, c = self.fresh("r"), self.fresh("d"), self.fresh("a"), self.fresh("c")
        deriv = PRIMITIVES[t.op].derivative
        if deriv is None:
            raise NotImplementedError(f"{t.op} has no derivative")
        dprim = Let(a, Fst(Var(r)), Let(c, Var(d), deriv(Var(a), Var(c))))
        return Let(r, (yield t.arg), Pair(
            Prim(t.op, Fst(Var(r)), t.const, loc=t.loc),
            Lam(d, None, App(Snd(Var(r)), dprim), (r,))))

    # chad unit = pair unit (lamwith [] \d -> pure unit)
    def unit(self, t: Unit) -> Term:
        return Pair(Unit(), Lam(self.fresh("d"), None, PureEVM(Unit()), ()))

    # chad (pair e1 e2) = let r = pair (chad e1) (chad e2) in
    #   pair (pair (fst (fst r)) (fst (snd r)))
    #        (lamwith [r] \d -> app (snd (fst r)) (lfst d) >> app (snd (snd r)) (lsnd d))
    def pair(self, t: Pair) -> Term:
        return self._drive(self._pair(t))

    def _pair(self, t: Pair):
        r, d = self.fresh("r"), self.fresh("d")
        s, u = t.ty.left, t.ty.right
        back = Lam(d, None, ThenEVM(
            App(Snd(Fst(Var(r))), LFst(Var(d), D2(s))),
            App(Snd(Snd(Var(r))), LSnd(Var(d), D2(u)))), (r,))
        left = yield t.left
        right = yield t.right
        return Let(r, Pair(left, right),
                   Pair(Pair(Fst(Fst(Var(r))), Fst(Snd(Var(r)))), back))

    # chad (fst e) = let r = chad e in
    #   pair (fst (fst r)) (lamwith [r] \d -> app (snd r) (lpair d (zerot τ)))
    def fst(self, t: Fst) -> Term:
        return self._drive(self._fst(t))

    def _fst(self, t: Fst):
        ty = t.expr.ty
        assert isinstance(ty, Prod)
        return (yield from self._project_steps(t, Fst, lambda d: LPair(d, zerot(ty.right))))

    def snd(self, t: Snd) -> Term:
        return self._drive(self._snd(t))

    def _snd(self, t: Snd):
        ty = t.expr.ty
        assert isinstance(ty, Prod)
        return (yield from self._project_steps(t, Snd, lambda d: LPair(zerot(ty.left), d)))

    def _project(self, t, proj, ctg) -> Term:
        return self._drive(self._project_steps(t, proj, ctg))

    def _project_steps(self, t, proj, ctg):
        r, d = self.fresh("r"), self.fresh("d")
        return Let(r, (yield t.expr), Pair(
            proj(Fst(Var(r))), Lam(d, None, App(Snd(Var(r)), ctg(Var(d))), (r,))))

    # chad (inl e) = let r = chad e in
    #   pair (inl (fst r)) (lamwith [r] \d -> app (snd r) (lcastl d))
    def inj(self, t, inj, cast, side: int) -> Term:
        return self._drive(self._inj(t, inj, cast, side))

    def _inj(self, t, inj, cast, side: int):
        r, d = self.fresh("r"), self.fresh("d")
        ty = t.ty
        assert isinstance(ty, Sum)
        zero = D2(ty.left if side == 0 else ty.right)
        return Let(r, (yield t.expr), Pair(
            inj(Fst(Var(r))), Lam(d, None, App(Snd(Var(r)), cast(Var(d), zero)), (r,))))

    # chad (case e1 e2 e3) = let r = chad e1 in case (fst r) of
    #   inl x -> let r2 = chad e2 in pair (fst r2) (lamwith [r2, r] \d ->
    #              bind (scope (zerot σ) (app (snd r2) d)) (lamwith [r] \p -> app (snd r) (linl (fst p))))
    #   inr y -> (the same with e3, τ and linr)
    def case(self, t: Case) -> Term:
        return self._drive(self._case(t))

    def _case(self, t: Case):
        r = self.fresh("r")
        ty = t.scrut.ty
        assert isinstance(ty, Sum)
        left = yield from self._branch(r, t.lname, ty.left, t.lbody, LInl)
        right = yield from self._branch(r, t.rname, ty.right, t.rbody, LInr)
        return Let(r, (yield t.scrut), Case(Fst(Var(r)), t.lname, left, t.rname, right))

    def _branch(self, r, name, sigma, body, linj):
        r2, d, p = self.fresh("r"), self.fresh("d"), self.fresh("p")
        token = self.ctx.push(name, sigma)
        try:
            c2 = yield body
        finally:
            self.ctx.pop(token)
        back = Lam(d, None, BindEVM(
            ScopeEVM(zerot(sigma), App(Snd(Var(r2)), Var(d))),
            Lam(p, None, App(Snd(Var(r)), linj(Fst(Var(p)))), (r,))), (r2, r))
        return Let(r2, c2, Pair(Fst(Var(r2)), back))


# the core rules: class -> (the method a subclass may override, its generator,
# extra arguments); Chad._steps runs the generator unless the method is overridden
_CORE = {
    Var: ("var", Chad.var), Let: ("let", Chad._let), Prim: ("prim", Chad._prim),
    Unit: ("unit", Chad.unit), Pair: ("pair", Chad._pair), Fst: ("fst", Chad._fst),
    Snd: ("snd", Chad._snd), Inl: ("inj", Chad._inj, Inl, LCastL, 0),
    Inr: ("inj", Chad._inj, Inr, LCastR, 1), Case: ("case", Chad._case),
}


def chad_def(d: Def) -> Term:
    """CHAD of a checked def's body, in the context of its parameters."""
    return Chad(Context.of_params(d.params))(d.body)


def gradient_term(d: Def) -> Term:
    """TH2's left-hand side:  run (app (snd (chad t)) ctg) (zero-env-term Γ).

    Evaluated in the environment {params: primal arguments, CTG: cotangent}.
    """
    return RunEVM(App(Snd(chad_def(d)), Var(CTG)),
                  zero_env_term([p.ty for p in d.params]))


def backward(ev, bp, ctg, d: Def) -> tuple[list, int]:
    """Run the backpropagator: the rest of TH2's term after the forward pass.

    run (app (snd r) ctg) zero-env costs 1 (run) + 1 (app) + 1 (snd) + 1 (var)
    + ccall + cost(zero-env-term) + cost of running the action.
    """
    action, ccall = ev.apply(bp, ctg)
    zenv, cz = ev.eval(zero_env_term([p.ty for p in d.params]), {})
    _unit, cells, crun = ev.evm.run(action, env_tuple_to_cells(zenv))
    return cells, 4 + ccall + cz + crun


def backward_term(d: Def, r: str) -> Term:
    """run (app (snd r) ctg) (zero-env-term Γ): `backward` as a term."""
    return RunEVM(App(Snd(Var(r)), Var(CTG)), zero_env_term([p.ty for p in d.params]))


def cells_of(value) -> list:
    """The parameter cotangents from the value of `backward_term`."""
    return env_tuple_to_cells(value[1])


SPEC = TransformSpec(
    name="efficient",
    forward_term=chad_def,
    backward=backward,
    gradient_term=gradient_term,
    backward_term=backward_term,
    cells_of=cells_of,
    description="Efficient CHAD (Smeding & Vákár), Fig. 7 / the Agda formalisation's chad: sparse cotangents, EVM",
    chad_class=Chad,
)


def register() -> None:
    register_transform(SPEC)
