"""Hypothesis strategies for well-typed programs, their arguments and sparse
cotangents (public API for research users).

    from hypothesis import given
    from chad.costmodel.generators import programs

    @given(programs(max_depth=4))
    def test(case):
        case.defn, case.args, case.ctg       # a typed core def, its arguments,
        case.program, case.source()          # a (sparse) output cotangent

Programs are typed core terms (every node has `.ty`), built directly so they need
neither parser nor checker; `GenCase.source()` prints them in surface syntax.

The language covered is switched by flags:

  * always: R, Z, (), pairs, sums, Bool; let, case (on any sum, on `sign e`, on a
    comparison: `if`), fst/snd (also as projection paths out of a variable, the
    shape naive CHAD pays for), the scalar primitives (+ * - max min on R, + * - div
    mod abs on Z, sin, cos, tanh, abs, atan, log1p of an absolute value, (abs e +
    1.0) ** c, floor, toreal, comparisons, && || not), literals;
  * `loops=True`: `iter k (\\s -> e) x` with a literal k in 0..6 (needs chad.loops);
    with `arrays=True` too, `scan (\\p -> e) x a` wherever an array is drawn;
  * `arrays=True`: parameters and results of type Array T; `build n (\\i -> e)`,
    `a ! k` (indices always in range: lengths are tracked), `length a`, `sum a`,
    `map (\\x -> e) a`, `fold (\\p -> fst p + snd p) a` (needs chad.arrays);
  * `functions=True`: `let f = \\x -> e in ... f a ...`, immediate applications
    `(\\x -> e) a`, and a helper def called from the main one (needs
    chad.functions).

`language_programs(...)` is `programs(...)` with both of them on.
`chains(...)` generates programs that apply one construct after another (up to 16
layers): they measure per-construct constants (`chad check --shape chains`).

Size and shape: `max_depth` bounds the term depth, `max_size` the number of term
nodes, `max_params` the number of parameters and `type_depth` the depth of their
types. Hypothesis shrinks towards small programs: every choice lists its simplest
alternative first (a variable, a literal), parameters and types shrink to `R`,
and literal values to small round numbers, so a shrunk counterexample is short.
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any

import numpy as np
from attrs import field, frozen
from hypothesis import strategies as st

from chad.checker import check_program
from chad.primitives import SIGN_T
from chad.printer import print_program
from chad.terms import (
    Ann, App, ArrayLit, Build, Call, Case, Def, Fold, Fst, Index, Inl, Inr, Iter, Lam, Length,
    Let, MapA, Pair, Param, Prim, Program, Scan, Snd, Term, Unit, Var, free_vars, map_children,
)
from chad.types import BOOL, UNIT, ArrayT, Fun, Int, Prod, R, Real, Sum, Type, UnitT, Z
from chad.values import Inj, value_to_json

from .measure import run_primal

# Unary real primitives that are total and tame on the inputs we generate.
SAFE_UNARY = ("NEG", "SIN", "COS", "TANH", "ABS", "ATAN")
COMPARISONS = ("LT", "LE", "GT", "GE", "EQ", "NE")
BOOL_OPS = ("NOT", "AND", "OR")
REAL_LITERALS = (1.0, 0.5, 2.0, 1.5, 0.25, 3.0)


# ----------------------------------------------------------------- generated cases
@frozen
class GenCase:
    """A generated program with arguments and a (sparse) output cotangent.

    `defn` is the def differentiated (the last of the program); `helpers` are the
    defs above it (only with functions=True). `args` are Python values (floats,
    ints, None, tuples for pairs, `Inj` for sums, tuples for arrays), `ctg` a
    sparse cotangent (None is the sparse zero of a pair, sum or array).
    """

    defn: Def
    args: tuple
    ctg: Any
    value: Any = None
    helpers: tuple = field(default=(), kw_only=True)

    @property
    def program(self) -> Program:
        return Program(tuple(self.helpers) + (self.defn,))

    def source(self) -> str:
        """The program in surface syntax (chad.printer)."""
        return print_program(annotate_injections(self.program))

    def args_json(self) -> list:
        return [value_to_json(p.ty, a) for p, a in zip(self.defn.params, self.args)]

    def ctg_json(self):
        return ctg_to_json(self.defn.result, self.ctg)

    def command(self, path: str, transform: str = "efficient", evm: str = "array",
                extra: str = "") -> str:
        """The `chad cost` command line reproducing this case from `path`."""
        import shlex

        parts = ["chad", "cost", path, "--args", json.dumps(self.args_json()),
                 "--ctg", json.dumps(self.ctg_json()), "--transform", transform,
                 "--evm", evm]
        return " ".join(shlex.quote(p) for p in parts) + extra


def ctg_to_json(ty: Type, ct):
    """The sparse cotangent JSON of docs/language.md (null keeps a zero sparse)."""
    match ty:
        case Real():
            return float(ct) if ct is not None else 0.0
        case Int() | UnitT() | Fun():
            return None
        case Prod(a, b):
            if ct is None:
                return None
            return [ctg_to_json(a, ct[0]), ctg_to_json(b, ct[1])]
        case Sum(UnitT(), UnitT()):
            return None
        case Sum(a, b):
            if ct is None:
                return None
            return {("inl", "inr")[ct.side]: ctg_to_json(a if ct.side == 0 else b, ct.value)}
        case ArrayT(e):
            if ct is None:
                return None
            return [ctg_to_json(e, x) for x in ct]
    raise TypeError(f"cannot encode a cotangent of {ty}")


# ----------------------------------------------------------------- types
@functools.lru_cache(maxsize=None)
def types(max_depth: int = 2, arrays: bool = False) -> st.SearchStrategy[Type]:
    """First-order types; `R` first so that types shrink to R."""
    base = st.sampled_from([R, R, R, Z, UNIT])
    if max_depth <= 0:
        return base
    sub = types(max_depth - 1, arrays)
    forms = [base, st.builds(Prod, sub, sub), st.builds(Sum, sub, sub)]
    if arrays:
        forms.append(st.builds(ArrayT, types(max_depth - 1, False)))
    return st.one_of(*forms)


@functools.lru_cache(maxsize=None)
def wide_types(max_depth: int = 3, arrays: bool = False) -> st.SearchStrategy[Type]:
    """Types biased towards large products and sums (the shapes whose dense zeros
    and one-hots naive CHAD pays for), still shrinking to R."""
    if max_depth <= 0:
        return st.sampled_from([R, R, Z, UNIT])
    sub = wide_types(max_depth - 1, arrays)
    forms = [st.just(R), st.builds(Prod, sub, sub), st.builds(Prod, sub, sub),
             st.builds(Sum, sub, sub)]
    if arrays:
        forms.append(st.builds(ArrayT, types(max_depth - 1, False)))
    return st.one_of(*forms)


@functools.lru_cache(maxsize=None)
def tuple_types(max_components: int = 48, arrays: bool = False) -> st.SearchStrategy[Type]:
    """Right-nested tuples `T1 * (T2 * (... * Tk))` of 1..max_components small
    components: large records, the contexts whose dense cotangents make naive
    CHAD's zeros, one-hots and environment sums expensive (Efficient CHAD (Smeding & Vákár), §4, Table 1).
    k shrinks towards 1, so a shrunk counterexample has the fewest components
    that still break the bound."""

    def build(parts):
        t = parts[-1]
        for p in reversed(parts[:-1]):
            t = Prod(p, t)
        return t

    return st.integers(1, max_components).flatmap(
        lambda k: st.lists(types(0), min_size=k, max_size=k)).map(build)


def type_size(ty: Type) -> int:
    match ty:
        case Prod(a, b) | Sum(a, b) | Fun(a, b):
            return 1 + type_size(a) + type_size(b)
        case ArrayT(e):
            return 1 + type_size(e)
    return 1


# ----------------------------------------------------------------- values
BULK_LEAVES = 8  # types with more leaves get their values from one drawn seed


@functools.lru_cache(maxsize=4096)
def values_of(ty: Type, lengths: tuple[int, ...] = (1, 4)) -> st.SearchStrategy:
    """Values of a first-order type (arrays: tuples of length in `lengths`; with
    four numbers (lo, hi, big_lo, big_hi), a quarter of the arrays have a length
    in the second range, their elements from one drawn seed).

    Values of large types (more than BULK_LEAVES leaves: big records) come from
    one drawn integer through a pseudo-random generator, which keeps hypothesis's
    choice sequence, and so its shrinking, short; seed 0 gives 1.0 everywhere."""
    if type_size(ty) > 2 * BULK_LEAVES:
        return st.integers(0, 2**20).map(lambda s: _pseudo_value(ty, s, lengths[:2]))
    match ty:
        case Real():
            return st.floats(-2.0, 2.0, allow_nan=False).map(lambda x: round(x, 3))
        case Int():
            return st.integers(-3, 3)
        case UnitT():
            return st.none()
        case Prod(a, b):
            return st.tuples(values_of(a, lengths), values_of(b, lengths))
        case Sum(a, b):
            return st.one_of(values_of(a, lengths).map(lambda v: Inj(0, v)),
                             values_of(b, lengths).map(lambda v: Inj(1, v)))
        case ArrayT(e):
            small = st.lists(values_of(e, lengths[:2]), min_size=lengths[0],
                             max_size=lengths[1]).map(tuple)
            if len(lengths) < 4:
                return small
            large = st.integers(0, 2**20).map(lambda s: _pseudo_value(ty, s, lengths[2:]))
            return st.one_of(small, small, small, large)
    raise NotImplementedError(str(ty))


def sparse_ctgs(ty: Type, value) -> st.SearchStrategy:
    """Cotangents for `value : ty`, pairs, sums and arrays sometimes the sparse zero
    (large types: from one drawn seed, as values_of; seed 0 is the sparse zero)."""
    if type_size(ty) > 2 * BULK_LEAVES:
        return st.integers(0, 2**20).map(lambda s: _pseudo_ctg(ty, value, s))
    match ty:
        case Real():
            return st.floats(-2.0, 2.0, allow_nan=False).map(lambda x: round(x, 3))
        case Int() | UnitT():
            return st.none()
        case Prod(a, b):
            return st.one_of(st.none(), st.tuples(sparse_ctgs(a, value[0]),
                                                  sparse_ctgs(b, value[1])))
        case Sum(a, b):
            inner = a if value.side == 0 else b
            return st.one_of(st.none(), sparse_ctgs(inner, value.value).map(
                lambda c: Inj(value.side, c)))
        case ArrayT(e):
            if len(value) > BULK_LEAVES:
                return st.integers(0, 2**20).map(lambda s: _pseudo_ctg(ty, value, s))
            return st.one_of(st.none(), st.tuples(*[sparse_ctgs(e, x) for x in value])
                             .map(list))
    raise NotImplementedError(str(ty))


def _pseudo_value(ty: Type, seed: int, lengths=(1, 4)):
    import random

    rng = random.Random(seed)

    def go(t):
        match t:
            case Real():
                return 1.0 if seed == 0 else rng.choice(REAL_LITERALS + (-1.0, -0.5))
            case Int():
                return 1 if seed == 0 else rng.randint(-3, 3)
            case UnitT():
                return None
            case Prod(a, b):
                return (go(a), go(b))
            case Sum(a, b):
                side = 0 if seed == 0 else rng.randint(0, 1)
                return Inj(side, go(a if side == 0 else b))
            case ArrayT(e):
                n = lengths[0] if seed == 0 else rng.randint(*lengths)
                return tuple(go(e) for _ in range(n))
        raise NotImplementedError(str(t))

    return go(ty)


def _pseudo_ctg(ty: Type, value, seed: int):
    import random

    rng = random.Random(seed)

    def go(t, v):
        match t:
            case Real():
                return rng.choice(REAL_LITERALS)
            case Int() | UnitT():
                return None
            case Prod(a, b):
                return None if rng.random() < 0.3 else (go(a, v[0]), go(b, v[1]))
            case Sum(a, b):
                if rng.random() < 0.3:
                    return None
                return Inj(v.side, go(a if v.side == 0 else b, v.value))
            case ArrayT(e):
                return None if rng.random() < 0.3 else [go(e, x) for x in v]
        raise NotImplementedError(str(t))

    return None if seed == 0 and not isinstance(ty, Real) else go(ty, value)


# ----------------------------------------------------------------- terms
@functools.lru_cache(maxsize=None)
def _index(n: int) -> st.SearchStrategy[int]:
    return st.integers(0, n - 1)


_BOOLS = st.booleans()

# Rich programs (`programs(rich=True)`, what `chad check` generates): array lengths
# 1..3 or, a quarter of the time, tens to a hundred elements, as far as the element
# budget (total evaluations of a loop body, nested loops multiplied) allows; a
# shared variable is read 10 to 24 times.
LARGE_SIZES = (10, 20, 50, 100)
ELEMENT_BUDGET = 400
_SIZES = st.one_of(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3),
                   st.sampled_from(LARGE_SIZES))
_SHARES = (10, 12, 16, 24)
_HELPER_RICH = st.sampled_from([True, True, True, False])
_LIKELY = st.sampled_from([True, True, False])
_ITER_COUNTS = st.sampled_from([1, 2, 3, 4, 5, 6, 0])  # iter's literal count, shrinks to 1
CHAIN_BUDGET = 2000  # element evaluations of a chain, past which no build layer is added
_CHAIN_SIZES = st.one_of(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3),
                         st.sampled_from((10, 30)))
_LARGE_LENGTHS = (1, 4, 10, 60)  # values_of: 1..4 elements, or (a quarter) 10..60


@frozen
class Binding:
    """A variable in scope. `length`: the known length of an array variable;
    `bound`: an index variable ranging over [0, bound)."""

    name: str
    ty: Type
    length: int | None = None
    bound: int | None = None


def _paths(ty: Type, want: Type, depth: int):
    """Projection paths (tuples of 0 = fst, 1 = snd) from ty to want."""
    if depth > 0 and isinstance(ty, Prod):
        for side, sub in ((0, ty.left), (1, ty.right)):
            if sub == want:
                yield (side,)
            for p in _paths(sub, want, depth - 1):
                yield (side,) + p


class _TypedTermGen:
    """Generates the typed core terms of one program, node by node, from
    hypothesis's draws (its state: fresh names, node budget)."""

    def __init__(self, draw, max_depth: int, *, max_size: int | None = None,
                 arrays: bool = False, functions: bool = False, helpers=(),
                 rich: bool = False, loops: bool = False):
        self.draw = draw
        self.max_depth = max_depth
        self.max_size = max_size
        self.arrays = arrays
        self.functions = functions
        self.helpers = list(helpers)
        self.rich = rich
        self.loops = loops
        self.counter = 0
        self.nodes = 0
        self.mult = 1  # how many times the term being generated runs (enclosing loops)

    def array_size(self) -> int:
        """The length of a new array: 1..3, or (rich) sometimes LARGE_SIZES, as far
        as ELEMENT_BUDGET allows given the enclosing loops."""
        if not self.rich:
            return 1 + self.draw(_index(3))
        n = self.draw(_SIZES)
        while n > 3 and n * self.mult > ELEMENT_BUDGET:
            n //= 2
        return max(n, 1)

    def in_loop(self, n: int, make):
        """make() with the loop multiplier raised by n (the body of a loop of n)."""
        saved = self.mult
        self.mult = saved * max(n, 1)
        try:
            return make()
        finally:
            self.mult = saved

    def pick(self, seq):
        """One element of seq; shrinks towards the first."""
        seq = list(seq)
        return seq[self.draw(_index(len(seq)))] if len(seq) > 1 else seq[0]

    def fresh(self, base: str = "v") -> str:
        self.counter += 1
        return f"{base}{self.counter}"

    def visible(self, ctx: list[Binding]) -> list[Binding]:
        seen, out = set(), []
        for b in reversed(ctx):
            if b.name not in seen:
                seen.add(b.name)
                out.append(b)
        return out

    def subtype(self) -> Type:
        return self.draw(types(1, self.arrays))

    # the entry point ------------------------------------------------------
    def term(self, ctx: list[Binding], ty: Type, depth: int) -> Term:
        self.nodes += 1
        vis = self.visible(ctx)
        leaf = depth >= self.max_depth or (self.max_size is not None
                                           and self.nodes >= self.max_size)
        choices: list[str] = []
        if any(b.ty == ty for b in vis):
            choices.append("var")
        if any(True for b in vis for _ in _paths(b.ty, ty, 4)):
            choices.append("proj")
        choices.extend(self._intro_forms(ty, vis, leaf))
        if not leaf:
            choices.extend(["let", "case", "sign", "fst", "snd"])
            if any(isinstance(b.ty, Sum) for b in vis):
                choices.append("casevar")
            choices.extend(self._compound_forms(ty, vis))
        kind = self.pick((choices))
        return getattr(self, "k_" + kind)(ctx, ty, depth, vis)

    def _intro_forms(self, ty, vis, leaf):
        match ty:
            case Real():
                return ["lit"]
            case Int():
                forms = ["ilit"]
                if any(b.bound is not None for b in vis):
                    forms.append("ivar")
                return forms
            case UnitT():
                return ["unit"]
            case Prod():
                return ["pair"]
            case Sum():
                return ["inj"]
            case ArrayT():
                return [] if leaf else ["build"]
        return []

    def _compound_forms(self, ty, vis):
        forms: list[str] = []
        match ty:
            case Real():
                forms += ["binop", "binop", "unop", "toreal"]
                if self.arrays:
                    forms += ["index", "sum", "fold"]
            case Int():
                forms += ["ibinop", "floor"]
                if self.arrays:
                    forms += ["length", "isum"]
            case ArrayT():
                forms += ["map"] if self.arrays else []
                forms += ["scan"] if self.arrays and self.loops else []
        if ty == BOOL:
            forms.append("cmp")
        if not isinstance(ty, (Real, ArrayT)) and self.arrays:
            forms.append("index")
        forms.append("if")
        if self.loops and not isinstance(ty, ArrayT):
            forms.append("iter")
        if self.functions:
            forms += ["app", "app", "letfun"]
            if any(isinstance(b.ty, Fun) and b.ty.res == ty for b in vis):
                forms.append("appvar")
            if any(h.result == ty for h in self.helpers):
                forms.append("call")
        return forms

    # leaves and introductions ------------------------------------------------
    def k_var(self, ctx, ty, depth, vis):
        b = self.pick(([b for b in vis if b.ty == ty]))
        return Var(b.name, ty=ty)

    def k_ivar(self, ctx, ty, depth, vis):
        b = self.pick(([b for b in vis if b.bound is not None]))
        return Var(b.name, ty=Z)

    def k_proj(self, ctx, ty, depth, vis):
        options = [(b, p) for b in vis for p in _paths(b.ty, ty, 4)]
        b, path = self.pick((options))
        t: Term = Var(b.name, ty=b.ty)
        for side in path:
            cur = t.ty
            t = (Fst(t, ty=cur.left) if side == 0 else Snd(t, ty=cur.right))
        return t

    def k_lit(self, ctx, ty, depth, vis):
        c = self.pick((REAL_LITERALS))
        return Prim("LIT", Unit(ty=UNIT), c, ty=R)

    def k_ilit(self, ctx, ty, depth, vis):
        return Prim("ILIT", Unit(ty=UNIT), self.draw(_index(4)), ty=Z)

    def k_unit(self, ctx, ty, depth, vis):
        return Unit(ty=UNIT)

    def k_pair(self, ctx, ty, depth, vis):
        return Pair(self.term(ctx, ty.left, depth + 1), self.term(ctx, ty.right, depth + 1),
                    ty=ty)

    def k_inj(self, ctx, ty, depth, vis):
        if self.draw(_BOOLS):
            return Inr(self.term(ctx, ty.right, depth + 1), ty=ty)
        return Inl(self.term(ctx, ty.left, depth + 1), ty=ty)

    # scalar operations ----------------------------------------------------------
    def k_binop(self, ctx, ty, depth, vis):
        op = self.pick((["ADD", "MUL", "MAX", "MIN", "POW"]))
        if op == "POW":
            return self.k_pow(ctx, ty, depth, vis)
        return Prim(op, Pair(self.term(ctx, R, depth + 1), self.term(ctx, R, depth + 1),
                             ty=Prod(R, R)), ty=R)

    def k_pow(self, ctx, ty, depth, vis):
        """(abs e + 1.0) ** c: a base >= 1 and a small exponent (0.5, 1.5 or 2.0,
        or an integer 0..2), so that it is total and its derivative finite."""
        e = self.term(ctx, R, depth + 1)
        one = Prim("LIT", Unit(ty=UNIT), 1.0, ty=R)
        base = Prim("ADD", Pair(Prim("ABS", e, ty=R), one, ty=Prod(R, R)), ty=R)
        if self.draw(_BOOLS):
            c = Prim("LIT", Unit(ty=UNIT), self.pick((0.5, 1.5, 2.0)), ty=R)
            return Prim("POW", Pair(base, c, ty=Prod(R, R)), ty=R)
        n = Prim("ILIT", Unit(ty=UNIT), self.draw(_index(3)), ty=Z)
        return Prim("POWI", Pair(base, n, ty=Prod(R, Z)), ty=R)

    def k_ibinop(self, ctx, ty, depth, vis):
        op = self.pick((["IADD", "IMUL", "IDIV", "IMOD", "IABS"]))
        left = self.term(ctx, Z, depth + 1)
        if op == "IABS":
            return Prim(op, left, ty=Z)
        if op in ("IDIV", "IMOD"):  # a nonzero literal divisor: total
            right = Prim("ILIT", Unit(ty=UNIT), 1 + self.draw(_index(3)), ty=Z)
        else:
            right = self.term(ctx, Z, depth + 1)
        return Prim(op, Pair(left, right, ty=Prod(Z, Z)), ty=Z)

    def k_unop(self, ctx, ty, depth, vis):
        op = self.pick((SAFE_UNARY + ("LOG1P",)))
        arg = self.term(ctx, R, depth + 1)
        if op == "LOG1P":  # only on arguments >= 0 (> -1): total
            arg = Prim("ABS", arg, ty=R)
        return Prim(op, arg, ty=R)

    def k_toreal(self, ctx, ty, depth, vis):
        return Prim("TOREAL", self.term(ctx, Z, depth + 1), ty=R)

    def k_floor(self, ctx, ty, depth, vis):
        return Prim("FLOOR", self.term(ctx, R, depth + 1), ty=Z)

    def k_cmp(self, ctx, ty, depth, vis):
        op = self.pick((COMPARISONS + (BOOL_OPS if depth < self.max_depth else ())))
        if op == "NOT":
            return Prim(op, self.k_cmp(ctx, BOOL, depth + 1, vis), ty=BOOL)
        if op in BOOL_OPS:  # && and ||: both operands are evaluated
            return Prim(op, Pair(self.k_cmp(ctx, BOOL, depth + 1, vis),
                                 self.k_cmp(ctx, BOOL, depth + 1, vis),
                                 ty=Prod(BOOL, BOOL)), ty=BOOL)
        base = self.pick(([R, Z]))
        name = op if base == R else "I" + op
        return Prim(name, Pair(self.term(ctx, base, depth + 1), self.term(ctx, base, depth + 1),
                               ty=Prod(base, base)), ty=BOOL)

    # binders and eliminations ----------------------------------------------------
    def k_let(self, ctx, ty, depth, vis):
        sigma = self.subtype()
        name = self.fresh()
        if isinstance(sigma, ArrayT):
            rhs, n = self.array_term(ctx, sigma.elem, depth + 1)
            b = Binding(name, sigma, length=n)
        else:
            rhs = self.term(ctx, sigma, depth + 1)
            b = Binding(name, sigma)
        body = self.term(ctx + [b], ty, depth + 1)
        return Let(name, rhs, body, ty=ty)

    def k_case(self, ctx, ty, depth, vis):
        a, b = self.draw(types(1)), self.draw(types(1))
        scrut = self.term(ctx, Sum(a, b), depth + 1)
        return self._case_on(ctx, scrut, ty, depth)

    def k_casevar(self, ctx, ty, depth, vis):
        v = self.pick(([b for b in vis if isinstance(b.ty, Sum)]))
        return self._case_on(ctx, Var(v.name, ty=v.ty), ty, depth)

    def _case_on(self, ctx, scrut, ty, depth):
        a, b = scrut.ty.left, scrut.ty.right
        x, y = self.fresh(), self.fresh()
        return Case(scrut, x, self.term(ctx + [Binding(x, a)], ty, depth + 1),
                    y, self.term(ctx + [Binding(y, b)], ty, depth + 1), ty=ty)

    def k_if(self, ctx, ty, depth, vis):
        """if a < b then e1 else e2 (a case on a comparison)."""
        cond = self.k_cmp(ctx, BOOL, depth, vis)
        x, y = self.fresh("u"), self.fresh("u")
        return Case(cond, x, self.term(ctx + [Binding(x, UNIT)], ty, depth + 1),
                    y, self.term(ctx + [Binding(y, UNIT)], ty, depth + 1), ty=ty)

    def k_sign(self, ctx, ty, depth, vis):
        """case sign e of { inl s -> case s of {...} | inr z -> ... }"""
        e = self.term(ctx, R, depth + 1)
        s, n, p, z = self.fresh(), self.fresh(), self.fresh(), self.fresh()
        sb = Binding(s, BOOL)
        inner = Case(Var(s, ty=BOOL), n, self.term(ctx + [sb, Binding(n, UNIT)], ty, depth + 1),
                     p, self.term(ctx + [sb, Binding(p, UNIT)], ty, depth + 1), ty=ty)
        return Case(Prim("SIGN", e, ty=SIGN_T), s, inner,
                    z, self.term(ctx + [Binding(z, UNIT)], ty, depth + 1), ty=ty)

    def k_fst(self, ctx, ty, depth, vis):
        other = self.draw(types(1))
        return Fst(self.term(ctx, Prod(ty, other), depth + 1), ty=ty)

    def k_snd(self, ctx, ty, depth, vis):
        other = self.draw(types(1))
        return Snd(self.term(ctx, Prod(other, ty), depth + 1), ty=ty)

    # arrays -----------------------------------------------------------------------
    def array_term(self, ctx, elem: Type, depth: int) -> tuple[Term, int]:
        """A term of type Array elem with its (statically known) length."""
        self.nodes += 1
        aty = ArrayT(elem)
        vis = self.visible(ctx)
        known = [b for b in vis if b.ty == aty and b.length is not None]
        leaf = depth >= self.max_depth or (self.max_size is not None
                                           and self.nodes >= self.max_size)
        choices = ["var"] if known else []
        if not leaf or not known:
            choices += ["build"]
        if not leaf:
            choices += ["map", "literal"]
            if self.loops:
                choices.append("scan")
        kind = self.pick((choices))
        if kind == "scan":
            return self.scan_term(ctx, elem, depth)
        if kind == "literal":
            n = 1 + self.draw(_index(3))
            elems = tuple(self.term(ctx, elem, depth + 1) for _ in range(n))
            return ArrayLit(elems, ty=aty), n
        if kind == "var":
            b = self.pick((known))
            return Var(b.name, ty=aty), b.length
        if kind == "build":
            n = self.array_size()
            i = self.fresh("i")
            body = self.in_loop(n, lambda: self.term(ctx + [Binding(i, Z, bound=n)], elem,
                                                     depth + 1))
            return Build(Prim("ILIT", Unit(ty=UNIT), n, ty=Z), i, body, ty=aty), n
        src_elem = self.pick(([R, elem]))
        arr, n = self.array_term(ctx, src_elem, depth + 1)
        x = self.fresh("x")
        body = self.in_loop(n, lambda: self.term(ctx + [Binding(x, src_elem)], elem, depth + 1))
        return MapA(x, body, arr, ty=aty), n

    def k_build(self, ctx, ty, depth, vis):
        return self.array_term(ctx, ty.elem, depth)[0]

    def k_map(self, ctx, ty, depth, vis):
        return self.array_term(ctx, ty.elem, depth)[0]

    def k_index(self, ctx, ty, depth, vis):
        arr, n = self.array_term(ctx, ty, depth + 1)
        idx_vars = [b for b in vis if b.bound is not None and b.bound <= n]
        if idx_vars and self.draw(_BOOLS):
            idx = Var(self.pick((idx_vars)).name, ty=Z)
        else:
            idx = Prim("ILIT", Unit(ty=UNIT), self.draw(_index(n)), ty=Z)
        return Index(arr, idx, ty=ty)

    def k_sum(self, ctx, ty, depth, vis):
        arr, _ = self.array_term(ctx, R, depth + 1)
        return Prim("SUM", arr, ty=R)

    def k_isum(self, ctx, ty, depth, vis):
        arr, _ = self.array_term(ctx, Z, depth + 1)
        return Prim("ISUM", arr, ty=Z)

    def k_length(self, ctx, ty, depth, vis):
        elem = self.draw(types(0))
        arr, _ = self.array_term(ctx, elem, depth + 1)
        return Length(arr, ty=Z)

    def k_fold(self, ctx, ty, depth, vis):
        arr, n = self.array_term(ctx, R, depth + 1)
        p = self.fresh("p")
        pv = Var(p, ty=Prod(R, R))
        if self.rich and self.draw(_BOOLS):  # any body over the pair (and the context)
            body = self.in_loop(n, lambda: self.term(ctx + [Binding(p, Prod(R, R))], R,
                                                     max(depth + 1, self.max_depth - 2)))
            return Fold(p, body, arr, ty=R)
        op = self.pick((["ADD", "MUL"]))
        body = Prim(op, Pair(Fst(pv, ty=R), Snd(pv, ty=R), ty=Prod(R, R)), ty=R)
        return Fold(p, body, arr, ty=R)

    # snippets (rich programs): let-bound before the body, each reaching a feature
    # that random terms reach rarely ---------------------------------------------------
    def snippet_kinds(self) -> list[str]:
        kinds = ["share", "ints", "logic"]
        if self.arrays:
            kinds += ["fold", "nested"]
        if self.functions:
            kinds += ["closure"] if self.arrays else []
            if self.helpers:
                kinds += ["call"]
        return kinds

    def snippet(self, ctx, kind: str) -> Term:
        """A term of type R reaching the feature `kind`."""
        depth = max(0, self.max_depth - 2)
        if kind == "share":  # one variable read k times: c1 * v + (c2 * v + ...)
            v = self.fresh("s")
            k = self.draw(st.sampled_from(_SHARES))
            rhs = self.term(ctx, R, depth)
            vv = Var(v, ty=R)
            body: Term = vv
            for j in range(k - 1):
                c = _lit(REAL_LITERALS[j % len(REAL_LITERALS)] / 4)
                body = Prim("ADD", _pair(Prim("MUL", _pair(c, vv), ty=R), body), ty=R)
            return Let(v, rhs, body, ty=R)
        if kind == "ints":  # toreal (floor e * k + length a) (or + k without arrays)
            k = _ilit(1 + self.draw(_index(3)))
            fl = Prim("FLOOR", self.term(ctx, R, depth), ty=Z)
            if self.arrays:
                arr, _ = self.array_term(ctx, self.draw(types(0)), depth)
                other: Term = Length(arr, ty=Z)
            else:
                other = k
            z = Prim("IADD", _pair(Prim("IMUL", _pair(fl, k), ty=Z), other), ty=Z)
            return Prim("TOREAL", z, ty=R)
        if kind == "logic":
            # if (a < b && not (c < d)) || e < f then max(e1, e2) else (abs e3 + 1.0) ** c
            cmps = [self.k_cmp(ctx, BOOL, self.max_depth, []) for _ in range(3)]
            cond = Prim("OR", _pair(Prim("AND", _pair(cmps[0], Prim("NOT", cmps[1], ty=BOOL)),
                                         ty=BOOL), cmps[2]), ty=BOOL)
            u, w = self.fresh("u"), self.fresh("u")
            op = self.pick(["MAX", "MIN"])
            left = Prim(op, _pair(self.term(ctx + [Binding(u, UNIT)], R, depth),
                                  self.term(ctx + [Binding(u, UNIT)], R, depth)), ty=R)
            right = self.k_pow(ctx + [Binding(w, UNIT)], R, depth, [])
            return Case(cond, u, left, w, right, ty=R)
        if kind == "fold":
            saved, self.rich = self.rich, True
            try:
                arr, n = self.array_term(ctx, R, depth)
                p = self.fresh("p")
                body = self.in_loop(n, lambda: self.term(ctx + [Binding(p, Prod(R, R))], R,
                                                         depth))
            finally:
                self.rich = saved
            return Fold(p, body, arr, ty=R)
        if kind == "nested":  # sum (map (\x -> sum (map (\z -> x * z) b)) a), or chained
            a, n = self.array_term(ctx, R, depth)
            x, z = self.fresh("x"), self.fresh("z")
            if self.draw(_BOOLS):  # nested: the inner array's length is within budget / n
                b, _ = self.in_loop(n, lambda: self.array_term(ctx + [Binding(x, R)], R, depth))
                prod = Prim("MUL", _pair(Var(x, ty=R), Var(z, ty=R)), ty=R)
                body = Prim("SUM", MapA(z, prod, b, ty=_AR), ty=R)
                return Prim("SUM", MapA(x, body, a, ty=_AR), ty=R)
            f1 = self.in_loop(n, lambda: self.term(ctx + [Binding(z, R)], R, depth))
            f2 = self.in_loop(n, lambda: self.term(ctx + [Binding(x, R)], R, depth))
            return Prim("SUM", MapA(x, f2, MapA(z, f1, a, ty=_AR), ty=_AR), ty=R)
        if kind == "closure":  # let g = \y -> e in sum (map (\x -> g x) a)
            fn = self._lambda(ctx, R, R, depth)
            g, x = self.fresh("g"), self.fresh("x")
            if self.draw(_BOOLS):  # over an array literal [e1, e2, ...]
                a: Term = ArrayLit(tuple(self.term(ctx, R, depth) for _ in range(
                    2 + self.draw(_index(3)))), ty=_AR)
            else:
                a, _ = self.array_term(ctx, R, depth)
            app = App(Var(g, ty=fn.ty), Var(x, ty=R), ty=R)
            return Let(g, fn, Prim("SUM", MapA(x, app, a, ty=_AR), ty=R), ty=R)
        if kind == "call":
            h = self.pick(self.helpers)
            call = Call(h.name, tuple(self.term(ctx, p.ty, depth) for p in h.params), ty=h.result)
            if h.result == R:
                return call
            return Fst(call, ty=R) if isinstance(h.result, Prod) else call
        raise ValueError(kind)

    # loops ---------------------------------------------------------------------------
    def k_iter(self, ctx, ty, depth, vis):
        """iter k (\\s -> body) x: k a literal 0..6, the body mentions s (if the
        drawn body does not, it becomes `s op body` on R, or `if a < b then s
        else body`: a loop that may leave its state alone, as an early exit)."""
        k = self.draw(_ITER_COUNTS)
        s = self.fresh("s")
        init = self.term(ctx, ty, depth + 1)
        inner = ctx + [Binding(s, ty)]
        body = self.in_loop(k, lambda: self.term(inner, ty, depth + 1))
        if s not in free_vars(body):
            if isinstance(ty, Real):
                op = self.pick(["ADD", "MUL"])
                body = Prim(op, Pair(Var(s, ty=R), body, ty=Prod(R, R)), ty=R)
            else:
                cond = self.k_cmp(inner, BOOL, depth + 1, self.visible(inner))
                u, v = self.fresh("u"), self.fresh("u")
                body = Case(cond, u, Var(s, ty=ty), v, body, ty=ty)
        return Iter(Prim("ILIT", Unit(ty=UNIT), k, ty=Z), s, body, init, ty=ty)

    def k_scan(self, ctx, ty, depth, vis):
        return self.scan_term(ctx, ty.elem, depth)[0]

    def scan_term(self, ctx, elem: Type, depth: int) -> tuple[Term, int]:
        """scan (\\p -> body) x arr, p = (state, element) and the result of
        length n = the length of arr; the body mentions p (if the drawn body does
        not, it becomes `fst p op body` on R, or `if a < b then fst p else body`)."""
        src_elem = self.pick(([R, elem]))
        arr, n = self.array_term(ctx, src_elem, depth + 1)
        init = self.term(ctx, elem, depth + 1)
        p = self.fresh("p")
        pty = Prod(elem, src_elem)
        inner = ctx + [Binding(p, pty)]
        body = self.in_loop(n, lambda: self.term(inner, elem, depth + 1))
        if p not in free_vars(body):
            state = Fst(Var(p, ty=pty), ty=elem)
            if isinstance(elem, Real):
                op = self.pick(["ADD", "MUL"])
                body = Prim(op, Pair(state, body, ty=Prod(R, R)), ty=R)
            else:
                cond = self.k_cmp(inner, BOOL, depth + 1, self.visible(inner))
                u, v = self.fresh("u"), self.fresh("u")
                body = Case(cond, u, state, v, body, ty=elem)
        return Scan(p, body, init, arr, ty=ArrayT(elem)), n

    # functions ---------------------------------------------------------------------
    def _lambda(self, ctx, arg: Type, res: Type, depth: int) -> Lam:
        x = self.fresh("y")
        body = self.term(ctx + [Binding(x, arg)], res, depth + 1)
        return Lam(x, arg, body, None, ty=Fun(arg, res))

    def k_app(self, ctx, ty, depth, vis):
        """(\\y -> e) a"""
        arg = self.draw(types(1))
        fn = self._lambda(ctx, arg, ty, depth)
        return App(fn, self.term(ctx, arg, depth + 1), ty=ty)

    def k_letfun(self, ctx, ty, depth, vis):
        """let f = \\y -> e in b   (b applies f, possibly more than once)"""
        arg = self.draw(types(1))
        fn = self._lambda(ctx, arg, ty, depth)
        f = self.fresh("f")
        body = self.term(ctx + [Binding(f, fn.ty)], ty, depth + 1)
        return Let(f, fn, body, ty=ty)

    def k_appvar(self, ctx, ty, depth, vis):
        b = self.pick(([b for b in vis
                                       if isinstance(b.ty, Fun) and b.ty.res == ty]))
        return App(Var(b.name, ty=b.ty), self.term(ctx, b.ty.arg, depth + 1), ty=ty)

    def k_call(self, ctx, ty, depth, vis):
        h = self.pick(([h for h in self.helpers if h.result == ty]))
        args = tuple(self.term(ctx, p.ty, depth + 1) for p in h.params)
        return Call(h.name, args, ty=ty)


