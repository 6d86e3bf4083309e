"""The type checker: bidirectional, with inference by unification, for the source
language (docs/language.md).

    check_program(prog) -> Program     the checked program (see below)
    check_term(term, env, defs=None, expected=None) -> Term
    free_vars(term) -> tuple[str, ...]  free variables (chad/terms.py's traversal)

The checked program is a NEW program in which

  * every term node has `.ty` set to its source type;
  * ascriptions `Ann(e, T)` are gone (replaced by the checked `e`);
  * overloaded primitives are resolved: ADD/MUL/NEG/LT/LE/GT/GE/EQ/NE/ABS on Z
    operands become their `int_variant` (IADD, IMUL, INEG, ILT, ..., IABS), and
    POW (`x ** y`) with a Z exponent its `int_right_variant` POWI;
  * every `Lam` has `param_ty` (the parameter type, inferred if not written) and
    `captures` (its free local variables, in order of first occurrence in the body);
  * a call `g(x)` of a name that is a local variable of function type (not a def)
    becomes the application `App(Var g, x)`;
  * no unification variable is left: the program is the one the user would have
    got by writing every annotation.

The scheme is bidirectional with *partial* expected types. One function,
`_Checker.elab(term, exp, ctx)`, does both modes: `exp` is a type that may contain
holes (`HOLE`, printed `?`); `exp = HOLE` is pure inference, a complete `exp` is
checking, and e.g. `Fun(R, HOLE)` is "a function taking R, result to be inferred".
The type found is unified with `exp` (the holes match anything); `ctx` words the
error when they clash.

What the context does not give, the parameter type of an unannotated lambda, the
other side of an injection and the element type of `[]`, is a unification
variable (chad/infer.py: Hindley–Milner style inference, after Milner, "A theory
of type polymorphism in programming", with monomorphic lets), bound by later
uses; a clash names both places. When a def is checked, `resolve_term` replaces
every variable by its binding (and picks the R or Z variant of an operator whose
operand type was one); a variable still free is an ambiguity error. Where the
order of checking matters (the branches of a case, the function and the argument
of an application, the operands of `+`), `_Checker.synth` says which parts can
be inferred on their own, and those go first, so that most programs need no
variable at all.

See docs/type-checker.md for the rules, the inference and its messages.
"""

from __future__ import annotations

import difflib
from types import GeneratorType

import attrs

from .deep import in_deep_work, run_shallow
from .errors import TypeCheckError
from .infer import (
    HOLE, PREC_SUM, Conflict, Hole, TVar, Unifier, conflict_reason, find, for_display, has_hole,
    has_var, loc_text, number_base, resolve, show, zonk_type,
)
from .primitives import PRIMITIVES
from .terms import (
    Ann, App, ArrayLit, Build, Call, Case, Def, Fold, Fst, Index, Inl, Inr, Iter, Lam, Length,
    Let, MapA, Pair, Prim, Program, Scan, Snd, Term, Unit, Var, children, free_vars, rebuild,
)
from .types import ArrayT, Fun, Prod, R, Sum, Type, UNIT, Z

__all__ = ["check_program", "check_term", "free_vars", "HOLE"]


# ----------------------------------------------------------------- partial types


def _fits(found: Type, exp: Type) -> bool:
    """True when `found` matches `exp`, holes on either side matching anything
    (for the wording of messages: both are resolved, free variables as holes)."""
    if isinstance(exp, Hole) or isinstance(found, Hole):
        return True
    if found == exp:
        return True
    match exp:
        case Prod(a, b):
            return isinstance(found, Prod) and _fits(found.left, a) and _fits(found.right, b)
        case Sum(a, b):
            return isinstance(found, Sum) and _fits(found.left, a) and _fits(found.right, b)
        case Fun(a, b):
            return isinstance(found, Fun) and _fits(found.arg, a) and _fits(found.res, b)
        case ArrayT(e):
            return isinstance(found, ArrayT) and _fits(found.elem, e)
    return False


def describe(exp: Type) -> str:
    """An expected (possibly partial) type in words."""
    match exp:
        case Hole():
            return "a value of any type"
        case Prod(Hole(), Hole()):
            return "a pair"
        case Sum(Hole(), Hole()):
            return "a sum"
        case Fun(Hole(), Hole()):
            return "a function"
        case ArrayT(Hole()):
            return "an array"
        case Fun(a, Hole()):
            return f"a function taking {show(a)}"
        case Fun(Hole(), b):
            return f"a function returning {show(b)}"
    return show(exp)


# ----------------------------------------------------------------- error contexts


class Ctx:
    """Words the error when the type found does not fit the type expected.

    `found` is the complete type found, or None when the term has no type of its
    own (an injection, an unannotated lambda); `what` then describes the term.
    """

    def __init__(self, where: str | None = None):
        self.where = where

    def message(self, exp: Type, found: Type | None, what: str) -> str:
        f = show(found) if found is not None else what
        s = f"expected {describe(exp)}, found {f}"
        return f"{s} in {self.where}" if self.where else s

    def node(self, exp: Type, found: Type | None, default: Term) -> Term:
        """The node to blame (its location is the error's): by default the term
        whose type does not fit; an eliminator blames itself for its result."""
        return default


class _NeedCtx(Ctx):
    """The subject of an eliminator (fst, case, length, ...): needs a shape."""

    def __init__(self, form: str, shape: type, shape_desc: str, outer: Ctx, proj=None,
                 at: Term | None = None):
        super().__init__()
        self.form, self.shape, self.shape_desc = form, shape, shape_desc
        self.outer, self.proj, self.at = outer, proj, at

    def _delegates(self, found) -> bool:
        return isinstance(found, self.shape) and self.proj is not None

    def message(self, exp, found, what):
        if not self._delegates(found):
            return f"{self.form} needs {self.shape_desc}, found {show(found) if found is not None else what}"
        return self.outer.message(self.proj(exp), self.proj(found), what)

    def node(self, exp, found, default):
        if not self._delegates(found) or self.at is None:
            return default
        return self.outer.node(self.proj(exp), self.proj(found), self.at)


