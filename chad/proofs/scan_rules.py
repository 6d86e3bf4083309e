"""Symbolic cost rules of `scan` and of its derivative's nodes (ScanFwd,
ScanBack), and the scan rule as a proof obligation (chad/loops/transform.py;
Efficient CHAD (Smeding & Vákár), §7: map's rule with the steps chained).

The k steps (k = length a) are aggregated as in chad/proofs/loop_rules.py and
chad/proofs/iter_rules.py. Step i receives d_i = e_(i+1) + ds_i (the state's
cotangent from step i + 1, e_k = zero, plus element i of the dense cotangent of
the result) and leaves the cell (e_i, da_i) of p = (state, a ! i), the sparse
zero split into two zeros. The sums enter through symbols with these bounds:

    Σcp   <= φ(e_k) + Σ_(i>=1) φ(e_i) + Σφ(ds_i) − Σφ(d_i)     (plusv's bound)
    Σφ(e_i) + Σφ(da_i) <= Σφ(cell_i) + N,  N <= k,  Σsplit zeros <= 4N
                                  (N cells are the sparse zero: two zeros each)
    cw + sw <= φ(d) + E + k − Σφ(ds_i),  E <= k          (as map's: BAG_ENTRIES)

Costs transcribed from chad/loops/evaluate.py (SCAN_* constants imported).
"""

from __future__ import annotations

from chad.arrays.bag import collect, dense_of, zeros
from chad.arrays.evaluate import array_of, element
from chad.linear import phi as concrete_phi, plusv, zerov
from chad.loops.evaluate import (
    SCAN_BACK_END, SCAN_BACK_STEP, SCAN_FWD_STEP, SCAN_SPLIT, SCAN_STEP,
)
from chad.loops.nodes import ScanBack, ScanFwd
from chad.terms import Scan
from chad.types import ArrayT
from chad.values import make_array

from .array_rules import length_of
from .loop_rules import AggCtgs, SubBPs, dense_ctgs, loop_array
from .specs import GAMMA, Instance, RuleSpec
from .symbolic import (
    EXT_PLUS_SLACK, EXTRA_RULES, AbsT, Action, Sub, SubChad, SubHyp, SymbolicError, ext_leaves,
)


def _item(x):
    return x.item() if hasattr(x, "item") else x


def _steps(se, t, env, kind, step_cost):
    x, cx = se.eval(t.init, env)
    a, ca = se.eval(t.arr, env)
    k = length_of(se, a)
    cls = Sub if kind == "P" else SubChad
    if not isinstance(t.body, cls):
        raise SymbolicError("a scan body that is not a placeholder")
    kb = t.body.k
    total, states, bps = None, [], []
    if se.concrete is not None:
        total = 0
        for i in range(k):
            p = (x, element(a, i))
            if kind == "P":
                x, c = se.concrete.primal(kb, {**env, t.name: p})
            else:
                (x, bp), c = se.concrete.chad(kb, {**env, t.name: p})
                bps.append(bp)
            states.append(x)
            total += c
    S = se.sym(f"S{kind}{kb}", total)
    se.hyps.append(S >= k)
    return k, kb, states, bps, S, 1 + cx + ca + k * step_cost + S


def _scan(se, t: Scan, env):
    k, kb, states, _, S, cost = _steps(se, t, env, "P", SCAN_STEP)
    se.P[kb] = S
    if se.concrete is not None:
        return array_of(t.ty, states), cost
    return loop_array(se, kb, k), cost


def _scan_fwd(se, t: ScanFwd, env):
    k, kb, states, bps, S, cost = _steps(se, t, env, "crun", SCAN_FWD_STEP)
    se.crun[kb] = S
    if se.concrete is not None:
        out = tuple(states) if t.elem is None else make_array(t.elem, states)
        return (out, SubBPs(kb, k, bps)), cost
    return (loop_array(se, kb, k), SubBPs(kb, k)), cost


