"""Core terms, shared by the source and the target language.

This follows the Agda formalisation of Efficient CHAD (Smeding & Vákár) (appendix B, `spec.agda`, data
`Term`): one term type for both the source (`Pr`) and the target (`Du`) language.
Variables are *names* rather than de Bruijn indices; every binder in a generated
(target) term uses a fresh name, so names never capture.

Source forms:   Var Let Prim Unit Pair Fst Snd Inl Inr Case Lam App Call Ann
                Build Index Fold Length MapA ArrayLit Iter Scan
Target forms:   the source forms, plus the EVM monad (PureEVM BindEVM ThenEVM
                RunEVM AddEVM ScopeEVM) and the sparse linear operations (LUnit
                LPair LFst LSnd LPairZero LInl LInr LCastL LCastR LSumZero).
                LZERO/LADD/LSCALE/LNEG are primitives (see primitives.py).

Every node carries two fields that do not take part in equality:
`loc` (file, line, column) from the parser and `ty` (its source type) filled in by
the type checker. Terms are immutable.

Every node class declares its shape with `@node`: which fields hold sub-terms,
which variables each sub-term has bound, and which variables the node reads by
name. The one traversal below (`children`, `rebuild`, `map_children`,
`binders_of`, `free_vars`, `subterms`) reads only those declarations, so every
pass walks every node (core or extension) the same way. Extensions declare their
node classes with the same decorator (re-exported by chad/extend.py).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterator

import attrs
from attrs import field, frozen

from .errors import UsageError
from .types import Type


@frozen
class Shape:
    """The structure of a node class.

    children  the fields holding sub-terms: a Term, a tuple of Terms, or None
    binds     child field -> the fields naming the variables bound in that child
              (each such field holds a name, a tuple of names, or None)
    reads     the fields naming variables the node reads from its environment
              (a name, a tuple of names, or None: e.g. Var's name, a closure's
              captures)
    closure   True when a child sees only its binders and the `reads` (a closure
              body): then `free_vars(..., trust_captures=True)` need not enter it
    """

    children: tuple[str, ...] = ()
    binds: tuple[tuple[str, tuple[str, ...]], ...] = ()
    reads: tuple[str, ...] = ()
    closure: bool = False


def node(*children: str, binds: dict[str, str | tuple[str, ...]] | None = None,
         reads: tuple[str, ...] | str = (), closure: bool = False):
    """Class decorator declaring a term node's shape (see `Shape`); put it above
    `@frozen`. Checks that the named fields exist."""

    def declare(cls):
        names = {f.name for f in attrs.fields(cls)}
        bind_items = tuple((k, (v,) if isinstance(v, str) else tuple(v))
                           for k, v in (binds or {}).items())
        rd = (reads,) if isinstance(reads, str) else tuple(reads)
        used = set(children) | set(rd) | {k for k, _ in bind_items} | {
            b for _, vs in bind_items for b in vs}
        missing = used - names
        if missing:
            raise TypeError(f"@node on {cls.__name__}: no field(s) {sorted(missing)}")
        if any(k not in children for k, _ in bind_items):
            raise TypeError(f"@node on {cls.__name__}: binds names a field that is not a child")
        cls.__shape__ = Shape(tuple(children), bind_items, rd, closure)
        return cls

    return declare


def shape(t_or_cls) -> Shape:
    cls = t_or_cls if isinstance(t_or_cls, type) else type(t_or_cls)
    try:
        return cls.__shape__
    except AttributeError:
        raise TypeError(f"{cls.__name__} does not declare its shape with @node") from None


def _names(v) -> tuple[str, ...]:
    if v is None:
        return ()
    if isinstance(v, str):
        return (v,)
    return tuple(v)


def children(t: "Term") -> list["Term"]:
    """The sub-terms of t, in field order (tuples flattened, None skipped)."""
    out: list[Term] = []
    for f in t.__shape__.children:
        v = getattr(t, f)
        if v is None:
            continue
        if type(v) is tuple:
            out.extend(v)
        else:
            out.append(v)
    return out


def binders_of(t: "Term") -> list[tuple["Term", tuple[str, ...]]]:
    """Each sub-term of t (in `children` order) with the names bound in it."""
    sh = t.__shape__
    binds = dict(sh.binds)
    out = []
    for f in sh.children:
        v = getattr(t, f)
        if v is None:
            continue
        bound: tuple[str, ...] = ()
        for b in binds.get(f, ()):
            bound += _names(getattr(t, b))
        for c in (v if type(v) is tuple else (v,)):
            out.append((c, bound))
    return out


def reads_of(t: "Term") -> tuple[str, ...]:
    """The variables t itself reads by name (Var's name, a closure's captures)."""
    out: tuple[str, ...] = ()
    for f in t.__shape__.reads:
        out += _names(getattr(t, f))
    return out


def rebuild(t: "Term", kids) -> "Term":
    """t with its sub-terms replaced by `kids` (same order and number as
    `children(t)`); t itself when every kid is the old one."""
    kids = list(kids)
    changes: dict[str, Any] = {}
    k = 0
    for f in t.__shape__.children:
        v = getattr(t, f)
        if v is None:
            continue
        n = len(v) if type(v) is tuple else 1
        note_field(changes, f, v, kids[k:k + n])
        k += n
    if k != len(kids):
        raise ValueError(f"rebuild of {type(t).__name__}: {len(kids)} kids for {k} children")
    return attrs.evolve(t, **changes) if changes else t


def note_field(changes: dict, f: str, v, items) -> None:
    """Record in `changes` the new value of field f (old value v: a sub-term or
    a tuple of them) from `items`, its new sub-terms in order, if any of them is
    not the old one (for attrs.evolve; the passes that walk a term with an
    explicit stack rebuild a node field by field with it)."""
    if type(v) is tuple:
        new = tuple(items)
        if any(a is not b for a, b in zip(new, v)):
            changes[f] = new
    elif items[0] is not v:
        changes[f] = items[0]


def map_children(t: "Term", f: Callable[["Term"], "Term"]) -> "Term":
    """t with f applied to each sub-term (one level; f recurses if it wants to)."""
    return rebuild(t, [f(c) for c in children(t)])


def rewrite(t: "Term", pre: Callable[["Term"], "Term"],
            post: Callable[["Term"], "Term"] | None = None,
            child_done: Callable[["Term", int, "Term"], None] | None = None) -> "Term":
    """t rewritten top-down: each node is replaced by pre(node) before its
    children are visited (pre returns its argument when nothing changes), the
    children are rewritten left to right, and the parent is rebuilt from them
    and passed through post. child_done(parent, k, child) sees each rewritten
    child as it is finished. One loop over an explicit stack of the nodes whose
    children are being done: a deep term needs no deep Python stack."""
    stack: list = []  # (node, its children, the children done)
    while True:
        t = pre(t)
        kids = children(t)
        if kids:
            stack.append((t, kids, []))
            t = kids[0]
            continue
        r = t
        while stack:
            node, kids, done = stack[-1]
            done.append(r)
            if child_done is not None:
                child_done(node, len(done) - 1, r)
            if len(done) < len(kids):
                t = kids[len(done)]
                break
            stack.pop()
            r = rebuild(node, done)
            if post is not None:
                r = post(r)
        else:
            return r


def subterms(t: "Term") -> Iterator["Term"]:
    """Every node of t, in pre-order, left to right. Iterative: no recursion limit."""
    stack = [t]
    while stack:
        u = stack.pop()
        yield u
        stack.extend(reversed(children(u)))


_ENTER, _EXIT = 0, 1


def free_vars(term: "Term", trust_captures: bool = False) -> tuple[str, ...]:
    """The free variables of `term`, in order of first occurrence (left to right).

    Works on every node class, source and target, from the declared shapes: a
    node's `reads`, then each child minus the names bound in it. With
    `trust_captures`, a closure node (Shape.closure) whose `reads` are set
    contributes only those, without its body being traversed (they are the same
    when the captures were computed by this function). Iterative.
    """
    out: list[str] = []
    seen: set[str] = set()
    bound: dict[str, int] = {}
    stack: list = [term]
    while stack:
        item = stack.pop()
        if type(item) is tuple:
            tag, names = item
            for name in names:
                if tag == _ENTER:
                    bound[name] = bound.get(name, 0) + 1
                else:
                    bound[name] -= 1
            continue
        sh = item.__shape__
        known = False
        for f in sh.reads:
            v = getattr(item, f)
            if v is not None:
                known = True
            for name in _names(v):
                if not bound.get(name) and name not in seen:
                    seen.add(name)
                    out.append(name)
        if trust_captures and sh.closure and known:
            continue
        for child, names in reversed(binders_of(item)):
            if names:
                stack += [(_EXIT, names), child, (_ENTER, names)]
            else:
                stack.append(child)
    return tuple(out)


def _same_datum(u, v) -> bool:
    """Two non-term fields the same: equal, and of one type; reals by their
    bits' meaning (-0.0 is not 0.0, NaN is NaN)."""
    if type(u) is not type(v):
        return False
    if type(u) is float:
        return (u == v and math.copysign(1.0, u) == math.copysign(1.0, v)) or (u != u and v != v)
    return u == v


