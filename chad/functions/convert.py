r"""Typed closure conversion (Efficient CHAD (Smeding & Vákár), appendix C, after Minamide et al. 1996).

    [λx. t]^CC := pack_ρ ⟨⟨y1, ..., yk⟩, λp. let ⟨⟨y1, ..., yk⟩, x⟩ = p in t^CC⟩
                  where y1..yk are the captured variables (FV[t] \\ {x}, the
                  checker's `captures`), ρ the type of their tuple
    [t s]^CC    := case t^CC of pack_α z -> (snd z) ⟨fst z, s^CC⟩
    every other construct: homomorphically.

The environment tuple is y1 × (y2 × ... × ()) (so ρ is always a pair or (), whose
cotangent zero is `None`); the pattern `let ⟨⟨y1..yk⟩, x⟩ = p` is the chain
`let e1 = fst p in let y1 = fst e1 in let e2 = snd e1 in let y2 = fst e2 in ...
let x = snd p`. Def calls need no conversion: a def is already a closed function.

That is the *literal* form (`cc_lam`, `cc_app`: nodes Pack, Unpack, ClosedLam,
ClosedApp). The *fused* form (`cc_lam_fused`, `cc_app_fused`, the default) makes
each of the two composites one node: MkClosure(ρ, [y1..yk], x, t) is
pack_ρ ⟨⟨y1..yk⟩, closed λ⟩ whose closed function binds x, y1..yk directly, and
CApp(t, s) is the unpack-and-apply. Their costs are exactly those of the source
`lam` (1 + k) and `app`, so cost(t^CC) = cost(t); the literal form costs a
constant factor more (its pairs, projections and lets).

The converters handle one node and leave the subterms alone; the efficient
CHAD rules for source `Lam` / `App` (efficient.py) use them *on the fly*, which
is the same as converting the whole program first, because the conversion is
homomorphic on every other construct and the cotangent types D2 of τ and τ^CC
coincide. `closure_convert` converts a whole term (used by tests: the converted
program computes the same value, in a number of steps within a constant factor).
"""

from __future__ import annotations

from typing import Callable

import attrs

from chad.terms import (
    App, Build, Case, Def, Fold, Fst, Iter, Lam, Let, MapA, Pair, Scan, Snd, Term, Unit, Var,
    binders_of, free_vars, rebuild,
)
from chad.transform.common import Fresh
from chad.types import ArrayT, Fun, Int, Prod, Sum, Type, UnitT

from .terms import CApp, ClosedApp, ClosedLam, MkClosure, Pack, Unpack
from .types import ClosedFun, ClosureT, TyVar, cc_type, env_type


def fun_parts(ty: Type) -> tuple[Type, Type]:
    """(τ^CC, σ^CC) of a function type τ -> σ (source or converted)."""
    if isinstance(ty, (Fun, ClosureT)):
        return cc_type(ty.arg), cc_type(ty.res)
    raise TypeError(f"internal: expected a function type, got {ty!r}")


def captures_of(t: Lam) -> tuple[str, ...]:
    if t.captures is not None:
        return t.captures
    return tuple(v for v in free_vars(t.body) if v != t.name)


def cc_lam_fused(t: Lam, type_of: Callable[[str], Type]) -> Term:
    """[λx. t]^CC in the fused form: MkClosure (t left as it is)."""
    caps = captures_of(t)
    rho = env_type([cc_type(type_of(y)) for y in caps])
    tau = cc_type(t.param_ty if t.param_ty is not None else t.ty.arg)
    sigma = cc_type(t.ty.res if t.ty is not None else t.body.ty)
    return MkClosure(rho, caps, t.name, t.body, ty=ClosureT(tau, sigma), loc=t.loc)


def cc_app_fused(t: App) -> Term:
    """[t s]^CC in the fused form: CApp (t and s left as they are)."""
    return CApp(t.fn, t.arg, ty=cc_type(t.ty) if t.ty is not None else None, loc=t.loc)


def cc_lam(t: Lam, type_of: Callable[[str], Type], fresh: Fresh) -> Term:
    """[λx. t]^CC, literal form, with t left as it is; type_of gives the captured
    variables' types."""
    caps = captures_of(t)
    cap_tys = [cc_type(type_of(y)) for y in caps]
    rho = env_type(cap_tys)
    tau = cc_type(t.param_ty if t.param_ty is not None else t.ty.arg)
    sigma = cc_type(t.ty.res if t.ty is not None else t.body.ty)
    pty = Prod(rho, tau)
    p = fresh("p")
    binds: list[tuple[str, Term, Type]] = []
    if caps:
        e = fresh("e")
        binds.append((e, Fst(Var(p, ty=pty), ty=rho), rho))
        cur, cur_ty = e, rho
        for i, (y, yty) in enumerate(zip(caps, cap_tys)):
            binds.append((y, Fst(Var(cur, ty=cur_ty), ty=yty), yty))
            if i < len(caps) - 1:
                nxt = fresh("e")
                binds.append((nxt, Snd(Var(cur, ty=cur_ty), ty=cur_ty.right), cur_ty.right))
                cur, cur_ty = nxt, cur_ty.right
    binds.append((t.name, Snd(Var(p, ty=pty), ty=tau), tau))
    body = t.body
    for name, rhs, _ty in reversed(binds):
        body = Let(name, rhs, body, ty=sigma)
    fn_ty = ClosedFun(pty, sigma)
    closed = ClosedLam(p, body, ty=fn_ty, loc=t.loc)
    env: Term = Unit(ty=UnitT())
    env_ty: Type = UnitT()
    for y, yty in reversed(list(zip(caps, cap_tys))):
        env_ty = Prod(yty, env_ty)
        env = Pair(Var(y, ty=yty), env, ty=env_ty)
    return Pack(rho, Pair(env, closed, ty=Prod(rho, fn_ty)), ty=ClosureT(tau, sigma), loc=t.loc)


