"""Evaluation rules (values and step counts) of the array forms, source and target.

Registered by chad/arrays/__init__.py through chad/extend.py; the costs are
documented in docs/cost-model.md, section "Arrays". Source forms (and their cost):

    build s (i. t)     1 + cost(s) + sum over i of cost(t[i])
    [t1, ..., tn]      1 + cost(t1) + ... + cost(tn)
    t ! s              1 + cost(t) + cost(s)
    length t           1 + cost(t)
    fold (p. t) s      1 + cost(s) + sum over the n - 1 combines of cost(t)
    map (x. t) s       1 + cost(s) + sum over the elements of cost(t)
    prim SUM s         1 + cost(s) + n             (the primitive's extra_cost)

`fold` reduces in ONE fixed order, a balanced tree (split at mid = (lo + hi) // 2,
combine (left, right)); the derivative's FoldTree uses the same order, so the
primal values agree bit for bit.

Errors: an index out of range, a fold of an empty array and a build of negative
size are `EvalError`s naming the index and the length.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from chad.compile.ieee import quiet
from chad.compile import shifts
from chad.compile.known import is_iota
from chad.errors import EvalError
from chad.linear import zerov
from chad.primitives import Primitive, no_tangent
from chad.terms import ArrayLit, Build, Fold, Index, Length, MapA, Prim, Var
from chad.types import ArrayT, Int, R, Real, Z
from chad.values import make_array

from .bag import BEMPTY, BArray, BOne, Leaf, Node, collect, dense_of, fill, scatter, zeros
from .nodes import (
    BArrayT, BEmptyT, BFillT, BOneT, Collect, FoldTree, Gather, GetA, Scatter, ScatterBag,
    SequenceScoped, UnTree, Unzip, UnzipMap, Zeros,
)

# ----------------------------------------------------------------- values


def element(a, i: int):
    """a ! i as a plain Python value (numpy scalars become float / int)."""
    v = a[i]
    if isinstance(v, np.floating):
        return float(v)
    if isinstance(v, np.integer):
        return int(v)
    return v


def array_of(ty, items: list):
    """The array representation for an array term of type ty (None: a tuple)."""
    if isinstance(ty, ArrayT):
        return make_array(ty.elem, items)
    return tuple(items)


def index_error(i: int, n: int, loc=None) -> EvalError:
    return EvalError(f"index {i} out of range for an array of length {n}"
                     + (" (valid indices: 0 to %d)" % (n - 1) if n > 0 else " (it is empty)"), loc)


def _int(v, what: str, loc) -> int:
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return int(v)
    raise EvalError(f"{what} must be an integer, got {v!r}", loc)


def eval_fast(ev, t, env):
    """ev.eval with a fast path for variables (same value and cost: 1); for the
    loops of array and iteration rules (chad/loops/ uses it too)."""
    if type(t) is Var:
        v = env.get(t.name, _MISSING)
        if v is not _MISSING:
            return v, 1
    return ev.eval(t, env)


_MISSING = object()

# ----------------------------------------------------------------- source forms


class _Numbers:
    """The n elements of an Array R or Array Z that build or map computes, put
    straight into the numpy array make_array would give (no list of n Python
    numbers until the end). As make_array: the values converted by numpy; an
    Array Z element outside int64 is an EvalError naming the first such element,
    raised once every element has been evaluated."""

    __slots__ = ("out", "bad", "elem")

    def __init__(self, elem, n: int):
        self.elem = elem
        self.out = np.empty(n, dtype=np.float64 if isinstance(elem, Real) else np.int64)
        self.bad = _MISSING

    def put(self, i: int, v) -> None:
        try:
            self.out[i] = v
        except OverflowError:
            if self.bad is _MISSING and isinstance(self.elem, Int):
                self.bad = v
            elif not isinstance(self.elem, Int):
                raise

    def result(self):
        if self.bad is not _MISSING:
            make_array(self.elem, [self.bad])  # raises its EvalError
        return self.out


def _numbers(ty, n: int):
    """A _Numbers sink for an array term of type Array R / Array Z, else None."""
    if isinstance(ty, ArrayT) and isinstance(ty.elem, (Real, Int)):
        return _Numbers(ty.elem, n)
    return None


def eval_build(ev, t: Build, env):
    n, cost = eval_fast(ev, t.size, env)
    n = _int(n, "the size of build", t.loc)
    if n < 0:
        raise EvalError(f"build of negative size {n} (length must be >= 0)", t.loc)
    cost += 1
    name, body = t.name, t.body
    sink = _numbers(t.ty, n)
    if sink is not None:
        put = sink.put
        for i in range(n):
            v, c = ev.bind(env, name, i, body)
            put(i, v)
            cost += c
        return sink.result(), cost
    items = []
    for i in range(n):
        v, c = ev.bind(env, name, i, body)
        items.append(v)
        cost += c
    return array_of(t.ty, items), cost


def eval_index(ev, t: Index, env):
    a, ca = eval_fast(ev, t.arr, env)
    i, ci = eval_fast(ev, t.idx, env)
    i = _int(i, "an array index", t.loc)
    n = len(a)
    if not 0 <= i < n:
        raise index_error(i, n, t.loc)
    return element(a, i), 1 + ca + ci


def eval_array_lit(ev, t: ArrayLit, env):
    """[e1, ..., en]: 1 + c(e1) + ... + c(en), elements left to right."""
    items = []
    cost = 1
    for e in t.elems:
        v, c = eval_fast(ev, e, env)
        items.append(v)
        cost += c
    return array_of(t.ty, items), cost


def eval_length(ev, t: Length, env):
    a, c = eval_fast(ev, t.expr, env)
    return len(a), 1 + c


def reduce_balanced(items, combine):
    """The one reduction order of fold: a balanced binary tree over items.
    combine(l, r) -> (value, cost); returns (value, total cost)."""
    return _balanced(items, combine, 0, len(items))


def _balanced(items, combine, lo: int, hi: int):
    # (a module function, not a closure calling itself: that would be a
    # reference cycle keeping the items alive until the cyclic GC ran)
    if hi - lo == 1:
        return items[lo], 0
    mid = (lo + hi) // 2
    lv, lc = _balanced(items, combine, lo, mid)
    rv, rc = _balanced(items, combine, mid, hi)
    v, c = combine(lv, rv)
    return v, lc + rc + c


def _fold_items(a, loc):
    n = len(a)
    if n == 0:
        raise EvalError("fold of an empty array (length 0): fold needs at least one element", loc)
    return [element(a, i) for i in range(n)]


def eval_fold(ev, t: Fold, env):
    a, ca = eval_fast(ev, t.arr, env)
    items = _fold_items(a, t.loc)
    name, body = t.name, t.body
    v, c = reduce_balanced(items, lambda l, r: ev.bind(env, name, (l, r), body))
    return v, 1 + ca + c


def eval_map(ev, t: MapA, env):
    a, cost = eval_fast(ev, t.arr, env)
    cost += 1
    name, body = t.name, t.body
    n = len(a)
    sink = _numbers(t.ty, n)
    if sink is not None:
        put = sink.put
        for i in range(n):
            v, c = ev.bind(env, name, element(a, i), body)
            put(i, v)
            cost += c
        return sink.result(), cost
    items = []
    for i in range(n):
        v, c = ev.bind(env, name, element(a, i), body)
        items.append(v)
        cost += c
    return array_of(t.ty, items), cost


# prim SUM : Array R -> R, cost 1 + arg + n; its derivative fills a BArray.
def _sum(a) -> float:
    with quiet():  # inf + -inf is NaN, as IEEE (without numpy's warning)
        if type(a) is np.ndarray and a.dtype == _F64 and a.ndim == 1:
            # np.sum's own reduce of a 1-D array, without its wrapper's
            # dispatch (about 2 µs: a small compiled gradient sums several)
            return float(_ADD_REDUCE(a))
        return float(np.sum(np.asarray(a, dtype=np.float64)))


_F64 = np.dtype(np.float64)
_ADD_REDUCE = np.add.reduce


def _isum(a) -> int:
    return sum(np.asarray(a, dtype=np.int64).tolist())  # Python ints: no wrap-around


# prim ISUM : Array Z -> Z (sum on Array Z), cost 1 + arg + n; derivative: the zero bag.
ISUM = Primitive("ISUM", ArrayT(Z), Z, _isum, lambda p, d: BEmptyT(),
                 doc="sum of an Array Z (linear time)", extra_cost=len,
                 tangent=no_tangent)

# forward mode: the tangent of sum a is sum of a's tangent array (its n steps)
SUM = Primitive("SUM", ArrayT(R), R, _sum, lambda p, d: BFillT(p, d), int_variant="ISUM",
                doc="sum of an Array R (linear time)", extra_cost=len,
                tangent=lambda p, dp: Prim("SUM", dp))


# ----------------------------------------------------------------- bags


def eval_bempty(ev, t, env):
    return BEMPTY, 1


def eval_bone(ev, t: BOneT, env):
    i, ci = eval_fast(ev, t.idx, env)
    v, cv = eval_fast(ev, t.val, env)
    return BOne(int(i), v), 1 + ci + cv


def eval_barray(ev, t: BArrayT, env):
    vals, cost = eval_fast(ev, t.vals, env)
    idx = None
    if t.idx is not None:
        idx, ci = eval_fast(ev, t.idx, env)
        cost += ci
    return BArray(vals, idx), 1 + cost


def eval_bfill(ev, t: BFillT, env):
    a, ca = eval_fast(ev, t.arr, env)
    d, cd = eval_fast(ev, t.val, env)
    return bfill(a, d), 1 + ca + cd + len(a)


def bfill(a, d) -> BArray:
    """BFill a d: len(a) copies of the real d, as one read-only broadcast view:
    O(1) memory (bag values are never changed in place; collect and scatter only
    read them)."""
    return BArray(fill(len(a), 0.0 if d is None else float(d)))


def eval_collect(ev, t: Collect, env):
    b, cb = eval_fast(ev, t.bag, env)
    pairs, work = collect(b, t.elem)
    return pairs, 1 + cb + work


def eval_zeros(ev, t: Zeros, env):
    n, cn = eval_fast(ev, t.size, env)
    z, work = zeros(int(n), t.elem)
    return z, 1 + cn + work


def eval_scatter(ev, t: Scatter, env):
    dense, cd = eval_fast(ev, t.dense, env)
    pairs, cp = eval_fast(ev, t.pairs, env)
    out, work = scatter(dense, pairs, t.elem)
    return out, 1 + cd + cp + work


def eval_unzip(ev, t: Unzip, env):
    a, ca = eval_fast(ev, t.arr, env)
    firsts = [p[0] for p in a]
    seconds = tuple(p[1] for p in a)
    if t.elem is None:
        fa = tuple(firsts)
    else:
        fa = make_array(t.elem, firsts)
    return (fa, seconds), 1 + ca + len(a)


def eval_unzip_map(ev, t: UnzipMap, env):
    """unzip (map (x. body) arr) in one pass, without the array of pairs:
    1 + c(arr) + Σ c(body) + n (the map's body costs and the unzip's n), the same
    values and errors (in the same order) as `let m = map (x. body) arr in unzip m`,
    which costs exactly 3 more (the let, the read of m, one of the two heads)."""
    a, cost = eval_fast(ev, t.arr, env)
    name, body = t.name, t.body
    n = len(a)
    firsts = []
    seconds = []
    for i in range(n):
        p, c = ev.bind(env, name, element(a, i), body)
        firsts.append(p[0])
        seconds.append(p[1])
        cost += c
    fa = tuple(firsts) if t.elem is None else make_array(t.elem, firsts)
    return (fa, tuple(seconds)), 1 + cost + n


def eval_scatter_bag(ev, t: ScatterBag, env):
    """scatter (zeros (length arr)) (collect bag) as one node, with the same work:
    1 + c(arr) + c(bag) + n (the zeros) + (collect's work) + (scatter's work);
    the written-out term costs exactly 3 more (the heads of length, zeros and
    collect)."""
    a, ca = eval_fast(ev, t.arr, env)
    b, cb = eval_fast(ev, t.bag, env)
    z, zw = zeros(len(a), t.elem)
    pairs, cw = collect(b, t.elem)
    out, sw = scatter(z, pairs, t.elem)
    return out, 1 + ca + cb + zw + cw + sw


def eval_gather(ev, t: Gather, env):
    a, ca = eval_fast(ev, t.arr, env)
    idx, ci = eval_fast(ev, t.idx, env)
    return gather(a, idx, t.loc), 1 + ca + ci + len(idx)


def gather(a, idx, loc=None):
    """The elements of a at the indices idx (an error at the first one out of
    range)."""
    if is_iota(idx) and (type(a) is np.ndarray or isinstance(a, tuple)) and len(idx) <= len(a):
        # the identity indices of a read a ! i (chad/compile/known.py): a's first
        # len(idx) elements, as a view or the tuple itself (arrays are never
        # changed in place)
        m = len(idx)
        return a if m == len(a) else a[:m]
    out = shifts.gather(a, idx)  # a loop index shifted and clamped: slices
    if out is None:
        out = shifts.line_gather(a, idx)  # s * i + c: a strided slice
    if out is not None:
        return out
    idx = np.asarray(idx, dtype=np.int64)
    n, m = len(a), len(idx)
    if m and (idx.min() < 0 or idx.max() >= n):  # (two passes, no temporaries)
        bad = np.flatnonzero((idx < 0) | (idx >= n))
        raise index_error(int(idx[bad[0]]), n, loc)
    if type(a) is np.ndarray and a.ndim == 1:
        return a.take(idx)
    if isinstance(a, np.ndarray):
        return a[idx]
    return tuple(a[j] for j in idx.tolist())


# ----------------------------------------------------------------- EVM helpers


def sequence(evm, actions: list):
    """The EVM's `sequence` (chad/runtime/protocol.py: the `then` chain, cost
    sum + 2 (n - 1); pure None, cost 1, if empty)."""
    return evm.sequence(actions)


# Construction costs of the pieces of the reverse passes (docs/cost-model.md).
SEQ_ELEM_CONS = 4   # bind (pure ()) (\_ -> ...): bind, pure, unit, lam
SEQ_APP = 3         # app f d with f, d read from the zipped arrays
SEQ_SCOPE = 2       # scope init m: scope + reading init
SEQ_STORE = 2       # bind m store: bind + lam
FOLD_COMBINE = 4    # per combine of FoldTree: pair of two getA's, Node
UNTREE_NODE = 6     # per Node: app f d' (2), scope init (2), bind + lam (2)
UNTREE_LEAF = 2     # per Leaf: store d' (1), pure (1)
UNTREE_SPLIT = 5    # per Node continuation: lfst, lsnd (2 each), then (1)


def _nested(results: list):
    out = None
    for r in reversed(results):
        out = (r, out)
    return out


class _Sequenced:
    """What the elements of one sequenceScoped share (see eval_sequence_scoped)."""

    __slots__ = ("ev", "evm", "fns", "ds", "item", "inits", "inits_rev", "keep", "slots",
                 "scope_cost", "unit")

    def __init__(self, ev, fns, ctgs, inits, keep, slots):
        self.ev = ev
        self.evm = ev.evm
        self.fns = fns
        self.ds = ctgs
        # ds ! i as ctgs.tolist()[i] gives it (a Python float or int), converted
        # when element i runs instead of all n at once
        self.item = isinstance(ctgs, np.ndarray) and ctgs.ndim == 1
        if isinstance(ctgs, np.ndarray) and not self.item:
            self.ds = ctgs.tolist()
        self.inits = inits
        self.inits_rev = list(reversed(inits))
        self.keep = keep
        self.slots = slots
        self.scope_cost = SEQ_SCOPE * len(inits)
        self.unit = self.evm.pure(None)

    def run_element(self, i: int):
        """k_i's body: the scoped action of fs ! i on ds ! i, and its ccall."""
        d = self.ds[i]
        if self.item:
            d = d.item()
        act, ccall = self.ev.apply(self.fns[i], d)
        evm = self.evm
        for init in self.inits_rev:
            act = evm.scope(init, act)
        if not self.keep:
            return act, SEQ_APP + ccall + self.scope_cost
        inits, slots, keep, unit = self.inits, self.slots, self.keep, self.unit

        def store(r):
            # r = (cell_0, (cell_1, ... (cell_m, result of f d)))
            cells = []
            for _ in range(len(inits)):
                cells.append(r[0])
                r = r[1]
            for slot, j in zip(slots, keep):
                slot[i] = cells[j]
            return unit, 1 + len(keep)

        return evm.bind(act, store), SEQ_APP + ccall + self.scope_cost + SEQ_STORE