def alpha_equal(a: "Term", b: "Term", ignore_captures: bool = False) -> bool:
    """a and b are the same term up to the names of the variables they bind
    (a free variable must have the same name in both; `loc` and `ty` are not
    compared). With ignore_captures, a closure node's capture list is not
    compared (its body's reads are): for a pass that recomputes the lists
    after it (chad/simplify). Iterative: no recursion limit."""
    stack: list = [(a, b, {}, {})]  # (x, y, x's bound names -> y's, and back)
    while stack:
        x, y, ab, ba = stack.pop()
        cls = type(x)
        if type(y) is not cls:
            return False
        sh = x.__shape__
        binders = {f for _, fs in sh.binds for f in fs}
        for f in attrs.fields(cls):
            name = f.name
            if not f.eq or name in sh.children or name in binders or name in sh.reads:
                continue
            if not _same_datum(getattr(x, name), getattr(y, name)):
                return False
        for f in sh.reads:
            if ignore_captures and sh.closure and f not in binders:
                continue  # (a capture list that also binds names is compared)
            u, v = getattr(x, f), getattr(y, f)
            if (u is None) != (v is None):
                return False
            nu, nv = _names(u), _names(v)
            if len(nu) != len(nv) or not all(_same_name(p, q, ab, ba) for p, q in zip(nu, nv)):
                return False
        binds = dict(sh.binds)
        for f in sh.children:
            u, v = getattr(x, f), getattr(y, f)
            if (u is None) != (v is None) or (type(u) is tuple) != (type(v) is tuple):
                return False
            if u is None:
                continue
            us, vs = (u, v) if type(u) is tuple else ((u,), (v,))
            if len(us) != len(vs):
                return False
            names_x: tuple[str, ...] = ()
            names_y: tuple[str, ...] = ()
            for bf in binds.get(f, ()):
                names_x += _names(getattr(x, bf))
                names_y += _names(getattr(y, bf))
            if len(names_x) != len(names_y):
                return False
            ab2, ba2 = ab, ba
            if names_x:
                ab2, ba2 = dict(ab), dict(ba)
                ab2.update(zip(names_x, names_y))
                ba2.update(zip(names_y, names_x))
            stack.extend((c, d, ab2, ba2) for c, d in zip(us, vs))
    return True


