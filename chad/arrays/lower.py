"""The array nodes vectorised: their batching rules and numpy lowerings for the
compiler's vectorisation (chad/compile/vectorise.py, docs/compiler.md,
"Vectorisation"), registered beside their other rules (chad/arrays/__init__.py).

    build n (i. body)   top level: n computed first (as the evaluator does), the
                        body batched over a new axis of n elements; nested (n
                        unbatched): the next axis of the region
    map (x. body) a     the same over a's elements (a unbatched, Array R / Z)
    a ! i               i a loop variable, a unbatched: a[:n] on i's axis;
                        i a batched integer: a gather; (m ! i) ! j: a 2-D block
    unzipMap            map's forward pass: the ys and one batched backpropagator
    sequenceScoped      map's reverse pass: that backpropagator on all cotangents
    fold of max / min   np.max / np.min where the fold's order cannot matter;
                        in a derivative (foldTree, unTree) np.argmax / argmin
    a build of (y, backpropagator) pairs nested in a build, its unzip, gathers
    of rows, length, and BFill / scatter / BArray in the backpropagators:
                        a derivative's nested loops (chad/arrays/nested.py)
"""

from __future__ import annotations

from chad.compile.switch import forward_lets, forward_result
from chad.compile.vectorise import (
    BVal, Batcher, NotBatchable, _real_literal, abandon, back_function_tree,
    elem_kind, nesting, per_element_code, vectorise_loop,
)
from chad.compile.vector_support import loop_size
from chad.linear import LR
from chad.terms import Build, Fold, Index, Lam, Length, Let, MapA, Pair
from chad.types import ArrayT, Real

from .bag import BEMPTY, BArray, as_bag, collect, dense_real, scatter, zeros
from .evaluate import bfill, gather
from .folds import reducer
from .nested import forward_pairs_nested
from .nested_support import vdense_bags, vgather_numbers, vgather_reals, vtake2c
from .nodes import (
    Collect, FoldTree, ScatterBag, SequenceScoped, UnTree, Unzip, UnzipMap, Zeros,
)


def _result_elem(t, body) -> str:
    """"R" or "Z": the element kind of the array t builds from its body."""
    if isinstance(body, BVal):
        return body.elem
    if isinstance(t.ty, ArrayT):
        kind = elem_kind(t.ty.elem)
        if kind is not None:
            return kind
    raise NotBatchable("the elements are not numbers")


def _loop(b: Batcher, t, size: str, name: str, var) -> BVal:
    """The body of t batched over a new loop of `size` elements, `name` bound to
    var(axis); the "arr" value of the array it builds."""
    axis = b.open_loop(size)
    try:
        saved = b.bind(name, var(axis))
        try:
            body = b.value(t.body)
        finally:
            b.unbind(saved)
        if isinstance(body, BVal) and body.kind == "tuple" and b.closures:
            # CHAD's forward pass of an inner build: (y, backpropagator) per element
            return BVal("pairs", dims=body.dims - {axis}, axis=axis, size=size, inner=body)
        if isinstance(body, BVal):
            if body.kind == "idx":
                body = BVal("num", b.index(body.axis), body.dims, elem="Z")
            elif body.kind == "rows":
                raise NotBatchable("an array of arrays as an element")
            elif body.kind == "arr" and isinstance(body.inner, BVal) \
                    and body.inner.kind == "arr":
                raise NotBatchable("arrays nested three deep")
        elem = body.elem if isinstance(body, BVal) and body.kind == "arr" \
            else _result_elem(t, body)
        if elem not in ("R", "Z"):  # a Bool (a comparison): an array of Inj values
            raise NotBatchable("the elements are not numbers")
        dims = body.dims - {axis} if isinstance(body, BVal) else frozenset()
        return BVal("arr", dims=dims, axis=axis, elem=elem, size=size, inner=body)
    finally:
        b.close_loop()


def _build(b: Batcher, t: Build, size: str) -> BVal:
    return _loop(b, t, size, t.name, lambda axis: BVal("idx", axis=axis, dims={axis}, elem="Z"))


