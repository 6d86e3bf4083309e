"""One measurement of a program: the numbers of TH2 (Efficient CHAD (Smeding & Vákár), §3, §6).

    m = measure(program, args, ctg, transform="efficient", evm="array")
    m.primal_steps     cost(t; x)                                  (the program)
    m.gradient_steps   cost(run (snd (CHAD t) ctg) zero-env; x, ctg)  (TH2's left side)
    m.ctg_size         size(ctg)
    m.params           |Γ|
    m.bound(), m.holds()   5 + 34*primal + size(ctg) + 4*|Γ|, and gradient <= bound
                       (other constants: m.bound(Constants(c, c', c'')))
    m.report()         the CostReport of `chad cost` (chad.api.cost is this function
                       on the arguments it has checked)

The measurement, in this one place: decode the arguments, evaluate the program
(primal steps, value), decode the output cotangent against that value (default
1.0 for a result of type R), build the transform's gradient term, evaluate it
with an EVM (gradient steps; with_work=True also the EVM's own work count),
size the cotangent, bound. `prepare` stops before the EVM, for callers that run
the gradient more than once (several EVMs, wall-clock timing).

The program is a checked `Program` (chad.load parses and checks text). The
arguments are a list of values in their JSON or Python form, decoded here, or an
environment {parameter: value} already decoded (chad.api.cost passes the one its
own, user-facing, checks produced).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from attrs import field, frozen

from chad import features
from chad.cotangents import ctg_from_json
from chad.deep import run_deep
from chad.errors import UsageError
from chad.linear import size
from chad.terms import Def, Program, Term
from chad.transform.registry import CTG, get_transform
from chad.proofs.statements import TH2_C, TH2_C1, TH2_C2
from chad.types import Real
from chad.values import value_from_json
from chad.costmodel.evaluate import Evaluator
from chad.costmodel.lacm import SpecLACM
from chad.runtime.protocol import EVM
from chad.runtime.registry import make_evm as make_runtime

features.load()  # the composition root: every transform and extension

UNSET = object()  # "no cotangent given" (None is the sparse zero)

# The TH2 constants of the (corrected) formalisation, c' = 5, c = 34, c'' = 4, as
# chad/proofs/statements.py states them (their one source).
C_CONST, C_PRIMAL, C_PARAMS = TH2_C1, TH2_C, TH2_C2


def th2_bound(primal_steps: int, ctg_size: int, params: int,
              c: int = C_PRIMAL, c1: int = C_CONST, c2: int = C_PARAMS) -> int:
    """5 + 34 * primal + size(ctg) + 4 * |Γ| (with the constants as parameters)."""
    return c1 + c * primal_steps + ctg_size + c2 * params


@frozen
class Constants:
    """(c, c', c'') of gradient <= c' + c * primal + size(ctg) + c'' * |Γ|."""

    c: int = C_PRIMAL
    c1: int = C_CONST
    c2: int = C_PARAMS

    @classmethod
    def parse(cls, text: str) -> "Constants":
        """"34,5,4" -> Constants(34, 5, 4)."""
        parts = [p.strip() for p in text.split(",")]
        if len(parts) != 3:
            raise ValueError(f"expected three constants c,c',c'' (e.g. "
                             f"{C_PRIMAL},{C_CONST},{C_PARAMS}), got {text!r}")
        try:
            c, c1, c2 = (int(p) for p in parts)
        except ValueError:
            raise ValueError(f"constants must be integers, got {text!r}") from None
        if min(c, c1, c2) < 0:
            raise ValueError(f"constants must not be negative, got {text!r}")
        return cls(c, c1, c2)

    def bound(self, primal_steps: int, ctg_size: int, params: int) -> int:
        return th2_bound(primal_steps, ctg_size, params, self.c, self.c1, self.c2)

    def __str__(self) -> str:
        return f"{self.c1} + {self.c}*primal + size(ctg) + {self.c2}*|params|"


PROVED = Constants()  # the constants of the corrected Agda formalisation


@frozen
class CostReport:
    """The numbers of `chad cost` (docs/language.md)."""

    primal_steps: int
    gradient_steps: int
    ctg_size: int
    params: int
    bound: int
    holds: bool
    value: Any = None

    def as_json(self) -> dict:
        return {"primal_steps": self.primal_steps, "gradient_steps": self.gradient_steps,
                "ctg_size": self.ctg_size, "params": self.params, "bound": self.bound,
                "holds": self.holds}


@frozen
class Measurement:
    """One measured program: the four numbers of the criterion, the transform and
    EVM they were measured with, and (not compared) the program's value, the
    gradient term's value and, when asked for, the EVM's own work count
    (chad/runtime/*: tree nodes visited by the persistent map, cells touched by the
    mutable array). The complexity checker calls these its observations."""

    primal_steps: int
    gradient_steps: int
    ctg_size: int
    params: int
    transform: str = "efficient"
    evm: str = "array"
    value: Any = field(default=None, eq=False, repr=False)
    result: Any = field(default=None, eq=False, repr=False)
    work: int | None = field(default=None, eq=False, repr=False)
    # which fragment of the language the program is in (criterion.fragment_of)
    fragment: str | None = field(default=None, eq=False, repr=False)

    def bound(self, k: Constants = PROVED) -> int:
        return k.bound(self.primal_steps, self.ctg_size, self.params)

    def holds(self, k: Constants = PROVED) -> bool:
        return self.gradient_steps <= self.bound(k)

    @property
    def ratio(self) -> float:
        """gradient / primal steps."""
        return self.gradient_steps / max(1, self.primal_steps)

    @property
    def needed_c(self) -> float:
        """The c this measurement needs with c' = 5, c'' = 4: (G - 5 - S - 4n) / P."""
        return (self.gradient_steps - PROVED.c1 - self.ctg_size
                - PROVED.c2 * self.params) / max(1, self.primal_steps)

    def as_row(self) -> list[int]:
        return [self.primal_steps, self.gradient_steps, self.ctg_size, self.params]

    def explain(self, k: Constants = PROVED) -> str:
        rel = "<=" if self.holds(k) else ">"
        return (f"gradient_steps {self.gradient_steps} {rel} bound {self.bound(k)} = "
                f"{k.c1} + {k.c}*{self.primal_steps} + {self.ctg_size} + {k.c2}*{self.params}"
                f"  (primal_steps {self.primal_steps}, size(ctg) {self.ctg_size}, "
                f"|params| {self.params})")

    def report(self) -> CostReport:
        """`chad cost`'s report: the numbers with the formalisation's bound."""
        return CostReport(self.primal_steps, self.gradient_steps, self.ctg_size, self.params,
                          self.bound(), self.holds(), self.value)


@frozen
class Prepared:
    """A program ready for its gradient: the def, its decoded arguments, the
    primal run, the decoded output cotangent and the transform's gradient term."""

    program: Program
    defn: Def
    defs: dict
    env: dict
    value: Any
    primal_steps: int
    ctg: Any
    transform: str
    term: Term

    def primal(self) -> tuple[Any, int]:
        """Evaluate the program again: (value, primal steps)."""
        return _run_primal(self.defs, self.defn, self.env)

    def gradient(self, evm: str | EVM = "array") -> tuple[Any, int]:
        """Evaluate the gradient term with the EVM (a name or an instance):
        (the term's value, gradient steps)."""
        ev = Evaluator(self.defs, _machine(evm))
        return run_deep(ev.eval, self.term, {**self.env, CTG: self.ctg})

    def measure(self, evm: str | EVM = "array", with_work: bool = False) -> Measurement:
        machine = _machine(evm)
        if with_work:
            machine.reset_work()
        result, gradient_steps = self.gradient(machine)
        return Measurement(self.primal_steps, gradient_steps, size(self.ctg),
                           len(self.defn.params), self.transform, machine.name, self.value,
                           result, machine.work if with_work else None)


def prepare(program: Program, args: Sequence | Mapping, ctg: Any = UNSET,
            transform: str = "efficient", fn: str | None = None) -> Prepared:
    """Everything `measure` does before the EVM (see the module docstring)."""
    d = _find(program, fn)
    defs = _defs(program)
    env = _environment(d, args)
    value, primal_steps = _run_primal(defs, d, env)
    if ctg is UNSET:
        if not isinstance(d.result, Real):
            raise UsageError(f"--ctg is required for a result of type {d.result}")
        ctg = 1.0
    ct = ctg_from_json(d.result, ctg, "ctg", value)
    term = run_deep(get_transform(transform).gradient_term, d)
    return Prepared(program, d, defs, env, value, primal_steps, ct, transform, term)


def measure(program: Program, args: Sequence | Mapping, ctg: Any = UNSET,
            transform: str = "efficient", evm: str | EVM = "array", fn: str | None = None,
            with_work: bool = False) -> Measurement:
    """The numbers of `chad cost` for def `fn` (default: the last) of a checked
    program on `args` and the output cotangent `ctg` (default 1.0 for a result
    of type R), under the named transform, with the EVM (a name: map, array,
    parallel, spec; or an instance)."""
    return prepare(program, args, ctg, transform, fn).measure(evm, with_work)


def run_primal(program: Program, args: Sequence | Mapping,
               fn: str | None = None) -> tuple[Any, int]:
    """Evaluate def `fn` (default: the last) of a checked program on args:
    (value, primal steps)."""
    d = _find(program, fn)
    return _run_primal(_defs(program), d, _environment(d, args))


def _find(program: Program, fn: str | None) -> Def:
    if not isinstance(program, Program):
        raise TypeError(f"expected a checked Program (chad.load parses text), "
                        f"got {type(program).__name__}")
    return program.find(fn)


def _defs(program: Program) -> dict[str, Def]:
    return {d.name: d for d in program.defs}


def _environment(d: Def, args: Sequence | Mapping) -> dict[str, Any]:
    if isinstance(args, Mapping):
        return dict(args)
    args = list(args)
    if len(args) != len(d.params):
        raise UsageError(f"args: {d.name} takes {len(d.params)} argument(s), got {len(args)}")
    return {p.name: value_from_json(p.ty, a, f"args[{i}]")
            for i, (p, a) in enumerate(zip(d.params, args))}


def _run_primal(defs: dict, d: Def, env: dict) -> tuple[Any, int]:
    return run_deep(Evaluator(defs).eval, d.body, dict(env))


def _machine(evm: str | EVM) -> EVM:
    """An EVM by name (map, array, parallel, or spec: the formalisation's LACM)."""
    if not isinstance(evm, str):
        return evm
    return SpecLACM() if evm == "spec" else make_runtime(evm)


__all__ = ["measure", "prepare", "run_primal", "Measurement", "Prepared", "CostReport",
           "Constants", "PROVED", "th2_bound", "UNSET", "C_CONST", "C_PRIMAL", "C_PARAMS"]
