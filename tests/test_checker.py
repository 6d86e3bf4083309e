"""Tests of the type checker (chad/checker.py).

Terms are built directly with the classes of chad/terms.py; a few tests at the end
go through the parser when chad/parser.py is available.
"""

from __future__ import annotations

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chad.checker import check_program, check_term, free_vars
from chad.errors import TypeCheckError
from chad.terms import (
    Ann, App, Build, Call, Case, Def, Fold, Fst, Index, Inl, Inr, Lam, Length, Let, Loc,
    MapA, Pair, Param, Prim, Program, Snd, Term, Unit, Var, subterms,
)
from chad.types import BOOL, UNIT, ArrayT, Fun, Prod, R, Sum, Z

# ----------------------------------------------------------------- helpers


def L(line: int, col: int) -> Loc:
    return Loc("t.chad", line, col)


def lit(c: float, loc=None) -> Prim:
    return Prim("LIT", Unit(loc=loc), float(c), loc=loc)


def ilit(c: int, loc=None) -> Prim:
    return Prim("ILIT", Unit(loc=loc), int(c), loc=loc)


def binop(op: str, a: Term, b: Term, loc=None) -> Prim:
    return Prim(op, Pair(a, b, loc=loc), loc=loc)


def add(a, b, loc=None):
    return binop("ADD", a, b, loc)


def mul(a, b, loc=None):
    return binop("MUL", a, b, loc)


TRUE_ = Ann(Inl(Unit()), BOOL)
FALSE_ = Ann(Inr(Unit()), BOOL)


def if_(c, a, b, loc=None):
    return Case(c, "_", a, "_", b, loc=loc)


def prog(*defs: Def, source: str | None = None) -> Program:
    return Program(tuple(defs), source=source)


def defn(name, params, result, body, loc=None) -> Def:
    return Def(name, tuple(Param(n, t) for n, t in params), result, body, loc=loc)


def check(term, env=None, expected=None, defs=None):
    return check_term(term, env or {}, defs, expected)


def err(term, env=None, expected=None, defs=None) -> TypeCheckError:
    with pytest.raises(TypeCheckError) as info:
        check_term(term, env or {}, defs, expected)
    return info.value


def prog_err(p: Program) -> TypeCheckError:
    with pytest.raises(TypeCheckError) as info:
        check_program(p)
    return info.value


def assert_elaborated(t):
    for n in subterms(t):
        assert n.ty is not None, n
        assert not isinstance(n, Ann)
        if isinstance(n, Lam):
            assert n.param_ty is not None and n.captures is not None
            assert n.ty == Fun(n.param_ty, n.body.ty)


# ----------------------------------------------------------------- the rules


def test_var_let_unit():
    t = check(Let("y", Var("x"), Pair(Var("y"), Unit())), {"x": R})
    assert t.ty == Prod(R, UNIT)
    assert t.rhs.ty == R and t.body.left.ty == R and t.body.right.ty == UNIT
    assert_elaborated(t)


def test_let_shadowing():
    t = check(Let("x", ilit(1), Let("x", lit(1.0), Var("x"))), {})
    assert t.ty == R
    t = check(Pair(Let("x", ilit(1), Var("x")), Var("x")), {"x": R})
    assert t.ty == Prod(Z, R)


def test_fst_snd():
    env = {"p": Prod(R, Prod(Z, UNIT))}
    assert check(Fst(Var("p")), env).ty == R
    assert check(Snd(Var("p")), env).ty == Prod(Z, UNIT)
    assert check(Fst(Snd(Var("p"))), env).ty == Z


def test_injections_checked():
    t = check(Inl(lit(1.0)), expected=Sum(R, Z))
    assert t.ty == Sum(R, Z) and t.expr.ty == R
    t = check(Inr(ilit(1)), expected=Sum(R, Z))
    assert t.ty == Sum(R, Z)


def test_case():
    env = {"s": Sum(R, Z)}
    t = check(Case(Var("s"), "a", Var("a"), "b", Prim("TOREAL", Var("b"))), env)
    assert t.ty == R and t.lbody.ty == R and t.rbody.ty == R


def test_if_gives_bool_branches():
    env = {"x": R}
    t = check(if_(binop("LT", Var("x"), lit(0.0)), Prim("NEG", Var("x")), Var("x")), env)
    assert t.ty == R
    assert t.scrut.ty == BOOL and t.scrut.op == "LT"


def test_lambda_annotated_and_app():
    t = check(App(Lam("x", R, add(Var("x"), lit(1.0))), lit(2.0)))
    assert t.ty == R and t.fn.ty == Fun(R, R)


def test_lambda_param_from_argument():
    # (\x -> x + 1.0) 2.0 : the argument is inferred first
    t = check(App(Lam("x", None, add(Var("x"), lit(1.0))), lit(2.0)))
    assert t.ty == R and t.fn.param_ty == R and t.fn.captures == ()


def test_lambda_checked_against_function_type():
    t = check(Lam("x", None, Pair(Var("x"), Var("x"))), expected=Fun(Z, Prod(Z, Z)))
    assert t.param_ty == Z and t.ty == Fun(Z, Prod(Z, Z))


def test_app_of_variable():
    t = check(App(Var("f"), lit(1.0)), {"f": Fun(R, Z)})
    assert t.ty == Z


