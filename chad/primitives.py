"""The primitive-operation table: one entry per primitive (JAX-style registry).

Each entry holds everything about one primitive:
  - its type (argument and result; a primitive takes ONE argument, several
    arguments come as a pair),
  - its evaluation (a Python function on values),
  - its transposed derivative, `dprim'` of the formalisation (Efficient CHAD (Smeding & Vákár), app. B):
    a function building the target term that maps the primal argument `p` and
    the output cotangent `d` (both variables) to the argument's cotangent,
  - its tangent, `Dop` of CHAD (Vákár & Smeding), §7.3, for forward mode: a
    function building the target term of the result's tangent from the primal
    argument `p` and its tangent `dp` (chad/transform/forward.py),
  - its cost: every primitive costs 1 + the cost of its argument, as `prim` in
    the formalisation's `eval`; an entry may add `extra_cost(arg)` for work that
    is not constant (none of the scalar primitives do),
  - its lowering by the compiler: `inline`, a Python expression template with
    the same result as `evaluate` (`_math` is the math module there), or None
    for a call of `evaluate`; and `batched`, the numpy template applied to
    whole arrays when a build or map is vectorised (`_np` is numpy there).
The surface spelling lives in the parser/printer; the checker resolves overloaded
surface operators (`+` on R is ADD, on Z is IADD) with `int_variant`, and `**`
with a Z exponent (POW to POWI) with `int_right_variant`.

Derivatives at kinks follow one convention, the same in every backend and
runtime (they are target terms, so every backend runs the same term): `abs` has
derivative 0 at 0; `max(a, b)` returns `a` unless `b > a` and its gradient goes
to the argument returned (at a tie, the first); `min(a, b)` likewise with
`b < a`. `x ** y` has x-derivative `y * x ** (y - 1)` (0 where y is 0) and
y-derivative `log x * x ** y` where x > 0, 0 elsewhere (docs/language.md).

Evaluation follows IEEE 754 on R, as numpy does (docs/language.md,
"Evaluation"): a division by zero, `log`, `sqrt`, `log1p`, `**` outside their
domain, `sin`/`cos` of an infinity, an overflow give an infinity or NaN, never
an error, so the derivatives (terms of these same primitives) do too: `sqrt` at
0 has derivative `0.5 / 0.0 = inf`. Only primitives with a Z result raise an
EvalError (FLOOR of an infinity or NaN, IDIV and IMOD by zero): Z has no
infinity. An `inline` template gives exactly `evaluate`'s result on every float,
infinities and NaN included (Python's `/` raises ZeroDivisionError: DIV has no
template).

Adding `tanh` touches exactly one entry below.
"""

from __future__ import annotations

import math
from typing import Callable

from attrs import frozen

from .errors import EvalError
from .terms import Case, Fst, LPair, LPairZero, LSumZero, LUnit, Pair, Prim, Snd, Term, Unit
from .types import BOOL, UNIT, Prod, R, Sum, Type, Z
from .values import FALSE, TRUE, Inj


@frozen
class Primitive:
    name: str
    arg: Type
    res: Type
    evaluate: Callable
    # (p, d) -> target term of the argument's cotangent. None: target-only op.
    derivative: Callable[[Term, Term], Term] | None
    int_variant: str | None = None  # the Z version of an overloaded R operator
    doc: str = ""
    # arg value -> steps beyond the constant 1, for primitives that are not
    # constant-time (e.g. SUM: the array's length). None: constant.
    extra_cost: Callable | None = None
    # its lowering by the compiler (chad/compile/): a Python expression template
    # over the argument's components ({0}, or {0} and {1} for a pair argument)
    # with exactly `evaluate`'s result (inf and NaN included: it must not raise
    # where `evaluate` does not); None: the compiled code calls `evaluate`
    inline: str | None = None
    # the version whose SECOND operand is Z (`x ** n`: POW -> POWI); the first
    # operand keeps its type
    int_right_variant: str | None = None
    # its tangent (forward mode, chad/transform/forward.py; CHAD (Vákár &
    # Smeding), §7.3 `Dop`): (p, dp) -> target term of the result's tangent
    # from the primal argument p and its tangent dp (both variables; a pair
    # argument has a pair tangent). The tangent of a discrete result (Z, Bool,
    # (), sign) is (); None: a target-only operation with no forward rule.
    tangent: Callable[[Term, Term], Term] | None = None
    # its batched lowering (chad/compile/vectorise.py): a numpy expression
    # template over the same components, applied elementwise to arrays (and
    # scalars, broadcast) under numpy's errstate "ignore", with `evaluate`'s
    # result on every element (IEEE: inf and NaN as `evaluate`); None: a body
    # using it is not vectorised
    batched: str | None = None


