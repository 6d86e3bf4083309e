"""A case in a vectorised forward pass whose branches end in (value,
backpropagator) pairs: CHAD of `map (\\x -> if x > 0.0 then x else 0.0) a` (a
ReLU), of a clamp, of `abs` written with `if` (Efficient CHAD (Smeding &
Vákár), Fig. 7: the case rule, inside §8's map and build).

CHAD's forward pass of `case c of inl _ -> e1 | inr _ -> e2` is the case of the
branches' forward passes, each a pair (y, \\d -> m). Batched over the loop
(docs/compiler.md, "Branches"):

* the value is `np.where(c, y1, y2)`: both branches' values (and the lets
  before them) are computed for every element, so they must be unable to fail
  (`safe`), as for a case of numbers (vectorise.Batcher._case);
* the backpropagator is ONE batched function (vectorise.back_function_tree)
  that runs m1 on the elements where c holds and m2 on the others: each
  branch's adds are `vector_support.vaddm`, which adds only where the branch's
  mask holds. An element's own cell gets exactly its branch's additions; a
  cell the elements share gets element 0's adds, then element 1's, ..., each
  element's those of its branch in program order, as the evaluator makes them.

The scrutinee must be a Bool that the branches do not read (CHAD's branches
here match unit; one outside the loop is a mask of n copies of it), cases may
nest (their masks are and-ed). Anything
else is not batchable: the per-element code runs, as before.
"""

from __future__ import annotations

from chad.terms import Case, Lam, Let, Pair, free_vars

from .failing import safe
from .vectorise import BVal, Batcher, NotBatchable, _real_literal, capture

# compile cases of pairs this way (chad/compile/backend.py `batching_cases`:
# off, such bodies run element by element, as before; for tests and benchmarks)
ENABLED = [True]


def forward_lets(b: Batcher, body, in_branch: bool = False) -> tuple[list, object]:
    """The lets of a forward-pass body bound in b (what to unbind, in order)
    and the term they end in. A let of a forward pass (a pair (y, \\d -> m),
    or a case of such: CHAD of a let whose right-hand side has a case) is the
    batched pair of y and the tree of backpropagators, which the body's own
    backpropagator applies (vectorise.run_back). In a branch every
    right-hand side must be unable to fail."""
    saved = []
    try:
        while type(body) is Let:
            rhs = body.rhs
            if in_branch and not (safe(rhs) or _forward_pass(rhs)):
                raise NotBatchable("a branch of a case that might fail")
            if _forward_pass(rhs):
                y, tree = forward_result(b, rhs, in_branch)
                v = BVal("tuple", dims=b.dims(y) | {0},
                         inner=(y, BVal("back", dims={0}, inner=tree)))
            else:
                v = b.value(rhs)
            saved.append(b.bind(body.name, v))
            body = body.body
    except BaseException:
        for s in reversed(saved):
            b.unbind(s)
        raise
    return saved, body


def _forward_pass(t) -> bool:
    """t ends in (value, backpropagator) pairs: a pair of a lambda, or a case
    (lets inside) whose branches do."""
    if not ENABLED[0]:
        return False
    while type(t) is Let:
        t = t.body
    if type(t) is Pair:
        return type(t.right) is Lam
    if type(t) is Case:
        return _forward_pass(t.lbody) and _forward_pass(t.rbody)
    return False


def forward_result(b: Batcher, body, in_branch: bool = False):
    """(y, tree) of a forward-pass body after its lets: a pair (y, lam) gives
    y's value and ("lam", lam, its captures); a case of such, np.where of the
    branches' values and ("case", c, left, right)."""
    if type(body) is Pair and type(body.right) is Lam:
        if in_branch and not safe(body.left):
            raise NotBatchable("a branch of a case that might fail")
        y = b.value(body.left)
        if isinstance(y, BVal) and not (y.kind == "num" and y.elem == "R"):
            raise NotBatchable("a branch whose value is not a real")
        return y, ("lam", body.right, capture(b, body.right))
    if type(body) is Case and ENABLED[0]:
        return _switch(b, body)
    if type(body) is Let and in_branch:
        saved, rest = forward_lets(b, body, True)
        try:
            return forward_result(b, rest, True)
        finally:
            for s in reversed(saved):
                b.unbind(s)
    raise NotBatchable("the body is not a pair of a value and a backpropagator")


def _switch(b: Batcher, t: Case):
    if t.lname in free_vars(t.lbody) or t.rname in free_vars(t.rbody):
        raise NotBatchable("a case reading what it matched")
    c = b.value(t.scrut)
    if not isinstance(c, BVal) and len(b.sizes) == 1:
        # a Bool outside the loop (a captured flag, `w > 0.0`): the same branch
        # for every element, as a mask of n copies of it
        c = BVal("num", b.gen.atom(f"_np.full({b.sizes[0]}, {b.bools(c)})"), {0}, elem="B")
    if not (isinstance(c, BVal) and c.kind == "num" and c.elem == "B"):
        raise NotBatchable("a case of pairs on a Bool outside the loop")
    (y1, left), (y2, right) = (forward_result(b, branch, in_branch=True)
                               for branch in (t.lbody, t.rbody))
    if not (isinstance(y1, BVal) or isinstance(y2, BVal) or _real_literal(_value_of(t.lbody))):
        # the branches' values (of one type) are reals: one of them is
        # batched (a real: forward_result), or a literal real
        raise NotBatchable("a case of values outside the loop")
    expr = b.gen.atom(f"_vselect({c.expr}, {b.numbers(y1)}, {b.numbers(y2)})")
    return BVal("num", expr, b.dims(y1, y2) | c.dims, elem="R", fresh=True), \
        ("case", c, left, right)


def _value_of(t):
    """The value term a branch ends in (its lets skipped), or None."""
    while type(t) is Let:
        t = t.body
    return t.left if type(t) is Pair else None
