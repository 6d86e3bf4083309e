"""Naive reverse CHAD: Efficient CHAD (Smeding & Vákár), Fig. 2 with the dense linear types of Fig. 4,
costed honestly so that the problems of §3-4 (Table 1) show.

    D_G[t] : D1t x (D2t -> EV G)

where EV G is the DENSE environment cotangent (one dense cell per variable in
scope, let- and case-bound ones included) and cotangents of pairs are always
materialised. The dense operations are the nodes of naive_terms.py; their costs
are documented there and in docs/naive-chad.md.

The rules (reconstructed from Fig. 2 of Efficient CHAD, whose PDF extraction garbles
some glyphs: e.g. `leastl d` is `lcastl d`, and the sum `+` of Fig. 4 must wrap
its result in linl/linr to have the type it is given; the prose of §2-4 confirms
both). `let <x, x'> = e in b` is written with one variable r and fst r / snd r.
Backpropagators are closures with explicit capture lists, as in efficient.py.

  D[x]             = <x, \\[] d. one_x d>
  D[let x = t in s]= let r1 = D[t] in let x = fst r1 in let r2 = D_{G,x}[s] in
                     <fst r2, \\[r2, r1] d. let p = split (snd r2 d) in
                                           fst p +EV snd r1 (snd p)>
  D[<>]            = <<>, \\[] d. 0_EV>
  D[<t, s>]        = let r1 = D[t] in let r2 = D[s] in
                     <<fst r1, fst r2>, \\[r1, r2] d. snd r1 (fst d) +EV snd r2 (snd d)>
  D[fst t]         = let r = D[t] in <fst (fst r), \\[r] d. snd r <d, 0_s>>
  D[snd t]         = let r = D[t] in <snd (fst r), \\[r] d. snd r <0_t, d>>
  D[inl t]         = let r = D[t] in <inl (fst r), \\[r] d. snd r (lcastl d)>
  D[inr t]         = let r = D[t] in <inr (fst r), \\[r] d. snd r (lcastr d)>
  D[case t of {inl x -> s | inr y -> u}] =
                     let r = D[t] in case fst r of
                       { inl x -> let r2 = D_{G,x}[s] in
                                  <fst r2, \\[r2, r] d. let p = split (snd r2 d) in
                                                       fst p +EV snd r (linl (snd p))>
                       | inr y -> (the same with u and linr) }
  D[c] (literal)   = <c, \\[] d. 0_EV>
  D[sign t]        = <sign t, \\[] d. 0_EV>      (t evaluated as a primal: D1 = id)
  D[op t]          = let r = D[t] in
                     <op (fst r), \\[r] d. snd r (let a = fst r in let c = d in Dop^t)>

A primitive takes ONE argument in this project (several come as a pair), so
Fig. 2's `x1' d1 + ... + xn' dn` over n arguments is produced by the pair rule
(one +EV per pair node), and Dop^t is PRIMITIVES[op].derivative. Fig. 2's `sign`
rule is used for every primitive whose result has no real in it (sign, the
comparisons, the integer operations): its cotangent is trivial, so the
backpropagator is the environment zero. Dop^t terms returning the sparse zero of
a pair (LPairZero, the comparisons) are densified to DZero.

`+EV`, `one`, `0_EV` and `0_t` cost time proportional to |G| and to the size of
the types (naive_terms.py): this is the point of the naive transform.
Only the first-order fragment of Fig. 1 (R, Z, (), *, +; no arrays, functions or
def calls) is supported.
"""

from __future__ import annotations

from chad.errors import UsageError
from chad.linear import LPairT, LType
from chad.primitives import PRIMITIVES
from chad.terms import (
    Ann, App, Case, Def, Fst, Inl, Inr, Lam, Let, LInl, LInr, LPair, LPairZero, Pair,
    Prim, Snd, Term, Unit, Var,
)
from chad.types import Int, Prod, Real, Sum, Type, UnitT

from .common import D2, Context, Fresh
from chad.extend import register_transform

from . import naive_terms
from .naive_terms import (
    DCast, DDensify, DZero, EVOneHot, EVPlus, EVSplit, EVZero, densify, ev_to_cells,
)
from .registry import CTG, TransformSpec


def dense_type(t: Type) -> LType:
    """D[t]_2 of Fig. 2, restricted to the first-order types of Fig. 1 (the same
    linear type as the efficient transform's D2; only its values are dense)."""
    if not _fig1_type(t):
        raise UsageError(f"the naive transform supports only R, Z, (), * and + types, not {t}")
    return D2(t)