def _type_of(t):
    """t's type as the checker recorded it, looking through lets (whose own
    type a call's inlined body does not carry: `let n = length x in build
    ...`)."""
    while getattr(t, "ty", None) is None and type(t) is Let:
        t = t.body
    return getattr(t, "ty", None)


def _map(b: Batcher, t: MapA, arr: str) -> BVal:
    ty = _type_of(t.arr)
    kind = elem_kind(ty.elem) if isinstance(ty, ArrayT) else None
    if kind is None:
        raise NotBatchable("map over an array whose elements are not numbers")
    size = b.gen.atom(f"len({arr})")

    def var(axis):
        x = b.gen.atom(f"_vtake({arr}, {size}, {axis!r}, {b.rank!r})")
        return BVal("num", x, {axis}, elem=kind)

    return _loop(b, t, size, t.name, var)


def _unbatched(b: Batcher, t, what: str) -> str:
    v = b.value(t)
    if isinstance(v, BVal):
        raise NotBatchable(f"{what} depends on an enclosing loop")
    return v


# ----------------------------------------------------------------- rules


def batch_build(b: Batcher, t: Build) -> BVal:
    """A build nested in a vectorised body: rectangular (its size unbatched)."""
    return _build(b, t, _unbatched(b, t.size, "the size of a nested build"))


def batch_map(b: Batcher, t: MapA) -> BVal:
    a = b.value(t.arr)
    if isinstance(a, BVal):
        return _map_built(b, t, a)
    return _map(b, t, a)


def _map_built(b: Batcher, t: MapA, a: BVal) -> BVal:
    """map over an array built in the loop body at the depth of the map
    (`lse (build k (\\c -> ...))` inlined): map f (build k g) is build k (f . g),
    the map's loop the build's axis again, its variable the build's elements."""
    if not (a.kind == "arr" and a.axis == len(b.sizes)
            and (not isinstance(a.inner, BVal) or a.inner.kind in ("num", "idx"))):
        raise NotBatchable("the array of a nested map depends on an enclosing loop")
    return _loop(b, t, a.size, t.name, lambda axis: a.inner)