def _same_name(p: str, q: str, ab: dict, ba: dict) -> bool:
    """p (read in one term) and q (in the other) are the same variable: bound
    by corresponding binders, or both free with one name."""
    if p in ab or q in ba:
        return ab.get(p) == q and ba.get(q) == p
    return p == q


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


@node(reads="name")
@frozen
class Var(Term):
    name: str
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("rhs", "body", binds={"body": "name"})
@frozen
class Let(Term):
    name: str
    rhs: Term
    body: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("arg")
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


@node()
@frozen
class Unit(Term):
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("left", "right")
@frozen
class Pair(Term):
    left: Term
    right: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("expr")
@frozen
class Fst(Term):
    expr: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("expr")
@frozen
class Snd(Term):
    expr: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("expr")
@frozen
class Inl(Term):
    expr: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("expr")
@frozen
class Inr(Term):
    expr: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("scrut", "lbody", "rbody", binds={"lbody": "lname", "rbody": "rname"})
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


@node("body", binds={"body": "name"}, reads="captures", closure=True)
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


@node("fn", "arg")
@frozen
class App(Term):
    fn: Term
    arg: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("args")
@frozen
class Call(Term):
    """A call of a def defined above: `g(e1, ..., en)`."""

    name: str
    args: tuple[Term, ...]
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("expr")
@frozen
class Ann(Term):
    """Type ascription `e : T`. Free: the type checker removes it."""

    expr: Term
    ann: Type
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("size", "body", binds={"body": "name"})
@frozen
class Build(Term):
    """`build size (name. body)`."""

    size: Term
    name: str
    body: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("arr", "idx")