def _fig1_type(t: Type) -> bool:
    match t:
        case Real() | Int() | UnitT():
            return True
        case Prod(a, b) | Sum(a, b):
            return _fig1_type(a) and _fig1_type(b)
    return False


def _has_real(t: Type) -> bool:
    match t:
        case Real():
            return True
        case Prod(a, b) | Sum(a, b):
            return _has_real(a) or _has_real(b)
    return False


def _densify_dprim(t: Term, lt: LType) -> Term:
    """Replace the sparse pair zeros a Dop^t term may return by dense zeros."""
    if isinstance(t, LPairZero):
        return DZero(lt)
    if isinstance(t, LPair) and isinstance(lt, LPairT):
        return LPair(_densify_dprim(t.left, lt.left), _densify_dprim(t.right, lt.right))
    return t


class NaiveChad:
    """One transformation run: fresh names and the source context G."""

    def __init__(self, ctx: Context, fresh: Fresh | None = None):
        self.ctx = ctx
        self.fresh = fresh or Fresh()

    def lts(self) -> tuple:
        """The dense cell types of EV G for the current G."""
        return tuple(dense_type(t) for t in self.ctx.types)

    def __call__(self, t: Term) -> Term:
        match t:
            case Var():
                return self.var(t)
            case Let():
                return self.let(t)
            case Prim():
                return self.prim(t)
            case Unit():
                return self.constant(t)
            case Pair():
                return self.pair(t)
            case Fst():
                return self.project(t, 0)
            case Snd():
                return self.project(t, 1)
            case Inl():
                return self.inj(t, Inl, 0)
            case Inr():
                return self.inj(t, Inr, 1)
            case Case():
                return self.case(t)
            case Ann():
                return self(t.expr)
        raise UsageError(f"the naive transform supports only the first-order language of "
                         f"Efficient CHAD (Smeding & Vákár), Fig. 1, not {type(t).__name__}", getattr(t, "loc", None))

    # D[x] = <x, \d. one_x d>
    def var(self, t: Var) -> Term:
        d = self.fresh("d")
        level = self.ctx.level(t.name)
        return Pair(Var(t.name), Lam(d, None, EVOneHot(self.lts(), level, t.name, Var(d)), ()))

    # D[<>] = <<>, \d. 0>   and   D[r] = <r, \d. 0>   and   D[sign t] = <sign t, \d. 0>
    def constant(self, t: Term) -> Term:
        return Pair(t, Lam(self.fresh("d"), None, EVZero(self.lts()), ()))

    def _scoped(self, name: str, ty: Type, body: Term) -> Term:
        token = self.ctx.push(name, ty)
        try:
            return self(body)
        finally:
            self.ctx.pop(token)

    # D[let x = t in s]
    def let(self, t: Let) -> Term:
        r1, r2, d, p = self.fresh("r"), self.fresh("r"), self.fresh("d"), self.fresh("p")
        lts = self.lts()
        c1 = self(t.rhs)
        c2 = self._scoped(t.name, t.rhs.ty, t.body)
        back = Lam(d, None, Let(p, EVSplit(App(Snd(Var(r2)), Var(d))),
                                EVPlus(lts, Fst(Var(p)), App(Snd(Var(r1)), Snd(Var(p))))),
                   (r2, r1))
        return Let(r1, c1, Let(t.name, Fst(Var(r1)), Let(r2, c2, Pair(Fst(Var(r2)), back))))

    # D[op t]
    def prim(self, t: Prim) -> Term:
        if t.op in ("LIT", "ILIT"):
            return self.constant(t)
        prim = PRIMITIVES.get(t.op)
        if prim is None or prim.derivative is None:
            raise UsageError(f"the naive transform cannot differentiate primitive {t.op}")
        if not _has_real(t.ty):  # sign, comparisons, integer ops: Fig. 2's sign rule
            return self.constant(t)
        r, d, a, c = self.fresh("r"), self.fresh("d"), self.fresh("a"), self.fresh("c")
        dop = _densify_dprim(prim.derivative(Var(a), Var(c)), dense_type(t.arg.ty))
        dprim = Let(a, Fst(Var(r)), Let(c, Var(d), dop))
        return Let(r, self(t.arg), Pair(
            Prim(t.op, Fst(Var(r)), t.const, loc=t.loc),
            Lam(d, None, App(Snd(Var(r)), dprim), (r,))))

    # D[<t, s>]
    def pair(self, t: Pair) -> Term:
        r1, r2, d = self.fresh("r"), self.fresh("r"), self.fresh("d")
        lts = self.lts()
        back = Lam(d, None, EVPlus(lts, App(Snd(Var(r1)), Fst(Var(d))),
                                   App(Snd(Var(r2)), Snd(Var(d)))), (r1, r2))
        return Let(r1, self(t.left), Let(r2, self(t.right), Pair(
            Pair(Fst(Var(r1)), Fst(Var(r2))), back)))

    # D[fst t], D[snd t]: the one-hot pair <d, 0> / <0, d>, with a DENSE zero
    def project(self, t, side: int) -> Term:
        ty = t.expr.ty
        assert isinstance(ty, Prod)
        r, d = self.fresh("r"), self.fresh("d")
        if side == 0:
            proj, ctg = Fst, Pair(Var(d), DZero(dense_type(ty.right)))
        else:
            proj, ctg = Snd, Pair(DZero(dense_type(ty.left)), Var(d))
        return Let(r, self(t.expr), Pair(
            proj(Fst(Var(r))), Lam(d, None, App(Snd(Var(r)), ctg), (r,))))

    # D[inl t], D[inr t]
    def inj(self, t, inj, side: int) -> Term:
        ty = t.ty
        assert isinstance(ty, Sum)
        r, d = self.fresh("r"), self.fresh("d")
        lt = dense_type(ty.left if side == 0 else ty.right)
        return Let(r, self(t.expr), Pair(
            inj(Fst(Var(r))), Lam(d, None, App(Snd(Var(r)), DCast(side, lt, Var(d))), (r,))))

    # D[case t of {inl x -> s | inr y -> u}]
    def case(self, t: Case) -> Term:
        ty = t.scrut.ty
        assert isinstance(ty, Sum)
        r = self.fresh("r")
        c0 = self(t.scrut)
        left = self._branch(r, t.lname, ty.left, t.lbody, LInl)
        right = self._branch(r, t.rname, ty.right, t.rbody, LInr)
        return Let(r, c0, Case(Fst(Var(r)), t.lname, left, t.rname, right))

    def _branch(self, r, name, sigma, body, linj) -> Term:
        r2, d, p = self.fresh("r"), self.fresh("d"), self.fresh("p")
        lts = self.lts()
        c2 = self._scoped(name, sigma, body)
        back = Lam(d, None, Let(p, EVSplit(App(Snd(Var(r2)), Var(d))),
                                EVPlus(lts, Fst(Var(p)), App(Snd(Var(r)), linj(Snd(Var(p)))))),
                   (r2, r))
        return Let(r2, c2, Pair(Fst(Var(r2)), back))


