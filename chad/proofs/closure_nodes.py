"""The symbolic cost rules of the closure nodes (Efficient CHAD (Smeding & Vákár),
§9 and appendix C: the fused closure conversion of chad/functions/efficient.py,
the def calls of chad/functions/calls.py), the values they build, and the
potential φ* of closure cotangents, for the function rules' obligations
(chad/proofs/function_rules.py, docs/proofs.md "Functions").

Costs, transcribed from chad/functions/evaluate.py and calls.py
(docs/cost-model.md, "Functions"): MkClosure 1 + k; CApp 1 + c(f) + c(e) +
c(body); LCastPack 1 + c(e), + 1 for the zero; LPackAs 1 + c(p) + c(e);
LFunZero, LTagZero 1; EnvOneT 1 + c(d); EnvScatter 1 + c(e) + E + the merges
of the forwarded targets' entries, its action one add per local entry and one per
forwarded target with entries, chained by `then` (2 steps each); DCall 1 +
Σc(args) + c(derived body); a source def call 1 + Σc(args) + c(body); RunEVM 1 + c(m) + c(env) + (1 + |cells|
+ the action). An abstract function value (a placeholder's) is called through
symbols: the primal call's cost P, the derivative's Cfwd, its backpropagator's
Cbwd, and FUN_STEP (chad/proofs/statements.py) as the hypothesis of each call
of that backpropagator. φ*: an environment bag of E entries
(2 + ENV_ENTRY_W)·E + 1 + Σ φ*(d_i), a packed cotangent 1 + φ* of its inside.
tests/test_prove_functions.py checks the rules against the counting evaluator.
"""

from __future__ import annotations

from chad.costmodel.evaluate import Closure as RealClosure
from chad.costmodel.evaluate import Evaluator
from chad.functions.calls import derived
from chad.functions.terms import (
    CApp, DCall, EnvOneT, EnvScatter, LCastPack, LFunZero, LPackAs, LTagZero, MkClosure,
)
from chad.functions.types import L_ABSTRACT, EnvCat, EnvOne, LPacked, Packed
from chad.terms import Call, RunEVM
from chad.values import Inj

from .statements import DEF_K0, DEF_K1, ENV_ENTRY_W, FUN_K
from .symbolic import (
    _UNREFINED, EXTRA_RULES, AbsLT, Action, Opaque, OpaqueCtg, SubHyp, SymbolicError,
)


def def_k(n: int) -> int:
    return DEF_K0 + DEF_K1 * n


# ------------------------------------------------------------------ values


class SymClosure:
    """The value of a MkClosure evaluated symbolically: its node and captures."""

    __slots__ = ("node", "env")

    def __init__(self, node, env):
        self.node = node
        self.env = env


class SymPacked:
    """lpackas of an unknown primal closure: a packed cotangent (φ* = 1 + φ*(value))."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class CallRecord:
    """One primal call of an abstract function (source `f x` or `g(...)`): its
    result and cost P, matched in order with the derivative's call."""

    def __init__(self, y, P):
        self.y = y
        self.P = P
        self.fwd = None      # (Cfwd, K) once the derivative is called
        self.called = False  # its backpropagator was called


class FunBP:
    """The backpropagator returned by a call of an abstract function's derivative:
    calling it on d costs Cbwd and returns `arity` cotangents (a closure's: dx and
    denv; a def's: one per parameter); the call adds FUN_STEP as a hypothesis."""

    def __init__(self, rec: CallRecord, cfwd, K: int, kinds: list, real=None):
        self.rec = rec
        self.cfwd = cfwd
        self.K = K
        self.kinds = kinds   # the linear types of the returned cotangents
        self.real = real


def _calls(se) -> list:
    if not hasattr(se, "fun_calls"):
        se.fun_calls = []
        se.fun_deriv = 0
    return se.fun_calls


def _next_call(se) -> CallRecord:
    calls = _calls(se)
    i = se.fun_deriv
    if i >= len(calls):
        raise SymbolicError("a derivative calls a function the primal does not call")
    se.fun_deriv += 1
    return calls[i]


