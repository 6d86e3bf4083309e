"""The parser of the source language: text -> core terms (docs/language.md).

    parse_program(text, file="<input>") -> Program
    parse_expr(text, file="<input>", defs=()) -> Term     (defs: names callable as g(...))
    parse_type(text, file="<input>") -> Type

A hand-written recursive-descent parser (binary operators by precedence climbing)
that desugars while it parses, exactly per the table of docs/language.md. See
docs/parser.md for the precedence table, the desugaring and the rules below.
Inputs are parsed in the caller's thread (chains of lets and of operators are
loops: 10,000 nested lets are fine); an input nested too deeply for its stack
(thousands of parentheses) is parsed again in chad.deep's big-stack thread.

* Every node carries `loc`: the position of its first token.
* `g(e1, ..., en)` is a `Call` when `g` is a def defined above the current one and
  no local variable named `g` is in scope; otherwise `g (e)` is an application.
* The desugaring needs binder names (`let (x, y) = e in b`, `if`, `build n f` with
  `f` not a lambda literal). It uses ONE name per file: `p_k` with the smallest k
  such that `p_k` is not a name token anywhere in the file. It can never capture
  a user variable (no user text mentions it); nested uses only shadow binders that
  are dead at that point. Because the choice depends only on the set of names in
  the text, the printer can predict it, which is what makes parse(print(t)) == t
  exact for the sugared forms too (see printer.py).
* Any input (str or bytes) either parses or raises `ParseError`. A failure of the
  parser itself is reported as a ParseError with `internal = True` (a bug).
"""

from __future__ import annotations

import sys

from .deep import in_deep_work, reliable_recursion_limit, run_deep, run_shallow
from .errors import ParseError
from .lexer import (CALL2, EOF, INT, KW, NAME, PREFIX1, PREFIX2, REAL, SYM, Token,
                    error_source, tokenize)
from .terms import (Ann, App, ArrayLit, Build, Call, Case, Def, Fold, Fst, Index, Inl, Inr, Iter, Lam,
                    Length, Let, Loc, MapA, Param, Pair, Prim, Program, Scan, Snd, Term, Unit,
                    Var)
from .types import BOOL, R, Z, UNIT, ArrayT, Fun, Prod, Sum, Type

# Deeper nesting than this (parentheses, lambdas, if, ...) is refused with a
# ParseError rather than risking the recursion limit (chad.deep: 1,000,000 frames;
# one nesting level costs about a dozen frames). Chains of lets, of binary
# operators, of unary minus and of prefix forms are parsed by loops and do not count.
MAX_DEPTH = 20_000

_CMP_OPS = {"<": "LT", "<=": "LE", ">": "GT", ">=": "GE", "==": "EQ", "!=": "NE"}
_LEVEL_OR, _LEVEL_AND, _LEVEL_CMP, _LEVEL_ADD, _LEVEL_MUL, _LEVEL_POW = 1, 2, 3, 4, 5, 6
_BINOPS = {sym: (op, _LEVEL_CMP) for sym, op in _CMP_OPS.items()}
_BINOPS.update({"||": ("OR", _LEVEL_OR), "&&": ("AND", _LEVEL_AND),
                "+": ("ADD", _LEVEL_ADD), "-": ("ADD", _LEVEL_ADD),
                "*": ("MUL", _LEVEL_MUL), "/": ("DIV", _LEVEL_MUL),
                "**": ("POW", _LEVEL_POW)})
_OPEN_KWS = ("let", "if")
_TYPE_NAMES = {"R": R, "Z": Z, "Bool": BOOL}


def fresh_name(used) -> str:
    """The desugaring binder for a text whose name tokens are `used`."""
    k = 1
    while f"p_{k}" in used:
        k += 1
    return f"p_{k}"



def tuple_term(parts: list, loc) -> Term:
    """(e1, ..., en) as the nested pairs (e1, (e2, ... (e_{n-1}, en))), of type
    T1 * T2 * ... * Tn (the product is right-nested: R * R * R = R * (R * R))."""
    out = parts[-1]
    for e in reversed(parts[:-1]):
        out = Pair(e, out, loc=loc)
    return out