class _AppCtx(Ctx):
    """The function of an application."""

    def __init__(self, outer: Ctx, at: Term | None = None):
        super().__init__()
        self.outer, self.at = outer, at

    def message(self, exp, found, what):
        if not isinstance(found, Fun):
            thing = f"a value of type {show(found)}" if found is not None else what
            return f"cannot apply {thing}: it is not a function"
        if not _fits(found.arg, exp.arg):
            return (f"the function takes {show(found.arg)}, "
                    f"but its argument has type {show(exp.arg)}")
        return self.outer.message(exp.res, found.res, what)

    def node(self, exp, found, default):
        if isinstance(found, Fun) and _fits(found.arg, exp.arg) and self.at is not None:
            return self.outer.node(exp.res, found.res, self.at)
        return default


class _BranchCtx(Ctx):
    """The second branch of a case checked, against the type of the first."""

    def __init__(self, first: Type, first_is_left: bool, first_loc=None):
        super().__init__()
        self.first, self.first_is_left, self.first_loc = first, first_is_left, first_loc

    def message(self, exp, found, what):
        other = show(found) if found is not None else what
        first = show(self.first)
        if self.first_loc is not None:  # name both places: the other branch's too
            first += f" (the branch at {loc_text(self.first_loc)})"
        a, b = (first, other) if self.first_is_left else (other, first)
        return f"the branches of case have different types: {a} and {b}"


_NO_CTX = Ctx()

# ----------------------------------------------------------------- primitives

_SYMBOL = {
    "ADD": "+", "MUL": "*", "NEG": "-", "DIV": "/", "LT": "<", "LE": "<=", "GT": ">",
    "GE": ">=", "EQ": "==", "IADD": "+", "IMUL": "*", "INEG": "-", "ILT": "<",
    "ILE": "<=", "IGT": ">", "IGE": ">=", "IEQ": "==", "NE": "!=", "INE": "!=", "LIT": "a real literal",
    "ILIT": "an integer literal", "POW": "**", "POWI": "**", "AND": "&&", "OR": "||",
    "IABS": "abs", "IDIV": "div", "IMOD": "mod",
}
# Primitives of the source language not (or not yet) in the PRIMITIVES table.
_EXTRA_PRIMS: dict[str, tuple[Type, Type]] = {"SUM": (ArrayT(R), R)}
_ORD = ("first", "second")


def _symbol(op: str) -> str:
    return _SYMBOL.get(op, op.lower())


def _signature(op: str) -> tuple[Type, Type] | None:
    p = PRIMITIVES.get(op)
    if p is not None:
        return p.arg, p.res
    return _EXTRA_PRIMS.get(op)


# ----------------------------------------------------------------- the checker

_MISSING = object()


