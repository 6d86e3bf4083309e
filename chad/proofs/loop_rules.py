"""Symbolic cost rules of the array-building forms (build, map, array literals)
and of the nodes of their derivatives (Unzip, UnzipMap, Zeros, Collect, Scatter,
ScatterBag, SequenceScoped, BArrayT), and the build and map rules as proof
obligations (a literal of m elements has m sub-terms of its own: its obligation
for every m is chad/proofs/literal_rules.py's).

A loop evaluates a sub-derivative once per element, n times for a symbolic
length n >= 0. The per-element quantities enter the rule's inequality only
through their sums, so each becomes ONE aggregated symbol (Σ over the n
elements): the primal cost ΣP_k, the forward cost Σcrun_k, the backpropagators'
call cost Σccall_k, the actions' cost Σm_k, the potentials of the element
cotangents Σφ(ctg_i) and of the element cells' final values. The induction
hypothesis is TH1 for each element, summed (valid by linearity):

    Σcrun + Σccall + n·(1 + |Γ_k|) + Σm − Σφ(ctg_i) − n·φ(init)
        − φ(Γ_0) + φ(Γ_n) + Σφ(final cell) − n·|Γ_k|  <=  c·ΣP_k

where Γ_0 and Γ_n are the outer cells before the first and after the last
element (the element actions run one after the other on the same cells, so the
outer cells' potentials telescope), and each element costs at least one step
(ΣP_k >= n, Σcrun_k >= n).

The costs are transcribed from chad/arrays/evaluate.py (docs/cost-model.md,
"Arrays": build, map, unzip, unzipMap, zeros, collect, scatter, scatterBag,
sequenceScoped with its SEQ_* constants) and the LACM's `sequence` (the `then`
chain: Σ + 2(n − 1), or 1 when n = 0), and tested against the counting
evaluator (tests/test_prove.py, concrete mode: the aggregated symbols are then
the real sums over the elements).

The work of turning the incoming bag d into dense element cotangents (collect,
then scatter into n zeros) is bounded by

    cw + sw <= φ(d) + E + n − Σφ(ctg_i)

with E the number of BArray entries in d: collect visits every constructor (1
step each, as φ = size counts them) and every BArray entry (1 step, which φ
does not pay for: a BArray of m reals has potential 1 + m and costs 1 + m to
collect and m to scatter), and scatter's plusv's bound telescopes per position.
The obligations ASSUME E <= n (the BAG_ENTRIES assumption of docs/proofs.md: the
incoming cotangent holds at most one array's worth of BArray entries, as a
dense cotangent or one made of one-hot BOnes does); without it TH1's step fails
for a cotangent summing many BArrays (tests/test_prove.py shows it).
Efficient CHAD (Smeding & Vákár), §7 (map) and Fig. 9 (build); the rules are
chad/arrays/transform.py's.
"""

from __future__ import annotations

from chad.arrays.bag import BArray, BPlus, as_bag, collect, dense_of, scatter, zeros
from chad.arrays.evaluate import (
    SEQ_APP, SEQ_ELEM_CONS, SEQ_SCOPE, SEQ_STORE, array_of, element,
)
from chad.arrays.nodes import (
    BArrayT, Collect, Scatter, ScatterBag, SequenceScoped, Unzip, UnzipMap, Zeros,
)
from chad.linear import LR, phi as concrete_phi, plusv
from chad.terms import ArrayLit, Build, MapA
from chad.types import ArrayT, Z
from chad.values import make_array

from .array_rules import length_of
from .specs import GAMMA, Instance, RuleSpec
from .symbolic import (
    EXT_PLUS_SLACK, EXTRA_RULES, AbsT, Action, Opaque, OpaqueCtg, Sub, SubChad, SubHyp,
    SymbolicError, count_of, ext_leaves,
)


# ------------------------------------------------------------------ symbolic values


class SubBPs:
    """The n backpropagators of sub-term k, one per element (concrete: the real ones)."""

    def __init__(self, k: int, n, real=None):
        self.k = k
        self.n = n
        self.real = real

    def __len__(self):
        return len(self.real)


class AggCtgs:
    """n element cotangents whose potentials sum to `phi` (a symbol). Indexed
    at a literal i (an array literal's reverse pass, where n is a number), the
    elements get one potential symbol each (>= 1, summing to `phi`)."""

    def __init__(self, n, phi):
        self.n = n
        self.phi = phi
        self.parts = None

    def element_ctg(self, se, i: int):
        if self.parts is None:
            if not isinstance(self.n, int):
                raise SymbolicError("indexing the dense cotangents of a symbolic length")
            self.parts = [OpaqueCtg(None, se.sym("phictg", lo=1)) for _ in range(self.n)]
            se.hyps.append(sum((p.phi for p in self.parts), 0) == self.phi)
        return self.parts[i]


