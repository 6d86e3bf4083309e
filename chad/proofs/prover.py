"""Discharging the per-rule obligations of chad/proofs/rules.py with z3
(Efficient CHAD (Smeding & Vákár), appendix B: the formalisation's `arith-solver`
asserts a lemma's hypotheses and its negated goal and expects unsat).

For constants c and b (the per-term slack; b = 0 is the formalisation's TH1),
an obligation holds when

    hyps ∧ (∀k. L_k <= c·P_k − mult_k·b) ∧ ¬(L <= c·P − b)

is unsatisfiable (mult_k = 1, or a loop's number of elements n when L_k and P_k
are sums over them). `check` returns the verdict with z3's model when it is not,
and the slack c·P − b − L in that model; `min_constant` the smallest c from
which it holds; `smtlib` the obligation as a self-contained SMT-LIB script.
"""

from __future__ import annotations

from attrs import frozen

import z3

from .rules import Obligation

MAX_CONSTANT = 1000  # `min_constant` gives up above this: the rule has no constant


@frozen
class Verdict:
    holds: bool
    model: dict | None = None   # the counterexample, symbol -> value
    slack: int | None = None    # c·P − L in the counterexample (negative)
    error: str | None = None    # the rule's term could not be evaluated


def solver_for(ob: Obligation, c: int, b: int = 0) -> z3.Solver:
    s = z3.Solver()
    for h in ob.hyps:
        s.add(h)
    for lhs, P, mult in ob.sub_hyps:
        s.add(lhs <= c * P - mult * b)
    s.add(z3.Not(ob.lhs <= c * ob.P - b))
    return s


def check(ob: Obligation, c: int, b: int = 0) -> Verdict:
    if ob.error is not None:
        return Verdict(False, error=ob.error)
    s = solver_for(ob, c, b)
    r = s.check()
    if r == z3.unsat:
        return Verdict(True)
    if r != z3.sat:
        return Verdict(False, error=f"z3 says {r}")
    m = s.model()
    model = {d.name(): m[d].as_long() for d in m.decls()}
    slack = m.eval(c * ob.P - b - ob.lhs, model_completion=True).as_long()
    return Verdict(False, model, slack)


def min_constant(ob: Obligation, b: int = 0) -> int | None:
    """The smallest c from which the obligation holds up to 64 (or MAX_CONSTANT;
    None: it does not hold there). One solver holds the hypotheses, each c is a
    push/pop."""
    if ob.error is not None:
        return None
    s = z3.Solver()
    s.add(*ob.hyps)

    def holds(c: int) -> bool:
        s.push()
        for lhs, P, mult in ob.sub_hyps:
            s.add(lhs <= c * P - mult * b)
        s.add(z3.Not(ob.lhs <= c * ob.P - b))
        r = s.check()
        s.pop()
        return r == z3.unsat

    hi = 64 if holds(64) else MAX_CONSTANT
    if hi == MAX_CONSTANT and not holds(hi):
        return None
    # With b > 0 a small c can make the hypotheses contradictory (the step then
    # holds vacuously), so holding is not monotone in c: scan down from hi to
    # the first c that fails.
    while hi > 0 and holds(hi - 1):
        hi -= 1
    return hi


def smtlib(ob: Obligation, c: int, b: int = 0) -> str:
    """The obligation at constants c, b: declarations, hypotheses, the negated
    goal, (check-sat). unsat means the rule's step holds."""
    s = solver_for(ob, c, b)
    head = (f"; TH1's inductive step for the CHAD rule {ob.rule}"
            + (f" ({ob.label})" if ob.label else "") + f", constants c = {c}, b = {b}\n"
            "; hypotheses, then the negated goal; expected answer: unsat\n")
    return head + s.to_smt2()
