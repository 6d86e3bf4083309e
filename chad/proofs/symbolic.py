"""A symbolic version of the counting evaluator's cost rules, for proving the
inductive step of TH1 rule by rule (Efficient CHAD (Smeding & Vákár), appendix B:
the formalisation's `lemmas.agda` reduces each CHAD rule's step to one linear
integer inequality over symbolic costs and potentials).

A rule's sub-terms are placeholders: the source node `Sub(k, ty)`, which the real
transform (chad/transform/efficient.py) turns into `SubChad(k, ty)` (see
chad/proofs/rules.py). Evaluating the produced term here gives its cost as a z3
integer expression over the sub-derivatives' symbols:

    P_k      the primal cost of sub-term k (evaluating `Sub(k)` in the source)
    crun_k   the cost of evaluating its derivative `chad e_k` (evaluating `SubChad(k)`)
    ccall_k  the cost of calling its backpropagator
    m_k      the cost of running the action the call returns (LACM `run` adds 1 + |Γ_k|)
    φ...     the potentials of the cotangent it receives and of the environment
             cells before and after its action

and the hypotheses they satisfy: TH1 for each sub-term (the induction hypothesis),
the LACM cost equations (chad/costmodel/lacm.py: pure 1, bind 1 + c1 + ccall + c2,
add 1 + plusv, scope 1 + c, run 1 + |Γ| + c), `plusv`'s bound (cplus − φ(x) − φ(y)
+ φ(x + y) ≤ 0, the formalisation's `pplus`) and the zeros' (a zero of an abstract
type costs 1 or 2 steps and has potential 1, the formalisation's `pzero`, `pφd`).

Types of sub-terms are abstract (`AbsT`, a type former whose zero is the node
`AbsZero`), so one obligation covers every type. Where the evaluation depends on
something unknown (the side of a primal sum value, the shape of a sparse
cotangent) it forks: `Trail` enumerates every path, each path is one obligation.

The same evaluator runs in *concrete* mode (`Concrete`): the placeholders are
backed by real sub-terms evaluated by the counting evaluator, every symbol gets
the concrete value it stands for, and tests/test_prove.py checks that the
expressions then equal the counting evaluator's counts exactly and that every
hypothesis holds.
"""

from __future__ import annotations

import itertools
from typing import Any

import z3
from attrs import field, frozen

from chad.extend import TypeFormer, register_type
from chad import tables
from chad.linear import LPairT, LR, LSumT, LType, LUn, phi as concrete_phi, plusv, zerov
from chad.primitives import PRIMITIVES
from chad.terms import (
    AddEVM, Ann, App, BindEVM, Case, Fst, Inl, Inr, Lam, LCastL, LCastR, Let, LFst, LInl,
    LInr, LPair, LPairZero, LSnd, LSumZero, LUnit, Pair, Prim, PureEVM, ScopeEVM, Snd,
    Term, ThenEVM, Unit, Var, node,
)
from chad.types import Type
from chad.values import FALSE, TRUE, Inj


class SymbolicError(Exception):
    """The produced term cannot be evaluated symbolically (a malformed rule)."""


# ------------------------------------------------------------------ placeholders


@frozen
class AbsT(Type):
    """An abstract source type (the type of a placeholder sub-term)."""

    k: int

    def __str__(self) -> str:
        return f"τ{self.k}"


@frozen
class AbsLT(LType):
    """D[τ]₂ of an abstract type."""

    k: int


@node()
@frozen
class AbsZero(Term):
    """`zerot τ` of an abstract type τ: costs 1 or 2 steps, potential 1."""

    k: int
    loc: Any = field(default=None, eq=False, kw_only=True, repr=False)
    ty: Any = field(default=None, eq=False, kw_only=True, repr=False)


@node()
@frozen
class Sub(Term):
    """Source placeholder: sub-term number k of a rule, of type ty."""

    k: int
    ty: Any = field(eq=False)
    loc: Any = field(default=None, eq=False, kw_only=True, repr=False)


@node()
@frozen
class SubChad(Term):
    """Target placeholder: `chad e_k`, the derivative of sub-term k."""

    k: int
    ty: Any = field(eq=False)
    loc: Any = field(default=None, eq=False, kw_only=True, repr=False)