def test_higher_order_argument_gets_lambda_type():
    # f (\x -> x * 2.0) where f : (R -> R) -> R
    t = check(App(Var("f"), Lam("x", None, mul(Var("x"), lit(2.0)))), {"f": Fun(Fun(R, R), R)})
    assert t.ty == R and t.arg.param_ty == R


def test_build_index_length():
    t = check(Build(Var("n"), "i", Prim("TOREAL", Var("i"))), {"n": Z})
    assert t.ty == ArrayT(R) and t.body.arg.ty == Z
    t = check(Index(Var("a"), ilit(0)), {"a": ArrayT(Prod(R, Z))})
    assert t.ty == Prod(R, Z)
    assert check(Length(Var("a")), {"a": ArrayT(R)}).ty == Z


def test_fold_binder_is_pair_of_elements():
    t = check(Fold("p", add(Fst(Var("p")), Snd(Var("p"))), Var("a")), {"a": ArrayT(Z)})
    assert t.ty == Z and t.body.op == "IADD"
    assert t.body.arg.left.expr.ty == Prod(Z, Z)


def test_map_binder_from_array():
    t = check(MapA("x", Pair(Var("x"), Var("x")), Var("a")), {"a": ArrayT(R)})
    assert t.ty == ArrayT(Prod(R, R))


def test_nested_arrays():
    t = check(Index(Index(Var("m"), ilit(0)), ilit(1)), {"m": ArrayT(ArrayT(R))})
    assert t.ty == R


# ----------------------------------------------------------------- primitives


@pytest.mark.parametrize("op,iop", [("ADD", "IADD"), ("MUL", "IMUL")])
def test_arith_resolution(op, iop):
    t = check(binop(op, Var("x"), Var("y")), {"x": Z, "y": Z})
    assert t.op == iop and t.ty == Z and t.arg.ty == Prod(Z, Z)
    t = check(binop(op, Var("x"), Var("y")), {"x": R, "y": R})
    assert t.op == op and t.ty == R


def test_neg_resolution():
    assert check(Prim("NEG", Var("x")), {"x": Z}).op == "INEG"
    assert check(Prim("NEG", Var("x")), {"x": R}).op == "NEG"


@pytest.mark.parametrize("op", ["LT", "LE", "GT", "GE", "EQ"])
def test_comparisons(op):
    t = check(binop(op, Var("x"), ilit(3)), {"x": Z})
    assert t.op == "I" + op and t.ty == BOOL
    t = check(binop(op, Var("x"), lit(3.0)), {"x": R})
    assert t.op == op and t.ty == BOOL


def test_sub_desugared_on_ints():
    # a - b == a + (-b)
    t = check(add(Var("a"), Prim("NEG", Var("b"))), {"a": Z, "b": Z})
    assert t.op == "IADD" and t.arg.right.op == "INEG"


def test_nested_int_arith():
    t = check(add(mul(ilit(2), Var("n")), ilit(1)), {"n": Z})
    assert t.op == "IADD" and t.arg.left.op == "IMUL"


def test_literals_and_unary_prims():
    assert check(lit(1.5)).ty == R
    assert check(ilit(3)).ty == Z
    for op in ["EXP", "LOG", "SIN", "COS", "TANH", "SQRT"]:
        assert check(Prim(op, Var("x")), {"x": R}).ty == R
    assert check(Prim("TOREAL", Var("n")), {"n": Z}).ty == R
    assert check(Prim("SIGN", Var("x")), {"x": R}).ty == Sum(BOOL, UNIT)
    assert check(Prim("SUM", Var("a")), {"a": ArrayT(R)}).ty == R
    assert check(binop("DIV", Var("x"), lit(2.0)), {"x": R}).ty == R


def test_int_variant_given_directly():
    assert check(binop("IADD", ilit(1), ilit(2))).ty == Z


# ----------------------------------------------------------------- injections


def test_injection_needs_ascription():
    e = err(Inl(Unit(), loc=L(2, 5)))
    assert "cannot infer the type of this injection" in e.message
    # the injected side is inferred, the other is what nothing determines
    assert "add an ascription" in e.message and "(inl e : () + B)" in e.message
    assert (e.loc.line, e.loc.col) == (2, 5)
    e = err(Let("x", Inr(lit(1.0), loc=L(1, 9)), Var("x")))
    assert "(inr e : A + R)" in e.message and e.loc.col == 9


def test_injection_half_known():
    # inl inside a sum whose right side is unknown
    e = err(Case(Var("b"), "_", Inl(lit(1.0), loc=L(1, 2)), "_", Inl(lit(2.0)),
                 loc=L(1, 1)), {"b": BOOL})
    assert "cannot infer the type of this injection" in e.message


def test_injection_from_ascription():
    t = check(Ann(Inl(lit(1.0)), Sum(R, UNIT)))
    assert t.ty == Sum(R, UNIT) and isinstance(t, Inl)


def test_injection_from_def_result():
    p = check_program(prog(defn("f", [], Sum(R, Z), Inr(ilit(3)))))
    assert p.defs[0].body.ty == Sum(R, Z)


