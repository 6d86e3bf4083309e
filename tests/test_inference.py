"""Type inference by unification (docs/type-checker.md, "Inference"): lambda
parameters, the other side of injections and the element type of `[]` are
inferred wherever one type fits; an ambiguous or conflicting type is an error
naming both places.

The inferred program must be exactly the program the user would have written
with the annotations: the same checked terms (every node's type included), hence
the same gradients and the same step counts of the counting evaluator.
"""

from __future__ import annotations

import attrs
import pytest
from hypothesis import HealthCheck, given, settings

import chad
from chad.cli import main
from chad.costmodel.generators import language_programs
from chad.deep import run_deep
from chad.parser import parse_program
from chad.printer import print_program
from chad.terms import Lam, Prim, subterms
from chad.types import ArrayT, Fun, Prod, R, Z, show_type
from tests.fd import assert_gradient_matches_fd

# ----------------------------------------------------------------- helpers


def _nodes(prog):
    return [t for d in prog.defs for t in subterms(d.body)]


def assert_same_checked(a, b):
    """The two checked programs are the same terms, node for node, with the same
    types (attrs equality ignores `.ty`: compared here)."""
    assert run_deep(lambda: a == b)
    na, nb = _nodes(a), _nodes(b)
    assert len(na) == len(nb)
    for x, y in zip(na, nb):
        assert type(x) is type(y) and x.ty == y.ty, (x, y)
        assert x.ty is not None


def lambda_types(prog) -> list[str]:
    return [show_type(t.param_ty) for t in _nodes(prog) if isinstance(t, Lam)]


def assert_same_derivatives(inferred: str, annotated: str, args):
    """Same checked program, same value and gradient, same step counts."""
    pi, pa = chad.load(inferred), chad.load(annotated)
    assert_same_checked(pi, pa)
    for backend in ("compiled", "interp"):
        vi, gi = chad.grad(pi, backend=backend)(*args)
        va, ga = chad.grad(pa, backend=backend)(*args)
        assert repr((vi, gi)) == repr((va, ga))
    ci, ca = chad.cost(pi, list(args)), chad.cost(pa, list(args))
    assert (ci.primal_steps, ci.gradient_steps) == (ca.primal_steps, ca.gradient_steps)
    assert ci.holds
    if pi.find(None).result == R:
        assert_gradient_matches_fd(chad, pi, args)
    return pi


def type_error(src: str) -> chad.TypeCheckError:
    with pytest.raises(chad.TypeCheckError) as info:
        chad.load(src, "t.chad")
    return info.value


# ----------------------------------------------------------------- the two programs

FIRST = """def f(s : R, a : R, b : R) : R =
  let g = \\x -> s * x * x in g a + g b
"""
SECOND = """def f(x : R, y : R) : R =
  let g = if x > 0.0 then (\\z -> z * y) else (\\z -> z + y) in g 2.0
"""


def test_first_program():
    p = assert_same_derivatives(FIRST, FIRST.replace("\\x", "\\(x : R)"), (1.5, 2.0, -0.5))
    assert lambda_types(p) == ["R"]
    value, grads = chad.grad(p)(1.5, 2.0, -0.5)
    assert value == pytest.approx(1.5 * (4.0 + 0.25))
    assert grads == pytest.approx((4.25, 2 * 1.5 * 2.0, 2 * 1.5 * -0.5))


@pytest.mark.parametrize("x", [0.7, -0.7])
def test_second_program(x):
    p = assert_same_derivatives(SECOND, SECOND.replace("\\z", "\\(z : R)"), (x, 3.0))
    assert lambda_types(p) == ["R", "R"]
    value, (dx, dy) = chad.grad(p)(x, 3.0)
    assert (value, dx, dy) == ((6.0, 0.0, 2.0) if x > 0 else (5.0, 0.0, 1.0))


def test_printer_shows_the_inferred_types_and_round_trips():
    for src in (FIRST, SECOND):
        p = chad.load(src)
        text = print_program(p)
        assert "\\(x : R) ->" in text or "\\(z : R) ->" in text
        back = chad.load(text)
        assert_same_checked(back, p)
        assert print_program(back) == text  # a fixed point