@st.composite
def programs(draw, max_depth: int = 4, max_params: int = 3, result: Type | None = None,
             param_types: st.SearchStrategy | None = None, *, type_depth: int = 2,
             max_size: int | None = None, arrays: bool = False, functions: bool = False,
             loops: bool = False,
             wide: bool = False, finite: bool = False, rich: bool = False) -> GenCase:
    """A program whose last def `f(x1 : T1, ...) : T = body` is the one to
    differentiate, with arguments and a sparse cotangent for its result (the body
    is evaluated to pick the sum sides and array lengths of the cotangent).

    max_depth   bound on the depth of the body
    max_params  1..max_params parameters
    type_depth  depth of the parameter types (`wide=True`: biased to big products)
    max_size    bound on the number of term nodes (None: only the depth bounds it)
    arrays, functions, loops   switch on the array / function / iter forms (see the
                module doc)
    finite      reject cases whose value is not finite (inf/nan)
    rich        reach what random terms rarely do (`chad check`'s programs): the
                helper def is there 3 times in 4 and then called; each kind of
                snippet is let-bound before the body 2 times in 3, each reaching one
                feature (a variable read 10 to 24 times, floor/length/integer
                arithmetic, a condition with && || not choosing between max/min and
                a power, a fold with any body,
                nested or chained maps, a closure mapped over an array); arrays
                (built or passed) have tens to a hundred elements a quarter of the
                time, within ELEMENT_BUDGET evaluations of a loop body
    """
    if param_types is None:
        param_types = (wide_types(type_depth, arrays) if wide else types(type_depth, arrays))
    # a list, so that hypothesis shrinks by deleting parameters
    ptys = draw(st.lists(param_types, min_size=1, max_size=max_params))
    params = tuple(Param(f"x{i + 1}", t) for i, t in enumerate(ptys))
    ty = result if result is not None else draw(types(1, arrays))
    args = tuple(draw(values_of(t, _LARGE_LENGTHS if rich else (1, 4))) for t in ptys)
    ctx = [Binding(p.name, p.ty, length=_length_of(a, p.ty)) for p, a in zip(params, args)]

    helpers = []
    if functions and (draw(_HELPER_RICH) if rich else draw(st.booleans())):
        helpers.append(draw(_helper_defs(max(1, max_depth - 2), arrays)))
    gen = _TypedTermGen(draw, max_depth, max_size=max_size, arrays=arrays,
                        functions=functions, helpers=helpers, rich=rich, loops=loops)
    lets = []
    if rich:  # the helper is called first; then each other kind of snippet, 2 times in 3
        kinds = gen.snippet_kinds()
        chosen = [k for k in kinds if k == "call" or draw(_LIKELY)]
        for kind in chosen:
            name = gen.fresh("t")
            lets.append((name, gen.snippet(ctx, kind)))
            ctx = ctx + [Binding(name, R)]
    if isinstance(ty, ArrayT):
        body, _ = gen.array_term(ctx, ty.elem, 0)
    else:
        body = gen.term(ctx, ty, 0)
    for name, rhs in reversed(lets):
        body = Let(name, rhs, body, ty=ty)
    defn = Def("f", params, ty, body)
    case = GenCase(defn, args, None, helpers=tuple(helpers))
    if functions:
        checked = _fill_captures(case.program).defs
        defn, helpers = checked[-1], list(checked[:-1])
    value = evaluate_case(defn, args, helpers)
    if finite and not is_finite(value):
        from hypothesis import reject

        reject()
    ctg = draw(sparse_ctgs(ty, value))
    return GenCase(defn, args, ctg, value, helpers=tuple(helpers))


