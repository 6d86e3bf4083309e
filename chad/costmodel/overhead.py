"""The overhead of TH2's wrapper over TH1's costs, computed with the counting evaluator.

What it is for: the corollary "TH2 follows from TH1" (Efficient CHAD (Smeding &
Vákár), §6: "we initialise env0 with zeros ... and bound φ by size"; appendix B,
TH2-STATEMENT) is arithmetic once TH2's left side,

    cost(runevm (app (snd (chad t)) (var Z)) (zero-env-term Γ)),

is written as TH1's three costs plus what the wrapper adds:

    crun + ccall + cmonad + K + k*|Γ| + Z(Γ),   Z(Γ) = Z0 + Σ_i (p + z(τ_i))

where crun is the cost of evaluating `chad t`, ccall that of applying its
backpropagator to ctg, cmonad that of LACM.run of the resulting action from the
zero environment (the formalisation's run: 1 + |Γ| + the action); K + k*|Γ| are
the steps of the wrapper itself (runevm, app, snd, var, and anything run adds per
cell of the environment outside cmonad); Z(Γ) is the cost of evaluating
`zero-env-term Γ`: Z0 for its final unit, p for the pair of each parameter and
z(τ) for the zero of a parameter of type τ. The potential φ of each zero cell
(φ'(denvin) of TH1 for this denvin) is the other number the corollary needs.

`wrapper_overhead()` obtains these numbers from the code, not from the paper: it
builds trivial programs over many contexts Γ (every first-order type former of
the formalisation's fragment: R, Z, (), pairs, sums), evaluates the efficient
transform's gradient term (the term `chad cost` measures) with the formalisation's
LACM (chad/costmodel/lacm.py), measures crun, ccall and cmonad separately exactly
as TH1 does (tests/test_efficient.py::test_th1_holds_with_potential), and takes
the rest. Z0, p and z(τ) are the evaluator's costs of `zero-env-term` and `zerot`.
Every number is checked to be what the linear form says on every Γ tried (the
context lengths 0 to 4, and every first-order type up to depth 2 for the zeros);
if the code ever makes the overhead depend on Γ in another way,
`OverheadError` says so instead of returning numbers the obligation would
misuse. chad/proofs/obligations.py::th2_from_th1_obligation takes the result.
"""

from __future__ import annotations

import itertools
from typing import Iterable, Sequence

from attrs import frozen

from chad.linear import phi
from chad.types import Int, Prod, Real, Sum, Type, UnitT
from chad.costmodel.evaluate import Evaluator
from chad.costmodel.lacm import SpecLACM
from chad.costmodel.measure import prepare
from chad.transform.common import zero_env_term
from chad.transform.registry import get_transform
from chad.values import env_tuple_to_cells

# The type formers of TH1's fragment (the formalisation's first-order types).
FORMERS = ("R", "Z", "()", "pair", "sum")
BASE_TYPES: tuple[Type, ...] = (Real(), Int(), UnitT())


class OverheadError(RuntimeError):
    """The measured overhead is not of the linear form the corollary uses."""


def former(ty: Type) -> str:
    """The type former of a first-order type: R, Z, (), pair or sum."""
    match ty:
        case Real():
            return "R"
        case Int():
            return "Z"
        case UnitT():
            return "()"
        case Prod():
            return "pair"
        case Sum():
            return "sum"
    raise OverheadError(f"{ty} is outside the first-order fragment of TH1")


def fragment_types(depth: int = 2) -> list[Type]:
    """Every first-order type (R, Z, (), pairs, sums) of nesting depth <= depth."""
    types = list(BASE_TYPES)
    for _ in range(depth):
        types = list(BASE_TYPES) + [f(a, b) for f in (Prod, Sum) for a in types for b in types]
    return types


# A few contexts' worth of parameter types: every former, nested ones too.
SAMPLE_TYPES: tuple[Type, ...] = BASE_TYPES + (
    Prod(Real(), Int()), Sum(UnitT(), Real()), Prod(Sum(Real(), UnitT()), Real()),
    Sum(Prod(Real(), Real()), Int()),
)


