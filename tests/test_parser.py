"""The lexer and parser: desugaring, precedence, calls, locations, errors."""

from __future__ import annotations

import pytest

from chad import parser as parser_mod
from chad.deep import run_deep
from chad.errors import ParseError
from chad.lexer import KEYWORDS, is_name, tokenize
from chad.parser import MAX_DEPTH, parse_expr, parse_program, parse_type
from chad.terms import (Ann, App, Build, Call, Case, Fold, Fst, Index, Inl, Inr, Lam, Length, Let,
                        MapA, Pair, Prim, Snd, Unit, Var)
from chad.types import BOOL, R, UNIT, Z, ArrayT, Fun, Prod, Sum
from tests.strategies_syntax import DEEP, parsed_deep_lets

run_deep(lambda: None)  # raise the recursion limit now, not inside a hypothesis test

x, y, z, f, a, n = (Var(s) for s in "xyzfan")


def lit(c):
    return Prim("LIT", Unit(), float(c))


def ilit(k):
    return Prim("ILIT", Unit(), k)


def op2(op, l, r):
    return Prim(op, Pair(l, r))


def add(l, r):
    return op2("ADD", l, r)


def mul(l, r):
    return op2("MUL", l, r)


def neg(e):
    return Prim("NEG", e)


TRUE = Ann(Inl(Unit()), BOOL)
FALSE = Ann(Inr(Unit()), BOOL)


# ----------------------------------------------------------------- desugaring table
@pytest.mark.parametrize("src, core", [
    ("a + b", add(a, Var("b"))),
    ("a * b", mul(a, Var("b"))),
    ("a / b", op2("DIV", a, Var("b"))),
    ("-a", neg(a)),
    ("a - b", add(a, neg(Var("b")))),
    ("a < b", op2("LT", a, Var("b"))),
    ("a <= b", op2("LE", a, Var("b"))),
    ("a > b", op2("GT", a, Var("b"))),
    ("a >= b", op2("GE", a, Var("b"))),
    ("a == b", op2("EQ", a, Var("b"))),
    ("2.5", lit(2.5)),
    ("-2.0", neg(lit(2.0))),
    ("3", ilit(3)),
    ("true", TRUE),
    ("false", FALSE),
    ("sign x", Prim("SIGN", x)),
    ("exp x", Prim("EXP", x)),
    ("log x", Prim("LOG", x)),
    ("sin x", Prim("SIN", x)),
    ("cos x", Prim("COS", x)),
    ("tanh x", Prim("TANH", x)),
    ("sqrt x", Prim("SQRT", x)),
    ("toreal n", Prim("TOREAL", n)),
    ("sum a", Prim("SUM", a)),
    ("length a", Length(a)),
    ("fst x", Fst(x)),
    ("snd x", Snd(x)),
    ("inl x", Inl(x)),
    ("inr x", Inr(x)),
    ("a ! n", Index(a, n)),
    ("()", Unit()),
    ("(x, y)", Pair(x, y)),
    ("((x))", x),
    ("x : R", Ann(x, R)),
    ("\\x -> x", Lam("x", None, x)),
    ("\\(x : R) -> x", Lam("x", R, x)),
    ("f x", App(f, x)),
    ("let x = y in x", Let("x", y, x)),
    ("let (x, y) = z in x", Let("p_1", z, Let("x", Fst(Var("p_1")),
                                               Let("y", Snd(Var("p_1")), x)))),
    ("if x then y else z", Case(x, "p_1", y, "p_1", z)),
    ("case x of { inl y -> y | inr z -> z }", Case(x, "y", y, "z", z)),
    ("build n (\\i -> i)", Build(n, "i", Var("i"))),
    ("build n f", Build(n, "p_1", App(f, Var("p_1")))),
    ("build n (\\(i : Z) -> i)", Build(n, "p_1", App(Lam("i", Z, Var("i")), Var("p_1")))),
    ("fold (\\p -> fst p) a", Fold("p", Fst(Var("p")), a)),
    ("fold f a", Fold("p_1", App(f, Var("p_1")), a)),
    ("map (\\x -> x) a", MapA("x", x, a)),
    ("map f a", MapA("p_1", App(f, Var("p_1")), a)),
])
def test_desugaring(src, core):
    assert parse_expr(src) == core


