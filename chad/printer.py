"""The pretty-printer of source terms and programs: the inverse of the parser.

    print_program(p: Program) -> str
    print_term(t: Term, defs=()) -> str     (defs: the def names in scope, as for parse_expr)

Guarantee: for every term built from the source forms that the parser can produce
(see docs/parser.md), `parse_expr(print_term(t, defs), defs=defs) == t` and
`parse_program(print_program(p)) == p` (attrs equality: `loc` and `ty` ignored).
Parentheses are minimal with respect to the precedence table of the parser,
except that `let`, `if`, `case` and lambdas are parenthesised whenever they are
not in a tail position, and an ascription always prints as `(e : T)`.

The printer also shows what cannot be written in the source language, without
the round-trip guarantee: the checker's resolved operators (IADD, INEG, ILT, ...)
print as the surface operators (`+`, `-`, `<`); negative or non-finite literal
constants (only in generated code) print parenthesised, e.g. `(-1.0)`, `(inf)`;
a lambda's `captures` are not printed. Nodes that are not source terms (the EVM
and linear forms of the target language) raise TypeError; `chad.target_printer`
prints those. A subclass of `SourcePrinter` can add `p_<ClassName>` methods.

Sugar. The parser desugars `let (x, y) = e in b`, `if c then a else b` and
`build n f` / `fold f a` / `map f a` / `iter n f x` / `scan f x a` (f not a lambda literal) with a binder
named `p_k`, the first such name that is no name token of the file (parser.py).
The printer re-sugars a core term of one of those shapes exactly when its binder
is the name the parser would choose for the printed text: the first `p_k` that
is not among the names the printer writes. As the sugared binders are not
written, this is a fixed point, and the round trip is exact.
"""

from __future__ import annotations

import math


from .lexer import CALL2, PREFIX1
from .parser import fresh_name, run_maybe_deep
from .terms import (Ann, App, Build, Call, Case, Def, Fold, Fst, Inl, Inr, Iter, Lam, Let, MapA,
                    Pair, Prim, Program, Scan, Snd, Term, Unit, Var, children)
from .types import BOOL, show_type

# Precedence levels: a term of level p printed where level q is required gets
# parentheses when p < q.
(P_OPEN, P_OR, P_AND, P_CMP, P_ADD, P_MUL, P_POW, P_UNARY, P_INDEX, P_PREFIX, P_APP,
 P_ATOM) = 0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12

BINOPS = {
    "ADD": ("+", P_ADD), "IADD": ("+", P_ADD),
    "MUL": ("*", P_MUL), "IMUL": ("*", P_MUL), "DIV": ("/", P_MUL),
    "LT": ("<", P_CMP), "LE": ("<=", P_CMP), "GT": (">", P_CMP), "GE": (">=", P_CMP),
    "EQ": ("==", P_CMP),
    "ILT": ("<", P_CMP), "ILE": ("<=", P_CMP), "IGT": (">", P_CMP), "IGE": (">=", P_CMP),
    "IEQ": ("==", P_CMP), "NE": ("!=", P_CMP), "INE": ("!=", P_CMP),
    "POW": ("**", P_POW), "POWI": ("**", P_POW), "AND": ("&&", P_AND), "OR": ("||", P_OR),
}
# Operands of a binary operator: (left level, right level) by the operator's level.
_OPERANDS = {P_OR: (P_OR, P_AND), P_AND: (P_AND, P_CMP), P_CMP: (P_ADD, P_ADD),
             P_ADD: (P_ADD, P_MUL), P_MUL: (P_MUL, P_POW), P_POW: (P_UNARY, P_POW)}
NEG_OPS = frozenset({"NEG", "INEG"})
PREFIX_OPS = {op: kw for kw, op in PREFIX1.items() if op is not None}  # "SIN" -> "sin"
PREFIX_OPS["ISUM"] = "sum"  # sum on Array Z (the checker's int variant of SUM)
PREFIX_OPS["IABS"] = "abs"  # abs on Z
CALL_OPS = {op: kw for kw, op in CALL2.items()}  # "MAX" -> "max": max(a, b)
WIDTH = 100  # a def body shorter than this (and without lets) goes on the def's line


# ----------------------------------------------------------------- shapes of the sugar
def letpair_shape(t: Let):
    """`let p = e in let x = fst p in let y = snd p in b` -> (x, y, b), else None."""
    b1 = t.body
    if (isinstance(b1, Let) and isinstance(b1.rhs, Fst) and isinstance(b1.rhs.expr, Var)
            and b1.rhs.expr.name == t.name and b1.name != t.name):
        b2 = b1.body
        if (isinstance(b2, Let) and isinstance(b2.rhs, Snd) and isinstance(b2.rhs.expr, Var)
                and b2.rhs.expr.name == t.name and b2.name != t.name):
            return b1.name, b2.name, b2.body
    return None