class _Checker:
    def __init__(self, defs: dict[str, Def], source: str | None = None,
                 current: str | None = None, later: frozenset[str] = frozenset()):
        self.defs = defs  # the defs this code may call (already checked)
        self.source = source
        self.current = current  # the def being checked
        self.later = later  # the defs below it
        self.env: dict[str, Type] = {}
        self._synth: dict[int, bool] = {}
        self._loc = None
        self.u = Unifier()  # its variables: chad/infer.py
        # a lambda's parameter type, an injection's type, by id of the source term
        # (for the message when a variable in it stays free)
        self._origin_ty: dict[int, Type] = {}
        # ids of checked terms in which no type has a variable, so resolve_term
        # need not enter them (recorded once a variable exists), and the number
        # of terms checked so far whose type has one
        self._clean: set[int] = set()
        self._n_dirty = 0

    # ------------------------------------------------------------- plumbing

    def error(self, message: str, node=None) -> TypeCheckError:
        loc = getattr(node, "loc", None) or self._loc
        return TypeCheckError(message, loc=loc, source=self.source)

    def bind(self, name: str, ty: Type):
        old = self.env.get(name, _MISSING)
        self.env[name] = ty
        return old

    def unbind(self, name: str, old) -> None:
        if old is _MISSING:
            del self.env[name]
        else:
            self.env[name] = old

    def check(self, term: Term, expected: Type, ctx: Ctx = _NO_CTX) -> Term:
        return self.elab(term, expected, ctx)

    def infer(self, term: Term) -> Term:
        return self.elab(term, HOLE, _NO_CTX)

    def elab(self, t: Term, exp: Type, ctx: Ctx) -> Term:
        """Check `t` against the partial type `exp`; the result has a .ty that fits
        it (and may contain unification variables, resolved at the end of the def).

        An expected type that is a unification variable (free or bound) is not
        passed to the rule: the rule infers, and its type is unified with the
        variable afterwards, so that a clash names the place that bound it.

        The rules of lets and primitives (the spines of a chain of 10,000 lets
        and of a sum of 10,000 terms) are generators that yield each
        (sub-term, expected type, context) to elaborate and get its result
        back; they run here on an explicit stack, so those spines need no deep
        Python stack. The other rules call elab (recursion)."""
        steps = self._elab_steps(t, exp, ctx)
        stack = [steps]
        value, error = None, None
        while True:
            try:
                if error is not None:
                    exc, error = error, None
                    job = stack[-1].throw(exc)
                else:
                    job = stack[-1].send(value)
            except StopIteration as done:
                stack.pop()
                if not stack:
                    return done.value
                value = done.value
                continue
            except BaseException as exc:  # handed to the rule that asked, if any
                stack.pop()
                if not stack:
                    raise
                error = exc
                continue
            stack.append(self._elab_steps(*job))
            value = None

    def _elab_steps(self, t: Term, exp: Type, ctx: Ctx):
        """elab(t, exp, ctx) as a generator (see elab)."""
        saved = self._loc
        loc = getattr(t, "loc", None)
        if loc is not None:
            self._loc = loc
        try:
            method = _RULES.get(type(t))
            if method is None:
                raise self.error(f"{type(t).__name__} is not a form of the source language", t)
            n_dirty = self._n_dirty
            out = method(self, t, HOLE if type(exp) is TVar else exp, ctx)
            if type(out) is GeneratorType:
                out = yield from out
            if exp is not HOLE:
                ty = out.ty
                if ty is not exp and ty != exp:
                    self.expect(ty, exp, ctx, t)
            if self.u.created:
                if self._n_dirty != n_dirty or has_var(out.ty):
                    self._n_dirty += 1
                else:
                    self._clean.add(id(out))
            return out
        finally:
            self._loc = saved

    def expect(self, found: Type, exp: Type, ctx: Ctx, t: Term, what: str = "") -> None:
        """Unify `found` (the type of t) with `exp`; a clash is t's error."""
        conflict = self.u.unify(found, exp, self._loc)
        if conflict is not None:
            raise self.mismatch(ctx, exp, found, what, t, conflict)

    # ------------------------------------------------------------- resolution

    def built(self, ty: Type) -> None:
        """A rule made a term of type ty itself (not through elab): if ty has a
        variable, the term being checked is not clean."""
        if self.u.created and has_var(ty):
            self._n_dirty += 1

    def resolve_term(self, root: Term) -> Term:
        """`root` with every unification variable replaced by its binding: each
        node's `.ty`, each lambda's `param_ty`, and each overloaded operator
        whose operand type was a variable made its R or Z variant. A variable
        still free is an ambiguity, reported at the term it came from. Iterative
        (chad/terms.py's traversal); nothing to do when no variable was made."""
        if not self.u.created:
            return root
        zt = self._zonk
        clean = self._clean
        done: list[Term] = []
        stack: list = [root]
        while stack:
            t = stack.pop()
            if type(t) is not tuple:
                if id(t) in clean:
                    done.append(t)
                    continue
                kids = children(t)
                stack.append((t, len(kids)))
                stack.extend(reversed(kids))
                continue
            t, n = t
            if n:
                kids = done[-n:]
                del done[-n:]
                t = rebuild(t, kids)
            changes = {}
            ty = zt(t.ty)
            if ty is not t.ty:
                changes["ty"] = ty
            if type(t) is Lam:
                p = zt(t.param_ty)
                if p is not t.param_ty:
                    changes["param_ty"] = p
            elif type(t) is Prim:
                op = _resolved_op(t.op, t.arg.ty)
                if op != t.op:
                    changes["op"] = op
            done.append(attrs.evolve(t, **changes) if changes else t)
        return done[0]

    def _zonk(self, ty: Type) -> Type:
        return zonk_type(ty, self._raise_ambiguous) if ty is not None else None

    def _raise_ambiguous(self, v: TVar):
        raise self._ambiguous(v)

    def _ambiguous(self, v: TVar):
        """The error for the free variable v: nothing determines its type."""
        org = v.origin
        if isinstance(org, Lam):
            known = for_display(self._origin_ty.get(id(org), v))
            x = org.name
            if isinstance(known, Hole) and v.numeric is not None:
                sym, at = v.numeric
                msg = (f"cannot infer the type of the parameter {x} of this lambda: it is R or "
                       f"Z (an operand of {sym} at {loc_text(at)}) and nothing decides which; "
                       f"add an annotation, e.g. \\({x} : R) -> ...")
            elif isinstance(known, Hole):
                msg = (f"cannot infer the type of the parameter {x} of this lambda: add an "
                       f"annotation, e.g. \\({x} : T) -> ...")
            else:
                msg = (f"cannot infer the type of the parameter {x} of this lambda: it is "
                       f"known only as {show(known)}; add an annotation, e.g. "
                       f"\\({x} : {show(known).replace('?', 'T')}) -> ...")
        elif isinstance(org, (Inl, Inr)):
            side = "inl" if isinstance(org, Inl) else "inr"
            ty = self._origin_ty.get(id(org))
            a, b = "A", "B"
            if isinstance(ty, Sum):
                left, right = for_display(ty.left), for_display(ty.right)
                if not has_hole(left):
                    a = show(left, PREC_SUM + 1)
                if not has_hole(right):
                    b = show(right, PREC_SUM)
            msg = ("cannot infer the type of this injection: add an ascription, "
                   f"e.g. ({side} e : {a} + {b})")
        else:
            msg = "the element type of [] is not known: write it, as in ([] : Array R)"
        return self.error(msg, org)

    def synth(self, t: Term) -> bool:
        """Can `t` be elaborated with no expected type? (A guide for ordering.)
        A loop down the sub-term that decides (a let's body, the first operand
        of an overloaded operator, ...), then back up: a spine as deep as the
        program needs no deep Python stack."""
        memo = self._synth
        waiting: list = []  # (node, how its answer follows from the sub-term's)
        while True:
            r = memo.get(id(t))
            if r is not None:
                break
            nxt = self._synth_next(t)
            if nxt is None:
                r = memo[id(t)] = self._compute_synth(t)
                break
            how, sub = nxt
            waiting.append((t, how))
            t = sub
        while waiting:
            node, how = waiting.pop()
            if how == "and":
                r = r and self.synth(node.arg.right if type(node) is Prim else node.right)
            elif how == "or":
                r = r or self.synth(node.arg.right)
            memo[id(node)] = r
        return r

    def _synth_next(self, t: Term):
        """For the forms whose answer is that of one sub-term (`same`), or that
        sub-term's and/or another's: (how, that sub-term); else None."""
        cls = type(t)
        if cls is Let:
            return "same", t.body
        if cls is Fst or cls is Snd:
            return "same", t.expr
        if cls is Pair:
            return "and", t.left
        if cls is Prim:
            p = PRIMITIVES.get(t.op)
            if p is not None and p.int_variant is not None and isinstance(t.arg, Pair):
                return "or", t.arg.left
        return None

    def _compute_synth(self, t: Term) -> bool:
        match t:
            case Inl() | Inr():
                return False
            case Lam():
                return t.param_ty is not None and self.synth(t.body)
            case Let():
                return self.synth(t.body)
            case Pair():
                return self.synth(t.left) and self.synth(t.right)
            case Fst() | Snd():
                return self.synth(t.expr)
            case Case():
                return self.synth(t.lbody) or self.synth(t.rbody)
            case App():
                return self.synth(t.fn) or (self.synth(t.arg) and self._synth_given_arg(t.fn))
            case Build():
                return self.synth(t.body)
            case ArrayLit():
                return bool(t.elems) and self.synth(t.elems[0])
            case MapA():
                return self.synth(t.arr) and self.synth(t.body)
            case Fold() | Index():
                return self.synth(t.arr)
            case Iter():
                return self.synth(t.init)
            case Scan():
                return self.synth(t.init)
            case Prim():
                p = PRIMITIVES.get(t.op)
                if p is not None and p.int_variant is not None:
                    if isinstance(t.arg, Pair):
                        return self.synth(t.arg.left) or self.synth(t.arg.right)
                    return self.synth(t.arg)
                return True
        return True  # Var Unit Call Ann Length (and errors)

    def _synth_given_arg(self, fn: Term) -> bool:
        match fn:
            case Lam():
                return self.synth(fn.body)
            case Let():
                return self._synth_given_arg(fn.body)
        return self.synth(fn)

    def shape_mismatch(self, t: Term, exp: Type, ctx: Ctx, what: str) -> TypeCheckError:
        """`t` (a pair, injection, lambda, build, map) cannot have the type `exp`."""
        found = None
        if self.synth(t):
            found = self.elab(t, HOLE, _NO_CTX).ty
        elif isinstance(t, Lam) and t.param_ty is not None:
            found = Fun(t.param_ty, HOLE)
        return self.mismatch(ctx, exp, found, what, t)

    def mismatch(self, ctx: Ctx, exp: Type, found, what: str, t: Term,
                 conflict: Conflict | None = None) -> TypeCheckError:
        exp = for_display(exp)
        found = for_display(found) if found is not None else None
        node = ctx.node(exp, found, t)
        message = ctx.message(exp, found, what)
        if conflict is not None:
            here = getattr(node, "loc", None) or self._loc
            reason = conflict_reason(conflict, here)
            if reason:
                message = f"{reason}: {message}" if conflict.kind == "shape" else reason
        return self.error(message, node)

    def conflict_error(self, conflict: Conflict, t: Term, message: str) -> TypeCheckError:
        """An error at t: `message`, after the places of the clash (if any)."""
        reason = conflict_reason(conflict, getattr(t, "loc", None) or self._loc)
        return self.error(f"{reason}: {message}" if reason else message, t)

    def fresh_for(self, exp: Type, subject: str, note: str, origin) -> Type:
        """`exp` with its holes replaced by fresh variables (`exp` itself when it
        has none)."""
        if exp is HOLE:
            return self.u.fresh(subject, note, origin)
        if has_hole(exp):
            return self.u.fill(exp, subject, note, origin)
        return exp

    # ------------------------------------------------------------- the rules

    def _var(self, t: Var, exp, ctx):
        ty = self.env.get(t.name)
        if ty is None:
            raise self.error(self._unknown_name(t.name), t)
        return attrs.evolve(t, ty=ty)

    def _unknown_name(self, name: str, called: bool | str = False) -> str:
        """The error for a name that is not a local variable (nor, if called, a def
        above). The parser makes `g(x)` a Call only for defs above; otherwise
        it is the application of the variable g."""
        if name == self.current:
            return f"def {name} cannot call itself: recursion is not allowed"
        if name in self.later:
            return (f"def {name} is defined below {self.current}: "
                    f"a def can only call the defs defined above it")
        if name in self.defs and not called:
            return f"{name} is a def, not a variable: call it as {name}(...)"
        if called == "applied":  # `g x` or `g(x)` of a name bound nowhere
            msg = f"unknown name {name}: neither a variable nor a def defined above"
            candidates = list(self.env) + list(self.defs)
        elif called:
            msg, candidates = f"unknown def {name}", list(self.defs)
        else:
            msg, candidates = f"unknown variable {name}", list(self.env)
        close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
        if close:
            msg += f"; did you mean {close[0]}?"
        return msg

    def _let(self, t: Let, exp, ctx):  # a generator: see elab
        rhs = yield t.rhs, HOLE, _NO_CTX
        old = self.bind(t.name, rhs.ty)
        body = yield t.body, exp, ctx
        self.unbind(t.name, old)
        return attrs.evolve(t, rhs=rhs, body=body, ty=body.ty)

    def _unit(self, t: Unit, exp, ctx):
        return attrs.evolve(t, ty=UNIT)

    def _pair(self, t: Pair, exp, ctx):
        if exp is HOLE:
            el = er = HOLE
        elif isinstance(exp, Prod):
            el, er = exp.left, exp.right
        else:
            raise self.shape_mismatch(t, exp, ctx, "a pair")
        left = self.elab(t.left, el, Ctx("the first component of the pair"))
        right = self.elab(t.right, er, Ctx("the second component of the pair"))
        return attrs.evolve(t, left=left, right=right, ty=Prod(left.ty, right.ty))

    def _fst(self, t: Fst, exp, ctx):
        e = self.elab(t.expr, Prod(exp, HOLE),
                      _NeedCtx("fst", Prod, "a pair", ctx, lambda p: p.left, t))
        return attrs.evolve(t, expr=e, ty=resolve(e.ty).left)

    def _snd(self, t: Snd, exp, ctx):
        e = self.elab(t.expr, Prod(HOLE, exp),
                      _NeedCtx("snd", Prod, "a pair", ctx, lambda p: p.right, t))
        return attrs.evolve(t, expr=e, ty=resolve(e.ty).right)

    def _inj(self, t, exp, ctx):
        side = "inl" if isinstance(t, Inl) else "inr"
        if exp is not HOLE and not isinstance(exp, Sum):
            raise self.shape_mismatch(t, exp, ctx, f"an injection ({side})")
        mine, other = (HOLE, HOLE) if exp is HOLE else (
            (exp.left, exp.right) if side == "inl" else (exp.right, exp.left))
        # the other side, where not known from the context, is inferred
        given = other
        other = self.fresh_for(other, f"the {'right' if side == 'inl' else 'left'} side of "
                               f"the sum", f"(of the {side} at {loc_text(self._loc)})", t)
        e = self.elab(t.expr, mine, Ctx(f"the argument of {side}"))
        ty = Sum(e.ty, other) if side == "inl" else Sum(other, e.ty)
        if other is not given:
            self._origin_ty[id(t)] = ty
        return attrs.evolve(t, expr=e, ty=ty)

    def _case(self, t: Case, exp, ctx):
        scrut = self.elab(t.scrut, Sum(HOLE, HOLE),
                          _NeedCtx("case", Sum, "a sum (A + B, or Bool)", ctx))
        sty = resolve(scrut.ty)
        a, b = sty.left, sty.right
        left_first = self.synth(t.lbody) or not self.synth(t.rbody)
        if left_first:
            lbody = self._branch(t.lname, a, t.lbody, exp, ctx)
            rbody = self._branch(t.rname, b, t.rbody, lbody.ty,
                                 _BranchCtx(lbody.ty, True, t.lbody.loc))
        else:
            rbody = self._branch(t.rname, b, t.rbody, exp, ctx)
            lbody = self._branch(t.lname, a, t.lbody, rbody.ty,
                                 _BranchCtx(rbody.ty, False, t.rbody.loc))
        return attrs.evolve(t, scrut=scrut, lbody=lbody, rbody=rbody, ty=lbody.ty)

    def _branch(self, name, ty, body, exp, ctx):
        old = self.bind(name, ty)
        out = self.elab(body, exp, ctx)
        self.unbind(name, old)
        return out

    def _lam(self, t: Lam, exp, ctx):
        if exp is HOLE:
            ea, er = HOLE, HOLE
        elif isinstance(exp, Fun):
            ea, er = exp.arg, exp.res
        else:
            raise self.shape_mismatch(t, exp, ctx, "a lambda")
        if t.param_ty is not None:
            p = t.param_ty
            if ea is not HOLE and p != ea:
                conflict = self.u.unify(p, ea, self._loc)
                if conflict is not None:
                    if conflict.via_found or conflict.via_expected:
                        raise self.mismatch(ctx, exp, Fun(p, HOLE), "", t, conflict)
                    raise self.shape_mismatch(t, exp, ctx, "a lambda")
        else:  # where not known from the context, the parameter's type is inferred
            note = f"(the parameter of the lambda at {loc_text(self._loc)})"
            if type(ea) is TVar:
                # the context's variable: the parameter gets its own, bound to it
                # here, so that a clash names this parameter and this place
                p = self.u.fresh(t.name, note, t)
                self.u.unify(p, ea, self._loc)  # p is free: this cannot fail
            else:
                p = self.fresh_for(ea, t.name, note, t)
            if p is not ea:
                self._origin_ty[id(t)] = p
        old = self.bind(t.name, p)
        body = self.elab(t.body, er, Ctx("the body of the lambda"))
        self.unbind(t.name, old)
        captures = tuple(v for v in free_vars(body, trust_captures=True) if v != t.name)
        return attrs.evolve(t, param_ty=p, body=body, ty=Fun(p, body.ty), captures=captures)

    def _app(self, t: App, exp, ctx):
        if isinstance(t.fn, Var) and t.fn.name not in self.env and t.fn.name not in self.defs:
            raise self.error(self._unknown_name(t.fn.name, "applied"), t.fn)
        actx = _AppCtx(ctx, t)
        if self.synth(t.fn) or not self.synth(t.arg):
            fn = self.elab(t.fn, Fun(HOLE, exp), actx)
            fty = resolve(fn.ty)
            arg = self.elab(t.arg, fty.arg, Ctx("the argument of the function"))
        else:
            arg = self.elab(t.arg, HOLE, _NO_CTX)
            fn = self.elab(t.fn, Fun(arg.ty, exp), actx)
            fty = resolve(fn.ty)
        return attrs.evolve(t, fn=fn, arg=arg, ty=fty.res)

    def _call(self, t: Call, exp, ctx):
        local = self.env.get(t.name)
        if local is not None:  # a local variable shadows a def of the same name
            local = resolve(local)
            if type(local) is TVar and len(t.args) == 1:  # a function, to be inferred
                return self._app(App(Var(t.name, loc=t.loc), t.args[0], loc=t.loc), exp, ctx)
            if isinstance(local, Fun) and len(t.args) == 1:
                fn = Var(t.name, loc=t.loc, ty=local)
                self.built(local)
                arg = self.elab(t.args[0], local.arg, Ctx(f"the argument of {t.name}"))
                return App(fn, arg, loc=t.loc, ty=local.res)
            hint = (f"; apply it to one argument, {t.name} e" if isinstance(local, Fun) else "")
            raise self.error(f"{t.name} is a local variable of type {show(local)}, "
                             f"not a def{hint}", t)
        d = self.defs.get(t.name)
        if d is None:
            raise self.error(self._unknown_name(t.name, called=True), t)
        n, m = len(d.params), len(t.args)
        if n != m:
            raise self.error(f"{t.name} takes {n} argument{'s' if n != 1 else ''}, "
                             f"given {m}", t)
        args = tuple(
            self.elab(a, p.ty, Ctx(f"argument {i + 1} ({p.name}) of {t.name}"))
            for i, (a, p) in enumerate(zip(t.args, d.params)))
        return attrs.evolve(t, args=args, ty=d.result)

    def _ann(self, t: Ann, exp, ctx):
        if exp is not HOLE and t.ann != exp:
            self.expect(t.ann, exp, ctx, t)
        return self.elab(t.expr, t.ann, Ctx("the ascribed expression"))

    def _build(self, t: Build, exp, ctx):
        if exp is HOLE:
            eb = HOLE
        elif isinstance(exp, ArrayT):
            eb = exp.elem
        else:
            raise self.shape_mismatch(t, exp, ctx, "an array (build)")
        size = self.elab(t.size, Z, Ctx("the size of build"))
        old = self.bind(t.name, Z)
        body = self.elab(t.body, eb, Ctx("the body of build"))
        self.unbind(t.name, old)
        return attrs.evolve(t, size=size, body=body, ty=ArrayT(body.ty))

    def _array_lit(self, t: ArrayLit, exp, ctx):
        if exp is HOLE:
            eb = HOLE
        elif isinstance(exp, ArrayT):
            eb = exp.elem
        else:
            raise self.shape_mismatch(t, exp, ctx, "an array (literal)")
        if not t.elems:  # where not known from the context, the element type is inferred
            eb = self.fresh_for(eb, "the element type of []", f"(at {loc_text(self._loc)})", t)
            return attrs.evolve(t, ty=ArrayT(eb))
        first = self.elab(t.elems[0], eb, Ctx("the first element of the array literal"))
        rest = [self.elab(e, first.ty,
                          Ctx(f"element {i} of the array literal (all elements have one type)"))
                for i, e in enumerate(t.elems[1:], 1)]
        return attrs.evolve(t, elems=(first, *rest), ty=ArrayT(first.ty))

    def _index(self, t: Index, exp, ctx):
        arr = self.elab(t.arr, ArrayT(exp),
                        _NeedCtx("indexing (!)", ArrayT, "an array", ctx, lambda a: a.elem, t))
        idx = self.elab(t.idx, Z, Ctx("the index of !"))
        return attrs.evolve(t, arr=arr, idx=idx, ty=resolve(arr.ty).elem)

    def _fold(self, t: Fold, exp, ctx):
        arr = self.elab(t.arr, ArrayT(exp),
                        _NeedCtx("fold", ArrayT, "an array", ctx, lambda a: a.elem, t))
        el = resolve(arr.ty).elem
        old = self.bind(t.name, Prod(el, el))
        body = self.elab(t.body, el, Ctx("the body of fold (it combines two elements)"))
        self.unbind(t.name, old)
        return attrs.evolve(t, body=body, arr=arr, ty=el)

    def _iter(self, t: Iter, exp, ctx):
        """`iter n f x`: n : Z, x : T, f : T -> T, gives T. The state's type T is
        the start value's (checked against the expected type)."""
        count = self.elab(t.count, Z, Ctx("the count of iter (the number of steps)"))
        init = self.elab(t.init, exp, Ctx("the start value of iter (iter n f x has the "
                                          "type of x)"))
        state = init.ty
        body = t.body
        old = self.bind(t.name, state)
        if (isinstance(body, App) and isinstance(body.arg, Var) and body.arg.name == t.name
                and t.name not in free_vars(body.fn)):
            # `iter n f x` with f not a lambda literal: the body is `f p`
            fn = self.elab(body.fn, Fun(state, state),
                           Ctx("the function of iter (it maps the state to the next "
                               "state, of the start value's type)"))
            body = attrs.evolve(body, fn=fn, arg=attrs.evolve(body.arg, ty=state),
                                ty=resolve(fn.ty).res)
            self.built(state)
        else:
            body = self.elab(body, state, Ctx("the body of iter's function (it returns "
                                              "the next state, of the start value's type)"))
        self.unbind(t.name, old)
        return attrs.evolve(t, count=count, body=body, init=init, ty=state)

    def _scan(self, t: Scan, exp, ctx):
        """`scan f x a`: x : S, a : Array A, f : S * A -> S, gives Array S. The
        state's type S is the start value's (checked against the expected
        element type)."""
        if exp is HOLE:
            es = HOLE
        elif isinstance(exp, ArrayT):
            es = exp.elem
        else:
            raise self.shape_mismatch(t, exp, ctx, "an array (scan)")
        init = self.elab(t.init, es, Ctx("the start value of scan (scan f x a is the "
                                         "array of the states, of x's type)"))
        arr = self.elab(t.arr, ArrayT(HOLE), _NeedCtx("scan", ArrayT, "an array", ctx))
        state = init.ty
        arg_ty = Prod(state, resolve(arr.ty).elem)
        body = t.body
        old = self.bind(t.name, arg_ty)
        if (isinstance(body, App) and isinstance(body.arg, Var) and body.arg.name == t.name
                and t.name not in free_vars(body.fn)):
            # `scan f x a` with f not a lambda literal: the body is `f p`
            fn = self.elab(body.fn, Fun(arg_ty, state),
                           Ctx("the function of scan (it maps (state, element) to the "
                               "next state, of the start value's type)"))
            body = attrs.evolve(body, fn=fn, arg=attrs.evolve(body.arg, ty=arg_ty),
                                ty=resolve(fn.ty).res)
            self.built(arg_ty)
        else:
            body = self.elab(body, state, Ctx("the body of scan's function (it returns "
                                              "the next state, of the start value's type)"))
        self.unbind(t.name, old)
        return attrs.evolve(t, body=body, init=init, arr=arr, ty=ArrayT(state))

    def _length(self, t: Length, exp, ctx):
        e = self.elab(t.expr, ArrayT(HOLE), _NeedCtx("length", ArrayT, "an array", ctx))
        return attrs.evolve(t, expr=e, ty=Z)

    def _mapa(self, t: MapA, exp, ctx):
        if exp is HOLE:
            eb = HOLE
        elif isinstance(exp, ArrayT):
            eb = exp.elem
        else:
            raise self.shape_mismatch(t, exp, ctx, "an array (map)")
        arr = self.elab(t.arr, ArrayT(HOLE), _NeedCtx("map", ArrayT, "an array", ctx))
        old = self.bind(t.name, resolve(arr.ty).elem)
        body = self.elab(t.body, eb, Ctx("the body of map"))
        self.unbind(t.name, old)
        return attrs.evolve(t, body=body, arr=arr, ty=ArrayT(body.ty))

    def _prim(self, t: Prim, exp, ctx):  # a generator: see elab
        op = t.op
        p = PRIMITIVES.get(op)
        if p is not None and p.derivative is None:
            raise self.error(f"{op} is a target-language primitive; it cannot appear "
                             f"in a source program", t)
        sig = _signature(op)
        if sig is None:
            raise self.error(f"unknown primitive {op}", t)
        sym = _symbol(op)
        if p is not None and p.int_variant is not None:
            arg, base = yield from self._overloaded_arg(t, sym, isinstance(p.arg, Prod),
                                                        isinstance(p.arg, ArrayT))
            if type(base) is TVar:  # R or Z: the variant is chosen when the def is resolved
                res = p.res if p.res == PRIMITIVES[p.int_variant].res else base
                return attrs.evolve(t, arg=arg, ty=res)
            if base == Z:
                op = p.int_variant
            return attrs.evolve(t, op=op, arg=arg, ty=PRIMITIVES[op].res)
        if p is not None and p.int_right_variant is not None and isinstance(t.arg, Pair):
            return self._right_overloaded(t, p, sym)
        arg_ty, res = sig
        if isinstance(arg_ty, Prod) and isinstance(t.arg, Pair):
            left = yield t.arg.left, arg_ty.left, Ctx(f"the first argument of {sym}")
            right = yield t.arg.right, arg_ty.right, Ctx(f"the second argument of {sym}")
            arg = attrs.evolve(t.arg, left=left, right=right, ty=Prod(left.ty, right.ty))
        else:
            where = sym if op in ("LIT", "ILIT") else f"the argument of {sym}"
            arg = self.elab(t.arg, arg_ty, Ctx(where))
        return attrs.evolve(t, arg=arg, ty=res)

    def _right_overloaded(self, t: Prim, p, sym: str):
        """`x ** y`: the first operand of the primitive's type, the second R or Z
        (Z selects the `int_right_variant`)."""
        pair = t.arg
        left = self.elab(pair.left, p.arg.left, Ctx(f"the first argument of {sym}"))
        if self.synth(pair.right):
            right = self.elab(pair.right, HOLE, _NO_CTX)
            rt = self._number(right.ty, sym, pair.right, lambda s: (
                f"the second argument of {sym} must be {show(p.arg.right)} or Z, found {s}"))
        else:
            right = self.elab(pair.right, p.arg.right, Ctx(f"the second argument of {sym}"))
            rt = right.ty
        op = p.int_right_variant if rt == Z else t.op
        arg = attrs.evolve(pair, left=left, right=right, ty=Prod(left.ty, right.ty))
        return attrs.evolve(t, op=op, arg=arg, ty=PRIMITIVES[op].res)

    def _number(self, ty: Type, sym: str, node: Term, message) -> Type:
        """R, Z, or a free variable, which the operator `sym` constrains to R or
        Z (its variant is chosen when the def is resolved); for another type, the
        error `message(the type)` at node."""
        r, via = find(ty)
        if r == R or r == Z:
            return r
        if type(r) is TVar:
            if r.numeric is None:
                r.numeric = (sym, self._loc)
            return r
        msg = message(show(r))
        if via is not None:
            raise self.conflict_error(Conflict("shape", r, r, (via, "R or Z")), node, msg)
        raise self.error(msg, node)

    def _overloaded_arg(self, t: Prim, sym: str, binary: bool, array: bool = False):
        """Elaborate the argument of an R/Z operator (of an Array R / Array Z one
        with `array`); return it and R, Z or a variable constrained to them. A
        generator: the operands of a pair are yielded to elab (see elab)."""
        if array:
            arg = self.elab(t.arg, HOLE, _NO_CTX)
            msg = (lambda _: f"{sym} needs Array R or Array Z, found {show(arg.ty)}")
            aty, via = find(arg.ty)
            if type(aty) is TVar:
                self.expect(arg.ty, ArrayT(HOLE), _NeedCtx(sym, ArrayT, "an array", _NO_CTX),
                            t.arg)
                aty, via = find(arg.ty)
            if not isinstance(aty, ArrayT):
                if via is not None:
                    raise self.conflict_error(Conflict("shape", aty, aty, (via, "an array")),
                                              t.arg, msg(None))
                raise self.error(msg(None), t.arg)
            return arg, self._number(aty.elem, sym, t.arg, msg)
        if not binary:
            arg = self.elab(t.arg, HOLE, _NO_CTX)
            return arg, self._number(arg.ty, sym, t.arg,
                                     lambda s: f"{sym} needs R or Z, found {s}")
        if not isinstance(t.arg, Pair):
            arg = self.elab(t.arg, Prod(HOLE, HOLE),
                            _NeedCtx(sym, Prod, "a pair of two R or two Z", _NO_CTX))
            aty = resolve(arg.ty)

            def msg(_):
                return f"{sym} needs two R or two Z, found {show(arg.ty)}"

            base = self._number(aty.left, sym, t.arg, msg)
            conflict = self.u.unify(aty.right, base, self._loc)
            if conflict is not None:
                raise self.conflict_error(conflict, t.arg, msg(None))
            return arg, resolve(base)
        pair = t.arg
        sides = [pair.left, pair.right]
        first = 0 if self.synth(pair.left) or not self.synth(pair.right) else 1
        second = 1 - first
        sides[first] = yield sides[first], HOLE, _NO_CTX
        base = sides[first].ty
        if base is not R and base is not Z and base != R and base != Z:
            base = self._number(base, sym, sides[first], lambda s: (
                f"{sym} needs R or Z, found {s} in the {_ORD[first]} argument"))
        if type(base) is TVar:
            # the first operand's type is not known yet: the second's decides it,
            # as if the first were used at the second's type
            sides[second] = yield sides[second], HOLE, _NO_CTX
            saved = self._loc
            self._loc = getattr(sides[first], "loc", None) or saved
            try:
                self.expect(base, sides[second].ty,
                            Ctx(f"the {_ORD[first]} argument of {sym}"), sides[first])
            finally:
                self._loc = saved
            base = resolve(base)
        else:  # (a variable bound to R or Z is passed on, for the message of a clash)
            first_ty = sides[first].ty
            sides[second] = yield (sides[second], first_ty if type(first_ty) is TVar
                                   else base, Ctx(f"the {_ORD[second]} argument of {sym}"))
        arg = attrs.evolve(pair, left=sides[0], right=sides[1], ty=Prod(base, base))
        return arg, base