@st.composite
def _helper_defs(draw, max_depth: int, arrays: bool):
    """A helper def `g(y1 : T1) : T = e` (first-order body)."""
    ptys = [draw(types(1)) for _ in range(draw(st.integers(1, 2)))]
    params = tuple(Param(f"y{i + 1}", t) for i, t in enumerate(ptys))
    res = draw(st.sampled_from([R, R, Prod(R, R)]))
    gen = _TypedTermGen(draw, max_depth, arrays=False, functions=False)
    body = gen.term([Binding(p.name, p.ty) for p in params], res, 0)
    return Def("g", params, res, body)


def _length_of(value, ty: Type) -> int | None:
    return len(value) if isinstance(ty, ArrayT) else None


def evaluate_case(defn: Def, args, helpers=()):
    """The value of `defn` on `args` (helpers are the defs it may call)."""
    value, _ = run_primal(Program(tuple(helpers) + (defn,)), args)
    return value


def _fill_captures(program: Program) -> Program:
    """Run the type checker over a generated program (with injections ascribed):
    it fills in every lambda's capture list."""
    return check_program(annotate_injections(program))


# ----------------------------------------------------------------- printing
def annotate_injections(program: Program) -> Program:
    """The program with every injection ascribed, `(inl e : A + B)`, so that its
    printed form type checks: the checker infers an injection's other side only
    where the program determines it (docs/type-checker.md), and a generated
    injection's other side is often free."""

    def go(t: Term) -> Term:
        t2 = map_children(t, go)
        if isinstance(t, (Inl, Inr)) and t.ty is not None:
            return Ann(t2, t.ty, ty=t.ty)
        return t2

    return Program(tuple(Def(d.name, d.params, d.result, go(d.body)) for d in program.defs))


