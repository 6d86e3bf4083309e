r"""The function rules (lambda, application, def call) as proof obligations
(Efficient CHAD (Smeding & Vákár), §9 and appendix C: closure conversion; the
CHAD rules are chad/functions/efficient.py's fused form and
chad/functions/calls.py's).

A closure's derivative is called where the function is applied, so TH1 alone
does not carry the induction: the application rule needs to know what calling a
function value's derivative costs. The invariant for function values (FUN_STEP
in chad/proofs/statements.py), in TH1's shape: for a call of the derivative of a
function value f on an argument x, Cfwd the cost of that call (the closed
function's body), Cbwd that of calling the backpropagator it returns on a
cotangent d, dx and denv the cotangents it returns (of the argument, and of the
closure's environment: a bag of (capture index, cotangent) entries), P the cost of
the primal call f x,

    Cfwd + Cbwd − φ(d) + φ(dx) + φ*(denv) − K ≤ c·P − b

with K = FUN_K for a closure, and for a def of n parameters (its cotangents
dy_1..dy_n in place of dx, denv) K = DEF_K0 + DEF_K1·n. The obligations:

* `lam` (TH1 of `\x -> e`): the closure is built in 1 + k steps, and its
  backpropagator scatters the environment bag into the k captured variables' cells;
* `lam closure`: the closure it builds satisfies FUN_STEP, given TH1 for e in
  the closure's run-state [x, env] (the body's derivative is `relevel`led: its
  adds to captured variables become adds of one-entry bags to the env cell);
* `var captured`: TH1 in that run-state for a captured variable (the rule that
  `relevel` changes), so that the body's hypothesis follows by the same induction;
* `app` (TH1 of `f e`): given TH1 for f and e and FUN_STEP for the call;
* `def`: a def's derivative satisfies FUN_STEP given TH1 for its body (in the
  context of its parameters);
* `def call` (TH1 of `g(e1..en)`): given TH1 for the arguments and FUN_STEP for g.

**The potential of closure cotangents.** φ (chad/linear.py) counts the nodes of an
environment bag (its size); combining two bags (`EnvCat`) costs a step and adds
a node, so `plusv`'s bound fails by 2 (docs/proofs.md, "A finding"), and
scattering a bag costs about 4 steps per entry, which its size does not pay for.
The proofs use the potential φ* for these cotangents:

    φ*(bag) = (2 + ENV_ENTRY_W)·E + 1 + Σ_entries φ*(d_i)      (E entries)
    φ*(LPacked(tag, v)) = 1 + φ*(v)

and φ everywhere else. With it `plusv` satisfies the formalisation's bound
(cplus − φ*(x) − φ*(y) + φ*(x + y) ≤ 0: an `EnvCat` costs 1 and φ* drops by 1;
a packed cotangent's + costs 2 and φ* drops by 2) and zeros cost 1 with
potential 1, so closure cotangents satisfy every hypothesis the abstract types
of the other rules' obligations assume: those obligations hold for function
types too. The extra weight per entry is paid where the entry is made (the
captured variable's use, `var captured`).

The symbolic rules of the closure nodes are chad/proofs/closure_nodes.py's;
tests/test_prove_functions.py checks them against the counting evaluator.
"""

from __future__ import annotations

from chad.functions.calls import derived_body
from chad.functions.efficient import relevel
from chad.functions.types import L_ABSTRACT
from chad.terms import App, Call, Def, Lam, Param, Var
from chad.transform.common import D2
from chad.types import Fun

from .closure_nodes import call_deriv, untuple, def_k
from .derive import Obligation, proof_chad, transform
from .specs import GAMMA, Instance, RuleSpec, abs_type
from .statements import FUN_K
from .symbolic import AbsLT, Opaque, OpaqueCtg, SymbolicError, Sub, SymEval


# ------------------------------------------------------------------ the obligations


