"""The complexity criterion over generated programs (Efficient CHAD (Smeding & Vákár), §3, §6; docs/complexity-checker.md).

For every generated program t, arguments x and (sparse) output cotangent d we
record one observation (a `Measurement`):

    primal_steps    cost(t; x)                                  (the program)
    gradient_steps  cost(run (snd (CHAD t) d) zero-env; x, d)   (TH2's left side)
    ctg_size        size(d)
    params          |Γ|

and check the TH2-form bound

    gradient_steps <= c' + c * primal_steps + ctg_size + c'' * params

with the formalisation's constants c = 34, c' = 5, c'' = 4 (TH2's, written once
in chad/proofs/statements.py) unless others are given. `run_check` drives hypothesis: a violation fails the property, hypothesis
shrinks the program, and the smallest violating program comes back as a
`Counterexample` (program text, numbers, and the `chad cost` line reproducing it).
Generation is deterministic given the seed (`@seed`, no example database).

The numbers come from chad/costmodel/measure.py (`measure`, re-exported here), the one
measurement `chad cost` makes too; an observation is its `Measurement`.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import warnings
from typing import Any, Callable, Sequence

import attrs
from attrs import define, field, frozen

from chad import features
from chad.errors import UsageError
from chad.terms import (
    App, ArrayLit, Build, Call, Def, Fold, Index, Iter, Lam, Length, MapA, Param, Prim, Program,
    Scan, Unit, Var, subterms,
)
from chad.transform import registry
from chad.types import UNIT, ArrayT, Fun, R, Z

from .generators import (
    GenCase, chains, programs, tuple_types, types,
)
from .measure import PROVED, Constants, Measurement, measure, prepare

# ----------------------------------------------------------------- observations


def transform_names() -> tuple[str, ...]:
    """The registered transforms (efficient, naive, naive-ho)."""
    features.load()
    return registry.transform_names()


def observe(case: GenCase, transform: str = "efficient", evm: str = "array") -> Measurement:
    """Measure one generated case (`chad cost`'s numbers), with its fragment."""
    m = measure(case.program, case.args, case.ctg, transform, evm)
    return attrs.evolve(m, fragment=fragment_of(case.program))


FIRST_ORDER, ARRAYS, FUNCTIONS, LOOPS = "first-order", "arrays", "functions", "loops"
FRAGMENTS = (FIRST_ORDER, ARRAYS, FUNCTIONS, LOOPS)
_ARRAY_NODES = (Build, Index, Fold, Length, MapA, ArrayLit)
_FUNCTION_NODES = (Lam, App, Call)


def fragment_of(program) -> str:
    """The fragment of the language a program is in: "first-order" (the
    formalisation's language, whose constant 34 is proved), "arrays" (array
    forms, no functions), "loops" (iter or scan, no other array forms, no
    functions) or "functions"
    (lambdas, applications or def calls, with or without the others)."""
    arrays = loops = False
    for d in program.defs:
        for t in subterms(d.body):
            if isinstance(t, _FUNCTION_NODES):
                return FUNCTIONS
            if isinstance(t, _ARRAY_NODES) or (type(t) is Prim and t.op in ("SUM", "ISUM")):
                arrays = True
            if type(t) in (Iter, Scan):
                loops = True
    return ARRAYS if arrays else LOOPS if loops else FIRST_ORDER


# ----------------------------------------------------------------- counterexamples


@frozen
class Counterexample:
    """The smallest program found that violates the bound (or that crashed)."""

    case: GenCase
    observation: Measurement | None
    constants: Constants
    transform: str
    evm: str
    error: str | None = None

    def source(self) -> str:
        return self.case.source()

    def write(self, directory: str | None = None) -> str:
        """Write the program to a fresh file; returns its path."""
        fd, path = tempfile.mkstemp(prefix="chad-check-", suffix=".chad", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(self._header() + self.source())
        return path

    def _header(self) -> str:
        return (f"# counterexample found by `chad check --transform {self.transform}`\n"
                f"# args: {json.dumps(self.case.args_json())}\n"
                f"# ctg:  {json.dumps(self.case.ctg_json())}\n")

    def command(self, path: str) -> str:
        """`chad cost FILE ...` reproducing this counterexample."""
        k = "" if self.constants == PROVED else \
            f"   # then compare with the bound {self.constants}"
        return self.case.command(path, self.transform, self.evm) + k

    def render(self, path: str | None = None) -> str:
        lines = []
        if self.error is not None:
            lines.append(f"error on a generated program ({self.transform} transform): {self.error}")
        else:
            lines.append(f"VIOLATION of the bound {self.constants} by the {self.transform} "
                         f"transform:")
            lines.append(f"  {self.observation.explain(self.constants)}")
        lines.append("the smallest program found (shrunk by hypothesis):")
        lines.extend("  " + ln for ln in self.source().rstrip("\n").splitlines())
        lines.append(f"arguments: {json.dumps(self.case.args_json())}")
        lines.append(f"output cotangent: {json.dumps(self.case.ctg_json())}")
        if path is not None:
            lines.append(f"written to {path}; reproduce with:")
            lines.append(f"  {self.command(path)}")
        return "\n".join(lines)

    def as_json(self, path: str | None = None) -> dict:
        return {
            "source": self.source(),
            "args": self.case.args_json(),
            "ctg": self.case.ctg_json(),
            "observation": None if self.observation is None else
            dict(zip(["primal_steps", "gradient_steps", "ctg_size", "params"],
                     self.observation.as_row()),
                 bound=self.observation.bound(self.constants)),
            "error": self.error,
            "file": path,
            "command": None if path is None else self.command(path),
        }


# ----------------------------------------------------------------- the check


@define
class CheckResult:
    transform: str
    evm: str
    seed: int
    requested: int
    max_depth: int
    constants: Constants
    features: dict
    observations: list = field(factory=list)
    generated: int = 0  # programs measured before the first violation
    cases: list = field(factory=list)  # those programs (GenCase), for coverage
    counterexample: Counterexample | None = None
    elapsed: float = 0.0

    @property
    def holds(self) -> bool:
        return self.counterexample is None

    @property
    def max_ratio(self) -> float:
        return max((o.ratio for o in self.observations), default=0.0)

    def summary(self) -> dict:
        obs = self.observations
        return {
            "transform": self.transform, "evm": self.evm, "seed": self.seed,
            "programs": self.generated, "requested": self.requested,
            "measurements": len(obs), "max_depth": self.max_depth,
            "features": self.features,
            "constants": {"c": self.constants.c, "c1": self.constants.c1,
                          "c2": self.constants.c2},
            "holds": self.holds,
            "violations": sum(1 for o in obs if not o.holds(self.constants)),
            "max_ratio": round(self.max_ratio, 4),
            "max_primal_steps": max((o.primal_steps for o in obs), default=0),
            "max_gradient_steps": max((o.gradient_steps for o in obs), default=0),
            "elapsed_seconds": round(self.elapsed, 2),
        }


def _fingerprint(case: GenCase) -> str:
    return repr((case.program, case.args, case.ctg))


def _fail(state, case, o, err) -> None:
    state["last"] = (case, o, err)
    state["known"][_fingerprint(case)] = (case, o, err)
    state["failed"] = True


class _Violation(Exception):
    """Raised inside the hypothesis property so that hypothesis shrinks."""


SHAPES = ("random", "chains", "mixed")


def check_strategy(max_depth: int = 5, *, arrays: bool = False, functions: bool = False,
                   loops: bool = False,
                   max_params: int = 4, shape: str = "random"):
    """The programs `chad check` generates.

    shape="random": `programs` with ordinary contexts (parameters of small types)
    and, half the time, large records (`tuple_types`), whose dense cotangents are
    what the naive transform pays for (Efficient CHAD (Smeding & Vákár), Table 1).
    shape="chains": `chains`, one construct applied up to 16 times in a row (the
    per-construct constants; max_depth is not used).
    shape="mixed" (the default of `chad check`): either, with equal probability.

    The random programs are `programs(rich=True)`: helper defs that are called,
    arrays of up to a hundred elements, folds with any body, nested maps,
    closures mapped over arrays, deep sharing (chad/costmodel/coverage.py
    measures what a run reaches: `chad check --stats`)."""
    from hypothesis import strategies as st

    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r} (choose from {', '.join(SHAPES)})")
    ptypes = st.one_of(types(2, arrays), tuple_types(48))
    rand = programs(max_depth=max_depth, max_params=max_params, param_types=ptypes,
                    arrays=arrays, functions=functions, max_size=120, rich=True,
                    loops=loops)
    chain = chains(16, arrays=arrays, functions=functions)
    return {"random": rand, "chains": chain, "mixed": st.one_of(rand, chain)}[shape]


def transform_features(transform: str) -> dict[str, bool]:
    """The language features (arrays, functions, loops) supported by `transform`: a
    transform supports a feature when it derives a tiny program using it (it says
    it does not with a UsageError; any other error is a bug and propagates)."""
    return {name: _supports(transform, name) for name in ("arrays", "functions", "loops")}


def _supports(transform: str, feature: str) -> bool:
    if feature == "arrays":
        a = Var("a", ty=ArrayT(R))
        body = Build(Prim("ILIT", Unit(ty=UNIT), 1, ty=Z), "i",
                     Index(a, Var("i", ty=Z), ty=R), ty=ArrayT(R))
        d, args, ctg = Def("f", (Param("a", ArrayT(R)),), ArrayT(R), body), [[1.0]], [1.0]
    elif feature == "loops":
        x = Var("x", ty=R)
        body = Iter(Prim("ILIT", Unit(ty=UNIT), 1, ty=Z), "s", Var("s", ty=R), x, ty=R)
        d, args, ctg = Def("f", (Param("x", R),), R, body), [1.0], 1.0
    else:
        x = Var("x", ty=R)
        body = App(Lam("y", R, Var("y", ty=R), (), ty=Fun(R, R)), x, ty=R)
        d, args, ctg = Def("f", (Param("x", R),), R, body), [1.0], 1.0
    try:
        prepare(Program((d,)), args, ctg, transform)
    except UsageError:
        return False
    return True


def run_check(transform: str = "efficient", evm: str = "array", programs: int = 200,
              max_depth: int = 5, seed: int = 0, constants: Constants = PROVED,
              strategy=None, progress: Callable[[int, int], None] | None = None,
              features: dict | None = None, target: bool | None = None,
              shrink_budget: int = 400, shape: str = "mixed") -> CheckResult:
    """Check the bound on `programs` generated programs; shrink a violation.

    The search is hypothesis's: random generation, then (target=True) hill
    climbing on the constant c each program needs, then shrinking of the first
    violation. Everything is deterministic given `seed`. Targeting is on by
    default for chains only: on the random programs hypothesis's mutations of the
    best program are mostly invalid, and the target phase stalls.

    Shrinking measures at most `shrink_budget` new programs after the first
    violation (hypothesis would otherwise spend minutes on programs whose
    gradients are exponential); after that, candidates not already known to fail
    count as passing, so hypothesis settles on the smallest failure found so far.
    """
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis.errors import HypothesisWarning
    from hypothesis import seed as hseed
    from hypothesis import target as htarget

    if target is None:
        target = shape == "chains"
    if features is None:
        features = transform_features(transform)
    if strategy is None:
        strategy = check_strategy(max_depth, **features, shape=shape)
    result = CheckResult(transform, evm, seed, programs, max_depth, constants, dict(features))
    state: dict[str, Any] = {"failed": False, "last": None, "known": {}, "shrunk": 0}
    phases = [Phase.generate, Phase.shrink] + ([Phase.target] if target else [])

    @settings(max_examples=programs, database=None, deadline=None, derandomize=False,
              phases=phases, suppress_health_check=list(HealthCheck),
              report_multiple_bugs=False, print_blob=False, verbosity=Verbosity.quiet)
    @given(strategy)
    def prop(case):
        # Every failure is raised by the single `raise` at the end: hypothesis tells
        # failures apart by where they are raised, and a replayed failure must look
        # like the original one.
        if _judge(case):
            raise _Violation

    def _judge(case) -> bool:
        """True when the case fails (violates the bound or crashes)."""
        if state["failed"]:
            if _fingerprint(case) in state["known"]:
                return True
            if state["shrunk"] >= shrink_budget:
                return False
            state["shrunk"] += 1
        try:
            o = observe(case, transform, evm)
        except RecursionError:
            raise
        except Exception as e:  # bad input (ChadError) or a crash: report the program
            _fail(state, case, None, f"{type(e).__name__}: {e}")
            return True
        result.observations.append(o)
        if not state["failed"]:
            result.generated += 1
            result.cases.append(case)
            if progress is not None:
                progress(result.generated, programs)
        if target:
            htarget(o.needed_c, label="c needed")
        if not o.holds(constants):
            _fail(state, case, o, None)
            return True
        return False

    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            # chad.deep raises the recursion limit inside the property; hypothesis
            # warns that it will not reset it. Harmless here, and noise on stderr.
            warnings.simplefilter("ignore", HypothesisWarning)
            hseed(seed)(prop)()
    except _Violation:
        case = state["last"][0]
        case, o, err = state["known"].get(_fingerprint(case), state["last"])
        result.counterexample = Counterexample(case, o, constants, transform, evm, err)
    finally:
        result.elapsed = time.perf_counter() - start
    return result


def sample_observations(transforms: Sequence[str], programs: int = 200, seed: int = 0,
                        strategy=None, evm: str = "array") -> dict[str, list[Measurement]]:
    """Measure `programs` generated programs under every transform (no checking,
    no shrinking): the raw material for distributions. A transform that does not
    support a program's forms (a UsageError) skips that program."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed
    from hypothesis.errors import HypothesisWarning

    if strategy is None:
        strategy = check_strategy()
    out: dict[str, list[Measurement]] = {t: [] for t in transforms}

    @settings(max_examples=programs, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def prop(case):
        for t in transforms:
            try:
                out[t].append(measure(case.program, case.args, case.ctg, t, evm))
            except UsageError:
                pass

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HypothesisWarning)
        hseed(seed)(prop)()
    return out


# ----------------------------------------------------------------- progress bar


class ProgressBar:
    """A one-line progress bar on a terminal (stderr); silent otherwise."""

    def __init__(self, label: str, stream=None, enabled: bool | None = None, width: int = 30):
        import sys

        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.label = label
        self.width = width
        self._last = -1.0

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if done < total and now - self._last < 0.1:
            return
        self._last = now
        frac = min(1.0, done / max(1, total))
        filled = int(frac * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        self.stream.write(f"\r{self.label} [{bar}] {done}/{total}")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * (len(self.label) + self.width + 24) + "\r")
            self.stream.flush()


__all__ = ["Constants", "PROVED", "Measurement", "observe", "measure",
           "transform_names", "sample_observations", "Counterexample", "CheckResult",
           "run_check", "check_strategy", "transform_features", "ProgressBar"]