# ----------------------------------------------------------------- each position
# (inferred source, {unannotated text: annotated text}, arguments, parameter types)
POSITIONS = [
    ("let-bound, used twice",
     "def f(x : R, y : R) : R =\n  let sq = \\v -> v * v in sq x + sq (sq y)\n",
     {"\\v": "\\(v : R)"}, (1.5, -0.5), ["R"]),
    ("a lambda mapped over an array",
     "def f(w : R, a : Array R) : R =\n  let g = \\x -> sin (x * w) in sum (map g a)\n",
     {"\\x": "\\(x : R)"}, (0.3, [1.0, 2.0, -1.0]), ["R"]),
    ("a combining lambda for fold",
     "def f(a : Array R) : R =\n  let c = \\p -> fst p * snd p in fold c a\n",
     {"\\p": "\\(p : R * R)"}, ([1.5, 2.0, -1.0],), ["R * R"]),
    ("build from a let-bound lambda",
     "def f(x : R, n : Z) : R =\n  let h = \\i -> toreal i * x in sum (build n h)\n",
     {"\\i": "\\(i : Z)"}, (0.7, 4), ["Z"]),
    ("the step of iter",
     "def f(x : R) : R =\n  let step = \\s -> s * 0.5 + x in iter 4 step x\n",
     {"\\s": "\\(s : R)"}, (1.25,), ["R"]),
    ("the step of scan",
     "def f(w : R, xs : Array R) : R =\n"
     "  let cell = \\p -> let (h, u) = p in tanh (w * h + u) in sum (scan cell 0.5 xs)\n",
     {"\\p": "\\(p : R * R)"}, (0.8, [0.1, -0.4, 0.9]), ["R * R"]),
    ("an argument of a user def",
     "def app(f : R -> R, x : R) : R = f (f x)\n\n"
     "def g(x : R, y : R) : R =\n  app(\\z -> z * y, x)\n",
     {"\\z": "\\(z : R)"}, (1.5, 0.5), ["R"]),
    ("returned from a let",
     "def f(x : R, y : R) : R =\n  let mk = \\w -> \\v -> v * w + y in (mk y) x\n",
     {"\\w": "\\(w : R)", "\\v": "\\(v : R)"}, (2.0, -1.5), ["R", "R"]),
    ("stored in a pair",
     "def f(x : R, y : R) : R =\n"
     "  let p = (\\u -> u * y, \\u -> u + y) in (fst p) x * (snd p) x\n",
     {"\\u -> u *": "\\(u : R) -> u *", "\\u -> u +": "\\(u : R) -> u +"},
     (0.5, 2.5), ["R", "R"]),
    ("a higher-order parameter",
     "def f(x : R, y : R) : R =\n  let twice = \\g -> \\v -> g (g v) in twice (\\z -> z * y) x\n",
     {"\\g": "\\(g : R -> R)", "\\v": "\\(v : R)", "\\z": "\\(z : R)"},
     (1.25, 0.75), ["R -> R", "R", "R"]),
    ("integers: the Z variants of the operators",
     "def f(x : R, n : Z) : R =\n  let g = \\k -> k * k + 1 in toreal (g n) * x\n",
     {"\\k": "\\(k : Z)"}, (0.5, 3), ["Z"]),
    ("a comparison",
     "def f(x : R) : R =\n  let pos = \\v -> v > 0.0 in if pos x then x * x else -x\n",
     {"\\v": "\\(v : R)"}, (1.5,), ["R"]),
    ("a power with an inferred integer exponent",
     "def f(x : R) : R =\n  let p = \\k -> x ** k in p 3 + p 2\n",
     {"\\k": "\\(k : Z)"}, (1.5,), ["Z"]),
    ("a lambda applied at once (no variable needed)",
     "def f(x : R) : R = (\\v -> v * v) x\n",
     {"\\v": "\\(v : R)"}, (1.5,), ["R"]),
    ("the parameter's type from its second use",
     "def f(x : R, y : R) : R =\n  let g = \\v -> let a = v in a * y in g x\n",
     {"\\v": "\\(v : R)"}, (1.5, 2.0), ["R"]),
    ("a chain of functions",
     "def f(x : R) : R =\n  let f1 = \\v -> v in let f2 = \\v -> f1 v in let f3 = \\v -> f2 v * v in f3 x\n",
     {"\\v -> v in": "\\(v : R) -> v in", "\\v -> f1": "\\(v : R) -> f1",
      "\\v -> f2": "\\(v : R) -> f2"}, (1.5,), ["R", "R", "R"]),
]


