"""Target-language node classes of the array derivatives (Efficient CHAD (Smeding & Vákár), Figs. 9, 10, §8.1).

The source array forms (Build, Index, Fold, Length, MapA of chad.terms) also
occur in target terms, with the same evaluation rules. These are the extra
target operations; their costs are in chad/arrays/evaluate.py and
docs/cost-model.md ("Arrays").

    BEmptyT                    BEmpty                                   (zero of D[Array τ]₂)
    BOneT idx val              BOne ⟨idx, val⟩
    BArrayT vals [idx]         BArray (zip idx vals), idx defaulting to 0..n-1
    BFillT arr val             BArray [val, ..., val] (length arr): the derivative of sum
    Collect bag                collect : Bag σ -> Array σ (as index + value arrays)
    Zeros n                    build n (i. 0): n zero cotangents
    Scatter dense pairs        scatter: add each pair into (a copy of) the dense array
    ScatterBag arr bag         scatter (zeros (length arr)) (collect bag), fused: the
                               dense element cotangents of map's reverse pass
    Unzip arr                  unzip : Array (τ × σ) -> Array τ × Array σ
    UnzipMap (x. body) arr     unzip (map (x. body) arr), fused: the forward pass of map
    Gather arr idx             build (length idx) (i. arr ! (idx ! i)), one bounds check
    SequenceScoped fs ds inits sequence (zipWith (f d. scope inits (f d)) fs ds)
    FoldTree (p. body) arr     fold recording the reduction Tree (Fig. 9)
    GetA tree                  getA (Fig. 10)
    UnTree d tree              unTree over the recorded tree, result: leaf cotangents
"""

from __future__ import annotations

from typing import Any

from attrs import field, frozen

from chad.terms import Loc, Term, node
from chad.types import Type


def _meta():
    return field(default=None, eq=False, kw_only=True, repr=False)


@node()
@frozen
class BEmptyT(Term):
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("idx", "val")
@frozen
class BOneT(Term):
    idx: Term
    val: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("vals", "idx")
@frozen
class BArrayT(Term):
    """BArray of the dense cotangent array `vals` at the indices `idx` (None: 0..n-1)."""

    vals: Term
    idx: Term | None = None
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("arr", "val")
@frozen
class BFillT(Term):
    """BArray of length (arr) copies of the real cotangent val (d(sum))."""

    arr: Term
    val: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("bag")
@frozen
class Collect(Term):
    """collect bag; `elem` is the element cotangent type D[τ]₂."""

    bag: Term
    elem: Any
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("size")
@frozen
class Zeros(Term):
    """n zero cotangents of linear type `elem`."""

    size: Term
    elem: Any
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("dense", "pairs")
@frozen
class Scatter(Term):
    dense: Term
    pairs: Term
    elem: Any
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("arr")
@frozen
class Unzip(Term):
    """unzip of an array of pairs; `elem` is the source type of the first
    components (it fixes their array representation)."""

    arr: Term
    elem: Type | None = None
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("body", "arr", binds={"body": "name"})
@frozen
class UnzipMap(Term):
    """unzip (map (name. body) arr) as one node (the forward pass of map): body is
    a CHAD'd element returning (y, backpropagator); the array of pairs is never
    built. `elem` is the source type of the ys (it fixes their array
    representation, as Unzip's)."""

    name: str
    body: Term
    arr: Term
    elem: Type | None = None
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("arr", "bag")
@frozen
class ScatterBag(Term):
    """scatter (zeros (length arr)) (collect bag) as one node: the dense array of
    the element cotangents that the bag `bag` holds for an array of the length
    of `arr`; `elem` is the element cotangent type D[τ]₂."""

    arr: Term
    bag: Term
    elem: Any
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("arr", "idx")
@frozen
class Gather(Term):
    arr: Term
    idx: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("fns", "ctgs", "inits")
@frozen
class SequenceScoped(Term):
    """The reverse pass of build / map: for every i,
    scope inits[0] (scope inits[1] (... (fns ! i) (ctgs ! i))), all sequenced.

    The result is the nested pair (R_k0, (R_k1, ... ())) of the arrays of final
    cell values of the scopes listed in `keep` (None if `keep` is empty);
    `keep_elem` gives their linear types (for the array representation)."""

    fns: Term
    ctgs: Term
    inits: tuple[Term, ...]
    keep: tuple[int, ...] = ()
    keep_elem: tuple[Any, ...] = ()
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("body", "arr", binds={"body": "name"})
@frozen
class FoldTree(Term):
    """`fold (name. body) arr` where body is a CHAD'd combine returning (y, f):
    records Node l y f r at every combine of the balanced reduction."""

    name: str
    body: Term
    arr: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("tree")
@frozen
class GetA(Term):
    tree: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("ctg", "tree", "init")
@frozen
class UnTree(Term):
    """unTree (λd' f. do (⟨d1, d2⟩, _) <- scope init (f d'); return (d1, d2)) ctg tree,
    returning the array of leaf cotangents; `elem` = D[τ]₂ (zero of lfst/lsnd)."""

    ctg: Term
    tree: Term
    init: Term
    elem: Any
    loc: Loc | None = _meta()
    ty: Type | None = _meta()
