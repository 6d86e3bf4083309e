"""`chad show` notation for `iter` and `scan` and the target nodes of their
derivatives (chad/loops/nodes.py: the forward and reverse passes, after the
per-element backpropagators of `map` in Efficient CHAD (Smeding & Vákár), §7)."""

from __future__ import annotations

_ATOM, _APP = 3, 2


def show_iter(t, one):
    return f"iter {one(t.count, _ATOM)} (\\{t.name} -> {one(t.body)}) {one(t.init, _ATOM)}", _APP


def show_iter_fwd(t, one):
    return (f"iterFwd {one(t.count, _ATOM)} (\\{t.name} -> {one(t.body)}) "
            f"{one(t.init, _ATOM)}", _APP)


def show_iter_back(t, one):
    return f"iterBack {one(t.bps, _ATOM)} {one(t.ctg, _ATOM)} {one(t.init, _ATOM)}", _APP


def show_scan(t, one):
    return (f"scan (\\{t.name} -> {one(t.body)}) {one(t.init, _ATOM)} "
            f"{one(t.arr, _ATOM)}", _APP)


def show_scan_fwd(t, one):
    return (f"scanFwd (\\{t.name} -> {one(t.body)}) {one(t.init, _ATOM)} "
            f"{one(t.arr, _ATOM)}", _APP)


def show_scan_back(t, one):
    return f"scanBack {one(t.bps, _ATOM)} {one(t.ctg, _ATOM)} {one(t.init, _ATOM)}", _APP