def _check_types(d: Def) -> None:
    for p in d.params:
        dense_type(p.ty)
    dense_type(d.result)


def naive_chad_def(d: Def) -> Term:
    """D_G[body] in the context G of d's parameters: (primal, backpropagator)."""
    _check_types(d)
    return NaiveChad(Context.of_params(d.params))(d.body)


def gradient_term(d: Def) -> Term:
    """app (snd D_G[t]) (densify ctg): evaluates to EV G, the left-nested tuple
    ((((), g1), g2), ..., gn) of dense parameter cotangents (ev_to_cells)."""
    return App(Snd(naive_chad_def(d)), DDensify(dense_type(d.result), Var(CTG)))


def backward(ev, bp, ctg, d: Def) -> tuple[list, int]:
    """The part of gradient_term after the forward pass: 1 (app) + 1 (snd) +
    densifying the cotangent (1 for the variable + the dense nodes built) +
    the backpropagator's body."""
    dctg, cd = ev.eval(DDensify(dense_type(d.result), Var(CTG)), {CTG: ctg})
    evv, ccall = ev.apply(bp, dctg)
    return ev_to_cells(evv), 2 + cd + ccall


def backward_term(d: Def, r: str) -> Term:
    """app (snd r) (densify ctg): `backward` as a term."""
    return App(Snd(Var(r)), DDensify(dense_type(d.result), Var(CTG)))


SPEC = TransformSpec(
    name="naive",
    forward_term=naive_chad_def,
    backward=backward,
    gradient_term=gradient_term,
    backward_term=backward_term,
    cells_of=ev_to_cells,
    description="Efficient CHAD (Smeding & Vákár), Fig. 2 + Fig. 4: dense cotangents and dense environment vectors",
)



def register() -> None:
    """Register the dense nodes and the transform "naive"."""
    naive_terms.register()
    register_transform(SPEC)


__all__ = ["register", "SPEC", "NaiveChad", "naive_chad_def", "gradient_term", "backward",
           "dense_type", "densify", "ev_to_cells"]
