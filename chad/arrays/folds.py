"""A `fold` in a vectorised region (chad/compile/vectorise.py): the fold of an
array built in the loop body (`fold (p. min(fst p, snd p)) (build k (\\c ->
...))` in a build over points: kmeans' nearest centre, a log-sum-exp's maximum
per row) for every element of the enclosing loops at once.

The evaluator folds in ONE order, a balanced binary tree (chad/arrays/
evaluate.py `reduce_balanced`: split at mid = (lo + hi) // 2, combine (left,
right); Efficient CHAD (Smeding & Vákár), §8, folds with that tree). Here the
same tree is evaluated level by level: the combines whose operands are ready
(leaves, or nodes of lower height) are one batched call of the combine over
every outer element (`vfold`), about log2(n) calls for n elements. Each
combine computes what the evaluator's computes from the same operands, so the
values are the evaluator's, bit for bit, whatever the combine (max, min, +, a
def with an `if`), NaN and signed zeros included.

The combine `p. body` is batched once, as a generated function of two arrays
(p's components): it must read nothing but p (a closed combine over reals),
and its body must batch elementwise (primitives, `if` as np.where, lets).

In a derivative's nested loops (chad/arrays/nested.py), a fold by max or min
is CHAD's fold tree: `vtree2` gives every outer element's value and winning
leaf (the same tree's comparisons), `vuntree2` the leaves' cotangents of its
unTree (see "fold trees" below).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from chad.compile.kernels import tree
from chad.compile.shapes import broadcast
from chad.compile.vectorise import BVal, Batcher, NotBatchable, function_block, nesting
from chad.terms import Fst, Lam, Pair, Prim, Snd, Var, free_vars


def reducer(name: str, body) -> str | None:
    """"MAX" / "MIN" when body is max(fst p, snd p) / min(...) over p = name."""
    if (type(body) is Prim and body.op in ("MAX", "MIN") and type(body.arg) is Pair
            and type(body.arg.left) is Fst and type(body.arg.right) is Snd
            and body.arg.left.expr == Var(name) and body.arg.right.expr == Var(name)):
        return body.op
    return None


@lru_cache(maxsize=16)
def tree_levels(n: int) -> tuple:
    """The balanced tree over n >= 2 leaves as levels of combines: per height
    1, 2, ..., the (ids, left, right) int64 arrays of its nodes (a node of
    height h combines nodes of lower heights). Leaves are 0 .. n-1, the
    combines n .. 2n-2, the root last (2n-2). Made top down, one depth of the
    tree at a time with numpy (about log2(n) steps): a node over [lo, hi)
    splits at mid = (lo + hi) // 2, as reduce_balanced; its height is
    ceil(log2(hi - lo))."""
    lo, hi = np.array([0], dtype=np.int64), np.array([n], dtype=np.int64)
    ids = np.array([2 * n - 2], dtype=np.int64)
    nxt = 2 * n - 3  # internal nodes numbered downwards from the root's
    parts = []
    while lo.size:
        mid = (lo + hi) // 2
        inner_l, inner_r = mid - lo >= 2, hi - mid >= 2
        need = np.stack([inner_l, inner_r], axis=1).reshape(-1)  # left, right, per node
        made = np.full(need.shape, -1, dtype=np.int64)
        count = int(need.sum())
        made[need] = nxt - np.arange(count, dtype=np.int64)
        nxt -= count
        left = np.where(inner_l, made[0::2], lo)  # a leaf's id is its position
        right = np.where(inner_r, made[1::2], mid)
        height = np.frexp((hi - lo - 1).astype(np.float64))[1]  # ceil(log2(size)), size >= 2
        parts.append((ids, left, right, height))
        lo, hi, ids = (np.concatenate((lo[inner_l], mid[inner_r])),
                       np.concatenate((mid[inner_l], hi[inner_r])),
                       np.concatenate((made[0::2][inner_l], made[1::2][inner_r])))
    ids, left, right, height = (np.concatenate(col) for col in zip(*parts))
    order = np.argsort(height, kind="stable")
    ids, left, right, height = ids[order], left[order], right[order], height[order]
    cuts = np.flatnonzero(np.diff(height)) + 1
    return tuple(zip(np.split(ids, cuts), np.split(left, cuts), np.split(right, cuts)))


def vfold(x, n: int, axis: int, rank: int, combine, live: int = 1):
    """The fold of every outer element's array along `axis` (n elements) of
    the rank-`rank` array x (or a value independent of that loop: n copies),
    keeping the axis (size 1). `live`: the number of elements of the loops
    around the fold (0: no fold runs, nothing fails); a fold of no element
    fails (the evaluator's error is reported by the replay of the call)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim < rank:
        x = x.reshape((1,) * (rank - x.ndim) + x.shape)
    if n <= 0:  # (a negative size: the build's error, where a fold runs)
        if live:
            raise ValueError("fold of an empty array")
        shape = list(x.shape)
        shape[axis] = 1
        return np.zeros(shape)
    if x.shape[axis] != n:
        shape = list(x.shape)
        shape[axis] = n
        x = np.broadcast_to(x, shape)
    if n == 1:
        return x.take([0], axis=axis)
    last = x if axis == x.ndim - 1 else np.moveaxis(x, axis, -1)
    vals = np.empty(last.shape[:-1] + (2 * n - 1,))
    vals[..., :n] = last
    for ids, left, right in tree_levels(n):
        vals[..., ids] = combine(vals[..., left], vals[..., right])
    return np.moveaxis(vals[..., -1:], -1, axis)


def combine_function(b: Batcher, t) -> str:
    """The combine of fold t (p. body) as a generated function of p's two
    components (arrays of reals of one shape): body batched elementwise."""
    if set(free_vars(t.body)) - {t.name}:
        raise NotBatchable("a fold whose combine reads a variable besides its pair")
    if nesting(t.body):
        raise NotBatchable("a fold whose combine has a loop")
    gen = b.gen
    name, left, right = gen.fresh("vc"), gen.fresh("p"), gen.fresh("p")
    inner = Batcher(gen, 1)
    with function_block(gen, f"def {name}({left}, {right}):") as block:
        pair = BVal("tuple", dims={0}, inner=(BVal("num", left, {0}, elem="R"),
                                              BVal("num", right, {0}, elem="R")))
        inner.bind(t.name, pair)
        v = inner.value(t.body)
        if isinstance(v, BVal) and not (v.kind == "num" and v.elem == "R"):
            raise NotBatchable("a fold whose combine's result is not a real")
        gen.emit(f"return {inner.numbers(v) if isinstance(v, BVal) else v}")
    b.pending.append(block)
    return name


def batch_fold(b: Batcher, t) -> BVal:
    """fold (p. body) a, a built in the loop body (an Array R): vfold."""
    a = b.value(t.arr)
    if not (isinstance(a, BVal) and a.kind == "arr"):
        raise NotBatchable("fold of an array not built in the loop")
    if a.elem != "R" or (isinstance(a.inner, BVal) and a.inner.kind != "num"):
        raise NotBatchable("fold of an array whose elements are not reals")
    combine = combine_function(b, t)
    gen = b.gen
    x = b.numbers(a.inner) if isinstance(a.inner, BVal) else a.inner
    live = gen.atom(" * ".join(b.sizes)) if b.sizes else "1"
    expr = gen.atom(f"{gen.const(vfold, 'B')}({x}, {a.size}, {a.axis!r}, {b.rank!r}, "
                    f"{combine}, {live})")
    return BVal("num", expr, a.dims, elem="R", fresh=True)


# ----------------------------------------------------------------- fold trees
#
# In a derivative, fold by max (min) is `foldTree (p. (max(fst p, snd p), bp))`
# (the tree of combines, each with its backpropagator), `getA` of it (the
# value) and, in the reverse pass, `unTree lpairzero d tree` (the leaf
# cotangents). In a nested forward pass (chad/arrays/nested.py) the tree of
# every outer element is its value and its winning leaf, found on the same
# balanced tree with the same comparisons (`vtree2`); unTree gives d at that
# leaf and 0.0 at the others (`vuntree2`), as the evaluator's does: the
# combine's backpropagator sends the node's cotangent to the side it returned
# and a zero to the other (lpairzero is the sparse zero, so d reaches the leaf
# unchanged, -0.0 included), and a leaf below a zero gets 0.0.


TREE_ROW_MAX = 64  # longer rows: numpy's argmax (kernels.tree: shorter ones)


def vtree2(x, n: int, axis: int, rank: int, is_max: bool, live: int = 1):
    """(value, leaf) of `fold max` (is_max) or `fold min` of every outer
    element's array along `axis` (n elements), both keeping the axis (size
    1): the evaluator's tree's value and the leaf it came from. Without NaN,
    np.argmax's first occurrence (a tie, 0.0 against -0.0 included, goes left
    as `b if b > a else a` does); with a NaN, the tree's comparisons level by
    level."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim < rank:
        x = x.reshape((1,) * (rank - x.ndim) + x.shape)
    if n > 0 and x.shape[axis] != n:
        shape = list(x.shape)
        shape[axis] = n
        x = np.broadcast_to(x, shape)
    if n <= 0:
        if live:
            raise ValueError("fold of an empty array")
        shape = list(x.shape)
        shape[axis] = 1
        return np.zeros(shape), np.zeros(shape, dtype=np.int64)
    last = x if axis == x.ndim - 1 else np.moveaxis(x, axis, -1)
    # short rows (a nested loop's few clusters): the C loop, the tree itself,
    # NaN or not; numpy's argmax along a short row costs about 17 ns a row,
    # along a long one it is faster than the loop
    picked = tree(last.reshape(-1, n), is_max) if n <= TREE_ROW_MAX else None
    if picked is not None:
        shape = last.shape[:-1] + (1,)
        if axis == x.ndim - 1:
            return picked[0].reshape(shape), picked[1].reshape(shape)
        return (np.moveaxis(picked[0].reshape(shape), -1, axis),
                np.moveaxis(picked[1].reshape(shape), -1, axis))
    if not np.isnan(x).any():
        k = (np.argmax if is_max else np.argmin)(x, axis=axis, keepdims=True)
        return np.take_along_axis(x, k, axis=axis), k
    vals = np.empty(last.shape[:-1] + (2 * n - 1,))
    vals[..., :n] = last
    leaf = np.empty(vals.shape, dtype=np.int64)
    leaf[..., :n] = np.arange(n)
    for ids, left, right in (tree_levels(n) if n > 1 else ()):
        a, b = vals[..., left], vals[..., right]
        right_wins = b > a if is_max else b < a  # MAX: a[1] if a[1] > a[0] else a[0]
        vals[..., ids] = np.where(right_wins, b, a)
        leaf[..., ids] = np.where(right_wins, leaf[..., right], leaf[..., left])
    return (np.moveaxis(vals[..., -1:], -1, axis), np.moveaxis(leaf[..., -1:], -1, axis))


def vuntree2(d, leaf, n: int, axis: int):
    """The leaf cotangents of every outer element's tree: d at its winning
    leaf, 0.0 at the others, along `axis` (n elements)."""
    leaf, d = np.asarray(leaf), np.asarray(d, dtype=np.float64)
    both = np.broadcast_shapes(leaf.shape, d.shape)  # (a tree the outer loop does not change)
    leaf, d = broadcast(leaf, both, leaf.dtype), broadcast(d, both)
    shape = list(both)
    shape[axis] = max(n, 0)  # (a negative size: a tree of no outer element, no leaf)
    out = np.zeros(shape)
    if not out.size:
        return out
    if len(shape) == 2 and axis == 1 and leaf.shape == (shape[0], 1):
        # one leaf per row (np.put_along_axis's indexing, without its wrapper)
        out[np.arange(shape[0]), leaf[:, 0]] = d[:, 0]
        return out
    np.put_along_axis(out, leaf, d, axis=axis)
    return out


def batch_fold_tree(b: Batcher, t) -> BVal:
    """foldTree of max (min) over an array built in a nested forward pass: a
    "tree" value (expr: the values, inner: the winning leaves, size: n)."""
    body = t.body
    op = None
    if b.closures and type(body) is Pair and type(body.right) is Lam:
        op = reducer(t.name, body.left)
    if op is None:
        raise NotBatchable("a fold tree whose combine is not max or min")
    a = b.value(t.arr)
    if not (isinstance(a, BVal) and a.kind == "arr" and a.elem == "R"
            and (not isinstance(a.inner, BVal) or a.inner.kind == "num")):
        raise NotBatchable("a fold tree of an array not built in the loop")
    gen = b.gen
    x = b.numbers(a.inner) if isinstance(a.inner, BVal) else a.inner
    live = gen.atom(" * ".join(b.sizes)) if b.sizes else "1"
    pair = gen.atom(f"{gen.const(vtree2, 'B')}({x}, {a.size}, {a.axis!r}, {b.rank!r}, "
                    f"{op == 'MAX'!r}, {live})")
    val, leaf = gen.atom(f"{pair}[0]"), gen.atom(f"{pair}[1]")
    return BVal("tree", expr=val, dims=a.dims, axis=a.axis, size=a.size, inner=leaf)


def batch_get_a(b: Batcher, t) -> BVal:
    """getA of a batched tree: its values."""
    tree = b.value(t.tree)
    if not (isinstance(tree, BVal) and tree.kind == "tree"):
        raise NotBatchable("getA of a tree not built in the loop")
    return BVal("num", tree.expr, tree.dims, elem="R")
