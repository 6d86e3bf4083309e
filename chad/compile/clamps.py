"""The clamp `if x < lo then lo else if x > hi then hi else x` on integers,
recognised in a vectorised body (chad/compile/vectorise.py) so that it runs as
one `vector_support.vclamp` (np.clip) instead of two comparisons and two
np.where: a stencil's clamped neighbour index (examples/stencil.chad), whose
result is then known to be a shifted loop index (chad/compile/shifts.py).

Either test may come first (`x > hi` then `x < lo`), each may be strict or
not and written either way round (`x < lo`, `lo > x`, `x <= lo`, `lo >= x`);
each test's true branch must be its bound itself (the same term, by
structural equality), and the innermost else branch x. On integers, with
lo <= hi, every such form is the clip (at x = lo the strict and the non-strict
test give the same value); with lo > hi they differ, and vclamp computes the
`if` itself there.
"""

from __future__ import annotations

from chad.terms import Case, Pair, Prim, free_vars

# the comparisons on Z (the checker's int variants) -> for each side the bound
# may be on: (that side, is x below the bound when true, strict)
_TESTS = {"ILT": ((1, True, True), (0, False, True)),
          "ILE": ((1, True, False), (0, False, False)),
          "IGT": ((1, False, True), (0, True, True)),
          "IGE": ((1, False, False), (0, True, False))}


class Clamp:
    """A matched clamp: x, lo and hi terms and the vclamp flags."""

    __slots__ = ("x", "lo", "hi", "below_first", "below_strict", "above_strict")

    def __init__(self, x, lo, hi, below_first, below_strict, above_strict) -> None:
        self.x, self.lo, self.hi = x, lo, hi
        self.below_first = below_first
        self.below_strict, self.above_strict = below_strict, above_strict


def _tests(scrut):
    """The readings of a comparison as `x below/above bound`:
    (x, bound, below, strict) for each side the bound may be on."""
    if type(scrut) is not Prim or scrut.op not in _TESTS or type(scrut.arg) is not Pair:
        return ()
    sides = (scrut.arg.left, scrut.arg.right)
    out = []
    for bound_side, below, strict in _TESTS[scrut.op]:
        out.append((sides[1 - bound_side], sides[bound_side], below, strict))
    return out


def _plain(t: Case) -> bool:
    """The case's branches do not read what they matched (an `if`)."""
    return t.lname not in free_vars(t.lbody) and t.rname not in free_vars(t.rbody)


def match(t: Case) -> Clamp | None:
    """The clamp t is, or None."""
    inner = t.rbody
    if type(inner) is not Case or not (_plain(t) and _plain(inner)):
        return None
    for x, bound, below, strict in _tests(t.scrut):
        if t.lbody != bound:
            continue
        for x2, bound2, below2, strict2 in _tests(inner.scrut):
            if below2 == below or x2 != x or inner.lbody != bound2 or inner.rbody != x:
                continue
            lo, hi = (bound, bound2) if below else (bound2, bound)
            below_strict, above_strict = (strict, strict2) if below else (strict2, strict)
            return Clamp(x, lo, hi, below, below_strict, above_strict)
    return None