def _obligation(se, inst, rule, trail, fn):
    """Run fn() -> (lhs, P, parts) and make the path's Obligation."""
    try:
        lhs, P, parts = fn()
        se.forward_hyps()
        err = None
    except (SymbolicError, KeyError, IndexError, TypeError, AttributeError) as e:
        P, lhs, parts, err = 0, 0, {}, f"{type(e).__name__}: {e}"
    label = "; ".join(x for x in [inst.label] + (trail.labels if trail else []) if x)
    return se, Obligation(rule, label, tuple(se.hyps),
                          tuple((h.lhs, h.P, h.mult) for h in se.sub_hyps), lhs, P, parts, err)


def _lam(caps: tuple) -> Lam:
    return Lam("x", abs_type(1), Sub(1, abs_type(2)), caps, ty=Fun(abs_type(1), abs_type(2)))


LAM_CAPTURES = ((), ("x1",), ("x0", "x1"))


def _lam_instances():
    return [Instance(_lam(caps), GAMMA, f"{len(caps)} captures") for caps in LAM_CAPTURES]


def evaluate_closure(inst, rule, chad_class, trail, concrete=None, x=None, ctg=None,
                     env=None, target=None):
    """FUN_STEP for the closure `chad (\\x -> e)` builds, given TH1 for e in the
    closure's run-state [x, env] (two cells). (Concrete mode, tests: the backing,
    the argument x, the cotangent, the environment and the transformed term.)"""
    if target is None:
        target, subs = transform(inst, chad_class)
    else:
        subs = {1: None}
    subs = {k: 2 for k in subs}  # e's action runs in the run-state [x, env]
    se = SymEval(trail, subs, concrete)
    if env is None:
        env = {name: Opaque(name) for name, _ in inst.ctx}

    def go():
        arg = x if x is not None else Opaque("x")
        f, _ = se.eval(inst.source, dict(env))
        _, P = se.apply(f, arg)
        (clo, _bp), _crun = se.eval(target, dict(env))
        (_y, bp), cfwd = call_deriv(se, clo, arg)
        d = ctg if concrete is not None else se.opaque_ctg(D2(inst.source.body.ty), "phid")
        w, cbwd = se.apply(bp, d)
        dx, denv = untuple(w)
        lhs = cfwd + cbwd - se.phi(d) + se.phi(dx) + se.phi(denv) - FUN_K
        return lhs, P, dict(cfwd=cfwd, cbwd=cbwd, phi_ctg=se.phi(d), phi_dx=se.phi(dx),
                            phi_denv=se.phi(denv), out=(dx, denv))
    return _obligation(se, inst, rule, trail, go)


def _def(n: int) -> Def:
    params = tuple(Param(f"y{i}", abs_type(10 + i)) for i in range(1, n + 1))
    return Def("g", params, abs_type(2), Sub(1, abs_type(2)))


DEF_ARITIES = (0, 1, 2, 3)


def _def_instances():
    out = []
    for n in DEF_ARITIES:
        d = _def(n)
        out.append(Instance(d.body, tuple((p.name, p.ty) for p in d.params),
                            f"{n} parameters"))
    return out


def evaluate_def(inst, rule, chad_class, trail, concrete=None, ctg=None, env=None,
                 sources=None, derivs=None):
    """FUN_STEP for a def's derivative g$D (chad/functions/calls.py's derived
    body), given TH1 for its body in the context of its parameters. (Concrete
    mode, tests: the backing, the cotangent, the arguments, the real body.)"""
    n = len(inst.ctx)
    d = Def("g", tuple(Param(name, ty) for name, ty in inst.ctx), inst.source.ty, inst.source)
    subs: dict = {}
    body = derived_body(d, "efficient", proof_chad(chad_class, subs, sources, derivs))
    se = SymEval(trail, subs, concrete)
    if env is None:
        env = {name: Opaque(name) for name, _ in inst.ctx}

    def go():
        _, P = se.eval(inst.source, dict(env))
        (_y, bp), cfwd = se.eval(body, dict(env))
        dd = ctg if concrete is not None else se.opaque_ctg(D2(inst.source.ty), "phid")
        w, cbwd = se.apply(bp, dd)
        dys = untuple(w)
        if len(dys) != n:
            raise SymbolicError(f"{len(dys)} parameter cotangents for {n} parameters")
        lhs = cfwd + cbwd - se.phi(dd) + sum((se.phi(v) for v in dys), 0) - def_k(n)
        return lhs, P, dict(cfwd=cfwd, cbwd=cbwd, phi_ctg=se.phi(dd),
                            phi_out=sum((se.phi(v) for v in dys), 0), out=tuple(dys))
    return _obligation(se, inst, rule, trail, go)


