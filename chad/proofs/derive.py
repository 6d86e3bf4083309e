"""Deriving a rule's obligation from the transform's code: the transform with
placeholders (`proof_chad`: a rule's sub-terms `Sub(k)` become `SubChad(k)`),
applied to a rule's source shape (`transform`), and the result of one
evaluation path (`Obligation`). Efficient CHAD (Smeding & Vákár), appendix B:
the formalisation's `lemmas.agda` states one such inequality per rule.
chad/proofs/rules.py evaluates the first-order, array and loop rules with them,
chad/proofs/function_rules.py the function rules."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

from attrs import field, frozen

from chad.primitives import PRIMITIVES, Primitive
from chad.terms import Term
from chad.transform.common import Context
from chad.transform.efficient import Chad

from .specs import Instance, abs_type
from .symbolic import ABSTRACT_PRIM, AbsDPrim, Sub, SubChad


@frozen
class Obligation:
    """One path of one rule: TH1's inequality for the rule's term under hypotheses."""

    rule: str
    label: str
    hyps: tuple                 # z3 booleans (LACM, plusv, zeros, shapes)
    sub_hyps: tuple             # (L_k, P_k, mult): TH1 for each sub-term call (mult: a loop's n)
    lhs: Any                    # crun + ccall + cmonad - φ(ctg) - φ'(in) + φ'(out) - |Γ|
    P: Any                      # the primal cost of the rule's term
    parts: dict = field(factory=dict, eq=False)  # crun, ccall, cmonad, phi_ctg, ...
    error: str | None = None    # the term could not be evaluated (a malformed rule)


def proof_chad(chad_class: type, subs: dict, sources: dict | None = None,
               derivs: dict | None = None) -> type:
    """chad_class with placeholders: `Sub(k)` becomes `SubChad(k)`, and the context
    length each sub-term is transformed in is recorded in `subs`. With `sources`
    (k -> a real sub-term), `derivs[k]` gets the real derivative of sub-term k,
    transformed in the same context (for the concrete check)."""

    class ProofChad(chad_class):
        def __call__(self, t):
            if isinstance(t, Sub):
                subs[t.k] = len(self.ctx.types)
                if sources is not None:
                    ctx = Context(dict(self.ctx.levels), list(self.ctx.types))
                    derivs[t.k] = chad_class(ctx, self.fresh)(sources[t.k])
                return SubChad(t.k, t.ty)
            return super().__call__(t)

    return ProofChad


def transform(inst: Instance, chad_class: type = Chad, sources: dict | None = None,
              derivs: dict | None = None) -> tuple[Term, dict]:
    ctx = Context()
    for name, ty in inst.ctx:
        ctx.push(name, ty)
    subs: dict = {}
    with abstract_primitive():
        return proof_chad(chad_class, subs, sources, derivs)(ctx)(inst.source), subs



@contextmanager
def abstract_primitive():
    """The formalisation's abstract primitive (derivative `AbsDPrim`) in the
    primitive table while one rule is transformed, and only then."""
    PRIMITIVES[ABSTRACT_PRIM] = Primitive(ABSTRACT_PRIM, abs_type(1), abs_type(2), None,
                                          lambda p, d: AbsDPrim(p, d))
    try:
        yield
    finally:
        del PRIMITIVES[ABSTRACT_PRIM]
