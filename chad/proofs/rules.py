"""The CHAD rules as proof obligations: each rule's inductive step of TH1
(Efficient CHAD (Smeding & Vákár), appendix B, `lemmas.agda`), derived from the
rule's code.

For a rule, a source term whose sub-terms are placeholders (`Sub(k, τ)`, abstract
types) is transformed by the real transform (the class `chad_class`, by default
chad/transform/efficient.py's `Chad`, whose extension rules come from the table
chad.tables.CHAD); the produced term is evaluated by chad/proofs/symbolic.py, its
backpropagator applied to an unknown cotangent and the resulting action run on an
environment of unknown cells. Each evaluation path (a primal sum's side, a
sparse cotangent's shape) is one `Obligation`:

    hypotheses (LACM, plusv, zeros, TH1 for each sub-term: L_k <= c * P_k - b,
                a loop's elements summed: <= c * ΣP_k - n * b)
    ==> crun + ccall + cmonad - φ(ctg) - φ'(denvin) + φ'(denvout) - |Γ| <= c * P - b

(RULE_STEP in chad/proofs/statements.py). A rule table is a list of `RuleSpec`;
tests substitute their own (a mutated copy of one rule) through `chad_class`.
"""

from __future__ import annotations

from typing import Callable

from chad.primitives import PRIMITIVES
from chad.terms import Case, Fst, Inl, Inr, Let, Pair, Prim, Snd, Unit, Var
from chad.transform.common import D2
from chad.transform.efficient import Chad
from chad.types import UNIT, Prod, Sum

from . import array_rules as _array_rules  # its import registers the array nodes' rules
from . import loop_rules as _loop_rules  # ... and the loops'
from . import iter_rules as _iter_rules
from . import scan_rules as _scan_rules
from .derive import Obligation, abstract_primitive, proof_chad, transform  # noqa: F401
from .function_rules import function_rules
from . import fold_rules as _fold_rules
from . import gather_rules as _gather_rules
from . import literal_rules as _literal_rules
from .specs import GAMMA, Instance, RuleSpec, abs_type
from .symbolic import (
    ABSTRACT_PRIM, DPRIM_BOUND, Concrete, Opaque, SymEval, SymbolicError, Sub, all_paths,
)


def evaluate_instance(inst: Instance, rule: str, chad_class: type = Chad,
                      concrete: Concrete | None = None, ctg=None, denvin=None,
                      env: dict | None = None, trail=None, target=None, subs=None):
    """Evaluate one path: returns the SymEval and the Obligation. (`target`,
    `subs`: the transformed term, when the caller has transformed it.)"""
    if target is None:
        target, subs = transform(inst, chad_class)
    se = SymEval(trail, subs, concrete)
    if env is None:
        env = {name: Opaque(name) for name, _ in inst.ctx}
    try:
        _, P = se.eval(inst.source, dict(env))
        (_, bp), crun = se.eval(target, dict(env))
        d = ctg if ctg is not None or concrete is not None else se.opaque_ctg(
            D2(inst.source.ty), "phid")
        action, ccall = se.apply(bp, d)
        cells = tuple(denvin) if denvin is not None else tuple(
            se.opaque_ctg(D2(ty), "phiin") for _, ty in inst.ctx)
        phi_in = sum((se.phi(x) for x in cells), 0)
        _, out, m = se.run_action(action, cells)
        cmonad = 1 + len(cells) + m
        phi_out = sum((se.phi(x) for x in out), 0)
        lhs = crun + ccall + cmonad - se.phi(d) - phi_in + phi_out - len(cells)
        se.forward_hyps()
        parts = dict(crun=crun, ccall=ccall, cmonad=cmonad, phi_ctg=se.phi(d), phi_in=phi_in,
                     phi_out=phi_out, out=out)
        err = None
    except (SymbolicError, KeyError, IndexError, TypeError, AttributeError) as e:
        P, lhs, parts, err = 0, 0, {}, f"{type(e).__name__}: {e}"
    label = "; ".join(x for x in [inst.label] + (trail.labels if trail else []) if x)
    ob = Obligation(rule, label, tuple(se.hyps), tuple((h.lhs, h.P, h.mult) for h in se.sub_hyps),
                    lhs, P, parts, err)
    return se, ob