def test_literals():
    assert parse_expr("1e-300") == lit(1e-300)
    assert parse_expr("2.5e10") == lit(2.5e10)
    assert parse_expr("2.5E+10") == lit(2.5e10)
    assert parse_expr("2e-3") == lit(0.002)
    assert parse_expr("007") == ilit(7)
    assert parse_expr("123456789012345678901234567890") == ilit(123456789012345678901234567890)
    assert parse_expr("5e-324").const == 5e-324
    assert parse_expr("1.7976931348623157e308").const == 1.7976931348623157e308
    assert isinstance(parse_expr("1.0").const, float) and isinstance(parse_expr("1").const, int)


def test_fresh_names_avoid_every_name_in_the_file():
    t = parse_expr("let p_1 = 1.0 in let p_2 = p_1 in if p_2 < p_1 then p_1 else p_2")
    assert t.body.body.lname == t.body.body.rname == "p_3"
    # one name per file: nested desugarings share it (they only shadow dead binders)
    t = parse_expr("let (a, b) = x in let (c, d) = a in if c then b else d")
    assert t.name == "p_1" and t.body.body.body.name == "p_1"
    # the name is chosen over the whole program, def names and parameters included
    p = parse_program("def p_1(p_2 : R) : R = p_2\ndef g(x : R) : R = if x < 0.0 then x else x")
    assert p.defs[1].body.lname == "p_3"


# ----------------------------------------------------------------- precedence
@pytest.mark.parametrize("src, core", [
    ("a + b * c", add(a, mul(Var("b"), Var("c")))),
    ("a * b + c", add(mul(a, Var("b")), Var("c"))),
    ("a - b - c", add(add(a, neg(Var("b"))), neg(Var("c")))),
    ("a - -b", add(a, neg(neg(Var("b"))))),
    ("a * -b", mul(a, neg(Var("b")))),
    ("a / b * c", mul(op2("DIV", a, Var("b")), Var("c"))),
    ("-a * b", mul(neg(a), Var("b"))),
    ("-a ! n", neg(Index(a, n))),
    ("- - x", neg(neg(x))),
    ("a ! n ! x", Index(Index(a, n), x)),
    ("f x ! n", Index(App(f, x), n)),
    ("f x y", App(App(f, x), y)),
    ("f (x y)", App(f, App(x, y))),
    ("sin x * y", mul(Prim("SIN", x), y)),
    ("sin f x", Prim("SIN", App(f, x))),
    ("fst fst x", Fst(Fst(x))),
    ("fst x ! n", Index(Fst(x), n)),
    ("-sin x", neg(Prim("SIN", x))),
    ("sum map f a", Prim("SUM", MapA("p_1", App(f, Var("p_1")), a))),
    ("build n f ! x", Index(Build(n, "p_1", App(f, Var("p_1"))), x)),
    ("a < b + c", op2("LT", a, add(Var("b"), Var("c")))),
    ("a + b < c", op2("LT", add(a, Var("b")), Var("c"))),
    ("a < b : Bool", Ann(op2("LT", a, Var("b")), BOOL)),
    ("x : R : R", Ann(Ann(x, R), R)),
    ("\\x -> x : R", Lam("x", None, Ann(x, R))),
    ("let x = y in x + y", Let("x", y, add(x, y))),
    ("if x then y else y + z", Case(x, "p_1", y, "p_1", add(y, z))),
    ("x + let y = x in y", add(x, Let("y", x, y))),
    ("x * \\y -> y", mul(x, Lam("y", None, y))),
    ("- let y = x in y", neg(Let("y", x, y))),
    ("f case x of { inl y -> y | inr z -> z } y", App(App(f, Case(x, "y", y, "z", z)), y)),
    ("(\\x -> x) y", App(Lam("x", None, x), y)),
    ("fst (x, y)", Fst(Pair(x, y))),
    ("inl () : () + R", Ann(Inl(Unit()), Sum(UNIT, R))),
])
def test_precedence(src, core):
    assert parse_expr(src) == core