def _scan_back(se, t: ScanBack, env):
    bps, c1 = se.eval(t.bps, env)
    d, c2 = se.eval(t.ctg, env)
    init, c3 = se.eval(t.init, env)
    if not isinstance(bps, SubBPs):
        raise SymbolicError("scanBack over something other than scanFwd's backpropagators")
    k, kb, nk = bps.n, bps.k, se.subs[bps.k]
    # the dense cotangents of the result (as scatterBag) and e_k = 0
    if se.concrete is not None:
        z, zw = zeros(k, t.state)
        pairs, w = collect(d, t.state)
        cw = se.sym("cw", w)
        ds, sw, ds_phi = dense_ctgs(se, d, k, z, pairs, t.state, cw)
        ek, ce = zerov(t.state)
        ce = se.sym("czerov", ce, lo=1)
    else:
        cw = se.sym("cw")
        ds, sw, ds_phi = dense_ctgs(se, d, k, None, None, t.state, cw)
        zw = k
        ek, ce = se.zerov(t.state)
    cost0 = 1 + c1 + c2 + c3 + zw + cw + sw + ce
    if se.concrete is not None:
        if k == 0:
            return Action(lambda e: ((ek, array_of_elem(t, [])), tuple(e), 1)), \
                cost0 + SCAN_BACK_END
        d_last, cp_last = plusv(ek, _item(ds[k - 1]))
        first_act, cl = se.concrete.apply(bps.real[k - 1], d_last)
        c_last = se.sym(f"ccall_last{kb}", cl + cp_last)  # plusv and the call
    else:
        if se.fork(2, ["k = 0", "k >= 1"]) == 0:
            se.hyps.append(k == 0)
            return Action(lambda e: ((ek, AggCtgs(k, 0)), tuple(e), 1)), cost0 + SCAN_BACK_END
        se.hyps.append(k >= 1)
        c_last = se.sym(f"ccall_last{kb}")

    def act(e):
        n_out = len(e)
        if n_out + 1 != nk:
            raise SymbolicError(f"the steps of sub-term {kb} (context of {nk}) run in "
                                f"{n_out + 1} cells")
        phi0 = sum((se.phi(x) for x in e), 0)
        if se.concrete is not None:
            cells, a, das = tuple(e), first_act, [None] * k
            rest = m_tot = split = nnone = 0
            phi_cells = phi_e = phi_da = 0
            cp_tot, slack = cp_last, EXT_PLUS_SLACK * ext_leaves(ek, _item(ds[k - 1]))
            phi_d = concrete_phi(d_last)
            for i in range(k - 1, -1, -1):
                _, out, m = a(cells + (init,))
                m_tot += m
                cells, cell = tuple(out[:n_out]), out[n_out]
                phi_cells += concrete_phi(cell)
                if cell is None:
                    ei, s1 = zerov(t.state)
                    dai, s2 = zerov(t.elem)
                    split += s1 + s2
                    nnone += 1
                else:
                    ei, dai = cell
                das[i] = dai
                phi_e += concrete_phi(ei)
                phi_da += concrete_phi(dai)
                if i > 0:
                    di, cp = plusv(ei, _item(ds[i - 1]))
                    slack += EXT_PLUS_SLACK * ext_leaves(ei, _item(ds[i - 1]))
                    phi_d += concrete_phi(di)
                    a, cc = se.concrete.apply(bps.real[i - 1], di)
                    rest += cc + cp
                    cp_tot += cp
            Srest = se.sym(f"Sccall_rest{kb}", rest)
            Sm = se.sym(f"Sm{kb}", m_tot)
            Ssplit = se.sym(f"Ssplit{kb}", split)
            Sphicell = se.sym(f"Sphicell{kb}", phi_cells)
            Sphid = se.sym(f"Sphid{kb}", phi_d)
            N, PE, PDA = se.sym("N", nnone), se.sym("Sphie", phi_e), se.sym("Sphida", phi_da)
            Scp = se.sym("Scp", cp_tot)
            e0 = ei
            result = (ei, array_of_elem(t, das))
            e_out = cells
        else:
            Srest, Sm, Ssplit = (se.sym(f"{s}{kb}") for s in ("Sccall_rest", "Sm", "Ssplit"))
            Sphicell, Sphid = se.sym(f"Sphicell{kb}"), se.sym(f"Sphid{kb}")
            N, PE, PDA = se.sym("N"), se.sym("Sphie"), se.sym("Sphida")
            Scp = se.sym("Scp")
            slack = 0
            e0 = se.opaque_ctg(t.state, "phie0")
            result = (e0, AggCtgs(k, PDA))
            e_out = tuple(se.opaque_ctg(getattr(x, "lt", None), "phiout") for x in e)
        # the bounds of the module docstring (Srest and c_last hold the plusv
        # costs Scp and the calls)
        se.hyps += [Srest + c_last - Scp >= 0,
                    Scp <= se.phi(ek) + PE - se.phi(e0) + ds_phi - Sphid + slack,
                    PE + PDA <= Sphicell + N, N <= k, Ssplit <= 4 * N,
                    PE >= se.phi(e0), PDA >= k]
        phin = sum((se.phi(x) for x in e_out), 0)
        lhs = (se.crun[kb] + (c_last + Srest - Scp) + k * (1 + nk) + Sm - Sphid - k * se.phi(init)
               - phi0 + phin + Sphicell - k * nk)
        if kb not in se.P:
            raise SymbolicError(f"sub-term {kb}'s derivative runs but its primal did not")
        se.sub_hyps.append(SubHyp(kb, lhs, se.P[kb], k))
        cost = (k * (2 + SCAN_SPLIT) + Sm + Ssplit + (k - 1) * SCAN_BACK_STEP + Srest
                + SCAN_BACK_END + k + 1)
        return result, e_out, cost

    return Action(act), cost0 + SCAN_BACK_STEP + c_last


def array_of_elem(t, das):
    return dense_of(das, t.elem)


EXTRA_RULES.update({Scan: _scan, ScanFwd: _scan_fwd, ScanBack: _scan_back})


def scan_rules():
    s, el = AbsT(2), AbsT(1)
    return [RuleSpec("scan", lambda: [Instance(Scan("p", Sub(3, s), Sub(2, s), Sub(1, ArrayT(el)),
                                                    ty=ArrayT(s)), GAMMA)])]