@node("p", "d")
@frozen
class AbsDPrim(Term):
    """`dprim' op p d` of an abstract primitive op: costs cdprim steps and returns
    a cotangent of potential φdx, bounded as the formalisation's `lemma-prim`
    assumes (`lem3`): cdprim − φ(d) + φdx <= DPRIM_BOUND."""

    p: Term
    d: Term
    loc: Any = field(default=None, eq=False, kw_only=True, repr=False)
    ty: Any = field(default=None, eq=False, kw_only=True, repr=False)


DPRIM_BOUND = 14  # the formalisation's lem3 (lemma-prim)
ABSTRACT_PRIM = "DPRIM'"  # the name of the formalisation's abstract primitive

ABS_FORMER = TypeFormer(cls=AbsT, D2=lambda t: AbsLT(t.k), zerot=lambda t: AbsZero(t.k))
if tables.TYPES.get(AbsT) is None:
    register_type(ABS_FORMER)


# ------------------------------------------------------------------ symbolic values


class Opaque:
    """An unknown primal value. Projections and injections of it are memoised,
    so the source and the target evaluation see the same value."""

    def __init__(self, tag: str):
        self.tag = tag
        self.parts: dict = {}
        self.side: int | None = None
        self.inner: "Opaque | None" = None
        self.length = None  # an array's length symbol (chad/proofs/array_rules.py)

    def part(self, i: int) -> "Opaque":
        if i not in self.parts:
            self.parts[i] = Opaque(f"{self.tag}.{i}")
        return self.parts[i]

    def __repr__(self) -> str:
        return f"<{self.tag}>"


class OpaqueCtg:
    """An unknown cotangent of linear type lt with potential `phi` (a z3 term).
    Inspecting it (lfst, lcastl, ...) refines it, once, by a fork."""

    def __init__(self, lt, phi):
        self.lt = lt
        self.phi = phi
        self.refined: Any = _UNREFINED

    def __repr__(self) -> str:
        return f"<ctg φ={self.phi}>"


_UNREFINED = object()


class Action:
    """A symbolic LACM action: state (tuple of cells) -> (result, state, cost)."""

    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, cells):
        return self.fn(cells)


class Closure:
    __slots__ = ("code", "env")

    def __init__(self, code, env):
        self.code = code
        self.env = env


class SubBP:
    """The backpropagator of sub-derivative k (concrete mode: with the real one)."""

    def __init__(self, k: int, real=None):
        self.k = k
        self.real = real


# ------------------------------------------------------------------ paths


class Trail:
    """The decisions of one evaluation path; `choose` forks."""

    def __init__(self, prefix: list[int]):
        self.prefix = prefix
        self.taken: list[tuple[int, int]] = []
        self.labels: list[str] = []

    def choose(self, n: int, labels: list[str]) -> int:
        i = len(self.taken)
        pick = self.prefix[i] if i < len(self.prefix) else 0
        self.taken.append((pick, n))
        self.labels.append(labels[pick])
        return pick


def all_paths(run):
    """Call run(trail) once per path; yields (trail, result)."""
    stack: list[list[int]] = [[]]
    while stack:
        prefix = stack.pop()
        trail = Trail(prefix)
        result = run(trail)
        for i in range(len(trail.taken) - 1, len(prefix) - 1, -1):
            for j in range(trail.taken[i][1] - 1, 0, -1):
                stack.append([p for p, _ in trail.taken[:i]] + [j])
        yield trail, result


# ------------------------------------------------------------------ the evaluator


@frozen
class SubHyp:
    """TH1 for sub-term k at one call of its backpropagator: lhs <= c * P_k - b;
    for a loop's n elements (chad/proofs/loop_rules.py), TH1 summed over them:
    lhs <= c * ΣP_k - n * b (mult = n)."""

    k: int
    lhs: Any
    P: Any
    mult: Any = 1


def count_of(se, v):
    """An integer value: itself, or the count symbol (>= 0) of an opaque one."""
    if isinstance(v, Opaque):
        if getattr(v, "count", None) is None:
            v.count = se.sym("n")
        return v.count
    return int(v)