def _annotate(src: str, subs: dict[str, str]) -> str:
    for old, new in subs.items():
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    return src


@pytest.mark.parametrize("name,src,subs,args,types", POSITIONS, ids=[p[0] for p in POSITIONS])
def test_each_lambda_position(name, src, subs, args, types):
    p = assert_same_derivatives(src, _annotate(src, subs), args)
    assert lambda_types(p) == types
    text = print_program(p)
    assert_same_checked(chad.load(text), p)


def test_integer_operators_are_resolved_after_inference():
    p = chad.load(POSITIONS[10][1])
    ops = {t.op for t in _nodes(p) if isinstance(t, Prim)}
    assert {"IMUL", "IADD", "MUL"} <= ops and "ADD" not in ops  # (MUL: toreal (g n) * x)
    p = chad.load("def f(x : R) : R =\n  let p = \\k -> x ** k in p 3\n")
    assert "POWI" in {t.op for t in _nodes(p) if isinstance(t, Prim)}


def test_injections_and_empty_arrays():
    # the other side of an injection from a case branch, of [] from its use
    src = ("def f(x : R, y : R) : R =\n"
           "  let s = if x > 0.0 then inl x else inr y in\n"
           "  let e = [] in\n"
           "  case s of { inl a -> a * y | inr b -> b * x } + sum e\n")
    ann = (src.replace("inl x else inr y", "(inl x : R + R) else (inr y : R + R)")
           .replace("let e = []", "let e = ([] : Array R)"))
    for x in (0.5, -0.5):
        assert_same_derivatives(src, ann, (x, 2.0))
    p = chad.load("def f(x : R) : R + Z = let s = inl x in s\n")
    assert p.defs[0].body.ty == chad.types.Sum(R, Z)
    p = chad.load("def f(n : Z) : Z = let e = [] in length e + sum e + n\n")
    assert [t.ty for t in _nodes(p) if type(t).__name__ == "ArrayLit"] == [ArrayT(Z)]


def test_a_function_parameter_of_a_lambda():
    p = chad.load("def f(x : R) : R =\n  let ap = \\g -> g x in ap (\\v -> v * 2.0)\n")
    assert lambda_types(p) == ["R -> R", "R"]
    assert chad.run(p, [1.5])[0] == 3.0


def test_check_term_resolves_too():
    from chad.checker import check_term
    from chad.parser import parse_expr

    t = check_term(parse_expr("(\\v -> v * y) 2.0"), {"y": R})
    assert t.ty == R and t.fn.param_ty == R and t.fn.ty == Fun(R, R)
    t = check_term(parse_expr("\\p -> fst p + snd p * 2"), {})
    assert t.param_ty == Prod(Z, Z) and t.ty.res == Z
    with pytest.raises(chad.TypeCheckError, match="parameter p"):
        check_term(parse_expr("\\p -> fst p"), {})


# ----------------------------------------------------------------- errors


def _pos(e):
    return (e.loc.line, e.loc.col)


def test_conflicting_uses_name_both_places():
    e = type_error("def f(s : R, a : R, b : Z) : R =\n"
                   "  let g = \\x -> s * x * x in\n"
                   "  g a + g b\n")
    assert e.message.startswith("x (the parameter of the lambda at 2:11) is used as R at 2:21 "
                                "but as Z at 3:11")
    assert _pos(e) == (3, 11)
    # monomorphic lets: one type for every use
    e = type_error("def f(a : R, b : Z) : R =\n  let id = \\x -> x in\n  id a + toreal (id b)\n")
    assert "x (the parameter of the lambda at 2:12) is used as R at 3:6 but as Z at 3:18" \
        in e.message
    assert _pos(e) == (3, 18)


