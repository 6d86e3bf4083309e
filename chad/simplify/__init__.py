"""The simplifier of target (derivative) terms.

    from chad.simplify import simplify
    simplify(term) -> term            the same values, gradients and failures

A meaning-preserving rewriter for the terms the CHAD transformations produce
(Efficient CHAD, Smeding & Vákár: the forward term `chad t`, a pair of the
primal result and the backpropagator, and the gradient term `run (snd (chad t)
ctg) zero-env`), in the spirit of the `Simplify` module of the Haskell CHAD
implementation by Vákár and Smeding: beta-reduction, projections of known
pairs, inlining, dead code, the EVM monad laws and zero propagation, until the
backward pass of straight-line code is a straight line of `add`s, as a
hand-written vector-Jacobian product would be (docs/simplifier.md shows one).
Step counts are not preserved: the counting evaluator keeps running the
unsimplified terms; the compiler (chad/compile/) generates code from simplified
ones.

The driver: make every binder name unique (names.py), then rounds of
occurrence analysis (occurrences.py) and one rewriting pass (rewrite.py),
until a round changes nothing or MAX_ROUNDS rounds have run, then the
recomputation of lambdas' capture lists and the right-nesting of `>>` chains
(captures.py), once: the rewrites never read a capture list, so only a chain
nested anew calls for another round. Each round is linear in the size of the
term. Every pass walks the spines a deep program gives (a program of 10,000
nested lets gives a target term nested as deep) with loops, on the caller's
thread; a term nested some other way runs again on a big-stack thread
(chad/deep.py, run_shallow).
"""

from __future__ import annotations

from chad.deep import run_shallow
from chad.terms import Term, subterms

from .captures import tidy, tidy_renested
from .names import Fresh, uniquify
from .occurrences import analyse
from .predicates import may_fail
from .rewrite import run_pass

MAX_ROUNDS = 24


def simplify(term: Term, max_rounds: int = MAX_ROUNDS) -> Term:
    """The simplified term: the same value (and, run, the same gradient) as term
    on every input where term evaluates, and a failure where it fails."""
    return run_shallow(_simplify, term, max_rounds)[0]


def simplify_rounds(term: Term, max_rounds: int = MAX_ROUNDS) -> tuple[Term, int]:
    """(simplify(term), the number of rounds run; the last one changed nothing
    unless it is max_rounds)."""
    return run_shallow(_simplify, term, max_rounds)


def term_size(term: Term) -> int:
    """The number of nodes of a term (iterative)."""
    return sum(1 for _ in subterms(term))


def _simplify(term: Term, max_rounds: int) -> tuple[Term, int]:
    occ = analyse(term)
    fresh = Fresh(occ.names)
    if occ.dup:
        term = uniquify(term, fresh, occ.free)
        occ = analyse(term)
    rounds = 0
    while rounds < max_rounds:
        rounds += 1
        if rounds > 1:
            occ = analyse(term)
            fresh.taken |= occ.names
        new, changes = run_pass(term, occ.infos, fresh, occ.aliases)
        if new is term:  # a fixpoint of the pass: tidy it
            term, renested = tidy_renested(term)
            if not renested:  # only capture lists changed: still a fixpoint
                return term, rounds
            continue  # a `>>` chain nested anew may give the pass more to do
        term = new
    return tidy(term), rounds


__all__ = ["simplify", "simplify_rounds", "may_fail", "term_size", "MAX_ROUNDS"]
