r"""Naive higher-order CHAD (Efficient CHAD (Smeding & Vákár), §9; CHAD (Vákár & Smeding), §7.5): the recipe whose
function derivatives are split in two halves, kept to show its 2^n blow-up.

    D1[τ -> σ] := D1τ -> (D1σ × (D2σ -> D2τ))      D2[τ -> σ] := List(D1τ × D2σ)

D2 of a function is the log of its invocations (argument primal, output
cotangent); ++ is O(1) (types.py: LogOne / LogCat, the Bag of §9's footnote 25).
Every other construct uses the efficient rules (Fig. 7, sparse cotangents, EVM),
so that the comparison with the efficient transform isolates the treatment of
functions. In the monadic style (the sharing form of CHAD (Vákár & Smeding), `let y = λx. D[t]`, so
the code is generated once):

  D_Γ[λx. t] = let g = lamwith caps (\\x -> D_{Γ,x}[t]) in
               pair (lamwith [g] \\a -> let r = app g a in
                       pair (fst r) (lamwith [r] \\d ->          -- snd (split (y' d))
                         let q = run (app (snd r) d) (zero-env-term (Γ, x)) in
                         <the cell of x in snd q>))
                    (lamwith [g] \\l -> logfold l (e.            -- fold over the log
                         let r = app g (fst e) in                --   re-runs D[t] ...
                         scope (zerot τ) (app (snd r) (snd e)))) --   keeps Γ's part
  D_Γ[t s]   = let r1 = D[t] in let r2 = D[s] in let c = app (fst r1) (fst r2) in
               pair (fst c) (lamwith [r1, r2, c] \\d ->
                 app (snd r1) (logone (fst r2) d) >> app (snd r2) (app (snd c) d))

The application's backpropagator runs *both* halves of the function's derivative:
the argument half (`snd c`, which runs the body's backpropagator) and the context
half (`snd r1` on the log, which runs the body's forward pass and backpropagator
again). Nested n deep, the innermost body is differentiated 2^n times.
Def calls are closed functions, as in the efficient transform (calls.py).
"""

from __future__ import annotations

from chad.terms import (
    App, Def, Fst, Lam, Let, Pair, RunEVM, ScopeEVM, Snd, Term, ThenEVM, Var,
)
from chad.transform.common import Context, zero_env_term, zerot
from chad.transform.efficient import Chad, backward, backward_term, cells_of
from chad.transform.registry import CTG, TransformSpec

from .convert import captures_of
from .terms import LogFold, LogOneT


class NaiveHOChad(Chad):
    """The efficient transformation with §9's naive rules for lambda and app."""

    mode = "naive-ho"

    def __call__(self, t: Term) -> Term:
        if isinstance(t, Lam):
            return self.lam(t)
        if isinstance(t, App):
            return self.app(t)
        return super().__call__(t)

    def lam(self, t: Lam) -> Term:
        f = self.fresh
        g, a, r, d, q, l, e, r3 = (f("g"), f("a"), f("r"), f("d"), f("q"), f("l"), f("e"),
                                   f("r"))
        tau = t.param_ty if t.param_ty is not None else t.ty.arg
        caps = captures_of(t)
        outer = list(self.ctx.types)
        token = self.ctx.push(t.name, tau)
        try:
            body = self(t.body)
        finally:
            self.ctx.pop(token)
        cell: Term = Snd(Var(q))
        for _ in outer:
            cell = Snd(cell)
        arg_half = Lam(d, None, Let(q, RunEVM(App(Snd(Var(r)), Var(d)),
                                              zero_env_term(outer + [tau])), Fst(cell)), (r,))
        primal = Lam(a, None, Let(r, App(Var(g), Var(a)), Pair(Fst(Var(r)), arg_half)), (g,))
        ctx_half = Lam(l, None, LogFold(Var(l), e, Let(
            r3, App(Var(g), Fst(Var(e))),
            ScopeEVM(zerot(tau), App(Snd(Var(r3)), Snd(Var(e)))))), (g,))
        return Let(g, Lam(t.name, None, body, caps), Pair(primal, ctx_half))

    def app(self, t: App) -> Term:
        f = self.fresh
        r1, r2, c, d = f("r"), f("r"), f("c"), f("d")
        back = Lam(d, None, ThenEVM(
            App(Snd(Var(r1)), LogOneT(Fst(Var(r2)), Var(d))),
            App(Snd(Var(r2)), App(Snd(Var(c)), Var(d)))), (r1, r2, c))
        return Let(r1, self(t.fn), Let(r2, self(t.arg), Let(
            c, App(Fst(Var(r1)), Fst(Var(r2))), Pair(Fst(Var(c)), back))))


def naive_ho_chad_def(d: Def) -> Term:
    return NaiveHOChad(Context.of_params(d.params))(d.body)


def gradient_term(d: Def) -> Term:
    """TH2's left-hand side, as for the efficient transform."""
    return RunEVM(App(Snd(naive_ho_chad_def(d)), Var(CTG)),
               zero_env_term([p.ty for p in d.params]))


SPEC = TransformSpec(
    name="naive-ho",
    forward_term=naive_ho_chad_def,
    backward=backward,
    gradient_term=gradient_term,
    backward_term=backward_term,
    cells_of=cells_of,
    description="Efficient CHAD (Smeding & Vákár), §9: naive CHAD of functions (D2 = log of invocations); "
                "efficient rules elsewhere. Exponential on nested applications.",
    chad_class=NaiveHOChad,
)