class _Element:
    """k_i of sequenceScoped: \\_ -> scope inits (fs ! i) (ds ! i), as an object."""

    __slots__ = ("ctx", "i")

    def __init__(self, ctx: _Sequenced, i: int):
        self.ctx = ctx
        self.i = i

    def __call__(self, _x):
        return self.ctx.run_element(self.i)


def eval_sequence_scoped(ev, t: SequenceScoped, env):
    fns, cf = eval_fast(ev, t.fns, env)
    ctgs, cc = eval_fast(ev, t.ctgs, env)
    inits = []
    cost = 1 + cf + cc
    for it in t.inits:
        v, c = eval_fast(ev, it, env)
        inits.append(v)
        cost += c
    n = len(fns)
    if len(ctgs) != n:
        raise EvalError(f"internal: {n} backpropagators but {len(ctgs)} cotangents")
    evm = ev.evm
    keep = t.keep
    slots = [[None] * n for _ in keep]
    ctx = _Sequenced(ev, fns, ctgs, inits, keep, slots)
    # Every element's action is bind (pure ()) k_i: the pure () is one shared
    # action (actions are stateless and may run any number of times) and k_i a
    # two-slot object reading fns ! i and ds ! i when it runs (no closure, cells
    # or Python float per element kept until the backward pass).
    unit = ctx.unit
    acts = [evm.bind(unit, _Element(ctx, i)) for i in range(n)]
    cost += SEQ_ELEM_CONS * n
    seq = sequence(evm, acts)
    del acts
    if not keep:
        return seq, cost

    def finish(_x):
        arrays = [dense_of(slot, lt) for slot, lt in zip(slots, t.keep_elem)]
        return evm.pure(_nested(arrays)), 1 + n * len(keep)

    return evm.bind(seq, finish), cost + 2


