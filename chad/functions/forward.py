r"""Forward-mode CHAD of functions: lambdas, application and def calls (Vákár &
Smeding, *CHAD: Combinatory Homomorphic Automatic Differentiation*, §7.4), in
the interleaved form of chad/transform/forward.py.

The paper's types are

    D(σ → τ)₁ = D(σ)₁ → D(τ)₁ × (D(σ)₂ ⊸ D(τ)₂)        D(σ → τ)₂ = D(σ)₁ → D(τ)₂

with the tangent of a closure, λx. snd (y x) • ⟨v, 0⟩, the derivative with
respect to its captured variables, and application adding the two parts:
(x'_ctx • v) y + x'_arg • (y' • v). Applied to the one tangent v of the context
(jvp), the two parts of a closure's derivative are one function of the pair
(argument, its tangent):

    g ⟨y, dy⟩ = let ⟨z, z'⟩ = D_{Γ,x}(t)[y/x] in ⟨z, z' • ⟨v, dy⟩⟩

(z' • ⟨v, 0⟩ + z' • ⟨0, dy⟩ = z' • ⟨v, dy⟩ by linearity). We represent a
function's forward value by this g, a closure carrying the tangents of its
captured variables, and its tangent by (): the function's tangent is folded
into its primal. The paper's pair evaluates the body twice per application
(once for x'_arg, once for x'_ctx • v), so k nested applications would cost
2^k times the primal; g evaluates it once. So:

    F(\x -> t)   = ⟨lamwith [captures] (\q -> let x = fst q in let d$x = snd q in F(t)), ()⟩
                   (the captures: those of the lambda and their tangents)
    F(t s)       = let rf = F(t) in let ra = F(s) in (fst rf) ra
    F(g(e1..en)) = let r1 = F(e1) in ... let rn = F(en) in
                   g$F(fst r1, snd r1, ..., fst rn, snd rn)

`g$F` is the target node FCall: the forward derivative of the def g, a closed
function of its parameters and their tangents (derived on first use and cached,
as DCall derives g's reverse derivative). Its cost is that of a call: 1 + the
arguments + the derived body.
"""

from __future__ import annotations

import threading
from typing import Any

from attrs import field, frozen

from chad.compile.codegen import CompileError
from chad.deep import run_deep
from chad.errors import EvalError, UsageError
from chad.terms import App, Call, Def, Fst, Lam, Let, Pair, Snd, Term, Unit, Var, free_vars, node
from chad.transform.forward import Forward, forward_def, tangent_names


def _meta():
    return field(default=None, eq=False, kw_only=True, repr=False)


@node("args")
@frozen
class FCall(Term):
    """g$F(x1, dx1, ..., xn, dxn): call of the forward derivative of def `name`,
    with each parameter's primal and tangent, in that order. order 2: the
    forward derivative of that (for second derivatives), with the arguments of
    chad/transform/forward.py `tangent_names(params, 2)`."""

    name: str
    args: tuple
    order: int = 1
    loc: Any = _meta()
    ty: Any = _meta()


def forward_lam(fwd: Forward, t: Lam) -> Term:
    q = fwd.fresh("q")
    body = fwd.bind(t.name, q, fwd(t.body))
    caps = free_vars(Lam(q, None, body, None))
    return Pair(Lam(q, None, body, caps, loc=t.loc), Unit())


def forward_app(fwd: Forward, t: App) -> Term:
    rf, ra = fwd.fresh("r"), fwd.fresh("r")
    return Let(rf, fwd(t.fn), Let(ra, fwd(t.arg), App(Fst(Var(rf)), Var(ra), loc=t.loc)))


def forward_call(fwd: Forward, t: Call) -> Term:
    rs = [fwd.fresh("r") for _ in t.args]
    args: list[Term] = []
    for r in rs:
        args += [Fst(Var(r)), Snd(Var(r))]
    out: Term = FCall(t.name, tuple(args), fwd.order, loc=t.loc)
    for r, e in reversed(list(zip(rs, t.args))):
        out = Let(r, fwd(e), out)
    return out


def forward_fcall(fwd: Forward, t: FCall) -> Term:
    """F(g$F(args)) = g$F of order 2 on the arguments and their tangents: the
    forward derivative of a forward derivative (second derivatives)."""
    if fwd.order != t.order + 1:
        raise UsageError(f"forward mode: a call of order {t.order} in a pass of order "
                         f"{fwd.order}")
    return forward_call(fwd, t)


_CACHE: dict[tuple[int, int], tuple[Def, Term]] = {}
_LOCK = threading.Lock()


def derived(d: Def, order: int = 1) -> Term:
    """The body of g$F: F(body) of the def d (order 2: F(F(body))), cached per def."""
    hit = _CACHE.get((id(d), order))
    if hit is not None and hit[0] is d:
        return hit[1]
    body = run_deep(forward_def, d, order)
    with _LOCK:
        _CACHE[(id(d), order)] = (d, body)
    return body


def eval_fcall(ev, t: FCall, env):
    """1 + the arguments + the derived body (as a source def call)."""
    d = ev.defs.get(t.name)
    if d is None:
        raise EvalError(f"call of an unknown def {t.name!r}", t.loc)
    body = derived(d, t.order)
    cost = 1
    inner = {}
    names = tangent_names([p.name for p in d.params], t.order)
    for name, a in zip(names, t.args):
        v, c = ev.eval(a, env)
        inner[name] = v
        cost += c
    r, cb = ev.eval(body, inner)
    return r, cost + cb


def lower_fcall(gen, t: FCall) -> str:
    """The compiler's lowering (chad/compile/): a call of g$F, compiled once per
    def as a function of the parameters and their tangents."""
    d = gen.defs.get(t.name)
    if d is None:
        raise CompileError(f"call of an unknown def {t.name!r}", t.loc)
    key = ("fcall", t.name, t.order)
    fn = gen.functions.get(key)
    if fn is None:
        names = tangent_names([p.name for p in d.params], t.order)
        fn = gen.function(names, derived(d, t.order), "fc")
        gen.functions[key] = fn
    args = [gen.atom(gen.value(a)) for a in t.args]
    return f"{fn}({', '.join(args)})"


def show_fcall(t: FCall, one):
    return f"{t.name}${'F' * t.order}({', '.join(one(a) for a in t.args)})", 3
