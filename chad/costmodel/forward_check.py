"""The complexity criterion of forward mode over generated programs
(`chad check --mode forward`; docs/forward-mode.md).

For every generated program t (the generators of chad/costmodel/generators.py,
the same as the reverse checker's), its arguments x and a tangent v of the
arguments (pseudo-random, of their shape) we record

    primal_steps   cost(t; x)
    jvp_steps      cost(F(t); x, v)      (F: chad/transform/forward.py; the primal
                                          is computed by the jvp too)

and check   jvp_steps <= c * primal_steps + c'.   A violation fails a hypothesis
property, which shrinks the program. z3's optimiser then reports the smallest c
covering every observation (with c' fixed) and the jointly minimised (c, c'),
as the reverse checker does (chad/costmodel/fit.py). These are lower bounds of
the constants needed, not a proof: the forward rules are not in the Agda
formalisation.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Callable

import numpy as np
from attrs import define, field, frozen

from chad import features
from chad.deep import run_deep
from chad.tangents import discrete, zero_tangent
from chad.transform.forward import forward_def, tangent_name
from chad.types import ArrayT, Prod, Real, Sum

from .criterion import check_strategy, fragment_of
from .evaluate import Evaluator
from .generators import GenCase

features.load()


@frozen
class ForwardConstants:
    """The bound jvp <= c * primal + c'."""

    c: int
    c1: int

    def bound(self, primal_steps: int) -> int:
        return self.c1 + self.c * primal_steps

    def __str__(self) -> str:
        return f"jvp <= {self.c1} + {self.c}*primal"

    @classmethod
    def parse(cls, text: str) -> "ForwardConstants":
        parts = [p.strip() for p in text.split(",")]
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise ValueError(f"expected two non-negative integers c,c' (got {text!r})")
        return cls(int(parts[0]), int(parts[1]))


# The constants `chad check --mode forward` holds the generated programs to by
# default: the per-construct worst case of docs/forward-mode.md ("Cost") rounded
# up; measured, not proved.
DEFAULT = ForwardConstants(26, 8)


@frozen
class ForwardObservation:
    primal_steps: int
    jvp_steps: int
    params: int
    fragment: str = ""

    def holds(self, k: ForwardConstants) -> bool:
        return self.jvp_steps <= k.bound(self.primal_steps)

    @property
    def ratio(self) -> float:
        return self.jvp_steps / max(1, self.primal_steps)

    def as_row(self) -> list[int]:
        return [self.primal_steps, self.jvp_steps, self.params]


def pseudo_tangent(ty, value, rng):
    """A tangent of the value's shape: normal reals, () where no real occurs."""
    if discrete(ty):
        return zero_tangent(ty, value)
    match ty:
        case Real():
            return float(rng.normal())
        case Prod(a, b):
            return (pseudo_tangent(a, value[0], rng), pseudo_tangent(b, value[1], rng))
        case Sum(a, b):
            return pseudo_tangent(a if value.side == 0 else b, value.value, rng)
        case ArrayT(e):
            items = [pseudo_tangent(e, value[i], rng) for i in range(len(value))]
            return np.asarray(items, dtype=np.float64) if isinstance(e, Real) else tuple(items)
    return zero_tangent(ty, value)


def observe(case: GenCase, seed: int = 0) -> ForwardObservation:
    """The primal's and the jvp's steps on the case's arguments and a tangent."""
    d = case.defn
    defs = {x.name: x for x in case.program.defs}
    env = {p.name: a for p, a in zip(d.params, case.args)}
    _v, primal = run_deep(Evaluator(defs).eval, d.body, dict(env))
    rng = np.random.default_rng(seed)
    for p, a in zip(d.params, case.args):
        env[tangent_name(p.name)] = pseudo_tangent(p.ty, a, rng)
    _r, steps = run_deep(Evaluator(defs).eval, run_deep(forward_def, d), env)
    return ForwardObservation(primal, steps, len(d.params), fragment_of(case.program))


def _fingerprint(case: GenCase) -> str:
    return repr((case.program, case.args))