def sample_contexts() -> list[tuple[Type, ...]]:
    """Contexts Γ to measure on: every one of length <= 2 over SAMPLE_TYPES, and
    some of length 3 and 4."""
    out: list[tuple[Type, ...]] = [()]
    for n in (1, 2):
        out += list(itertools.product(SAMPLE_TYPES, repeat=n))
    k = len(SAMPLE_TYPES)
    out += [tuple(SAMPLE_TYPES[(i + j) % k] for j in range(3)) for i in range(k)]
    out += [tuple(SAMPLE_TYPES[(2 * i + j) % k] for j in range(4)) for i in range(k)]
    return out


@frozen
class WrapperOverhead:
    """The pieces of TH2's left side outside TH1's crun + ccall + cmonad."""

    wrapper_const: int  # K: the wrapper's steps at |Γ| = 0
    wrapper_per_param: int  # k: the wrapper's further steps per parameter
    zero_env_const: int  # Z0: zero-env-term of the empty context
    zero_env_per_param: int  # p: zero-env-term's own steps per parameter (its pair)
    zero_cell: dict  # former -> z(τ): the steps of the zero of a parameter of type τ
    zero_potential: dict  # former -> φ of that zero (its potential in TH1's denvin)

    @property
    def zero_cell_min(self) -> int:
        return min(self.zero_cell.values())

    @property
    def zero_cell_max(self) -> int:
        return max(self.zero_cell.values())

    @property
    def zero_potential_min(self) -> int:
        return min(self.zero_potential.values())

    @property
    def zero_potential_max(self) -> int:
        return max(self.zero_potential.values())

    def zero_env(self, types: Iterable[Type]) -> int:
        """Z(Γ) = Z0 + Σ_i (p + z(τ_i))."""
        return self.zero_env_const + sum(self.zero_env_per_param + self.zero_cell[former(t)]
                                         for t in types)

    def wrapper(self, params: int) -> int:
        """K + k*|Γ|."""
        return self.wrapper_const + self.wrapper_per_param * params

    def lhs(self, crun: int, ccall: int, cmonad: int, types: Sequence[Type]) -> int:
        """TH2's left side from TH1's three costs: crun + ccall + cmonad + K + k|Γ| + Z(Γ)."""
        return crun + ccall + cmonad + self.wrapper(len(types)) + self.zero_env(types)

    def __str__(self) -> str:
        cells = ", ".join(f"z({f}) = {self.zero_cell[f]}" for f in FORMERS)
        pots = ", ".join(f"φ0({f}) = {self.zero_potential[f]}" for f in FORMERS)
        return (f"wrapper K + k|Γ| = {self.wrapper_const} + {self.wrapper_per_param}|Γ|; "
                f"zero env Z(Γ) = {self.zero_env_const} "
                f"+ Σ ({self.zero_env_per_param} + z(τ_i)) "
                f"with {cells}; {pots}")


def _zero_cost(ty: Type) -> tuple[int, int]:
    """(steps, φ) of the zero of a parameter of type ty, as zero-env-term builds it:
    the first component of zero-env-term [ty]."""
    term = zero_env_term([ty])
    value, _ = Evaluator().eval(term, {})
    return _eval_cost(term.left), phi(value[0])


def _eval_cost(term) -> int:
    return Evaluator().eval(term, {})[1]


def decompose(program, args, ctg=1.0, transform: str = "efficient") -> dict:
    """TH2's left side of a program and TH1's pieces of it, with the formalisation's
    LACM: {"total", "crun", "ccall", "cmonad", "zero_env"} (the rest of total is
    the wrapper's own steps)."""
    prep = prepare(program, args, ctg, transform)
    _, total = prep.gradient(SpecLACM())
    d = prep.defn
    evm = SpecLACM()
    ev = Evaluator(prep.defs, evm)
    (_, bp), crun = ev.eval(get_transform(transform).forward_term(d), dict(prep.env))
    action, ccall = ev.apply(bp, prep.ctg)
    zero, zc = Evaluator().eval(zero_env_term([p.ty for p in d.params]), {})
    _, _, cmonad = evm.run(action, env_tuple_to_cells(zero))
    return {"total": total, "crun": crun, "ccall": ccall, "cmonad": cmonad, "zero_env": zc}


