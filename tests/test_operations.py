"""The operations `x ** y` (R ** R, R ** Z), `abs e`, `atan e`, `log1p e`,
`not e`, `max(a, b)`, `min(a, b)`, `div(i, j)`, `mod(i, j)`, `a && b` and
`a || b` (docs/language.md): parsed with their precedence, printed back,
type checked (errors at the operand's line and column, exit 2 at the command
line), evaluated (on R with IEEE results, infinities and NaN, never an error;
integer division by zero a runtime error with its location),
differentiated (against finite differences away from kinks, and at the kinks by
the documented conventions), the same bit for bit on the interpreter and the
compiled backend on every runtime, and costed like every primitive (1 + its
argument)."""

from __future__ import annotations

import json
import math

import pytest

import chad
from chad.cli import main
from chad.parser import parse_expr
from chad.printer import print_program, print_term
from chad.terms import Ann, Index, Inl, Inr, Pair, Prim, Unit, Var
from chad.types import BOOL

from fd import assert_gradient_matches_fd

RUNTIMES = ("array", "map", "parallel")


# ----------------------------------------------------------------- term builders
def v(name):
    return Var(name)


def lit(c):
    return Prim("LIT", Unit(), float(c))


def ilit(n):
    return Prim("ILIT", Unit(), n)


def op(name, *args):
    return Prim(name, args[0] if len(args) == 1 else Pair(args[0], args[1]))


def neg(e):
    return Prim("NEG", e)


# ----------------------------------------------------------------- parsing
@pytest.mark.parametrize("src, term", [
    ("abs (x - 3.0) ** 1.5",
     op("POW", op("ABS", op("ADD", v("x"), neg(lit(3.0)))), lit(1.5))),
    ("a ** b ** c", op("POW", v("a"), op("POW", v("b"), v("c")))),
    ("(a ** b) ** c", op("POW", op("POW", v("a"), v("b")), v("c"))),
    ("-x ** 2.0", op("POW", neg(v("x")), lit(2.0))),
    ("-(x ** 2.0)", neg(op("POW", v("x"), lit(2.0)))),
    ("x ** -2.0", op("POW", v("x"), neg(lit(2.0)))),
    ("2.0 * x ** 3.0", op("MUL", lit(2.0), op("POW", v("x"), lit(3.0)))),
    ("x ** 3.0 / y", op("DIV", op("POW", v("x"), lit(3.0)), v("y"))),
    ("a - b ** c", op("ADD", v("a"), neg(op("POW", v("b"), v("c"))))),
    ("sin x ** 2.0", op("POW", op("SIN", v("x")), lit(2.0))),
    ("f x ** 2", op("POW", chad.terms.App(v("f"), v("x")), ilit(2))),
    ("a ! i ** 2.0", op("POW", Index(v("a"), v("i")), lit(2.0))),
    ("a < b && c < d || e",
     op("OR", op("AND", op("LT", v("a"), v("b")), op("LT", v("c"), v("d"))), v("e"))),
    ("a || b && c", op("OR", v("a"), op("AND", v("b"), v("c")))),
    ("a && b && c", op("AND", op("AND", v("a"), v("b")), v("c"))),
    ("a || b || c", op("OR", op("OR", v("a"), v("b")), v("c"))),
    ("not a && b", op("AND", op("NOT", v("a")), v("b"))),
    ("not (a < b)", op("NOT", op("LT", v("a"), v("b")))),
    ("x + 1.0 == y && true",
     op("AND", op("EQ", op("ADD", v("x"), lit(1.0)), v("y")), Ann(Inl(Unit()), BOOL))),
    ("a && b : Bool", Ann(op("AND", v("a"), v("b")), BOOL)),
    ("max(a, b) * 2.0", op("MUL", op("MAX", v("a"), v("b")), lit(2.0))),
    ("min (a, b)", op("MIN", v("a"), v("b"))),
    ("a ! div(i, 2)", Index(v("a"), op("IDIV", v("i"), ilit(2)))),
    ("mod(i - 1, n)", op("IMOD", op("ADD", v("i"), neg(ilit(1))), v("n"))),
    ("f max(a, b)", chad.terms.App(v("f"), op("MAX", v("a"), v("b")))),
    ("abs atan log1p x", op("ABS", op("ATAN", op("LOG1P", v("x"))))),
    ("max(let y = x in y, if c then a else b)",
     op("MAX", chad.terms.Let("y", v("x"), v("y")),
        chad.terms.Case(v("c"), "p_1", v("a"), "p_1", v("b")))),
])
def test_precedence_and_desugaring(src, term):
    assert parse_expr(src) == term