class _Parser:
    def __init__(self, text: str, file: str, toks: list[Token], defs=()):
        self.text = text
        self.file = file
        self.toks = toks
        self.i = 0
        self.tok = self.toks[0]
        self.defs = set(defs)  # defs defined above: `g(...)` is a call
        self.bound: dict[str, int] = {}  # local variables in scope (count of binders)
        self.fresh = fresh_name({t.text for t in self.toks if t.kind == NAME})
        self.depth = 0

    # ------------------------------------------------------------- token helpers
    def advance(self) -> Token:
        t = self.tok
        if t.kind != EOF:
            self.i += 1
            self.tok = self.toks[self.i]
        return t

    def at(self, text: str) -> bool:
        t = self.tok
        return t.text == text and (t.kind == SYM or t.kind == KW)

    def loc(self, t: Token | None = None) -> Loc:
        t = self.tok if t is None else t
        loc = t.loc
        if loc is None:
            loc = t.loc = Loc(self.file, t.line, t.col)
        return loc

    def error(self, message: str, t: Token | None = None) -> ParseError:
        return ParseError(message, self.loc(t), error_source(self.text))

    def expected(self, what: str, t: Token | None = None) -> ParseError:
        t = self.tok if t is None else t
        if t.kind == EOF:
            return self.error(f"unexpected end of input: expected {what}", t)
        return self.error(f"expected {what}, found {t.describe()}", t)

    def expect(self, text: str, what: str) -> Token:
        if not self.at(text):
            raise self.expected(what)
        return self.advance()

    def name(self, what: str) -> Token:
        t = self.tok
        if t.kind == NAME:
            return self.advance()
        if t.kind == KW:
            raise self.error(f"a name cannot be a keyword: '{t.text}' (expected {what})")
        raise self.expected(what)

    def enter(self, extra: int = 1) -> None:
        self.depth += extra
        if self.depth > MAX_DEPTH:
            raise self.error(f"the program is nested too deeply (more than {MAX_DEPTH} levels)")

    def bind(self, name: str) -> None:
        self.bound[name] = self.bound.get(name, 0) + 1

    def unbind(self, name: str) -> None:
        c = self.bound[name] - 1
        if c:
            self.bound[name] = c
        else:
            del self.bound[name]

    # ------------------------------------------------------------- programs
    def program(self) -> tuple[Def, ...]:
        defs = []
        while self.tok.kind != EOF:
            if not self.at("def"):
                raise self.expected("'def' to start a definition")
            d = self.definition()
            defs.append(d)
            self.defs.add(d.name)
        return tuple(defs)

    def definition(self) -> Def:
        start = self.advance()
        nt = self.name("the name of the def after 'def'")
        name = nt.text
        self.expect("(", f"'(' and the parameters of {name}, as in def {name}(x : R) : R = ...")
        params: list[Param] = []
        if not self.at(")"):
            while True:
                pt = self.name(f"a parameter name of {name}")
                self.expect(":", f"':' and the type of the parameter {pt.text}")
                params.append(Param(pt.text, self.type_(), loc=self.loc(pt)))
                if self.at(","):
                    self.advance()
                    continue
                if self.at(")"):
                    break
                raise self.expected(f"',' or ')' after the parameter {pt.text}")
        self.advance()
        self.expect(":", f"':' and the result type of {name}")
        result = self.type_()
        self.expect("=", f"'=' and the body of {name}")
        for p in params:
            self.bind(p.name)
        body = self.expr()
        for p in params:
            self.unbind(p.name)
        if self.tok.kind != EOF and not self.at("def"):
            raise self.error(f"unexpected {self.tok.describe()} after the body of {name} "
                             "(expected an operator, the next 'def' or the end of input)")
        return Def(name, tuple(params), result, body, loc=self.loc(start))

    # ------------------------------------------------------------- types
    def type_(self) -> Type:
        """T ::= S ('->' T)?   S ::= P ('+' S)?   P ::= A ('*' P)?   A ::= 'Array' A | atom"""
        self.enter()
        parts = [self.sum_type()]
        while self.at("->"):
            self.advance()
            parts.append(self.sum_type())
        t = parts.pop()
        while parts:
            t = Fun(parts.pop(), t)
        self.depth -= 1
        return t

    def sum_type(self) -> Type:
        parts = [self.prod_type()]
        while self.at("+"):
            self.advance()
            parts.append(self.prod_type())
        t = parts.pop()
        while parts:
            t = Sum(parts.pop(), t)
        return t

    def prod_type(self) -> Type:
        parts = [self.array_type()]
        while self.at("*"):
            self.advance()
            parts.append(self.array_type())
        t = parts.pop()
        while parts:
            t = Prod(parts.pop(), t)
        return t

    def array_type(self) -> Type:
        n = 0
        while self.tok.kind == NAME and self.tok.text == "Array":
            self.advance()
            n += 1
        self.enter(n)
        t = self.atom_type()
        for _ in range(n):
            t = ArrayT(t)
        self.depth -= n
        return t

    def atom_type(self) -> Type:
        t = self.tok
        if t.kind == NAME:
            ty = _TYPE_NAMES.get(t.text)
            if ty is None:
                raise self.error(f"unknown type '{t.text}' (the types are R, Z, (), Bool, "
                                 "Array T, products T * T, sums T + T and functions T -> T)")
            self.advance()
            return ty
        if self.at("("):
            self.advance()
            if self.at(")"):
                self.advance()
                return UNIT
            ty = self.type_()
            self.expect(")", f"')' to close the '(' at {t.line}:{t.col} in the type")
            return ty
        if t.kind == EOF and self.i > 0 and self.toks[self.i - 1].text == "Array":
            raise self.expected("the element type after 'Array'")
        raise self.expected("a type")

    # ------------------------------------------------------------- expressions
    def expr(self) -> Term:
        self.enter()
        t = self.tok
        if (t.kind == KW and t.text in _OPEN_KWS) or (t.kind == SYM and t.text == "\\"):
            e = self.open_form()
        else:
            e = self.ascription()
        self.depth -= 1
        return e

    def ascription(self) -> Term:
        start = self.tok
        e = self.binary(_LEVEL_OR)
        while self.at(":"):
            self.advance()
            e = Ann(e, self.type_(), loc=self.loc(start))
        return e

    def binary(self, min_level: int) -> Term:
        """Binary operators by precedence climbing, loosest first: || and &&
        (left associative), comparisons (non-associative), + - and * / (left
        associative), ** (right associative)."""
        start = self.tok
        a = self.unary()
        while True:
            t = self.tok
            info = _BINOPS.get(t.text) if t.kind == SYM else None
            if info is None or info[1] < min_level:
                return a
            op, level = info
            self.advance()
            if level == _LEVEL_POW:  # right associative: recursion, so it counts as nesting
                self.enter()
                b = self.binary(level)
                self.depth -= 1
            else:
                b = self.binary(level + 1)
            if t.text == "-":
                b = Prim("NEG", b, loc=self.loc(t))
            loc = self.loc(start)
            a = Prim(op, Pair(a, b, loc=loc), loc=loc)
            if level == _LEVEL_CMP:
                nt = self.tok
                if nt.kind == SYM and nt.text in _CMP_OPS:
                    raise self.error("comparisons do not chain (a < b < c is not allowed); "
                                     "compare two values at a time and combine with "
                                     "&&: a < b && b < c")

    def unary(self) -> Term:
        negs = []
        while self.at("-"):
            negs.append(self.loc())
            self.advance()
        n = len(negs)
        self.enter(n)
        e = self.index()
        while negs:
            e = Prim("NEG", e, loc=negs.pop())
        self.depth -= n
        return e

    def index(self) -> Term:
        start = self.tok
        a = self.prefix()
        while self.at("!"):
            self.advance()
            a = Index(a, self.prefix(), loc=self.loc(start))
        return a

    def prefix(self) -> Term:
        """Prefix forms: `fst e` etc. take an argument at this level (`fst f x` is
        `fst (f x)`); `build n f`, `fold f a`, `map f a` take two atoms, `iter n f x`
        and `scan f x a` three."""
        stack = []
        while self.tok.kind == KW and self.tok.text in PREFIX1:
            stack.append(self.advance())
        self.enter(len(stack))
        if self.tok.kind == KW and self.tok.text in PREFIX2:
            e = self.prefix2()
        else:
            e = self.application()
        self.depth -= len(stack)
        while stack:
            kw = stack.pop()
            e = _prefix_node(kw.text, e, self.loc(kw))
        return e

    def prefix2(self) -> Term:
        kw = self.advance()
        loc = self.loc(kw)
        a1 = self.argument(kw.text)
        a2 = self.argument(kw.text)
        if kw.text == "fold" and self.starts_atom():  # fold f z a: with a start value
            return self.fold_from(kw, a1, a2, self.argument(kw.text))
        # iter n f x, scan f x a: a third atom
        third = self.argument(kw.text) if kw.text in ("iter", "scan") else None
        fn = a2 if kw.text in ("build", "iter") else a1
        if isinstance(fn, Lam) and fn.param_ty is None:  # a lambda literal
            name, body = fn.name, fn.body
        else:  # build n f == build n (\p -> f p), likewise fold, map, iter and scan
            name = self.fresh
            body = App(fn, Var(name, loc=fn.loc), loc=fn.loc)
        if kw.text == "iter":
            return Iter(a1, name, body, third, loc=loc)
        if kw.text == "scan":
            return Scan(name, body, a2, third, loc=loc)
        if kw.text == "build":
            return Build(a1, name, body, loc=loc)
        if kw.text == "fold":
            return Fold(name, body, a2, loc=loc)
        return MapA(name, body, a2, loc=loc)

    def fold_from(self, kw: Token, fn: Term, start: Term, arr: Term) -> Term:
        """`fold f z a`: fold f over the array z, a0, ..., a(n-1) (defined also for
        an empty a). Sugar for

            let z' = z in let a' = a in
            fold f (build (length a' + 1) (\\i -> if i == 0 then z' else a' ! (i - 1)))

        with fresh names, so its value, derivative and cost are those of the
        existing forms (docs/language.md, docs/cost-model.md)."""
        loc = self.loc(kw)
        z, a, i, p = self.fresh_names(4)
        zero = Prim("ILIT", Unit(loc=loc), 0, loc=loc)
        one = Prim("ILIT", Unit(loc=loc), 1, loc=loc)
        size = Prim("ADD", Pair(Length(Var(a, loc=loc), loc=loc), one, loc=loc), loc=loc)
        prev = Prim("ADD", Pair(Var(i, loc=loc), Prim("NEG", one, loc=loc), loc=loc), loc=loc)
        elem = Case(Prim("EQ", Pair(Var(i, loc=loc), zero, loc=loc), loc=loc),
                    p, Var(z, loc=loc), p, Index(Var(a, loc=loc), prev, loc=loc), loc=loc)
        items = Build(size, i, elem, loc=loc)
        if isinstance(fn, Lam) and fn.param_ty is None:
            name, body = fn.name, fn.body
        else:
            name = p
            body = App(fn, Var(name, loc=fn.loc), loc=fn.loc)
        folded = Fold(name, body, items, loc=loc)
        return Let(z, start, Let(a, arr, folded, loc=loc), loc=loc)

    def fresh_names(self, k: int) -> list[str]:
        """k desugaring binders that occur nowhere in the text (the first is the
        file's `fresh`)."""
        used = {t.text for t in self.toks if t.kind == NAME}
        out = []
        for _ in range(k):
            name = fresh_name(used)
            used.add(name)
            out.append(name)
        return out

    def application(self) -> Term:
        t = self.tok
        if (t.kind == KW and t.text in _OPEN_KWS) or (t.kind == SYM and t.text == "\\"):
            return self.open_form()  # extends as far to the right as possible
        start = self.tok
        e = self.atom()
        while self.starts_atom():
            e = App(e, self.atom(), loc=self.loc(start))
        self.not_an_argument("an argument of a function")
        return e

    def argument(self, of: str) -> Term:
        if not self.starts_atom():
            self.not_an_argument(f"an argument of '{of}'")
        return self.atom()

    def starts_atom(self) -> bool:
        t = self.tok
        return (t.kind in (NAME, INT, REAL) or (t.kind == SYM and t.text in ("(", "["))
                or (t.kind == KW and (t.text in ("true", "false", "case") or t.text in CALL2)))

    def not_an_argument(self, what: str) -> None:
        """Explain the forms that cannot stand as an argument without parentheses."""
        t = self.tok
        if t.kind == SYM and t.text == "\\":
            raise self.error(f"a lambda as {what} must be in parentheses: (\\x -> ...)")
        if t.kind == KW and t.text in _OPEN_KWS:
            article = "an" if t.text == "if" else "a"
            raise self.error(f"{article} '{t.text}' expression as {what} must be in parentheses")
        if t.kind == KW and (t.text in PREFIX1 or t.text in PREFIX2):
            hint = (f"; to pass the operation itself, write (\\x -> {t.text} x)"
                    if t.text in PREFIX1 else "")
            raise self.error(f"'{t.text} ...' as {what} must be in parentheses{hint}")
        if what.startswith("an argument of '"):
            if t.kind == SYM and t.text == "-":
                raise self.error(f"a negative number as {what} must be in parentheses: (-x)")
            raise self.expected(what)

    def atom(self) -> Term:
        t = self.tok
        k = t.kind
        if k == NAME:
            self.advance()
            if self.at("(") and t.text in self.defs and t.text not in self.bound:
                return self.call(t)
            return Var(t.text, loc=self.loc(t))
        if k == INT:
            self.advance()
            try:
                n = int(t.text)
            except ValueError:  # more digits than int() accepts (as in JSON: chad/values.py)
                raise self.error(f"the integer literal is too long ({len(t.text)} digits; at "
                                 f"most {sys.get_int_max_str_digits()})", t) from None
            loc = self.loc(t)
            return Prim("ILIT", Unit(loc=loc), n, loc=loc)
        if k == REAL:
            self.advance()
            loc = self.loc(t)
            return Prim("LIT", Unit(loc=loc), float(t.text), loc=loc)
        if k == KW:
            if t.text in CALL2:
                return self.builtin_call(t)
            if t.text in ("true", "false"):
                self.advance()
                loc = self.loc(t)
                inj = Inl if t.text == "true" else Inr
                return Ann(inj(Unit(loc=loc), loc=loc), BOOL, loc=loc)
            if t.text == "case":
                return self.case_form()
        if k == SYM and t.text == "(":
            return self.parens()
        if k == SYM and t.text == "[":
            return self.array_literal()
        prev = self.toks[self.i - 1] if self.i > 0 else None
        what = "an expression"
        if prev is not None and prev.kind in (SYM, KW):
            what += f" after {prev.describe()}"
        raise self.expected(what)

    def parens(self) -> Term:
        open_ = self.advance()
        loc = self.loc(open_)
        if self.at(")"):
            self.advance()
            return Unit(loc=loc)
        a = self.expr()
        close = f"')' to close the '(' at {open_.line}:{open_.col}"
        if self.at(","):
            parts = [a]
            while self.at(","):
                self.advance()
                parts.append(self.expr())
            self.expect(")", close)
            return tuple_term(parts, loc)
        self.expect(")", close)
        return a

    def array_literal(self) -> Term:
        """`[e1, ..., en]` (n >= 0)."""
        open_ = self.advance()
        loc = self.loc(open_)
        close = f"']' to close the '[' at {open_.line}:{open_.col}"
        elems = []
        if not self.at("]"):
            self.enter(1)
            while True:
                elems.append(self.expr())
                if not self.at(","):
                    break
                self.advance()
            self.depth -= 1
        self.expect("]", close)
        return ArrayLit(tuple(elems), loc=loc)

    def call(self, name_tok: Token) -> Term:
        self.advance()  # (
        args = []
        if not self.at(")"):
            while True:
                args.append(self.expr())
                if not self.at(","):
                    break
                self.advance()
        self.expect(")", f"',' or ')' in the call of {name_tok.text}")
        return Call(name_tok.text, tuple(args), loc=self.loc(name_tok))

    def builtin_call(self, kw: Token) -> Term:
        """`max(a, b)`, `min(a, b)`, `div(i, j)`, `mod(i, j)`: exactly two arguments,
        the primitive applied to the pair."""
        self.advance()
        shape = f"{kw.text}(a, b)"
        if not self.at("("):
            raise self.expected(f"'(' after '{kw.text}': it is called with two "
                                f"arguments, {shape}")
        self.advance()
        self.enter()
        a = self.expr()
        if not self.at(","):
            raise self.expected(f"',' and the second argument of {shape}")
        self.advance()
        b = self.expr()
        if self.at(","):
            raise self.error(f"{kw.text} takes two arguments: {shape}")
        self.expect(")", f"')' to close {shape}")
        self.depth -= 1
        loc = self.loc(kw)
        return Prim(CALL2[kw.text], Pair(a, b, loc=loc), loc=loc)

    def case_form(self) -> Term:
        kw = self.advance()
        shape = "case e of { inl x -> ... | inr y -> ... }"
        scrut = self.expr()
        self.expect("of", "'of' after the scrutinee of 'case'")
        self.expect("{", f"'{{' after 'of' ({shape})")
        self.expect("inl", f"'inl' to start the first branch ({shape})")
        ln = self.name("the name bound by the inl branch")
        self.expect("->", "'->' after 'inl " + ln.text + "'")
        self.bind(ln.text)
        lbody = self.expr()
        self.unbind(ln.text)
        self.expect("|", f"'|' and the inr branch ({shape})")
        self.expect("inr", f"'inr' to start the second branch ({shape})")
        rn = self.name("the name bound by the inr branch")
        self.expect("->", "'->' after 'inr " + rn.text + "'")
        self.bind(rn.text)
        rbody = self.expr()
        self.unbind(rn.text)
        self.expect("}", f"'}}' to close the 'case' at {kw.line}:{kw.col}")
        return Case(scrut, ln.text, lbody, rn.text, rbody, loc=self.loc(kw))

    # ------------------------------------------------------------- open forms
    def open_form(self) -> Term:
        if self.at("let"):
            return self.let_chain()
        if self.at("if"):
            return self.if_form()
        return self.lambda_form()

    def let_chain(self) -> Term:
        """A chain `let .. in let .. in body`, parsed by a loop (10,000 lets are fine)."""
        frames = []
        while self.at("let"):
            kw = self.advance()
            if self.at("("):
                self.advance()
                x = self.name("the first name of the pair pattern (let (x, y) = e in ...)")
                self.expect(",", "',' and the second name of the pair pattern "
                                 "(let (x, y) = e in ...)")
                pattern = [x, self.name("the second name of the pair pattern")]
                while self.at(","):
                    self.advance()
                    pattern.append(self.name("a name of the tuple pattern"))
                self.expect(")", "')' to close the pair pattern")
                names: tuple[Token, ...] = tuple(pattern)
                shown = "(" + ", ".join(n.text for n in names) + ")"
            else:
                if self.tok.kind not in (NAME, KW):
                    raise self.expected("a name or a pair pattern (x, y) after 'let'")
                names = (self.name("the name bound by 'let'"),)
                shown = names[0].text
            if self.at(":"):
                raise self.error(f"a let binding has no type annotation; write "
                                 f"let {shown} = (e : T) in ...")
            self.expect("=", f"'=' after 'let {shown}'")
            rhs = self.expr()
            if not self.at("in"):
                raise self.expected("'in' after the let binding")
            self.advance()
            frames.append((kw, names, rhs))
            for nt in names:
                self.bind(nt.text)
        body = self.expr()
        for _, names, _ in frames:
            for nt in names:
                self.unbind(nt.text)
        while frames:
            kw, names, rhs = frames.pop()
            loc = self.loc(kw)
            if len(names) == 1:
                body = Let(names[0].text, rhs, body, loc=loc)
            else:  # let p = e in let x = fst p in let y = snd p in body; for more
                # names, the nested pairs: let p2 = snd p in let y = fst p2 in ...
                ps = [self.fresh for _ in range(len(names) - 1)]
                last = names[-1]
                ll = self.loc(last)
                body = Let(last.text, Snd(Var(ps[-1], loc=ll), loc=ll), body, loc=ll)
                for i in range(len(names) - 2, -1, -1):
                    nt = names[i]
                    nl = self.loc(nt)
                    body = Let(nt.text, Fst(Var(ps[i], loc=nl), loc=nl), body, loc=nl)
                    if i > 0:  # p_i = snd p_{i-1}
                        body = Let(ps[i], Snd(Var(ps[i - 1], loc=nl), loc=nl), body, loc=nl)
                body = Let(ps[0], rhs, body, loc=loc)
        return body

    def if_form(self) -> Term:
        kw = self.advance()
        cond = self.expr()
        self.expect("then", "'then' after the condition of 'if'")
        a = self.expr()
        self.expect("else", "'else' and the second branch of 'if' (every 'if' needs an 'else')")
        b = self.expr()
        p = self.fresh  # case c of { inl p -> a | inr p -> b }; p never occurs in a, b
        return Case(cond, p, a, p, b, loc=self.loc(kw))

    def lambda_form(self) -> Term:
        kw = self.advance()
        if self.at("("):
            self.advance()
            nt = self.name("the parameter name of the lambda")
            if self.at(","):
                raise self.error("a lambda takes one parameter and has no pair patterns; "
                                 "write \\p -> let (x, y) = p in ...")
            self.expect(":", "':' and the type of the lambda parameter, as in \\(x : R) -> e")
            ty = self.type_()
            self.expect(")", "')' after the type of the lambda parameter")
        else:
            nt = self.name("the parameter name of the lambda after '\\'")
            ty = None
        if not self.at("->"):
            if self.tok.kind == NAME:
                raise self.error("a lambda takes one parameter: write \\x -> \\y -> e")
            raise self.expected(f"'->' after the lambda parameter {nt.text}")
        self.advance()
        self.bind(nt.text)
        body = self.expr()
        self.unbind(nt.text)
        return Lam(nt.text, ty, body, loc=self.loc(kw))

    def finish(self, what: str) -> None:
        if self.tok.kind != EOF:
            raise self.error(f"unexpected {self.tok.describe()} after the {what}")