_BIN = {"ADD": "+", "MUL": "*", "IADD": "+", "IMUL": "*", "DIV": "/", "LT": "<",
        "LE": "<=", "GT": ">", "GE": ">=", "EQ": "==", "ILT": "<", "ILE": "<=",
        "IGT": ">", "IGE": ">=", "IEQ": "==", "NE": "!=", "INE": "!=", "POW": "**",
        "POWI": "**", "AND": "&&", "OR": "||"}
_UN = {"SIN": "sin", "COS": "cos", "TANH": "tanh", "EXP": "exp", "LOG": "log",
       "SQRT": "sqrt", "SIGN": "sign", "TOREAL": "toreal", "SUM": "sum", "FLOOR": "floor",
       "ISUM": "sum", "ABS": "abs", "IABS": "abs", "ATAN": "atan", "LOG1P": "log1p",
       "NOT": "not"}
_CALL = {"MAX": "max", "MIN": "min", "IDIV": "div", "IMOD": "mod"}


def print_surface(program: Program) -> str:
    """A plain printer of generated programs in the surface syntax of
    docs/language.md (fully parenthesised, injections ascribed). Nothing in the
    project prints with it (GenCase.source uses chad.printer); its one user is
    tests/test_check_generators.py, which checks that it parses back."""
    out = []
    for d in program.defs:
        params = ", ".join(f"{p.name} : {p.ty}" for p in d.params)
        out.append(f"def {d.name}({params}) : {d.result} =\n  {_expr(d.body, 1)}")
    return "\n\n".join(out) + "\n"


