r"""Every fused node against its documented expansion: values AND exact step counts.

A fused node is one target node whose evaluation rule hand-codes the cost of a
longer computation (docs/cost-model.md, docs/arrays.md, docs/functions.md).
Nothing else checks those hand-coded numbers, so this file evaluates each fused
node and its expansion, written as a term of non-fused nodes, on several inputs
and sizes. It compares the values and the step counts: the construction cost,
and for monadic nodes also the run cost that `evm.run` reports, on the "map",
"array" and "parallel" runtimes. The parallel runtime runs with grain 1, so its
`then`s and `sequence`s really fork.

The expected numbers are written out here. The test never imports a cost
constant, so changing one (e.g. SEQ_ELEM_CONS in chad/arrays/evaluate.py) makes
it fail.

How the expansions are written
------------------------------
* Unrolling. When a fused node iterates over a runtime value (the n elements of
  the zipped arrays of sequenceScoped, the nodes of a recorded fold tree, the
  entries of an environment bag or a log), the test unrolls the loop for that
  value. It binds each element (f_i, d_i, a node's backpropagator, an entry) to
  a variable of the expansion's environment. Reading such a variable costs 1,
  the same as the documented "read".
* Pre-built closures. The documented costs charge the closures that a fused
  node makes per element as `lam` (1). Examples are the `k` of
  `bind (pure ()) k` in sequenceScoped, an unTree node's continuation, and the
  store and finish closures. The test makes them once, by evaluating their
  `lamwith` term, and the expansion reads them as a variable (1 step). A
  literal `lamwith [f_i, d_i, inits..]` would also pay its captures. That is
  (2 + m) more per element for sequenceScoped, which the node does not charge.
* The runtime's `sequence` and `then` have no term. The expansions use ThenEVM
  instead: a balanced tree for `sequence` (chad/runtime/protocol.py's default), a
  right-nested chain for envscatter and logfold (the order of their rules), and
  one ThenEVM for each unTree split. Running one costs exactly the runtime's 2
  per join, so run costs must agree exactly. Building one costs 4
  (test_then_evm), where the fused node builds the runtime's sequence for
  nothing and unTree's split charges 1. Each such difference is subtracted by
  name in the test that has it.
* Stand-ins. Storing a cotangent by position (unTree's leaves, the cells kept by
  sequenceScoped) has no term. Each test builds its expansion twice. In the
  "cost" variant a stand-in of exactly the documented cost replaces the store:
  `pure d` for a leaf (store 1, pure 1), `\r -> pure <1 + kept steps>` for a
  store, `\_ -> pure <1 + n steps>` for the final collection. In the "value"
  variant the store is an `add` into an extra cell of the run's environment,
  so the stored values can be compared. Both variants are run on the same
  cells.
* Primitives with no expansion (collect, scatter, the per-combine work of
  foldTree) are checked against their documented formulas on several sizes.
  Nodes with an expansion whose cost the docs define as a primitive's (gather,
  unzip, unzipMap, scatterBag, BFill, zeros, foldTree) are checked three ways:
  values against the expansion, cost against the documented formula, and the
  exact difference from the expansion's cost (see the table in
  docs/cost-model.md, "Arrays").

Covered: node, the expansion compared against, and c(expansion) - c(node) when
built. For the unrolled nodes, c(node) here leaves out the node's own 1 and its
operands, which it evaluates once. For runs the difference is 0 unless noted.

  ThenEVM a b        let x = b in bind a (lamwith [x] (\_ -> x))                  0
  SequenceScoped     sequence [bind (pure ()) K_i | i < n], with K_i the closure  4 (n - 1)
    fs ds inits keep \_ -> scope I_0 (.. scope I_m-1 (app F_i D_i)) [>>= STORE_i]
                     [>>= FINISH]; sequence = a balanced tree of ThenEVM;
                     K_i as a literal lamwith term: (2 + m) n more
  FoldTree (p. b) s  the source fold (p. fst b) s, in the same order              -(n + 3 (n - 1))
  GetA tr            fst of a pair                                                0
  UnTree d tr init   Fig. 10 unrolled over the recorded tree: A(leaf, D) = pure D, 1 if n > 1
                     A(node, D) = bind (scope INIT (app F D)) K, with K =         run: 3 per node
                     \res -> A(l, lfst (fst res)) >> A(r, lsnd (fst res))         + 1 per non-root
  Gather a ix        build (length ix) (i. a ! (ix ! i))                          4 m
  Unzip a            (build (length a) (i. fst (a ! i)), .. snd ..)               5 + 7 n
  UnzipMap (x. b) a  let m = map (x. b) a in unzip m                              3
  ScatterBag a d     scatter (zeros (length a)) (collect d)                       3
  BFillT a d         BArray (build (length a) (i. d))                             1
  Zeros s            build s (i. the zero term)                                   0; n on R
  Collect, Scatter   none (primitives): their documented formulas
  MkClosure, CApp    the source lam, app                                          0
                     the literal Pack / ClosedLam / Unpack / ClosedApp form       (k + 3) per
                                                                                  closure built,
                                                                                  (6k + 9) per call
  Pack, Unpack, ClosedLam, ClosedApp, LCastPack, LPackAs, LFunZero, LTagZero, EnvOneT, LogOneT:
                     the core node of their "as" row in docs/cost-model.md        0
  EnvScatter e ts    add t_1 d_1 >> (add t_2 d_2 >> ..), right-nested             entries + subs
                     (no entry: pure ())                                          + 4 (entries - 1)
                                                                                  (no entry: 2)
  LogFold l (x. b)   (let x = e_1 in b) >> ((let x = e_2 in b) >> ..)             entries
                     (no entry: pure ())                                          + 4 (entries - 1)
                                                                                  (no entry: 2)
No node's rule disagrees with its documented cost. The differences above come
from what the documented costs do not charge, and docs/cost-model.md lists them
("Against their expansions", and the closure paragraph of "Functions"). Each one
is asserted exactly.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from chad import features

features.load()  # the extensions' nodes, as the API and the CLI register them

from chad.errors import EvalError  # noqa: E402
from chad.linear import L_R, L_UN, LPairT, LSumT  # noqa: E402
from chad.terms import (  # noqa: E402
    AddEVM, App, BindEVM, Build, Case, Fold, Fst, Index, Inl, Lam, LCastL, Length, Let,
    LFst, LInl, LInr, LPair, LPairZero, LSnd, LSumZero, LUnit, MapA, Pair, Prim, PureEVM,
    ScopeEVM, Snd, ThenEVM, Unit, Var, free_vars, map_children, subterms,
)
from chad.types import ArrayT, R, Z  # noqa: E402
from chad.arrays.bag import BagT  # noqa: E402
from chad.arrays.nodes import (  # noqa: E402
    BArrayT, BEmptyT, BFillT, BOneT, Collect, FoldTree, Gather, GetA, Scatter, ScatterBag,
    SequenceScoped, UnTree, Unzip, UnzipMap, Zeros,
)
from chad.functions.terms import (  # noqa: E402
    CApp, ClosedApp, ClosedLam, EnvOneT, EnvScatter, LCastPack, LFunZero, LogFold, LogOneT,
    LPackAs, LTagZero, MkClosure, Pack, Unpack,
)
from chad.costmodel.evaluate import Evaluator  # noqa: E402
from chad.runtime import make_evm  # noqa: E402

RUNTIMES = ("map", "array", "parallel")

# Building a ThenEVM costs 4 (its expansion: let 1, bind 1, lam capturing x 1 + 1),
# on top of its two actions; test_then_evm checks it.
THEN_TERM = 4


@pytest.fixture(scope="module", params=RUNTIMES)
def evm(request):
    # grain=1: the parallel runtime forks every then/sequence whose sides weigh >= 1
    opts = {"grain": 1, "max_workers": 2} if request.param == "parallel" else {}
    e = make_evm(request.param, **opts)
    yield e
    e.close()


# ----------------------------------------------------------------- helpers


def ev(evm, t, env=None):
    """(value, steps) of t in env (a copy: the rules bind and restore names)."""
    return Evaluator(None, evm).eval(t, dict(env or {}))


def run(evm, action, cells):
    """evm.run: (result, final cells, steps)."""
    r, out, c = evm.run(action, list(cells))
    return r, list(out), c


def prebuild(evm, env: dict, name: str, lam: Lam) -> None:
    """Evaluate the closure `lam` in env and bind it to `name` (see the module
    doc: a closure the fused node charges as `lam`, read here as a variable)."""
    env[name], _ = ev(evm, lam, env)


def lam(x: str, body, *caps: str) -> Lam:
    return Lam(x, None, body, tuple(caps))


def closed_lam(x: str, body) -> Lam:
    """lamwith [its free variables] (\\x -> body)."""
    return Lam(x, None, body, tuple(v for v in free_vars(body) if v != x))


def lit(x) -> Prim:
    return Prim("LIT", Unit(), const=float(x))


def ilit(j) -> Prim:
    return Prim("ILIT", Unit(), const=int(j))


def mul(a, b) -> Prim:
    return Prim("MUL", Pair(a, b))


def plus(a, b) -> Prim:
    return Prim("ADD", Pair(a, b))


def toreal(a) -> Prim:
    return Prim("TOREAL", a)


def add(level: int, v) -> AddEVM:
    return AddEVM(level, f"cell{level}", v)


def fill(c: int):
    """A term of exactly c >= 1 steps whose value nobody reads: inl^(c-1) unit."""
    assert c >= 1
    t = Unit()
    for _ in range(c - 1):
        t = Inl(t)
    return t


def then_tree(acts: list):
    """The runtime's default `sequence` as terms: a balanced tree of ThenEVM
    (split at len // 2), n - 1 of them."""
    if len(acts) == 1:
        return acts[0]
    mid = len(acts) // 2
    return ThenEVM(then_tree(acts[:mid]), then_tree(acts[mid:]))


def then_chain(acts: list):
    """a1 >> (a2 >> (... >> an)): n - 1 ThenEVMs, right-nested."""
    out = acts[-1]
    for a in reversed(acts[:-1]):
        out = ThenEVM(a, out)
    return out


def real(x) -> float:
    """A real cotangent cell: None (the sparse zero) as 0.0."""
    return 0.0 if x is None else float(x)


def same_array(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.all(a == b))
    return tuple(a) == tuple(b)


# ================================================================= ThenEVM

_then_names = itertools.count()


def expand_then(t):
    """Replace every ThenEVM in t by its documented expansion
    `let x = b in bind a (lamwith [x] (\\_ -> x))` (x fresh)."""
    t = map_children(t, expand_then)
    if isinstance(t, ThenEVM):
        x = f"x$then{next(_then_names)}"
        return Let(x, t.second, BindEVM(t.first, Lam(f"_$then{next(_then_names)}", None,
                                                     Var(x), (x,))))
    return t


THEN_CASES = {
    "add >> add": ThenEVM(add(0, Var("x")), add(1, Var("y"))),
    "pure >> add of a product": ThenEVM(PureEVM(lit(3.0)), add(0, mul(Var("x"), Var("y")))),
    "scope >> pure": ThenEVM(ScopeEVM(Var("z"), ThenEVM(add(3, Var("x")), add(0, Var("y")))),
                             PureEVM(Var("x"))),
    "nested both sides": ThenEVM(ThenEVM(add(0, Var("x")), add(1, Var("x"))),
                                 ThenEVM(add(0, Var("y")), ThenEVM(add(1, Var("y")),
                                                                   PureEVM(Var("x"))))),
    "bind >> add": ThenEVM(BindEVM(PureEVM(Var("x")), lam("v", add(2, Var("v")))),
                           add(1, Var("x"))),
}


@pytest.mark.parametrize("case", list(THEN_CASES))
def test_then_evm(evm, case):
    """`a >> b` costs exactly `let x = b in bind a (lamwith [x] (\\_ -> x))`:
    4 + c(a) + c(b) to build, 1 + run a + 1 + run b to run (chad/terms.py)."""
    fused = THEN_CASES[case]
    expansion = expand_then(fused)
    assert not any(isinstance(s, ThenEVM) for s in subterms(expansion))
    env = {"x": 1.5, "y": 2.0, "z": None}
    cells = [0.0, 0.0, None]
    fa, fc = ev(evm, fused, env)
    ea, ec = ev(evm, expansion, env)
    assert fc == ec
    # and the 4 itself, on the outermost node
    _, ca = ev(evm, fused.first, env)
    _, cb = ev(evm, fused.second, env)
    assert fc == 4 + ca + cb
    fr, fcells, frc = run(evm, fa, cells)
    er, ecells, erc = run(evm, ea, cells)
    assert (fr, fcells) == (er, ecells)
    assert frc == erc


# ================================================================= sequenceScoped

# name: (inits, keep, keep_elem). z is a real cell's sparse zero (None).
SEQ_CONFIGS = {
    "build: the unit cell of i": ((LUnit(),), (), ()),
    "one real cell": ((Var("z"),), (), ()),
    "unit and real cells": ((LUnit(), Var("z")), (), ()),
    "map: the cell of x kept": ((Var("z"),), (0,), (L_R,)),
    "build with two gathers: cells 1, 2 kept": (
        (LUnit(), Var("z"), Prim("LZERO", LUnit())), (1, 2), (L_R, L_R)),
    "a unit cell kept": ((LUnit(),), (0,), (L_UN,)),
}


def _seq_setup(config: str, n: int):
    """The fused node, its environment, and the level L of the first scope cell.

    Cells: level 0 an outer real accumulator; levels 1 .. K*n the value
    variant's store cells (K = number of kept cells; cell of kept k, element i
    at 1 + k*n + i); the scopes push levels L, L + 1, ... (inits[0] outermost).
    Element i's backpropagator, applied to d, adds i*d to level 0, (j + 2)*d to
    the real scope cell j (unit to a unit cell), and returns toreal i."""
    inits, keep, keep_elem = SEQ_CONFIGS[config]
    L = 1 + len(keep) * n
    steps = [add(0, mul(Var("d"), toreal(Var("i"))))]
    for j, init in enumerate(inits):
        steps.append(add(L + j, LUnit() if isinstance(init, LUnit)
                         else mul(Var("d"), lit(j + 2))))
    steps.append(PureEVM(toreal(Var("i"))))
    fs = Build(Var("n"), "i", lam("d", then_chain(steps), "i"))
    env = {"n": n, "z": None, "ds": np.arange(1.0, n + 1.0)}
    node = SequenceScoped(fs, Var("ds"), inits, keep, keep_elem)
    cells = [0.0] + [None] * (len(keep) * n)
    return node, env, cells, L


def _seq_expansion(evm, node, env, n: int, variant: str):
    """The unrolled expansion (module doc) and its environment. Variants:
    "cost" (stand-ins of the documented costs, the closures pre-built),
    "literal" (the same with the closures written inline as `lamwith` terms),
    "value" (the kept cells stored into cells of the run)."""
    env = dict(env)
    fs, _ = ev(evm, node.fns, env)
    ds, _ = ev(evm, node.ctgs, env)
    m, keep = len(node.inits), node.keep
    for j, init in enumerate(node.inits):
        env[f"I{j}"], _ = ev(evm, init, env)
    elems = []
    for i in range(n):
        env[f"F{i}"], env[f"D{i}"] = fs[i], float(ds[i])
        body = App(Var(f"F{i}"), Var(f"D{i}"))
        for j in reversed(range(m)):
            body = ScopeEVM(Var(f"I{j}"), body)
        if keep:
            if variant != "value":  # the store: 1 + (kept cells) steps, then pure (1)
                store = lam("r", PureEVM(fill(len(keep))))
            else:                   # the store: add each kept cell to its own cell
                store = closed_lam("r", then_chain(
                    [add(1 + k * n + i, Fst(_snd_n(Var("r"), j))) for k, j in enumerate(keep)]
                    + [PureEVM(Unit())]))
            if variant == "literal":
                body = BindEVM(body, store)
            else:
                prebuild(evm, env, f"STORE{i}", store)
                body = BindEVM(body, Var(f"STORE{i}"))
        if variant == "literal":
            elems.append(BindEVM(PureEVM(Unit()), closed_lam("_", body)))
            continue
        prebuild(evm, env, f"K{i}", closed_lam("_", body))
        elems.append(BindEVM(PureEVM(Unit()), Var(f"K{i}")))
    term = then_tree(elems)
    if keep:
        finish = PureEVM(Unit() if variant == "value" else fill(n * len(keep)))
        prebuild(evm, env, "FINISH", lam("_", finish))
        term = BindEVM(term, Var("FINISH"))
    return term, env


def _snd_n(t, j: int):
    for _ in range(j):
        t = Snd(t)
    return t


@pytest.mark.parametrize("n", [1, 2, 3, 7])
@pytest.mark.parametrize("config", list(SEQ_CONFIGS))
def test_sequence_scoped(evm, config, n):
    """sequenceScoped inits fs ds against `sequence [bind (pure ()) K_i]` with
    K_i = \\_ -> scope I_0 (... (app F_i D_i)) (>>= STORE_i when cells are kept,
    then >>= FINISH). The documented costs (docs/cost-model.md):
    build 1 + c(fs) + c(ds) + sum c(inits) + 4n (+ 2 with kept cells); run per
    element 1 + 1 + ccall(k) + run of k's action, with ccall(k) = 3 + ccall(f d)
    + 2 per scope (+ 2 with kept cells); sequence 2 (n - 1); final bind
    1 + (1 + n * kept) + 1."""
    node, env, cells, _ = _seq_setup(config, n)
    fa, fc = ev(evm, node, env)
    cost_term, cost_env = _seq_expansion(evm, node, env, n, "cost")
    value_term, value_env = _seq_expansion(evm, node, env, n, "value")
    ea, ec = ev(evm, cost_term, cost_env)
    va, _ = ev(evm, value_term, value_env)

    operands = 1 + sum(ev(evm, t, env)[1] for t in (node.fns, node.ctgs, *node.inits))
    # The node evaluates its operands once; the unrolled expansion reads the
    # zipped elements instead; the runtime's sequence is built for free, the
    # balanced ThenEVM tree standing for it costs THEN_TERM per join.
    assert fc == operands + ec - THEN_TERM * (n - 1), (fc, operands, ec)
    # k written as a literal lamwith [F_i, D_i, I_0 ..] pays its 2 + m captures,
    # which the node's `lam (1)` does not charge; its runs cost the same
    literal_term, literal_env = _seq_expansion(evm, node, env, n, "literal")
    la, lc = ev(evm, literal_term, literal_env)
    assert lc - ec == (2 + len(node.inits)) * n

    fr, fcells, frc = run(evm, fa, cells)
    er, ecells, erc = run(evm, ea, cells)
    vr, vcells, _ = run(evm, va, cells)
    assert frc == erc == run(evm, la, cells)[2]
    assert fcells[0] == ecells[0] == vcells[0]
    if not node.keep:
        assert fr == er  # the last element's (cells, result of f d)
        return
    arrays, k = [], fr
    while k is not None:
        arrays.append(k[0])
        k = k[1]
    assert len(arrays) == len(node.keep)
    for kk, (arr, lt) in enumerate(zip(arrays, node.keep_elem)):
        stored = vcells[1 + kk * n: 1 + (kk + 1) * n]
        if lt == L_R:
            assert same_array(arr, np.array([real(x) for x in stored]))
        else:
            assert tuple(arr) == tuple(stored)


@pytest.mark.parametrize("config", list(SEQ_CONFIGS))
def test_sequence_scoped_empty(evm, config):
    """n = 0: the empty sequence is `pure ()` (runtime: cost 1), built for free
    (no term: formula only); with kept cells, the final bind returns empty arrays:
    build + 2, run 1 + 1 + (1 + 0) + 1."""
    node, env, cells, _ = _seq_setup(config, 0)
    fa, fc = ev(evm, node, env)
    operands = 1 + sum(ev(evm, t, env)[1] for t in (node.fns, node.ctgs, *node.inits))
    kept = bool(node.keep)
    assert fc == operands + (2 if kept else 0)
    r, out, c = run(evm, fa, cells)
    assert c == 1 + len(cells) + (4 if kept else 1)
    assert out == cells
    if kept:
        arrays = []
        while r is not None:
            arrays.append(r[0])
            r = r[1]
        assert [len(a) for a in arrays] == [0] * len(node.keep)
    else:
        assert r is None


# ================================================================= foldTree, getA, unTree

# The combine's CHAD'd body: p : R * R -> (y, backpropagator). The
# backpropagator adds d to the outer cell 0 and its cotangent of p to the cell of
# p, which unTree's scope pushes at level L (the number of outer cells).
def _combine(kind: str, L: int):
    p = Var("p")
    if kind == "product":
        bp = lam("d", ThenEVM(add(0, Var("d")),
                              add(L, LPair(mul(Var("d"), Snd(p)), mul(Var("d"), Fst(p))))), "p")
        return Pair(mul(Fst(p), Snd(p)), bp)
    if kind == "first, sparse":  # the cell of p stays `nothing`: both halves get zerov
        return Pair(Fst(p), lam("d", PureEVM(Unit())))
    raise ValueError(kind)


def _reference_tree(evm, body, xs, env):
    """The documented reduction order, computed by the test: split at
    (lo + hi) // 2, combine (left, right). Returns (value, {(lo, hi): f})."""
    bps = {}

    def go(lo, hi):
        if hi - lo == 1:
            return float(xs[lo])
        mid = (lo + hi) // 2
        left, right = go(lo, mid), go(mid, hi)
        (y, f), _ = ev(evm, body, {**env, "p": (left, right)})
        bps[(lo, hi)] = f
        return y

    return go(0, len(xs)), bps


def _untree_expansion(evm, env, bps, n: int, variant: str):
    """Fig. 10 unrolled over the tree (module doc):
    A(leaf j, D) = pure D                     ("cost": store 1, pure 1)
                 = add (1 + j) D              ("value": leaf j's cotangent to cell 1 + j)
    A(node, D)   = bind (scope INIT (app F D)) K,
                   K = \\res -> A(left, lfst (fst res)) >> A(right, lsnd (fst res))
    then bind (A(root, DY)) FINISH."""
    env = dict(env)

    def a(lo, hi, d):
        if hi - lo == 1:
            return PureEVM(d) if variant == "cost" else add(1 + lo, d)
        mid = (lo + hi) // 2
        cell = Fst(Var("res"))
        split = ThenEVM(a(lo, mid, LFst(cell, L_R)), a(mid, hi, LSnd(cell, L_R)))
        f, k = f"F{lo}_{hi}", f"K{lo}_{hi}"
        env[f] = bps[(lo, hi)]
        prebuild(evm, env, k, closed_lam("res", split))
        return BindEVM(ScopeEVM(Var("INIT"), App(Var(f), d)), Var(k))

    root = a(0, n, Var("DY"))
    prebuild(evm, env, "FINISH", lam("_", PureEVM(fill(n) if variant == "cost" else Unit())))
    return BindEVM(root, Var("FINISH")), env


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("kind", ["product", "first, sparse"])
def test_fold_tree_get_a_untree(evm, kind, n):
    """foldTree / getA / unTree, the forward and reverse pass of fold.

    foldTree: documented as 1 + c(s) + n (the leaves) + per combine (4 + c(body)).
    No term builds Leaf / Node, so the expansion compared against is the source
    fold of `fst body`, in the same balanced order: same value, bit for bit, and
    exactly n + 3 (n - 1) steps fewer (1 per leaf; 4 per combine where fst costs 1).

    unTree, against the unrolled Fig. 10 of _untree_expansion. The documented
    costs (docs/cost-model.md): build 1 + c(d) + c(tr) + c(init) + 2 + the root's
    construction, a node's 6 + ccall(f d'), a leaf's 2; a node's run
    1 + 1 + run (f d') + ccall(split) (5 + 1 per zerov + both children's
    construction) + 2 + both children, a leaf's 1; final 1 + (1 + n) + 1.
    What the expansion's terms pay and the node does not:
      * per node built: reading F (1): the node takes f from the tree;
      * per split: the ThenEVM (4) where the split charges `then` 1.
    Everything else matches one for one: a half's `lfst (fst res)` (lfst, fst,
    read res) against the split's lfst, its read of the cell and the half's read
    of d' (the leaf's store, the node's app f d').
    The node built at construction time is the root; the others are built by
    their parent's split, while the action runs."""
    xs = np.arange(2.0, n + 2.0)  # 2, 3, ...: products stay exact
    L = 1 + n  # outer cells: 0 accumulator, 1 .. n the value variant's leaves
    body = _combine(kind, L)
    env = {"xs": xs, "dy": 2.0}

    # ---- foldTree and getA
    tree, c_tree = ev(evm, FoldTree("p", body, Var("xs")), env)
    y_ref, bps = _reference_tree(evm, body, xs, env)
    c_body = ev(evm, body, {**env, "p": (1.0, 1.0)})[1]
    assert c_tree == 1 + 1 + n + (n - 1) * (4 + c_body)
    y_fold, c_fold = ev(evm, Fold("p", Fst(body), Var("xs")), env)
    assert c_tree - c_fold == n + 3 * (n - 1)
    y_tree, c_get = ev(evm, GetA(Var("tr")), {"tr": tree})
    assert y_tree == y_fold == y_ref
    assert c_get == ev(evm, Fst(Var("pr")), {"pr": (1.0, 2.0)})[1] == 2

    # ---- unTree
    env = {**env, "tr": tree}
    node = UnTree(Var("dy"), Var("tr"), LPairZero(), L_R)
    fa, fc = ev(evm, node, env)
    xenv = {**env, "DY": env["dy"], "INIT": ev(evm, node.init, env)[0]}
    cost_term, cost_env = _untree_expansion(evm, xenv, bps, n, "cost")
    value_term, value_env = _untree_expansion(evm, xenv, bps, n, "value")
    ea, ec = ev(evm, cost_term, cost_env)
    va, _ = ev(evm, value_term, value_env)

    nodes = n - 1
    operands = 1 + sum(ev(evm, t, env)[1] for t in (node.ctg, node.tree, node.init))
    root_is_node = 1 if nodes else 0
    assert fc == operands + ec - root_is_node * 1, (fc, operands, ec)

    cells = [0.0] + [None] * n
    fr, fcells, frc = run(evm, fa, cells)
    er, ecells, erc = run(evm, ea, cells)
    vr, vcells, _ = run(evm, va, cells)
    per_split = THEN_TERM - 1
    assert frc == erc - nodes * per_split - (nodes - root_is_node) * 1, (frc, erc)
    assert fcells[0] == ecells[0] == vcells[0]
    assert same_array(fr, np.array([real(x) for x in vcells[1:]]))
    if kind == "product":  # and the chain rule: leaf j gets dy * prod(xs) / xs[j]
        assert same_array(fr, env["dy"] * np.prod(xs) / xs)


# ================================================================= gather, unzip, BFill, zeros

GATHER_ARRAYS = {
    "reals": (np.array([0.5, 1.5, 2.5, 3.5, 4.5]), R),
    "ints": (np.array([7, 8, 9], dtype=np.int64), Z),
    "pairs": (((1.0, 2.0), (3.0, 4.0), (5.0, 6.0), (7.0, 8.0)), None),
}


@pytest.mark.parametrize("m", [0, 1, 4, 9])
@pytest.mark.parametrize("kind", list(GATHER_ARRAYS))
def test_gather(evm, kind, m):
    """gather a ix = build (length ix) (i. a ! (ix ! i)) (chad/arrays/nodes.py):
    the same array. Cost (a primitive's, docs/cost-model.md): 1 + c(a) + c(ix) +
    length ix; the expansion costs exactly 4 per element more (it reads a, ix
    and i and indexes twice: 5 steps where gather charges 1)."""
    a, elem = GATHER_ARRAYS[kind]
    ix = np.array([(3 * k + 1) % len(a) for k in range(m)], dtype=np.int64)
    env = {"a": a, "ix": ix}
    fused = Gather(Var("a"), Var("ix"))
    expansion = Build(Length(Var("ix")), "i", Index(Var("a"), Index(Var("ix"), Var("i"))),
                      ty=None if elem is None else ArrayT(elem))
    fv, fc = ev(evm, fused, env)
    xv, xc = ev(evm, expansion, env)
    assert same_array(fv, xv)
    assert fc == 1 + 1 + 1 + m
    assert xc - fc == 4 * m


def test_gather_reports_the_expansions_first_bad_index(evm):
    """One bounds check, reporting the first bad index, as the build would."""
    a = np.array([1.0, 2.0])
    env = {"a": a, "ix": np.array([1, 0, 5, -1, 7], dtype=np.int64)}
    msgs = []
    for t in (Gather(Var("a"), Var("ix")),
              Build(Length(Var("ix")), "i", Index(Var("a"), Index(Var("ix"), Var("i"))))):
        with pytest.raises(EvalError) as info:
            ev(evm, t, env)
        msgs.append(str(info.value))
    assert msgs[0] == msgs[1]
    assert "index 5 out of range for an array of length 2" in msgs[0]


@pytest.mark.parametrize("n", [0, 1, 3, 8])
@pytest.mark.parametrize("first", ["reals", "tuples"])
def test_unzip(evm, first, n):
    """unzip a = (build (length a) (i. fst (a ! i)), build (length a) (i. snd (a ! i))):
    the same pair of arrays (the first as numpy when its element type is given).
    Cost (a primitive's): 1 + c(a) + n; the expansion costs exactly 5 + 7n more
    (pair, two builds and lengths: 7 against the node's 1 and the read of a; per
    element 2 * (fst, !, a, i) = 8 against 1)."""
    pairs = tuple((float(i) + 0.5, (i, -i)) for i in range(n))
    elem = R if first == "reals" else None
    env = {"a": pairs}
    fused = Unzip(Var("a"), elem)

    def half(proj, ty):
        return Build(Length(Var("a")), "i", proj(Index(Var("a"), Var("i"))), ty=ty)

    expansion = Pair(half(Fst, None if elem is None else ArrayT(elem)), half(Snd, None))
    (f1, f2), fc = ev(evm, fused, env)
    (x1, x2), xc = ev(evm, expansion, env)
    assert same_array(f1, x1) and tuple(f2) == tuple(x2)
    assert fc == 1 + 1 + n
    assert xc - fc == 5 + 7 * n


# name: (the mapped array, the body (x. a CHAD'd element: a pair), elem)
UNZIP_MAP_CASES = {
    # (2x, \d -> add cell 0 (d * x)): the derivative's shape, closures as seconds
    "reals, closures": (lambda n: np.arange(0.5, n + 0.5),
                        Pair(mul(Var("x"), lit(2.0)),
                             lam("d", add(0, mul(Var("d"), Var("x"))), "x")), R),
    "ints to an Array Z": (lambda n: np.arange(n, dtype=np.int64),
                           Pair(Prim("IMUL", Pair(Var("x"), Var("x"))), Pair(Var("x"), Unit())),
                           Z),
    "pairs, no element type": (lambda n: tuple((float(i), (i, -i)) for i in range(n)),
                               Pair(Snd(Var("x")), Fst(Var("x"))), None),
}


@pytest.mark.parametrize("n", [0, 1, 3, 8])
@pytest.mark.parametrize("case", list(UNZIP_MAP_CASES))
def test_unzip_map(evm, case, n):
    """unzipMap (x. b) a = let m = map (x. b) a in unzip m (chad/arrays/nodes.py,
    the forward pass of map): the same pair of arrays (the first as numpy when
    the element type is given; the backpropagators the same closures: running
    each on the same cotangent gives the same cells and costs). Cost (a
    primitive's): 1 + c(a) + Σ c(b) + n, the map's body costs and the unzip's n;
    the expansion costs exactly 3 more, the steps of the intermediate array of
    pairs it removes: the let, the read of m, and the head of unzip (map and
    unzip become one node)."""
    make, body, elem = UNZIP_MAP_CASES[case]
    a = make(n)
    env = {"a": a}
    fused = UnzipMap("x", body, Var("a"), elem)
    expansion = Let("m", MapA("x", body, Var("a")), Unzip(Var("m"), elem))
    (f1, f2), fc = ev(evm, fused, env)
    (x1, x2), xc = ev(evm, expansion, env)
    assert same_array(f1, x1)
    if elem is not None:
        assert isinstance(f1, np.ndarray) and f1.dtype == x1.dtype and len(f1) == n
    assert len(f2) == len(x2) == n
    if case == "reals, closures":
        for f, g in zip(f2, x2):
            acts = [ev(evm, App(Var("f"), lit(1.5)), {"f": h}) for h in (f, g)]
            assert acts[0][1] == acts[1][1]
            assert run(evm, acts[0][0], [0.0]) == run(evm, acts[1][0], [0.0])
    else:
        assert tuple(f2) == tuple(x2)
    bodies = sum(ev(evm, body, {"x": a[i]})[1] for i in range(n))
    assert fc == 1 + 1 + bodies + n
    assert xc - fc == 3


@pytest.mark.parametrize("case", ["an index out of range", "an Array Z element outside int64"])
def test_unzip_map_raises_the_expansions_error(evm, case):
    """The same error as `let m = map .. in unzip m`, from the same element: the
    body's errors in element order, then (Array Z) the first element outside
    int64, once every element has been evaluated."""
    if case == "an index out of range":
        env = {"a": np.array([1, 0, 5, 7], dtype=np.int64), "xs": np.array([1.0, 2.0])}
        body, elem = Pair(Index(Var("xs"), Var("x")), Unit()), R
        want = "index 5 out of range for an array of length 2"
    else:
        big = 2 ** 40
        env = {"a": np.array([3, big, 2 * big], dtype=np.int64)}
        body, elem = Pair(Prim("IMUL", Pair(Var("x"), Var("x"))), Unit()), Z
        want = f"outside the 64-bit range -2**63 .. 2**63-1: {big * big}"
    msgs = []
    for t in (UnzipMap("x", body, Var("a"), elem),
              Let("m", MapA("x", body, Var("a")), Unzip(Var("m"), elem))):
        with pytest.raises(EvalError) as info:
            ev(evm, t, env)
        msgs.append(str(info.value))
    assert msgs[0] == msgs[1]
    assert want in msgs[0]


def _dense(evm, bag, n: int, lt):
    """scatter (zeros n) (collect bag): the dense array a bag stands for."""
    v, _ = ev(evm, Scatter(Zeros(Var("n"), lt), Collect(Var("b"), lt), lt), {"b": bag, "n": n})
    return v


@pytest.mark.parametrize("n", [0, 1, 5])
def test_bfill(evm, n):
    """BFill a d = BArray [d, ..., d] (length a) = BArray (build (length a) (i. d)):
    the same bag. Cost (a primitive's): 1 + c(a) + c(d) + n; the expansion costs
    exactly 1 more (BArray, build and length: 3 nodes against BFill's 1 and its
    read of d; per element the same 1)."""
    env = {"a": np.arange(float(n)), "d": 2.5}
    fused = BFillT(Var("a"), Var("d"))
    expansion = BArrayT(Build(Length(Var("a")), "i", Var("d"), ty=ArrayT(R)))
    fv, fc = ev(evm, fused, env)
    xv, xc = ev(evm, expansion, env)
    assert same_array(_dense(evm, fv, n, L_R), _dense(evm, xv, n, L_R))
    assert same_array(_dense(evm, fv, n, L_R), np.full(n, 2.5))
    assert fc == 1 + 1 + 1 + n
    assert xc - fc == 1


ZERO_TERMS = {
    # linear type: its zero term (docs/cost-model.md: lunit, lpairzero, lsumzero,
    # BEmpty cost 1; prim LZERO lunit costs 1 + 1)
    "unit": (L_UN, LUnit(), None),
    "pair": (LPairT(L_R, L_R), LPairZero(), None),
    "sum": (LSumT(L_R, L_UN), LSumZero(), None),
    "array (bag)": (BagT(L_R), BEmptyT(), None),
    "real": (L_R, Prim("LZERO", LUnit()), ArrayT(R)),
}


@pytest.mark.parametrize("n", [0, 1, 6])
@pytest.mark.parametrize("kind", list(ZERO_TERMS))
def test_zeros(evm, kind, n):
    """zeros s = build s (i. 0) (the paper's; chad/arrays/nodes.py): the same
    array. Cost 1 + c(s) + n: one zerov per element (zerov costs 1 at every
    type). That is exactly the expansion's cost when the zero *term* costs 1,
    every type but R: the zero term of R, `prim LZERO lunit`, costs 2, so on
    reals zeros is exactly n steps cheaper than its expansion (documented in
    docs/cost-model.md, "Arrays")."""
    lt, zero, ty = ZERO_TERMS[kind]
    env = {"n": n}
    fv, fc = ev(evm, Zeros(Var("n"), lt), env)
    xv, xc = ev(evm, Build(Var("n"), "i", zero, ty=ty), env)
    assert same_array(fv, xv)
    assert fc == 1 + 1 + n
    assert xc - fc == (n if kind == "real" else 0)


# ================================================================= collect, scatter (primitives)


def _bag(evm, parts: list, env=None):
    """The bag p_1 + ... + p_k made by the EVM: `add 0 p_1 >> ... >> add 0 p_k`
    from the cell `nothing` (add's plusv puts the new part on the left:
    BPlus(p_k, ... BPlus(p_2, p_1)))."""
    if not parts:
        return None
    act, _ = ev(evm, then_chain([add(0, p) for p in parts]), env)
    _, cells, _ = run(evm, act, [None])
    return cells[0]


BAGS = {
    # name: (parts, n): (i, v) a BOne of a real; [vals] a dense BArray;
    # ([vals], [idx]) a BArray at those indices
    "empty": ([], 4),
    "one BOne": ([(2, 1.5)], 4),
    "BOnes with a repeated index": ([(0, 1.0), (3, 2.0), (0, 4.0), (1, 0.5)], 4),
    "a dense BArray": ([[1.0, 2.0, 3.0]], 3),
    "BArray with indices, BOnes": ([(1, 1.0), ([5.0, 6.0], [2, 0]), (2, 0.25)], 3),
    "two BArrays": ([[1.0, 2.0], ([3.0, 4.0, 5.0], [4, 4, 0])], 5),
}


def _bag_parts(parts):
    """(terms, their environment, the pairs of each part, BArray entries)."""
    env, terms, pairs, entries = {}, [], [], 0
    for k, p in enumerate(parts):
        if isinstance(p, tuple) and isinstance(p[0], int):
            terms.append(BOneT(ilit(p[0]), lit(p[1])))
            pairs.append([p])
            continue
        vals, idx = (p, None) if isinstance(p, list) else p
        env[f"v{k}"] = np.array(vals)
        if idx is not None:
            env[f"ix{k}"] = np.array(idx, dtype=np.int64)
        terms.append(BArrayT(Var(f"v{k}"), None if idx is None else Var(f"ix{k}")))
        pairs.append(list(zip(range(len(vals)) if idx is None else idx, vals)))
        entries += len(vals)
    return terms, env, pairs, entries


@pytest.mark.parametrize("name", list(BAGS))
def test_collect_and_scatter_formulas(evm, name):
    """collect and scatter are primitives with no expansion (Efficient CHAD (Smeding & Vákár), §7: scatter
    is a new primitive; collect flattens the bag). Documented costs:
    collect b: 1 + c(b) + (constructors in b) + (entries of its BArrays);
    scatter z ps: 1 + c(z) + c(ps) + the plusv cost of each pair (1 for reals).
    Values: the pairs left to right, and the dense sums."""
    parts, n = BAGS[name]
    terms, env, part_pairs, entries = _bag_parts(parts)
    bag = _bag(evm, terms, env)
    order = [pr for part in reversed(part_pairs) for pr in part]  # see _bag
    constructors = max(1, 2 * len(parts) - 1)  # the parts and the BPluses (BEmpty: 1)
    pairs, cc = ev(evm, Collect(Var("b"), L_R), {"b": bag})
    assert cc == 1 + 1 + constructors + entries
    idx = range(len(pairs)) if pairs.idx is None else [int(i) for i in pairs.idx]
    assert list(zip(idx, map(float, pairs.vals))) == [(int(i), float(v)) for i, v in order]

    dense = np.zeros(n)
    for i, v in order:
        dense[i] += v
    out, sc = ev(evm, Scatter(Var("z"), Var("ps"), L_R), {"z": np.zeros(n), "ps": pairs})
    assert same_array(out, dense)
    assert sc == 1 + 1 + 1 + len(order)


def test_scatter_of_pairs_charges_plusv(evm):
    """scatter on non-real cotangents adds with plusv, and charges its cost:
    plusv(nothing, v) = 1, plusv((a, b), (c, d)) = 1 + 1 + 1 (docs/cost-model.md)."""
    lt = LPairT(L_R, L_R)
    entries = [(0, (1.0, 2.0)), (2, (3.0, 4.0)), (0, (0.5, 0.25)), (0, (1.0, 1.0))]
    terms = [BOneT(ilit(i), LPair(lit(a), lit(b))) for i, (a, b) in entries]
    bag = _bag(evm, terms)
    out, c = ev(evm, Scatter(Zeros(Var("n"), lt), Collect(Var("b"), lt), lt), {"b": bag, "n": 3})
    c_zeros = 1 + 1 + 3
    c_collect = 1 + 1 + (2 * len(entries) - 1)
    # the bag holds the entries last-first: index 0 gets (1, 1), then (0.5, 0.25), then (1, 2)
    assert c == 1 + c_zeros + c_collect + (1 + 3 + 3) + 1
    assert out == ((2.5, 3.25), None, (3.0, 4.0))


@pytest.mark.parametrize("name", list(BAGS))
def test_scatter_bag(evm, name):
    """scatterBag a b = scatter (zeros (length a)) (collect b) (chad/arrays/nodes.py,
    the dense element cotangents of map's reverse pass): the same dense array.
    Cost: 1 + c(a) + c(b) + n (the zeros) + collect's work (constructors +
    BArray entries) + scatter's (the plusv of each pair, 1 for reals): the work
    of the written-out term, which costs exactly 3 more (the heads of length,
    zeros and collect: four nodes become one)."""
    parts, n = BAGS[name]
    terms, env, part_pairs, entries = _bag_parts(parts)
    bag = _bag(evm, terms, env)
    pairs = sum(len(p) for p in part_pairs)
    constructors = max(1, 2 * len(parts) - 1)
    env = {"a": np.arange(float(n)), "b": bag}
    fv, fc = ev(evm, ScatterBag(Var("a"), Var("b"), L_R), env)
    expansion = Scatter(Zeros(Length(Var("a")), L_R), Collect(Var("b"), L_R), L_R)
    xv, xc = ev(evm, expansion, env)
    assert same_array(fv, xv)
    assert same_array(fv, _dense(evm, bag, n, L_R))
    assert fc == 1 + 1 + 1 + n + (constructors + entries) + pairs
    assert xc - fc == 3


def test_scatter_bag_of_pairs_charges_plusv(evm):
    """scatterBag on non-real cotangents: the same sums and plusv costs as the
    written-out term (test_scatter_of_pairs_charges_plusv), 3 steps fewer."""
    lt = LPairT(L_R, L_R)
    entries = [(0, (1.0, 2.0)), (2, (3.0, 4.0)), (0, (0.5, 0.25)), (0, (1.0, 1.0))]
    bag = _bag(evm, [BOneT(ilit(i), LPair(lit(a), lit(b))) for i, (a, b) in entries])
    env = {"a": (1.0, 2.0, 3.0), "b": bag}
    fv, fc = ev(evm, ScatterBag(Var("a"), Var("b"), lt), env)
    xv, xc = ev(evm, Scatter(Zeros(Length(Var("a")), lt), Collect(Var("b"), lt), lt), env)
    assert fv == xv == ((2.5, 3.25), None, (3.0, 4.0))
    assert fc == 1 + 1 + 1 + 3 + (2 * len(entries) - 1) + (1 + 3 + 3) + 1
    assert xc - fc == 3


# ================================================================= closures: MkClosure, CApp

class _Source:
    """The source lambda and application (the formalisation's lam / app)."""

    def lam(self, x, caps, body):
        return Lam(x, None, body, tuple(caps))

    def app(self, f, e):
        return App(f, e)


class _Fused:
    """The fused closure conversion: MkClosure, CApp."""

    def lam(self, x, caps, body):
        return MkClosure("rho", tuple(caps), x, body)

    def app(self, f, e):
        return CApp(f, e)


class _Literal:
    """The literal closure conversion (appendix C, chad/functions/convert.py):
    pack_ρ ⟨⟨y1, (y2, .. ())⟩, λp. let e1 = fst p in let y1 = fst e1 in
    let e2 = snd e1 in .. let x = snd p in body⟩, and
    case f of pack z -> (snd z) ⟨fst z, e⟩."""

    def __init__(self):
        self.names = itertools.count()

    def lam(self, x, caps, body):
        k = next(self.names)
        p = f"p${k}"
        binds = []
        if caps:
            cur = f"e${k}_0"
            binds.append((cur, Fst(Var(p))))
            for i, y in enumerate(caps):
                binds.append((y, Fst(Var(cur))))
                if i < len(caps) - 1:
                    nxt = f"e${k}_{i + 1}"
                    binds.append((nxt, Snd(Var(cur))))
                    cur = nxt
        binds.append((x, Snd(Var(p))))
        for name, rhs in reversed(binds):
            body = Let(name, rhs, body)
        env = Unit()
        for y in reversed(caps):
            env = Pair(Var(y), env)
        return Pack("rho", Pair(env, ClosedLam(p, body)))

    def app(self, f, e):
        z = f"z${next(self.names)}"
        return Unpack(f, z, ClosedApp(Snd(Var(z)), Pair(Fst(Var(z)), e)))


def _flat_program(k: int, calls: int):
    """let f = \\x -> x * (y1 + .. + yk) in (f 1.5, (f 2.5, ..)) : the closure
    captures k variables and is called `calls` times."""
    def prog(F):
        body = lit(2.0) if k == 0 else Var("y0")
        for j in range(1, k):
            body = plus(body, Var(f"y{j}"))
        f = F.lam("x", [f"y{j}" for j in range(k)], mul(Var("x"), body))
        out = F.app(Var("f"), lit(calls + 0.5))
        for c in reversed(range(calls - 1)):
            out = Pair(F.app(Var("f"), lit(c + 1.5)), out)
        return Let("f", f, out)
    return prog


def _curried(F):
    """let add3 = \\a -> \\b -> a * b + y0 in (add3 2) 3."""
    inner = F.lam("b", ["a", "y0"], plus(mul(Var("a"), Var("b")), Var("y0")))
    return Let("add3", F.lam("a", ["y0"], inner),
               F.app(F.app(Var("add3"), lit(2.0)), lit(3.0)))


def _closure_of_closure(F):
    """let g = \\x -> x * y0 in let h = \\z -> g (g z) in h 1.5."""
    g = F.lam("x", ["y0"], mul(Var("x"), Var("y0")))
    h = F.lam("z", ["g"], F.app(Var("g"), F.app(Var("g"), Var("z"))))
    return Let("g", g, Let("h", h, F.app(Var("h"), lit(1.5))))


# program: (builder, [(captures k, closures built)], [(captures k, calls)])
CLOSURE_PROGRAMS = {
    **{f"{k} captures, {c} calls": (_flat_program(k, c), [(k, 1)], [(k, c)])
       for k in (0, 1, 2, 4) for c in (1, 3)},
    "curried": (_curried, [(1, 1), (2, 1)], [(1, 1), (2, 1)]),
    "closure capturing a closure": (_closure_of_closure, [(1, 1), (1, 1)], [(1, 1), (1, 2)]),
}


@pytest.mark.parametrize("name", list(CLOSURE_PROGRAMS))
def test_closures(evm, name):
    """MkClosure / CApp cost exactly the source lam (1 + k) and app (1 + c(f) +
    c(e) + c(body)) (chad/functions/convert.py, docs/functions.md), so a fused
    closure-converted program costs what the source costs. The literal form
    (Pack, ClosedLam, Unpack, ClosedApp) computes the same values and costs
    exactly k + 3 more per closure built (pack, pair, the environment tuple's
    k pairs and unit, against the k captures) and 6k + 9 more per call (unpack,
    snd z, the argument pair with fst z, and the destructuring lets:
    3 per projection, 2k + 1 of them)."""
    prog, built, called = CLOSURE_PROGRAMS[name]
    env = {f"y{j}": float(j + 1) for j in range(4)}
    sv, sc = ev(evm, prog(_Source()), env)
    fv, fc = ev(evm, prog(_Fused()), env)
    lv, lc = ev(evm, prog(_Literal()), env)
    assert sv == fv == lv
    assert fc == sc
    assert lc - fc == (sum((k + 3) * n for k, n in built)
                       + sum((6 * k + 9) * n for k, n in called))


# ================================================================= the "as" rows

def _as_env(evm):
    closure, _ = ev(evm, MkClosure("rho", (), "x", Var("x")))
    env = {"P": closure, "D": 1.5, "A": 0.5}
    env["C"], _ = ev(evm, LPackAs(Var("P"), Var("D")), env)       # LPacked(rho, 1.5)
    env["INL"], _ = ev(evm, LInl(Var("D")), env)
    env["INR"], _ = ev(evm, LInr(Var("D")), env)
    env["NOTHING"] = None
    return env


AS_ROWS = {
    # name: (node, the core node it is costed as (docs/cost-model.md "Functions"))
    "Pack as inl": (Pack("rho", Pair(lit(1.0), lit(2.0))), Inl(Pair(lit(1.0), lit(2.0)))),
    "Unpack as case": (Unpack(Pack("rho", lit(1.0)), "z", mul(Var("z"), Var("z"))),
                       Case(Inl(lit(1.0)), "z", mul(Var("z"), Var("z")), "w", Unit())),
    "ClosedLam as lam capturing nothing": (ClosedLam("x", mul(Var("x"), Var("x"))),
                                           Lam("x", None, mul(Var("x"), Var("x")), ())),
    "ClosedApp as app": (ClosedApp(ClosedLam("x", mul(Var("x"), Var("x"))), lit(3.0)),
                         App(Lam("x", None, mul(Var("x"), Var("x")), ()), lit(3.0))),
    "LCastPack as lcastl (same tag)": (LCastPack("rho", Var("C")), LCastL(Var("INL"), L_R)),
    "LCastPack as lcastl (other tag)": (LCastPack("sigma", Var("C")), LCastL(Var("INR"), L_R)),
    "LCastPack as lcastl (zero)": (LCastPack("rho", Var("NOTHING")),
                                   LCastL(Var("NOTHING"), L_R)),
    "LPackAs as linl, reading the primal": (LPackAs(Var("P"), Var("D")),
                                            LPair(Var("P"), Var("D"))),
    "LFunZero as lpairzero": (LFunZero(), LPairZero()),
    "LTagZero as lpairzero": (LTagZero(), LPairZero()),
    "EnvOneT as linl": (EnvOneT(2, mul(Var("D"), Var("D"))), LInl(mul(Var("D"), Var("D")))),
    "LogOneT as lpair": (LogOneT(Var("A"), Var("D")), LPair(Var("A"), Var("D"))),
}


@pytest.mark.parametrize("row", list(AS_ROWS))
def test_as_rows(evm, row):
    """The closure-conversion and derivative nodes cost exactly the core node
    in their "as" column of docs/cost-model.md (LPackAs: 1 + c(p) + c(e), linl
    plus the read of the primal, i.e. lpair's shape)."""
    node, core = AS_ROWS[row]
    env = _as_env(evm)
    v, c = ev(evm, node, env)
    cv, cc = ev(evm, core, env)
    assert c == cc
    if "LCastPack" in row:
        assert v == (1.5 if "same" in row else None)
        assert cv == (1.5 if "same" in row else 0.0)
    elif row.startswith(("Unpack", "ClosedApp")):
        assert v == cv
    elif row == "EnvOneT as linl":
        assert v.entries() == [(2, 2.25)]
    elif row.startswith("LogOneT"):
        assert v.entries() == [(0.5, 1.5)]


# ================================================================= envscatter, logfold

# capture i -> (level, name, sub): captures 0, 1 go to real cells 0, 1; captures
# 2, 3 to components 0, 1 of the environment bag of a closure in cell 2
ENV_TARGETS = ((0, "a", None), (1, "b", None), (2, "f", 0), (2, "f", 1))

BAG_ENTRIES = {
    "empty": [],
    "one entry": [(0, 1.5)],
    "several, repeated, into a closure's bag": [(1, 2.0), (0, 0.5), (2, 3.0), (1, 1.0), (3, 4.0)],
}


def _entries(x):
    return None if x is None else x.entries()


@pytest.mark.parametrize("name", list(BAG_ENTRIES))
def test_env_scatter(evm, name):
    """envscatter e [targets] = add t_1 d_1 >> (add t_2 d_2 >> ...) over the
    entries of the bag, left to right; for a target with a component `sub`,
    `add level (envone sub d)`. Run: exactly the same costs and cells. Build
    (docs/cost-model.md): 1 + c(e) + (entries). Against the terms, the node does
    not charge reading each entry's d (1), the envone node of a sub target (1)
    or building the then-chain (4 per join); with no entry it is `pure ()`,
    built for free (the term: 2)."""
    entries = BAG_ENTRIES[name]
    bag = _bag(evm, [EnvOneT(i, lit(d)) for i, d in entries])
    assert _entries(bag) == (list(reversed(entries)) or None)  # _bag: last first
    env = {"bag": bag}
    fused = EnvScatter(Var("bag"), ENV_TARGETS)
    fa, fc = ev(evm, fused, env)

    xenv, acts, subs = dict(env), [], 0
    for k, (i, d) in enumerate(_entries(bag) or []):
        level, cname, sub = ENV_TARGETS[i]
        xenv[f"D{k}"] = d
        val = Var(f"D{k}") if sub is None else EnvOneT(sub, Var(f"D{k}"))
        subs += sub is not None
        acts.append(AddEVM(level, cname, val))
    m = len(acts)
    expansion = then_chain(acts) if acts else PureEVM(Unit())
    ea, ec = ev(evm, expansion, xenv)
    not_charged = m + subs + THEN_TERM * (m - 1) if m else 2
    assert fc == 1 + 1 + ec - not_charged, (fc, ec)

    cells = [0.0, 0.0, None]
    fr, fcells, frc = run(evm, fa, cells)
    er, ecells, erc = run(evm, ea, cells)
    assert frc == erc
    assert fcells[:2] == ecells[:2] and _entries(fcells[2]) == _entries(ecells[2])
    assert fr == er


@pytest.mark.parametrize("name", list(BAG_ENTRIES))
def test_log_fold(evm, name):
    """logfold l (x. body) = (let x = e_1 in body) >> ((let x = e_2 in body) >> ..)
    over the log's entries e_k = (argument, cotangent), left to right. Run:
    exactly the same. Build (docs/cost-model.md): 1 + c(l) + per entry
    (1 + c(body)); against the terms, the node does not charge reading each entry
    (1) or the then-chain (4 per join); with no entry it is `pure ()`, built for
    free (the term: 2)."""
    log_entries = [(float(i) + 0.25, d) for i, d in BAG_ENTRIES[name]]
    log = _bag(evm, [LogOneT(lit(a), lit(d)) for a, d in log_entries])
    body = ThenEVM(add(0, mul(Fst(Var("x")), Snd(Var("x")))), add(1, Snd(Var("x"))))
    env = {"log": log}
    fa, fc = ev(evm, LogFold(Var("log"), "x", body), env)

    xenv, acts = dict(env), []
    for k, e in enumerate(_entries(log) or []):
        xenv[f"E{k}"] = e
        acts.append(Let("x", Var(f"E{k}"), body))
    m = len(acts)
    ea, ec = ev(evm, then_chain(acts) if acts else PureEVM(Unit()), xenv)
    not_charged = m + THEN_TERM * (m - 1) if m else 2
    assert fc == 1 + 1 + ec - not_charged, (fc, ec)

    cells = [0.0, 0.0]
    fr, fcells, frc = run(evm, fa, cells)
    er, ecells, erc = run(evm, ea, cells)
    assert (fr, fcells, frc) == (er, ecells, erc)
    assert fcells[1] == sum(d for _, d in log_entries)
