"""Unification variables for the type checker: the inference half of chad/checker.py.

Type inference by unification, as in Hindley–Milner (R. Milner, "A theory of
type polymorphism in programming"; L. Damas and R. Milner, "Principal type-schemes
for functional programs"), restricted to monomorphic lets: a type whose part is
not known where a term is checked (the parameter of an unannotated lambda, the
other side of an injection, the element type of `[]`) is a unification variable
`TVar`; later uses bind it (`Unifier.unify`), and once a def is checked every
variable is replaced by what it was bound to (`zonk_type`, and
chad/checker.py's `resolve_term` for the terms). A variable still free at that
point is an ambiguity: the checker reports it (no default type is chosen).

Variables are union-find nodes: `ref` is None (free), another variable (a link)
or a type (bound); `find` follows links in a loop and compresses the path, so
a chain of links of any length costs no recursion, and little time after the
first walk. `unify` is iterative too (an
explicit stack), with the occurs check. A variable may carry the constraint
"R or Z" (`numeric`), put on it by an overloaded operator (`+`, `<`, `abs`, `**`'s
exponent, ...) whose operand type is not known yet; binding it to another type is
a conflict.

For the messages, every variable records what it stands for (`subject` and
`note`, e.g. "x" and "(the parameter of the lambda at 1:9)"), where it came from
(`origin`: the lambda, injection or `[]`), where it was bound (`bound_at`) and,
if numeric, which operator made it so and where. A failed `unify` returns a
`Conflict` naming the variables through which the clashing types were reached;
`conflict_reason` words it, naming both places that disagree.
"""

from __future__ import annotations

from attrs import frozen

from .types import ArrayT, Fun, Int, Prod, R, Real, Sum, Type, UnitT, Z

_LEAVES = frozenset({Real, Int, UnitT})  # types without parts


@frozen
class Hole(Type):
    """An unknown part of an expected type (printed `?`): matches anything, is
    never bound. Only expected types contain holes; a variable bound to a type
    with holes gets fresh variables in their place (`Unifier.fill`)."""


HOLE = Hole()


class TVar(Type):
    """A unification variable (mutable; equality is identity)."""

    __slots__ = ("ref", "subject", "note", "origin", "numeric", "bound_at")

    def __init__(self, subject: str, note: str, origin):
        self.ref: Type | None = None
        self.subject = subject  # e.g. "x", "the result type of f"
        self.note = note  # e.g. "(the parameter of the lambda at 1:9)"
        self.origin = origin  # the term (Lam, Inl/Inr, ArrayLit) it comes from
        self.numeric: tuple[str, object] | None = None  # (operator, loc): R or Z
        self.bound_at = None  # the loc where ref was set

    def describe(self) -> str:
        return f"{self.subject} {self.note}" if self.note else self.subject

    def __repr__(self) -> str:
        return f"TVar({self.subject!r}, ref={self.ref!r})"

    def __str__(self) -> str:
        return show(self)


def find(t: Type) -> tuple[Type, TVar | None]:
    """(what t stands for, the variable bound to it): a type that is not a
    variable, with the last variable of the chain that led to it (None when t is
    no variable); or the free variable at the end of the chain, with None.
    Compresses the path: every variable of the chain then links to the last."""
    if type(t) is not TVar:
        return t, None
    v = t
    r = v.ref
    if r is None:
        return v, None
    if type(r) is not TVar:
        return r, v
    chain = []
    while type(r) is TVar:
        chain.append(v)
        v = r
        r = v.ref
    for c in chain:
        c.ref = v
    return (v, None) if r is None else (r, v)


def resolve(t: Type) -> Type:
    """The outermost constructor of t: t itself unless it is a bound variable."""
    return find(t)[0] if type(t) is TVar else t


def zonk_type(t: Type, free=None) -> Type:
    """t with every bound variable replaced by its binding, all the way down.
    A free variable becomes free(var) (default: the variable itself)."""
    if type(t) in _LEAVES:
        return t
    match t:
        case TVar():
            r, _ = find(t)
            if type(r) is TVar:
                return r if free is None else free(r)
            return zonk_type(r, free)
        case Prod(a, b):
            a2, b2 = zonk_type(a, free), zonk_type(b, free)
            return t if a2 is a and b2 is b else Prod(a2, b2)
        case Sum(a, b):
            a2, b2 = zonk_type(a, free), zonk_type(b, free)
            return t if a2 is a and b2 is b else Sum(a2, b2)
        case Fun(a, b):
            a2, b2 = zonk_type(a, free), zonk_type(b, free)
            return t if a2 is a and b2 is b else Fun(a2, b2)
        case ArrayT(e):
            e2 = zonk_type(e, free)
            return t if e2 is e else ArrayT(e2)
    return t