def obligations(spec: RuleSpec, chad_class: type = Chad) -> list[Obligation]:
    """Every path of every instance of a rule."""
    if spec.derive is not None:
        return spec.derive(lambda inst: evaluate_instance(inst, spec.name, chad_class)[1])
    out = []
    evaluate = spec.evaluate or (lambda inst, rule, cls, trail: evaluate_instance(
        inst, rule, cls, trail=trail))
    for inst in spec.instances():
        for _trail, (_se, ob) in all_paths(
                lambda trail: evaluate(inst, spec.name, chad_class, trail)):
            out.append(ob)
    return out


# ------------------------------------------------------------------ the core rules


def _one(term, label="") -> Callable[[], list]:
    return lambda: [Instance(term, GAMMA, label)]


def _prim_instances(op: str) -> Callable[[], list]:
    p = PRIMITIVES[op]
    return lambda: [Instance(Prim(op, Sub(1, p.arg), 1.0 if op == "LIT" else 1 if op == "ILIT"
                                  else None, ty=p.res), GAMMA)]


def _case_term():
    ty = Sum(abs_type(1), abs_type(2))
    return Case(Sub(1, ty), "y", Sub(2, abs_type(3)), "z", Sub(3, abs_type(3)), ty=abs_type(3))


def _abstract_prim() -> Callable[[], list]:
    return lambda: [Instance(Prim(ABSTRACT_PRIM, Sub(1, abs_type(1)), ty=abs_type(2)), GAMMA)]


def core_rules() -> list[RuleSpec]:
    pab = Prod(abs_type(1), abs_type(2))
    sab = Sum(abs_type(1), abs_type(2))
    rules = [
        RuleSpec("var", _one(Var("x1", ty=abs_type(101))), True),
        RuleSpec("let", _one(Let("y", Sub(1, abs_type(1)), Sub(2, abs_type(2)),
                                 ty=abs_type(2))), True),
        RuleSpec("unit", _one(Unit(ty=UNIT)), True),
        RuleSpec("pair", _one(Pair(Sub(1, abs_type(1)), Sub(2, abs_type(2)), ty=pab)), True),
        RuleSpec("fst", _one(Fst(Sub(1, pab), ty=abs_type(1))), True),
        RuleSpec("snd", _one(Snd(Sub(1, pab), ty=abs_type(2))), True),
        RuleSpec("inl", _one(Inl(Sub(1, abs_type(1)), ty=sab)), True),
        RuleSpec("inr", _one(Inr(Sub(1, abs_type(2)), ty=sab)), True),
        RuleSpec("case", _one(_case_term()), True),
        RuleSpec("prim", _abstract_prim(), True,
                 note=f"any primitive with cdprim - φ(d) + φ(dx) <= {DPRIM_BOUND} "
                      "(the formalisation's lemma-prim)"),
    ]
    for op, p in PRIMITIVES.items():
        if p.derivative is None or p.extra_cost is not None:
            continue  # target-only operations; SUM/ISUM are array rules
        rules.append(RuleSpec(f"prim {op}", _prim_instances(op), True))
    return rules


# The rules of the efficient transform that have no obligation yet, with what
# they need (docs/proofs.md, "Not proved yet"); `chad prove` lists them, so that
# its output never suggests that they were proved. They stay covered by the
# sampled checks of `chad check`.
NOT_YET: tuple = ()


def rule_table() -> list[RuleSpec]:
    """Every rule `chad prove` proves."""
    return (core_rules() + _array_rules.array_rules() + _loop_rules.loop_rules()
            + _iter_rules.iter_rules() + _scan_rules.scan_rules() + _fold_rules.fold_rules()
            + _gather_rules.gather_rules() + _literal_rules.literal_rules()
            + function_rules())