def batch_index(b: Batcher, t: Index) -> BVal:
    a = b.value(t.arr)
    i = b.value(t.idx)
    gen = b.gen
    kind = elem_kind(t.ty)
    if t.ty is None and b.assume is not None and not isinstance(a, BVal):
        kind = "R"  # an untyped target term: checked at run time (_forward_pairs' guard)
        b.assume.append(a)
    if not isinstance(a, BVal) and isinstance(i, BVal):
        if i.kind == "idx" and kind is None and t.ty is None and b.closures:
            # untyped (a target term) in a nested forward pass: a row or a number
            return BVal("elem", src=a, axis=i.axis, dims={i.axis}, elem="R",
                        size=b.sizes[i.axis], inner=b.live() or None)
        if i.kind == "idx":
            n = b.sizes[i.axis]
            if kind is not None:
                x = gen.atom(f"_vtake({a}, {n}, {i.axis!r}, {b.rank!r}{b.live()})")
                return BVal("num", x, {i.axis}, elem=kind)
            if isinstance(t.ty, ArrayT) and elem_kind(t.ty.elem) is not None:
                return BVal("rows", src=a, axis=i.axis, dims={i.axis},
                            elem=elem_kind(t.ty.elem))
        elif i.kind == "num" and i.elem == "Z" and kind is not None:
            x = gen.atom(f"_vgather({a}, {i.expr}{b.live()})")
            return BVal("num", x, i.dims, elem=kind, fresh=True)
        elif i.kind == "num" and i.elem == "Z" and t.ty is None and b.closures:
            # untyped (a target term) in a nested forward pass: read as reals,
            # checked at run time (vgather_reals' guard)
            x = gen.atom(f"{gen.const(vgather_reals, 'B')}({a}, {i.expr}{b.live()})")
            return BVal("num", x, i.dims, elem="R", fresh=True)
    elif isinstance(a, BVal) and a.kind == "arr" and isinstance(i, BVal) and i.kind == "idx" \
            and i.axis == a.axis and a.size == b.sizes[i.axis] and isinstance(a.inner, BVal) \
            and a.inner.kind == "num":
        return a.inner  # (build n (j. e)) ! j, j the loop over the same n: e
    elif isinstance(a, BVal) and a.kind == "arr" and isinstance(i, BVal) and i.kind == "idx" \
            and i.axis > a.axis and a.size == b.sizes[i.axis] and isinstance(a.inner, BVal) \
            and a.inner.kind == "num" and i.axis not in a.inner.dims:
        # (build n (j. e)) ! k, k a deeper loop over the same n (a layer's
        # output read by the next layer's inner loop): e along k's axis
        x = gen.atom(f"_np.swapaxes({b.numbers(a.inner)}, {a.axis!r}, {i.axis!r})")
        return BVal("num", x, (a.inner.dims - {a.axis}) | {i.axis}, elem=a.inner.elem)
    elif isinstance(a, BVal) and a.kind in ("rows", "elem") and isinstance(i, BVal) \
            and i.kind == "idx" and i.axis != a.axis:
        if a.inner is not None:  # the rows gathered at the columns a.inner
            x = gen.atom(f"{gen.const(vtake2c, 'B')}({a.src}, {b.sizes[a.axis]}, {a.axis!r}, "
                         f"{a.inner}, {b.sizes[i.axis]}, {i.axis!r}, {b.rank!r}{b.live()})")
        else:
            x = gen.atom(f"_vtake2({a.src}, {b.sizes[a.axis]}, {a.axis!r}, "
                         f"{b.sizes[i.axis]}, {i.axis!r}, {b.rank!r}{b.live()})")
        return BVal("num", x, {a.axis, i.axis}, elem=a.elem)
    raise NotBatchable("an index other than a loop variable or a batched integer")


def lower_bempty(gen, t) -> str:
    """BEmpty: the one empty bag."""
    return gen.const(BEMPTY, "B")


def lower_barray(gen, t) -> str:
    """BArray idx vals: the bag of the pairs, as eval_barray (no rule call)."""
    vals = gen.atom(gen.value(t.vals))
    if t.idx is None:
        return f"{gen.const(BArray, 'B')}({vals})"
    idx = gen.atom(gen.value(t.idx))
    return f"{gen.const(BArray, 'B')}({vals}, {idx})"


def lower_bfill(gen, t) -> str:
    """BFill arr d, as eval_bfill."""
    arr = gen.atom(gen.value(t.arr))
    d = gen.atom(gen.value(t.val))
    return f"{gen.const(bfill, 'B')}({arr}, {d})"


def lower_gather(gen, t) -> str:
    """gather arr idx, as eval_gather (its error carries the node's location)."""
    arr = gen.atom(gen.value(t.arr))
    idx = gen.atom(gen.value(t.idx))
    return f"{gen.const(gather, 'B')}({arr}, {idx}, {gen.const(t.loc, 'L')})"


def lower_length(gen, t) -> str:
    """length a: len of the array (a numpy array or a tuple), as eval_length."""
    return f"len({gen.atom(gen.value(t.expr))})"


def batch_gather(b: Batcher, t) -> BVal:
    """`gather (m ! i) cols` in a nested forward pass (cols unbatched): the rows
    at those columns, read by the inner loop's index (batch_index)."""
    a = b.value(t.arr)
    if b.closures and not isinstance(a, BVal):
        ix = b.value(t.idx)
        if isinstance(ix, BVal) and ix.kind == "arr" and isinstance(ix.inner, BVal) \
                and ix.inner.kind == "num" and ix.inner.elem == "Z":
            # an array gathered at indices built in the loop (an outer product's
            # `a ! i`): the array of its elements there, along ix's loop
            x = b.gen.atom(f"{b.gen.const(vgather_numbers, 'B')}({a}, {ix.inner.expr}{b.live()})")
            return BVal("arr", dims=ix.dims, axis=ix.axis, elem="R", size=ix.size,
                        inner=BVal("num", x, ix.inner.dims, elem="R"))
    if not (b.closures and isinstance(a, BVal) and a.kind in ("rows", "elem")
            and a.inner is None):
        raise NotBatchable("a gather of a batched array other than a row")
    cols = _unbatched(b, t.idx, "the indices of a gather")
    return BVal("rows", src=a.src, axis=a.axis, dims=a.dims, elem=a.elem, inner=cols)