# ----------------------------------------------------------------- fold trees


def eval_fold_tree(ev, t: FoldTree, env):
    a, ca = eval_fast(ev, t.arr, env)
    items = _fold_items(a, t.loc)
    leaves = [Leaf(x, i) for i, x in enumerate(items)]
    name, body = t.name, t.body

    def combine(l, r):
        (y, f), c = ev.bind(env, name, (l.value, r.value), body)
        return Node(l, y, f, r), c + FOLD_COMBINE

    tree, c = reduce_balanced(leaves, combine)
    return tree, 1 + ca + len(items) + c


def eval_get_a(ev, t: GetA, env):
    tree, c = eval_fast(ev, t.tree, env)
    return tree.value, 1 + c


def eval_untree(ev, t: UnTree, env):
    """unTree of Fig. 10 with the leaf cotangents stored by position (instead of
    the difference list + fromList): the two subtrees' actions are combined with
    `then`, so the parallel EVM may run them concurrently (§8)."""
    d, cd = eval_fast(ev, t.ctg, env)
    tree, ct = eval_fast(ev, t.tree, env)
    init, ci = eval_fast(ev, t.init, env)
    n = _count_leaves(tree)
    out = [None] * n
    act, cb = _UnTree(ev, t.elem, init, out).build(tree, d)
    elem = t.elem

    def finish(_x):
        return ev.evm.pure(dense_of(out, elem)), 1 + n

    return ev.evm.bind(act, finish), 1 + cd + ct + ci + cb + 2