PRIMITIVES: dict[str, Primitive] = {}


def register(p: Primitive) -> Primitive:
    """Add a primitive; a different primitive of the same name is an error."""
    old = PRIMITIVES.get(p.name)
    if old is not None and old != p:
        raise ValueError(f"a primitive named {p.name} is already registered")
    PRIMITIVES[p.name] = p
    return p


# ----------------------------------------------------------------- helpers for derivatives
def lit(c: float) -> Term:
    return Prim("LIT", Unit(), float(c))


def prim(op: str, *args: Term) -> Term:
    arg = args[0] if len(args) == 1 else Pair(args[0], args[1])
    return Prim(op, arg)


def scale(d: Term, factor: Term) -> Term:
    """LSCALE (d, factor): a linear cotangent times a primal real."""
    return Prim("LSCALE", Pair(d, factor))


def lzero_real() -> Term:
    return Prim("LZERO", LUnit())


def ilit(n: int) -> Term:
    return Prim("ILIT", Unit(), int(n))


# Tangents (forward mode) are linear reals: LADD, LSCALE, LNEG, LZERO, as the
# cotangents of the transposed derivatives are.
def tadd(a: Term, b: Term) -> Term:
    """LADD (a, b): the sum of two tangents."""
    return Prim("LADD", Pair(a, b))


def no_tangent(p: Term, dp: Term) -> Term:
    """The tangent of a discrete result: ()."""
    return Unit()


def zero_tangent(p: Term, dp: Term) -> Term:
    """The tangent of a real result that does not depend on the argument: 0."""
    return lzero_real()


def _unary(factor: Callable[[Term], Term]) -> Callable[[Term, Term], Term]:
    """The tangent of f : R -> R with derivative factor(p): dp * f'(p)."""
    return lambda p, dp: scale(dp, factor(p))


# The binder of the cases in derivatives: never used in the branches ('$' is in
# no source name, and the transforms' fresh names are stem$number).
_UNUSED = "k$prim"


def branch(cond: Term, if_true: Term, if_false: Term) -> Term:
    """if cond then if_true else if_false, as a target term."""
    return Case(cond, _UNUSED, if_true, _UNUSED, if_false)


# ----------------------------------------------------------------- evaluation helpers
# Operations on R follow IEEE 754 (as numpy does, without its warnings): outside
# its domain a real primitive gives an infinity or NaN and never raises. Only
# the primitives whose result is an integer (FLOOR, IDIV, IMOD) raise an
# EvalError: Z has no infinity.
def _domain(op: str, x, why: str):
    raise EvalError(f"{op} of {x!r}: {why}")


def _log(x: float) -> float:
    """log x: -inf at 0 (and -0.0), NaN below 0 and at NaN, inf at inf."""
    if x > 0.0:
        return math.log(x)
    return -math.inf if x == 0.0 else math.nan


def _sqrt(x: float) -> float:
    """sqrt x: NaN below 0 (sqrt (-0.0) is -0.0, as in IEEE)."""
    return math.sqrt(x) if x >= 0.0 else math.nan


def _div(xy) -> float:
    """x / y: a nonzero x over a zero y is an infinity signed by both signs
    (x / -0.0 flips it); 0 / 0 and NaN / 0 are NaN."""
    x, y = xy
    if y == 0.0:
        if x == 0.0 or x != x:
            return math.nan
        return math.copysign(math.inf, math.copysign(1.0, x) * math.copysign(1.0, y))
    return x / y


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _sin(x: float) -> float:
    """sin x; NaN at an infinity (math.sin raises there)."""
    try:
        return math.sin(x)
    except ValueError:
        return math.nan