def _prefix_node(kw: str, e: Term, loc: Loc) -> Term:
    op = PREFIX1[kw]
    if op is not None:
        return Prim(op, e, loc=loc)
    cls = {"fst": Fst, "snd": Snd, "inl": Inl, "inr": Inr, "length": Length}[kw]
    return cls(e, loc=loc)


# ----------------------------------------------------------------- entry points
def _as_text(text, file: str) -> str:
    if isinstance(text, (bytes, bytearray, memoryview)):
        data = bytes(text)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            before = data[:exc.start].decode("utf-8", "replace")
            lines = before.splitlines(keepends=True) or [""]
            last = lines[-1]
            if last.splitlines() != [last] and last:  # the prefix ends with a line break
                line, col = len(lines) + 1, 1
            else:
                line, col = len(lines), len(last) + 1
            raise ParseError(f"the input is not valid UTF-8 (byte 0x{data[exc.start]:02x} "
                             f"at offset {exc.start})", Loc(file, line, col),
                             error_source(data.decode("utf-8", "replace"))) from None
    if not isinstance(text, str):
        raise TypeError(f"parse: expected str or bytes, got {type(text).__name__}")
    if text.startswith("\ufeff"):  # a byte-order mark
        text = text[1:]
    return text


def _guarded(fn, text, file, *args):
    try:
        return fn(text, file, *args)
    except ParseError:
        raise
    except RecursionError:
        if not in_deep_work():
            raise  # run_shallow parses it again on a big-stack thread
        raise ParseError("the input is nested too deeply to parse") from None
    except Exception as exc:  # a bug in the parser: still a ParseError, but marked
        err = ParseError(f"internal error in the parser ({type(exc).__name__}: {exc}); "
                         "please report this")
        err.internal = True
        raise err from exc


