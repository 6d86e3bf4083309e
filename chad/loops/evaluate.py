"""Evaluation rules (values and step counts) of `iter` and `scan` and of the
nodes of their derivatives (chad/loops/nodes.py). Registered by
chad/loops/__init__.py through chad/extend.py; the costs are documented in
docs/cost-model.md, "Iteration" and "Scan".
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

With k = length a and body_i the step on (state i, a ! i):

    scan (p. body) x a       1 + c(x) + c(a) + Σ_i (SCAN_STEP + c(body_i))
    scanFwd (p. body) x a    1 + c(x) + c(a) + Σ_i (SCAN_FWD_STEP + c(body_i))
    scanBack bps d z         1 + c(bps) + c(d) + c(z) + the dense cotangents (k
                             zeros + collect + scatter, as scatterBag) + 1 (the
                             state's zero) + the construction of the last step's
                             action (SCAN_BACK_STEP + plusv + ccall of its
                             backpropagator; SCAN_BACK_END when k = 0)

Running scanBack's action costs, per step, bind 1 + scope 1 + the run of the
step's backpropagator action + SCAN_SPLIT (+ 2 for the zeros when the cell of p
is still the sparse zero) + the continuation's ccall: the construction of the
previous step's action or, after the first step, SCAN_BACK_END + k (the pair of
the state's cotangent and the k element cotangents); the final `pure` costs 1.

Every loop here is a Python loop: a step does not add a Python frame to the
evaluation of the forward pass. The reverse pass is a chain of `bind`s, built one
step at a time while it runs; the runtimes nest one call per bind, as they do
for a chain of lets (chad.deep gives the evaluation a big stack).
"""

from __future__ import annotations

import numpy as np

from chad.arrays.bag import collect, dense_of, scatter, zeros
from chad.arrays.evaluate import array_of, element, eval_fast
from chad.errors import EvalError
from chad.linear import plusv, zerov
from chad.terms import Iter, Scan
from chad.values import make_array

from .nodes import IterBack, IterFwd, ScanBack, ScanFwd

ITER_STEP = 1   # per step of iter: binding the state
FWD_STEP = 3    # per step of iterFwd: split the step's pair (2), store its backpropagator (1)
BACK_STEP = 9   # per step of iterBack: app bp d (3), scope z (2), bind + lam (2), fst p (2)
BACK_END = 2    # after the first step: pure d (pure + var)

SCAN_STEP = 3       # per step of scan: read a ! i (1), pair it with the state and bind (1),
                    # store the new state (1)
SCAN_FWD_STEP = 6   # per step of scanFwd: the 3 of scan, split the step's pair (2), store
                    # its backpropagator (1)
SCAN_BACK_STEP = 10  # per step of scanBack: read ds ! i (2), add it to the state's
                     # cotangent (1 + plusv), app bp d (3), scope z (2), bind + lam (2)
SCAN_SPLIT = 5      # the continuation: lfst, lsnd of p's cell (2 each), store da_i (1)
SCAN_BACK_END = 3   # after the first step: pure (pair e_0 das) (+ k for the k das)



