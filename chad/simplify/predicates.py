"""What the simplifier may assume about a target term without running it.

* `may_fail(t)`: can evaluating t raise (a partial primitive: `floor` of an
  infinity, integer `div`/`mod` by zero; array indexing; a def call; an application of
  an unknown function; running an action)? Conservative: every node class not
  listed below, and every primitive not known to be total, may fail. A term that
  may fail is never dropped, nor moved to where it might not be evaluated.
* the shapes the rewrites look for: atoms (variables, literals, the sparse
  zeros), small values (a pair or injection of atoms, a projection path out of
  a variable, a lambda with a tiny body: cheap to duplicate), cheap right-hand
  sides (atoms and lambdas: inlining one inside a lambda or a loop body
  repeats no real work), the zeros of the linear types and a term for the zero
  of a given linear type, actions whose result is ().

The values and evaluation order are those of the reference evaluator (the
formalisation's `eval` of Efficient CHAD, Smeding & Vákár, appendix B, as
implemented in chad/costmodel/evaluate.py): e.g. `lfst` of a zero gives the
zero of its `zero` field, `lunit`, `lpairzero` and `lsumzero` evaluate to the
sparse zero None, `LZERO` to 0.0.
"""

from __future__ import annotations

from chad.linear import LPairT, LR, LSumT, LUn
from chad.terms import (
    AddEVM, Ann, BindEVM, Case, Fst, Inl, Inr, Lam, LCastL, LCastR, Length, Let, LFst,
    LInl, LInr, LPair, LPairZero, LSnd, LSumZero, LUnit, Pair, Prim, PureEVM, ScopeEVM,
    Snd, Term, ThenEVM, Unit, Var, shape,
)

# Primitives whose evaluation never raises on arguments of their type: the
# primitives on R follow IEEE 754 (chad/primitives.py: an overflow is an
# infinity, a division by zero, log, sqrt, log1p, ** outside their domain and
# sin, cos of an infinity are infinities or NaN, TOREAL of a huge integer is an
# infinity; NaN propagates) and integers are unbounded. FLOOR (of an infinity
# or NaN), IDIV and IMOD (by zero) raise: they are not here, nor is any
# primitive registered by an extension.
TOTAL_PRIMS = frozenset({
    "ADD", "MUL", "NEG", "LIT", "ILIT", "IADD", "IMUL", "INEG", "SIGN", "EXP", "TANH",
    "DIV", "LOG", "LOG1P", "SQRT", "POW", "POWI", "SIN", "COS", "TOREAL",
    "LT", "LE", "GT", "GE", "EQ", "NE", "ILT", "ILE", "IGT", "IGE", "IEQ", "INE",
    "ABS", "IABS", "ATAN", "MAX", "MIN", "NOT", "AND", "OR",
    "LZERO", "LADD", "LSCALE", "LNEG",
})

# Node classes whose evaluation fails only if a child's does (evaluating a
# lambda only reads its captured variables; building an action runs nothing).
_STRICT = frozenset({
    Let, Pair, LPair, Fst, Snd, Inl, Inr, LInl, LInr, LFst, LSnd, LCastL, LCastR, Case,
    Ann, PureEVM, BindEVM, ThenEVM, AddEVM, ScopeEVM, Length,
})
_NEVER = frozenset({Var, Unit, LUnit, LPairZero, LSumZero, Lam})

NONE_ZEROS = (LUnit, LPairZero, LSumZero)  # evaluate to the sparse zero None
_PROJ = (Fst, Snd, LFst, LSnd)


# The kinds of substitution entries of the rewriting pass (chad/simplify/rewrite.py)
SUSP, DONE, STRICT, SPLIT = 0, 1, 2, 3


def node_may_fail(t, children_fail: bool) -> bool:
    """may_fail of t given whether some child may fail (for bottom-up passes)."""
    cls = type(t)
    if cls in _NEVER:
        return False
    if cls is Prim:
        return t.op not in TOTAL_PRIMS or children_fail
    if cls in _STRICT:
        return children_fail
    return True


class Simplified:
    """An already simplified term inside a not yet simplified one (internal to the
    rewriting pass, never in its result)."""

    __slots__ = ("term",)

    def __init__(self, term: Term) -> None:
        self.term = term