@pytest.mark.parametrize("src, message, col", [
    ("max(a)", "expected ',' and the second argument of max(a, b)", 6),
    ("min(a, b, c)", "min takes two arguments: min(a, b)", 9),
    ("div a b", "expected '(' after 'div'", 5),
    ("a < b < c", "a < b && b < c", 7),
    ("a ** ", "expected an expression after '**'", 5),
    ("x ^ 2.0", "the power is x ** y", 3),
    ("i % 2", "the remainder is mod(i, j)", 3),
    ("f not a", "'not ...' as an argument of a function must be in parentheses", 3),
    ("let max = 1.0 in max", "a name cannot be a keyword: 'max'", 5),
])
def test_parse_errors(src, message, col):
    with pytest.raises(chad.ParseError) as info:
        parse_expr(src)
    assert message in info.value.message
    assert info.value.loc.col == col


# ----------------------------------------------------------------- printing
@pytest.mark.parametrize("term, text", [
    (op("POW", op("POW", v("a"), v("b")), v("c")), "(a ** b) ** c"),
    (op("POW", v("a"), op("POW", v("b"), v("c"))), "a ** b ** c"),
    (op("POW", neg(v("x")), lit(2.0)), "-x ** 2.0"),
    (neg(op("POW", v("x"), lit(2.0))), "-(x ** 2.0)"),
    (op("POW", v("x"), neg(lit(2.0))), "x ** -2.0"),
    (op("POW", op("MUL", v("a"), v("b")), v("c")), "(a * b) ** c"),
    (op("MUL", v("a"), op("POW", v("b"), v("c"))), "a * b ** c"),
    (op("POW", op("ABS", v("x")), lit(1.5)), "abs x ** 1.5"),
    (op("ABS", op("POW", v("x"), lit(1.5))), "abs (x ** 1.5)"),
    (op("POW", Index(v("a"), v("i")), ilit(2)), "a ! i ** 2"),
    (op("OR", op("AND", v("a"), v("b")), v("c")), "a && b || c"),
    (op("AND", op("OR", v("a"), v("b")), v("c")), "(a || b) && c"),
    (op("AND", v("a"), op("AND", v("b"), v("c"))), "a && (b && c)"),
    (op("AND", op("LT", v("a"), v("b")), op("NE", v("c"), v("d"))), "a < b && c != d"),
    (op("LT", op("AND", v("a"), v("b")), v("c")), "(a && b) < c"),
    (op("NOT", op("LT", v("a"), v("b"))), "not (a < b)"),
    (op("NOT", op("OR", v("a"), v("b"))), "not (a || b)"),
    (op("MAX", op("ADD", v("a"), v("b")), op("MIN", v("c"), lit(0.0))),
     "max(a + b, min(c, 0.0))"),
    (op("IDIV", v("i"), op("IMOD", v("j"), ilit(3))), "div(i, mod(j, 3))"),
    (Ann(op("OR", v("a"), v("b")), BOOL), "(a || b : () + ())"),
    (op("POW", op("ATAN", v("x")), op("LOG1P", v("y"))), "atan x ** log1p y"),
])
def test_printing_is_minimal_and_round_trips(term, text):
    assert print_term(term) == text
    assert parse_expr(text) == term


def test_checked_programs_print_and_check_again():
    src = ("def f(x : R, n : Z, b : Bool) : R =\n"
           "  if not b || abs n > 2 && mod(n, 2) == 0 then abs x ** n + max(x, 1.0) "
           "else x ** 0.5 - min(atan x, log1p x) * toreal (div(n, 3))\n")
    prog = chad.load(src)
    ops = {t.op for t in chad.terms.subterms(prog.defs[0].body) if type(t) is Prim}
    assert {"POWI", "POW", "IABS", "ABS", "NOT", "OR", "AND", "IMOD", "IDIV", "MAX", "MIN",
            "ATAN", "LOG1P"} <= ops
    text = print_program(prog)
    again = chad.load(text)
    assert again.defs[0].body == prog.defs[0].body
    assert print_program(again) == text