def _steps(v, loc) -> int:
    """The number of steps of `iter n ...` for the count n: max(n, 0)."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return max(int(v), 0)
    raise EvalError(f"the count of iter must be an integer, got {v!r}", loc)


def eval_iter(ev, t: Iter, env):
    n, cn = eval_fast(ev, t.count, env)
    k = _steps(n, t.loc)
    x, cost = eval_fast(ev, t.init, env)
    cost += 1 + cn
    name, body = t.name, t.body
    bind = ev.bind
    for _ in range(k):
        x, c = bind(env, name, x, body)
        cost += ITER_STEP + c
    return x, cost


def eval_iter_fwd(ev, t: IterFwd, env):
    n, cn = eval_fast(ev, t.count, env)
    k = _steps(n, t.loc)
    x, cost = eval_fast(ev, t.init, env)
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
    bps, c1 = eval_fast(ev, t.bps, env)
    d, c2 = eval_fast(ev, t.ctg, env)
    init, c3 = eval_fast(ev, t.init, env)
    act, c = _Reverse(ev, bps, init).step(len(bps) - 1, d)
    return act, 1 + c1 + c2 + c3 + c


# ----------------------------------------------------------------- scan


def eval_scan(ev, t: Scan, env):
    x, cost = eval_fast(ev, t.init, env)
    a, ca = eval_fast(ev, t.arr, env)
    cost += 1 + ca
    name, body = t.name, t.body
    bind = ev.bind
    k = len(a)
    states = []
    for i in range(k):
        x, c = bind(env, name, (x, element(a, i)), body)
        states.append(x)
        cost += SCAN_STEP + c
    return array_of(t.ty, states), cost


def eval_scan_fwd(ev, t: ScanFwd, env):
    x, cost = eval_fast(ev, t.init, env)
    a, ca = eval_fast(ev, t.arr, env)
    cost += 1 + ca
    name, body = t.name, t.body
    bind = ev.bind
    k = len(a)
    states = []
    bps = []
    for i in range(k):
        (x, bp), c = bind(env, name, (x, element(a, i)), body)
        states.append(x)
        bps.append(bp)
        cost += SCAN_FWD_STEP + c
    out = tuple(states) if t.elem is None else make_array(t.elem, states)
    return (out, tuple(bps)), cost


class _ScanReverse:
    """The steps of one scanBack action: step(i, e) builds the action of
    backpropagator i on e + ds ! i, followed by the steps i - 1, ..., 0; the
    elements' cotangents are stored in `out` as the steps run."""

    __slots__ = ("ev", "evm", "bps", "init", "ds", "item", "out", "state", "elem")

    def __init__(self, ev, bps, init, ds, state, elem):
        self.ev = ev
        self.evm = ev.evm
        self.bps = bps
        self.init = init
        self.ds = ds
        self.item = isinstance(ds, np.ndarray)
        self.out = [None] * len(bps)
        self.state = state
        self.elem = elem

    def step(self, i: int, e):
        evm = self.evm
        if i < 0:
            k = len(self.out)
            return evm.pure((e, dense_of(self.out, self.elem))), SCAN_BACK_END + k
        di = self.ds[i]
        if self.item:
            di = di.item()
        d, cp = plusv(e, di)
        act, ccall = self.ev.apply(self.bps[i], d)
        return (evm.bind(evm.scope(self.init, act), _ScanNext(self, i)),
                SCAN_BACK_STEP + cp + ccall)


class _ScanNext:
    """The continuation after step i: the scope's result p = (cell of p, ()); the
    cell is the cotangent (e_i, da_i) of (state i, a ! i) (None: the zero)."""

    __slots__ = ("rev", "i")

    def __init__(self, rev: _ScanReverse, i: int):
        self.rev = rev
        self.i = i

    def __call__(self, p):
        rev = self.rev
        cell = p[0]
        cost = SCAN_SPLIT
        if cell is None:
            e, c1 = zerov(rev.state)
            da, c2 = zerov(rev.elem)
            cost += c1 + c2
        else:
            e, da = cell
        rev.out[self.i] = da
        act, c = rev.step(self.i - 1, e)
        return act, cost + c


def eval_scan_back(ev, t: ScanBack, env):
    bps, c1 = eval_fast(ev, t.bps, env)
    d, c2 = eval_fast(ev, t.ctg, env)
    init, c3 = eval_fast(ev, t.init, env)
    k = len(bps)
    z, zw = zeros(k, t.state)
    pairs, cw = collect(d, t.state)
    ds, sw = scatter(z, pairs, t.state)
    e, ce = zerov(t.state)
    act, c = _ScanReverse(ev, bps, init, ds, t.state, t.elem).step(k - 1, e)
    return act, 1 + c1 + c2 + c3 + zw + cw + sw + ce + c