@define
class ForwardCheckResult:
    seed: int
    requested: int
    max_depth: int
    constants: ForwardConstants
    features: dict
    observations: list = field(factory=list)
    generated: int = 0
    counterexample: Any = None  # (GenCase, ForwardObservation | None, error | None)
    elapsed: float = 0.0

    @property
    def holds(self) -> bool:
        return self.counterexample is None

    @property
    def max_ratio(self) -> float:
        return max((o.ratio for o in self.observations), default=0.0)


def run_forward_check(programs: int = 200, max_depth: int = 5, seed: int = 0,
                      constants: ForwardConstants = DEFAULT, features: dict | None = None,
                      shape: str = "mixed", progress: Callable | None = None,
                      shrink_budget: int = 200) -> ForwardCheckResult:
    """Check the bound on `programs` generated programs; shrink a violation."""
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import seed as hseed
    from hypothesis.errors import HypothesisWarning

    if features is None:
        features = {"arrays": True, "functions": True, "loops": True}
    strategy = check_strategy(max_depth, **features, shape=shape)
    result = ForwardCheckResult(seed, programs, max_depth, constants, dict(features))
    state: dict[str, Any] = {"failed": False, "last": None, "shrunk": 0, "known": {}}

    class Violation(Exception):
        pass

    @settings(max_examples=programs, database=None, deadline=None,
              phases=[Phase.generate, Phase.shrink], suppress_health_check=list(HealthCheck),
              report_multiple_bugs=False, print_blob=False, verbosity=Verbosity.quiet)
    @given(strategy)
    def prop(case):
        if judge(case):
            raise Violation

    def fail(case, o, err) -> bool:
        state.update(failed=True, last=(case, o, err))
        state["known"][_fingerprint(case)] = (case, o, err)
        return True

    def judge(case) -> bool:
        """True when the case fails. After `shrink_budget` programs measured while
        shrinking, only the failures already seen fail (hypothesis replays them)."""
        if state["failed"]:
            if _fingerprint(case) in state["known"]:
                return True
            if state["shrunk"] >= shrink_budget:
                return False
            state["shrunk"] += 1
        try:
            o = observe(case)
        except RecursionError:
            raise
        except Exception as e:  # a crash of the forward derivative: report the program
            return fail(case, None, f"{type(e).__name__}: {e}")
        result.observations.append(o)
        if not state["failed"]:
            result.generated += 1
            if progress is not None:
                progress(result.generated, programs)
        if not o.holds(constants):
            return fail(case, o, None)
        return False

    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", HypothesisWarning)
            hseed(seed)(prop)()
    except Violation:
        last = state["last"]
        result.counterexample = state["known"].get(_fingerprint(last[0]), last)
    finally:
        result.elapsed = time.perf_counter() - start
    return result


@frozen
class ForwardFit:
    c: int
    c1: int
    objective: str

    def as_json(self) -> dict:
        return {"c": self.c, "c1": self.c1, "objective": self.objective}


def fit(observations, c1: int | None = None) -> ForwardFit:
    """z3 Optimize over jvp <= c1 + c * primal: the smallest c with c1 fixed, or
    (c1 None) the pair minimising c + c1, then c."""
    import z3

    rows = {}
    for o in observations:  # only the hardest observation per primal count matters
        rows[o.primal_steps] = max(rows.get(o.primal_steps, 0), o.jvp_steps)
    opt = z3.Optimize()
    c = z3.Int("c")
    k = z3.Int("c1") if c1 is None else z3.IntVal(c1)
    opt.add(c >= 0, k >= 0)
    for p, g in rows.items():
        opt.add(g <= k + c * p)
    opt.set(priority="lex")
    if c1 is None:
        opt.minimize(c + k)
    opt.minimize(c)
    if opt.check() != z3.sat:  # pragma: no cover - always satisfiable (primal >= 1)
        raise RuntimeError("z3 found no constants covering the observations")
    m = opt.model()
    cv = m.eval(c, model_completion=True).as_long()
    kv = m.eval(k, model_completion=True).as_long()
    return ForwardFit(cv, kv, "c with c' fixed" if c1 is not None else "minimal c + c'")