# ----------------------------------------------------------------- types
@pytest.mark.parametrize("body, message, line, col", [
    ("x && b", "expected () + (), found R in the first argument of &&", 2, 3),
    ("b || x", "expected () + (), found R in the second argument of ||", 2, 8),
    ("not x", "expected () + (), found R in the argument of not", 2, 7),
    ("div(x, 2)", "expected Z, found R in the first argument of div", 2, 7),
    ("mod(n, 2.0)", "expected Z, found R in the second argument of mod", 2, 10),
    ("max(n, n)", "expected R, found Z in the first argument of max", 2, 7),
    ("n ** 2", "expected R, found Z in the first argument of **", 2, 3),
    ("x ** b", "the second argument of ** must be R or Z, found () + ()", 2, 8),
    ("abs b", "abs needs R or Z, found () + ()", 2, 7),
    ("atan n", "expected R, found Z in the argument of atan", 2, 8),
])
def test_type_errors_have_the_operands_position(body, message, line, col):
    src = f"def f(x : R, n : Z, b : Bool) : R =\n  {body}\n"
    with pytest.raises(chad.TypeCheckError) as info:
        chad.load(src)
    assert message in info.value.message
    assert (info.value.loc.line, info.value.loc.col) == (line, col)


def test_types_of_the_results():
    d = chad.load("def f(x : R, n : Z) : R * Z * Bool = (x ** n, (abs n, not (x < 1.0)))\n")
    assert d.defs[0].body.ty == chad.load(
        "def g(a : R * Z * Bool) : R * Z * Bool = a\n").defs[0].result


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("body, where", [("x && true", "2:3"), ("toreal (div(x, 2))", "2:15")])
def test_a_type_error_exits_2_at_the_command_line(capsys, tmp_path, body, where):
    f = tmp_path / "t.chad"
    f.write_text(f"def f(x : R) : R =\n  {body}\n")
    for cmd in ("run", "grad"):
        code, out, err = run_cli(capsys, cmd, str(f), "--args", "[1.0]")
        assert code == 2 and out == ""
        assert f"t.chad:{where}: type error" in err and "Traceback" not in err


# ----------------------------------------------------------------- values
NAN, INF = math.nan, math.inf
VALUES = [
    # (program body, parameter list, arguments, expected value)
    ("x ** y", "x : R, y : R", [2.0, 10.0], 1024.0),
    ("x ** y", "x : R, y : R", [-2.0, 3.0], -8.0),
    ("x ** y", "x : R, y : R", [4.0, 0.5], 2.0),
    ("x ** y", "x : R, y : R", [NAN, 0.0], 1.0),
    ("x ** y", "x : R, y : R", [0.0, 0.0], 1.0),
    ("x ** y", "x : R, y : R", [10.0, 400.0], INF),
    ("x ** y", "x : R, y : R", [-10.0, 401.0], -INF),
    ("x ** y", "x : R, y : R", [-10.0, 400.0], INF),
    ("x ** y", "x : R, y : R", [10.0, -400.0], 0.0),
    ("x ** n", "x : R, n : Z", [-2.0, 3], -8.0),
    ("x ** n", "x : R, n : Z", [2.0, -2], 0.25),
    ("x ** n", "x : R, n : Z", [-10.0, 401], -INF),
    ("x ** n", "x : R, n : Z", [-1.0, 2 ** 80 + 1], -1.0),   # parity of n itself
    ("x ** n", "x : R, n : Z", [-1.0, 2 ** 80], 1.0),
    ("x ** n", "x : R, n : Z", [-2.0, 10 ** 400 + 1], -INF),  # n beyond float range
    ("x ** n", "x : R, n : Z", [0.5, 10 ** 400], 0.0),
    ("x ** n", "x : R, n : Z", [-0.0, 3], -0.0),
    ("abs x", "x : R", [-2.5], 2.5),
    ("abs x", "x : R", [-0.0], 0.0),
    ("abs n", "n : Z", [-7], 7),
    ("atan x", "x : R", [1.0], math.pi / 4),
    ("atan x", "x : R", [INF], math.pi / 2),
    ("log1p x", "x : R", [1e-20], 1e-20),   # log (1 + x) would give 0.0
    ("log1p x", "x : R", [-1.0], -INF),
    ("max(x, y)", "x : R, y : R", [1.0, 2.0], 2.0),
    ("max(x, y)", "x : R, y : R", [NAN, 1.0], NAN),
    ("max(x, y)", "x : R, y : R", [1.0, NAN], 1.0),
    ("max(x, y)", "x : R, y : R", [-0.0, 0.0], -0.0),
    ("min(x, y)", "x : R, y : R", [1.0, 2.0], 1.0),
    ("min(x, y)", "x : R, y : R", [0.0, -0.0], 0.0),
    ("min(x, y)", "x : R, y : R", [NAN, 1.0], NAN),
    ("div(i, j)", "i : Z, j : Z", [7, 2], 3),
    ("div(i, j)", "i : Z, j : Z", [-7, 2], -4),
    ("div(i, j)", "i : Z, j : Z", [7, -2], -4),
    ("mod(i, j)", "i : Z, j : Z", [-7, 2], 1),
    ("mod(i, j)", "i : Z, j : Z", [7, -2], -1),
    ("mod(i, j)", "i : Z, j : Z", [2 ** 100 + 5, 2 ** 64], 5),
    # outside the domain on R: IEEE (as numpy), never a runtime error
    ("x ** y", "x : R, y : R", [-8.0, 1.0 / 3.0], NAN),
    ("x ** y", "x : R, y : R", [0.0, -1.0], INF),
    ("x ** y", "x : R, y : R", [-0.0, -1.0], -INF),
    ("x ** y", "x : R, y : R", [-0.0, -2.0], INF),
    ("x ** y", "x : R, y : R", [-0.0, -INF], INF),
    ("x ** n", "x : R, n : Z", [0.0, -2], INF),
    ("x ** n", "x : R, n : Z", [-0.0, -3], -INF),
    ("log1p x", "x : R", [-2.0], NAN),
    ("log1p x", "x : R", [NAN], NAN),
]