def _trivial_program(types: Sequence[Type]):
    import chad

    params = ", ".join(f"x{i} : {t}" for i, t in enumerate(types))
    return chad.load(f"def f({params}) : R = 1.0\n")


def _some_value(ty: Type):
    """A JSON argument of type ty."""
    match ty:
        case Real():
            return 1.5
        case Int():
            return 2
        case UnitT():
            return None
        case Prod(a, b):
            return [_some_value(a), _some_value(b)]
        case Sum(a, _):
            return {"inl": _some_value(a)}
    raise OverheadError(f"no sample value of {ty}")


def wrapper_overhead(contexts: Iterable[Sequence[Type]] | None = None,
                     zero_types: Iterable[Type] | None = None) -> WrapperOverhead:
    """The numbers of WrapperOverhead, from the evaluator (see the module docstring).

    K and k: the wrapper's steps (TH2's left side - crun - ccall - cmonad - Z(Γ))
    of the trivial program `def f(Γ) : R = 1.0` at |Γ| = 0 and 1, checked on every
    context of `contexts` (default: sample_contexts()). Z0, p, z: the evaluator's
    cost of zero-env-term [] and of the zero of each type of `zero_types`
    (default: every first-order type of depth <= 2), checked to depend only on
    the type former and to add up to Z(Γ) on every context."""
    contexts = [tuple(c) for c in (sample_contexts() if contexts is None else contexts)]
    zero_types = list(fragment_types(2) if zero_types is None else zero_types)

    # The zero environment: Z0, and z(τ), φ(zero) per type former.
    z0 = _eval_cost(zero_env_term([]))
    zero_cell: dict[str, int] = {}
    zero_potential: dict[str, int] = {}
    for ty in zero_types:
        cost, pot = _zero_cost(ty)
        f = former(ty)
        if zero_cell.setdefault(f, cost) != cost or zero_potential.setdefault(f, pot) != pot:
            raise OverheadError(f"the zero of {ty} costs {cost} (φ = {pot}), other {f} "
                                f"types {zero_cell[f]} (φ = {zero_potential[f]}): the zero's "
                                f"cost is not a function of the type former")
    missing = [f for f in FORMERS if f not in zero_cell]
    if missing:
        raise OverheadError(f"no type with the former(s) {missing} among zero_types")
    per_pair = {_eval_cost(zero_env_term([ty])) - z0 - zero_cell[former(ty)] for ty in zero_types}
    if len(per_pair) != 1:
        raise OverheadError(f"zero-env-term's steps per parameter vary: {sorted(per_pair)}")
    (p,) = per_pair

    # The wrapper: K(Γ) = total - crun - ccall - cmonad - Z(Γ), linear in |Γ|.
    def wrapper_steps(types: tuple[Type, ...]) -> int:
        parts = decompose(_trivial_program(types), [_some_value(t) for t in types])
        z = z0 + sum(p + zero_cell[former(t)] for t in types)
        if parts["zero_env"] != z:
            raise OverheadError(f"zero-env-term of {list(map(str, types))} costs "
                                f"{parts['zero_env']}, not Z0 + Σ (p + z) = {z}")
        return parts["total"] - parts["crun"] - parts["ccall"] - parts["cmonad"] - z

    k0 = wrapper_steps(())
    k1 = wrapper_steps((Real(),)) - k0
    for ctx in contexts:
        got = wrapper_steps(ctx)
        if got != k0 + k1 * len(ctx):
            raise OverheadError(f"the wrapper costs {got} steps over Γ = "
                                f"{[str(t) for t in ctx]}, not {k0} + {k1}*{len(ctx)}")
    return WrapperOverhead(k0, k1, z0, p, zero_cell, zero_potential)


__all__ = ["WrapperOverhead", "OverheadError", "wrapper_overhead", "decompose", "former",
           "fragment_types", "sample_contexts", "FORMERS"]
