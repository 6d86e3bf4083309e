"""Symbolic cost rules of `iter` and of its derivative's nodes (IterFwd,
IterBack), and the iter rule as a proof obligation (chad/loops/transform.py;
Efficient CHAD (Smeding & Vákár), §7, the map rule with its steps chained).

As for the loops of chad/proofs/loop_rules.py, the k steps' quantities enter
through their sums (ΣP, Σcrun, Σccall, Σm), with TH1 summed over the steps.
Here the steps' cotangents are chained: step i receives the cotangent d_(i+1)
that step i + 1 left in its state's cell (d_k = d, the rule's incoming one), and
the cell step 0 leaves, dx, goes to the initial state's backpropagator. So
Σφ(ctg_i) − Σφ(final cell_i) = φ(d) − φ(dx), and the summed hypothesis is

    Σcrun + Σccall + k·(1 + |Γ_s|) + Σm − φ(d) + φ(dx) − k·φ(zero)
        − φ(Γ_0) + φ(Γ_k) − k·|Γ_s|  <=  c·ΣP − k·b

Costs transcribed from chad/loops/evaluate.py (its ITER_STEP, FWD_STEP,
BACK_STEP, BACK_END constants imported); k = max(n, 0) forks on k = 0 and k >= 1.
"""

from __future__ import annotations

from chad.loops.evaluate import BACK_END, BACK_STEP, FWD_STEP, ITER_STEP
from chad.loops.nodes import IterBack, IterFwd
from chad.terms import Iter
from chad.types import Z

from .loop_rules import SubBPs, count_of
from .specs import GAMMA, Instance, RuleSpec
from .symbolic import EXTRA_RULES, AbsT, Action, Opaque, Sub, SubChad, SubHyp, SymbolicError


def _steps(se, t, env, kind, step_cost):
    """The shared loop of iter and iterFwd: (count k, final state, per-step
    values, aggregated cost of the steps' bodies, cost of count and init)."""
    nv, cn = se.eval(t.count, env)
    if se.concrete is not None:
        k = max(int(nv), 0)
    else:
        k = count_of(se, nv)
    x, cx = se.eval(t.init, env)
    cls = Sub if kind == "P" else SubChad
    if not isinstance(t.body, cls):
        raise SymbolicError("an iter body that is not a placeholder")
    kb = t.body.k
    total, outs = None, []
    if se.concrete is not None:
        total = 0
        for _ in range(k):
            if kind == "P":
                x, c = se.concrete.primal(kb, {**env, t.name: x})
            else:
                (x, bp), c = se.concrete.chad(kb, {**env, t.name: x})
                outs.append(bp)
            total += c
    S = se.sym(f"S{kind}{kb}", total)
    se.hyps.append(S >= k)
    if se.concrete is None:
        key = ("iter", kb)
        x = se.primal.setdefault(key, Opaque(f"iter{kb}"))
    return k, kb, x, outs, S, 1 + cn + cx + k * step_cost + S


def _iter(se, t: Iter, env):
    k, kb, x, _, S, cost = _steps(se, t, env, "P", ITER_STEP)
    se.P[kb] = S
    return x, cost


def _iter_fwd(se, t: IterFwd, env):
    k, kb, x, bps, S, cost = _steps(se, t, env, "crun", FWD_STEP)
    se.crun[kb] = S
    return (x, SubBPs(kb, k, bps if se.concrete is not None else None)), cost


def _iter_back(se, t: IterBack, env):
    bps, c1 = se.eval(t.bps, env)
    d, c2 = se.eval(t.ctg, env)
    init, c3 = se.eval(t.init, env)
    if not isinstance(bps, SubBPs):
        raise SymbolicError("iterBack over something other than iterFwd's backpropagators")
    k, kb, nk = bps.n, bps.k, se.subs[bps.k]
    if se.concrete is not None:
        # construction: the last step's action (its backpropagator called on d)
        if k == 0:
            return Action(lambda e: (d, tuple(e), 1)), 1 + c1 + c2 + c3 + BACK_END
        first_act, cl = se.concrete.apply(bps.real[k - 1], d)
        c_last = se.sym(f"ccall_last{kb}", cl)
    else:
        if se.fork(2, ["k = 0", "k >= 1"]) == 0:
            se.hyps.append(k == 0)
            return Action(lambda e: (d, tuple(e), 1)), 1 + c1 + c2 + c3 + BACK_END
        se.hyps.append(k >= 1)
        c_last = se.sym(f"ccall_last{kb}")

    def act(e):
        n_out = len(e)
        if n_out + 1 != nk:
            raise SymbolicError(f"the steps of sub-term {kb} (context of {nk}) run in "
                                f"{n_out + 1} cells")
        phi0 = sum((se.phi(x) for x in e), 0)
        if se.concrete is not None:
            cells, ccall_rest, m_tot, a, dn = tuple(e), 0, 0, first_act, d
            for i in range(k - 1, -1, -1):
                _, out, m = a(cells + (init,))
                m_tot += m
                cells, dn = tuple(out[:n_out]), out[n_out]
                if i > 0:
                    a, cc = se.concrete.apply(bps.real[i - 1], dn)
                    ccall_rest += cc
            Srest = se.sym(f"Sccall_rest{kb}", ccall_rest)
            Sm = se.sym(f"Sm{kb}", m_tot)
            dx, e_out = dn, cells
        else:
            Srest, Sm = se.sym(f"Sccall_rest{kb}"), se.sym(f"Sm{kb}")
            dx = se.opaque_ctg(getattr(d, "lt", None), "phidx")
            e_out = tuple(se.opaque_ctg(getattr(x, "lt", None), "phiout") for x in e)
        phin = sum((se.phi(x) for x in e_out), 0)
        lhs = (se.crun[kb] + c_last + Srest + k * (1 + nk) + Sm - se.phi(d) + se.phi(dx)
               - k * se.phi(init) - phi0 + phin - k * nk)
        if kb not in se.P:
            raise SymbolicError(f"sub-term {kb}'s derivative runs but its primal did not")
        se.sub_hyps.append(SubHyp(kb, lhs, se.P[kb], k))
        # per step: bind 1 + scope 1 + its action; the continuations build the
        # previous steps' actions (k - 1 of them) and, after step 0, pure d
        cost = k * 2 + Sm + (k - 1) * BACK_STEP + Srest + BACK_END + 1
        return dx, e_out, cost

    return Action(act), 1 + c1 + c2 + c3 + BACK_STEP + c_last


EXTRA_RULES.update({Iter: _iter, IterFwd: _iter_fwd, IterBack: _iter_back})


def iter_rules():
    st = AbsT(2)
    return [RuleSpec("iter", lambda: [Instance(Iter(Sub(1, Z), "s", Sub(3, st), Sub(2, st),
                                                    ty=st), GAMMA)])]