def _expr(t: Term, ind: int) -> str:
    nl = "\n" + "  " * ind
    match t:
        case Var(name):
            return name
        case Let(name, rhs, body):  # (in parentheses: its body would take what follows)
            return f"(let {name} = {_expr(rhs, ind + 1)} in{nl}{_expr(body, ind)})"
        case Prim("LIT", _, c):
            return repr(float(c))
        case Prim("ILIT", _, c):
            return str(int(c))
        case Prim(op, Pair(a, b), _) if op in _BIN:
            return f"({_expr(a, ind)} {_BIN[op]} {_expr(b, ind)})"
        case Prim(op, Pair(a, b), _) if op in _CALL:
            return f"{_CALL[op]}({_expr(a, ind)}, {_expr(b, ind)})"
        case Prim("NEG" | "INEG", a):
            return f"(-{_expr(a, ind)})"
        case Prim(op, a) if op in _UN:
            return f"({_UN[op]} {_expr(a, ind)})"
        case Unit():
            return "()"
        case Pair(a, b):
            return f"({_expr(a, ind)}, {_expr(b, ind)})"
        case Fst(e):
            return f"(fst {_expr(e, ind)})"
        case Snd(e):
            return f"(snd {_expr(e, ind)})"
        case Inl(e):
            return f"(inl {_expr(e, ind)} : {t.ty})"
        case Inr(e):
            return f"(inr {_expr(e, ind)} : {t.ty})"
        case Ann(e, ty):
            return _expr(e, ind) if isinstance(e, (Inl, Inr)) else f"({_expr(e, ind)} : {ty})"
        case Case(s, x, l, y, r):
            return (f"case {_expr(s, ind + 1)} of{nl}{{ inl {x} -> {_expr(l, ind + 1)}"
                    f"{nl}| inr {y} -> {_expr(r, ind + 1)} }}")
        case Lam(x, pty, body):
            head = f"\\({x} : {pty})" if pty is not None else f"\\{x}"
            return f"({head} -> {_expr(body, ind + 1)})"
        case App(f, a):
            return f"({_expr(f, ind)} {_expr(a, ind)})"
        case Call(name, args):
            return f"{name}({', '.join(_expr(a, ind) for a in args)})"
        case Build(n, i, body):
            return f"(build {_expr(n, ind)} (\\{i} -> {_expr(body, ind + 1)}))"
        case Index(a, i):
            return f"({_expr(a, ind)} ! {_expr(i, ind)})"
        case Fold(p, body, a):
            return f"(fold (\\{p} -> {_expr(body, ind + 1)}) {_expr(a, ind)})"
        case Length(e):
            return f"(length {_expr(e, ind)})"
        case MapA(x, body, a):
            return f"(map (\\{x} -> {_expr(body, ind + 1)}) {_expr(a, ind)})"
        case ArrayLit(elems):
            return "[" + ", ".join(_expr(e, ind) for e in elems) + "]"
        case Iter(n, s, body, x):
            return (f"(iter ({_expr(n, ind)}) (\\{s} -> {_expr(body, ind + 1)}) "
                    f"({_expr(x, ind + 1)}))")
        case Scan(p, body, x, a):
            return (f"(scan (\\{p} -> {_expr(body, ind + 1)}) ({_expr(x, ind + 1)}) "
                    f"({_expr(a, ind + 1)}))")
    raise TypeError(f"cannot print {type(t).__name__}")


