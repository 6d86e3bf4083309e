"""Evaluation rules (values and step counts) of the function nodes, and their
printing for `chad show`. Costs (docs/cost-model.md, "Functions"):

    Pack tag e           1 + c(e)                  (as inl)
    Unpack e z body      1 + c(e) + c(body)        (as case)
    MkClosure ρ ys x b   1 + k                     (as lam: k = len(ys))
    CApp f e             1 + c(f) + c(e) + c(body) (as app)
    ClosedLam x body     1                         (a lam capturing nothing)
    ClosedApp f e        1 + c(f) + c(e) + c(body) (as app)
    LCastPack tag e      1 + c(e), + 1 if the result is the zero (as lcastl)
    LPackAs p e          1 + c(p) + c(e)           (as linl)
    LFunZero, LTagZero   1                         (as lpairzero)
    EnvOneT i d          1 + c(d)
    EnvScatter e ts      1 + c(e) + (number of entries) + the plusv costs of
                         summing the entries of each capture the enclosing
                         closure captured too (a forwarded target); one add per
                         entry of the other targets, one add per forwarded
                         target that has entries, sequenced with the EVM's then
                         (add's and then's costs when run)
    LogOneT a d          1 + c(a) + c(d)
    LogFold l x body     1 + c(l) + Σ_entries (1 + c(body)); the actions are
                         sequenced with the EVM's then (its costs when run)
    DCall g args         1 + c(args) + c(derived body)  (as a def call)
"""

from __future__ import annotations

from chad.errors import EvalError
from chad.linear import plusv
from .terms import (
    EnvOneT, EnvScatter, CApp, MkClosure, ClosedApp, ClosedLam, DCall, LCastPack, LFunZero, LogFold, LogOneT, LPackAs, LTagZero,
    Pack, Unpack,
)
from .types import ClosedFn, EnvOne, LogOne, LPacked, Packed, show_type_cc


def eval_pack(ev, t, env):
    v, c = ev.eval(t.expr, env)
    return Packed(t.tag, v), 1 + c


def eval_unpack(ev, t, env):
    v, c = ev.eval(t.scrut, env)
    if not isinstance(v, Packed):
        raise EvalError(f"internal: unpack of a value that is not a closure: {v!r}", t.loc)
    r, cb = ev.bind(env, t.name, v.value, t.body)
    return r, 1 + c + cb


def eval_mk_closure(ev, t, env):
    envt = None
    for y in reversed(t.captures):
        try:
            envt = (env[y], envt)
        except KeyError:
            raise EvalError(f"unbound variable {y!r}", t.loc) from None
    return Packed(t.tag, (envt, ClosedFn(t.name, tuple(t.captures), t.body))), \
        1 + len(t.captures)


def eval_capp(ev, t, env):
    f, cf = ev.eval(t.fn, env)
    x, cx = ev.eval(t.arg, env)
    envt, fn = f.value
    inner = {fn.param: x}
    for y in fn.captures:
        inner[y] = envt[0]
        envt = envt[1]
    y, cy = ev.eval(fn.body, inner)
    return y, 1 + cf + cx + cy


def eval_closed_lam(ev, t, env):
    return ev.closed(t), 1


def eval_closed_app(ev, t, env):
    f, cf = ev.eval(t.fn, env)
    x, cx = ev.eval(t.arg, env)
    y, cy = ev.apply(f, x)
    return y, 1 + cf + cx + cy


def eval_lcastpack(ev, t, env):
    v, c = ev.eval(t.expr, env)
    if isinstance(v, LPacked) and v.tag == t.tag:
        return v.value, 1 + c
    return None, 2 + c


def eval_lpackas(ev, t, env):
    p, cp = ev.eval(t.primal, env)
    v, c = ev.eval(t.expr, env)
    return LPacked(p.tag, v), 1 + cp + c


def eval_zero(ev, t, env):
    return None, 1