def batch_unzip(b: Batcher, t: Unzip) -> BVal:
    """unzip of an inner build's (y, backpropagator) pairs: its ys (an array
    built along the inner loop) and its backpropagators ("backs")."""
    a = b.value(t.arr)
    if not (isinstance(a, BVal) and a.kind == "pairs"):
        raise NotBatchable("an unzip of pairs not built in the loop")
    return batch_unzip_pairs(a)


def batch_unzip_pairs(a: BVal) -> BVal:
    """The ys and the backpropagators of the "pairs" a."""
    y, back = a.inner.inner
    if not (isinstance(y, BVal) and y.kind == "num" and y.elem == "R"):
        raise NotBatchable("the values are not reals")
    if not (isinstance(back, BVal) and back.kind == "lam"):
        raise NotBatchable("a backpropagator that is not a lambda")
    ys = BVal("arr", dims=y.dims - {a.axis}, axis=a.axis, elem="R", size=a.size, inner=y)
    backs = BVal("backs", dims=back.dims, axis=a.axis, size=a.size, inner=back)
    return BVal("tuple", dims=ys.dims | backs.dims, inner=(ys, backs))


def batch_unzip_map(b: Batcher, t: UnzipMap) -> BVal:
    """`unzipMap (x. (y, \\d -> m)) (a ! i)` in a nested forward pass: the map
    over each outer element's row as the next loop, over the rows' common
    length (checked at run time: ragged rows fail the region's guard); its ys
    and its backpropagators ("backs"), as batch_unzip's."""
    a = b.value(t.arr)
    if b.closures and isinstance(t.elem, Real) and isinstance(a, BVal) and a.kind == "arr":
        return _unzip_map_built(b, t, a)
    if not (b.closures and isinstance(t.elem, Real) and isinstance(a, BVal)
            and a.kind in ("rows", "elem") and a.inner is None):
        raise NotBatchable("a map over an array other than a row")
    gen = b.gen
    n = b.sizes[a.axis]
    size = b.row_length(a)

    def var(axis):
        x = gen.atom(f"_vtake2({a.src}, {n}, {a.axis!r}, {size}, {axis!r}, {b.rank!r}{b.live()})")
        return BVal("num", x, {a.axis, axis}, elem="R")

    return _map_pairs(b, t, size, var)


def _unzip_map_built(b: Batcher, t: UnzipMap, a: BVal) -> BVal:
    """unzipMap over an array of reals built in the loop body at the map's
    depth (a log-sum-exp's `map (\\v -> exp (v - m)) x`, x built per outer
    element): the build's loop again (as _map_built), its ys and
    backpropagators."""
    if not (a.axis == len(b.sizes) and a.elem == "R"
            and (not isinstance(a.inner, BVal) or a.inner.kind == "num")):
        raise NotBatchable("a map over an array built at another depth")
    return _map_pairs(b, t, a.size, lambda axis: a.inner)


def _map_pairs(b: Batcher, t: UnzipMap, size: str, var) -> BVal:
    """The body of unzipMap t batched over a new loop of `size` elements, its
    variable var(axis): the ys and backpropagators of its pairs."""
    axis = b.open_loop(size)
    try:
        saved = b.bind(t.name, var(axis))
        try:
            body = b.value(t.body)
        finally:
            b.unbind(saved)
    finally:
        b.close_loop()
    if not (isinstance(body, BVal) and body.kind == "tuple"):
        raise NotBatchable("the body is not a pair of a value and a backpropagator")
    return batch_unzip_pairs(BVal("pairs", dims=body.dims - {axis}, axis=axis, size=size,
                                  inner=body))