@pytest.mark.parametrize("src, ty", [
    ("R", R), ("Z", Z), ("()", UNIT), ("Bool", BOOL), ("(R)", R),
    ("R * R * R", Prod(R, Prod(R, R))),
    ("(R * R) * R", Prod(Prod(R, R), R)),
    ("R + R + R", Sum(R, Sum(R, R))),
    ("R * R + R", Sum(Prod(R, R), R)),
    ("R + R * R", Sum(R, Prod(R, R))),
    ("R -> R -> R", Fun(R, Fun(R, R))),
    ("(R -> R) -> R", Fun(Fun(R, R), R)),
    ("R + R -> R * R", Fun(Sum(R, R), Prod(R, R))),
    ("Array R * R", Prod(ArrayT(R), R)),
    ("Array (R * R)", ArrayT(Prod(R, R))),
    ("Array Array Z", ArrayT(ArrayT(Z))),
    ("Array (Array Z) -> Bool", Fun(ArrayT(ArrayT(Z)), BOOL)),
])
def test_types(src, ty):
    assert parse_type(src) == ty
    assert parse_expr(f"x : {src}") == Ann(x, ty)


# ----------------------------------------------------------------- calls vs application
def test_call_of_a_def_above():
    p = parse_program("def g(x : R, y : R) : R = x\n"
                      "def h(x : R) : R = g(x, x) + g (x, x) + g((x, x))")
    body = p.defs[1].body
    assert body == add(add(Call("g", (x, x)), Call("g", (x, x))), Call("g", (Pair(x, x),)))
    assert parse_program("def g() : R = 1.0\ndef h() : R = g()").defs[1].body == Call("g", ())


def test_call_needs_a_def_above_and_not_shadowed():
    # a def below (or the def itself) is not callable: an application of a variable
    p = parse_program("def f(x : R) : R = g(x)\ndef g(x : R) : R = f(x)")
    assert p.defs[0].body == App(Var("g"), x)
    assert p.defs[1].body == Call("f", (x,))
    # a parameter, let, lambda or case binder named like a def shadows it
    p = parse_program("def g(x : R) : R = x\n"
                      "def h(g : R -> R) : R = g(1.0)\n"
                      "def k(x : R) : R = (let g = \\y -> y in g(x)) + g(x)\n"
                      "def m(x : R) : R = (\\g -> g(x)) (\\y -> y) + g(x)\n"
                      "def c(s : R + R) : R = case s of { inl g -> g(1.0) | inr y -> g(y) }\n")
    assert p.defs[1].body == App(Var("g"), lit(1))
    assert p.defs[2].body == add(Let("g", Lam("y", None, y), App(Var("g"), x)), Call("g", (x,)))
    assert p.defs[3].body == add(App(Lam("g", None, App(Var("g"), x)), Lam("y", None, y)),
                                 Call("g", (x,)))
    assert p.defs[4].body == Case(Var("s"), "g", App(Var("g"), lit(1)), "y", Call("g", (y,)))
    # a def name without parentheses is a variable (the checker explains)
    assert parse_program("def g(x : R) : R = x\ndef h(x : R) : R = g x").defs[1].body == \
        App(Var("g"), x)


def test_parse_expr_takes_the_def_names():
    assert parse_expr("g(x)") == App(Var("g"), x)
    assert parse_expr("g(x)", defs=["g"]) == Call("g", (x,))
    assert parse_expr("(g) (x)", defs=["g"]) == App(Var("g"), x)