def is_finite(v) -> bool:
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, (tuple, list)):
        return all(is_finite(x) for x in v)
    if isinstance(v, Inj):
        return is_finite(v.value)
    if isinstance(v, np.ndarray):
        return bool(np.all(np.isfinite(v))) if v.dtype.kind == "f" else True
    return True


# ----------------------------------------------------------------- chains
# A chain program applies one construct after another, each to the result of the
# previous one: `map (\z -> z) (map (\z -> z) (... a))`, `-(-(... x))`,
# `(\y -> y) ((\y -> y) (... x))`. Random programs mix cheap and expensive
# constructs; chains isolate the cost of one construct per layer, so the constant
# c a chain needs tends to (gradient steps per layer) / (primal steps per layer):
# the per-construct constants that decide whether 34 is enough.

_AR = ArrayT(R)


def _lit(c: float) -> Term:
    return Prim("LIT", Unit(ty=UNIT), c, ty=R)


def _ilit(k: int) -> Term:
    return Prim("ILIT", Unit(ty=UNIT), k, ty=Z)


def _pair(a, b) -> Term:
    return Pair(a, b, ty=Prod(a.ty, b.ty))


def _case_inl(e, n, fresh):
    """case (inl e : R + R) of { inl v -> v | inr w -> w }"""
    v, w = fresh("v"), fresh("w")
    return Case(Inl(e, ty=Sum(R, R)), v, Var(v, ty=R), w, Var(w, ty=R), ty=R)