def batch_length(b: Batcher, t) -> str:
    """length of an array built in the loop: its size (unbatched)."""
    a = b.value(t.expr)
    if isinstance(a, BVal) and a.kind == "arr":
        return a.size
    if isinstance(a, BVal) and (a.kind == "rows" or b.closures and a.kind == "elem") \
            and a.inner is None:
        return b.row_length(a)  # (ragged: the region's guard fails)
    raise NotBatchable("length of a batched value")


def batch_bfill(b: Batcher, t) -> BVal:
    """BFill arr d in a nested reverse pass: every element of each outer
    element's arr gets that element's d."""
    a = b.value(t.arr)
    d = b.value(t.val)
    if not (b.closures and isinstance(a, BVal) and a.kind == "arr"):
        raise NotBatchable("a fill of an array not built in the loop")
    if isinstance(d, BVal) and not (d.kind == "num" and d.elem == "R" and d.dims <= {0}):
        raise NotBatchable("a fill of a value that is not a real of the outer loop")
    x = b.numbers(d) if isinstance(d, BVal) else d
    return BVal("bfill", expr=x, dims=d.dims if isinstance(d, BVal) else frozenset(),
                size=a.size)


def batch_scatter(b: Batcher, t) -> BVal:
    """`scatter (zeros (length a)) (collect bag)` (or scatterBag) of a fill in
    a nested reverse pass: 0.0 + d for every element (the evaluator's sum on
    its array of zeros)."""
    if not (b.closures and isinstance(t.elem, LR)):
        raise NotBatchable("a scatter outside a nested reverse pass")
    if type(t) is ScatterBag:
        bag = t.bag
    elif type(t.dense) is Zeros and type(t.pairs) is Collect:
        bag = t.pairs.bag
    else:
        raise NotBatchable("a scatter into an array other than zeros")
    v = b.value(bag)
    if isinstance(v, BVal) and v.kind == "bagcell":
        # each outer element's bag cell (chad/arrays/nested.py, Exec.run_evm)
        size = b.value(t.dense.size) if type(t) is not ScatterBag else \
            batch_length(b, Length(t.arr))
        if isinstance(size, BVal):
            raise NotBatchable("a scatter into an array of a batched length")
        x = b.gen.atom(f"{b.gen.const(vdense_bags, 'B')}({v.expr}, {b.sizes[0]}, {size})")
        return BVal("num", x, {0, 1}, elem="R", fresh=True)
    # a fill, or the whole rows of an n x m array of known width (unTree's
    # leaf cotangents): each element gets one value
    if not (isinstance(v, BVal) and (v.kind == "bfill" or (
            v.kind == "barr" and v.inner == "None" and v.size is not None))):
        raise NotBatchable("a scatter of a bag other than a fill or whole rows")
    if type(t) is ScatterBag:
        _size_of(b, t.arr, v.size)
    else:
        _size_of(b, t.dense.size, v.size)
    return BVal("num", b.gen.atom(f"({v.expr} + 0.0)"), v.dims, elem="R", fresh=True)


def _size_of(b: Batcher, t, size: str) -> None:
    """t (an array, or the length of one) is the fill's array."""
    v = b.value(t)
    if not (isinstance(v, BVal) and v.kind == "arr" and v.size == size) and v != size:
        raise NotBatchable("a scatter into an array other than the fill's")