def _resolved_op(op: str, arg_ty: Type) -> str:
    """The variant of the overloaded operator `op` that its (resolved) argument
    type selects: Z operands (or a Z exponent for `**`) make it the Z variant."""
    p = PRIMITIVES.get(op)
    if p is None or arg_ty is UNIT:
        return op
    if p.int_variant is not None and number_base(arg_ty) == Z:
        return p.int_variant
    if p.int_right_variant is not None and isinstance(arg_ty, Prod) and arg_ty.right == Z:
        return p.int_right_variant
    return op


_RULES = {
    Var: _Checker._var, Let: _Checker._let, Unit: _Checker._unit, Pair: _Checker._pair,
    Fst: _Checker._fst, Snd: _Checker._snd, Inl: _Checker._inj, Inr: _Checker._inj,
    Case: _Checker._case, Lam: _Checker._lam, App: _Checker._app, Call: _Checker._call,
    Ann: _Checker._ann, Build: _Checker._build, Index: _Checker._index,
    ArrayLit: _Checker._array_lit,
    Fold: _Checker._fold, Length: _Checker._length, MapA: _Checker._mapa,
    Iter: _Checker._iter,
    Scan: _Checker._scan,
    Prim: _Checker._prim,
}


# ----------------------------------------------------------------- entry points