def same(a, b) -> bool:
    """Equal bit for bit (NaN equals NaN, -0.0 differs from 0.0)."""
    return repr(a) == repr(b)


@pytest.mark.parametrize("body, params, args, expected", VALUES)
def test_values_on_both_backends(body, params, args, expected):
    result = "Z" if "i : Z" in params or body == "abs n" else "R"
    src = f"def f({params}) : {result} = {body}\n"
    assert same(chad.run(src, args)[0], expected)
    assert same(chad.primal(src)(*args), expected)


@pytest.mark.parametrize("a", [True, False])
@pytest.mark.parametrize("b", [True, False])
def test_boolean_operators(a, b):
    src = ("def f(a : Bool, b : Bool) : Bool * Bool * Bool =\n"
           "  (a && b, (a || b, not a))\n")
    expected = (a and b, (a or b, not a))
    for value in (chad.run(src, [a, b])[0], chad.primal(src)(chad.values.TRUE if a else
                                                          chad.values.FALSE,
                                                          chad.values.TRUE if b else
                                                          chad.values.FALSE)):
        got = (value[0].side == 0, (value[1][0].side == 0, value[1][1].side == 0))
        assert got == expected


def test_and_or_evaluate_both_operands():
    src = ("def f(a : Array R, i : Z) : Bool =\n"
           "  i < length a && a ! i > 0.0\n")
    with pytest.raises(chad.EvalError, match="index"):
        chad.run(src, [[1.0], 3])
    guarded = ("def f(a : Array R, i : Z) : Bool =\n"
               "  if i < length a then a ! i > 0.0 else false\n")
    assert chad.run(guarded, [[1.0], 3])[0].side == 1


@pytest.mark.parametrize("body, params, args, message", [
    ("toreal (div(n, m))", "n : Z, m : Z", [3, 0], "division by zero: div(3, 0)"),
    ("toreal (mod(n, m))", "n : Z, m : Z", [3, 0], "division by zero: mod(3, 0)"),
])
def test_runtime_errors_have_a_location(body, params, args, message):
    src = f"def f({params}) : R =\n  1.0 + {body}\n"
    for backend in ("interp", "compiled"):
        with pytest.raises(chad.EvalError, match=message.replace("(", r"\(").replace(")", r"\)")) \
                as info:
            chad.grad(src, backend=backend)(*args)
        assert info.value.loc is not None and info.value.loc.line == 2
    with pytest.raises(chad.EvalError, match="division by zero"):
        chad.run(src, args)


