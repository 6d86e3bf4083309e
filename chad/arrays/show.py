"""`chad show` notation for the array forms (source forms as they occur in target
terms, and the target-only operations of chad/arrays/nodes.py)."""

from __future__ import annotations

_ATOM, _APP = 3, 2


def show_build(t, one):
    return f"build {one(t.size, _ATOM)} (\\{t.name} -> {one(t.body)})", _APP


def show_map(t, one):
    return f"map (\\{t.name} -> {one(t.body)}) {one(t.arr, _ATOM)}", _APP


def show_fold(t, one):
    return f"fold (\\{t.name} -> {one(t.body)}) {one(t.arr, _ATOM)}", _APP


def show_index(t, one):
    return f"{one(t.arr, _APP)} ! {one(t.idx, _ATOM)}", 1


def show_array_lit(t, one):
    return "[" + ", ".join(one(e) for e in t.elems) + "]", _ATOM


def show_length(t, one):
    return f"length {one(t.expr, _ATOM)}", _APP


def show_bempty(t, one):
    return "BEmpty", _ATOM


def show_bone(t, one):
    return f"BOne {one(t.idx, _ATOM)} {one(t.val, _ATOM)}", _APP


def show_barray(t, one):
    if t.idx is None:
        return f"BArray {one(t.vals, _ATOM)}", _APP
    return f"BArray {one(t.idx, _ATOM)} {one(t.vals, _ATOM)}", _APP


def show_bfill(t, one):
    return f"BFill {one(t.arr, _ATOM)} {one(t.val, _ATOM)}", _APP


def show_collect(t, one):
    return f"collect {one(t.bag, _ATOM)}", _APP


def show_zeros(t, one):
    return f"zeros {one(t.size, _ATOM)}", _APP


def show_scatter(t, one):
    return f"scatter {one(t.dense, _ATOM)} {one(t.pairs, _ATOM)}", _APP


def show_unzip(t, one):
    return f"unzip {one(t.arr, _ATOM)}", _APP


def show_unzip_map(t, one):
    return f"unzipMap (\\{t.name} -> {one(t.body)}) {one(t.arr, _ATOM)}", _APP


def show_scatter_bag(t, one):
    return f"scatterBag {one(t.arr, _ATOM)} {one(t.bag, _ATOM)}", _APP


def show_gather(t, one):
    return f"gather {one(t.arr, _ATOM)} {one(t.idx, _ATOM)}", _APP


def show_seq(t, one):
    inits = ", ".join(one(x) for x in t.inits)
    keep = "" if not t.keep else " keep " + ",".join(map(str, t.keep))
    return (f"sequenceScoped [{inits}]{keep} {one(t.fns, _ATOM)} {one(t.ctgs, _ATOM)}", _APP)


def show_fold_tree(t, one):
    return f"foldTree (\\{t.name} -> {one(t.body)}) {one(t.arr, _ATOM)}", _APP


def show_get_a(t, one):
    return f"getA {one(t.tree, _ATOM)}", _APP


def show_untree(t, one):
    return f"unTree {one(t.init, _ATOM)} {one(t.ctg, _ATOM)} {one(t.tree, _ATOM)}", _APP
