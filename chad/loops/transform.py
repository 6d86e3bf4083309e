"""Efficient CHAD of `iter` (the loops extension), in the style of
chad/transform/efficient.py (Efficient CHAD (Smeding & Vákár), Fig. 7 and the
Agda formalisation's `chad`): the same lets, pairs and closures with explicit
captures.

Efficient CHAD has no loop; the rule is its `map` rule (§7) with the steps
chained: the forward pass keeps each step's backpropagator, the reverse pass runs
them in reverse order, each in a `scope` for the state's cell (as the `let` rule
runs its body's backpropagator in a scope for the bound variable), and passes the
state's cotangent found there to the step before. The captured variables'
cotangents are added to their cells by the steps' backpropagators, through the EVM.

  chad (iter n (s. t) x) =
      let rn = chad n in let rx = chad x in
      let st = iterFwd (fst rn) (s. chad_{Γ,s} t) (fst rx) in
      pair (fst st) (lamwith [st, rx] \\d ->
          bind (iterBack (snd st) d (zerot T)) (lamwith [rx] \\dx -> app (snd rx) dx))

n : Z has the cotangent (), so its backpropagator is not called (as for the size
of `build`).
"""

from __future__ import annotations

from chad.terms import App, BindEVM, Fst, Iter, Lam, Let, Pair, Snd, Term, Var
from chad.transform.common import zerot
from chad.transform.efficient import Chad

from .nodes import IterBack, IterFwd


def chad_iter(self: Chad, t: Iter) -> Term:
    rn, rx, st, d, dx = (self.fresh(s) for s in ("r", "r", "st", "d", "dx"))
    state = t.ty
    cn = self(t.count)
    cx = self(t.init)
    tok = self.ctx.push(t.name, state)
    try:
        cbody = self(t.body)
    finally:
        self.ctx.pop(tok)
    fwd = IterFwd(Fst(Var(rn)), t.name, cbody, Fst(Var(rx)), loc=t.loc)
    back = Lam(d, None, BindEVM(
        IterBack(Snd(Var(st)), Var(d), zerot(state)),
        Lam(dx, None, App(Snd(Var(rx)), Var(dx)), (rx,))), (st, rx))
    return Let(rn, cn, Let(rx, cx, Let(st, fwd, Pair(Fst(Var(st)), back))))