def test_injection_from_other_branch():
    env = {"b": BOOL, "x": R}
    t = check(if_(Var("b"), Inl(Var("x")), Ann(Inr(Unit()), Sum(R, UNIT))), env)
    assert t.ty == Sum(R, UNIT) and t.lbody.ty == Sum(R, UNIT)
    t = check(if_(Var("b"), Ann(Inl(Var("x")), Sum(R, UNIT)), Inr(Unit())), env)
    assert t.rbody.ty == Sum(R, UNIT)


def test_bool_literals_in_if():
    # if c then true else false  (true/false are ascribed injections)
    t = check(if_(Var("c"), TRUE_, FALSE_), {"c": BOOL})
    assert t.ty == BOOL


def test_injection_in_pair_component():
    t = check(Pair(Inl(lit(1.0)), Var("x")), {"x": Z}, expected=Prod(Sum(R, Z), Z))
    assert t.left.ty == Sum(R, Z)


def test_injection_as_call_argument():
    f = defn("f", [("s", Sum(R, Z))], R, lit(0.0))
    g = defn("g", [], R, Call("f", (Inr(ilit(1)),)))
    p = check_program(prog(f, g))
    assert p.defs[1].body.args[0].ty == Sum(R, Z)


def test_injection_as_lambda_body():
    t = check(Lam("x", R, Inl(Var("x"))), expected=Fun(R, Sum(R, UNIT)))
    assert t.body.ty == Sum(R, UNIT)


def test_injection_as_app_argument():
    t = check(App(Var("f"), Inl(Unit())), {"f": Fun(BOOL, R)})
    assert t.arg.ty == BOOL


def test_injection_in_build_and_map_bodies():
    t = check(Build(ilit(3), "i", Inl(Var("i"))), expected=ArrayT(Sum(Z, R)))
    assert t.ty == ArrayT(Sum(Z, R))
    t = check(MapA("x", Inr(Var("x")), Var("a")), {"a": ArrayT(R)}, expected=ArrayT(Sum(Z, R)))
    assert t.ty == ArrayT(Sum(Z, R))


def test_injection_through_fst_and_index():
    # fst (inl 1.0, 2.0) : R + Z -- the expected type flows into the pair
    t = check(Fst(Pair(Inl(lit(1.0)), lit(2.0))), expected=Sum(R, Z))
    assert t.ty == Sum(R, Z)
    t = check(Index(Build(ilit(2), "i", Inr(Var("i"))), ilit(0)), expected=Sum(R, Z))
    assert t.ty == Sum(R, Z)


def test_nested_injection():
    t = check(Inl(Inr(Unit())), expected=Sum(Sum(R, UNIT), Z))
    assert t.expr.ty == Sum(R, UNIT)


def test_sign_case():
    # case sign x of { inl s -> case s of {...} | inr _ -> 0.0 }
    inner = Case(Var("s"), "_", lit(-1.0), "_", lit(1.0))
    t = check(Case(Prim("SIGN", Var("x")), "s", inner, "_", lit(0.0)), {"x": R})
    assert t.ty == R


# ----------------------------------------------------------------- lambdas, captures


def test_captures_order_of_first_occurrence():
    body = add(mul(Var("b"), Var("x")), add(Var("a"), Var("b")))
    t = check(Lam("x", R, body), {"a": R, "b": R})
    assert t.captures == ("b", "a")


def test_captures_exclude_inner_binders():
    body = Let("y", Var("x"), add(Var("y"), Var("z")))
    t = check(Lam("x", R, body), {"z": R, "y": Z})
    assert t.captures == ("z",)


def test_captures_let_rhs_sees_outer():
    # \x -> let y = y in y : the rhs y is the outer y
    t = check(Lam("x", R, Let("y", Var("y"), Var("y"))), {"y": Z})
    assert t.captures == ("y",)


def test_captures_nested_lambdas():
    inner = Lam("y", R, add(Var("c"), add(Var("x"), Var("y"))))
    outer = Lam("x", R, Pair(inner, Var("d")))
    t = check(outer, {"c": R, "d": R})
    assert t.body.left.captures == ("c", "x")
    assert t.captures == ("c", "d")


def test_captures_in_map_and_case():
    env = {"a": ArrayT(R), "k": R, "s": Sum(R, R)}
    t = check(MapA("x", Case(Var("s"), "u", mul(Var("u"), Var("x")), "v", Var("k")),
                   Var("a")), env)
    assert t.ty == ArrayT(R)
    lam = Lam("x", R, Case(Var("s"), "u", mul(Var("u"), Var("x")), "v", Var("k")))
    assert check(lam, env).captures == ("s", "k")


def test_free_vars():
    t = Let("x", Var("a"), Pair(Var("x"), Case(Var("b"), "l", Var("l"), "r", Var("c"))))
    assert free_vars(t) == ("a", "b", "c")
    t = Build(Var("n"), "i", Index(Var("arr"), Var("i")))
    assert free_vars(t) == ("n", "arr")
    t = Fold("p", add(Fst(Var("p")), Var("k")), Var("a"))
    assert free_vars(t) == ("k", "a")
    assert free_vars(Call("g", (Var("u"), Var("v"), Var("u")))) == ("u", "v")


def test_lambda_without_type_is_an_error():
    e = err(Let("f", Lam("x", None, Var("x"), loc=L(3, 9)), Var("f")))
    assert "cannot infer the type of the parameter x" in e.message
    assert "add an annotation" in e.message and (e.loc.line, e.loc.col) == (3, 9)


