"""The primitive-operation table: one entry per primitive (JAX-style registry).

Each entry holds everything about one primitive:
  - its type (argument and result; a primitive takes ONE argument, several
    arguments come as a pair),
  - its evaluation (a Python function on values),
  - its transposed derivative, `dprim'` of the formalisation (Efficient CHAD (Smeding & Vákár), app. B):
    a function building the target term that maps the primal argument `p` and
    the output cotangent `d` (both variables) to the argument's cotangent,
  - its cost: every primitive costs 1 + the cost of its argument, as `prim` in
    the formalisation's `eval`; an entry may add `extra_cost(arg)` for work that
    is not constant (none of the scalar primitives do),
  - its lowering by the compiler: `inline`, a Python expression template with
    the same result as `evaluate` (`_math` is the math module there), or None
    for a call of `evaluate`.
The surface spelling lives in the parser/printer; the checker resolves overloaded
surface operators (`+` on R is ADD, on Z is IADD) with `int_variant`.

Adding `tanh` touches exactly one entry below.
"""

from __future__ import annotations

import math
from typing import Callable

from attrs import frozen

from .errors import EvalError
from .terms import Fst, LPair, LPairZero, LUnit, Pair, Prim, Snd, Term, Unit
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
    # with exactly `evaluate`'s result; None: the compiled code calls `evaluate`
    inline: str | None = None


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


# ----------------------------------------------------------------- evaluation helpers
def _domain(op: str, x, why: str):
    raise EvalError(f"{op} of {x!r}: {why}")


def _log(x: float) -> float:
    if x < 0 or math.isnan(x):
        _domain("log", x, "the argument must not be negative")
    return math.log(x) if x > 0 else -math.inf


def _sqrt(x: float) -> float:
    if x < 0 or math.isnan(x):
        _domain("sqrt", x, "the argument must not be negative")
    return math.sqrt(x)


def _div(xy) -> float:
    x, y = xy
    if y == 0.0:
        raise EvalError(f"division by zero: {x!r} / {y!r}")
    return x / y


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _floor(x: float) -> int:
    if not math.isfinite(x):
        _domain("floor", x, "the argument must be a finite real")
    return math.floor(x)


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
                   inline="({0} + {1})"))
register(Primitive("MUL", RR, R, lambda a: a[0] * a[1],
                   lambda p, d: LPair(scale(d, Snd(p)), scale(d, Fst(p))),
                   int_variant="IMUL", doc="x * y on R", inline="({0} * {1})"))
register(Primitive("NEG", R, R, lambda a: -a,
                   lambda p, d: Prim("LNEG", d), int_variant="INEG", doc="-x on R",
                   inline="(-{0})"))
register(Primitive("LIT", UNIT, R, None, lambda p, d: LUnit(), doc="a real literal"))
register(Primitive("IADD", ZZ, Z, lambda a: a[0] + a[1],
                   lambda p, d: LPair(LUnit(), LUnit()), doc="x + y on Z",
                   inline="({0} + {1})"))
register(Primitive("IMUL", ZZ, Z, lambda a: a[0] * a[1],
                   lambda p, d: LPair(LUnit(), LUnit()), doc="x * y on Z",
                   inline="({0} * {1})"))
register(Primitive("INEG", Z, Z, lambda a: -a, lambda p, d: LUnit(), doc="-x on Z",
                   inline="(-{0})"))
register(Primitive("SIGN", R, SIGN_T, _sign, lambda p, d: lzero_real(),
                   doc="inl inl: negative, inl inr: positive, inr: zero or NaN"))

# ----------------------------------------------------------------- further primitives
register(Primitive("ILIT", UNIT, Z, None, lambda p, d: LUnit(), doc="an integer literal"))
register(Primitive("DIV", RR, R, _div,
                   lambda p, d: LPair(scale(d, prim("DIV", lit(1.0), Snd(p))),
                                      scale(d, prim("NEG", prim("DIV", Fst(p), prim(
                                          "MUL", Snd(p), Snd(p)))))),
                   doc="x / y on R"))
register(Primitive("EXP", R, R, _exp, lambda p, d: scale(d, prim("EXP", p))))
register(Primitive("LOG", R, R, _log, lambda p, d: scale(d, prim("DIV", lit(1.0), p))))
register(Primitive("SIN", R, R, math.sin, lambda p, d: scale(d, prim("COS", p)),
                   inline="_sin({0})"))
register(Primitive("COS", R, R, math.cos, lambda p, d: scale(d, prim("NEG", prim("SIN", p))),
                   inline="_cos({0})"))
register(Primitive("TANH", R, R, math.tanh,
                   lambda p, d: scale(d, prim("ADD", lit(1.0), prim("NEG", prim(
                       "MUL", prim("TANH", p), prim("TANH", p)))))))
register(Primitive("SQRT", R, R, _sqrt,
                   lambda p, d: scale(d, prim("DIV", lit(0.5), prim("SQRT", p)))))
register(Primitive("TOREAL", Z, R, float, lambda p, d: LUnit(), doc="Z to R"))
register(Primitive("FLOOR", R, Z, _floor, lambda p, d: lzero_real(),
                   doc="the largest integer <= x (R to Z); its derivative is zero"))

for _name, _fn in [("LT", lambda a: a[0] < a[1]), ("LE", lambda a: a[0] <= a[1]),
                   ("GT", lambda a: a[0] > a[1]), ("GE", lambda a: a[0] >= a[1]),
                   ("EQ", lambda a: a[0] == a[1]), ("NE", lambda a: a[0] != a[1])]:
    register(Primitive("I" + _name, ZZ, BOOL, (lambda f: lambda a: _bool(f(a)))(_fn),
                       lambda p, d: LPairZero(), doc="comparison on Z"))
    register(Primitive(_name, RR, BOOL, (lambda f: lambda a: _bool(f(a)))(_fn),
                       lambda p, d: LPairZero(), int_variant="I" + _name,
                       doc="comparison on R"))

# ----------------------------------------------------------------- target-only linear primitives
# Their argument/result types are linear (Lin LR etc.); `arg`/`res` give the
# underlying representation type for documentation only.
register(Primitive("LZERO", UNIT, R, lambda a: 0.0, None, doc="the zero of Lin R",
                   inline="0.0"))
register(Primitive("LADD", RR, R, lambda a: a[0] + a[1], None, doc="addition on Lin R",
                   inline="({0} + {1})"))
register(Primitive("LSCALE", RR, R, lambda a: a[0] * a[1], None,
                   doc="a linear real times a primal real", inline="({0} * {1})"))
register(Primitive("LNEG", R, R, lambda a: -a, None, doc="negation on Lin R",
                   inline="(-{0})"))


def evaluate_prim(node: Prim, arg):
    """Evaluate `prim op arg` on an already evaluated argument."""
    if node.op == "LIT":
        return node.const
    if node.op == "ILIT":
        return node.const
    return PRIMITIVES[node.op].evaluate(arg)