class SymPairs:
    """The result of `collect d`: the bag it came from, the work (a symbol) and,
    in concrete mode, the real pairs."""

    def __init__(self, bag, work, real=None):
        self.bag = bag
        self.work = work
        self.real = real


class SymZeros:
    """n zero cotangents (symbolic)."""

    def __init__(self, n):
        self.n = n


def bag_entries(d) -> int:
    """E: the number of BArray entries in a bag (what collect visits beyond φ)."""
    total, stack = 0, [as_bag(d)]
    while stack:
        b = stack.pop()
        if isinstance(b, BPlus):
            stack += [b.left, b.right]
        elif isinstance(b, BArray):
            total += len(b.vals)
    return total


# ------------------------------------------------------------------ forward loops


def loop_array(se, k, n):
    """The primal array a loop over sub-term k builds (shared by source and target)."""
    key = ("loop", k)
    if key not in se.primal:
        a = Opaque(f"loop{k}")
        a.length = n
        se.primal[key] = a
    return se.primal[key]


def _elements(se, kind, k, envs):
    """Evaluate sub-term k (kind "P": its primal; "crun": its derivative) once per
    environment; returns (values, aggregated cost symbol >= n)."""
    vals, total = [], None
    if se.concrete is not None:
        total = 0
        for env in envs:
            v, c = (se.concrete.primal(k, env) if kind == "P" else se.concrete.chad(k, env))
            vals.append(v)
            total += c
    s = se.sym(f"S{kind}{k}", total)
    return vals, s


def _body_k(t, cls):
    if not isinstance(t, cls):
        raise SymbolicError(f"a loop body that is not a placeholder: {type(t).__name__}")
    return t.k


def _source_loop(se, t, env, idx_of, n, c0, k):
    envs = [] if se.concrete is None else [{**env, t.name: idx_of(i)} for i in range(n)]
    vals, SP = _elements(se, "P", k, envs)
    se.hyps.append(SP >= n)
    se.P[k] = SP
    if se.concrete is not None:
        return array_of(t.ty, vals), c0 + SP
    return loop_array(se, k, n), c0 + SP


def _build(se, t: Build, env, elem_env=None):
    """(elem_env: element i's environment, when the body's derivative sees more
    than i; chad/proofs/gather_rules.py)"""
    s, cs = se.eval(t.size, env)
    n = count_of(se, s)
    if isinstance(t.body, Sub):
        return _source_loop(se, t, env, lambda i: i, n, 1 + cs, t.body.k)
    k = _body_k(t.body, SubChad)
    elem_env = elem_env or (lambda i: {**env, t.name: i})
    envs = [] if se.concrete is None else [elem_env(i) for i in range(n)]
    pairs, S = _elements(se, "crun", k, envs)
    se.hyps.append(S >= n)
    se.crun[k] = S
    if se.concrete is not None:
        return ("pairs", k, n, pairs), 1 + cs + S
    return ("pairs", k, n, None), 1 + cs + S


def _map(se, t: MapA, env):
    a, ca = se.eval(t.arr, env)
    n = length_of(se, a)
    k = _body_k(t.body, Sub)
    return _source_loop(se, t, env, lambda i: element(a, i), n, 1 + ca, k)


def _split(se, k, n, pairs, elem):
    """The primal array and the backpropagators of a loop's element pairs."""
    if se.concrete is not None:
        firsts = [p[0] for p in pairs]
        fa = tuple(firsts) if elem is None else make_array(elem, firsts)
        return fa, SubBPs(k, n, [p[1] for p in pairs])
    return loop_array(se, k, n), SubBPs(k, n)


def _unzip(se, t: Unzip, env):
    v, ca = se.eval(t.arr, env)
    if not (isinstance(v, tuple) and len(v) == 4 and v[0] == "pairs"):
        raise SymbolicError("unzip of something other than a loop's pairs")
    _, k, n, pairs = v
    return _split(se, k, n, pairs, t.elem), 1 + ca + n


def _unzip_map(se, t: UnzipMap, env):
    a, ca = se.eval(t.arr, env)
    n = length_of(se, a)
    k = _body_k(t.body, SubChad)
    envs = [] if se.concrete is None else [{**env, t.name: element(a, i)} for i in range(n)]
    pairs, S = _elements(se, "crun", k, envs)
    se.hyps.append(S >= n)
    se.crun[k] = S
    return _split(se, k, n, pairs, t.elem), 1 + ca + S + n


# ------------------------------------------------------------------ dense cotangents