def test_lambda_annotation_mismatch():
    e = err(Lam("x", Z, Var("x"), loc=L(1, 4)), expected=Fun(R, R))
    assert "expected R -> R, found Z -> Z" in e.message


def test_unannotated_lambda_in_map_fold_build():
    env = {"a": ArrayT(R)}
    t = check(MapA("x", App(Lam("y", None, mul(Var("y"), Var("y"))), Var("x")), Var("a")), env)
    assert t.ty == ArrayT(R) and t.body.fn.param_ty == R


def test_local_function_called_with_parens():
    # let f = \(x : R) -> x in f(2.0): the parser may produce Call for a local
    t = check(Let("f", Lam("x", R, Var("x")), Call("f", (lit(2.0),))))
    assert isinstance(t.body, App) and t.body.ty == R and t.body.fn.ty == Fun(R, R)


# ----------------------------------------------------------------- defs and calls

F = defn("f", [("x", R), ("n", Z)], R, mul(Var("x"), Prim("TOREAL", Var("n"))))


def test_call_earlier_def():
    g = defn("g", [("y", R)], R, Call("f", (Var("y"), ilit(2))))
    p = check_program(prog(F, g))
    call = p.defs[1].body
    assert call.ty == R and call.args[0].ty == R and call.args[1].ty == Z
    assert_elaborated(p.defs[0].body)
    assert_elaborated(p.defs[1].body)


def test_call_later_def_rejected():
    g = defn("g", [("y", R)], R, Call("f", (Var("y"), ilit(2)), loc=L(1, 20)))
    e = prog_err(prog(g, F))
    assert "f" in e.message and "below" in e.message and (e.loc.line, e.loc.col) == (1, 20)


def test_call_self_rejected():
    g = defn("g", [("y", R)], R, Call("g", (Var("y"),), loc=L(2, 3)))
    e = prog_err(prog(g))
    assert "g cannot call itself" in e.message and e.loc.line == 2


def test_call_undefined_rejected():
    g = defn("g", [("y", R)], R, Call("ff", (Var("y"), ilit(1)), loc=L(4, 1)))
    e = prog_err(prog(F, g))
    assert "unknown def ff" in e.message and "did you mean f" in e.message
    assert (e.loc.line, e.loc.col) == (4, 1)


def test_call_arity():
    g = defn("g", [("y", R)], R, Call("f", (Var("y"),), loc=L(1, 5)))
    e = prog_err(prog(F, g))
    assert e.message == "f takes 2 arguments, given 1"


def test_call_argument_type():
    g = defn("g", [("y", R)], R, Call("f", (Var("y"), Var("y", loc=L(1, 12))), loc=L(1, 5)))
    e = prog_err(prog(F, g))
    assert e.message == "expected Z, found R in argument 2 (n) of f"
    assert e.loc.col == 12


def test_def_result_mismatch():
    e = prog_err(prog(defn("f", [("n", Z)], R, Var("n", loc=L(1, 20)))))
    assert e.message == "expected R, found Z in the result of def f"
    assert (e.loc.line, e.loc.col) == (1, 20)


def test_def_params_in_scope_and_not_across_defs():
    g = defn("g", [], R, Var("x", loc=L(2, 1)))
    e = prog_err(prog(F, g))
    assert "unknown variable x" in e.message


def test_def_name_as_variable():
    g = defn("g", [("y", R)], R, App(Var("f", loc=L(1, 2)), Var("y")))
    e = prog_err(prog(F, g))
    assert "f is a def" in e.message and "f(...)" in e.message


def test_duplicate_def_and_params():
    e = prog_err(prog(F, attrs.evolve(F, loc=L(5, 1))))
    assert "defined twice" in e.message and e.loc.line == 5
    bad = Def("h", (Param("x", R), Param("x", R, loc=L(6, 12))), R, Var("x"), loc=L(6, 1))
    e = prog_err(prog(bad))
    assert "parameter x" in e.message and e.loc.col == 12


def test_check_program_returns_new_program():
    body = Ann(add(Var("x"), lit(1.0)), R)
    p = prog(defn("f", [("x", R)], R, body), source="def f(x : R) : R = (x + 1.0 : R)")
    q = check_program(p)
    assert isinstance(p.defs[0].body, Ann) and p.defs[0].body.ty is None
    assert not isinstance(q.defs[0].body, Ann) and q.defs[0].body.ty == R
    assert q.source == p.source and q.file == p.file


def test_function_typed_params():
    d = defn("apply", [("f", Fun(R, R)), ("x", R)], R, App(Var("f"), Var("x")))
    g = defn("g", [("y", R)], R, Call("apply", (Lam("z", None, mul(Var("z"), Var("y"))),
                                                 Var("y"))))
    p = check_program(prog(d, g))
    lam = p.defs[1].body.args[0]
    assert lam.param_ty == R and lam.captures == ("y",)


# ----------------------------------------------------------------- error messages


def test_unknown_variable_with_suggestion():
    e = err(Var("alpah", loc=L(7, 3)), {"alpha": R})
    assert e.message == "unknown variable alpah; did you mean alpha?"
    assert (e.loc.line, e.loc.col) == (7, 3)


