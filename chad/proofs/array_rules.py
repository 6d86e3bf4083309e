"""Symbolic cost rules of the array nodes the non-loop array rules produce
(index, length, sum), and those rules as proof obligations.

The costs are transcribed by hand from chad/arrays/evaluate.py (docs/cost-model.md,
"Arrays"): `t ! s` 1 + cost(t) + cost(s); `length t` 1 + cost(t); `prim SUM s`
1 + cost(s) + n; `BOne i v` 1 + cost(i) + cost(v), potential 1 + size(v);
`BFill a d` 1 + cost(a) + cost(d) + n, a BArray of n reals (potential 1 + n);
`BEmpty` 1, potential 1. An array of unknown length has a length symbol n >= 0.
tests/test_prove.py checks the transcription against the counting evaluator
(concrete mode, generated array programs). Efficient CHAD (Smeding & Vákár), §8
and Fig. 9; the rules themselves are chad/arrays/transform.py's.
"""

from __future__ import annotations

import numpy as np

from chad.arrays.bag import BEMPTY, BArray, BOne
from chad.arrays.evaluate import element
from chad.arrays.nodes import BEmptyT, BFillT, BOneT
from chad.primitives import PRIMITIVES
from chad.terms import Index, Length, Prim
from chad.types import ArrayT, Z

from .specs import GAMMA, Instance, RuleSpec
from .symbolic import EXTRA_RULES, AbsT, Opaque, OpaqueCtg, Sub


def length_of(se, a):
    """The length of an array value: len, or the length symbol of an opaque one."""
    if isinstance(a, Opaque):
        if a.length is None:
            a.length = se.sym("n")
        return a.length
    return len(a)


def _index(se, t, env):
    a, ca = se.eval(t.arr, env)
    i, ci = se.eval(t.idx, env)
    if isinstance(a, Opaque) or isinstance(i, Opaque):
        return Opaque("elem"), 1 + ca + ci
    if hasattr(a, "element_ctg"):  # dense cotangents (chad/proofs/loop_rules.py)
        return a.element_ctg(se, int(i)), 1 + ca + ci
    return element(a, int(i)), 1 + ca + ci


def _length(se, t, env):
    a, c = se.eval(t.expr, env)
    n = length_of(se, a)
    if isinstance(a, Opaque):
        v = Opaque("len")
        v.count = n  # the integer it is (chad/proofs/loop_rules.py: count_of)
        return v, 1 + c
    return n, 1 + c


def _bone(se, t, env):
    i, ci = se.eval(t.idx, env)
    v, cv = se.eval(t.val, env)
    cost = 1 + ci + cv
    if se.concrete is not None:
        return BOne(int(i), v), cost
    # size(v) = φ(v) (on every cotangent: chad/linear.py, Bag.phi)
    return OpaqueCtg(None, 1 + se.phi(v)), cost


def _bfill(se, t, env):
    a, ca = se.eval(t.arr, env)
    d, cd = se.eval(t.val, env)
    n = length_of(se, a)
    cost = 1 + ca + cd + n
    if se.concrete is not None:
        return BArray(np.full(n, 0.0 if d is None else float(d))), cost
    return OpaqueCtg(None, 1 + n), cost


def _bempty(se, t, env):
    return (BEMPTY if se.concrete is not None else OpaqueCtg(None, 1)), 1


EXTRA_RULES.update({Index: _index, Length: _length, BOneT: _bone, BFillT: _bfill,
                    BEmptyT: _bempty, "length": length_of})


def array_rules():
    def one(*terms):
        return lambda: [Instance(t, GAMMA, lbl) for t, lbl in terms]

    idx = [(Index(Sub(1, ArrayT(AbsT(1))), Sub(2, Z), ty=AbsT(1)), "element τ"),
           (Index(Sub(1, ArrayT(Z)), Sub(2, Z), ty=Z), "element Z")]
    specs = [
        RuleSpec("index", one(*idx)),
        RuleSpec("length", one((Length(Sub(1, ArrayT(AbsT(1))), ty=Z), ""))),
    ]
    for op in ("SUM", "ISUM"):
        if op in PRIMITIVES:
            p = PRIMITIVES[op]
            specs.append(RuleSpec(f"prim {op}", one((Prim(op, Sub(1, p.arg), ty=p.res), ""))))
    return specs