def _cos(x: float) -> float:
    """cos x; NaN at an infinity (math.cos raises there)."""
    try:
        return math.cos(x)
    except ValueError:
        return math.nan


def _toreal(n: int) -> float:
    """An integer as a float; an integer beyond the float range is an infinity."""
    try:
        return float(n)
    except OverflowError:
        return math.inf if n > 0 else -math.inf


def _floor(x: float) -> int:
    if not math.isfinite(x):
        _domain("floor", x, "the argument must be a finite real")
    return math.floor(x)


def _log1p(x: float) -> float:
    """log (1 + x): -inf at -1, NaN below -1 and at NaN."""
    if x > -1.0:
        return math.log1p(x)
    return -math.inf if x == -1.0 else math.nan


def _odd(y: float) -> bool:
    return math.isfinite(y) and math.fmod(y, 2.0) in (1.0, -1.0)


def _pow(xy) -> float:
    """x ** y on R: math.pow, with IEEE's (and numpy's) results where math.pow
    raises: zero to a negative power is an infinity (-inf for -0.0 and an odd
    integer exponent), a negative finite base with a non-integer finite exponent
    is NaN, an overflow is an infinity (-inf for a negative base and an odd
    exponent)."""
    x, y = xy
    if x == 0.0 and y < 0.0:
        return -math.inf if math.copysign(1.0, x) < 0.0 and _odd(y) else math.inf
    try:
        return math.pow(x, y)
    except ValueError:
        return math.nan
    except OverflowError:
        return -math.inf if x < 0.0 and _odd(y) else math.inf


def _powi(xn) -> float:
    """x ** n with n : Z: as math.pow(x, n), with the sign from the parity of n
    itself (also when n is too large for a float); zero to a negative power is
    an infinity (-inf for -0.0 and an odd n)."""
    x, n = xn
    try:
        e = float(n)
    except OverflowError:
        e = math.inf if n > 0 else -math.inf
    if x == 0.0 and n < 0:
        r = math.inf
    else:
        try:
            r = math.pow(abs(x), e)
        except OverflowError:
            r = math.inf
    return -r if n % 2 == 1 and math.copysign(1.0, x) < 0.0 else r


def _idiv(ij) -> int:
    i, j = ij
    if j == 0:
        raise EvalError(f"division by zero: div({i!r}, {j!r})")
    return i // j


def _imod(ij) -> int:
    i, j = ij
    if j == 0:
        raise EvalError(f"division by zero: mod({i!r}, {j!r})")
    return i % j


def _sign(x: float) -> Inj:
    if x < 0.0:
        return Inj(0, Inj(0, None))
    if 0.0 < x:
        return Inj(0, Inj(1, None))
    return Inj(1, None)


def _bool(b: bool) -> Inj:
    return TRUE if b else FALSE


RR = Prod(R, R)
ZZ = Prod(Z, Z)
SIGN_T = Sum(BOOL, UNIT)  # (() + ()) + ()

# ----------------------------------------------------------------- the formalisation's primitives
register(Primitive("ADD", RR, R, lambda a: a[0] + a[1],
                   lambda p, d: LPair(d, d), int_variant="IADD", doc="x + y on R",
                   inline="({0} + {1})",
                   tangent=lambda p, dp: tadd(Fst(dp), Snd(dp)),
                   batched="({0} + {1})"))
register(Primitive("MUL", RR, R, lambda a: a[0] * a[1],
                   lambda p, d: LPair(scale(d, Snd(p)), scale(d, Fst(p))),
                   int_variant="IMUL", doc="x * y on R", inline="({0} * {1})",
                   tangent=lambda p, dp: tadd(scale(Fst(dp), Snd(p)), scale(Snd(dp), Fst(p))),
                   batched="({0} * {1})"))
register(Primitive("NEG", R, R, lambda a: -a,
                   lambda p, d: Prim("LNEG", d), int_variant="INEG", doc="-x on R",
                   inline="(-{0})", tangent=lambda p, dp: Prim("LNEG", dp),
                   batched="(-{0})"))