def test_second_argument_of_plus():
    e = err(add(Var("x"), Var("n", loc=L(1, 5)), loc=L(1, 3)), {"x": R, "n": Z})
    assert e.message == "expected R, found Z in the second argument of +"
    assert (e.loc.line, e.loc.col) == (1, 5)


def test_operator_on_non_number():
    e = err(mul(Var("p", loc=L(1, 1)), Var("p")), {"p": Prod(R, R)})
    assert e.message == "* needs R or Z, found R * R in the first argument"
    e = err(Prim("NEG", Var("b", loc=L(1, 2)), loc=L(1, 1)), {"b": BOOL})
    assert e.message == "- needs R or Z, found () + ()"


def test_division_is_real_only():
    e = err(binop("DIV", Var("n", loc=L(1, 1)), ilit(2)), {"n": Z})
    assert e.message == "expected R, found Z in the first argument of /"


def test_fst_snd_need_pair():
    e = err(Fst(Var("x", loc=L(3, 7)), loc=L(3, 3)), {"x": R})
    assert e.message == "fst needs a pair, found R" and e.loc.col == 7
    e = err(Snd(Var("x", loc=L(3, 7)), loc=L(3, 3)), {"x": ArrayT(R)})
    assert e.message == "snd needs a pair, found Array R"
    e = err(Fst(Inl(Unit(), loc=L(1, 5))), expected=R)
    assert e.message.startswith("fst needs a pair, found an injection")


def test_branches_differ():
    e = err(if_(Var("b"), lit(1.0, loc=L(4, 12)), ilit(2, loc=L(4, 20)), loc=L(4, 1)),
            {"b": BOOL})
    assert e.message == "the branches of case have different types: R (the branch at 4:12) and Z"
    assert (e.loc.line, e.loc.col) == (4, 20)


def test_branches_differ_right_first():
    # the left branch needs the right one's type: the message keeps the order
    s = Case(Var("b"), "_", Inl(lit(1.0), loc=L(1, 9)), "_", ilit(2), loc=L(1, 1))
    e = err(s, {"b": BOOL})
    assert e.message.startswith("the branches of case have different types: ")
    assert e.message.endswith(" and Z") and e.loc.col == 9


def test_case_needs_sum():
    e = err(Case(Var("x", loc=L(2, 6)), "a", Var("a"), "b", Var("b")), {"x": R})
    assert e.message.startswith("case needs a sum") and "found R" in e.message


def test_app_of_non_function():
    e = err(App(Var("x", loc=L(1, 1)), lit(1.0)), {"x": R})
    assert e.message == "cannot apply a value of type R: it is not a function"
    assert e.loc.col == 1


def test_app_argument_mismatch():
    e = err(App(Var("f"), Var("n", loc=L(1, 3))), {"f": Fun(R, R), "n": Z})
    assert e.message == "expected R, found Z in the argument of the function"


def test_app_result_mismatch():
    e = err(App(Var("f", loc=L(1, 1)), lit(1.0)), {"f": Fun(R, Z)}, expected=R)
    assert e.message == "expected R, found Z"


def test_pair_mismatch():
    e = err(Pair(lit(1.0), lit(2.0), loc=L(1, 1)), expected=R)
    assert e.message == "expected R, found R * R"


def test_array_forms_errors():
    e = err(Index(Var("x", loc=L(1, 1)), ilit(0)), {"x": R})
    assert e.message == "indexing (!) needs an array, found R"
    e = err(Index(Var("a"), Var("x", loc=L(1, 5))), {"a": ArrayT(R), "x": R})
    assert e.message == "expected Z, found R in the index of !" and e.loc.col == 5
    e = err(Build(Var("x", loc=L(1, 7)), "i", Var("i")), {"x": R})
    assert e.message == "expected Z, found R in the size of build"
    e = err(Length(Var("x", loc=L(1, 8))), {"x": Z})
    assert e.message == "length needs an array, found Z"
    e = err(MapA("y", Var("y"), Var("x", loc=L(1, 8))), {"x": Z})
    assert e.message == "map needs an array, found Z"
    e = err(Fold("p", Fst(Var("p", loc=L(2, 2))), Var("x", loc=L(1, 8))), {"x": Z})
    assert e.message == "fold needs an array, found Z" and e.loc.line == 1
    e = err(Fold("p", Var("p", loc=L(2, 2)), Var("a")), {"a": ArrayT(R)})
    assert e.message.startswith("expected R, found R * R in the body of fold")


def test_build_result_mismatch():
    e = err(Build(ilit(3), "i", Var("i", loc=L(1, 15)), loc=L(1, 1)), expected=ArrayT(R))
    assert e.message == "expected R, found Z in the body of build"
    e = err(Build(ilit(3), "i", Var("i"), loc=L(1, 1)), expected=R)
    assert e.message == "expected R, found Array Z"


def test_ascription_mismatch():
    e = err(Ann(ilit(2, loc=L(1, 2)), R, loc=L(1, 1)))
    assert e.message == "expected R, found Z in the ascribed expression"
    e = err(Ann(lit(2.0), R, loc=L(1, 1)), expected=Z)
    assert e.message == "expected Z, found R" and e.loc.col == 1