class FailureOracle:
    """may_fail with a memo (by node identity, valid while the nodes are alive:
    the memo keeps them). With `pending` (the rewriting pass's substitution), a
    variable may fail when it stands for a right-hand side that may fail, not
    yet put in its place (an entry of kind STRICT), or for a small value or a
    split pair made of such variables (DONE, SPLIT). A term is examined only
    once the entries of its free variables are made (they are made at their
    binders, before the pass enters their scope), so the memo stays sound: an
    entry that goes away later (used) leaves a conservative answer."""

    def __init__(self, pending: dict | None = None) -> None:
        self._memo: dict[int, tuple[object, bool]] = {}
        self.pending = pending

    def __call__(self, t) -> bool:
        cls = type(t)
        if cls is Var:
            return self.pending is not None and self._var_fails(t.name)
        if cls in _NEVER:
            return False
        hit = self._memo.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        if cls is Simplified:
            r = self(t.term)
        elif cls is Prim:
            r = t.op not in TOTAL_PRIMS or self(t.arg)
        elif cls in _STRICT:
            r = False
            for f in shape(cls).children:
                v = getattr(t, f)
                if v is not None and self(v):
                    r = True
                    break
        else:
            r = True  # App, Call, RunEVM, arrays, extension nodes: may fail
        self._memo[id(t)] = (t, r)
        return r

    def _var_fails(self, name: str) -> bool:
        """Whether a use of the variable may fail: it stands for a right-hand side
        that may fail (STRICT), or for a split pair (SPLIT) or a small value (DONE)
        made of variables that do (not memoised: entries change)."""
        while True:
            e = self.pending.get(name)
            if e is None:
                return False
            kind, term = e
            if kind == STRICT:
                return True
            if kind == SPLIT:
                return self._var_fails(term.left.name) or self._var_fails(term.right.name)
            if kind != DONE:
                return False
            if type(term) is not Var:
                return self(term)
            name = term.name


def may_fail(t: Term) -> bool:
    """Can evaluating t raise? (Conservative; see the module docstring.)"""
    from chad.deep import run_deep

    return run_deep(FailureOracle(), t)


def is_atom(t) -> bool:
    """A variable, a literal or a zero: duplicating it duplicates no work."""
    cls = type(t)
    if cls is Var or cls is Unit or cls in NONE_ZEROS:
        return True
    if cls is Prim:
        return t.op in ("LIT", "ILIT", "LZERO") and type(t.arg) in (Unit, LUnit)
    return False


def is_small_value(t) -> bool:
    """An atom, a projection path out of a variable, or a pair or injection of
    atoms (inlined at every use)."""
    if is_atom(t):
        return True
    cls = type(t)
    if cls in _PROJ:
        for _ in range(8):
            t = t.expr
            if type(t) not in _PROJ:
                return type(t) is Var
        return False
    if cls is Pair or cls is LPair:
        return is_atom(t.left) and is_atom(t.right)
    if cls in (Inl, Inr, LInl, LInr):
        return is_atom(t.expr)
    return False


# binder-free core classes a small lambda's body may use
_TINY = frozenset({
    Var, Unit, LUnit, LPairZero, LSumZero, Prim, Pair, LPair, Fst, Snd, LFst, LSnd, Inl,
    Inr, LInl, LInr, LCastL, LCastR, PureEVM, AddEVM,
})
SMALL_LAMBDA = 6  # nodes of a small lambda's body


def is_small_lambda(t) -> bool:
    """A lambda whose body is at most SMALL_LAMBDA binder-free nodes (such as a
    backpropagator `\\d -> add x d`): copied to every use, with a fresh parameter."""
    if type(t) is not Lam:
        return False
    budget = SMALL_LAMBDA
    stack = [t.body]
    while stack:
        u = stack.pop()
        cls = type(u)
        if cls not in _TINY:
            return False
        budget -= 1
        if budget < 0:
            return False
        for f in shape(cls).children:
            stack.append(getattr(u, f))
    return True


def is_var_path(t) -> bool:
    """A variable, or projections (fst, snd, lfst, lsnd) of one."""
    while type(t) in _PROJ:
        t = t.expr
    return type(t) is Var


def is_cheap(t) -> bool:
    """An atom or a lambda: may be inlined into a lambda or loop body."""
    return type(t) is Lam or is_atom(t)


def is_none_zero(t) -> bool:
    return type(t) in NONE_ZEROS


def is_zero(t) -> bool:
    """A term that evaluates to a zero cotangent: None or the real 0.0."""
    cls = type(t)
    if cls in NONE_ZEROS:
        return True
    return cls is Prim and t.op == "LZERO"


def zero_term(lt):
    """A term evaluating to `zerov(lt)` (chad/linear.py), or None when lt is an
    extension's linear type (its zero has no core term)."""
    cls = type(lt)
    if cls is LR:
        return Prim("LZERO", LUnit())
    if cls is LUn:
        return LUnit()
    if cls is LPairT:
        return LPairZero()
    if cls is LSumT:
        return LSumZero()
    return None


def returns_none(m) -> bool:
    """Is m (an action) known to return () (the value None)?"""
    while True:
        cls = type(m)
        if cls is AddEVM:
            return True
        if cls is PureEVM:
            return type(m.expr) is Unit or type(m.expr) in NONE_ZEROS
        if cls is ThenEVM:
            m = m.second
        elif cls is Let:
            m = m.body
        elif cls is BindEVM:
            if type(m.k) is not Lam:
                return False
            m = m.k.body
        elif cls is Case:
            return returns_none(m.lbody) and returns_none(m.rbody)
        else:
            return False


__all__ = ["TOTAL_PRIMS", "SUSP", "DONE", "STRICT", "SPLIT", "node_may_fail", "FailureOracle", "may_fail", "is_atom", "is_small_value",
           "is_cheap", "is_small_lambda", "is_var_path", "is_zero", "is_none_zero", "zero_term", "returns_none",
           "Simplified"]