def _tuple(xs):
    out = None
    for x in reversed(xs):
        out = (x, out)
    return out


def untuple(v) -> list:
    out = []
    while v is not None:
        out.append(v[0])
        v = v[1]
    return out


# ------------------------------------------------------------------ potentials


def _phi(se, v):
    """φ* of closure cotangents (module doc); None: not one."""
    if isinstance(v, (LPacked, SymPacked)):
        return 1 + se.phi(v.value)
    if isinstance(v, (EnvOne, EnvCat)):
        entries = v.entries()
        return (2 + ENV_ENTRY_W) * len(entries) + 1 + sum((se.phi(d) for _, d in entries), 0)
    return None


# ------------------------------------------------------------------ the nodes


def _holds_closure(v) -> bool:
    """v holds a closure-converted function value (concrete mode)."""
    if isinstance(v, Packed):
        return True
    if isinstance(v, (tuple, list)):
        return any(_holds_closure(x) for x in v)
    return isinstance(v, Inj) and _holds_closure(v.value)


def _mk_closure(se, t, env):
    try:
        caps = {y: env[y] for y in t.captures}
    except KeyError as e:
        raise SymbolicError(f"unbound capture {e}") from None
    return SymClosure(t, caps), 1 + len(t.captures)


def call_deriv(se, f, x):
    """The derivative of f called on x (CApp's body): (value, cost)."""
    if isinstance(f, SymClosure):
        t = f.node
        return se.eval(t.body, {**f.env, t.name: x})
    rec = _next_call(se)
    kinds = [AbsLT(-1), L_ABSTRACT]
    if isinstance(f, Packed) and se.concrete is not None:
        envt, fn = f.value
        inner = {fn.param: x}
        for y in fn.captures:
            inner[y] = envt[0]
            envt = envt[1]
        (y, bp), cy = se.concrete.ev.eval(fn.body, inner)
        cf = se.sym("cfwd", cy)
        rec.fwd = (cf, FUN_K)
        return (y, FunBP(rec, cf, FUN_K, kinds, real=bp)), cf
    if isinstance(f, Opaque):
        cf = se.sym("cfwd")
        rec.fwd = (cf, FUN_K)
        return (rec.y, FunBP(rec, cf, FUN_K, kinds)), cf
    raise SymbolicError(f"applying the derivative of {f!r}")


def _capp(se, t, env):
    f, cf = se.eval(t.fn, env)
    x, cx = se.eval(t.arg, env)
    y, cy = call_deriv(se, f, x)
    return y, 1 + cf + cx + cy


def _apply(se, f, x):
    """SymEval.apply of the function values of this module."""
    if isinstance(f, FunBP):
        rec = f.rec
        rec.called = True
        if se.concrete is not None:
            w, cb = se.concrete.ev.apply(f.real, x)
            out = untuple(w)
        else:
            cb = None
            out = [OpaqueCtg(lt, se.sym("phiret", lo=1)) for lt in f.kinds]
            w = _tuple(out)
        cbwd = se.sym("cbwd", cb)
        lhs = f.cfwd + cbwd - se.phi(x) + sum((se.phi(v) for v in out), 0) - f.K
        se.sub_hyps.append(SubHyp("f", lhs, rec.P))
        return w, cbwd
    # a primal call of an abstract (or, in concrete mode, a real) function
    if isinstance(f, Opaque) or (isinstance(f, RealClosure) and se.concrete is not None):
        if se.concrete is not None:
            y, cost = Evaluator(se.concrete.ev.defs).apply(f, x)
        else:
            y, cost = Opaque("call"), None
        P = se.sym("Pcall", cost, lo=1)
        _calls(se).append(CallRecord(y, P))
        return y, P
    raise SymbolicError(f"applying {f!r}")


def _forward(se) -> None:
    """A call whose backpropagator is never called (a def of no parameters) still
    ran its derivative: FUN_STEP with the zero cotangent (φ 1) and Cbwd, the
    returned potentials >= 0 gives Cfwd − K − 1 <= c·P − b."""
    for rec in getattr(se, "fun_calls", []):
        if rec.fwd is not None and not rec.called:
            cf, K = rec.fwd
            se.sub_hyps.append(SubHyp("f", cf - K - 1, rec.P))