class SymEval:
    """The counting evaluator's cost rules (chad/costmodel/evaluate.py, the
    core rules and the EVM operations) and the LACM's (chad/costmodel/lacm.py)
    over symbolic values. Extension nodes are evaluated through `extra_rules`."""

    def __init__(self, trail: Trail, subs: dict, concrete: "Concrete | None" = None):
        self.trail = trail
        self.subs = subs              # k -> context length |Γ_k| of sub-term k
        self.concrete = concrete
        self.hyps: list = []          # z3 booleans
        self.sub_hyps: list[SubHyp] = []
        self.symbols: list = []
        self.values: dict = {}        # concrete mode: symbol name -> int
        self.counter = itertools.count(1)
        self.primal: dict[int, Any] = {}
        self.crun: dict[int, Any] = {}
        self.P: dict[int, Any] = {}
        self.empties: dict[str, int] = {}  # count symbol -> 0 (it is 0) or 1 (>= 1)

    # -- symbols
    def sym(self, stem: str, value=None, lo: int | None = 0):
        name = f"{stem}_{next(self.counter)}"
        s = z3.Int(name)
        self.symbols.append(s)
        if lo is not None:
            self.hyps.append(s >= lo)
        if self.concrete is not None:
            if value is None:
                raise SymbolicError(f"concrete mode: no value for {name}")
            self.values[name] = int(value)
        return s

    def empty_fork(self, n) -> int:
        """Whether the count n (a symbol >= 0) is 0 (0) or at least 1 (1): a fork,
        made once per count, whose answer later tests of the same count reuse."""
        key = str(n)
        d = self.empties.get(key)
        if d is None:
            d = self.fork(2, ["n = 0", "n >= 1"])
            self.hyps.append(n == 0 if d == 0 else n >= 1)
            self.empties[key] = d
        return d

    def fork(self, n: int, labels: list[str]) -> int:
        if self.concrete is not None:
            raise SymbolicError("concrete mode: unexpected fork " + labels[0])
        return self.trail.choose(n, labels)

    def forward_hyps(self) -> None:
        """A sub-term whose backpropagator is never called (length, a discrete
        index) still had its derivative evaluated: its forward pass alone is
        within c times its cost, less b (crun_k <= c * P_k - b, the FORWARD
        hypothesis of docs/proofs.md: TH1 for the sub-term with the zero
        cotangent on zero cells implies it, as ccall, m >= 1 and every cell's
        potential is at least 1)."""
        hook = EXTRA_RULES.get("forward")  # calls of abstract functions
        if hook is not None:
            hook(self)
        called = {h.k for h in self.sub_hyps}
        for k, crun in self.crun.items():
            if k not in called:
                if k not in self.P:
                    raise SymbolicError(f"sub-term {k}'s derivative ran but its primal did not")
                self.sub_hyps.append(SubHyp(k, crun, self.P[k]))

    # -- potentials
    def phi(self, v):
        if isinstance(v, OpaqueCtg):
            r = v.refined
            return v.phi if r is _UNREFINED else self.phi(r)
        if v is None or isinstance(v, float):
            return 1
        if isinstance(v, tuple):
            return 1 + self.phi(v[0]) + self.phi(v[1])
        if isinstance(v, Inj):
            return 1 + self.phi(v.value)
        hook = EXTRA_RULES.get("phi")  # closure cotangents (chad/proofs/closure_nodes.py)
        r = None if hook is None else hook(self, v)
        return concrete_phi(v) if r is None else r

    def opaque_ctg(self, lt, stem="phi"):
        if isinstance(lt, (LR, LUn)):
            return OpaqueCtg(lt, 1)
        return OpaqueCtg(lt, self.sym(stem, lo=1 if isinstance(lt, (LPairT, LSumT)) else 0))

    def refine(self, v: OpaqueCtg):
        """The shape of an unknown cotangent: nothing, or its constructor."""
        if v.refined is not _UNREFINED:
            return v.refined
        lt = v.lt
        if isinstance(lt, LPairT):
            if self.fork(2, ["zero", "pair"]) == 0:
                v.refined = None
            else:
                v.refined = (self.opaque_ctg(lt.left), self.opaque_ctg(lt.right))
        elif isinstance(lt, LSumT):
            pick = self.fork(3, ["zero", "inl", "inr"])
            v.refined = None if pick == 0 else Inj(pick - 1, self.opaque_ctg(
                lt.left if pick == 1 else lt.right))
        else:
            raise SymbolicError(f"inspecting an opaque cotangent of {lt!r}")
        self.hyps.append(v.phi == self.phi(v.refined))
        return v.refined

    def ctg_view(self, v):
        return self.refine(v) if isinstance(v, OpaqueCtg) else v

    # -- dispatch
    def eval(self, t, env: dict):
        match t:
            case Var():
                if t.name not in env:
                    raise SymbolicError(f"unbound variable {t.name}")
                return env[t.name], 1
            case Let():
                v, c1 = self.eval(t.rhs, env)
                r, c2 = self.eval(t.body, {**env, t.name: v})
                return r, 1 + c1 + c2
            case Prim():
                return self.prim(t, env)
            case Unit() | LUnit() | LPairZero() | LSumZero():
                return None, 1
            case Pair() | LPair():
                a, ca = self.eval(t.left, env)
                b, cb = self.eval(t.right, env)
                return (a, b), 1 + ca + cb
            case Fst() | Snd():
                v, c = self.eval(t.expr, env)
                i = 0 if type(t) is Fst else 1
                if isinstance(v, Opaque):
                    return v.part(i), 1 + c
                return v[i], 1 + c
            case Inl() | LInl():
                v, c = self.eval(t.expr, env)
                return Inj(0, v), 1 + c
            case Inr() | LInr():
                v, c = self.eval(t.expr, env)
                return Inj(1, v), 1 + c
            case Case():
                v, c = self.eval(t.scrut, env)
                side, inner = self.sum_view(v)
                name, body = (t.lname, t.lbody) if side == 0 else (t.rname, t.rbody)
                r, cb = self.eval(body, {**env, name: inner})
                return r, 1 + c + cb
            case Lam():
                caps = t.captures or ()
                k = len(caps)
                return Closure(t, {x: env[x] for x in caps}), (2 if k == 1 else 1 + k if k else 1)
            case App():
                f, cf = self.eval(t.fn, env)
                x, cx = self.eval(t.arg, env)
                y, cy = self.apply(f, x)
                return y, 1 + cf + cx + cy
            case Ann():
                return self.eval(t.expr, env)
            case PureEVM():
                v, c = self.eval(t.expr, env)
                return Action(lambda e: (v, e, 1)), 1 + c
            case BindEVM():
                m, c1 = self.eval(t.m, env)
                k, c2 = self.eval(t.k, env)
                return self.bind(m, k), 1 + c1 + c2
            case ThenEVM():
                b, cb = self.eval(t.second, env)
                a, ca = self.eval(t.first, env)
                return self.bind(a, None, then=b), 4 + ca + cb
            case AddEVM():
                v, c = self.eval(t.val, env)
                return self.add(t.level, v), 1 + c
            case ScopeEVM():
                i, c1 = self.eval(t.init, env)
                m, c2 = self.eval(t.m, env)
                return self.scope(i, m), 1 + c1 + c2
            case LFst() | LSnd():
                v, c = self.eval(t.expr, env)
                v = self.ctg_view(v)
                if v is None:
                    z, cz = self.zerov(t.zero)
                    return z, 1 + c + cz
                return v[0 if type(t) is LFst else 1], 1 + c
            case LCastL() | LCastR():
                v, c = self.eval(t.expr, env)
                v = self.ctg_view(v)
                side = 0 if type(t) is LCastL else 1
                if isinstance(v, Inj) and v.side == side:
                    return v.value, 1 + c
                z, cz = self.zerov(t.zero)
                return z, 1 + c + cz
            case AbsZero():
                cz = self.sym("czero", lo=1)
                self.hyps.append(cz <= 2)
                return None, cz
            case AbsDPrim():
                # cdprim is the cost of the whole term dprim' op p d (reading
                # its two variables included), as in the formalisation
                d, _ = self.eval(t.d, env)
                cdprim = self.sym("cdprim")
                out = self.opaque_ctg(AbsLT(-1), "phidx")
                self.hyps.append(cdprim - self.phi(d) + self.phi(out) <= DPRIM_BOUND)
                return out, cdprim
            case Sub():
                return self.sub_primal(t, env)
            case SubChad():
                return self.sub_chad(t, env)
        rule = EXTRA_RULES.get(type(t))
        if rule is None:
            raise SymbolicError(f"no symbolic rule for {type(t).__name__}")
        return rule(self, t, env)

    def sum_view(self, v):
        if isinstance(v, Inj):
            return v.side, v.value
        if isinstance(v, Opaque):
            if v.side is None:
                v.side = self.fork(2, [f"{v.tag} is inl", f"{v.tag} is inr"])
                v.inner = Opaque(f"{v.tag}.inj")
            return v.side, v.inner
        raise SymbolicError(f"case of a non-sum value {v!r}")

    def zerov(self, lt):
        """zerov (the formalisation's: cost 1; an abstract type's zero is bounded
        as the formalisation's `pzero` does: at most 2 steps, potential 1)."""
        if isinstance(lt, AbsLT):
            cz = self.sym("czerov", lo=1)
            self.hyps.append(cz <= 2)
            return None, cz
        return zerov(lt)

    def prim(self, t: Prim, env):
        v, c = self.eval(t.arg, env)
        if t.op in ("LIT", "ILIT"):
            return t.const, 1 + c
        if t.op == ABSTRACT_PRIM:
            return Opaque("prim"), 1 + c
        p = PRIMITIVES[t.op]
        extra = 0
        if p.extra_cost is not None:
            # the only non-constant primitives are linear in an array's length
            if EXTRA_RULES.get("length") is None:
                raise SymbolicError(f"{t.op} is not constant-time")
            extra = EXTRA_RULES["length"](self, v)
        if t.op == "IEQ" and isinstance(v, tuple) and any(
                type(x) is int and x == 0 for x in v) and any(isinstance(x, Opaque) for x in v):
            # `n == 0` of a count (chad_build's test of an empty build): a fork
            o = next(x for x in v if isinstance(x, Opaque))
            return (TRUE if self.empty_fork(count_of(self, o)) == 0 else FALSE), 1 + c
        if _has_opaque(v):
            return Opaque(f"{t.op.lower()}"), 1 + c + extra
        return p.evaluate(v), 1 + c + extra

    # -- functions
    def apply(self, f, x):
        if isinstance(f, Closure):
            return self.eval(f.code.body, {**f.env, f.code.name: x})
        if isinstance(f, SubBP):
            return self.call_sub(f, x)
        hook = EXTRA_RULES.get("apply")  # function values (chad/proofs/closure_nodes.py)
        if hook is not None:
            return hook(self, f, x)
        raise SymbolicError(f"applying {f!r}")

    # -- LACM (chad/costmodel/lacm.py)
    def bind(self, m, k, then=None):
        def act(e):
            x, e1, c1 = self.run_action(m, e)
            if then is not None:
                m2, ccall = then, 1
            else:
                m2, ccall = self.apply(k, x)
            y, e2, c2 = self.run_action(m2, e1)
            return y, e2, 1 + c1 + ccall + c2
        return Action(act)

    def add(self, level, v):
        def act(e):
            if not 0 <= level < len(e):
                raise SymbolicError(f"add to level {level} of an environment of {len(e)} cells")
            z, cz = self.plus(v, e[level])
            return None, e[:level] + (z,) + e[level + 1:], 1 + cz
        return Action(act)

    def scope(self, init, m):
        def act(e):
            r, e2, c = self.run_action(m, e + (init,))
            return (e2[-1], r), e2[:-1], 1 + c
        return Action(act)

    def run_action(self, m, e):
        if not isinstance(m, Action):
            raise SymbolicError(f"running {m!r}, not an action")
        return m(e)

    def plus(self, x, y):
        """plusv x y: its result and cost, abstracted by plusv's bound."""
        bound = 0
        if self.concrete is not None:
            z, cz = plusv(x, y)
            cost = self.sym("cplus", cz, lo=1)
            new = z
            phi_new = self.phi(z)
            bound = EXT_PLUS_SLACK * ext_leaves(x, y)
        else:
            cost = self.sym("cplus", lo=1)
            lt = getattr(y, "lt", None) or getattr(x, "lt", None) or AbsLT(-1)
            new = self.opaque_ctg(lt)
            phi_new = self.phi(new)
            if not isinstance(lt, (AbsLT, LR, LUn, LPairT, LSumT)):
                bound = EXT_PLUS_SLACK  # an extension cotangent (a bag): "A finding"
        self.hyps.append(cost - self.phi(x) - self.phi(y) + phi_new <= bound)
        return new, cost

    # -- the placeholders
    def sub_primal(self, t: Sub, env):
        k = t.k
        if self.concrete is not None:
            v, P = self.concrete.primal(k, env)
        else:
            v, P = None, None
        if k not in self.primal:
            self.primal[k] = v if self.concrete is not None else Opaque(f"e{k}")
        self.P[k] = self.sym(f"P{k}", P, lo=1)
        return self.primal[k], self.P[k]

    def sub_chad(self, t: SubChad, env):
        k = t.k
        if self.concrete is not None:
            (v, bp), crun = self.concrete.chad(k, env)
            self.primal.setdefault(k, v)
            d1 = EXTRA_RULES.get("d1 value")  # a value holding a closure's D1 value
            if d1 is not None and d1(v):
                return (v, SubBP(k, bp)), self._crun(k, crun)
        else:
            bp, crun = None, None
            self.primal.setdefault(k, Opaque(f"e{k}"))
        return (self.primal[k], SubBP(k, bp)), self._crun(k, crun)

    def _crun(self, k, crun):
        c = self.sym(f"crun{k}", crun)
        self.crun[k] = c
        return c

    def call_sub(self, f: SubBP, ctg):
        k = f.k
        if self.concrete is not None:
            real_action, ccall = self.concrete.apply(f.real, ctg)
        else:
            real_action, ccall = None, None
        c_call = self.sym(f"ccall{k}", ccall)
        n = self.subs[k]

        def act(e):
            if len(e) != n:
                raise SymbolicError(f"the action of sub-term {k} (context of {n} variables) "
                                    f"runs in an environment of {len(e)} cells")
            phi_in = sum((self.phi(x) for x in e), 0)
            if self.concrete is not None:
                r, e2, m = real_action(tuple(e))
                out = tuple(e2)
            else:
                m, r = None, None
                out = tuple(self.opaque_ctg(getattr(x, "lt", AbsLT(-1)), "phiout") for x in e)
            cm = self.sym(f"m{k}", m)
            phi_out = sum((self.phi(x) for x in out), 0)
            lhs = self.crun[k] + c_call + (1 + n + cm) - self.phi(ctg) - phi_in + phi_out - n
            if k not in self.P:
                raise SymbolicError(f"sub-term {k}'s derivative runs but its primal did not")
            self.sub_hyps.append(SubHyp(k, lhs, self.P[k]))
            return r, out, cm
        return Action(act), c_call


