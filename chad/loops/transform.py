"""Efficient CHAD of `iter` and `scan` (the loops extension), in the style of
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

`scan` is the same loop over the elements of an array, with p = (state, a ! i)
bound in each step and every state kept. Its reverse pass adds, before step i,
the cotangent of element i of the result (from the dense form of the result's
Bag) to the state's cotangent, and collects the cotangents of the a ! i into a
dense array, returned to a's backpropagator as one BArray (as `map` does):

  chad (scan (p. t) x a) =
      let rx = chad x in let ra = chad a in
      let st = scanFwd (p. chad_{Γ,p} t) (fst rx) (fst ra) in
      pair (fst st) (lamwith [st, rx, ra] \\d ->
          bind (scanBack (snd st) d (zerot (S * A)))
               (lamwith [rx, ra] \\r -> app (snd rx) (fst r) >> app (snd ra) (BArray (snd r))))
"""

from __future__ import annotations

from chad.arrays.nodes import BArrayT
from chad.terms import App, BindEVM, Fst, Iter, Lam, Let, Pair, Scan, Snd, Term, ThenEVM, Var
from chad.transform.common import D2, zerot
from chad.transform.efficient import Chad
from chad.types import Prod

from .nodes import IterBack, IterFwd, ScanBack, ScanFwd


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


def chad_scan(self: Chad, t: Scan) -> Term:
    rx, ra, st, d, r = (self.fresh(s) for s in ("r", "r", "st", "d", "dr"))
    state = t.ty.elem
    pty = Prod(state, t.arr.ty.elem)
    cx = self(t.init)
    ca = self(t.arr)
    tok = self.ctx.push(t.name, pty)
    try:
        cbody = self(t.body)
    finally:
        self.ctx.pop(tok)
    fwd = ScanFwd(t.name, cbody, Fst(Var(rx)), Fst(Var(ra)), state, loc=t.loc)
    back = Lam(d, None, BindEVM(
        ScanBack(Snd(Var(st)), Var(d), zerot(pty), D2(state), D2(t.arr.ty.elem)),
        Lam(r, None, ThenEVM(App(Snd(Var(rx)), Fst(Var(r))),
                             App(Snd(Var(ra)), BArrayT(Snd(Var(r))))), (rx, ra))), (st, rx, ra))
    return Let(rx, cx, Let(ra, ca, Let(st, fwd, Pair(Fst(Var(st)), back))))
