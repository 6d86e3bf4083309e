"""Evaluation rules (values and step counts) of `iter` and of the nodes of its
derivative (chad/loops/nodes.py). Registered by chad/loops/__init__.py through
chad/extend.py; the costs are documented in docs/cost-model.md, "Iteration".
The forward and reverse passes follow the per-element backpropagators of `map`
in Efficient CHAD (Smeding & Vákár), §7, chained through the state.

With k = max(n, 0) the number of steps and body_i the step from state i:

    iter n (s. body) x       1 + c(n) + c(x) + Σ_i (ITER_STEP + c(body_i))
    iterFwd n (s. body) x    1 + c(n) + c(x) + Σ_i (FWD_STEP + c(body_i))
    iterBack bps d z         1 + c(bps) + c(d) + c(z) + the construction of the
                             last step's action (BACK_STEP + ccall of its
                             backpropagator; BACK_END when k = 0)

Running iterBack's action costs, per step, bind 1 + scope 1 + the run of the
step's backpropagator action + the continuation's ccall, which is the
construction of the previous step's action (BACK_STEP + ccall of its
backpropagator) or, after the first step, BACK_END; the final `pure d` costs 1.

Every loop here is a Python loop: a step does not add a Python frame to the
evaluation of the forward pass. The reverse pass is a chain of `bind`s, built one
step at a time while it runs; the runtimes nest one call per bind, as they do
for a chain of lets (chad.deep gives the evaluation a big stack).
"""

from __future__ import annotations

import numpy as np

from chad.errors import EvalError
from chad.terms import Iter, Var

from .nodes import IterBack, IterFwd

ITER_STEP = 1   # per step of iter: binding the state
FWD_STEP = 3    # per step of iterFwd: split the step's pair (2), store its backpropagator (1)
BACK_STEP = 9   # per step of iterBack: app bp d (3), scope z (2), bind + lam (2), fst p (2)
BACK_END = 2    # after the first step: pure d (pure + var)

_MISSING = object()


def _eval(ev, t, env):
    """ev.eval with a fast path for variables (same value and cost: 1)."""
    if type(t) is Var:
        v = env.get(t.name, _MISSING)
        if v is not _MISSING:
            return v, 1
    return ev.eval(t, env)


def _steps(v, loc) -> int:
    """The number of steps of `iter n ...` for the count n: max(n, 0)."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return max(int(v), 0)
    raise EvalError(f"the count of iter must be an integer, got {v!r}", loc)


def eval_iter(ev, t: Iter, env):
    n, cn = _eval(ev, t.count, env)
    k = _steps(n, t.loc)
    x, cost = _eval(ev, t.init, env)
    cost += 1 + cn
    name, body = t.name, t.body
    bind = ev.bind
    for _ in range(k):
        x, c = bind(env, name, x, body)
        cost += ITER_STEP + c
    return x, cost


def eval_iter_fwd(ev, t: IterFwd, env):
    n, cn = _eval(ev, t.count, env)
    k = _steps(n, t.loc)
    x, cost = _eval(ev, t.init, env)
    cost += 1 + cn
    name, body = t.name, t.body
    bind = ev.bind
    bps = []
    for _ in range(k):
        (x, bp), c = bind(env, name, x, body)
        bps.append(bp)
        cost += FWD_STEP + c
    return (x, tuple(bps)), cost


class _Reverse:
    """The steps of one iterBack action: step(i, d) builds the action of
    backpropagator i on the cotangent d, followed by the steps i - 1, ..., 0."""

    __slots__ = ("ev", "evm", "bps", "init")

    def __init__(self, ev, bps, init):
        self.ev = ev
        self.evm = ev.evm
        self.bps = bps
        self.init = init

    def step(self, i: int, d):
        evm = self.evm
        if i < 0:
            return evm.pure(d), BACK_END
        act, ccall = self.ev.apply(self.bps[i], d)
        return evm.bind(evm.scope(self.init, act), _Next(self, i)), BACK_STEP + ccall


class _Next:
    """The continuation after step i: the scope's result p = (cell of s, ()) gives
    the cotangent of step i's input state, fst p, to step i - 1."""

    __slots__ = ("rev", "i")

    def __init__(self, rev: _Reverse, i: int):
        self.rev = rev
        self.i = i

    def __call__(self, p):
        return self.rev.step(self.i - 1, p[0])


def eval_iter_back(ev, t: IterBack, env):
    bps, c1 = _eval(ev, t.bps, env)
    d, c2 = _eval(ev, t.ctg, env)
    init, c3 = _eval(ev, t.init, env)
    act, c = _Reverse(ev, bps, init).step(len(bps) - 1, d)
    return act, 1 + c1 + c2 + c3 + c