# plusv of two non-zero extension cotangents (bags, closure environments) is one
# step that adds one node (BPlus, EnvCat): it does not lower the potential, so
# cplus − φ(x) − φ(y) + φ(x + y) = 2 there instead of <= 0. The abstract types of
# the obligations range over the formalisation's cotangent types only (bound 0);
# the concrete check states the bound for extension values with this slack.
EXT_PLUS_SLACK = 2


def ext_leaves(x, y) -> int:
    """The positions where x and y are both non-zero extension cotangents."""
    if x is None or y is None or isinstance(x, float) or isinstance(y, float):
        return 0
    if isinstance(x, tuple) and isinstance(y, tuple):
        return ext_leaves(x[0], y[0]) + ext_leaves(x[1], y[1])
    if isinstance(x, Inj) and isinstance(y, Inj):
        return ext_leaves(x.value, y.value) if x.side == y.side else 0
    return 1 if tables.cotangent_ops(x) is not None else 0


def _has_opaque(v) -> bool:
    if isinstance(v, (Opaque, OpaqueCtg)):
        return True
    if isinstance(v, tuple):
        return any(_has_opaque(x) for x in v)
    if isinstance(v, Inj):
        return _has_opaque(v.value)
    return False


# Symbolic rules of extension nodes: node class -> rule(symeval, node, env); and
# hooks by name: "length" (chad/proofs/array_rules.py), "apply", "phi", "forward"
# and "d1 value" (function values and closure cotangents, chad/proofs/closure_nodes.py).
EXTRA_RULES: dict[type, Any] = {}


class Concrete:
    """Concrete backing of the placeholders: sub-term k is a real source term,
    evaluated by the counting evaluator in the real environment; its derivative
    by the real transform (chad(t) with the real sub-terms is the same term as
    the rule's output with each SubChad(k) replaced by chad(e_k))."""

    def __init__(self, evaluator, sources: dict, derivs: dict):
        self.ev = evaluator      # a counting Evaluator with the spec LACM
        self.sources = sources   # k -> source term e_k
        self.derivs = derivs     # k -> target term chad(e_k)

    def _env(self, t, env):
        from chad.terms import free_vars
        return {x: env[x] for x in free_vars(t) if x in env}

    def primal(self, k, env):
        from chad.costmodel.evaluate import Evaluator
        t = self.sources[k]
        return Evaluator(self.ev.defs).eval(t, self._env(t, env))

    def chad(self, k, env):
        t = self.derivs[k]
        return self.ev.eval(t, self._env(t, env))

    def apply(self, bp, ctg):
        return self.ev.apply(bp, ctg)