register(Primitive("LIT", UNIT, R, None, lambda p, d: LUnit(), doc="a real literal",
                   tangent=zero_tangent))
register(Primitive("IADD", ZZ, Z, lambda a: a[0] + a[1],
                   lambda p, d: LPair(LUnit(), LUnit()), doc="x + y on Z",
                   inline="({0} + {1})", tangent=no_tangent))
register(Primitive("IMUL", ZZ, Z, lambda a: a[0] * a[1],
                   lambda p, d: LPair(LUnit(), LUnit()), doc="x * y on Z",
                   inline="({0} * {1})", tangent=no_tangent))
register(Primitive("INEG", Z, Z, lambda a: -a, lambda p, d: LUnit(), doc="-x on Z",
                   inline="(-{0})", tangent=no_tangent))
register(Primitive("SIGN", R, SIGN_T, _sign, lambda p, d: lzero_real(),
                   doc="inl inl: negative, inl inr: positive, inr: zero or NaN",
                   tangent=no_tangent))

# ----------------------------------------------------------------- further primitives
register(Primitive("ILIT", UNIT, Z, None, lambda p, d: LUnit(), doc="an integer literal",
                   tangent=no_tangent))
register(Primitive("DIV", RR, R, _div,
                   lambda p, d: LPair(scale(d, prim("DIV", lit(1.0), Snd(p))),
                                      scale(d, prim("NEG", prim("DIV", Fst(p), prim(
                                          "MUL", Snd(p), Snd(p)))))),
                   doc="x / y on R",
                   tangent=lambda p, dp: tadd(
                       scale(Fst(dp), prim("DIV", lit(1.0), Snd(p))),
                       scale(Snd(dp), prim("NEG", prim("DIV", Fst(p), prim(
                           "MUL", Snd(p), Snd(p)))))),
                   batched="({0} / {1})"))
register(Primitive("EXP", R, R, _exp, lambda p, d: scale(d, prim("EXP", p)),
                   tangent=_unary(lambda p: prim("EXP", p)),
                   batched="_np.exp({0})"))
register(Primitive("LOG", R, R, _log, lambda p, d: scale(d, prim("DIV", lit(1.0), p)),
                   tangent=_unary(lambda p: prim("DIV", lit(1.0), p)),
                   batched="_np.log({0})"))
register(Primitive("SIN", R, R, _sin, lambda p, d: scale(d, prim("COS", p)),
                   inline="_sin({0})", tangent=_unary(lambda p: prim("COS", p)),
                   batched="_np.sin({0})"))
register(Primitive("COS", R, R, _cos, lambda p, d: scale(d, prim("NEG", prim("SIN", p))),
                   inline="_cos({0})",
                   tangent=_unary(lambda p: prim("NEG", prim("SIN", p))),
                   batched="_np.cos({0})"))
register(Primitive("TANH", R, R, math.tanh,
                   lambda p, d: scale(d, prim("ADD", lit(1.0), prim("NEG", prim(
                       "MUL", prim("TANH", p), prim("TANH", p))))),
                   tangent=_unary(lambda p: prim("ADD", lit(1.0), prim("NEG", prim(
                       "MUL", prim("TANH", p), prim("TANH", p))))),
                   batched="_np.tanh({0})"))
register(Primitive("SQRT", R, R, _sqrt,
                   lambda p, d: scale(d, prim("DIV", lit(0.5), prim("SQRT", p))),
                   tangent=_unary(lambda p: prim("DIV", lit(0.5), prim("SQRT", p))),
                   batched="_np.sqrt({0})"))
register(Primitive("TOREAL", Z, R, _toreal, lambda p, d: LUnit(), doc="Z to R",
                   tangent=zero_tangent,
                   batched="_vtoreal({0})"))
register(Primitive("FLOOR", R, Z, _floor, lambda p, d: lzero_real(),
                   doc="the largest integer <= x (R to Z); its derivative is zero",
                   tangent=no_tangent))