@frozen
class Index(Term):
    """`arr ! idx`."""

    arr: Term
    idx: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("body", "arr", binds={"body": "name"})
@frozen
class Fold(Term):
    """`fold (name. body) arr`: name : T * T, associative combine, non-empty arr."""

    name: str
    body: Term
    arr: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("elems")
@frozen
class ArrayLit(Term):
    """`[e1, ..., en]`: an array of the values of its elements, in order."""

    elems: tuple[Term, ...]
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("expr")
@frozen
class Length(Term):
    expr: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("body", "arr", binds={"body": "name"})
@frozen
class MapA(Term):
    """`map (name. body) arr`."""

    name: str
    body: Term
    arr: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("count", "body", "init", binds={"body": "name"})
@frozen
class Iter(Term):
    """`iter count (name. body) init`: the state `name` starts as init's value and
    is replaced by body's value count times (no step when count <= 0). Its rules
    (evaluation, CHAD, compilation) are the loops extension's (chad/loops/)."""

    count: Term
    name: str
    body: Term
    init: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("body", "init", "arr", binds={"body": "name"})
@frozen
class Scan(Term):
    """`scan (name. body) init arr`: the state starts as init's value; for each
    element of arr in order, `name` is bound to (state, element) and body's value
    is the next state. The value is the array of the states after each element
    (empty for an empty arr). Its rules are the loops extension's (chad/loops/)."""

    name: str
    body: Term
    init: Term
    arr: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


# ----------------------------------------------------------------- target forms
# The EVM (environment vector monad) operations, formalisation `pureevm` etc.


@node("expr")
@frozen
class PureEVM(Term):
    expr: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("m", "k")
@frozen
class BindEVM(Term):
    """`bind m k`: k is a function value returning the next action."""

    m: Term
    k: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("first", "second")
@frozen
class ThenEVM(Term):
    """`a >> b`, the formalisation's `thenevm a b`.

    It stands for `let x = b in bind a (lamwith [x] (\\_ -> x))`, and its costs are
    exactly those of that expansion (see chad/costmodel/evaluate.py). Keeping it as a
    node lets the parallel runtime see that `a` and `b` are independent.
    """

    first: Term
    second: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("m", "env")
@frozen
class RunEVM(Term):
    """`run m env`: run the action from the environment-cotangent tuple `env`."""

    m: Term
    env: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("val")
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


@node("init", "m")
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


@node()
@frozen
class LUnit(Term):
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("left", "right")
@frozen
class LPair(Term):
    left: Term
    right: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("expr")
@frozen
class LFst(Term):
    """`lfst e`; `zero` is the linear type of the result, used when e is the zero."""

    expr: Term
    zero: Any
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("expr")
@frozen
class LSnd(Term):
    expr: Term
    zero: Any
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node()
@frozen
class LPairZero(Term):
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("expr")
@frozen
class LInl(Term):
    expr: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("expr")
@frozen
class LInr(Term):
    expr: Term
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("expr")
@frozen
class LCastL(Term):
    expr: Term
    zero: Any
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node("expr")
@frozen
class LCastR(Term):
    expr: Term
    zero: Any
    loc: Loc | None = _meta()
    ty: Type | None = _meta()


@node()
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
        if not self.defs:
            raise UsageError("the program has no defs")
        if name is None:
            return self.defs[-1]
        for d in self.defs:
            if d.name == name:
                return d
        known = ", ".join(d.name for d in self.defs)
        raise UsageError(f"no def named {name!r} (defined: {known})")
