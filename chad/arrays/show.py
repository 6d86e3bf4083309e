"""`chad show` notation for the array forms (source forms as they occur in target
terms, and the target-only operations of chad/arrays/nodes.py)."""

from __future__ import annotations

from chad.target_printer import SHOW_EXTENSIONS
from chad.terms import Build, Fold, Index, Length, MapA

from . import nodes as N

_ATOM, _APP = 3, 2


def _reg(cls):
    def register(fn):
        SHOW_EXTENSIONS[cls] = fn
        return fn

    return register


@_reg(Build)
def _build(t, one):
    return f"build {one(t.size, _ATOM)} (\\{t.name} -> {one(t.body)})", _APP


@_reg(MapA)
def _map(t, one):
    return f"map (\\{t.name} -> {one(t.body)}) {one(t.arr, _ATOM)}", _APP


@_reg(Fold)
def _fold(t, one):
    return f"fold (\\{t.name} -> {one(t.body)}) {one(t.arr, _ATOM)}", _APP


@_reg(Index)
def _index(t, one):
    return f"{one(t.arr, _APP)} ! {one(t.idx, _ATOM)}", 1


@_reg(Length)
def _length(t, one):
    return f"length {one(t.expr, _ATOM)}", _APP


@_reg(N.BEmptyT)
def _bempty(t, one):
    return "BEmpty", _ATOM


@_reg(N.BOneT)
def _bone(t, one):
    return f"BOne {one(t.idx, _ATOM)} {one(t.val, _ATOM)}", _APP


@_reg(N.BArrayT)
def _barray(t, one):
    if t.idx is None:
        return f"BArray {one(t.vals, _ATOM)}", _APP
    return f"BArray {one(t.idx, _ATOM)} {one(t.vals, _ATOM)}", _APP


@_reg(N.BFillT)
def _bfill(t, one):
    return f"BFill {one(t.arr, _ATOM)} {one(t.val, _ATOM)}", _APP


@_reg(N.Collect)
def _collect(t, one):
    return f"collect {one(t.bag, _ATOM)}", _APP


@_reg(N.Zeros)
def _zeros(t, one):
    return f"zeros {one(t.size, _ATOM)}", _APP


@_reg(N.Scatter)
def _scatter(t, one):
    return f"scatter {one(t.dense, _ATOM)} {one(t.pairs, _ATOM)}", _APP


@_reg(N.Unzip)
def _unzip(t, one):
    return f"unzip {one(t.arr, _ATOM)}", _APP


@_reg(N.Gather)
def _gather(t, one):
    return f"gather {one(t.arr, _ATOM)} {one(t.idx, _ATOM)}", _APP


@_reg(N.SequenceScoped)
def _seq(t, one):
    inits = ", ".join(one(x) for x in t.inits)
    keep = "" if not t.keep else " keep " + ",".join(map(str, t.keep))
    return (f"sequenceScoped [{inits}]{keep} {one(t.fns, _ATOM)} {one(t.ctgs, _ATOM)}", _APP)


@_reg(N.FoldTree)
def _fold_tree(t, one):
    return f"foldTree (\\{t.name} -> {one(t.body)}) {one(t.arr, _ATOM)}", _APP


@_reg(N.GetA)
def _get_a(t, one):
    return f"getA {one(t.tree, _ATOM)}", _APP


@_reg(N.UnTree)
def _untree(t, one):
    return f"unTree {one(t.init, _ATOM)} {one(t.ctg, _ATOM)} {one(t.tree, _ATOM)}", _APP