@pytest.mark.parametrize("cmd", ["run", "grad"])
def test_division_by_zero_exits_2_at_the_command_line(capsys, tmp_path, cmd):
    f = tmp_path / "d.chad"
    f.write_text("def f(n : Z, x : R) : R =\n  toreal (mod(n, n - 3)) * x\n")
    code, out, err = run_cli(capsys, cmd, str(f), "--args", "[3, 1.5]")
    assert code == 2 and out == ""
    assert "d.chad:2:11: runtime error: division by zero: mod(3, 0)" in err
    assert "Traceback" not in err
    code, out, err = run_cli(capsys, cmd, str(f), "--args", "[7, 1.5]", "--json")
    assert code == 0 and json.loads(out)["value"] == 3.0 * 1.5


# ----------------------------------------------------------------- derivatives
FD_CASES = [
    ("def f(x : R) : R = abs (x - 3.0) ** 1.5\n", [5.0]),
    ("def f(x : R) : R = abs (x - 3.0) ** 1.5\n", [1.0]),
    ("def f(x : R, y : R) : R = x ** y\n", [1.7, 2.3]),
    ("def f(x : R, y : R) : R = (x * x + 1.0) ** (y - 0.5)\n", [-0.8, 1.9]),
    ("def f(x : R, n : Z) : R = x ** n\n", [1.3, 5]),
    ("def f(x : R, n : Z) : R = x ** n\n", [-1.3, -3]),
    ("def f(x : R) : R = x ** 3 - 2.0 ** x\n", [0.7]),
    ("def f(x : R) : R = atan (x * x - 1.0) + log1p (x * 0.5)\n", [0.6]),
    ("def f(x : R) : R = log1p x\n", [-0.9]),
    ("def f(x : R, y : R) : R = max(x * y, y) - 3.0 * min(x, sin y)\n", [1.5, 0.3]),
    ("def f(x : R, y : R) : R = max(x * y, y) - 3.0 * min(x, sin y)\n", [0.5, 2.0]),
    ("def f(x : R, y : R) : R = abs (x - y) * atan x\n", [-0.4, 0.9]),
    ("def f(x : R, n : Z) : R =\n"
     "  if x > 0.0 && not (n == 2) || mod(n, 3) == 1 then x ** (div(n, 2)) else abs x\n",
     [1.2, 7]),
    ("def f(a : Array R) : R =\n"
     "  sum (map (\\x -> max(x, 0.0) ** 2.0 + abs x) a)\n", [[0.5, -1.5, 2.0]]),
]


@pytest.mark.parametrize("src, args", FD_CASES)
def test_gradients_match_finite_differences(src, args):
    assert_gradient_matches_fd(chad, chad.load(src), args, rel=1e-5, abs=1e-6)


def all_gradients(src, args):
    """The gradient on every backend, runtime and transform that takes the
    program: interp on spec, array, map, parallel; compiled on array, map,
    parallel; the naive transform (first-order programs) on both backends."""
    out = {("interp", "spec"): chad.grad(src, evm="spec", backend="interp")(*args)}
    for evm in RUNTIMES:
        for backend in ("interp", "compiled"):
            out[(backend, evm)] = chad.grad(src, evm=evm, backend=backend)(*args)
    for backend in ("interp", "compiled"):
        out[("naive", backend)] = chad.grad(src, transform="naive", backend=backend)(*args)
    return out


