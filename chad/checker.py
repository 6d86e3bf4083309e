"""The type checker: bidirectional, for the source language (docs/language.md).

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
    becomes the application `App(Var g, x)`.

The scheme is bidirectional with *partial* expected types. One function,
`_Checker.elab(term, exp, ctx)`, does both modes: `exp` is a type that may contain
holes (`HOLE`, printed `?`); `exp = HOLE` is pure inference, a complete `exp` is
checking, and e.g. `Fun(R, HOLE)` is "a function taking R, result to be inferred".
The result always has a complete `.ty` that fits `exp` (the holes match anything).
`ctx` words the error when the type found does not fit the one expected.

Terms that need their type from outside (an injection, a lambda without an
annotation) use the holes' complement: the known parts of `exp`. Where the order
of checking matters (the branches of a case, the function and the argument of an
application, the operands of `+`), `_Checker.synth` says which parts can be
inferred on their own, and those go first.

See docs/type-checker.md for the rules and for what needs an ascription.
"""

from __future__ import annotations

import difflib

import attrs
from attrs import frozen

from .deep import run_deep
from .errors import TypeCheckError
from .primitives import PRIMITIVES
from .terms import (
    Ann, App, ArrayLit, Build, Call, Case, Def, Fold, Fst, Index, Inl, Inr, Iter, Lam, Length,
    Let, MapA, Pair, Prim, Program, Scan, Snd, Term, Unit, Var, free_vars,
)
from .types import ArrayT, Fun, Prod, R, Sum, Type, UNIT, Z

__all__ = ["check_program", "check_term", "free_vars", "HOLE"]


# ----------------------------------------------------------------- partial types


@frozen
class _Hole(Type):
    """An unknown part of an expected type (printed `?`)."""


HOLE = _Hole()


def _complete(t: Type) -> bool:
    match t:
        case _Hole():
            return False
        case Prod(a, b) | Sum(a, b) | Fun(a, b):
            return _complete(a) and _complete(b)
        case ArrayT(e):
            return _complete(e)
    return True


def _fits(found: Type, exp: Type) -> bool:
    """True when the complete type `found` matches `exp` (holes match anything)."""
    if exp is HOLE or isinstance(exp, _Hole):
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


_PREC_FUN, _PREC_SUM, _PREC_PROD, _PREC_APP = 0, 1, 2, 3


def show(t: Type, prec: int = _PREC_FUN) -> str:
    """Like types.show_type, but a hole prints as `?`."""
    match t:
        case _Hole():
            return "?"
        case ArrayT(elem):
            return _paren(prec > _PREC_PROD, "Array " + show(elem, _PREC_APP))
        case Prod(a, b):
            return _paren(prec > _PREC_PROD, show(a, _PREC_PROD + 1) + " * " + show(b, _PREC_PROD))
        case Sum(a, b):
            return _paren(prec > _PREC_SUM, show(a, _PREC_SUM + 1) + " + " + show(b, _PREC_SUM))
        case Fun(a, b):
            return _paren(prec > _PREC_FUN, show(a, _PREC_FUN + 1) + " -> " + show(b, _PREC_FUN))
    return str(t)


def _paren(cond: bool, s: str) -> str:
    return f"({s})" if cond else s