# ----------------------------------------------------------------- programs and locations
def test_program_structure_and_locations():
    src = ("# a comment\n"
           "def f(x : R, n : Z) : R =\n"
           "  let y = x * x in   # another\n"
           "  y + toreal n\n"
           "\n"
           "def g(a : Array R) : Bool = a ! 0 < 1.0\n")
    p = parse_program(src, "f.chad")
    assert [d.name for d in p.defs] == ["f", "g"]
    assert p.source == src and p.file == "f.chad"
    f_, g_ = p.defs
    assert [(q.name, q.ty) for q in f_.params] == [("x", R), ("n", Z)]
    assert f_.result == R and g_.result == BOOL
    assert str(f_.loc) == "f.chad:2:1" and str(f_.params[1].loc) == "f.chad:2:14"
    let = f_.body
    assert (let.loc.line, let.loc.col) == (3, 3)
    assert (let.rhs.loc.line, let.rhs.loc.col) == (3, 11)  # x * x starts at x
    assert (let.rhs.arg.right.loc.line, let.rhs.arg.right.loc.col) == (3, 15)
    plus = let.body
    assert (plus.loc.line, plus.loc.col) == (4, 3)
    toreal = plus.arg.right
    assert (toreal.loc.line, toreal.loc.col) == (4, 7)
    assert (toreal.arg.loc.line, toreal.arg.loc.col) == (4, 14)
    lt = g_.body
    assert (lt.loc.line, lt.loc.col) == (6, 29) and (lt.arg.right.loc.col) == 37


def test_every_node_has_a_location():
    from chad.printer import children

    src = ("def g(x : R) : R = x\n"
           "def f(a : Array R, s : R + R, b : Bool) : R =\n"
           "  let (u, v) = (1.0, 2) in\n"
           "  let w = if b then -u else u - 3e-2 in\n"
           "  sum (map (\\y -> y * w) a) + fold (\\p -> fst p) a + sum (map (\\(q : R) -> q) a)\n"
           "  + (build (length a) (\\i -> toreal i) ! 0 : R) + g(w) + sign w\n"
           "  + case s of { inl l -> l | inr r -> (\\k -> k) r } + (if true then 1.0 else 0.0)\n")
    for d in parse_program(src).defs:
        stack = [d.body]
        while stack:
            t = stack.pop()
            assert t.loc is not None and t.loc.line >= 1, t
            stack.extend(children(t))


def test_line_breaks_and_tabs_are_counted_like_splitlines():
    for nl in ("\n", "\r\n", "\r", "\f", "\v", "\u2028"):
        src = f"def f(x : R) : R ={nl}\tx +{nl}  $"
        with pytest.raises(ParseError) as info:
            parse_program(src)
        e = info.value
        assert (e.loc.line, e.loc.col) == (3, 3)
        assert src.splitlines()[e.loc.line - 1][e.loc.col - 1] == "$"
    assert parse_program("\ufeffdef f(x : R) : R = x").defs[0].name == "f"


def test_bytes_input():
    assert parse_program(b"def f(x : R) : R = x").defs[0].name == "f"
    with pytest.raises(ParseError, match="not valid UTF-8") as info:
        parse_program(b"def f(x : R) : R =\n  x \xff")
    assert (info.value.loc.line, info.value.loc.col) == (2, 5)


def test_lexer():
    toks = tokenize("let x' = 1.5e-3 in x'<=-2 # c\n!")
    assert [(t.kind, t.text) for t in toks] == [
        ("keyword", "let"), ("name", "x'"), ("symbol", "="), ("real", "1.5e-3"),
        ("keyword", "in"), ("name", "x'"), ("symbol", "<="), ("symbol", "-"), ("int", "2"),
        ("symbol", "!"), ("end", "")]
    assert is_name("x_1'") and not is_name("let") and not is_name("1x") and not is_name("")
    assert {"let", "in", "sum", "map", "fst", "true", "def"} <= KEYWORDS
    assert "R" not in KEYWORDS  # type names are names outside types
    assert parse_expr("let R = 1.0 in R : R") == Let("R", lit(1), Ann(Var("R"), R))


