"""What the generated programs of `chad check` reach: the coverage of a run
(`chad check --stats`; docs/complexity-checker.md).

A check is only as good as the programs it measures: a constant fitted over
programs that never call a helper def, never map over more than three elements
or never nest a map says nothing about those forms. For every feature of the
language (FEATURES, below) this module says whether a program *contains* it (a
node of the program has the form) and whether it *exercises* it at run time (the
primal evaluation reached such a node, and, for the features that need it, with
enough elements or reads: a general fold body combining at least two elements,
an array of at least LARGE elements, a variable read at least SHARED times).

Run time is observed with `TracingEvaluator`, the counting evaluator
(chad/costmodel/evaluate.py) with its dispatch recording the nodes it reaches,
the variables it reads and the lengths of the arrays it makes; the step counts
are the evaluator's own, untouched.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable

from attrs import frozen

from chad.deep import run_deep
from chad.terms import (
    App, ArrayLit, Build, Call, Case, Fold, Fst, Index, Inl, Inr, Iter, Lam, Length, Let, MapA,
    Pair, Prim, Program, Scan, Snd, Var, subterms,
)

from chad.types import ArrayT

from .evaluate import Evaluator

LARGE = 10      # elements: an array at least this long makes per-element costs dominate
SHARED = 10     # reads of one variable: deep sharing

_COMPARISONS = {"LT", "LE", "GT", "GE", "EQ", "NE", "ILT", "ILE", "IGT", "IGE", "IEQ", "INE"}
_ARRAY_OPS = (Build, MapA, Fold)


class TracingEvaluator(Evaluator):
    """The counting evaluator, recording what it reaches (same values and steps)."""

    def __init__(self, defs=None, evm=None) -> None:
        super().__init__(defs, evm)
        self.reached: set[int] = set()
        self.reads: Counter = Counter()
        self.longest = 0

    def eval(self, t, env):
        self.reached.add(id(t))
        if type(t) is Var:
            self.reads[t.name] += 1
        v, c = super().eval(t, env)
        if type(t) in (Build, MapA, ArrayLit):
            self.longest = max(self.longest, len(v))
        return v, c


@frozen
class Trace:
    """What one evaluation reached."""

    reached: frozenset
    reads: dict
    longest: int


def trace(program: Program, args) -> Trace:
    """Evaluate the last def of a checked program on args, recording the trace."""
    d = program.defs[-1]
    env = dict(zip((p.name for p in d.params), args))
    ev = TracingEvaluator({x.name: x for x in program.defs})
    run_deep(ev.eval, d.body, env)
    longest = max([ev.longest] + [len(a) for a in args if isinstance(a, (tuple, list))])
    return Trace(frozenset(ev.reached), dict(ev.reads), longest)


# ----------------------------------------------------------------- node predicates

def _is_cmp(t) -> bool:
    return type(t) is Prim and t.op in _COMPARISONS


def _is_condition(t) -> bool:
    """A comparison, or && || not of conditions: what `if` tests."""
    return type(t) is Prim and (t.op in _COMPARISONS or t.op in ("AND", "OR", "NOT"))


def _general_fold(t) -> bool:
    """A fold whose body is not `fst p + snd p` or `fst p * snd p`."""
    if type(t) is not Fold:
        return False
    b = t.body
    simple = (type(b) is Prim and b.op in ("ADD", "MUL") and type(b.arg) is Pair
              and type(b.arg.left) is Fst and type(b.arg.right) is Snd)
    return not simple


def _nested_map(t) -> bool:
    """A map of a map (chained), or a map inside the body of a map or build (nested)."""
    if type(t) is MapA and type(t.arr) is MapA:
        return True
    if type(t) in (MapA, Build):
        return any(type(u) is MapA for u in subterms(t.body))
    return False


def _closure_in_array_op(t) -> bool:
    """A map, build or fold whose body applies a function bound outside it, or
    calls a def."""
    if type(t) not in _ARRAY_OPS:
        return False
    inner = {t.name}
    for u in subterms(t.body):
        if type(u) is Lam:
            inner.add(u.name)
        elif type(u) is Let:
            inner.add(u.name)
        elif type(u) is Call:
            return True
        elif type(u) is App and type(u.fn) is Var and u.fn.name not in inner:
            return True
    return False


@frozen
class Feature:
    """A feature of the language. `node` says which nodes have it (the program
    contains the feature when one does, and exercises it when the evaluation
    reaches one of them and `when(trace, nodes)` holds); a feature with
    `program` instead is a property of the whole program (contained when
    `program(program)` holds, exercised when `when(trace, program)` does)."""

    name: str
    fragment: str                          # first-order, arrays or functions
    node: Callable | None = None           # node -> bool
    program: Callable | None = None        # program -> bool
    when: Callable | None = None           # (trace, nodes or program) -> bool
    doc: str = ""


def _occurrences(program: Program) -> Counter:
    return Counter(u.name for d in program.defs for u in subterms(d.body) if type(u) is Var)


def _has_arrays(program: Program) -> bool:
    return any(type(u) in (Build, MapA, ArrayLit) for d in program.defs
               for u in subterms(d.body)) or any(
        isinstance(p.ty, ArrayT) for p in program.defs[-1].params)


FEATURES: tuple[Feature, ...] = (
    Feature("let", "first-order", lambda t: type(t) is Let and type(t.rhs) is not Lam),
    Feature("case on a sum", "first-order",
            lambda t: type(t) is Case and not _is_condition(t.scrut)
            and not (type(t.scrut) is Prim and t.scrut.op == "SIGN")),
    Feature("if (case on a comparison)", "first-order",
            lambda t: type(t) is Case and _is_condition(t.scrut)),
    Feature("sign", "first-order", lambda t: type(t) is Prim and t.op == "SIGN"),
    Feature("pair and projection", "first-order", lambda t: type(t) in (Fst, Snd)),
    Feature("injection", "first-order", lambda t: type(t) in (Inl, Inr)),
    Feature("+ * on R", "first-order", lambda t: type(t) is Prim and t.op in ("ADD", "MUL")),
    Feature("sin cos tanh neg abs atan log1p", "first-order",
            lambda t: type(t) is Prim and t.op in ("SIN", "COS", "TANH", "NEG", "ABS", "ATAN",
                                                   "LOG1P")),
    Feature("** max min", "first-order",
            lambda t: type(t) is Prim and t.op in ("POW", "POWI", "MAX", "MIN")),
    Feature("+ * div mod abs on Z", "first-order",
            lambda t: type(t) is Prim and t.op in ("IADD", "IMUL", "IDIV", "IMOD", "IABS")),
    Feature("comparison", "first-order", _is_cmp),
    Feature("&& || not", "first-order", lambda t: type(t) is Prim and t.op in ("AND", "OR", "NOT")),
    Feature("floor toreal", "first-order",
            lambda t: type(t) is Prim and t.op in ("FLOOR", "TOREAL")),
    Feature("deep sharing", "first-order",
            program=lambda p: max(_occurrences(p).values(), default=0) >= SHARED,
            when=lambda tr, p: any(tr.reads.get(x, 0) >= SHARED
                                   for x, k in _occurrences(p).items() if k >= SHARED),
            doc=f"a variable occurring at least {SHARED} times (and read as often)"),
    Feature("iter", "loops", lambda t: type(t) is Iter,
            when=lambda tr, hits: any(_reached(tr, h.body) for h in hits),
            doc="a loop that runs at least one step"),
    Feature("scan", "loops", lambda t: type(t) is Scan,
            when=lambda tr, hits: any(_reached(tr, h.body) for h in hits),
            doc="a scan that runs at least one step (over a non-empty array)"),
    Feature("build", "arrays", lambda t: type(t) is Build),
    Feature("map", "arrays", lambda t: type(t) is MapA),
    Feature("nested or chained maps", "arrays", _nested_map),
    Feature("index", "arrays", lambda t: type(t) is Index),
    Feature("sum", "arrays", lambda t: type(t) is Prim and t.op in ("SUM", "ISUM")),
    Feature("length", "arrays", lambda t: type(t) is Length),
    Feature("array literal", "arrays", lambda t: type(t) is ArrayLit),
    Feature("fold", "arrays", lambda t: type(t) is Fold),
    Feature("fold, general body", "arrays", _general_fold, when=lambda tr, hits: tr.longest >= 2,
            doc="a body other than fst p + snd p or fst p * snd p, combining two elements"),
    Feature("large array", "arrays", program=_has_arrays,
            when=lambda tr, p: tr.longest >= LARGE,
            doc=f"an array of at least {LARGE} elements made or passed"),
    Feature("lambda applied", "functions", lambda t: type(t) is App),
    Feature("function bound by let", "functions", lambda t: type(t) is Let and type(t.rhs) is Lam),
    Feature("closure in an array op", "functions", _closure_in_array_op,
            doc="a map, build or fold body applying a function bound outside it, or calling a def"),
    Feature("helper def called", "functions", lambda t: type(t) is Call),
)


def _reached(tr: Trace, t) -> bool:
    # the evaluator runs a chain of lets as one loop: an inner let is reached
    # when its right-hand side is
    return id(t) in tr.reached or (type(t) is Let and id(t.rhs) in tr.reached)


def features_of(program: Program, tr: Trace | None) -> tuple[set[str], set[str]]:
    """(the features the program contains, those it exercises given the trace;
    None: it did not run)."""
    contained: set[str] = set()
    exercised: set[str] = set()
    nodes = [u for d in program.defs for u in subterms(d.body)]
    for f in FEATURES:
        if f.node is None:
            if f.program(program):
                contained.add(f.name)
                if tr is not None and f.when(tr, program):
                    exercised.add(f.name)
            continue
        hits = [u for u in nodes if f.node(u)]
        if not hits:
            continue
        contained.add(f.name)
        if tr is not None and any(_reached(tr, u) for u in hits) and (
                f.when is None or f.when(tr, hits)):
            exercised.add(f.name)
    return contained, exercised


@frozen
class Coverage:
    """Per feature: how many programs contain it and how many exercise it."""

    programs: int
    contained: dict
    exercised: dict

    def rows(self):
        for f in FEATURES:
            yield f, self.contained.get(f.name, 0), self.exercised.get(f.name, 0)

    def as_json(self) -> dict:
        return {"programs": self.programs, "features": [
            {"feature": f.name, "fragment": f.fragment, "contained": c, "exercised": e}
            for f, c, e in self.rows()]}


def coverage(cases) -> Coverage:
    """The coverage of generated cases (each with `.program` and `.args`)."""
    contained: Counter = Counter()
    exercised: Counter = Counter()
    n = 0
    for case in cases:
        n += 1
        try:
            tr = trace(case.program, case.args)
        except Exception:  # a program that fails to run contains, but exercises nothing
            tr = None
        c, e = features_of(case.program, tr)
        contained.update(c)
        exercised.update(e)
    return Coverage(n, dict(contained), dict(exercised))


__all__ = ["FEATURES", "Feature", "Coverage", "coverage", "features_of", "trace",
           "TracingEvaluator", "LARGE", "SHARED"]