def describe(exp: Type) -> str:
    """An expected (possibly partial) type in words."""
    match exp:
        case _Hole():
            return "a value of any type"
        case Prod(_Hole(), _Hole()):
            return "a pair"
        case Sum(_Hole(), _Hole()):
            return "a sum"
        case Fun(_Hole(), _Hole()):
            return "a function"
        case ArrayT(_Hole()):
            return "an array"
        case Fun(a, _Hole()):
            return f"a function taking {show(a)}"
        case Fun(_Hole(), b):
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

    def __init__(self, first: Type, first_is_left: bool):
        super().__init__()
        self.first, self.first_is_left = first, first_is_left

    def message(self, exp, found, what):
        other = show(found) if found is not None else what
        a, b = (show(self.first), other) if self.first_is_left else (other, show(self.first))
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
        """Check `t` against the partial type `exp`; the result has a complete .ty."""
        saved = self._loc
        loc = getattr(t, "loc", None)
        if loc is not None:
            self._loc = loc
        try:
            method = _RULES.get(type(t))
            if method is None:
                raise self.error(f"{type(t).__name__} is not a form of the source language", t)
            out = method(self, t, exp, ctx)
            if exp is not HOLE and not _fits(out.ty, exp):
                raise self.mismatch(ctx, exp, out.ty, "", t)
            return out
        finally:
            self._loc = saved

    def synth(self, t: Term) -> bool:
        """Can `t` be elaborated with no expected type? (A guide for ordering.)"""
        key = id(t)
        r = self._synth.get(key)
        if r is None:
            r = self._synth[key] = self._compute_synth(t)
        return r

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

    def mismatch(self, ctx: Ctx, exp: Type, found, what: str, t: Term) -> TypeCheckError:
        return self.error(ctx.message(exp, found, what), ctx.node(exp, found, t))

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

    def _let(self, t: Let, exp, ctx):
        rhs = self.elab(t.rhs, HOLE, _NO_CTX)
        old = self.bind(t.name, rhs.ty)
        body = self.elab(t.body, exp, ctx)
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
        return attrs.evolve(t, expr=e, ty=e.ty.left)

    def _snd(self, t: Snd, exp, ctx):
        e = self.elab(t.expr, Prod(HOLE, exp),
                      _NeedCtx("snd", Prod, "a pair", ctx, lambda p: p.right, t))
        return attrs.evolve(t, expr=e, ty=e.ty.right)

    def _inj(self, t, exp, ctx):
        side = "inl" if isinstance(t, Inl) else "inr"
        if exp is not HOLE and not isinstance(exp, Sum):
            raise self.shape_mismatch(t, exp, ctx, f"an injection ({side})")
        mine, other = (HOLE, HOLE) if exp is HOLE else (
            (exp.left, exp.right) if side == "inl" else (exp.right, exp.left))
        if not _complete(other):
            a, b = ("A", "B")
            if _complete(mine):
                a = show(mine, _PREC_SUM + 1) if side == "inl" else a
                b = show(mine, _PREC_SUM) if side == "inr" else b
            raise self.error("cannot infer the type of this injection: add an ascription, "
                             f"e.g. ({side} e : {a} + {b})", t)
        e = self.elab(t.expr, mine, Ctx(f"the argument of {side}"))
        ty = Sum(e.ty, other) if side == "inl" else Sum(other, e.ty)
        return attrs.evolve(t, expr=e, ty=ty)

    def _case(self, t: Case, exp, ctx):
        scrut = self.elab(t.scrut, Sum(HOLE, HOLE),
                          _NeedCtx("case", Sum, "a sum (A + B, or Bool)", ctx))
        a, b = scrut.ty.left, scrut.ty.right
        left_first = self.synth(t.lbody) or not self.synth(t.rbody)
        if left_first:
            lbody = self._branch(t.lname, a, t.lbody, exp, ctx)
            rbody = self._branch(t.rname, b, t.rbody, lbody.ty, _BranchCtx(lbody.ty, True))
        else:
            rbody = self._branch(t.rname, b, t.rbody, exp, ctx)
            lbody = self._branch(t.lname, a, t.lbody, rbody.ty, _BranchCtx(rbody.ty, False))
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
            if not _fits(t.param_ty, ea):
                raise self.shape_mismatch(t, exp, ctx, "a lambda")
            p = t.param_ty
        elif _complete(ea):
            p = ea
        else:
            raise self.error(f"cannot infer the type of the parameter {t.name} of this lambda: "
                             f"add an annotation, e.g. \\({t.name} : T) -> ...", t)
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
            arg = self.elab(t.arg, fn.ty.arg, Ctx("the argument of the function"))
        else:
            arg = self.elab(t.arg, HOLE, _NO_CTX)
            fn = self.elab(t.fn, Fun(arg.ty, exp), actx)
        return attrs.evolve(t, fn=fn, arg=arg, ty=fn.ty.res)

    def _call(self, t: Call, exp, ctx):
        local = self.env.get(t.name)
        if local is not None:  # a local variable shadows a def of the same name
            if isinstance(local, Fun) and len(t.args) == 1:
                fn = Var(t.name, loc=t.loc, ty=local)
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
        if not _fits(t.ann, exp):
            raise self.mismatch(ctx, exp, t.ann, "", t)
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
        if not t.elems:
            if not _complete(eb):
                raise self.error("the element type of [] is not known: write it, as in "
                                 "([] : Array R)", t)
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
        return attrs.evolve(t, arr=arr, idx=idx, ty=arr.ty.elem)

    def _fold(self, t: Fold, exp, ctx):
        arr = self.elab(t.arr, ArrayT(exp),
                        _NeedCtx("fold", ArrayT, "an array", ctx, lambda a: a.elem, t))
        el = arr.ty.elem
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
                                ty=fn.ty.res)
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
        arg_ty = Prod(state, arr.ty.elem)
        body = t.body
        old = self.bind(t.name, arg_ty)
        if (isinstance(body, App) and isinstance(body.arg, Var) and body.arg.name == t.name
                and t.name not in free_vars(body.fn)):
            # `scan f x a` with f not a lambda literal: the body is `f p`
            fn = self.elab(body.fn, Fun(arg_ty, state),
                           Ctx("the function of scan (it maps (state, element) to the "
                               "next state, of the start value's type)"))
            body = attrs.evolve(body, fn=fn, arg=attrs.evolve(body.arg, ty=arg_ty),
                                ty=fn.ty.res)
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
        old = self.bind(t.name, arr.ty.elem)
        body = self.elab(t.body, eb, Ctx("the body of map"))
        self.unbind(t.name, old)
        return attrs.evolve(t, body=body, arr=arr, ty=ArrayT(body.ty))

    def _prim(self, t: Prim, exp, ctx):
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
            arg, base = self._overloaded_arg(t, sym, isinstance(p.arg, Prod),
                                             isinstance(p.arg, ArrayT))
            if base == Z:
                op = p.int_variant
            return attrs.evolve(t, op=op, arg=arg, ty=PRIMITIVES[op].res)
        if p is not None and p.int_right_variant is not None and isinstance(t.arg, Pair):
            return self._right_overloaded(t, p, sym)
        arg_ty, res = sig
        if isinstance(arg_ty, Prod) and isinstance(t.arg, Pair):
            left = self.elab(t.arg.left, arg_ty.left, Ctx(f"the first argument of {sym}"))
            right = self.elab(t.arg.right, arg_ty.right, Ctx(f"the second argument of {sym}"))
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
            if right.ty not in (p.arg.right, Z):
                raise self.error(f"the second argument of {sym} must be {show(p.arg.right)} "
                                 f"or Z, found {show(right.ty)}", pair.right)
        else:
            right = self.elab(pair.right, p.arg.right, Ctx(f"the second argument of {sym}"))
        op = p.int_right_variant if right.ty == Z else t.op
        arg = attrs.evolve(pair, left=left, right=right, ty=Prod(left.ty, right.ty))
        return attrs.evolve(t, op=op, arg=arg, ty=PRIMITIVES[op].res)

    def _overloaded_arg(self, t: Prim, sym: str, binary: bool, array: bool = False):
        """Elaborate the argument of an R/Z operator (of an Array R / Array Z one
        with `array`); return it and R or Z."""
        if array:
            arg = self.elab(t.arg, HOLE, _NO_CTX)
            if arg.ty not in (ArrayT(R), ArrayT(Z)):
                raise self.error(f"{sym} needs Array R or Array Z, found {show(arg.ty)}", t.arg)
            return arg, arg.ty.elem
        if not binary:
            arg = self.elab(t.arg, HOLE, _NO_CTX)
            if arg.ty not in (R, Z):
                raise self.error(f"{sym} needs R or Z, found {show(arg.ty)}", t.arg)
            return arg, arg.ty
        if not isinstance(t.arg, Pair):
            arg = self.elab(t.arg, Prod(HOLE, HOLE),
                            _NeedCtx(sym, Prod, "a pair of two R or two Z", _NO_CTX))
            if arg.ty not in (Prod(R, R), Prod(Z, Z)):
                raise self.error(f"{sym} needs two R or two Z, found {show(arg.ty)}", t.arg)
            return arg, arg.ty.left
        pair = t.arg
        sides = [pair.left, pair.right]
        first = 0 if self.synth(pair.left) or not self.synth(pair.right) else 1
        second = 1 - first
        sides[first] = self.elab(sides[first], HOLE, _NO_CTX)
        base = sides[first].ty
        if base not in (R, Z):
            raise self.error(f"{sym} needs R or Z, found {show(base)} in the "
                             f"{_ORD[first]} argument", sides[first])
        sides[second] = self.elab(sides[second], base,
                                  Ctx(f"the {_ORD[second]} argument of {sym}"))
        arg = attrs.evolve(pair, left=sides[0], right=sides[1], ty=Prod(base, base))
        return arg, base


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
    """Type-check every def, in order; return the checked program (module doc)."""
    return run_deep(_check_program, prog)


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
        except RecursionError:
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
    checker = _Checker(dict(defs or {}))
    checker.env = dict(env)
    exp = HOLE if expected is None else expected

    def go():
        try:
            return checker.elab(term, exp, _NO_CTX)
        except RecursionError:
            raise _too_deep(None) from None

    return run_deep(go)
