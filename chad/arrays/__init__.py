"""Arrays: build, index, fold, length, sum, map (Smeding & Vákár, *Efficient CHAD*,
§7-8). `register()` declares every array node and the array type former through
chad/extend.py; the composition root (chad/features.py) calls it.

    bag.py          Bag (BEmpty, BOne, BPlus, BArray), collect, scatter, fold trees
    nodes.py        the target-only array operations (with their shapes)
    evaluate.py     evaluation rules and costs (source and target), prim SUM
    transform.py    efficient CHAD of build / ! / length / fold / map, gathers
    forward.py      forward-mode CHAD of the same forms
    cotangents.py   JSON in, dense out
    show.py         `chad show` notation
    lower.py        vectorisation: batching rules, numpy lowerings (compiler)
    folds.py        a fold in a vectorised region: the balanced tree level by level
See docs/arrays.md.
"""

from __future__ import annotations

from chad.extend import (
    CotangentValue, LinearType, TypeFormer, register_node, register_primitive, register_type,
)
from chad.terms import ArrayLit, Build, Fold, Index, Length, MapA
from chad.transform.common import D2
from chad.types import ArrayT

from chad.compile import vectorise

from . import cotangents, folds, lower, show
from . import evaluate as E
from . import forward as FW
from . import transform as X
from .bag import Bag, BagT
from .nodes import (
    BArrayT, BEmptyT, BFillT, BOneT, Collect, FoldTree, Gather, GetA, Scatter, ScatterBag,
    SequenceScoped, UnTree, Unzip, UnzipMap, Zeros,
)


def register() -> None:
    """Declare the array nodes, the type former `Array` and the primitive SUM."""
    # source forms (their classes are the language's, chad/terms.py)
    register_node(Build, compiled="eval", eval=E.eval_build, chad=X.chad_build,
                  forward=FW.forward_build, show=show.show_build,
                  batch=lower.batch_build, vectorise=lower.vectorise_build)
    register_node(Index, compiled="eval", eval=E.eval_index, chad=X.chad_index,
                  forward=FW.forward_index, show=show.show_index, batch=lower.batch_index)
    register_node(Length, compiled=lower.lower_length, eval=E.eval_length, chad=X.chad_length,
                  forward=FW.forward_length, show=show.show_length, batch=lower.batch_length)
    register_node(ArrayLit, compiled="eval", eval=E.eval_array_lit, chad=X.chad_array_lit,
                  forward=FW.forward_array_lit,
                  show=show.show_array_lit)
    register_node(Fold, compiled="eval", eval=E.eval_fold, chad=X.chad_fold,
                  forward=FW.forward_fold, show=show.show_fold, vectorise=lower.vectorise_fold,
                  batch=folds.batch_fold)
    register_node(MapA, compiled="eval", eval=E.eval_map, chad=X.chad_map,
                  forward=FW.forward_map, show=show.show_map,
                  batch=lower.batch_map, vectorise=lower.vectorise_map)
    vectorise.LOOP_NODES.update((Build, MapA, UnzipMap))
    # target-only forms (chad/arrays/nodes.py)
    register_node(BEmptyT, compiled=lower.lower_bempty, eval=E.eval_bempty, show=show.show_bempty)
    register_node(BOneT, compiled="eval", eval=E.eval_bone, show=show.show_bone,
                  batch=lower.batch_bone)
    register_node(BArrayT, compiled=lower.lower_barray, eval=E.eval_barray, show=show.show_barray,
                  batch=lower.batch_barray)
    register_node(BFillT, compiled=lower.lower_bfill, eval=E.eval_bfill, show=show.show_bfill,
                  batch=lower.batch_bfill)
    register_node(Collect, compiled="eval", eval=E.eval_collect, show=show.show_collect)
    register_node(Zeros, compiled="eval", eval=E.eval_zeros, show=show.show_zeros)
    register_node(Scatter, compiled="eval", eval=E.eval_scatter, show=show.show_scatter,
                  vectorise=lower.vectorise_scatter, batch=lower.batch_scatter)
    register_node(Unzip, compiled="eval", eval=E.eval_unzip, show=show.show_unzip,
                  forward=FW.forward_unzip, vectorise=lower.vectorise_unzip,
                  batch=lower.batch_unzip)
    register_node(UnzipMap, compiled="eval", eval=E.eval_unzip_map, show=show.show_unzip_map,
                  vectorise=lower.vectorise_unzip_map, batch=lower.batch_unzip_map)
    register_node(ScatterBag, compiled="eval", eval=E.eval_scatter_bag, show=show.show_scatter_bag,
                  vectorise=lower.vectorise_scatter, batch=lower.batch_scatter)
    register_node(Gather, compiled=lower.lower_gather, eval=E.eval_gather, show=show.show_gather,
                  batch=lower.batch_gather)
    register_node(SequenceScoped, compiled="eval", eval=E.eval_sequence_scoped, show=show.show_seq,
                  vectorise=lower.vectorise_sequence_scoped)
    register_node(FoldTree, compiled="eval", eval=E.eval_fold_tree, show=show.show_fold_tree,
                  vectorise=lower.vectorise_fold_tree, batch=folds.batch_fold_tree)
    register_node(GetA, compiled="eval", eval=E.eval_get_a, show=show.show_get_a,
                  batch=folds.batch_get_a)
    register_node(UnTree, compiled="eval", eval=E.eval_untree, show=show.show_untree,
                  vectorise=lower.vectorise_untree)
    # the type former: D[Array τ]₂ = Bag (Z × D[τ]₂), zero BEmpty
    register_type(
        TypeFormer(ArrayT, D2=lambda t: BagT(D2(t.elem)), zerot=lambda t: BEmptyT(),
                   ctg_from_json=cotangents.ctg_from_json, densify=cotangents.densify,
                   dense_to_json=cotangents.dense_to_json),
        linear=(LinearType(BagT, BagT.zero),),
        values=(CotangentValue(Bag, plus=lambda x, y: x.plus(y), phi=lambda x: x.phi(),
                               size=lambda x: x.size()),))
    register_primitive(E.ISUM)
    register_primitive(E.SUM)
