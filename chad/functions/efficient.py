r"""Efficient CHAD of functions: closure conversion, then the rules of Efficient CHAD
(Smeding & Vákár), appendix C in the monadic (EVM) style of the formalisation.

    D1[τ ->□ σ] := D1τ ->□ (D1σ × (D2σ -> D2τ))       D2[τ ->□ σ] := ()
    D1[Σα. τ]   := Σα. D1τ                             D2[Σα. τ]   := Σα. D2τ

Rules (`lamwith vars body` is a target Lam with explicit captures; Γ the context):

  D[λx. t] (closed)  = pair (lamwith [] \\x -> let r = D_{x}[t] in
                               pair (fst r) (lamwith [r] \\d ->
                                 fst (snd (run (app (snd r) d) (pair (zerot τ) unit)))))
                             (lamwith [] \\d -> pure unit)
  D[f s] (f closed)  = let r1 = D[f] in let r2 = D[s] in let c = app (fst r1) (fst r2) in
                       pair (fst c) (lamwith [c, r2] \\d -> app (snd r2) (app (snd c) d))
  D[pack_ρ t]        = let r = D[t] in
                       pair (pack_ρ (fst r)) (lamwith [r] \\d -> app (snd r) (cast_ρ d))
  D[case t of pack_α z -> s] =
                       let r = D[t] in case fst r of pack_α z ->
                         let r2 = D_{Γ,z}[s] in
                         pair (fst r2) (lamwith [r2, r] \\d ->
                           bind (scope (zerot (α × ...)) (app (snd r2) d))
                                (lamwith [r] \\p -> app (snd r) (lpackas (fst r) (fst p))))

The closed function's derivative returns the *plain* cotangent of its argument
(D2σ -> D2τ), as in appendix C: its body's backpropagator is an EVM action over the
one-variable context [x], so it is `run` from a fresh one-cell environment; the
result's cell is the argument's cotangent. The unpack rule is the case rule of
Fig. 7 with `pack` for `linl` (appendix C's `w1 + z' (pack_ρ w2)` after monadic
lifting), the tag being the primal closure's.

The fused form (the default, convert.py) composes those rules for
pack_ρ ⟨⟨y1..yk⟩, λ⟨x, y1..yk⟩. t⟩ and for unpack-and-apply, without the
administrative pairs and projections:

  D[MkClosure ρ [y1..yk] x t] =
      pair (MkClosure ρ [y1..yk] x (let r = D^env_{x,y1..yk}[t] in
              pair (fst r) (lamwith [r] \d ->
                snd (run (app (snd r) d) (pair (zerot τ) (pair 0_env unit))))))
           (lamwith [] \d -> envscatter (cast_ρ d) [y1..yk])
  D[CApp t s] = let r1 = D[t] in let r2 = D[s] in let c = CApp (fst r1) (fst r2) in
      pair (fst c) (lamwith [r1, r2, c] \d -> let w = app (snd c) d in
              app (snd r1) (lpackas (fst r1) (fst (snd w))) >> app (snd r2) (fst w))

The closed function's derivative runs in a state of TWO cells whatever k is:
the argument x and the environment `env`, whose cotangent is a bag of
(capture index, cotangent) entries (types.py: EnvOne / EnvCat, O(1) +, zero
None). D^env is D_{x,y1..yk} with every `add y_i d` turned into
`add env [(i, d)]` (`relevel`): the body is differentiated in the context
[x, y1..yk] and moved to the run-state [x, env]. So a call costs O(1) in the
number of captures (the source application does not pay for them either), and
the closure's backpropagator `envscatter` adds each entry to its captured
variable once, in 1 + (number of entries) steps: each entry was paid for by a
use of a captured variable, the k captures by building the closure (1 + k).

Source lambdas and applications are converted on the fly (convert.py): the rule of
`Lam` is D ∘ [-]^CC, and so is the rule of `App` (set LITERAL = True for the
literal form). A def call is a closed function applied to its arguments (calls.py).
"""

from __future__ import annotations

from chad.terms import (
    AddEVM, App, BindEVM, Fst, Lam, Let, Pair, PureEVM, RunEVM, ScopeEVM, Snd, Term,
    ThenEVM, Unit, Var, map_children,
)
from chad.transform.common import Context, zerot
from chad.transform.efficient import Chad

from .convert import cc_app, cc_app_fused, cc_lam, cc_lam_fused, fun_parts, unpack_type
from .terms import (
    CApp, ClosedApp, ClosedLam, EnvOneT, EnvScatter, LCastPack, LPackAs, LTagZero, MkClosure,
    Pack, Unpack,
)

# True: the literal appendix-C form (Pack, Unpack, ClosedLam, ClosedApp);
# False: the fused form (MkClosure, CApp). Same gradients; the fused one is cheaper.
LITERAL = False


def sub_chad(chad: Chad, ctx: Context) -> Chad:
    """A transformation of the same kind (efficient or naive-ho) in another
    context, sharing the fresh-name supply."""
    return type(chad)(ctx, chad.fresh)


def closed_lam(chad: Chad, t: ClosedLam) -> Term:
    tau = t.ty.arg
    ctx = Context()
    ctx.push(t.name, tau)
    r, d = chad.fresh("r"), chad.fresh("d")
    body = sub_chad(chad, ctx)(t.body)
    back = Lam(d, None, Fst(Snd(RunEVM(App(Snd(Var(r)), Var(d)),
                                       Pair(zerot(tau), Unit())))), (r,))
    fn = Lam(t.name, None, Let(r, body, Pair(Fst(Var(r)), back)), ())
    return Pair(fn, Lam(chad.fresh("d"), None, PureEVM(Unit()), ()))