def test_target_only_and_unknown_primitives():
    for op in ["LZERO", "LADD", "LSCALE", "LNEG"]:
        e = err(Prim(op, lit(1.0), loc=L(1, 1)))
        assert "target" in e.message and op in e.message and e.loc is not None
    e = err(Prim("FOO", lit(1.0), loc=L(1, 1)))
    assert e.message == "unknown primitive FOO"


def test_target_form_rejected():
    from chad.terms import LUnit
    e = err(Pair(LUnit(), Unit(), loc=L(1, 1)))
    assert "not a form of the source language" in e.message and e.loc.col == 1


def test_location_falls_back_to_enclosing_node():
    e = err(Let("y", lit(1.0), add(Var("y"), ilit(1)), loc=L(9, 4)))
    assert e.loc == L(9, 4)


def test_error_renders_source_line():
    src = "def f(n : Z) : R =\n  n"
    p = Program((Def("f", (Param("n", Z),), R, Var("n", loc=Loc("a.chad", 2, 3))),), source=src)
    e = prog_err(p)
    text = str(e)
    assert text.splitlines()[0] == "a.chad:2:3: type error: expected R, found Z in the result of def f"
    assert text.splitlines()[1].strip() == "n"


# ----------------------------------------------------------------- deep programs


def test_deep_lets():
    n = 10_000
    body: Term = Var(f"x{n - 1}")
    for i in reversed(range(n)):
        rhs = lit(1.0) if i == 0 else add(Var(f"x{i - 1}"), lit(1.0))
        body = Let(f"x{i}", rhs, body)
    p = check_program(prog(defn("f", [], R, body)))
    assert p.defs[0].body.ty == R


def test_deep_sum():
    n = 10_000
    t: Term = Var("x")
    for _ in range(n - 1):
        t = add(t, Var("x"))
    p = check_program(prog(defn("f", [("x", Z)], Z, t)))
    b = p.defs[0].body
    assert b.op == "IADD" and b.ty == Z
    deep = b
    for _ in range(n - 2):
        deep = deep.arg.left
    assert deep.op == "IADD"


def test_deep_nested_lambdas():
    n = 2_000
    body: Term = Var("x0")
    for i in reversed(range(n)):
        body = Lam(f"x{i}", R, body)
    t = check(body)
    assert t.captures == () and t.body.captures == ("x0",)


def test_deep_free_vars_is_iterative():
    t: Term = Var("z")
    for i in range(50_000):
        t = Let(f"v{i}", Var("a"), t)
    assert free_vars(t) == ("a", "z")


# ----------------------------------------------------------------- robustness


NAMES = ["x", "y", "n", "b", "a", "f"]
ENV = {"x": R, "y": R, "n": Z, "b": BOOL, "a": ArrayT(R), "f": Fun(R, R)}
TYPES = st.sampled_from([R, Z, UNIT, BOOL, Prod(R, Z), Sum(R, Z), ArrayT(R), Fun(R, R)])


def _terms():
    leaf = st.one_of(
        st.sampled_from(NAMES + ["q"]).map(Var),
        st.just(Unit()),
        st.floats(0, 10).map(lit),
        st.integers(0, 10).map(ilit),
    )

    def extend(sub):
        name = st.sampled_from(NAMES)
        return st.one_of(
            st.builds(Let, name, sub, sub),
            st.builds(Pair, sub, sub),
            st.builds(Fst, sub), st.builds(Snd, sub),
            st.builds(Inl, sub), st.builds(Inr, sub),
            st.builds(Case, sub, name, sub, name, sub),
            st.builds(Lam, name, st.none() | TYPES, sub),
            st.builds(App, sub, sub),
            st.builds(Ann, sub, TYPES),
            st.builds(lambda o, a, b: binop(o, a, b),
                      st.sampled_from(["ADD", "MUL", "DIV", "LT", "EQ", "LADD"]), sub, sub),
            st.builds(Prim, st.sampled_from(["NEG", "EXP", "SIGN", "TOREAL", "SUM", "BAD"]),
                      sub),
            st.builds(Build, sub, name, sub),
            st.builds(Index, sub, sub),
            st.builds(Fold, name, sub, sub),
            st.builds(Length, sub),
            st.builds(MapA, name, sub, sub),
            st.builds(lambda args: Call("g", tuple(args)), st.lists(sub, max_size=2)),
            st.builds(lambda args: Call("h", tuple(args)), st.lists(sub, max_size=2)),
        )

    return st.recursive(leaf, extend, max_leaves=12)


G = defn("g", [("u", R)], R, Var("u"))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_terms(), st.none() | TYPES)
def test_random_terms_only_type_errors(term, expected):
    try:
        out = check_term(term, ENV, {"g": G}, expected)
    except TypeCheckError as e:
        assert e.message
        return
    assert_elaborated(out)
    if expected is not None:
        assert out.ty == expected
    # checking is idempotent on its own output
    again = check_term(out, ENV, {"g": G}, out.ty)
    assert again == out and again.ty == out.ty


# ----------------------------------------------------------------- through the parser

from chad.parser import parse_program  # noqa: E402


def _check_src(src: str) -> Program:
    return check_program(parse_program(src, "t.chad"))


def _src_err(src: str) -> TypeCheckError:
    with pytest.raises(TypeCheckError) as info:
        _check_src(src)
    return info.value