def fn_shape(name: str, body: Term):
    """The body `f name` of build/fold/map, f not a lambda literal -> f, else None."""
    if (isinstance(body, App) and isinstance(body.arg, Var) and body.arg.name == name
            and not (isinstance(body.fn, Lam) and body.fn.param_ty is None)):
        return body.fn
    return None


def printed_names(roots) -> set[str]:
    """The names the printer writes for these terms, if every sugar shape is sugared.

    (An explicit stack: no recursion.) The binders of the sugar shapes and their
    uses inside the shape are left out.
    """
    names: set[str] = set()
    stack = list(roots)
    while stack:
        t = stack.pop()
        if isinstance(t, Var):
            names.add(t.name)
            continue
        if isinstance(t, Let):
            shape = letpair_shape(t)
            if shape is not None:
                x, y, b = shape
                names.update((x, y))
                stack.extend((t.rhs, b))
                continue
            names.add(t.name)
        elif isinstance(t, Case):
            if t.lname != t.rname:
                names.update((t.lname, t.rname))
        elif isinstance(t, (Build, Fold, MapA, Iter, Scan)):
            f = fn_shape(t.name, t.body)
            if f is not None:
                if isinstance(t, Iter):
                    stack.extend((f, t.count, t.init))
                elif isinstance(t, Scan):
                    stack.extend((f, t.init, t.arr))
                else:
                    stack.extend((f, t.size if isinstance(t, Build) else t.arr))
                continue
            names.add(t.name)
        elif isinstance(t, (Lam, Call)):
            names.add(t.name)
        stack.extend(children(t))
    return names