KINKS = [
    # (program, arguments, value, gradient): the documented conventions
    ("def f(x : R) : R = abs x\n", [0.0], 0.0, (0.0,)),
    ("def f(x : R) : R = abs x\n", [-0.0], 0.0, (0.0,)),
    ("def f(x : R) : R = abs x\n", [-2.0], 2.0, (-1.0,)),
    ("def f(x : R) : R = abs x\n", [2.0], 2.0, (1.0,)),
    ("def f(x : R, y : R) : R = max(x, y)\n", [1.5, 1.5], 1.5, (1.0, 0.0)),
    ("def f(x : R, y : R) : R = max(y, x)\n", [1.5, 1.5], 1.5, (0.0, 1.0)),
    ("def f(x : R, y : R) : R = max(x, y)\n", [1.0, 2.0], 2.0, (0.0, 1.0)),
    ("def f(x : R, y : R) : R = max(x, y)\n", [3.0, 2.0], 3.0, (1.0, 0.0)),
    ("def f(x : R, y : R) : R = min(x, y)\n", [1.5, 1.5], 1.5, (1.0, 0.0)),
    ("def f(x : R, y : R) : R = min(x, y)\n", [1.0, 0.5], 0.5, (0.0, 1.0)),
    ("def f(x : R) : R = max(x, x)\n", [4.0], 4.0, (1.0,)),
    ("def f(x : R, y : R) : R = x ** y\n", [0.0, 3.0], 0.0, (0.0, 0.0)),
    ("def f(x : R, y : R) : R = x ** y\n", [0.0, 1.0], 0.0, (1.0, 0.0)),
    ("def f(x : R, y : R) : R = x ** y\n", [-2.0, 3.0], -8.0, (12.0, 0.0)),
    ("def f(x : R, y : R) : R = x ** y\n", [0.0, 0.0], 1.0, (0.0, 0.0)),
    ("def f(x : R, y : R) : R = x ** y\n", [2.0, 0.0], 1.0, (0.0, math.log(2.0))),
    ("def f(x : R, n : Z) : R = x ** n\n", [0.0, 0], 1.0, (0.0, None)),
    ("def f(x : R, n : Z) : R = x ** n\n", [0.0, 1], 0.0, (1.0, None)),
    ("def f(x : R, n : Z) : R = x ** n\n", [-2.0, 3], -8.0, (12.0, None)),
    ("def f(x : R) : R = atan x + log1p x\n", [0.0], 0.0, (2.0,)),
]


@pytest.mark.parametrize("src, args, value, grad", KINKS)
def test_kink_conventions_on_every_backend(src, args, value, grad):
    for where, (got_value, got_grad) in all_gradients(src, args).items():
        assert same(got_value, value), where
        assert same(tuple(got_grad), grad), where


def test_pow_at_zero_with_an_exponent_below_one_has_an_infinite_gradient():
    src = "def f(x : R, y : R) : R =\n  x ** y\n"
    assert chad.run(src, [0.0, 0.5])[0] == 0.0
    for backend in ("interp", "compiled"):
        # like sqrt's derivative at 0: 0.5 * 0.0 ** -0.5 is inf (IEEE), no error
        value, grad = chad.grad(src, backend=backend)(0.0, 0.5)
        assert same((value, tuple(grad)), (0.0, (INF, 0.0)))


# ----------------------------------------------------------------- backends agree exactly
EVERYTHING = """
def f(x : R, y : R, n : Z, b : Bool) : R =
  let p = abs (x - y) ** 1.5 + (x * x + 0.5) ** y + x ** n + toreal (abs n) in
  let q = atan (x * y) + log1p (y * y) + max(x, y) * min(x * 2.0, y) in
  let k = div(n, 3) + mod(n, 4) in
  if not b && x < y || b && k > 1 then p * q + toreal k else q - p
"""
POINTS = [
    [0.3, 1.7, 5, True], [0.3, 1.7, 5, False], [-1.2, 0.4, -4, True], [2.0, 2.0, 0, False],
    [1.0, 1.0, 7, True], [-0.0, 0.0, 1, False], [3.5, -2.5, -7, True], [0.0, 0.0, 2, True],
    [1e-8, 3.0, 11, False], [-5.0, 0.25, 3, True],
]


def to_bool(flag):
    return chad.values.TRUE if flag else chad.values.FALSE


@pytest.mark.parametrize("evm", RUNTIMES)
def test_interpreter_and_compiled_backend_agree_bit_for_bit(evm):
    for point in POINTS:
        args = point[:3] + [to_bool(point[3])]
        ref = chad.grad(EVERYTHING, evm=evm, backend="interp")(*args)
        got = chad.grad(EVERYTHING, evm=evm, backend="compiled")(*args)
        assert same(got, ref), (point, evm)
        assert same(chad.primal(EVERYTHING)(*args), ref[0])
        assert same(chad.run(EVERYTHING, args)[0], ref[0])