def _lcastpack(se, t, env):
    # an unknown cotangent is the zero or packed with this closure's tag (one
    # with another tag costs what the zero costs and has more potential)
    v, c = se.eval(t.expr, env)
    if isinstance(v, OpaqueCtg):
        if v.refined is _UNREFINED:
            if se.fork(2, ["zero cotangent", "packed cotangent"]) == 0:
                v.refined = None
            else:
                v.refined = SymPacked(OpaqueCtg(L_ABSTRACT, se.sym("phibag", lo=1)))
            se.hyps.append(v.phi == se.phi(v.refined))
        v = v.refined
    if isinstance(v, SymPacked):
        return v.value, 1 + c
    if isinstance(v, LPacked) and v.tag == t.tag:
        return v.value, 1 + c
    return None, 2 + c


def _lpackas(se, t, env):
    p, cp = se.eval(t.primal, env)
    v, c = se.eval(t.expr, env)
    if isinstance(p, Packed):
        return LPacked(p.tag, v), 1 + cp + c
    return SymPacked(v), 1 + cp + c


def _zero(se, t, env):
    return None, 1


def _envone(se, t, env):
    v, c = se.eval(t.expr, env)
    if se.concrete is not None:
        return EnvOne(t.index, v), 1 + c
    return OpaqueCtg(L_ABSTRACT, 2 + ENV_ENTRY_W + 1 + se.phi(v)), 1 + c


def _then_cost(costs: list) -> int:
    """a1 >> (a2 >> ... an): each `then` is a bind whose continuation is a
    variable (1 + c1 + 1 + c2); `pure ()` (1) when there is none."""
    return sum(costs) + 2 * (len(costs) - 1) if costs else 1


def _envscatter(se, t, env):
    bag, c = se.eval(t.expr, env)
    if bag is None:
        return Action(lambda e: (None, e, 1)), 1 + c
    if isinstance(bag, OpaqueCtg):
        return _scatter_abstract(se, t, bag, c)
    entries = bag.entries()
    cost = 1 + c + len(entries)
    adds, sums = [], {}
    for i, d in entries:
        level, _name, sub = t.targets[i]
        if sub is None:
            adds.append((level, d))
        elif i in sums:  # a forwarded capture's entries are summed
            sums[i], cz = se.plus(sums[i], d)
            cost += cz
        else:
            sums[i] = d
    for i, d in sums.items():
        level, _name, sub = t.targets[i]
        adds.append((level, EnvOne(sub, d)))

    def act(e):
        cells = list(e)
        costs = []
        for level, v in adds:
            z, cz = se.plus(v, cells[level])
            cells[level] = z
            costs.append(1 + cz)
        return None, tuple(cells), _then_cost(costs)
    return Action(act), cost


