"""parse(print(t)) == t for core terms of every surface-expressible shape."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from chad import printer
from chad.deep import run_deep
from chad.parser import parse_expr, parse_program, parse_type
from chad.printer import P_MUL, P_UNARY, print_program, print_term
from chad.terms import App, Build, Case, Lam, Pair, Prim, Unit, Var
from chad.types import R, show_type
from tests.strategies_syntax import (DEF_NAMES, deep_let_source, parsed_deep_lets,
                                     surface_programs, surface_terms, types)

run_deep(lambda: None)  # raise the recursion limit now, not inside a hypothesis test

SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def roundtrip(t):
    text = print_term(t, DEF_NAMES)
    return parse_expr(text, defs=DEF_NAMES), text


@SETTINGS
@given(surface_terms())
def test_terms_roundtrip(t):
    back, text = roundtrip(t)
    assert back == t, text
    # and printing is a fixed point
    assert print_term(back, DEF_NAMES) == text


@settings(SETTINGS, max_examples=50)
@given(surface_programs())
def test_programs_roundtrip(p):
    text = print_program(p)
    back = parse_program(text, "rt.chad")
    assert back == p, text
    assert print_program(back) == text


@settings(max_examples=100, deadline=None)
@given(types())
def test_types_roundtrip(t):
    assert parse_type(show_type(t)) == t


# ----------------------------------------------------------------- sugar and layout
def lit(c):
    return Prim("LIT", Unit(), c)


def add(a, b):
    return Prim("ADD", Pair(a, b))


@pytest.mark.parametrize("src", [
    "if x < 1.0 then x else -x",
    "let (a, b) = (x, y) in\na * b",
    "build 3 f",
    "fold f a",
    "map f a",
    "build n (\\i -> toreal i)",
    "map (\\(v : R) -> v) a",
    "case s of { inl a -> a | inr b -> b }",
    "true",
    "x - y - -z",
    "(x : R)",
    "g(x, (y, z)) + g()",
    "(g) (x, y)",
    "f (x, y)",
])
def test_sugar_is_printed_back(src):
    t = parse_expr(src, defs=["g"])
    assert print_term(t, ["g"]) == src
    assert parse_expr(print_term(t, ["g"]), defs=["g"]) == t


def test_user_written_desugared_forms_print_as_sugar_when_exact():
    # the user's own p_1 is the name the parser would pick once p_1 is not in the text
    t = parse_expr("case c of { inl p_1 -> a | inr p_1 -> b }")
    assert print_term(t) == "if c then a else b"
    assert parse_expr("if c then a else b") == t


def test_sugar_is_not_used_when_the_binder_is_needed():
    # p_1 also occurs as a variable: the parser would not choose it, so no `if`
    t = Case(Var("c"), "p_1", Var("p_1"), "p_1", Var("b"))
    assert print_term(t) == "case c of { inl p_1 -> p_1 | inr p_1 -> b }"
    t = Build(Var("n"), "q", App(Var("f"), Var("q")))
    assert print_term(t) == "build n (\\q -> f q)"
    t = Build(Var("n"), "p_1", App(Lam("x", None, Var("x")), Var("p_1")))
    assert print_term(t) == "build n (\\p_1 -> (\\x -> x) p_1)"


def test_fresh_name_avoids_printed_names():
    t = parse_expr("let p_1 = 1.0 in if p_1 < 2.0 then 1.0 else 2.0")
    assert t.body.lname == "p_2"
    assert print_term(t) == "let p_1 = 1.0 in\nif p_1 < 2.0 then 1.0 else 2.0"


def test_layout_of_lets():
    src = ("def f(x : R) : R =\n"
           "  let y = x * x in\n"
           "  let z =\n"
           "    let w = y + 1.0 in\n"
           "    w * w\n"
           "  in\n"
           "  if z < 1.0 then\n"
           "    let q = z in\n"
           "    q\n"
           "  else if z < 2.0 then z else 0.0\n")
    p = parse_program(src)
    assert print_program(p) == src


def test_resolved_and_generated_forms_print_readably():
    z = Var("n")
    t = Prim("IADD", Pair(Prim("IMUL", Pair(z, z)), Prim("INEG", z)))
    assert print_term(t) == "n * n - n"
    assert print_term(Prim("ILT", Pair(z, z))) == "n < n"
    assert print_term(Prim("NEG", Prim("NEG", z))) == "- -n"
    assert print_term(add(Var("x"), lit(-1.0))) == "x + (-1.0)"
    assert print_term(lit(float("inf"))) == "(inf)"
    assert print_term(Lam("x", R, Var("y"), ("y",))) == "\\(x : R) -> y"


def test_non_source_nodes_raise_type_error():
    from chad.terms import LUnit, PureEVM

    with pytest.raises(TypeError, match="PureEVM"):
        print_term(PureEVM(Var("x")))
    with pytest.raises(TypeError, match="LSCALE"):
        print_term(Prim("LSCALE", Pair(Var("x"), LUnit())))
    with pytest.raises(TypeError):
        print_term("x")


# ----------------------------------------------------------------- deep programs
# print(parse(src)) == src shows the round trip too: parse is a function.
def test_deep_let_chain_prints():
    assert print_program(parsed_deep_lets()) == deep_let_source()


def test_deep_sum_prints():
    src = " + ".join(["x"] * 10_000)
    assert print_term(parse_expr(src)) == src
    # a right-nested sum needs (and gets) its parentheses
    src = "x + (" * 3000 + "x + x" + ")" * 3000
    assert print_term(parse_expr(src)) == src


# ----------------------------------------------------------------- the property can fail
def test_roundtrip_property_catches_a_broken_printer(monkeypatch):
    """Drop the parentheses around a sum inside a product: the property must fail."""
    monkeypatch.setitem(printer._OPERANDS, P_MUL, (printer.P_ADD, P_UNARY))
    mul_of_sum = Prim("MUL", Pair(add(Var("x"), Var("y")), Var("z")))
    assert print_term(mul_of_sum) == "x + y * z"  # the bug is really there

    @settings(max_examples=1000, database=None, deadline=None, phases=[Phase.generate],
              derandomize=True)
    @given(surface_terms())
    def prop(t):
        assert roundtrip(t)[0] == t

    with pytest.raises(AssertionError):
        prop()
