"""Target-language node classes of the derivative of `iter` (the loops extension).

Efficient CHAD (Smeding & Vákár) has no loop construct; these two nodes are its
recipe for `map` (§7: the forward pass keeps one backpropagator per element, the
reverse pass runs each in a `scope` for the bound variable's cell) applied to a
loop whose steps depend on each other: the forward pass keeps one
backpropagator per step, the reverse pass runs them in reverse order and
threads the state's cotangent from one step to the one before. Their costs are
in chad/loops/evaluate.py and docs/cost-model.md ("Iteration").

    IterFwd n (s. body) x    body is a CHAD'd step returning (next state, backpropagator):
                             the final state and the tuple of the n backpropagators
    IterBack bps d init      the action running bps in reverse order, each in
                             `scope init`, d the final state's cotangent; its result
                             is the start value's cotangent
"""

from __future__ import annotations

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
