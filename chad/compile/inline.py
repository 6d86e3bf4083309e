"""Inlining before simplification: a node whose class declares an expansion
(`register_node(inline=...)`, e.g. a call of a def's derivative) is replaced by
it, so that the simplifier can see through the call: the callee's
backpropagator is then applied where it is known, and its `run` over the
callee's parameters becomes straight-line code in the caller.

The expansion is the callee's body under `let`s binding its parameters, so it
has the call's meaning; names may repeat (the simplifier renames binders apart
first). Bounded: a body larger than MAX_BODY nodes is not inlined, nor anything
once BUDGET nodes have been added to a term, so nested calls cannot blow up.
Step counts are unaffected: the counting evaluator never sees these terms.

A call of a def's *primal* in a target term (a `Call`: e.g. the index
expression `clamp(i - 1, n)` of a gather, which the forward pass evaluates in a
build of its own) is expanded the same way when the def is small and calls no
def (chad/compile/source.py `small_defs`), so that build can be batched.
"""

from __future__ import annotations

from chad import tables
from chad.terms import Call, rewrite, subterms

from .source import expand_call, small_defs

MAX_BODY = 4000
BUDGET = 60_000


class _Inliner:
    def __init__(self, defs: dict) -> None:
        self.defs = defs
        self.added = 0
        self.sizes: dict[int, int] = {}
        self.small = small_defs(defs.values())

    def size(self, t) -> int:
        n = self.sizes.get(id(t))
        if n is None:
            n = self.sizes[id(t)] = sum(1 for _ in subterms(t))
        return n

    def __call__(self, t):
        """t with its expansions made, in pre-order (an expansion is expanded
        again), by chad/terms.py's `rewrite`: a loop over an explicit stack, so a
        deep term needs no deep Python stack."""
        return rewrite(t, self._expand)

    def _expand(self, t):
        """t's expansion, expanded again until none applies."""
        while True:
            if type(t) is Call and t.name in self.small and self.added < BUDGET:
                d = self.small[t.name]
                self.added += self.size(d.body)
                t = expand_call(t, d)
                continue
            expand = tables.INLINE.get(type(t))
            if expand is not None and self.added < BUDGET:
                new = expand(t, self.defs, self)
                if new is not None:
                    t = new
                    continue
            return t


def inline(term, defs: dict):
    """term with the declared expansions made."""
    return _Inliner(defs)(term)