def check_program(prog: Program) -> Program:
    """Type-check every def, in order; return the checked program (module doc).
    On the caller's thread (a chain of lets is a loop), or on a big-stack
    thread for a program nested too deeply for its stack (chad.deep.run_shallow)."""
    return run_shallow(_check_program, prog)


def _too_deep(source) -> TypeCheckError:
    return TypeCheckError("the program is nested too deeply to check", source=source)


def _check_program(prog: Program) -> Program:
    names = [d.name for d in prog.defs]
    checked: dict[str, Def] = {}
    out = []
    for i, d in enumerate(prog.defs):
        if d.name in checked:
            raise TypeCheckError(f"def {d.name} is defined twice", loc=d.loc, source=prog.source)
        checker = _Checker(dict(checked), prog.source, d.name, frozenset(names[i + 1:]))
        checker._loc = d.loc
        for prm in d.params:
            if prm.name in checker.env:
                raise TypeCheckError(f"parameter {prm.name} of def {d.name} is declared twice",
                                     loc=prm.loc or d.loc, source=prog.source)
            checker.env[prm.name] = prm.ty
        try:
            body = checker.elab(d.body, d.result, Ctx(f"the result of def {d.name}"))
            body = checker.resolve_term(body)
        except RecursionError:
            if not in_deep_work():
                raise  # run_shallow checks it again on a big-stack thread
            raise _too_deep(prog.source) from None
        nd = attrs.evolve(d, body=body)
        checked[d.name] = nd
        out.append(nd)
    return attrs.evolve(prog, defs=tuple(out))


def check_term(term: Term, env: dict[str, Type], defs: dict[str, Def] | None = None,
               expected: Type | None = None) -> Term:
    """Check one term in the context `env`, with the callable `defs`.

    With `expected` the term is checked against it, otherwise its type is inferred.
    Returns the elaborated term (see check_program); raises TypeCheckError.
    """
    exp = HOLE if expected is None else expected

    def go():
        checker = _Checker(dict(defs or {}))  # anew if it runs again
        checker.env = dict(env)
        try:
            return checker.resolve_term(checker.elab(term, exp, _NO_CTX))
        except RecursionError:
            if not in_deep_work():
                raise  # run_shallow checks it again on a big-stack thread
            raise _too_deep(None) from None

    return run_shallow(go)