def batch_bone(b: Batcher, t) -> BVal:
    """BOne idx v in a nested reverse pass (an add in an inlined call's run):
    every element pair's one-hot bag ("bone": expr the values, inner the
    indices)."""
    if not b.closures:
        raise NotBatchable("a one-hot bag outside a nested reverse pass")
    i, v = b.value(t.idx), b.value(t.val)
    if isinstance(i, BVal) and not (i.kind in ("num", "idx") and i.elem == "Z"):
        raise NotBatchable("a one-hot bag at an index that is not an integer")
    if isinstance(v, BVal) and not (v.kind == "num" and v.elem == "R"):
        raise NotBatchable("a one-hot bag of a value that is not a real")
    if not isinstance(v, BVal) and not _real_literal(t.val):
        raise NotBatchable("a one-hot bag of an unbatched value")
    idx = b.numbers(i) if isinstance(i, BVal) else i
    val = b.numbers(v) if isinstance(v, BVal) else v
    return BVal("bone", expr=val, dims=b.dims(i, v), inner=idx)


def batch_barray(b: Batcher, t) -> BVal:
    """BArray idx vals in a nested reverse pass: each outer element's bag of
    its row of vals (an n x m array) at idx (unbatched)."""
    v = b.value(t.vals)
    if not (b.closures and isinstance(v, BVal) and v.kind == "num" and v.elem == "R"):
        raise NotBatchable("a BArray of values that are not batched reals")
    if t.idx is None:
        idx = "None"
    else:
        ix = b.value(t.idx)
        if isinstance(ix, BVal):  # indices of each outer element's own: n x m
            if not (ix.kind == "arr" and ix.axis == 1 and isinstance(ix.inner, BVal)
                    and ix.inner.kind == "num" and ix.inner.elem == "Z"):
                raise NotBatchable("a BArray at indices that are not an array of integers")
            n = b.sizes[0]  # (a negative size where no outer element runs the loop: none)
            idx = b.gen.atom(f"_np.broadcast_to({ix.inner.expr}, ({n}, "
                             f"{b.gen.const(loop_size, 'B')}({ix.size}, {n})))")
        else:
            idx = ix
    return BVal("barr", expr=v.expr, dims=v.dims, inner=idx, size=v.size)


def vectorise_build(gen, t: Build) -> str | None:
    """build n (i. body) as numpy code, or None (the per-element loop)."""
    n = gen.atom(gen.value(t.size))  # first, as the evaluator: its errors first
    if _pair_with_lam(t.body):  # CHAD's forward pass of build
        out = vectorise_build_pairs(gen, t, n)
        return out if out is not None else gen.eval_rule(t, {id(t.size): n})
    out = vectorise_loop(gen, t, lambda b: _build(b, t, n))
    return out if out is not None else gen.eval_rule(t, {id(t.size): n})


def _pair_with_lam(t) -> bool:
    while type(t) is Let:
        t = t.body
    return type(t) is Pair and type(t.right) is Lam


def vectorise_unzip(gen, t: Unzip) -> str | None:
    """unzip of a vectorised build's VecPairs: its ys and batched backpropagator
    (when its first components are reals), else the evaluation rule."""
    if not isinstance(t.elem, Real):
        return None
    arr = gen.atom(gen.value(t.arr))
    return f"(_vunzip({arr}) or {gen.eval_rule(t, {id(t.arr): arr})})"


def vectorise_map(gen, t: MapA) -> str | None:
    """map (x. body) a as numpy code, or None (the per-element loop)."""
    arr = gen.atom(gen.value(t.arr))
    out = vectorise_loop(gen, t, lambda b: _map(b, t, arr))
    return out if out is not None else gen.eval_rule(t, {id(t.arr): arr})


# ----------------------------------------------------------------- reverse passes


def vectorise_unzip_map(gen, t: UnzipMap) -> str | None:
    """The forward pass of map, `unzipMap (x. lets in (y, \\d -> m)) a`, batched
    when a is an Array R at run time (else the per-element code): the array of
    the ys and ONE batched backpropagator (vector_support.VecBack)."""
    if not gen.inline or not isinstance(t.elem, Real) or nesting(t.body) > 0:
        return None
    arr = gen.atom(gen.value(t.arr))
    out = _forward_pairs(gen, t, arr, "unzipMap", "")
    return out if out is not None else gen.eval_rule(t, {id(t.arr): arr})