class _UnTree:
    """unTree's actions over a fold tree, the leaf cotangents written to `out`
    by position. Methods, not closures calling themselves: a closure that
    refers to itself is a reference cycle, and the actions (with the values
    they hold) would live until the cyclic GC ran."""

    __slots__ = ("ev", "elem", "init", "out")

    def __init__(self, ev, elem, init, out: list) -> None:
        self.ev, self.elem, self.init, self.out = ev, elem, init, out

    def build(self, node, dn):
        evm = self.ev.evm
        if isinstance(node, Leaf):
            self.out[node.index] = dn
            return evm.pure(None), UNTREE_LEAF
        act, ccall = self.ev.apply(node.bp, dn)
        return evm.bind(evm.scope(self.init, act), partial(self.split, node)), UNTREE_NODE + ccall

    def split(self, node, res):
        dp = res[0]  # the final value of p's cell: the cotangent of (l, r)
        cost = UNTREE_SPLIT
        if dp is None:
            d1, c1 = zerov(self.elem)
            d2, c2 = zerov(self.elem)
            cost += c1 + c2
        else:
            d1, d2 = dp
        a1, k1 = self.build(node.left, d1)
        a2, k2 = self.build(node.right, d2)
        return self.ev.evm.then(a1, a2), cost + k1 + k2


def _count_leaves(tree) -> int:
    count = 0
    stack = [tree]
    while stack:
        x = stack.pop()
        if isinstance(x, Leaf):
            count += 1
        else:
            stack.append(x.left)
            stack.append(x.right)
    return count