register(Primitive("ABS", R, R, abs,
                   lambda p, d: branch(prim("GT", p, lit(0.0)), d,
                                       branch(prim("LT", p, lit(0.0)), Prim("LNEG", d),
                                              lzero_real())),
                   int_variant="IABS", doc="|x| on R; its derivative at 0 is 0",
                   inline="_abs({0})",
                   tangent=lambda p, dp: branch(prim("GT", p, lit(0.0)), dp,
                                                branch(prim("LT", p, lit(0.0)), Prim("LNEG", dp),
                                                       lzero_real())),
                   batched="_np.abs({0})"))
register(Primitive("IABS", Z, Z, abs, lambda p, d: LUnit(), doc="|n| on Z",
                   inline="_abs({0})", tangent=no_tangent))
register(Primitive("ATAN", R, R, math.atan,
                   lambda p, d: scale(d, prim("DIV", lit(1.0), prim(
                       "ADD", lit(1.0), prim("MUL", p, p)))),
                   doc="arctangent", inline="_math.atan({0})",
                   tangent=_unary(lambda p: prim("DIV", lit(1.0), prim(
                       "ADD", lit(1.0), prim("MUL", p, p)))),
                   batched="_np.arctan({0})"))
register(Primitive("LOG1P", R, R, _log1p,
                   lambda p, d: scale(d, prim("DIV", lit(1.0), prim("ADD", lit(1.0), p))),
                   doc="log (1 + x), exact near 0; -inf at -1",
                   tangent=_unary(lambda p: prim("DIV", lit(1.0), prim("ADD", lit(1.0), p))),
                   batched="_np.log1p({0})"))
register(Primitive("POW", RR, R, _pow,
                   lambda p, d: LPair(
                       branch(prim("EQ", Snd(p), lit(0.0)), lzero_real(),
                              scale(d, prim("MUL", Snd(p), prim(
                                  "POW", Fst(p), prim("ADD", Snd(p), lit(-1.0)))))),
                       branch(prim("GT", Fst(p), lit(0.0)),
                              scale(d, prim("MUL", prim("LOG", Fst(p)), prim("POW", p))),
                              lzero_real())),
                   int_right_variant="POWI",
                   doc="x ** y on R; the y-derivative is 0 where x > 0 does not hold",
                   tangent=lambda p, dp: tadd(
                       branch(prim("EQ", Snd(p), lit(0.0)), lzero_real(),
                              scale(Fst(dp), prim("MUL", Snd(p), prim(
                                  "POW", Fst(p), prim("ADD", Snd(p), lit(-1.0)))))),
                       branch(prim("GT", Fst(p), lit(0.0)),
                              scale(Snd(dp), prim("MUL", prim("LOG", Fst(p)), prim("POW", p))),
                              lzero_real())),
                   batched="_np.power({0}, {1})"))
register(Primitive("POWI", Prod(R, Z), R, _powi,
                   lambda p, d: LPair(
                       branch(prim("IEQ", Snd(p), ilit(0)), lzero_real(),
                              scale(d, prim("MUL", prim("TOREAL", Snd(p)), prim(
                                  "POWI", Fst(p), prim("IADD", Snd(p), ilit(-1)))))),
                       LUnit()),
                   doc="x ** n, an R to an integer power",
                   batched="_vpowi({0}, {1})",
                   tangent=lambda p, dp: branch(
                       prim("IEQ", Snd(p), ilit(0)), lzero_real(),
                       scale(Fst(dp), prim("MUL", prim("TOREAL", Snd(p)), prim(
                           "POWI", Fst(p), prim("IADD", Snd(p), ilit(-1))))))))
register(Primitive("MAX", RR, R, lambda a: a[1] if a[1] > a[0] else a[0],
                   lambda p, d: branch(prim("GT", Snd(p), Fst(p)),
                                       LPair(lzero_real(), d), LPair(d, lzero_real())),
                   doc="max(a, b): a unless b > a; the gradient goes to the one returned",
                   inline="({1} if {1} > {0} else {0})",
                   tangent=lambda p, dp: branch(prim("GT", Snd(p), Fst(p)), Snd(dp), Fst(dp)),
                   batched="_np.where({1} > {0}, {1}, {0})"))