def _zeros(se, t: Zeros, env):
    s, cs = se.eval(t.size, env)
    n = count_of(se, s)
    if se.concrete is not None:
        z, w = zeros(n, t.elem)
        return z, 1 + cs + w
    return SymZeros(n), 1 + cs + n


def _collect(se, t: Collect, env):
    b, cb = se.eval(t.bag, env)
    if se.concrete is not None:
        pairs, w = collect(b, t.elem)
        cw = se.sym("cw", w)
        return SymPairs(b, cw, pairs), 1 + cb + cw
    cw = se.sym("cw")
    return SymPairs(b, cw), 1 + cb + cw


def dense_ctgs(se, bag, n, z, pairs, elem, cw):
    """scatter z pairs, z the n zeros and pairs collected from bag with work cw:
    (the dense cotangents, scatter's work sw, Σφ of the dense cotangents), with
    the bound on cw + sw."""
    if se.concrete is not None:
        slack = 0
        if not isinstance(elem, LR):  # plusv's slack on extension cotangents
            acc = list(z)
            idx = range(len(pairs)) if pairs.idx is None else pairs.idx.tolist()
            for j, i in enumerate(idx):
                slack += EXT_PLUS_SLACK * ext_leaves(acc[i], pairs.vals[j])
                acc[i], _ = plusv(acc[i], pairs.vals[j])
        out, w = scatter(z, pairs, elem)
        sw = se.sym("sw", w)
        phis = se.sym("Sphictg", sum(concrete_phi(x.item() if hasattr(x, "item") else x)
                                     for x in out))
        E = se.sym("E", bag_entries(bag))
        se.hyps.append(cw + sw <= se.phi(bag) + E + n - phis + slack)
        se.hyps.append(E <= n)
        return out, sw, phis
    sw, phis, E = se.sym("sw"), se.sym("Sphictg"), se.sym("E")
    se.hyps.append(phis >= n)
    se.hyps.append(cw + sw <= se.phi(bag) + E + n - phis)
    se.hyps.append(E <= n)  # the BAG_ENTRIES assumption (module docstring)
    return AggCtgs(n, phis), sw, phis


def _scatter(se, t: Scatter, env):
    z, cz = se.eval(t.dense, env)
    p, cp = se.eval(t.pairs, env)
    if not isinstance(p, SymPairs):
        raise SymbolicError("scatter of something other than collected pairs")
    if se.concrete is not None:
        out, sw, _ = dense_ctgs(se, p.bag, len(z), z, p.real, t.elem, p.work)
        return out, 1 + cz + cp + sw
    if not isinstance(z, SymZeros):
        raise SymbolicError("scatter of something other than zeros and collected pairs")
    out, sw, _ = dense_ctgs(se, p.bag, z.n, z, None, t.elem, p.work)
    return out, 1 + cz + cp + sw


def _scatter_bag(se, t: ScatterBag, env):
    a, ca = se.eval(t.arr, env)
    b, cb = se.eval(t.bag, env)
    n = length_of(se, a)
    if se.concrete is not None:
        z, zw = zeros(n, t.elem)
        pairs, w = collect(b, t.elem)
        cw = se.sym("cw", w)
        out, sw, _ = dense_ctgs(se, b, n, z, pairs, t.elem, cw)
        return out, 1 + ca + cb + zw + cw + sw
    cw = se.sym("cw")
    out, sw, _ = dense_ctgs(se, b, n, SymZeros(n), None, t.elem, cw)
    return out, 1 + ca + cb + n + cw + sw


def _barray(se, t: BArrayT, env):
    v, c = se.eval(t.vals, env)
    cost = 1 + c
    idx = None
    if t.idx is not None:
        idx, ci = se.eval(t.idx, env)
        cost += ci
    if se.concrete is not None:
        return BArray(v, idx), cost
    if not isinstance(v, AggCtgs):
        raise SymbolicError("BArray of something other than a loop's element cotangents")
    return OpaqueCtg(None, 1 + v.phi), cost


# ------------------------------------------------------------------ the reverse pass