def vectorise_build_pairs(gen, t: Build, n: str) -> str | None:
    """The forward pass of build, `build n (i. lets in (y, \\d -> m))` (its
    array of pairs read by `unzip`), batched: a VecPairs holding the ys and ONE
    batched backpropagator; anything but `unzip` reading it gets the pairs.
    A body with a loop of its own: chad/arrays/nested.py."""
    if not gen.inline:
        return None
    if nesting(t.body) > 0:
        return forward_pairs_nested(gen, t, n)
    return _forward_pairs(gen, t, n, "build", "_VecPairs")


def _forward_pairs(gen, t, operand: str, label: str, holder: str) -> str | None:
    lazy = per_element_code(gen, t)  # for every other case
    block = gen.block
    mark, indent, pmark = len(block.lines), gen.indent, len(gen.proj_log)
    env = dict(gen.env)
    result = gen.fresh("v")
    b = Batcher(gen, 1)
    b.assume = []
    try:
        gen.indent += 2
        if type(t) is UnzipMap:
            b.assume.append(operand)
            n = gen.atom(f"len({operand})")
            b.open_loop(n)
            first = BVal("num", gen.atom(f"_vtake({operand}, {n}, 0, 1)"), {0}, elem="R")
        else:
            n = operand
            b.open_loop(n)
            first = BVal("idx", axis=0, dims={0}, elem="Z")
        saved = [b.bind(t.name, first)]
        lets, body = forward_lets(b, t.body)
        saved.extend(lets)
        y, tree = forward_result(b, body)  # a case of pairs: chad/compile/switch.py
        if isinstance(y, BVal) and not (y.kind == "num" and y.elem == "R"):
            raise NotBatchable("the values are not reals")
        if not isinstance(y, BVal) and type(t) is not UnzipMap \
                and not (type(body) is Pair and _real_literal(body.left)):
            raise NotBatchable("a value of unknown type")
        fn, caps, masked = back_function_tree(b, tree)
        for s in reversed(saved):
            b.unbind(s)
        # a vjp's value reaches the caller before the backpropagator, which
        # may read the same array (tanh's derivative reads tanh x): a copy
        fresh = isinstance(y, BVal) and y.fresh and not gen.escapes
        ys = gen.atom(f"_vout({b.numbers(y)}, {n}, 1, _f64, {fresh!r})")
        tup = "(" + "".join(f"{c}, " for c in caps) + ")"
        pairs = holder == "_VecPairs"
        more = f", None, {masked!r}" if masked else ""
        gen.emit(f"{result} = {holder}({ys}, _VecBack({fn}, {n}, {tup}, {lazy}, {pairs!r}{more}))")
        assumed = list(dict.fromkeys(b.assume))
        made = {ln.split(" = ", 1)[0].strip() for ln in block.lines[mark:] if " = " in ln}
        if any(a in made for a in assumed):  # (the guard runs before the region)
            raise NotBatchable("an untyped array computed in the loop's region")
        guard = " and ".join(f"_visf64({a})" for a in assumed) or "True"
        pad = "    " * indent
        block.lines[mark:mark] = [f"{pad}# {label}: vectorised (forward pass)",
                                  f"{pad}if {guard}:",
                                  f"{pad}    with _quiet():"]
        gen.indent = indent
        gen.emit("else:")
        gen.emit(f"    {result} = {lazy}()")
    except NotBatchable as why:
        abandon(gen, block, mark, indent, pmark, env, label, why)
        return None
    gen.blocks.extend(b.pending)
    return result


def vectorise_sequence_scoped(gen, t: SequenceScoped) -> str | None:
    """The reverse pass of map: batched (vector_support.vseq) when its
    backpropagators are a VecBack at run time, else the evaluation rule."""
    if not gen.inline:
        return None
    fns = gen.atom(gen.value(t.fns))
    ctgs = gen.atom(gen.value(t.ctgs))
    inits = [gen.atom(gen.value(i)) for i in t.inits]
    known = {id(t.fns): fns, id(t.ctgs): ctgs}
    known.update((id(i), a) for i, a in zip(t.inits, inits))
    rule = gen.eval_rule(t, known)
    tup = "(" + "".join(f"{a}, " for a in inits) + ")"
    return f"(_vseq({fns}, {ctgs}, {tup}, {t.keep!r}) or {rule})"