register(Primitive("MIN", RR, R, lambda a: a[1] if a[1] < a[0] else a[0],
                   lambda p, d: branch(prim("LT", Snd(p), Fst(p)),
                                       LPair(lzero_real(), d), LPair(d, lzero_real())),
                   doc="min(a, b): a unless b < a; the gradient goes to the one returned",
                   inline="({1} if {1} < {0} else {0})",
                   tangent=lambda p, dp: branch(prim("LT", Snd(p), Fst(p)), Snd(dp), Fst(dp)),
                   batched="_np.where({1} < {0}, {1}, {0})"))
register(Primitive("IDIV", ZZ, Z, _idiv, lambda p, d: LPair(LUnit(), LUnit()),
                   doc="div(i, j): floor division on Z (Python's //)",
                   inline="({0} // {1})", tangent=no_tangent))
register(Primitive("IMOD", ZZ, Z, _imod, lambda p, d: LPair(LUnit(), LUnit()),
                   doc="mod(i, j): the remainder of floor division (Python's %)",
                   inline="({0} % {1})", tangent=no_tangent))
register(Primitive("NOT", BOOL, BOOL, lambda b: FALSE if b.side == 0 else TRUE,
                   lambda p, d: LSumZero(), doc="not on Bool",
                   inline="(_FALSE if {0}.side == 0 else _TRUE)", tangent=no_tangent))
register(Primitive("AND", Prod(BOOL, BOOL), BOOL, lambda a: a[1] if a[0].side == 0 else a[0],
                   lambda p, d: LPairZero(), doc="a && b on Bool (both evaluated)",
                   inline="({1} if {0}.side == 0 else {0})", tangent=no_tangent))
register(Primitive("OR", Prod(BOOL, BOOL), BOOL, lambda a: a[0] if a[0].side == 0 else a[1],
                   lambda p, d: LPairZero(), doc="a || b on Bool (both evaluated)",
                   inline="({0} if {0}.side == 0 else {1})", tangent=no_tangent))

for _name, _fn in [("LT", lambda a: a[0] < a[1]), ("LE", lambda a: a[0] <= a[1]),
                   ("GT", lambda a: a[0] > a[1]), ("GE", lambda a: a[0] >= a[1]),
                   ("EQ", lambda a: a[0] == a[1]), ("NE", lambda a: a[0] != a[1])]:
    register(Primitive("I" + _name, ZZ, BOOL, (lambda f: lambda a: _bool(f(a)))(_fn),
                       lambda p, d: LPairZero(), doc="comparison on Z", tangent=no_tangent))
    register(Primitive(_name, RR, BOOL, (lambda f: lambda a: _bool(f(a)))(_fn),
                       lambda p, d: LPairZero(), int_variant="I" + _name,
                       doc="comparison on R", tangent=no_tangent))

# ----------------------------------------------------------------- target-only linear primitives
# Their argument/result types are linear (Lin LR etc.); `arg`/`res` give the
# underlying representation type for documentation only. Their tangents are
# those of a forward derivative transformed again (second derivatives).
register(Primitive("LZERO", UNIT, R, lambda a: 0.0, None, doc="the zero of Lin R",
                   inline="0.0", tangent=zero_tangent))
register(Primitive("LADD", RR, R, lambda a: a[0] + a[1], None, doc="addition on Lin R",
                   inline="({0} + {1})", tangent=lambda p, dp: tadd(Fst(dp), Snd(dp)),
                   batched="({0} + {1})"))
register(Primitive("LSCALE", RR, R, lambda a: a[0] * a[1], None,
                   doc="a linear real times a primal real", inline="({0} * {1})",
                   tangent=lambda p, dp: tadd(scale(Fst(dp), Snd(p)), scale(Fst(p), Snd(dp))),
                   batched="({0} * {1})"))
register(Primitive("LNEG", R, R, lambda a: -a, None, doc="negation on Lin R",
                   inline="(-{0})", tangent=lambda p, dp: Prim("LNEG", dp),
                   batched="(-{0})"))


def evaluate_prim(node: Prim, arg):
    """Evaluate `prim op arg` on an already evaluated argument."""
    if node.op == "LIT":
        return node.const
    if node.op == "ILIT":
        return node.const
    return PRIMITIVES[node.op].evaluate(arg)