def eval_envone(ev, t, env):
    v, c = ev.eval(t.expr, env)
    return EnvOne(t.index, v), 1 + c


def then_chain(evm, actions: list):
    """a1 >> (a2 >> (... >> an)) with the EVM's `then`; `pure ()` when empty."""
    if not actions:
        return evm.pure(None)
    action = actions[-1]
    for a in reversed(actions[:-1]):
        action = evm.then(a, action)
    return action


def eval_envscatter(ev, t, env):
    bag, c = ev.eval(t.expr, env)
    entries = [] if bag is None else bag.entries()
    actions = []
    cost = 1 + c + len(entries)
    sums: dict = {}  # forwarded capture index -> the sum of its entries (first-seen order)
    for i, d in entries:
        level, _name, sub = t.targets[i]
        if sub is None:
            actions.append(ev.evm.add(level, d))
        elif i in sums:
            sums[i], cz = plusv(sums[i], d)
            cost += cz
        else:
            sums[i] = d
    for i, d in sums.items():
        level, _name, sub = t.targets[i]
        actions.append(ev.evm.add(level, EnvOne(sub, d)))
    return then_chain(ev.evm, actions), cost


def eval_logone(ev, t, env):
    a, ca = ev.eval(t.arg, env)
    d, cd = ev.eval(t.ctg, env)
    return LogOne(a, d), 1 + ca + cd


def eval_logfold(ev, t, env):
    log, c = ev.eval(t.log, env)
    entries = [] if log is None else log.entries()
    cost = 1 + c
    actions = []
    for e in entries:
        a, ca = ev.bind(env, t.name, e, t.body)
        actions.append(a)
        cost += 1 + ca
    return then_chain(ev.evm, actions), cost


_ATOM, _APP = 3, 2
atom, app = _ATOM, _APP
# node class -> show(node, one) -> (text, precedence), for `chad show`
SHOW = {}
SHOW[Pack] = lambda t, one: (
    f"pack[{show_type_cc(t.tag)}] {one(t.expr, atom)}", app)
SHOW[Unpack] = lambda t, one: (
    f"case {one(t.scrut)} of pack {t.name} -> {one(t.body)}", 0)
SHOW[MkClosure] = lambda t, one: (
    f"closure[{', '.join(t.captures)}] {t.name} -> {one(t.body)}", 0)
SHOW[CApp] = lambda t, one: (f"{one(t.fn, app)} @ {one(t.arg, atom)}", app)
SHOW[ClosedLam] = lambda t, one: (f"\\[]□ {t.name} -> {one(t.body)}", 0)
SHOW[ClosedApp] = lambda t, one: (
    f"{one(t.fn, app)} {one(t.arg, atom)}", app)
SHOW[LCastPack] = lambda t, one: (
    f"lcast[{show_type_cc(t.tag)}] {one(t.expr, atom)}", app)
SHOW[LPackAs] = lambda t, one: (
    f"lpackas {one(t.primal, atom)} {one(t.expr, atom)}", app)
SHOW[LFunZero] = lambda t, one: ("lfunzero", atom)
SHOW[LTagZero] = lambda t, one: ("ltagzero", atom)
SHOW[DCall] = lambda t, one: (
    f"{t.name}$D({', '.join(one(a) for a in t.args)})", atom)
SHOW[EnvOneT] = lambda t, one: (f"envone {t.index} {one(t.expr, atom)}", app)
SHOW[EnvScatter] = lambda t, one: (
    f"envscatter {one(t.expr, atom)} "
    f"[{', '.join(n + '@' + str(lv) + ('' if s is None else f'.{s}') for lv, n, s in t.targets)}]",
    app)
SHOW[LogOneT] = lambda t, one: (
    f"logone {one(t.arg, atom)} {one(t.ctg, atom)}", app)
SHOW[LogFold] = lambda t, one: (
    f"logfold {one(t.log, atom)} ({t.name}. {one(t.body)})", app)