def _layers(arrays: bool, functions: bool):
    """name -> (input type, output type, wrap(inner, x, n, fresh) -> term)."""
    x = Var("x", ty=R)
    L: dict = {
        "neg": (R, R, lambda e, n, f: Prim("NEG", e, ty=R)),
        "add_x": (R, R, lambda e, n, f: Prim("ADD", _pair(e, x), ty=R)),
        "mul_x": (R, R, lambda e, n, f: Prim("MUL", _pair(e, x), ty=R)),
        "sin": (R, R, lambda e, n, f: Prim("SIN", e, ty=R)),
        "let": (R, R, lambda e, n, f: (lambda v: Let(v, e, Var(v, ty=R), ty=R))(f("v"))),
        "fst_pair": (R, R, lambda e, n, f: Fst(_pair(e, x), ty=R)),
        "let_pair": (R, R, lambda e, n, f: (lambda v: Let(v, _pair(e, x), Fst(
            Var(v, ty=Prod(R, R)), ty=R), ty=R))(f("v"))),
        "case_inl": (R, R, _case_inl),
        "if": (R, R, lambda e, n, f: Case(Prim("LT", _pair(x, _lit(10.0)), ty=BOOL), f("u"), e,
                                          f("u"), x, ty=R)),
    }
    if functions:
        L["app_id"] = (R, R, lambda e, n, f: (lambda y: App(
            Lam(y, R, Var(y, ty=R), None, ty=Fun(R, R)), e, ty=R))(f("y")))
        L["app_body"] = (R, R, lambda e, n, f: (lambda y: App(
            Lam(y, R, e, None, ty=Fun(R, R)), Var("x", ty=R), ty=R))(f("y")))
        L["let_fun"] = (R, R, lambda e, n, f: (lambda g, y: Let(
            g, Lam(y, R, Var(y, ty=R), None, ty=Fun(R, R)),
            App(Var(g, ty=Fun(R, R)), e, ty=R), ty=R))(f("g"), f("y")))
    if arrays:
        L["map_id"] = (_AR, _AR, lambda e, n, f: (lambda z: MapA(z, Var(z, ty=R), e, ty=_AR))(
            f("z")))
        L["map_sin"] = (_AR, _AR, lambda e, n, f: (lambda z: MapA(
            z, Prim("SIN", Var(z, ty=R), ty=R), e, ty=_AR))(f("z")))
        L["map_x"] = (_AR, _AR, lambda e, n, f: (lambda z: MapA(
            z, Prim("MUL", _pair(Var(z, ty=R), x), ty=R), e, ty=_AR))(f("z")))
        L["build_index"] = (_AR, _AR, lambda e, n, f: (lambda i: Build(
            _ilit(n), i, Index(e, Var(i, ty=Z), ty=R), ty=_AR))(f("i")))
        L["build_const"] = (R, _AR, lambda e, n, f: Build(_ilit(n), f("i"), e, ty=_AR))
        L["sum"] = (_AR, R, lambda e, n, f: Prim("SUM", e, ty=R))
        L["index0"] = (_AR, R, lambda e, n, f: Index(e, _ilit(0), ty=R))
    return L


