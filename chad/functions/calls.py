r"""Def calls: a def is a closed function of its parameters, so a call needs no
closure conversion, and its derivative calls the callee's derivative (no inlining).

The derivative of def g(y1 : τ1, ..., yn : τn) : σ = b is the closed function

    g$D(y1, ..., yn) = let r = D_{y1..yn}[b] in
                       pair (fst r) (lamwith [r] \\d ->
                         snd (run (app (snd r) d) (zero-env-term [τ1..τn])))

whose backpropagator returns the tuple (dy1, (dy2, ... ())) of the parameters'
cotangents (the callee's context is only its parameters, so `run` costs O(n)).
A call is then

  D[g(e1, ..., en)] = let r1 = D[e1] in ... let rn = D[en] in
                      let c = g$D(fst r1, ..., fst rn) in
                      pair (fst c) (lamwith [c, r1..rn] \\d ->
                        let g1 = app (snd c) d in
                        app (snd r1) (fst g1) >> let g2 = snd g1 in
                        app (snd r2) (fst g2) >> ... app (snd rn) (fst gn))

`g$D(...)` is the target node DCall: the program's defs are known only when the
derivative runs (the evaluator holds them), so DCall derives the callee on first
use and caches the result per def (and per transform: efficient or naive-ho).
Its cost is that of a call: 1 + the arguments + the derived body.
"""

from __future__ import annotations

import threading

from chad.deep import run_deep
from chad.errors import EvalError
from chad.terms import (
    App, Call, Def, Fst, Lam, Let, Pair, PureEVM, RunEVM, Snd, Term, ThenEVM, Unit, Var,
)
from chad.transform.common import Context, Fresh, zero_env_term
from chad.transform.efficient import Chad
from chad.transform.registry import get_transform

from . import efficient
from .terms import DCall


def call_rule(chad: Chad, t: Call) -> Term:
    cargs = [chad(e) for e in t.args]  # left to right
    n = len(t.args)
    rs = [chad.fresh("r") for _ in range(n)]
    c, d = chad.fresh("c"), chad.fresh("d")
    if n == 0:
        back = Lam(d, None, PureEVM(Unit()), ())
    else:
        gs = [chad.fresh("g") for _ in range(n)]
        chain = App(Snd(Var(rs[-1])), Fst(Var(gs[-1])))
        for i in range(n - 2, -1, -1):
            chain = ThenEVM(App(Snd(Var(rs[i])), Fst(Var(gs[i]))),
                            Let(gs[i + 1], Snd(Var(gs[i])), chain))
        back = Lam(d, None, Let(gs[0], App(Snd(Var(c)), Var(d)), chain), (c, *rs))
    out = Let(c, DCall(t.name, tuple(Fst(Var(r)) for r in rs), mode=chad.mode),
              Pair(Fst(Var(c)), back))
    for r, ce in reversed(list(zip(rs, cargs))):
        out = Let(r, ce, out)
    return out


def derived_body(d: Def, mode: str, cls: type | None = None) -> Term:
    """The body of g$D (see the module doc), in the context of d's parameters
    (`cls`: the transform's class, by default the one of `mode`)."""
    cls = cls or get_transform(mode).chad_class
    r, dd = "r$0", "d$0"
    fresh = Fresh()
    body = cls(Context.of_params(d.params), fresh)(d.body)
    back = Lam(dd, None, Snd(RunEVM(App(Snd(Var(r)), Var(dd)),
                                     zero_env_term([p.ty for p in d.params]))), (r,))
    return Let(r, body, Pair(Fst(Var(r)), back))


_CACHE: dict[tuple, tuple[Def, Term]] = {}
_LOCK = threading.Lock()


def derived(d: Def, mode: str) -> Term:
    key = (id(d), mode, efficient.LITERAL)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is d:
        return hit[1]
    body = run_deep(derived_body, d, mode)
    with _LOCK:
        _CACHE[key] = (d, body)
    return body


def eval_dcall(ev, t: DCall, env):
    """1 + the arguments + the derived body (as a source def call)."""
    d = ev.defs.get(t.name)
    if d is None:
        raise EvalError(f"call of an unknown def {t.name!r}", t.loc)
    body = derived(d, t.mode)
    cost = 1
    inner = {}
    for p, a in zip(d.params, t.args):
        v, c = ev.eval(a, env)
        inner[p.name] = v
        cost += c
    r, cb = ev.eval(body, inner)
    return r, cost + cb