def closed_app(chad: Chad, t: ClosedApp) -> Term:
    r1, r2, c, d = chad.fresh("r"), chad.fresh("r"), chad.fresh("c"), chad.fresh("d")
    back = Lam(d, None, App(Snd(Var(r2)), App(Snd(Var(c)), Var(d))), (c, r2))
    return Let(r1, chad(t.fn), Let(r2, chad(t.arg), Let(
        c, App(Fst(Var(r1)), Fst(Var(r2))), Pair(Fst(Var(c)), back))))


def pack(chad: Chad, t: Pack) -> Term:
    r, d = chad.fresh("r"), chad.fresh("d")
    return Let(r, chad(t.expr), Pair(
        Pack(t.tag, Fst(Var(r))),
        Lam(d, None, App(Snd(Var(r)), LCastPack(t.tag, Var(d))), (r,))))


def unpack(chad: Chad, t: Unpack) -> Term:
    r, r2, d, p = chad.fresh("r"), chad.fresh("r"), chad.fresh("d"), chad.fresh("p")
    zty = unpack_type(t.scrut.ty)
    c0 = chad(t.scrut)
    token = chad.ctx.push(t.name, zty)
    try:
        c2 = chad(t.body)
    finally:
        chad.ctx.pop(token)
    back = Lam(d, None, BindEVM(
        ScopeEVM(zerot(zty), App(Snd(Var(r2)), Var(d))),
        Lam(p, None, App(Snd(Var(r)), LPackAs(Fst(Var(r)), Fst(Var(p)))), (r,))), (r2, r))
    return Let(r, c0, Unpack(Fst(Var(r)), t.name, Let(r2, c2, Pair(Fst(Var(r2)), back))))


def mk_closure(chad: Chad, t: MkClosure) -> Term:
    caps = tuple(t.captures)
    types = [chad.ctx.types[chad.ctx.level(y)] for y in caps]
    tau, _sigma = fun_parts(t.ty)
    ctx = Context()
    ctx.push(t.name, tau)
    for y, ty in zip(caps, types):
        ctx.push(y, ty)
    r, dd, d = chad.fresh("r"), chad.fresh("d"), chad.fresh("d")
    body = relevel(sub_chad(chad, ctx)(t.body), len(caps))
    zero_env = Pair(zerot(tau), Pair(LTagZero(), Unit()))
    inner_back = Lam(dd, None, Snd(RunEVM(App(Snd(Var(r)), Var(dd)), zero_env)), (r,))
    primal = MkClosure(t.tag, caps, t.name, Let(r, body, Pair(Fst(Var(r)), inner_back)))
    if not caps:
        return Pair(primal, Lam(d, None, PureEVM(Unit()), ()))
    targets = tuple((chad.ctx.level(y), y, None) for y in caps)
    return Pair(primal, Lam(d, None, EnvScatter(LCastPack(t.tag, Var(d)), targets), ()))


def relevel(t: Term, k: int) -> Term:
    """Move a closed function's derivative from the context [x, y1..yk, ...] to the
    run-state [x, env, ...]: an add to captured y_i (level i) becomes an add of the
    one-entry bag [(i - 1, d)] to the env cell (level 1); the cells of binders
    inside the body move down by k - 1. Nested closures' bodies have their own
    run-states and are left alone."""
    if k == 1:
        shift = 0
    else:
        shift = k - 1

    def level(lv: int):
        if lv == 0:
            return 0, None
        if lv <= k:
            return 1, lv - 1
        return lv - shift, None

    def go(u):
        if isinstance(u, AddEVM):
            val = go(u.val)
            lv, sub = level(u.level)
            if sub is None:
                return AddEVM(lv, u.name, val)
            return AddEVM(lv, "env", EnvOneT(sub, val))
        if isinstance(u, EnvScatter):
            targets = []
            for lv0, name, sub0 in u.targets:
                assert sub0 is None
                lv, sub = level(lv0)
                targets.append((lv, "env" if sub is not None else name, sub))
            return EnvScatter(go(u.expr), tuple(targets))
        if isinstance(u, MkClosure):
            return u
        return map_children(u, go)

    return go(t)


def capp(chad: Chad, t: CApp) -> Term:
    f = chad.fresh
    r1, r2, c, d, w = f("r"), f("r"), f("c"), f("d"), f("w")
    back = Lam(d, None, Let(w, App(Snd(Var(c)), Var(d)), ThenEVM(
        App(Snd(Var(r1)), LPackAs(Fst(Var(r1)), Fst(Snd(Var(w))))),
        App(Snd(Var(r2)), Fst(Var(w))))), (r1, r2, c))
    return Let(r1, chad(t.fn), Let(r2, chad(t.arg), Let(
        c, CApp(Fst(Var(r1)), Fst(Var(r2))), Pair(Fst(Var(c)), back))))


def _type_of(chad: Chad):
    return lambda y: chad.ctx.types[chad.ctx.level(y)]


def source_lam(chad: Chad, t: Lam) -> Term:
    """D[λx. t] := D[[λx. t]^CC] (the closure's body is converted when reached)."""
    if LITERAL:
        return chad(cc_lam(t, _type_of(chad), chad.fresh))
    return chad(cc_lam_fused(t, _type_of(chad)))


def source_app(chad: Chad, t: App) -> Term:
    """D[t s] := D[[t s]^CC]."""
    return chad(cc_app(t, chad.fresh) if LITERAL else cc_app_fused(t))