def test_conflicting_branches_name_both_places():
    e = type_error("def f(a : R, c : Bool) : R =\n"
                   "  let g = if c then (\\x -> x * 2.0) else (\\y -> y * 2) in a\n")
    assert e.message == ("y (the parameter of the lambda at 2:43) is used as R at 2:43 but as "
                         "Z at 2:53: expected R, found Z in the second argument of *")
    assert _pos(e) == (2, 53)


def test_conflict_between_two_parameters():
    e = type_error("def f(a : R) : R =\n"
                   "  let g = \\x -> x * a in\n"
                   "  let h = \\y -> y * 2 in\n"
                   "  let k = \\z -> g z + toreal (h z) in a\n")
    assert "z (the parameter of the lambda at 4:11) is used as R at 4:19" in e.message
    assert "y (the parameter of the lambda at 3:11) as Z at 3:17" in e.message
    assert _pos(e) == (4, 33)


def test_a_number_used_as_a_pair():
    e = type_error("def f(a : R) : R =\n  let g = \\x -> x + x in\n  g (a, a)\n")
    assert e.message.startswith("x (the parameter of the lambda at 2:11) is used as R at 3:3 "
                                "but as R * R at 3:5")
    e = type_error("def f(a : R) : R =\n  let g = \\p -> (fst p, p + 1.0) in a\n")
    assert e.message.startswith("p (the parameter of the lambda at 2:11) is used as ? * ? at "
                                "2:22 but as R or Z at 2:25")
    e = type_error("def f(a : R) : R =\n  let g = \\p -> \\q -> (p + q, fst p) in a\n")
    assert e.message.startswith("p (the parameter of the lambda at 2:11) must be R or Z (it "
                                "is an operand of + at 2:24) but is used as ? * ? at 2:35")


def test_empty_array_used_at_two_types():
    e = type_error("def f(a : R) : R =\n  let e = [] in\n  sum e + toreal (sum e)\n")
    assert e.message.startswith("the element type of [] (at 2:11) is used as Z at 3:19 but "
                                "as R at 3:3")


def test_infinite_type():
    e = type_error("def f(a : R) : R =\n  let g = \\x -> x x in a\n")
    assert "infinite type" in e.message and _pos(e) == (2, 19)


@pytest.mark.parametrize("src,pos,message", [
    ("def f(a : R) : R =\n  let g = \\x -> 1.0 in a\n", (2, 11),
     "cannot infer the type of the parameter x of this lambda: add an annotation, "
     "e.g. \\(x : T) -> ..."),
    ("def f(a : R) : R =\n  let g = \\x -> x + x in a\n", (2, 11),
     "cannot infer the type of the parameter x of this lambda: it is R or Z (an operand "
     "of + at 2:17) and nothing decides which; add an annotation, e.g. \\(x : R) -> ..."),
    ("def f(a : R) : R =\n  let g = \\h -> h 1.0 in a\n", (2, 11),
     "cannot infer the type of the parameter h of this lambda: it is known only as R -> ?; "
     "add an annotation, e.g. \\(h : R -> T) -> ..."),
    ("def f(a : R) : R =\n  let s = inl a in 1.0\n", (2, 11),
     "cannot infer the type of this injection: add an ascription, e.g. (inl e : R + B)"),
    ("def f(a : R) : Z =\n  length []\n", (2, 10),
     "the element type of [] is not known: write it, as in ([] : Array R)"),
])
def test_ambiguous_types_are_errors(src, pos, message):
    e = type_error(src)
    assert e.message == message and _pos(e) == pos