# ----------------------------------------------------------------- the printer
class SourcePrinter:
    def __init__(self, defs=()):
        self.defs = set(defs)  # defs in scope: a call g(...) is possible
        self.bound: dict[str, int] = {}
        self.out: list[str] = []
        self.star = "p_1"  # the desugaring binder of the printed text
        self._tall: dict[int, bool] = {}

    # ------------------------------------------------------------- entry points
    def term(self, t: Term) -> str:
        if not isinstance(t, Term):
            raise TypeError(f"print_term: expected a Term, got {type(t).__name__}")
        self.star = fresh_name(printed_names([t]))
        self.out = []
        self.emit(t, P_OPEN, 0)
        return "".join(self.out)

    def program(self, p: Program) -> str:
        names = printed_names([d.body for d in p.defs])
        for d in p.defs:
            names.add(d.name)
            names.update(q.name for q in d.params)
        self.star = fresh_name(names)
        chunks = [self.definition(d) for d in p.defs]
        return "\n\n".join(chunks) + ("\n" if chunks else "")

    def definition(self, d: Def) -> str:
        params = ", ".join(f"{q.name} : {show_type(q.ty)}" for q in d.params)
        header = f"def {d.name}({params}) : {show_type(d.result)} ="
        self.out = []
        for q in d.params:
            self.bind(q.name)
        self.emit(d.body, P_OPEN, 2)
        for q in d.params:
            self.unbind(q.name)
        self.defs.add(d.name)
        body = "".join(self.out)
        if "\n" not in body and len(header) + 1 + len(body) <= WIDTH:
            return f"{header} {body}"
        return f"{header}\n  {body}"

    # ------------------------------------------------------------- helpers
    def emit(self, t: Term, prec: int, ind: int) -> None:
        method = getattr(self, "p_" + type(t).__name__, None)
        if method is None or not isinstance(t, Term):
            raise TypeError(f"the source printer cannot print a {type(t).__name__} node: it is "
                            "not a term of the source language (target terms are printed "
                            "by chad.target_printer)")
        method(t, prec, ind)

    def w(self, s: str) -> None:
        self.out.append(s)

    def bind(self, name: str) -> None:
        self.bound[name] = self.bound.get(name, 0) + 1

    def unbind(self, name: str) -> None:
        c = self.bound[name] - 1
        if c:
            self.bound[name] = c
        else:
            del self.bound[name]

    def tall(self, t: Term) -> bool:
        """Does t contain a let (and so print on several lines)?"""
        key = id(t)
        r = self._tall.get(key)
        if r is None:
            r = isinstance(t, Let)
            if not r:
                for c in children(t):
                    if self.tall(c):
                        r = True
                        break
            self._tall[key] = r
        return r

    def nl(self, ind: int) -> None:
        self.out.append("\n" + " " * ind)

    def sugared_if(self, t: Term) -> bool:
        return isinstance(t, Case) and t.lname == t.rname == self.star

    # ------------------------------------------------------------- atoms
    def p_Var(self, t: Var, prec: int, ind: int) -> None:
        if t.name in self.defs and t.name not in self.bound:
            self.w(f"({t.name})")  # `g (x)` would be a call of the def g
        else:
            self.w(t.name)

    def p_Unit(self, t: Unit, prec: int, ind: int) -> None:
        self.w("()")

    def p_Pair(self, t, prec: int, ind: int) -> None:
        self.w("(")
        self.emit(t.left, P_OPEN, ind + 2)
        self.w(", ")
        self.emit(t.right, P_OPEN, ind + 2)
        self.w(")")

    def p_ArrayLit(self, t, prec: int, ind: int) -> None:
        if not t.elems:  # its type may not be known from where it is printed
            self.w("[]" if t.ty is None else f"([] : {show_type(t.ty)})")
            return
        self.w("[")
        for k, e in enumerate(t.elems):
            if k:
                self.w(", ")
            self.emit(e, P_OPEN, ind + 2)
        self.w("]")

    def p_Call(self, t: Call, prec: int, ind: int) -> None:
        self.w(t.name + "(")
        for k, a in enumerate(t.args):
            if k:
                self.w(", ")
            self.emit(a, P_OPEN, ind + 2)
        self.w(")")

    def p_Ann(self, t: Ann, prec: int, ind: int) -> None:
        e = t.expr
        if t.ann == BOOL and isinstance(e, (Inl, Inr)) and isinstance(e.expr, Unit):
            self.w("true" if isinstance(e, Inl) else "false")
            return
        self.w("(")
        self.emit(e, P_OR, ind + 2)
        self.w(f" : {show_type(t.ann)})")

    # ------------------------------------------------------------- primitives
    def p_Prim(self, t: Prim, prec: int, ind: int) -> None:
        op = t.op
        if op in ("LIT", "ILIT") and isinstance(t.arg, Unit):
            self.literal(t)
        elif op in BINOPS and isinstance(t.arg, Pair):
            self.binop(t, prec, ind)
        elif op in NEG_OPS:
            self.open_paren(prec > P_UNARY)
            self.w("- " if isinstance(t.arg, Prim) and t.arg.op in NEG_OPS else "-")
            self.emit(t.arg, P_UNARY, ind)
            self.close_paren(prec > P_UNARY)
        elif op in PREFIX_OPS:
            self.prefix(PREFIX_OPS[op], t.arg, prec, ind)
        elif op in CALL_OPS and isinstance(t.arg, Pair):
            self.w(CALL_OPS[op] + "(")
            self.emit(t.arg.left, P_OPEN, ind + 2)
            self.w(", ")
            self.emit(t.arg.right, P_OPEN, ind + 2)
            self.w(")")
        else:
            self.prim_other(t, prec, ind)

    def prim_other(self, t: Prim, prec: int, ind: int) -> None:
        """A primitive with no surface syntax (override to print target primitives)."""
        if t.op in BINOPS or t.op in CALL_OPS:  # applied to something that is not a pair
            self.open_paren(prec > P_APP)
            sym = BINOPS[t.op][0] if t.op in BINOPS else CALL_OPS[t.op]
            self.w(f"({sym}) ")
            self.emit(t.arg, P_ATOM, ind)
            self.close_paren(prec > P_APP)
            return
        raise TypeError(f"the source printer cannot print the primitive {t.op}: it has no "
                        "source syntax (target terms are printed by chad.target_printer)")

    def literal(self, t: Prim) -> None:
        c = t.const
        if t.op == "LIT":
            c = float(c)
            plain = math.isfinite(c) and math.copysign(1.0, c) > 0
        else:
            c = int(c)
            plain = c >= 0
        s = repr(c)
        self.w(s if plain else f"({s})")

    def binop(self, t: Prim, prec: int, ind: int) -> None:
        sym, level = BINOPS[t.op]
        lp, rp = _OPERANDS[level]
        a, b = t.arg.left, t.arg.right
        if level == P_ADD and isinstance(b, Prim) and b.op in NEG_OPS:
            sym, b = "-", b.arg  # a + (-b) is written a - b
        self.open_paren(prec > level)
        self.emit(a, lp, ind)
        self.w(f" {sym} ")
        self.emit(b, rp, ind)
        self.close_paren(prec > level)

    def open_paren(self, cond: bool) -> None:
        if cond:
            self.w("(")

    def close_paren(self, cond: bool) -> None:
        if cond:
            self.w(")")

    # ------------------------------------------------------------- prefix forms
    def prefix(self, kw: str, arg: Term, prec: int, ind: int) -> None:
        self.open_paren(prec > P_PREFIX)
        self.w(kw + " ")
        self.emit(arg, P_ATOM, ind)
        self.close_paren(prec > P_PREFIX)

    def p_Fst(self, t, prec, ind):
        self.prefix("fst", t.expr, prec, ind)

    def p_Snd(self, t, prec, ind):
        self.prefix("snd", t.expr, prec, ind)

    def p_Inl(self, t, prec, ind):
        self.injection("inl", t, prec, ind)

    def p_Inr(self, t, prec, ind):
        self.injection("inr", t, prec, ind)

    def injection(self, kw: str, t, prec, ind):
        """An injection of a checked (or generated) term knows its type: print it
        with an ascription, so that the printed program type checks again (the
        checker needs the type of an injection). Parsed terms have ty None."""
        if t.ty is None:
            self.prefix(kw, t.expr, prec, ind)
        elif t.ty == BOOL and isinstance(t.expr, Unit):
            self.w("true" if kw == "inl" else "false")
        else:
            self.w("(")
            self.prefix(kw, t.expr, P_OR, ind + 2)
            self.w(f" : {show_type(t.ty)})")

    def p_Length(self, t, prec, ind):
        self.prefix("length", t.expr, prec, ind)

    def p_Build(self, t: Build, prec: int, ind: int) -> None:
        self.open_paren(prec > P_PREFIX)
        self.w("build ")
        self.emit(t.size, P_ATOM, ind)
        self.w(" ")
        self.function(t.name, t.body, ind)
        self.close_paren(prec > P_PREFIX)

    def p_Fold(self, t: Fold, prec: int, ind: int) -> None:
        self.open_paren(prec > P_PREFIX)
        self.w("fold ")
        self.function(t.name, t.body, ind)
        self.w(" ")
        self.emit(t.arr, P_ATOM, ind)
        self.close_paren(prec > P_PREFIX)

    def p_MapA(self, t: MapA, prec: int, ind: int) -> None:
        self.open_paren(prec > P_PREFIX)
        self.w("map ")
        self.function(t.name, t.body, ind)
        self.w(" ")
        self.emit(t.arr, P_ATOM, ind)
        self.close_paren(prec > P_PREFIX)

    def p_Iter(self, t: Iter, prec: int, ind: int) -> None:
        self.open_paren(prec > P_PREFIX)
        self.w("iter ")
        self.emit(t.count, P_ATOM, ind)
        self.w(" ")
        self.function(t.name, t.body, ind)
        self.w(" ")
        self.emit(t.init, P_ATOM, ind)
        self.close_paren(prec > P_PREFIX)

    def p_Scan(self, t: Scan, prec: int, ind: int) -> None:
        self.open_paren(prec > P_PREFIX)
        self.w("scan ")
        self.function(t.name, t.body, ind)
        self.w(" ")
        self.emit(t.init, P_ATOM, ind)
        self.w(" ")
        self.emit(t.arr, P_ATOM, ind)
        self.close_paren(prec > P_PREFIX)

    def function(self, name: str, body: Term, ind: int) -> None:
        """The function argument of build/fold/map: `f` or `(\\name -> body)`."""
        f = fn_shape(name, body) if name == self.star else None
        if f is not None:
            self.emit(f, P_ATOM, ind)
            return
        self.w("(")
        self.lambda_(name, None, body, ind + 2)
        self.w(")")

    # ------------------------------------------------------------- application
    def p_App(self, t: App, prec: int, ind: int) -> None:
        self.open_paren(prec > P_APP)
        self.emit(t.fn, P_APP, ind)
        self.w(" ")
        self.emit(t.arg, P_ATOM, ind)
        self.close_paren(prec > P_APP)

    def p_Index(self, t, prec: int, ind: int) -> None:
        self.open_paren(prec > P_INDEX)
        self.emit(t.arr, P_INDEX, ind)
        self.w(" ! ")
        self.emit(t.idx, P_PREFIX, ind)
        self.close_paren(prec > P_INDEX)

    # ------------------------------------------------------------- open forms
    def p_Lam(self, t: Lam, prec: int, ind: int) -> None:
        paren = prec > P_OPEN
        self.open_paren(paren)
        self.lambda_(t.name, t.param_ty, t.body, ind + 2 if paren else ind)
        self.close_paren(paren)

    def lambda_(self, name: str, ty, body: Term, ind: int) -> None:
        self.w(f"\\{name} -> " if ty is None else f"\\({name} : {show_type(ty)}) -> ")
        self.bind(name)
        if self.tall(body):
            self.out[-1] = self.out[-1].rstrip()
            self.nl(ind + 2)
            self.emit(body, P_OPEN, ind + 2)
        else:
            self.emit(body, P_OPEN, ind)
        self.unbind(name)

    def p_Let(self, t: Let, prec: int, ind: int) -> None:
        paren = prec > P_OPEN
        self.open_paren(paren)
        if paren:
            ind += 2
        names: list[str] = []
        while isinstance(t, Let):
            shape = letpair_shape(t) if t.name == self.star else None
            if shape is not None:
                x, y, body = shape
                self.w(f"let ({x}, {y}) =")
                new = (x, y)
            else:
                body = t.body
                self.w(f"let {t.name} =")
                new = (t.name,)
            if self.tall(t.rhs):
                self.nl(ind + 2)
                self.emit(t.rhs, P_OPEN, ind + 2)
                self.nl(ind)
                self.w("in")
            else:
                self.w(" ")
                self.emit(t.rhs, P_OPEN, ind)
                self.w(" in")
            self.nl(ind)
            for n in new:
                self.bind(n)
                names.append(n)
            t = body
        self.emit(t, P_OPEN, ind)
        for n in names:
            self.unbind(n)
        self.close_paren(paren)

    def p_Case(self, t: Case, prec: int, ind: int) -> None:
        paren = prec > P_OPEN
        self.open_paren(paren)
        if paren:
            ind += 2
        tall = self.tall(t)
        if self.sugared_if(t):
            self.w("if ")
            self.emit(t.scrut, P_OPEN, ind + 2)
            self.bind(t.lname)
            if not tall:
                self.w(" then ")
                self.emit(t.lbody, P_OPEN, ind)
                self.w(" else ")
                self.emit(t.rbody, P_OPEN, ind)
            else:
                self.w(" then")
                self.nl(ind + 2)
                self.emit(t.lbody, P_OPEN, ind + 2)
                self.nl(ind)
                if self.sugared_if(t.rbody):  # else if ...
                    self.w("else ")
                    self.emit(t.rbody, P_OPEN, ind)
                else:
                    self.w("else")
                    self.nl(ind + 2)
                    self.emit(t.rbody, P_OPEN, ind + 2)
            self.unbind(t.lname)
        else:
            self.w("case ")
            self.emit(t.scrut, P_OPEN, ind + 2)
            self.w(f" of {{ inl {t.lname} ->")
            branch_ind = ind + 4 if tall else ind
            sep = self.nl if tall else (lambda _ind: self.w(" "))
            sep(branch_ind)
            self.bind(t.lname)
            self.emit(t.lbody, P_OPEN, branch_ind)
            self.unbind(t.lname)
            sep(ind + 2)
            self.w(f"| inr {t.rname} ->")
            sep(branch_ind)
            self.bind(t.rname)
            self.emit(t.rbody, P_OPEN, branch_ind)
            self.unbind(t.rname)
            sep(ind)
            self.w("}")
        self.close_paren(paren)


# ----------------------------------------------------------------- entry points
def tree_depth(roots) -> int:
    """The depth of the deepest node (an explicit stack: no recursion)."""
    best = 0
    stack = [(t, 1) for t in roots]
    while stack:
        t, d = stack.pop()
        if d > best:
            best = d
        if isinstance(t, Term):
            stack.extend((c, d + 1) for c in children(t))
    return best


# The printer uses at most this many frames per level of the term.
_FRAMES_PER_LEVEL = 6


def print_term(t: Term, defs=()) -> str:
    """The surface syntax of a source term. `defs`: the def names callable in t."""
    frames = _FRAMES_PER_LEVEL * tree_depth([t]) + 50
    return run_maybe_deep(lambda: SourcePrinter(defs).term(t), frames)


def print_program(p: Program) -> str:
    """The surface syntax of a program: its defs, separated by blank lines."""
    frames = _FRAMES_PER_LEVEL * tree_depth([d.body for d in p.defs]) + 50
    return run_maybe_deep(lambda: SourcePrinter().program(p), frames)