class Named(Type):
    """A name standing for a type in a message (e.g. `T` for a variable)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __str__(self) -> str:
        return self.name


def for_display(t: Type) -> Type:
    """t resolved, with every free variable shown as a hole (`?`)."""
    return zonk_type(t, lambda v: HOLE)


PREC_FUN, PREC_SUM, PREC_PROD, PREC_APP = 0, 1, 2, 3


def show(t: Type, prec: int = PREC_FUN) -> str:
    """Like types.show_type, for partial types: a hole or a free variable prints
    as `?`, a bound variable as its binding."""
    match t:
        case TVar():
            r, _ = find(t)
            return "?" if type(r) is TVar else show(r, prec)
        case Hole():
            return "?"
        case ArrayT(elem):
            return _paren(prec > PREC_PROD, "Array " + show(elem, PREC_APP))
        case Prod(a, b):
            return _paren(prec > PREC_PROD, show(a, PREC_PROD + 1) + " * " + show(b, PREC_PROD))
        case Sum(a, b):
            return _paren(prec > PREC_SUM, show(a, PREC_SUM + 1) + " + " + show(b, PREC_SUM))
        case Fun(a, b):
            return _paren(prec > PREC_FUN, show(a, PREC_FUN + 1) + " -> " + show(b, PREC_FUN))
    return str(t)


def _paren(cond: bool, s: str) -> str:
    return f"({s})" if cond else s


def _contains(t: Type, cls: type) -> bool:
    """Does t contain a node of class cls (TVar, Hole)?"""
    stack = [t]
    while stack:
        u = stack.pop()
        match u:
            case Prod(a, b) | Sum(a, b) | Fun(a, b):
                stack += [a, b]
            case ArrayT(e):
                stack.append(e)
            case _ if isinstance(u, cls):
                return True
    return False


def has_var(t: Type) -> bool:
    """Does t contain a unification variable (free or bound)?"""
    return type(t) not in _LEAVES and _contains(t, TVar)


def has_hole(t: Type) -> bool:
    return _contains(t, Hole)


@frozen
class Conflict:
    """Why unify failed.

    kind     "shape": `found` and `expected` have different constructors;
             "number": `var` (R or Z only, by `numeric`) met `found`, another type;
             "occurs": `var` would have to contain itself (`found`)
             (`var` is the variable as the term at the clash has it: a link to
             the one bound, which may stand for other terms too)
    via_found, via_expected   (variable, the other side's type at its level): the
             innermost bound variable through which each side reached the clash
    """

    kind: str
    found: Type
    expected: Type
    via_found: tuple | None = None
    via_expected: tuple | None = None
    var: TVar | None = None
    numeric: tuple | None = None  # var's constraint: (operator, loc)


_PART = {  # how a part of a type is called, by constructor and position
    Prod: ("the first component of {}", "the second component of {}"),
    Sum: ("the left side of {}", "the right side of {}"),
    Fun: ("the argument type of {}", "the result type of {}"),
}


class Unifier:
    """Creates variables and unifies types; `created` counts the variables."""

    def __init__(self):
        self.created = 0

    def fresh(self, subject: str, note: str, origin) -> TVar:
        self.created += 1
        return TVar(subject, note, origin)

    def fill(self, t: Type, subject: str, note: str, origin) -> Type:
        """t with each hole replaced by a fresh variable, named after its place
        in t (t itself is `subject`)."""
        match t:
            case Hole():
                return self.fresh(subject, note, origin)
            case Prod(a, b) | Sum(a, b) | Fun(a, b):
                ln, rn = _PART[type(t)]
                a2 = self.fill(a, ln.format(subject), note, origin) if has_hole(a) else a
                b2 = self.fill(b, rn.format(subject), note, origin) if has_hole(b) else b
                return type(t)(a2, b2)
            case ArrayT(e):
                return ArrayT(self.fill(e, f"the element type of {subject}", note, origin))
        return t

    def bind(self, v: TVar, t: Type, loc, seen: TVar | None = None) -> Conflict | None:
        """Bind the free variable v to t (resolved, not v itself); `seen` is the
        variable that led to v (named in a conflict)."""
        if type(t) is TVar:  # both free: link, keeping the constraint
            if v.numeric is not None and t.numeric is None:
                t.numeric = v.numeric
            v.ref, v.bound_at = t, loc
            return None
        if has_hole(t):
            t = self.fill(t, v.subject, v.note, v.origin)
        if v.numeric is not None and t not in (R, Z):
            return Conflict("number", t, v, var=seen or v, numeric=v.numeric)
        if _occurs(v, t):
            return Conflict("occurs", t, v, var=seen or v)
        v.ref, v.bound_at = t, loc
        return None

    def unify(self, found: Type, expected: Type, loc) -> Conflict | None:
        """Make `found` (a type without holes) equal to `expected` (which may
        have holes: they match anything), binding variables of either side at
        `loc`. None on success; the first clash otherwise (bindings made before
        it stay: the caller reports the error and stops)."""
        stack = [(found, expected, None, None)]
        while stack:
            a, b, pa, pb = stack.pop()
            if b is HOLE or a is b:
                continue
            a0, b0 = a, b
            if type(a) is TVar:
                a2, via = find(a)
                if via is not None:
                    pa = (via, b)
                a = a2
            if type(b) is TVar:
                b2, via = find(b)
                if via is not None:
                    pb = (via, a)
                b = b2
            if a is b:
                continue
            if type(a) is TVar:
                c = self.bind(a, b, loc, a0)
                if c is not None:
                    return Conflict(c.kind, c.found, c.expected, pa, pb, c.var, c.numeric)
                continue
            if type(b) is TVar:
                c = self.bind(b, a, loc, b0)
                if c is not None:
                    return Conflict(c.kind, c.found, c.expected, pa, pb, c.var, c.numeric)
                continue
            if type(b) is Hole or type(a) is Hole:
                continue
            tb = type(a)
            if tb is not type(b):
                return Conflict("shape", a, b, pa, pb)
            if tb is Prod or tb is Sum:
                stack += [(a.right, b.right, pa, pb), (a.left, b.left, pa, pb)]
            elif tb is Fun:
                stack += [(a.res, b.res, pa, pb), (a.arg, b.arg, pa, pb)]
            elif tb is ArrayT:
                stack.append((a.elem, b.elem, pa, pb))
        return None


def _occurs(v: TVar, t: Type) -> bool:
    stack = [t]
    while stack:
        u = stack.pop()
        if type(u) is TVar:
            u, _ = find(u)
            if u is v:
                return True
        match u:
            case Prod(a, b) | Sum(a, b) | Fun(a, b):
                stack += [a, b]
            case ArrayT(e):
                stack.append(e)
    return False


def number_base(t: Type) -> Type:
    """R, Z, or a free variable constrained to them: the operand type an
    overloaded operator's argument type `t` (`A`, `A * A` or `Array A`) selects."""
    t = resolve(t)
    match t:
        case Prod(a, _):
            return resolve(a)
        case ArrayT(e):
            return resolve(e)
    return t


def conflict_reason(c: Conflict, here) -> str:
    """The places that disagree, for the message of a failed unification (empty
    when no variable took part: the types were written or fixed by the rules)."""
    if c.kind == "number":
        v = c.var
        sym, at = c.numeric
        return (f"{v.describe()} must be R or Z (it is an operand of {sym} at "
                f"{loc_text(at)}) but is used as {show(c.found)} at {loc_text(here)}")
    if c.kind == "occurs":
        own, _ = find(c.var)
        t = zonk_type(c.found, lambda w: Named("T") if w is own else HOLE)
        return (f"{c.var.describe()} would have to be {show(t)}, where T is its own type, at "
                f"{loc_text(here)}: an infinite type")
    vf, ve = c.via_found, c.via_expected
    if vf and ve:
        (a, _), (b, _) = vf, ve
        return (f"{a.describe()} is used as {show(a.ref)} at {loc_text(a.bound_at)} and "
                f"{b.describe()} as {show(b.ref)} at {loc_text(b.bound_at)}, but they must "
                f"have one type at {loc_text(here)}")
    if vf or ve:
        v, other = vf or ve
        other = other if isinstance(other, str) else show(other)
        return (f"{v.describe()} is used as {show(v.ref)} at {loc_text(v.bound_at)} "
                f"but as {other} at {loc_text(here)}")
    return ""


def loc_text(loc) -> str:
    return f"{loc.line}:{loc.col}" if loc is not None else "an unknown position"