def _call_instances():
    out = []
    for n in DEF_ARITIES:
        args = tuple(Sub(i, abs_type(10 + i)) for i in range(1, n + 1))
        out.append(Instance(Call("g", args, ty=abs_type(2)), GAMMA, f"{n} arguments"))
    return out


def _app_instances():
    fty = Fun(abs_type(1), abs_type(2))
    return [Instance(App(Sub(1, fty), Sub(2, abs_type(1)), ty=abs_type(2)), GAMMA)]


def evaluate_captured_var(inst, rule, chad_class, trail):
    """TH1 in a closure's run-state, the context [x, y1, y2] of its parameter and
    captures, for a term whose derivative `relevel` changes: a use of captured
    variable y2 (its add to y2's cell becomes an add of the one-entry bag
    [(1, d)] to the env cell) or a lam capturing some of x, y1, y2 (its scatter's
    targets y_i are forwarded to the env cell); the cells are [x, env]."""
    target, subs = transform(inst, chad_class)
    target = relevel(target, len(inst.ctx) - 1)
    se = SymEval(trail, subs)
    env = {name: Opaque(name) for name, _ in inst.ctx}

    def go():
        _, P = se.eval(inst.source, dict(env))
        (_, bp), crun = se.eval(target, dict(env))
        d = se.opaque_ctg(D2(inst.source.ty), "phid")
        action, ccall = se.apply(bp, d)
        cells = (se.opaque_ctg(AbsLT(-1), "phiin"), OpaqueCtg(L_ABSTRACT, se.sym("phiin", lo=1)))
        phi_in = sum((se.phi(c) for c in cells), 0)
        _, out, m = se.run_action(action, cells)
        cmonad = 1 + len(cells) + m
        phi_out = sum((se.phi(c) for c in out), 0)
        lhs = crun + ccall + cmonad - se.phi(d) - phi_in + phi_out - len(cells)
        return lhs, P, dict(crun=crun, ccall=ccall, cmonad=cmonad)
    return _obligation(se, inst, rule, trail, go)


def _nested_lam_instances():
    """A lam inside a closure's body: the context [x, y1, y2] of the enclosing
    closure (its parameter x, its captures y1, y2), the lam capturing some of
    them; the captures y_i are forwarded targets after `relevel`."""
    ctx = (("x", abs_type(1)), ("y1", abs_type(101)), ("y2", abs_type(102)))
    out = []
    for caps in (("y2",), ("y1", "y2"), ("x", "y2"), ("x", "y1", "y2")):
        lam = Lam("a", abs_type(3), Sub(1, abs_type(2)), caps,
                  ty=Fun(abs_type(3), abs_type(2)))
        out.append(Instance(lam, ctx, f"captures {', '.join(caps)} of [x, y1, y2]"))
    return out


def _captured_var_instances():
    ctx = (("x", abs_type(1)), ("y1", abs_type(101)), ("y2", abs_type(102)))
    return [Instance(Var("y2", ty=abs_type(102)), ctx, "y2 of [x, y1, y2]")]


def function_rules() -> list[RuleSpec]:
    return [
        RuleSpec("lam", _lam_instances),
        RuleSpec("lam closure", _lam_instances, evaluate=evaluate_closure,
                 note="FUN_STEP for the closure, from TH1 of its body in [x, env]"),
        RuleSpec("var captured", _captured_var_instances, evaluate=evaluate_captured_var),
        RuleSpec("lam in a closure", _nested_lam_instances, evaluate=evaluate_captured_var,
                 note="TH1 in the enclosing closure's run-state [x, env]"),
        RuleSpec("app", _app_instances),
        RuleSpec("def", _def_instances, evaluate=evaluate_def,
                 note="FUN_STEP for g$D, from TH1 of g's body"),
        RuleSpec("def call", _call_instances),
    ]
