"""Symbolic cost rules of `fold` and of its derivative's nodes (FoldTree, GetA,
UnTree), and the fold rule as a proof obligation (Efficient CHAD (Smeding &
Vákár), Fig. 9 (fold) and Fig. 10 (Tree, unTree); the rule is
chad/arrays/transform.py's `chad_fold`).

A fold over n >= 1 elements (a fold of an empty array is an error, so its
obligation is vacuous) runs the combine n − 1 times, at the nodes of a balanced
tree. As for chad/proofs/loop_rules.py, the combines' quantities enter through
their sums (ΣP, Σcrun, Σccall, Σm), with TH1 summed over the n − 1 combines.
unTree passes the cotangents down the tree: the root combine receives the rule's
d, every other node and every leaf the component of its parent's final cell
(the cotangent of p : τ × τ), split into two zeros when that cell stayed the
sparse zero. So with N_z such cells (0 <= N_z <= n − 1), Σφ(ctg) the nodes'
incoming cotangents and Σφ(leaf) the leaves',

    Σφ(final cell) = Σφ(ctg) − φ(d) + (n − 1) + Σφ(leaf) − 2·N_z

(a pair cell has potential 1 + φ(d1) + φ(d2), a zero cell 1 against its two
zeros' 2), and the zeros cost Σzc with 2·N_z <= Σzc <= 4·N_z. For n = 1 the
root is the leaf and receives d. The leaves' cotangents go to the array's
backpropagator as one BArray (potential 1 + Σφ(leaf)).

Costs transcribed from chad/arrays/evaluate.py (`reduce_balanced`, eval_fold,
eval_fold_tree, eval_get_a, eval_untree; FOLD_COMBINE and the UNTREE_*
constants imported) and the spec LACM (bind, scope, then, pure); tested against
the counting evaluator by tests/test_prove.py (concrete mode: the aggregated
symbols are the real sums over the tree).
"""

from __future__ import annotations

from chad.arrays.bag import Leaf, Node, dense_of
from chad.arrays.evaluate import (
    FOLD_COMBINE, UNTREE_LEAF, UNTREE_NODE, UNTREE_SPLIT, element, reduce_balanced,
)
from chad.arrays.nodes import FoldTree, GetA, UnTree
from chad.linear import phi as concrete_phi, zerov
from chad.terms import Fold
from chad.types import ArrayT

from .array_rules import length_of
from .loop_rules import AggCtgs
from .specs import GAMMA, Instance, RuleSpec
from .symbolic import EXTRA_RULES, AbsT, Action, Opaque, Sub, SubChad, SubHyp, SymbolicError


class SymTree:
    """The reduction tree FoldTree records: n leaves, the combines of sub-term k
    (concrete: the real tree of chad/arrays/bag.py's Leaf and Node)."""

    def __init__(self, k: int, n, real=None):
        self.k = k
        self.n = n
        self.real = real


def _combines(se, t, env, kind):
    """The n − 1 combines of a fold (kind "P") or foldTree (kind "crun"):
    (n, k, the value or tree, the aggregated cost symbol, cost of the array)."""
    a, ca = se.eval(t.arr, env)
    n = length_of(se, a)
    cls = Sub if kind == "P" else SubChad
    if not isinstance(t.body, cls):
        raise SymbolicError("a fold body that is not a placeholder")
    k = t.body.k
    total, value = None, None
    if se.concrete is not None:
        if n == 0:
            raise SymbolicError("concrete mode: a fold of an empty array")
        items = [element(a, i) for i in range(n)]
        if kind == "P":
            value, total = reduce_balanced(
                items, lambda l, r: se.concrete.primal(k, {**env, t.name: (l, r)}))
        else:
            def combine(l, r):
                (y, f), c = se.concrete.chad(k, {**env, t.name: (l.value, r.value)})
                return Node(l, y, f, r), c
            value, total = reduce_balanced([Leaf(x, i) for i, x in enumerate(items)], combine)
    else:
        se.hyps.append(n >= 1)  # a fold of an empty array is an error
    S = se.sym(f"S{kind}{k}", total)
    se.hyps.append(S >= n - 1)
    return n, k, value, S, ca


def _fold_value(se, k):
    key = ("fold", k)
    if key not in se.primal:
        se.primal[key] = Opaque(f"fold{k}")
    return se.primal[key]


def _fold(se, t: Fold, env):
    n, k, value, S, ca = _combines(se, t, env, "P")
    se.P[k] = S
    return (value if se.concrete is not None else _fold_value(se, k)), 1 + ca + S


def _fold_tree(se, t: FoldTree, env):
    n, k, tree, S, ca = _combines(se, t, env, "crun")
    se.crun[k] = S
    return SymTree(k, n, tree), 1 + ca + n + S + FOLD_COMBINE * (n - 1)


def _get_a(se, t: GetA, env):
    tr, c = se.eval(t.tree, env)
    if not isinstance(tr, SymTree):
        raise SymbolicError("getA of something other than a foldTree")
    if se.concrete is not None:
        return tr.real.value, 1 + c
    return _fold_value(se, tr.k), 1 + c