def _sequence_scoped(se, t: SequenceScoped, env):
    fns, cf = se.eval(t.fns, env)
    ctgs, cc = se.eval(t.ctgs, env)
    if not isinstance(fns, SubBPs):
        raise SymbolicError("sequenceScoped over something other than a loop's backpropagators")
    cost = 1 + cf + cc
    inits = []
    for it in t.inits:
        v, c = se.eval(it, env)
        inits.append(v)
        cost += c
    n, k, L, keep = fns.n, fns.k, len(t.inits), t.keep
    cost += SEQ_ELEM_CONS * n + (2 if keep else 0)  # (+ bind seq finish)
    # running element i: bind (pure ()) k_i = 2 + ccall(k_i) + its action, where
    # ccall(k_i) = SEQ_APP + ccall_i + SEQ_SCOPE·L (+ SEQ_STORE) and the action is
    # the L scopes around the element's (+ the store's bind, call and pure ())
    per_elem = 2 + SEQ_APP + SEQ_SCOPE * L + L + (SEQ_STORE + 1 + (1 + len(keep)) + 1
                                                  if keep else 0)
    nk = se.subs[k]

    def act(e):
        if len(e) + L != nk:
            raise SymbolicError(f"the elements of sub-term {k} (context of {nk}) run in "
                                f"{len(e) + L} cells")
        phi0 = sum((se.phi(x) for x in e), 0)
        if se.concrete is not None:
            tot = dict(ccall=0, m=0, phictg=0)
            finals = [0] * L
            slots = [[None] * n for _ in keep]
            cells = tuple(e)
            for i in range(n):
                d = ctgs[i]
                d = d.item() if hasattr(d, "item") else d
                a, ccall = se.concrete.apply(fns.real[i], d)
                _, out, m = a(cells + tuple(inits))
                tot["ccall"] += ccall
                tot["m"] += m
                tot["phictg"] += concrete_phi(d)
                for j in range(L):
                    finals[j] += concrete_phi(out[len(e) + j])
                for s, j in zip(slots, keep):
                    s[i] = out[len(e) + j]
                cells = tuple(out[:len(e)])
            Sccall = se.sym(f"Sccall{k}", tot["ccall"])
            Sm = se.sym(f"Sm{k}", tot["m"])
            Sfinal = [se.sym(f"Sphifinal{k}", f) for f in finals]
            phictg = tot["phictg"]
            result = None
            for s, lt in reversed(list(zip(slots, t.keep_elem))):
                result = (dense_of(s, lt), result)
            e_out = cells
            seq_cost = 1 if n == 0 else 2 * (n - 1)
        else:
            if not isinstance(ctgs, AggCtgs):
                raise SymbolicError("sequenceScoped on something other than dense cotangents")
            phictg = ctgs.phi
            Sccall, Sm = se.sym(f"Sccall{k}"), se.sym(f"Sm{k}")
            Sfinal = [se.sym(f"Sphifinal{k}") for _ in range(L)]
            for s in Sfinal:
                se.hyps.append(s >= n)
            if se.empty_fork(n) == 0:
                seq_cost, e_out = 1, tuple(e)
            else:
                seq_cost = 2 * (n - 1)
                e_out = tuple(se.opaque_ctg(getattr(x, "lt", None), "phiout") for x in e)
            result = None
            for j in reversed(keep):
                result = (AggCtgs(n, Sfinal[j]), result)
        phin = sum((se.phi(x) for x in e_out), 0)
        phi_init = sum((se.phi(x) for x in inits), 0)
        lhs = (se.crun[k] + Sccall + n * (1 + nk) + Sm - phictg - n * phi_init
               - phi0 + phin + sum(Sfinal, 0) - n * nk)
        if k not in se.P:
            raise SymbolicError(f"sub-term {k}'s derivative runs but its primal did not")
        se.sub_hyps.append(SubHyp(k, lhs, se.P[k], n))
        c = n * per_elem + Sccall + Sm + seq_cost
        if keep:
            c = 1 + c + (1 + n * len(keep)) + 1  # bind seq finish; pure
        return result, e_out, c

    return Action(act), cost


def _array_lit(se, t: ArrayLit, env):
    items, cost = [], 1
    for e in t.elems:
        v, c = se.eval(e, env)
        items.append(v)
        cost += c
    if se.concrete is not None:
        return array_of(t.ty, items), cost
    a = Opaque("lit")
    a.length = len(items)
    return a, cost


EXTRA_RULES.update({
    ArrayLit: _array_lit, Build: _build, MapA: _map, Unzip: _unzip, UnzipMap: _unzip_map,
    Zeros: _zeros,
    Collect: _collect, Scatter: _scatter, ScatterBag: _scatter_bag, BArrayT: _barray,
    SequenceScoped: _sequence_scoped,
})


def loop_rules():
    def one(t, label=""):
        return lambda: [Instance(t, GAMMA, label)]

    el, res = AbsT(1), AbsT(2)

    return [
        RuleSpec("build", one(Build(Sub(1, Z), "i", Sub(2, res), ty=ArrayT(res)),
                              "no gather read")),
        RuleSpec("map", one(MapA("x", Sub(2, res), Sub(1, ArrayT(el)), ty=ArrayT(res)))),
    ]
