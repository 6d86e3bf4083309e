"""Target-language node classes of the derivatives of `iter` and `scan` (the
loops extension).

Efficient CHAD (Smeding & Vákár) has no loop construct; these two nodes are its
recipe for `map` (§7: the forward pass keeps one backpropagator per element, the
reverse pass runs each in a `scope` for the bound variable's cell) applied to a
loop whose steps depend on each other: the forward pass keeps one
backpropagator per step, the reverse pass runs them in reverse order and
threads the state's cotangent from one step to the one before. `scan` is the
same loop over an array's elements, keeping every state. Their costs are in
chad/loops/evaluate.py and docs/cost-model.md ("Iteration", "Scan").

    IterFwd n (s. body) x    body is a CHAD'd step returning (next state, backpropagator):
                             the final state and the tuple of the n backpropagators
    IterBack bps d init      the action running bps in reverse order, each in
                             `scope init`, d the final state's cotangent; its result
                             is the start value's cotangent
    ScanFwd (p. body) x a    body is a CHAD'd step on p = (state, a ! i) returning
                             (next state, backpropagator): the array of the states
                             and the tuple of the backpropagators
    ScanBack bps d init      the action running bps in reverse order, each in
                             `scope init` (init the zero of S * A), on the state's
                             cotangent plus element i of the dense form of the
                             Bag d (the result's cotangent); its result is the pair
                             (start value's cotangent, dense array of the
                             elements' cotangents)
"""

from __future__ import annotations

from typing import Any

from attrs import field, frozen

from chad.terms import Loc, Term, node
from chad.types import Type


def _meta():
    return field(default=None, eq=False, kw_only=True, repr=False)


@node("count", "body", "init", binds={"body": "name"})
@frozen
class IterFwd(Term):
    """The forward pass of `iter count (name. body) init`, `body` the CHAD'd step."""

    count: Term
    name: str
    body: Term
    init: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("bps", "ctg", "init")
@frozen
class IterBack(Term):
    """The reverse pass: with d_n = ctg and, for k = n, ..., 1,
    d_(k-1) = fst (the result of scope init (bps ! (k-1)) d_k), the action
    returns d_0."""

    bps: Term
    ctg: Term
    init: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("body", "init", "arr", binds={"body": "name"})
@frozen
class ScanFwd(Term):
    """The forward pass of `scan (name. body) init arr`, `body` the CHAD'd step;
    `elem` is the source type of the states (it fixes their array
    representation)."""

    name: str
    body: Term
    init: Term
    arr: Term
    elem: Type | None = None
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("bps", "ctg", "init")
@frozen
class ScanBack(Term):
    """The reverse pass: with ds the dense array of the element cotangents the Bag
    ctg holds, e_k = 0 and, for i = k - 1, ..., 0, (e_i, da_i) = the result of
    scope init (bps ! i) (e_(i+1) + ds ! i), the action returns (e_0, [da_0, ...,
    da_(k-1)]). `state` and `elem` are the linear types D[S]₂ and D[A]₂."""

    bps: Term
    ctg: Term
    init: Term
    state: Any
    elem: Any
    loc: Loc | None = _meta()
    ty: Type | None = _meta()