def test_errors_exit_2_on_the_command_line(tmp_path, capsys):
    for i, src in enumerate([
            "def f(a : R, b : Z) : R =\n  let id = \\x -> x in\n  id a + toreal (id b)\n",
            "def f(a : R) : R =\n  let g = \\x -> x x in a\n",
            "def f(a : R) : R =\n  let g = \\x -> 1.0 in a\n"]):
        f = tmp_path / f"bad{i}.chad"
        f.write_text(src)
        code = main(["grad", str(f), "--args", "[1.0, 2]" if i == 0 else "[1.0]"])
        out, err = capsys.readouterr()
        assert code == 2 and out == "" and "Traceback" not in err
        assert f"{f}:" in err and "type error" in err and "^" in err


def test_chad_show_source_prints_the_inferred_types(tmp_path, capsys):
    f = tmp_path / "g.chad"
    f.write_text("def f(s : R, a : Z) : R =\n  let g = \\x -> s * x in\n"
                 "  let h = \\i -> i * 2 in\n  g (toreal (h a))\n")
    assert main(["show", str(f), "--source"]) == 0
    out = capsys.readouterr().out
    assert "\\(x : R) ->" in out and "\\(i : Z) ->" in out
    assert chad.load(out) == chad.load(f.read_text())  # the printed program is the same
    assert main(["show", str(f), "--source", "--simplify"]) == 2


# ----------------------------------------------------------------- deep programs


def test_a_deep_chain_of_inferred_lambdas():
    """Each parameter's variable links to the previous one (a chain of 5,000
    links) and the last use binds them all: union-find, no recursion."""
    n = 5000
    lines = ["def f(x : R) : R =", "  let f0 = \\v -> v in"]
    lines += [f"  let f{i} = \\v -> f{i - 1} v in" for i in range(1, n)]
    lines.append(f"  f{n - 1} x * 2.0")
    p = chad.load("\n".join(lines) + "\n")
    assert set(lambda_types(p)) == {"R"} and len(lambda_types(p)) == n
    assert chad.run(p, [1.5])[0] == 3.0


def test_10000_nested_lets_with_inferred_lambdas():
    n = 10_000
    lines = ["def f(x : R) : R =", "  let g = \\v -> v * 1.0 + 0.5 in", "  let x0 = x in"]
    lines += [f"  let x{i} = g x{i - 1} in" for i in range(1, n)]
    lines.append(f"  x{n - 1}")
    p = chad.load("\n".join(lines) + "\n")
    assert lambda_types(p) == ["R"]
    assert chad.run(p, [2.0])[0] == pytest.approx(2.0 + 0.5 * (n - 1))


# ----------------------------------------------------------------- generated programs


def erase_lambda_annotations(text: str) -> str:
    """Every `\\(x : T) ->` of a printed program written `\\x ->`."""
    out, i = [], 0
    while (j := text.find("\\(", i)) >= 0:
        k = text.index(" : ", j)
        depth, m = 0, k + 3
        while depth or text[m] != ")":
            depth += {"(": 1, ")": -1}.get(text[m], 0)
            m += 1
        assert text.startswith(") ->", m)
        out += [text[i:j], "\\" + text[j + 2:k] + " ->"]
        i = m + 4
    return "".join(out + [text[i:]])


def _annotated(erased: str, name: str, ty) -> str:
    """erased with the lambda `\\name ->` annotated with ty."""
    assert erased.count(f"\\{name} ->") == 1
    return erased.replace(f"\\{name} ->", f"\\({name} : {show_type(ty)}) ->")


def _variants(ty):
    """ty with one part (or the whole) replaced by another base type, or both
    parts of a pair, sum or function by the same one (a case whose branches
    must agree, `case y of inl a -> (a, a) | inr b -> (b, b)`, types y as
    T + T for any T, but as no type with one side changed)."""
    for base in (chad.types.UNIT, R, Z):
        if base != ty:
            yield base
    match ty:
        case Prod(a, b) | chad.types.Sum(a, b) | Fun(a, b):
            for a2 in _variants(a):
                yield type(ty)(a2, b)
            for b2 in _variants(b):
                yield type(ty)(a, b2)
            for base in (chad.types.UNIT, R, Z):
                if (base, base) != (a, b):
                    yield type(ty)(base, base)
        case ArrayT(e):
            for e2 in _variants(e):
                yield ArrayT(e2)