@st.composite
def chains(draw, max_layers: int = 16, *, arrays: bool = False, functions: bool = False,
           layers: tuple[str, ...] | None = None) -> GenCase:
    """Chain programs: `f(x : R[, a : Array R]) = L_k (... (L_1 base))`, each L_i a
    construct applied to the previous result (see _layers for the catalogue; with
    `layers` given, only those). The array `a` has 1..3 elements (a quarter of the
    time 10 or 30); `build` layers use
    its length, so every index is in range. Shrinks to fewer, simpler layers."""
    table = _layers(arrays, functions)
    if layers is not None:
        table = {k: v for k, v in table.items() if k in layers}
    n = draw(_CHAIN_SIZES) if arrays else 0
    params = [Param("x", R)] + ([Param("a", _AR)] if arrays else [])
    args = [1.0 if not draw(_BOOLS) else 0.5] + ([tuple([1.0] * n)] if arrays else [])
    counter = [0]

    def fresh(base):
        counter[0] += 1
        return f"{base}{counter[0]}"

    cur = Var("x", ty=R)
    if arrays and draw(_BOOLS):
        cur = Var("a", ty=_AR)
    k = 1 + draw(st.integers(0, max_layers - 1))
    work = 1  # about how many element evaluations one evaluation of `cur` makes
    for _ in range(k):
        options = [name for name, (ti, _to, _w) in table.items() if ti == cur.ty
                   and not (name.startswith("build") and n * work > CHAIN_BUDGET)]
        if not options:
            break
        name = options[draw(_index(len(options)))] if len(options) > 1 else options[0]
        _ti, to, wrap = table[name]
        cur = wrap(cur, n, fresh)
        # a build re-evaluates its body (the chain so far) per element
        work = n * work + n if name.startswith("build") else work + n
    defn = Def("f", tuple(params), cur.ty, cur)
    if functions:
        defn = _fill_captures(Program((defn,))).defs[-1]
    value = evaluate_case(defn, tuple(args))
    ctg = draw(sparse_ctgs(cur.ty, value))
    return GenCase(defn, tuple(args), ctg, value)


def language_programs(max_depth: int = 4, max_params: int = 3, **kw) -> st.SearchStrategy:
    """`programs(...)` over the whole language: arrays, functions and loops included."""
    kw.setdefault("arrays", True)
    kw.setdefault("functions", True)
    kw.setdefault("loops", True)
    return programs(max_depth=max_depth, max_params=max_params, **kw)


__all__ = ["GenCase", "Binding", "programs", "language_programs", "chains", "types",
           "wide_types", "values_of", "sparse_ctgs", "is_finite", "ctg_to_json",
           "annotate_injections", "print_surface", "evaluate_case",
           "type_size"]