def _concrete_untree(se, tree, d, init, elem, e):
    """Run unTree's actions over the real tree as eval_untree does; returns the
    sums of the module docstring (and the cells, the leaves' cotangents)."""
    ev = se.concrete
    s = dict(rest=0, m=0, zc=0, nz=0, zphi=0, phictg=0, phicell=0)
    out = {}

    def run(node, dn, cells):
        if isinstance(node, Leaf):
            out[node.index] = dn
            return cells
        s["phictg"] += concrete_phi(dn)
        act, ccall = ev.apply(node.bp, dn)
        if node is not tree:
            s["rest"] += ccall
        _, e2, m = act(cells + (init,))
        s["m"] += m
        dp, cells = e2[-1], tuple(e2[:-1])
        s["phicell"] += concrete_phi(dp)
        if dp is None:
            d1, c1 = zerov(elem)
            d2, c2 = zerov(elem)
            s["zc"] += c1 + c2
            s["nz"] += 1
            s["zphi"] += concrete_phi(d1) + concrete_phi(d2)
        else:
            d1, d2 = dp
        cells = run(node.left, d1, cells)
        return run(node.right, d2, cells)

    cells = run(tree, d, tuple(e))
    leaves = [out[i] for i in range(len(out))]
    return s, cells, leaves


def _untree(se, t: UnTree, env):
    d, cd = se.eval(t.ctg, env)
    tr, ct = se.eval(t.tree, env)
    init, ci = se.eval(t.init, env)
    if not isinstance(tr, SymTree):
        raise SymbolicError("unTree of something other than a foldTree")
    n, k = tr.n, tr.k
    cost0 = 1 + cd + ct + ci + 2
    concrete = se.concrete is not None
    if concrete:
        one = isinstance(tr.real, Leaf)
        if not one:
            _, c_root = se.concrete.apply(tr.real.bp, d)
            c_root = se.sym(f"ccall_root{k}", c_root)
    else:
        one = se.fork(2, ["n = 1", "n >= 2"]) == 0
        se.hyps.append(n == 1 if one else n >= 2)
        if not one:
            c_root = se.sym(f"ccall_root{k}")
    finish = 1 + (1 + n) + 1  # bind act finish: the bind, finish's ccall, pure

    if one:  # the root is the leaf: it stores d
        def act1(e):
            leaves = dense_of([d], t.elem) if concrete else AggCtgs(1, se.phi(d))
            return leaves, tuple(e), 1 + finish
        return Action(act1), cost0 + UNTREE_LEAF

    nk = se.subs[k]

    def act(e):
        if len(e) + 1 != nk:
            raise SymbolicError(f"the combines of sub-term {k} (context of {nk}) run in "
                                f"{len(e) + 1} cells")
        phi0 = sum((se.phi(x) for x in e), 0)
        if concrete:
            s, e_out, leaves = _concrete_untree(se, tr.real, d, init, t.elem, e)
            Srest, Sm = se.sym(f"Sccall_rest{k}", s["rest"]), se.sym(f"Sm{k}", s["m"])
            Sphictg, Sphicell = se.sym(f"Sphictg{k}", s["phictg"]), se.sym(
                f"Sphicell{k}", s["phicell"])
            Nz, Szc = se.sym("Nz", s["nz"]), se.sym("Szc", s["zc"])
            Sphileaf = se.sym("Sphileaf", sum(concrete_phi(x) for x in leaves))
            result = dense_of(leaves, t.elem)
            se.hyps.append(se.sym("Szphi", s["zphi"]) == 2 * Nz)
        else:
            Srest, Sm, Sphictg, Sphicell = (se.sym(f"{x}{k}") for x in (
                "Sccall_rest", "Sm", "Sphictg", "Sphicell"))
            Nz, Szc, Sphileaf = se.sym("Nz"), se.sym("Szc"), se.sym("Sphileaf")
            result = AggCtgs(n, Sphileaf)
            e_out = tuple(se.opaque_ctg(getattr(x, "lt", None), "phiout") for x in e)
        se.hyps += [Sphicell == Sphictg - se.phi(d) + (n - 1) + Sphileaf - 2 * Nz,
                    Nz <= n - 1, 2 * Nz <= Szc, Szc <= 4 * Nz, Sphicell >= n - 1]
        phin = sum((se.phi(x) for x in e_out), 0)
        lhs = (se.crun[k] + c_root + Srest + (n - 1) * (1 + nk) + Sm - Sphictg
               - (n - 1) * se.phi(init) - phi0 + phin + Sphicell - (n - 1) * nk)
        if k not in se.P:
            raise SymbolicError(f"sub-term {k}'s derivative runs but its primal did not")
        se.sub_hyps.append(SubHyp(k, lhs, se.P[k], n - 1))
        # per node: bind 1, scope 1 + its action, the split's ccall (UNTREE_SPLIT,
        # the zeros, the construction of both children), then 2; per leaf: its
        # construction and pure 1; the nodes below the root are built while running
        cost = ((n - 1) * (1 + 1 + UNTREE_SPLIT + 2) + Sm + Szc + (n - 2) * UNTREE_NODE
                + Srest + n * (UNTREE_LEAF + 1) + finish)
        return result, e_out, cost

    return Action(act), cost0 + UNTREE_NODE + c_root


EXTRA_RULES.update({Fold: _fold, FoldTree: _fold_tree, GetA: _get_a, UnTree: _untree})


def fold_rules():
    el = AbsT(1)
    return [RuleSpec("fold", lambda: [Instance(
        Fold("p", Sub(2, el), Sub(1, ArrayT(el)), ty=el), GAMMA)])]