def test_parsed_program():
    p = _check_src("def sq(x : R) : R = x * x\n"
                   "def f(x : R, n : Z) : R =\n"
                   "  let y = sq(x) + toreal (n + 1) in\n"
                   "  if y < 0.0 then -y else y\n")
    for d in p.defs:
        assert_elaborated(d.body)


def test_parsed_int_ops_resolved():
    p = _check_src("def f(n : Z) : Z = n * 2 + 1 - n")
    ops = {t.op for t in subterms(p.defs[0].body) if isinstance(t, Prim)}
    assert ops <= {"IADD", "IMUL", "INEG", "ILIT"} and "IADD" in ops


def test_parsed_arrays_and_lambdas():
    p = _check_src("def f(a : Array R, k : R) : R =\n"
                   "  sum (map (\\x -> x * k) a) + fold (\\p -> fst p + snd p) a\n"
                   "  + (build (length a) (\\i -> toreal i)) ! 0\n")
    lams = [t for t in subterms(p.defs[0].body) if isinstance(t, Lam)]
    for lam in lams:
        assert lam.param_ty is not None and lam.captures is not None


def test_parsed_bool_and_injections():
    _check_src("def f(x : R) : Bool = if x < 1.0 then true else false")
    _check_src("def f(x : R) : R + () = if x < 1.0 then inl x else inr ()")
    e = _src_err("def f(x : R) : R =\n  let s = inl x in 1.0")
    assert "add an ascription" in e.message and e.loc.line == 2


def test_parsed_error_locations():
    e = _src_err("def f(x : R, n : Z) : R =\n  x + n")
    assert e.message == "expected R, found Z in the second argument of +"
    assert (e.loc.line, e.loc.col) == (2, 7)
    e = _src_err("def f(x : R) : R = g(x)\ndef g(x : R) : R = x")
    assert "below" in e.message and e.loc.line == 1
    e = _src_err("def f(x : R) : R = fst x")
    assert e.message == "fst needs a pair, found R"


# ----------------------------------------------------------------- well-typed terms
# A type-directed generator: `_gen(ty, synth=False)` is a term of type `ty` that
# needs the expected type (unannotated injections and lambdas in checking
# positions); with `synth=True` the term must be inferable on its own.

SMALL_TYPES = [R, Z, UNIT, BOOL, Prod(R, Z), Sum(R, Z), ArrayT(R), Fun(R, R),
               Sum(Prod(R, R), UNIT), ArrayT(Sum(Z, R))]


@st.composite
def _gen(draw, ty, depth=3, synth=False, env=None):
    env = dict(ENV if env is None else env)
    fresh = f"v{depth}"

    def sub(t, s=False, e=env, d=depth - 1):
        return draw(_gen(t, d, s, e))

    def base():
        match ty:
            case _ if ty == R:
                return lit(draw(st.floats(0, 5)))
            case _ if ty == Z:
                return ilit(draw(st.integers(0, 5)))
            case _ if ty == UNIT:
                return Unit()
            case Prod(a, b):
                return Pair(sub(a, synth), sub(b, synth))
            case Sum(a, b):
                inj = Inl(sub(a)) if draw(st.booleans()) else Inr(sub(b))
                return Ann(inj, ty) if synth else inj
            case ArrayT(e):
                return Build(ilit(2), fresh, sub(e, synth, {**env, fresh: Z}))
            case Fun(a, b):
                return Lam(fresh, a if synth or draw(st.booleans()) else None,
                           sub(b, synth, {**env, fresh: a}))
        raise AssertionError(ty)

    if depth <= 0:
        return base()
    choice = draw(st.integers(0, 9))
    other = draw(st.sampled_from(SMALL_TYPES[:8]))
    if choice == 0:
        names = [n for n, t in env.items() if t == ty]
        if names:
            return Var(draw(st.sampled_from(names)))
    if choice == 1:
        return Let(fresh, sub(other, True), sub(ty, synth, {**env, fresh: other}))
    if choice == 2:
        return Case(sub(Sum(R, Z), True), fresh, sub(ty, synth, {**env, fresh: R}),
                    fresh + "r", sub(ty, False, {**env, fresh + "r": Z}))
    if choice == 3:
        return Fst(Pair(sub(ty, synth), sub(other, True)))
    if choice == 4:
        return App(Lam(fresh, None, sub(ty, synth, {**env, fresh: other})), sub(other, True))
    if choice == 5:
        return Index(Build(ilit(3), fresh, sub(ty, synth, {**env, fresh: Z})), ilit(0))
    if choice == 6:
        arr = Build(ilit(3), fresh, sub(ty, synth, {**env, fresh: Z}))
        return Fold(fresh + "p", sub(ty, False, {**env, fresh + "p": Prod(ty, ty)}), arr)
    if choice == 7 and isinstance(ty, ArrayT):
        return MapA(fresh, sub(ty.elem, synth, {**env, fresh: R}), Var("a"))
    if choice == 8 and ty in (R, Z):
        op = draw(st.sampled_from(["ADD", "MUL"]))
        return binop(op, sub(ty, True), sub(ty, True))
    if choice == 9 and ty == R:
        return Call("g", (sub(R),))
    return base()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SMALL_TYPES).flatmap(lambda t: st.tuples(st.just(t), _gen(t))))