def vzscatter(n, bag):
    """scatter (zeros n) (collect bag) of real elements: for a bag of one dense
    array, 0.0 + each element in one pass (a fill stays a broadcast view:
    arrays are never changed in place); else the general functions, which raise
    what the evaluation rules raise."""
    bag = as_bag(bag)
    out = dense_real(bag, n)
    if out is not None:
        return out
    z, _ = zeros(int(n), LR())
    pairs, _ = collect(bag, LR())
    return scatter(z, pairs, LR())[0]


def vectorise_scatter(gen, t) -> str | None:
    """`scatter (zeros n) (collect bag)` of real elements (the reverse pass of a
    build or map turning its bag into the elements' cotangents), and the same as
    one node (scatterBag): one pass for a bag of one dense array
    (vector_support.vzscatter), no array of zeros made first."""
    if not isinstance(t.elem, LR):
        return None
    if type(t) is ScatterBag:
        arr = gen.atom(gen.value(t.arr))
        n = f"len({arr})"
        bag = gen.atom(gen.value(t.bag))
    elif type(t.dense) is Zeros and type(t.pairs) is Collect:
        n = gen.atom(gen.value(t.dense.size))
        bag = gen.atom(gen.value(t.pairs.bag))
    else:
        return None
    return f"{gen.const(vzscatter, 'B')}({n}, {bag})"


# ----------------------------------------------------------------- folds

_REDUCERS = {"MAX": "_vmax", "MIN": "_vmin"}


def vectorise_fold(gen, t: Fold) -> str | None:
    """fold (p. max(fst p, snd p)) a (or min) as np.max (np.min) when a is an
    Array R without NaN whose result is not a zero (vector_support.vmax: the
    evaluator's balanced tree then gives the same value whatever its order); in
    every other case the evaluation rule."""
    op = reducer(t.name, t.body)
    if op is None:
        return None
    arr = gen.atom(gen.value(t.arr))
    gen.emit("# fold: vectorised (np.max / np.min where the order cannot matter)")
    rule = gen.eval_rule(t, {id(t.arr): arr})
    return f"({_REDUCERS[op]}({arr}) or {rule})"


def vectorise_fold_tree(gen, t: FoldTree) -> str | None:
    """The forward pass of fold by max (min): `foldTree (p. (max(fst p, snd p),
    backpropagator)) a` as a VecTree (vector_support.vtree: np.argmax) when a is
    an Array R without NaN at run time, else the per-element code."""
    body = t.body
    if not gen.inline or type(body) is not Pair or type(body.right) is not Lam:
        return None
    op = reducer(t.name, body.left)
    if op is None:
        return None
    arr = gen.atom(gen.value(t.arr))
    old = gen.vectorise
    gen.vectorise = False
    try:
        lazy = gen.local_def([], t, "f")
    finally:
        gen.vectorise = old
    gen.emit(f"# foldTree: vectorised ({op.lower()}: np.arg{op.lower()})")
    return f"(_vtree({arr}, {op == 'MAX'!r}, {lazy}) or {lazy}())"


def vectorise_untree(gen, t: UnTree) -> str | None:
    """The reverse pass of fold by max (min) on a VecTree: the cotangent to the
    winning element (vector_support.vuntree), else the evaluation rule on the
    real tree."""
    if not gen.inline or not isinstance(t.elem, LR):
        return None
    ctg = gen.atom(gen.value(t.ctg))
    tree = gen.atom(gen.value(t.tree))
    init = gen.atom(gen.value(t.init))
    rule = gen.eval_rule(t, {id(t.ctg): ctg, id(t.tree): f"_vreal({tree})", id(t.init): init})
    return f"(_vuntree({ctg}, {tree}) or {rule})"