@pytest.mark.parametrize("body, params, args", [
    ("x ** y", "x : R, y : R", [(2.0, 3.0), (-2.0, 3.0), (0.0, 2.0), (1e-3, -0.5), (9.0, 0.5)]),
    ("x ** n", "x : R, n : Z", [(2.0, 3), (-2.0, -3), (0.0, 2), (1.1, 0), (-0.5, 9)]),
    ("abs x", "x : R", [(1.5,), (-1.5,), (0.0,), (-0.0,)]),
    ("atan x", "x : R", [(0.3,), (-7.0,), (1e300,)]),
    ("log1p x", "x : R", [(0.3,), (-0.999,), (1e-300,), (5e15,)]),
    ("max(x, y)", "x : R, y : R", [(1.0, 2.0), (2.0, 1.0), (1.0, 1.0), (-0.0, 0.0)]),
    ("min(x, y)", "x : R, y : R", [(1.0, 2.0), (2.0, 1.0), (1.0, 1.0), (0.0, -0.0)]),
    ("toreal (div(n, m)) * x", "x : R, n : Z, m : Z", [(1.5, 7, 2), (1.5, -7, 2), (2.0, 7, -3)]),
    ("toreal (mod(n, m)) * x", "x : R, n : Z, m : Z", [(1.5, 7, 2), (1.5, -7, 2), (2.0, 7, -3)]),
    ("if not (x < y) then x else y", "x : R, y : R", [(1.0, 2.0), (2.0, 1.0)]),
    ("if x < y && y < 1.0 || x == y then x * y else y", "x : R, y : R",
     [(0.1, 0.5), (0.1, 2.0), (3.0, 3.0), (3.0, 1.0)]),
])
def test_each_operation_is_bit_identical_on_every_runtime(body, params, args):
    src = f"def f({params}) : R = {body}\n"
    for point in args:
        ref = chad.grad(src, evm="spec", backend="interp")(*point)
        for evm in RUNTIMES:
            for backend in ("interp", "compiled"):
                got = chad.grad(src, evm=evm, backend=backend)(*point)
                assert same(got, ref), (point, evm, backend)
        for backend in ("interp", "compiled"):
            got = chad.grad(src, transform="naive", backend=backend)(*point)
            assert same(got, ref), (point, "naive", backend)


def test_naive_ho_transform_takes_the_operations():
    src = ("def f(x : R, y : R) : R =\n"
           "  let g = \\(z : R) -> max(z, y) ** 2.0 + abs z in g x + atan y\n")
    ref = chad.grad(src)(0.5, 1.5)
    assert same(chad.grad(src, transform="naive-ho", backend="interp")(0.5, 1.5), ref)


# ----------------------------------------------------------------- cost
@pytest.mark.parametrize("body, params, args, steps", [
    # 1 + the argument; a pair of two variables costs 3
    ("x ** y", "x : R, y : R", [2.0, 3.0], 4),
    ("x ** n", "x : R, n : Z", [2.0, 3], 4),
    ("max(x, y)", "x : R, y : R", [2.0, 3.0], 4),
    ("min(x, y)", "x : R, y : R", [2.0, 3.0], 4),
    ("abs x", "x : R", [-2.0], 2),
    ("atan x", "x : R", [2.0], 2),
    ("log1p x", "x : R", [2.0], 2),
    ("toreal (div(n, m))", "n : Z, m : Z", [7, 2], 5),
    ("toreal (mod(n, m))", "n : Z, m : Z", [7, 2], 5),
    ("toreal (abs n)", "n : Z", [-7], 3),
    # x ** 2.0: 1 + (1 + 1 + 2); a && b on two comparisons of variables:
    # 1 + (1 + 4 + 4); an if costs 1 + condition + branch (x: 1)
    ("x ** 2.0", "x : R", [3.0], 5),
    ("if x < y && y < x then x else y", "x : R, y : R", [1.0, 2.0], 1 + 10 + 1),
    ("if x < y || y < x then x else y", "x : R, y : R", [1.0, 2.0], 1 + 10 + 1),
    ("if not (x < y) then x else y", "x : R, y : R", [1.0, 2.0], 1 + 5 + 1),
])
def test_cost_is_one_plus_the_argument(body, params, args, steps):
    src = f"def f({params}) : R = {body}\n"
    assert chad.run(src, args)[1] == steps
    # the same as any other primitive of the same shape
    assert chad.run(f"def f(x : R, y : R) : R = x * y\n", [2.0, 3.0])[1] == 4


def test_the_bound_holds_with_the_new_operations():
    for point in POINTS:
        args = point[:3] + [point[3]]
        report = chad.cost(EVERYTHING, args)
        assert report.holds, (point, report)
    for src, args in FD_CASES:
        assert chad.cost(src, args).holds, src