def test_well_typed_terms_check(case):
    ty, term = case
    out = check_term(term, ENV, {"g": G}, ty)
    assert out.ty == ty
    assert_elaborated(out)
    assert check_term(Ann(term, ty), ENV, {"g": G}).ty == ty


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SMALL_TYPES).flatmap(
    lambda t: st.tuples(st.just(t), _gen(t, synth=True))))
def test_inferable_terms_infer(case):
    ty, term = case
    out = check_term(term, ENV, {"g": G})
    assert out.ty == ty
    assert_elaborated(out)


GOOD_PROGRAMS = [
    "def f(x : R, y : R) : R = let (a, b) = (x * y, x + y) in a - b",
    "def f(n : Z) : Z = if n < 3 then n - 1 else 2 * n",
    "def f(x : R) : R = case sign x of { inl s -> (case s of { inl u -> -x | inr u -> x })"
    " | inr z -> 0.0 }",
    "def sq(x : R) : R = x * x\ndef f(a : Array R) : R = sum (map (\\x -> sq(x)) a)",
    "def f(a : Array R) : R = let g = \\(x : R) -> x * 2.0 in sum (map g a)",
    "def f(a : Array R) : R = let g = \\(x : R) -> x * 2.0 in g(a ! 0)",
    "def f(a : Array R) : R = fold (\\p -> fst p + snd p) a",
    "def f(n : Z) : Array (R + ()) = build n (\\i -> if i < 2 then inl (toreal i) else inr ())",
    "def f(x : R) : R = (\\y -> y * x) 3.0",
    "def f(x : R) : R = let s = (inl x : R + Z) in case s of { inl a -> a | inr b -> toreal b }",
    "def f(x : R) : Bool = x < 1.0",
    "def f(x : R) : R = exp x / (1.0 + exp x) + tanh x + sqrt x + log x + sin x * cos x",
    "def f(x : R, n : Z) : R = x * toreal (length (build n (\\i -> i)))",
    "def f(b : Bool, x : R) : R + R = if b then inl x else inr x",
    "def f(x : R) : R = let h = \\(g : R -> R) -> g x in h (\\y -> y * y)",
]


@pytest.mark.parametrize("src", GOOD_PROGRAMS)
def test_parsed_good_programs(src):
    p = _check_src(src)
    for d in p.defs:
        assert_elaborated(d.body)
        assert d.body.ty == d.result


BAD_PROGRAMS = [
    ("def f(x : R) : R = f(x)", (1, 20), "def f cannot call itself: recursion is not allowed"),
    ("def f(x : R) : R = g(x)\ndef g(x : R) : R = x", (1, 20),
     "def g is defined below f: a def can only call the defs defined above it"),
    ("def f(x : R) : R = h(x)", (1, 20),
     "unknown name h: neither a variable nor a def defined above"),
    ("def f(x : R) : R = x\ndef g(x : R) : R = f(x, x)", (2, 20), "f takes 1 argument, given 2"),
    ("def f(x : R) : R = x\ndef g(x : R) : R = f x", (2, 20),
     "f is a def, not a variable: call it as f(...)"),
    ("def f(x : R) : R = xx", (1, 20), "unknown variable xx; did you mean x?"),
    ("def f(x : R) : R = let g = \\y -> y in x", (1, 28),
     "cannot infer the type of the parameter y of this lambda: add an annotation, "
     "e.g. \\(y : T) -> ..."),
    ("def f(p : R * Z) : R = fst p + snd p", (1, 32),
     "expected R, found Z in the second argument of +"),
    ("def f(x : R) : R = (x, x)", (1, 20), "expected R, found R * R in the result of def f"),
    ("def f(x : R) : R = x 2.0", (1, 20), "cannot apply a value of type R: it is not a function"),
    ("def f(x : R) : R =\n  if x < 0.0 then 1.0 else 2", (2, 28),
     "the branches of case have different types: R (the branch at 2:19) and Z"),
    ("def f(n : Z) : R = n / 2", (1, 20), "expected R, found Z in the first argument of /"),
    ("def f(x : R) : R = (2 : R)", (1, 21), "expected R, found Z in the ascribed expression"),
]


@pytest.mark.parametrize("src,pos,message", BAD_PROGRAMS)
def test_parsed_bad_programs(src, pos, message):
    e = _src_err(src)
    assert e.message == message
    assert (e.loc.line, e.loc.col) == pos
    assert str(e).startswith(f"t.chad:{pos[0]}:{pos[1]}: type error: {message}")


def test_eliminator_result_blames_the_eliminator():
    env = {"p": Prod(Prod(Z, R), R)}
    e = err(Fst(Fst(Var("p", loc=L(1, 15)), loc=L(1, 10)), loc=L(1, 5)), env, expected=R)
    assert e.message == "expected R, found Z" and e.loc.col == 5
    e = err(Index(Var("a", loc=L(1, 3)), ilit(0), loc=L(1, 2)), {"a": ArrayT(Z)}, expected=R)
    assert e.message == "expected R, found Z" and e.loc.col == 2
    e = err(App(Var("f", loc=L(1, 8)), lit(1.0), loc=L(1, 7)), {"f": Fun(R, Z)}, expected=R)
    assert e.message == "expected R, found Z" and e.loc.col == 7
