"""The shapes of the rule table of chad/proofs/rules.py: a rule (`RuleSpec`) is a
list of source shapes (`Instance`) whose sub-terms are placeholders, in the outer
context `GAMMA` (Efficient CHAD (Smeding & Vákár), appendix B: a lemma per rule)."""

from __future__ import annotations

from typing import Callable

from attrs import frozen

from chad.terms import Term

from .symbolic import AbsT


@frozen
class Instance:
    """One source shape of a rule: the term, its context (outer variables) and a label."""

    source: Term
    ctx: tuple  # ((name, type), ...)
    label: str = ""


@frozen
class RuleSpec:
    name: str
    instances: Callable[[], list]   # () -> [Instance]
    fragment: bool = False           # in the formalisation's fragment
    note: str = ""
    # evaluate(inst, rule, chad_class, trail) -> (SymEval, Obligation), for a rule
    # whose goal is not TH1 of its source term (chad/proofs/function_rules.py)
    evaluate: Callable | None = None
    # (evaluate) -> [Obligation], evaluate(Instance) -> its Obligation (one path):
    # obligations derived otherwise than one per instance path
    # (chad/proofs/literal_rules.py: generalised over a length)
    derive: Callable | None = None


def abs_type(k: int) -> AbsT:
    return AbsT(k)


GAMMA = (("x0", abs_type(100)), ("x1", abs_type(101)))  # the outer context (|Γ| = 2)