def unpack_type(fn_ty: Type) -> Type:
    """The type α × ((α × τ) ->□ σ) of the variable bound by an unpack."""
    tau, sigma = fun_parts(fn_ty)
    alpha = TyVar()
    return Prod(alpha, ClosedFun(Prod(alpha, tau), sigma))


def cc_app(t: App, fresh: Fresh) -> Term:
    """[t s]^CC = case t of pack_α z -> (snd z) ⟨fst z, s⟩, with t and s as they are."""
    tau, sigma = fun_parts(t.fn.ty)
    zty = unpack_type(t.fn.ty)
    alpha, cf = zty.left, zty.right
    z = fresh("z")
    call = ClosedApp(Snd(Var(z, ty=zty), ty=cf),
                     Pair(Fst(Var(z, ty=zty), ty=alpha), t.arg, ty=Prod(alpha, tau)),
                     ty=sigma, loc=t.loc)
    return Unpack(t.fn, z, call, ty=sigma, loc=t.loc)


# ----------------------------------------------------------------- whole terms


def closure_convert(t: Term, scope: dict[str, Type], fresh: Fresh | None = None,
                    literal: bool = False) -> Term:
    """t^CC for a checked term t whose free variables have the types in scope;
    the fused form (MkClosure, CApp) unless `literal` (Pack, Unpack, ...)."""
    return _Converter(fresh or Fresh(), literal).conv(t, dict(scope))


def closure_convert_def(d: Def, fresh: Fresh | None = None, literal: bool = False) -> Def:
    """The def with its body closure-converted (parameter types converted too)."""
    scope = {p.name: p.ty for p in d.params}
    body = closure_convert(d.body, scope, fresh, literal)
    params = tuple(attrs.evolve(p, ty=cc_type(p.ty)) for p in d.params)
    return attrs.evolve(d, params=params, result=cc_type(d.result), body=body)


class _Converter:
    def __init__(self, fresh: Fresh, literal: bool):
        self.fresh = fresh
        self.literal = literal

    def bound(self, scope, name, ty, body):
        old = scope.get(name, _MISSING)
        scope[name] = ty
        try:
            return self.conv(body, scope)
        finally:
            if old is _MISSING:
                del scope[name]
            else:
                scope[name] = old

    def conv(self, t: Term, scope: dict) -> Term:
        ty = None if t.ty is None else cc_type(t.ty)
        match t:
            case Lam():
                pty = t.param_ty if t.param_ty is not None else t.ty.arg
                body = self.bound(scope, t.name, pty, t.body)
                lam = attrs.evolve(t, body=body)
                if self.literal:
                    return cc_lam(lam, lambda y: scope[y], self.fresh)
                return cc_lam_fused(lam, lambda y: scope[y])
            case App():
                fn, arg = self.conv(t.fn, scope), self.conv(t.arg, scope)
                app = App(fn, arg, ty=t.ty, loc=t.loc)
                return cc_app(app, self.fresh) if self.literal else cc_app_fused(app)
            case Let():
                rhs = self.conv(t.rhs, scope)
                body = self.bound(scope, t.name, t.rhs.ty, t.body)
                return attrs.evolve(t, rhs=rhs, body=body, ty=ty)
            case Case():
                sty = t.scrut.ty
                assert isinstance(sty, Sum)
                return attrs.evolve(t, scrut=self.conv(t.scrut, scope),
                                    lbody=self.bound(scope, t.lname, sty.left, t.lbody),
                                    rbody=self.bound(scope, t.rname, sty.right, t.rbody), ty=ty)
            case Build():
                return attrs.evolve(t, size=self.conv(t.size, scope),
                                    body=self.bound(scope, t.name, Int(), t.body), ty=ty)
            case MapA():
                elem = t.arr.ty.elem if isinstance(t.arr.ty, ArrayT) else None
                return attrs.evolve(t, arr=self.conv(t.arr, scope),
                                    body=self.bound(scope, t.name, elem, t.body), ty=ty)
            case Fold():
                elem = t.arr.ty.elem if isinstance(t.arr.ty, ArrayT) else None
                return attrs.evolve(t, arr=self.conv(t.arr, scope),
                                    body=self.bound(scope, t.name, Prod(elem, elem), t.body),
                                    ty=ty)
            case Iter():
                return attrs.evolve(t, count=self.conv(t.count, scope),
                                    body=self.bound(scope, t.name, t.init.ty, t.body),
                                    init=self.conv(t.init, scope), ty=ty)
            case Scan():
                elem = t.arr.ty.elem if isinstance(t.arr.ty, ArrayT) else None
                return attrs.evolve(t, init=self.conv(t.init, scope),
                                    body=self.bound(scope, t.name, Prod(t.init.ty, elem),
                                                    t.body),
                                    arr=self.conv(t.arr, scope), ty=ty)
        # every other node binds nothing: convert its sub-terms
        kids = binders_of(t)
        if any(names for _, names in kids):
            raise NotImplementedError(f"closure conversion of {type(t).__name__}")
        out = rebuild(t, [self.conv(c, scope) for c, _ in kids])
        return attrs.evolve(out, ty=ty) if ty is not None else out


_MISSING = object()