def test_deep_nesting_parses():
    k = DEEP
    t = parsed_deep_lets().defs[0].body
    assert t.loc.line == 2 and t.body.loc.line == 3
    for i in range(1, k + 1):
        assert isinstance(t, Let) and t.name == f"x{i}"
        t = t.body
    assert t == Var(f"x{k}")
    t = parse_expr(" + ".join(["x"] * k))
    depth = 0
    while isinstance(t, Prim):
        t, depth = t.arg.left, depth + 1
    assert depth == k - 1
    # real nesting (parentheses, lambdas, ...) is fine up to MAX_DEPTH
    assert parse_expr("(" * 10_000 + "x" + ")" * 10_000) == x
    assert MAX_DEPTH >= 10_000


def test_frames_per_nesting_level_fit_the_recursion_limit(monkeypatch):
    """MAX_DEPTH levels of the costliest nesting (a parenthesis in the right operand
    of *, in that of +, in that of <) must stop with "nested too deeply" before
    Python's recursion limit. Checked at a small scale with a matching limit."""
    import sys

    from chad import deep

    per_level, levels = 12, 300
    assert MAX_DEPTH * per_level + 1000 < deep.RECURSION_LIMIT
    monkeypatch.setattr(parser_mod, "MAX_DEPTH", levels)
    src = "a < a + a * (" * (levels + 1) + "a"
    p = parser_mod._Parser(src, "f", tokenize(src))

    def depth():
        f, d = sys._getframe(), 0
        while f is not None:
            f, d = f.f_back, d + 1
        return d

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(depth() + levels * per_level + 50)
    try:
        with pytest.raises(ParseError, match="nested too deeply"):
            p.expr()
    finally:
        sys.setrecursionlimit(old)


@pytest.mark.parametrize("src", [
    "(" * 1001 + "x" + ")" * 1001, "-" * 1001 + "x", "fst " * 1001 + "x",
    "\\x -> " * 1001 + "x", "if x then " * 1001 + "x" + " else x" * 1001,
    "x : " + "(" * 1001 + "R" + ")" * 1001, "x : " + "Array " * 1001 + "R",
])
def test_nesting_beyond_max_depth_is_refused(monkeypatch, src):
    monkeypatch.setattr(parser_mod, "MAX_DEPTH", 1000)
    with pytest.raises(ParseError, match="nested too deeply"):
        parse_expr(src)


# ----------------------------------------------------------------- errors
def perr(src, expr=True):
    with pytest.raises(ParseError) as info:
        parse_expr(src) if expr else parse_program(src, "e.chad")
    return info.value