def _has_another_typing(erased: str, lams: dict, name: str) -> bool:
    """Does the erased program type check with the parameter `name` annotated
    with another type than its original one (`lams`: name -> original type)? A
    parameter reported ambiguous on the way gets its original annotation."""
    for other in _variants(lams[name]):
        text, fixed = _annotated(erased, name, other), {name}
        while True:
            try:
                chad.load(text)
                return True
            except chad.TypeCheckError as e:
                rest = e.message.removeprefix("cannot infer the type of the parameter ")
                again = rest.split()[0] if rest != e.message else None
                if again is None or again in fixed:
                    break
                fixed.add(again)
                text = _annotated(text, again, lams[again])
    return False


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(language_programs(max_depth=4, loops=True))
def test_inference_recovers_generated_programs(case):
    """Erasing the lambda annotations of a generated program: inference gives
    back the same checked program, or reports that a parameter's type is not
    determined, and then another type for it does type check (the erased program
    with that parameter annotated with another type)."""
    text = case.source()
    checked = chad.load(text)
    erased = erase_lambda_annotations(text)
    assert "\\(" not in erased
    try:
        inferred = chad.load(erased)
    except chad.TypeCheckError as e:
        assert e.message.startswith("cannot infer the type of the parameter "), e.message
        name = e.message.split()[7]
        lams = {t.name: t.param_ty for t in _nodes(checked) if isinstance(t, Lam)}
        assert _has_another_typing(erased, lams, name), (e.message, text)
        return
    assert_same_checked(inferred, checked)
    assert run_deep(lambda: parse_program(print_program(inferred)) ==
                    parse_program(print_program(checked)))


def _erase_terms(prog):
    """The program with no lambda annotation and no injection type: what the
    printer then writes has no annotation the user could omit."""
    from chad.terms import Def, Inl, Inr, Program, map_children

    def go(t):
        t2 = map_children(t, go)
        if isinstance(t2, Lam):
            return attrs.evolve(t2, param_ty=None, captures=None)
        if isinstance(t2, (Inl, Inr)):
            return attrs.evolve(t2, ty=None)
        return t2

    return Program(tuple(Def(d.name, d.params, d.result, go(d.body)) for d in prog.defs))


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(language_programs(max_depth=4, loops=True))
def test_inference_recovers_injections_and_lambdas(case):
    """With the types of lambdas and injections both erased: the same checked
    program, or an ambiguity reported at an injection or a lambda of the program.
    (That another typing then exists is checked for lambda parameters above; for
    an injection the other side is often shared with other injections, e.g. by
    the branches of a case, so no single ascription witnesses it.)"""
    from chad.terms import Inl, Inr

    checked = chad.load(case.source())
    text = print_program(_erase_terms(case.program))
    assert "\\(" not in text
    try:
        inferred = chad.load(text)
    except chad.TypeCheckError as e:
        assert e.message.startswith(("cannot infer the type of this injection",
                                     "cannot infer the type of the parameter ")), e.message
        kind = (Inl, Inr) if "injection" in e.message else Lam
        places = {(t.loc.line, t.loc.col) for t in _nodes(parse_program(text))
                  if isinstance(t, kind)}
        assert _pos(e) in places
        return
    assert_same_checked(inferred, checked)


def test_another_typing_of_a_parameter_whose_sides_must_agree():
    """A dead lambda `\\y -> case y of inl a -> (a, a) | inr b -> (b, b)`:
    y is only known as ? + ?, and its other typings change both sides at
    once (() + (), Z + Z), which the search must try (found by the generated
    programs above)."""
    text = ("def f(x : R) : R * R =\n"
            "  let g = \\(y : R + R) -> case y of { inl a -> (a, a) | inr b -> (b, b) } in\n"
            "  (x, x)\n")
    chad.load(text)
    erased = erase_lambda_annotations(text)
    with pytest.raises(chad.TypeCheckError) as e:
        chad.load(erased)
    assert e.value.message.startswith("cannot infer the type of the parameter y ")
    assert _has_another_typing(erased, {"y": chad.types.Sum(R, R)}, "y")
