"""Core terms, shared by the source and the target language.

This follows the Agda formalisation of seed 000 (appendix B, `spec.agda`, data
`Term`): one term type for both the source (`Pr`) and the target (`Du`) language.
Variables are *names* rather than de Bruijn indices; every binder in a generated
(target) term uses a fresh name, so names never capture.

Source forms:   Var Let Prim Unit Pair Fst Snd Inl Inr Case Lam App Call Ann
                Build Index Fold Length MapA
Target forms:   the source forms, plus the EVM monad (PureEVM BindEVM ThenEVM
                RunEVM AddEVM ScopeEVM) and the sparse linear operations (LUnit
                LPair LFst LSnd LPairZero LInl LInr LCastL LCastR LSumZero).
                LZERO/LADD/LSCALE/LNEG are primitives (see primitives.py).

Every node carries two fields that do not take part in equality:
`loc` (file, line, column) from the parser and `ty` (its source type) filled in by
the type checker. Terms are immutable; rewrite them with `attrs.evolve`.
"""

from __future__ import annotations

from typing import Any

from attrs import field, frozen

from .types import Type


def _meta():
    return field(default=None, eq=False, kw_only=True, repr=False)


@frozen
class Loc:
    """A source position: 1-based line and column."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class Term:
    """Base class of all core terms."""

    __slots__ = ()


# ----------------------------------------------------------------- source forms


@frozen
class Var(Term):
    name: str
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class Let(Term):
    name: str
    rhs: Term
    body: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class Prim(Term):
    """`prim op arg`. A primitive takes ONE argument (several are paired).

    `const` holds the literal of LIT (a float) and ILIT (an int); None otherwise.
    """

    op: str
    arg: Term
    const: Any = None
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class Unit(Term):
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class Pair(Term):
    left: Term
    right: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class Fst(Term):
    expr: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class Snd(Term):
    expr: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class Inl(Term):
    expr: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class Inr(Term):
    expr: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class Case(Term):
    """`case scrut of { inl lname -> lbody | inr rname -> rbody }`."""

    scrut: Term
    lname: str
    lbody: Term
    rname: str
    rbody: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class Lam(Term):
    """A lambda. `param_ty` is the optional annotation (source only).

    `captures` lists the variables stored in the closure, in order; evaluating the
    lambda costs 1 + len(captures) (the formalisation's `lam`). The parser leaves
    it None; the type checker fills in the free variables; the CHAD transformation
    gives it explicitly, as `lamwith` does.
    """

    name: str
    param_ty: Type | None
    body: Term
    captures: tuple[str, ...] | None = None
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class App(Term):
    fn: Term
    arg: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class Call(Term):
    """A call of a def defined above: `g(e1, ..., en)`."""

    name: str
    args: tuple[Term, ...]
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class Ann(Term):
    """Type ascription `e : T`. Free: the type checker removes it."""

    expr: Term
    ann: Type
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class Build(Term):
    """`build size (name. body)`."""

    size: Term
    name: str
    body: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class Index(Term):
    """`arr ! idx`."""

    arr: Term
    idx: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class Fold(Term):
    """`fold (name. body) arr`: name : T * T, associative combine, non-empty arr."""

    name: str
    body: Term
    arr: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class Length(Term):
    expr: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class MapA(Term):
    """`map (name. body) arr`."""

    name: str
    body: Term
    arr: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


# ----------------------------------------------------------------- target forms
# The EVM (environment vector monad) operations, formalisation `pureevm` etc.


@frozen
class PureEVM(Term):
    expr: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class BindEVM(Term):
    """`bind m k`: k is a function value returning the next action."""

    m: Term
    k: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class ThenEVM(Term):
    """`a >> b`, the formalisation's `thenevm a b`.

    It stands for `let x = b in bind a (lamwith [x] (\\_ -> x))`, and its costs are
    exactly those of that expansion (see costmodel/evaluate.py). Keeping it as a
    node lets the parallel runtime see that `a` and `b` are independent.
    """

    first: Term
    second: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class RunEVM(Term):
    """`run m env`: run the action from the environment-cotangent tuple `env`."""

    m: Term
    env: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class AddEVM(Term):
    """`add level val` (the paper's `one`): add val to the cell of a variable.

    `level` is the variable's position in the typing context counted from the
    bottom (first parameter = 0); `name` is only for printing.
    """

    level: int
    name: str
    val: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class ScopeEVM(Term):
    """`scope init m`: run m with one extra cell initialised to init.

    Returns the pair (final cell value, result of m).
    """

    init: Term
    m: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


# The sparse linear operations (formalisation: lunit, lpair, ...).


@frozen
class LUnit(Term):
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class LPair(Term):
    left: Term
    right: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class LFst(Term):
    """`lfst e`; `zero` is the linear type of the result, used when e is the zero."""

    expr: Term
    zero: Any
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class LSnd(Term):
    expr: Term
    zero: Any
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class LPairZero(Term):
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class LInl(Term):
    expr: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class LInr(Term):
    expr: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class LCastL(Term):
    expr: Term
    zero: Any
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class LCastR(Term):
    expr: Term
    zero: Any
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@frozen
class LSumZero(Term):
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


# ----------------------------------------------------------------- programs


@frozen
class Param:
    name: str
    ty: Type
    loc: Loc | None = field(default=None, eq=False)


@frozen
class Def:
    name: str
    params: tuple[Param, ...]
    result: Type
    body: Term
    loc: Loc | None = field(default=None, eq=False)


@frozen
class Program:
    defs: tuple[Def, ...]
    source: str | None = field(default=None, eq=False, repr=False)
    file: str = field(default="<input>", eq=False)

    def find(self, name: str | None) -> Def:
        """The def called `name`, or the last def when name is None."""
        from .errors import UsageError

        if not self.defs:
            raise UsageError("the program has no defs")
        if name is None:
            return self.defs[-1]
        for d in self.defs:
            if d.name == name:
                return d
        known = ", ".join(d.name for d in self.defs)
        raise UsageError(f"no def named {name!r} (defined: {known})")