# Work that needs at most this many Python frames runs in the caller's thread;
# more goes to chad.deep.run_deep (a big-stack thread, ~0.2 ms to start).
DIRECT_FRAMES = 5000


def _stack_depth() -> int:
    f, d = sys._getframe(), 0
    while f is not None:
        f, d = f.f_back, d + 1
    return d


def run_maybe_deep(fn, frames: int, *args):
    """fn(*args), directly when `frames` more frames surely fit, else via run_deep."""
    if frames <= DIRECT_FRAMES and _stack_depth() + frames + 100 < reliable_recursion_limit():
        return fn(*args)
    return run_deep(fn, *args)




def _entry(fn, text, file, *extra):
    text = _as_text(text, file)
    toks = _guarded(tokenize, text, file)  # a loop, no recursion
    # chains of lets and operators are loops: on this thread, unless the input
    # is nested too deeply for its stack (then on a big-stack thread)
    return run_shallow(_guarded, fn, text, file, toks, *extra)


def _program(text: str, file: str, toks) -> Program:
    p = _Parser(text, file, toks)
    return Program(p.program(), source=text, file=file)


def _expr(text: str, file: str, toks, defs) -> Term:
    p = _Parser(text, file, toks, defs)
    e = p.expr()
    p.finish("expression")
    return e


def _type(text: str, file: str, toks) -> Type:
    p = _Parser(text, file, toks)
    t = p.type_()
    p.finish("type")
    return t


def parse_program(text: str | bytes, file: str = "<input>") -> Program:
    """Parse a whole program (a sequence of defs)."""
    return _entry(_program, text, file)


def parse_expr(text: str | bytes, file: str = "<input>", defs=()) -> Term:
    """Parse one expression. `defs`: the names that `g(...)` calls (as defs above)."""
    return _entry(_expr, text, file, frozenset(defs))


def parse_type(text: str | bytes, file: str = "<input>") -> Type:
    """Parse a type, e.g. `R * Array R -> R`."""
    return _entry(_type, text, file)