def _scatter_abstract(se, t, bag, c):
    """E >= 1 entries of unknown cotangents (their φ* summing to S). The entries of
    the local targets (E_L of them, φ* S_L) are added to the captured variables'
    cells (plusv's bound telescopes per cell). The entries of the forwarded
    targets (captures of the enclosing closure: E_F, S_F) are summed per target
    (their plusv's bound telescopes per target: the merges cost at most S_F − SS,
    SS the sums' φ*) and each of the G targets that received some is added to the
    env cell as one entry (2 steps, φ* + 2 + ENV_ENTRY_W + its sum's), with
    1 <= G <= min(E_F, number of forwarded targets) when E_F >= 1."""
    local = [lv for lv, _name, sub in t.targets if sub is None]
    fwd_levels = {lv for lv, _name, sub in t.targets if sub is not None}
    n_fwd = sum(1 for _lv, _name, sub in t.targets if sub is not None)
    if len(fwd_levels) > 1:
        raise SymbolicError("forwarded targets in more than one environment cell")
    E = se.sym("E", lo=1)
    S = se.sym("S", lo=1)
    se.hyps.append(S >= E)
    se.hyps.append(bag.phi == (2 + ENV_ENTRY_W) * E + 1 + S)
    if not n_fwd:
        EL, SL, EF, SF, G, SS, cmerge = E, S, 0, 0, 0, 0, 0
    else:
        EL, SL = (se.sym("EL", lo=0), se.sym("SL", lo=0)) if local else (0, 0)
        EF, SF = se.sym("EF", lo=0), se.sym("SF", lo=0)
        se.hyps += [EL + EF == E, SL + SF == S, SL >= EL, SF >= EF]
        G, SS, cmerge = se.sym("G", lo=0), se.sym("SS", lo=0), se.sym("cmerge", lo=0)
        se.hyps += [G <= EF, G <= n_fwd, SS >= G, cmerge >= EF - G, cmerge - SF + SS <= 0]
        if local and se.fork(2, ["no forwarded entry", "forwarded entries"]) == 0:
            se.hyps.append(EF == 0)
        else:
            se.hyps.append(G >= 1)

    def act(e):
        cells = list(e)
        cplus = se.sym("cplussum", lo=1 if not n_fwd else 0)
        se.hyps.append(cplus >= EL)
        phi_in = phi_out = 0
        for level in local:
            old = cells[level]
            new = se.opaque_ctg(getattr(old, "lt", None) or AbsLT(-1), "phiscat")
            phi_in, phi_out = phi_in + se.phi(old), phi_out + se.phi(new)
            cells[level] = new
        se.hyps.append(cplus - SL - phi_in + phi_out <= 0)
        for level in fwd_levels:
            old = cells[level]
            cells[level] = OpaqueCtg(L_ABSTRACT, se.phi(old) + (2 + ENV_ENTRY_W) * G + SS)
        # E_L adds (1 + cplus_i each), G adds of one entry to the env cell (1 + 1
        # each), chained by E_L + G − 1 thens (2 each)
        return None, tuple(cells), 3 * EL - 2 + cplus + 4 * G
    return Action(act), 1 + c + E + cmerge


def _run(se, t, env):
    m, c1 = se.eval(t.m, env)
    dv, c2 = se.eval(t.env, env)
    cells = tuple(untuple(dv))
    x, out, cm = se.run_action(m, cells)
    return (x, _tuple(list(out))), 1 + c1 + c2 + 1 + len(cells) + cm


def _source_call(se, t, env):
    cost = 1
    vals = []
    for a in t.args:
        v, c = se.eval(a, env)
        vals.append(v)
        cost += c
    if se.concrete is not None:
        d = se.concrete.ev.defs[t.name]
        y, cb = Evaluator(se.concrete.ev.defs).eval(
            d.body, {p.name: v for p, v in zip(d.params, vals)})
    else:
        y, cb = Opaque(f"{t.name}()"), None
    P = se.sym("Pbody", cb, lo=1)
    _calls(se).append(CallRecord(y, P))
    return y, cost + P


def _dcall(se, t, env):
    cost = 1
    vals = []
    for a in t.args:
        v, c = se.eval(a, env)
        vals.append(v)
        cost += c
    rec = _next_call(se)
    n = len(t.args)
    K = def_k(n)
    kinds = [AbsLT(-1)] * n
    if se.concrete is not None:
        d = se.concrete.ev.defs[t.name]
        body = derived(d, t.mode)
        (y, bp), cb = se.concrete.ev.eval(body, {p.name: v for p, v in zip(d.params, vals)})
        cf = se.sym("cfwd", cb)
        rec.fwd = (cf, K)
        return (y, FunBP(rec, cf, K, kinds, real=bp)), cost + cf
    cf = se.sym("cfwd")
    rec.fwd = (cf, K)
    return (rec.y, FunBP(rec, cf, K, kinds)), cost + cf


EXTRA_RULES.update({
    MkClosure: _mk_closure, CApp: _capp, LCastPack: _lcastpack, LPackAs: _lpackas,
    LFunZero: _zero, LTagZero: _zero, EnvOneT: _envone, EnvScatter: _envscatter,
    RunEVM: _run, Call: _source_call, DCall: _dcall,
    "apply": _apply, "phi": _phi, "forward": _forward,
    "d1 value": lambda v: _holds_closure(v),  # a function's D1 value is not its primal
})