@pytest.mark.parametrize("src, message, col", [
    ("let x = 1.0 )", "expected 'in' after the let binding, found ')'", 13),
    ("let x = 1.0", "unexpected end of input: expected 'in' after the let binding", 12),
    ("x $ y", "unknown character '$'", 3),
    ("let let = 1 in 2", "a name cannot be a keyword: 'let'", 5),
    ("\\sum -> x", "a name cannot be a keyword: 'sum'", 2),
    ("1. + x", "garbled number '1.': a real literal needs digits after the '.'", 1),
    ("x + 1e", "garbled number '1e': the exponent needs digits", 5),
    ("3x", "garbled number '3x'", 1),
    ("1.2.3", "garbled number '1.2.3': a number has at most one '.'", 1),
    (".5", "a real literal needs a digit before the '.': write 0.5", 1),
    ("1e400", "the real literal '1e400' is too large", 1),
    ("x : Real", "unknown type 'Real'", 5),
    ("x : 3", "expected a type, found '3'", 5),
    ("x : Array", "unexpected end of input: expected the element type after 'Array'", 10),
    ("(x", "unexpected end of input: expected ')' to close the '(' at 1:1", 3),
    ("(x, y, )", "expected an expression after ','", 8),
    ("let (x, y, 3) = p in x", "a name of the tuple pattern", 12),
    ("a < b < c", "comparisons do not chain", 7),
    ("if x then y", "unexpected end of input: expected 'else'", 12),
    ("if x = y then 1 else 2", "expected 'then' after the condition of 'if', found '='", 6),
    ("case x of { inl y -> y }", "expected '|' and the inr branch", 24),
    ("case x of { inr y -> y | inl z -> z }", "expected 'inl' to start the first branch", 13),
    ("\\x y -> x", "a lambda takes one parameter", 4),
    ("\\(x, y) -> x", "a lambda takes one parameter and has no pair patterns", 4),
    ("\\(x) -> x", "expected ':' and the type of the lambda parameter", 4),
    ("f \\x -> x", "a lambda as an argument of a function must be in parentheses", 3),
    ("f let x = 1 in x", "a 'let' expression as an argument of a function must be in", 3),
    ("f sin x", "'sin ...' as an argument of a function must be in parentheses", 3),
    ("map sin a", "write (\\x -> sin x)", 5),
    ("build n \\i -> i", "a lambda as an argument of 'build' must be in parentheses", 9),
    ("sin -x", "expected an expression after 'sin', found '-'", 5),
    ("build -1 f", "a negative number as an argument of 'build' must be in parentheses", 7),
    ("x +", "unexpected end of input: expected an expression after '+'", 4),
    ("x + )", "expected an expression after '+', found ')'", 5),
    ("x )", "unexpected ')' after the expression", 3),
    ("let (x) = y in x", "expected ',' and the second name of the pair pattern", 7),
    ("let x : R = 1.0 in x", "a let binding has no type annotation", 7),
    ("let 3 = x in x", "expected a name or a pair pattern (x, y) after 'let'", 5),
    ("x != y != z", "comparisons do not chain", 8),
    ("x & y", "unknown character '&'; the conjunction is '&&'", 3),
    ("\\x => x", "'=>' is not an operator; did you mean '->'?", 4),
    ("λx -> x", "unknown character 'λ' (U+03BB); write a lambda as \\x -> e", 1),
    ("x\x00", "unknown character '\\x00' (U+0000)", 2),
    ("", "unexpected end of input: expected an expression", 1),
])
def test_error_messages(src, message, col):
    e = perr(src)
    assert message in e.message
    assert e.loc.line == 1 and e.loc.col == col
    assert not getattr(e, "internal", False)


@pytest.mark.parametrize("src, message, line, col", [
    ("x + 1", "expected 'def' to start a definition, found 'x'", 1, 1),
    ("def (x : R) : R = x", "expected the name of the def after 'def', found '('", 1, 5),
    ("def f : R = x", "expected '(' and the parameters of f", 1, 7),
    ("def f(x) : R = x", "expected ':' and the type of the parameter x, found ')'", 1, 8),
    ("def f(x : R y : R) : R = x", "expected ',' or ')' after the parameter x", 1, 13),
    ("def f(x : R) = x", "expected ':' and the result type of f, found '='", 1, 14),
    ("def f(x : R) : R x", "expected '=' and the body of f, found 'x'", 1, 18),
    ("def f(x : R) : R = x)\ndef g() : R = 1.0", "unexpected ')' after the body of f", 1, 21),
    ("def f(x : R) : R =\n  let y = x in\n  y in x", "unexpected 'in' after the body of f",
     3, 5),
])
def test_program_error_messages(src, message, line, col):
    e = perr(src, expr=False)
    assert message in e.message
    assert (e.loc.line, e.loc.col) == (line, col)
    assert e.loc.file == "e.chad"


def test_error_rendering_shows_the_line_and_a_caret():
    e = perr("def f(x : R) : R =\n  let y = x * 2.0 then\n  y", expr=False)
    assert str(e) == ("e.chad:2:19: parse error: expected 'in' after the let binding, "
                      "found 'then'\n"
                      "      let y = x * 2.0 then\n"
                      "                      ^")


def test_internal_errors_are_parse_errors_marked_internal(monkeypatch):
    def broken(self):
        raise IndexError("injected")

    monkeypatch.setattr(parser_mod._Parser, "index", broken)
    with pytest.raises(ParseError) as info:
        parse_expr("x ! 0")
    assert info.value.internal and "internal error in the parser" in info.value.message
    assert isinstance(info.value.__cause__, IndexError)
