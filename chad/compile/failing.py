"""Which terms cannot fail: a term that raises no error on any argument may be
computed earlier than the program says (once for a loop that might run zero
times, chad/compile/vectorise.py; before an independent heavy let,
chad/compile/parallel_codegen.py) without changing what the program does."""

from __future__ import annotations

from chad.primitives import PRIMITIVES
from chad.terms import (
    Ann, Case, Fst, Inl, Inr, Length, Let, LFst, LPair, LSnd, LUnit, Pair, Prim, Snd, Unit, Var,
    children,
)

# primitives that may fail on some argument (an EvalError): not safe to hoist
_FAILING = frozenset({"IDIV", "IMOD", "FLOOR"})
# primitives that cannot fail whatever their arguments, though they have
# neither an inline nor a batched form: comparisons (on R and Z) and not/and/or
TOTAL = frozenset({"LT", "LE", "GT", "GE", "EQ", "NE", "ILT", "ILE", "IGT", "IGE", "IEQ",
                   "INE", "NOT", "AND", "OR"})


def safe(t) -> bool:
    """t cannot fail: it may be computed once for a loop that might run zero times."""
    stack = [t]
    while stack:
        node = stack.pop()
        cls = type(node)
        if cls is Prim:
            if node.op in ("LIT", "ILIT", "LZERO"):  # constants (LZERO: the linear 0.0)
                continue
            p = PRIMITIVES.get(node.op)
            if p is None or node.op in _FAILING or (p.inline is None and p.batched is None
                                                    and node.op not in ("SUM", "ISUM")
                                                    and node.op not in TOTAL):
                return False
            stack.append(node.arg)
        elif cls in (Var, Unit, Ann, Let, Pair, Fst, Snd, Length, Case, Inl, Inr, LUnit, LPair,
                     LFst, LSnd):
            stack.extend(children(node))
        else:
            return False
    return True
