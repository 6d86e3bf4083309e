"""`iter n f x` (the loops extension, chad/loops/; docs/language.md "Iteration",
docs/cost-model.md "Iteration"): syntax, typing, values, gradients against
finite differences, backends and runtimes bit for bit, the documented step
counts, linear scaling of the gradient, deep loops, and the early-exit idiom."""

from __future__ import annotations

import sys

import pytest

import chad
from chad.cli import main
from chad.costmodel.evaluate import Evaluator
from chad.costmodel.families import FAMILIES, study
from chad.errors import UsageError
from chad.parser import parse_program
from chad.printer import print_program
from chad.terms import Iter
from chad.transform.efficient import chad_def

from tests.fd import assert_gradient_matches_fd, assert_same_on_every_runtime

AFFINE = "def f(x : R, w : R, n : Z) : R = iter n (\\s -> s * w + 1.0) x\n"
PAIR = """def f(x : R, v : R, n : Z) : R =
  let p = iter n (\\s -> (fst s + 0.1 * snd s, snd s - 0.1 * sin (fst s))) (x, v) in
  fst p * snd p
"""
NOT_A_LAMBDA = """def step(s : R, w : R) : R = s * w + sin s
def f(x : R, w : R, n : Z) : R =
  let g = \\(s : R) -> step(s, w) in
  iter n g x
"""
PARTICLE = """def fall(x : R, v : R, n : Z) : R =
  let st = iter n (\\s ->
      let (p, u, stopped) = s in
      if stopped then s
      else let p2 = p + 0.1 * u in
           (p2, u - 0.98, p2 < 0.0)) (x, v, false)
  in fst st * 2.0 + fst (snd st)
"""
IDENTITY = "def f(x : R, n : Z) : R = iter n (\\s -> s) x\n"
FUNCTION_STATE = """def f(x : R, w : R, n : Z) : R =
  let h = iter n (\\g -> \\(y : R) -> g (y * w)) (\\(y : R) -> sin y) in
  h x
"""
ARRAY_STATE = ("def f(a : Array R, w : R, n : Z) : R =\n"
               "  sum (iter n (\\b -> map (\\y -> y * w + b ! 0) b) a)\n")
NESTED = ("def f(x : R, w : R) : R =\n"
          "  iter 3 (\\s -> iter 2 (\\s -> s * w + 1.0) s * 0.5) (iter 2 (\\s -> s * s) x)\n")


# ------------------------------------------------------------------ syntax


@pytest.mark.parametrize("text", [
    AFFINE, PAIR, NOT_A_LAMBDA, PARTICLE, IDENTITY, NESTED,
    "def f(x : R) : R = iter 3 (\\s -> iter 2 (\\t -> t * s) s) (iter 1 (\\s -> s) x)\n",
    "def f(x : R, n : Z) : R = sin (iter (n + 1) (\\s -> s * s) x) + x\n",
    "def f(x : R, n : Z) : R = let g = \\(s : R) -> s * 2.0 in iter n g x\n",
    "def f(x : R, n : Z) : R = iter n (\\(s : R) -> s * 2.0) x\n",
])
def test_parse_print_round_trip(text):
    p = parse_program(text)
    printed = print_program(p)
    assert parse_program(printed) == p
    assert print_program(parse_program(printed)) == printed
    checked = chad.load(text)
    assert parse_program(print_program(checked)).defs[-1].name == checked.defs[-1].name


def test_a_function_that_is_not_a_lambda_literal_is_applied_at_every_step():
    p = parse_program("def f(x : R, n : Z) : R = let g = \\(s : R) -> s in iter n g x\n")
    it = p.defs[0].body.body
    assert isinstance(it, Iter)
    assert type(it.body).__name__ == "App" and it.body.arg.name == it.name
    assert "iter n g x" in print_program(p)


def test_iter_is_a_keyword():
    with pytest.raises(chad.ChadError):
        chad.load("def f(iter : R) : R = iter\n")


@pytest.mark.parametrize("text, line, col, words", [
    ("def f(x : R) : R =\n  iter 2.0 (\\s -> s) x\n", 2, 8, "count of iter"),
    ("def f(x : R, n : Z) : R =\n  iter n (\\s -> s > 0.0) x\n", 2, 17, "body of iter"),
    ("def f(x : R, n : Z) : R =\n  let g = \\(s : R) -> 1 in\n  iter n g x\n", 3, 10,
     "function of iter"),
    ("def f(x : R, n : Z) : R =\n  let g = \\(s : Z) -> s in\n  iter n g x\n", 3, 10,
     "function of iter"),
    ("def f(x : Z, n : Z) : R =\n  iter n (\\s -> s) x\n", 2, 20, "start value of iter"),
])
def test_type_errors_have_a_location_and_exit_2(text, line, col, words, tmp_path, capsys):
    with pytest.raises(chad.ChadError) as e:
        chad.load(text)
    assert f":{line}:{col}:" in str(e.value), str(e.value)
    assert words in str(e.value)
    path = tmp_path / "bad.chad"
    path.write_text(text)
    assert main(["run", str(path), "--args", "[1.0, 2]"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and f":{line}:{col}:" in out.err and "type error" in out.err


# ------------------------------------------------------------------ values


@pytest.mark.parametrize("n, expected", [(0, 0.5), (-3, 0.5), (1, 2.0), (5, 2.0 ** 5 * 0.5
                                                                    + 2 ** 5 - 1)])
def test_values(n, expected):
    value, _steps = chad.run(AFFINE, [0.5, 2.0, n])
    assert value == expected
    assert chad.primal(AFFINE)(0.5, 2.0, n) == expected


def test_pair_and_sum_states():
    text = "def f(n : Z) : Z * Bool = iter n (\\s -> (fst s + 1, if snd s then false else true)) (0, true)\n"
    assert chad.run(text, [5])[0] == (5, chad.run("def f(x : Z) : Bool = false\n", [0])[0])
    assert chad.run(text, [4])[0][0] == 4


def test_particle_stops():
    value, _ = chad.run(PARTICLE, [1.0, 2.0, 30])
    p8, _ = chad.run(PARTICLE, [1.0, 2.0, 8])
    assert value == p8  # stopped after 8 steps: the later steps leave the state alone


# ------------------------------------------------------------------ gradients


@pytest.mark.parametrize("text, args", [
    (AFFINE, [0.5, 0.9, 6]),                 # scalar state; w captured from outside
    (AFFINE, [-1.5, 1.1, 1]),
    (AFFINE, [0.5, 0.9, 0]),
    (AFFINE, [0.5, 0.9, -2]),
    (PAIR, [1.0, 0.5, 7]),                   # pair state
    (NOT_A_LAMBDA, [0.3, 0.7, 5]),           # f not a lambda literal
    (PARTICLE, [1.0, 2.0, 30]),              # early exit with a flag
    (PARTICLE, [3.0, 0.5, 12]),              # does not stop within n steps
    ("def f(x : R, w : R) : R = iter 3 (\\s -> iter 2 (\\t -> t * w + s) s) x\n", [0.4, 0.8]),
    (NESTED, [0.7, 0.9]),                    # nested loops, one name bound three times
    (FUNCTION_STATE, [0.3, 0.9, 4]),         # the state is a function
    (ARRAY_STATE, [[0.3, 0.5, 0.7], 0.9, 4]),  # the state is an array
])
def test_gradient_matches_finite_differences(text, args):
    assert_gradient_matches_fd(chad, chad.load(text), args)


def test_captured_variable_gets_the_sum_over_the_steps():
    # f = x w^3 + w^2 + w + 1 at n = 3: df/dx = w^3, df/dw = 3 x w^2 + 2 w + 1
    value, grads = chad.grad(AFFINE)(0.5, 2.0, 3, ctg=1.0)
    assert value == 11.0 and grads[:2] == (8.0, 11.0)


@pytest.mark.parametrize("text, args", [
    (AFFINE, (0.5, 0.9, 6)), (PAIR, (1.0, 0.5, 7)), (NOT_A_LAMBDA, (0.3, 0.7, 5)),
    (PARTICLE, (1.0, 2.0, 30)), (AFFINE, (0.5, 0.9, 0)), (NESTED, (0.7, 0.9)),
    (FUNCTION_STATE, (0.3, 0.9, 4)), (ARRAY_STATE, ([0.3, 0.5, 0.7], 0.9, 4)),
])
@pytest.mark.parametrize("evm", ["map", "array", "parallel"])
def test_interpreter_and_compiled_backend_agree_bit_for_bit(text, args, evm):
    ref = chad.grad(text, evm=evm, backend="interp")(*args)
    assert repr(chad.grad(text, evm=evm)(*args)) == repr(ref)
    assert repr(chad.grad(text, evm=evm, simplify=False)(*args)) == repr(ref)
    assert repr(chad.grad(text, evm="array", backend="interp")(*args)) == repr(ref)
    assert repr(chad.primal(text)(*args)) == repr(ref[0])


@pytest.mark.parametrize("text, args", [
    (NOT_A_LAMBDA, dict(x=0.3, w=0.7, n=5)), (PARTICLE, dict(x=1.0, v=2.0, n=30)),
    (NESTED, dict(x=0.7, w=0.9)), (FUNCTION_STATE, dict(x=0.3, w=0.9, n=4)),
])
def test_closure_conversion_keeps_value_and_steps(text, args):
    from chad.functions.convert import closure_convert_def

    prog = chad.load(text)
    d = prog.defs[-1]
    defs = {q.name: q for q in prog.defs}
    ref = Evaluator(defs).eval(d.body, dict(args))
    assert Evaluator(defs).eval(closure_convert_def(d).body, dict(args)) == ref


def test_naive_transform_rejects_iter_and_naive_ho_uses_the_efficient_rule():
    with pytest.raises(UsageError, match="naive transform .* not Iter"):
        chad.grad(AFFINE, transform="naive")(0.5, 0.9, 3)
    ref = chad.grad(AFFINE, backend="interp")(0.5, 0.9, 3)
    assert chad.grad(AFFINE, transform="naive-ho", backend="interp")(0.5, 0.9, 3) == ref


def test_show_prints_the_forward_and_reverse_passes(tmp_path, capsys):
    path = tmp_path / "a.chad"
    path.write_text(AFFINE)
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "iterFwd" in out and "iterBack" in out


# ------------------------------------------------------------------ costs


def _primal_affine(k):
    # 1 + c(n) + c(x) + k (1 + c(s * w + 1.0)); c(s * w + 1.0) = 8
    return 1 + 1 + 1 + k * (1 + 8)


@pytest.mark.parametrize("n", [-2, 0, 1, 2, 5, 17])
def test_primal_steps_as_documented(n):
    assert chad.run(AFFINE, [0.5, 0.9, n])[1] == _primal_affine(max(n, 0))
    assert chad.run(IDENTITY, [0.5, n])[1] == 3 + 2 * max(n, 0)


@pytest.mark.parametrize("n", [0, 1, 3])
def test_a_function_not_a_lambda_is_applied_at_every_step(n):
    # iter n g x = iter n (p. g p) x: per step 1 + c(g p), and c(g p) = app 1 + g 1
    # + p 1 + c(s * 2.0) = 5 (prim 1 + pair 1 + s 1 + the literal 2)
    text = "def f(x : R, n : Z) : R = let g = \\(s : R) -> s * 2.0 in iter n g x\n"
    # let: 1 + c(lambda, no captures) 1; iter: 1 + c(n) 1 + c(x) 1 + 9 n
    assert chad.run(text, [0.5, n])[1] == 2 + 3 + 9 * n


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5])
def test_gradient_steps_of_the_identity_loop_as_documented(n):
    # docs/cost-model.md: 54 + 21 k (per step: chad s 3, iterFwd 3, iterBack 9,
    # ccall of add 2, bind 1, scope 1, the add's run 2)
    r = chad.cost(IDENTITY, [0.5, n], 1.0)
    assert (r.primal_steps, r.gradient_steps) == (3 + 2 * n, 54 + 21 * n)
    assert r.holds


@pytest.mark.parametrize("text, args", [
    (AFFINE, lambda n: [0.5, 0.9, n]), (PAIR, lambda n: [1.0, 0.5, n]),
    (NOT_A_LAMBDA, lambda n: [0.3, 0.7, n]), (PARTICLE, lambda n: [1e6, 2.0, n]),
    (IDENTITY, lambda n: [0.5, n]),
])
def test_gradient_steps_are_linear_in_n_and_th2_holds(text, args):
    """Exactly affine in n from n = 1 on. (The last step, the first to run
    backward, may cost a constant less than the others: the cotangent it gets
    from outside can be sparser, e.g. a zero for the particle's flag, or a first
    `add` into a captured function's zero cell.) The particle starts high enough
    never to land within the 1000 steps."""
    ns = [1, 11, 101, 1001]
    pts = [chad.cost(text, args(n), 1.0) for n in ns]
    assert all(r.holds for r in pts)
    grads = [r.gradient_steps for r in pts]
    prims = [r.primal_steps for r in pts]
    per_step = (grads[1] - grads[0]) / 10
    assert per_step == int(per_step) > 0
    assert grads == [grads[0] + per_step * (n - 1) for n in ns]  # exactly affine
    prim_step = (prims[1] - prims[0]) // 10
    assert prims == [prims[0] + prim_step * (n - 1) for n in ns]
    assert per_step <= 34 * prim_step  # TH2's constant, per step


@pytest.mark.parametrize("text, args", [
    (AFFINE, [0.5, 0.9, 7]), (PARTICLE, [1.0, 2.0, 30]), (FUNCTION_STATE, [0.3, 0.9, 4]),
    (ARRAY_STATE, [[0.3, 0.5, 0.7], 0.9, 4]), (NESTED, [0.7, 0.9]),
])
def test_step_counts_and_results_do_not_depend_on_the_runtime(text, args):
    assert_same_on_every_runtime(chad.load(text), args)


def test_family_iter_chain_is_bounded(capsys):
    r = study("iter_chain", "efficient")
    assert r.status == "bounded" and r.within, r.render()
    assert str(r.fit.primal) == "9*n + 4"
    assert str(r.fit.gradient) == "154*n + 62"
    assert r.fit.gradient.poly_degree == 1
    assert FAMILIES["iter_chain"].requires == "loops"
    assert main(["check", "--family", "iter_chain"]) == 0
    assert "bounded" in capsys.readouterr().out


# ------------------------------------------------------------------ deep loops


def test_ten_thousand_steps_do_not_recurse_in_the_evaluator():
    """The forward loops run in this thread with a small recursion limit."""
    prog = chad.load(AFFINE)
    d = prog.defs[0]
    env = {"x": 0.5, "w": 0.99, "n": 10_000}
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(200)
    try:
        value, steps = Evaluator().eval(d.body, dict(env))
        (fvalue, bp), _ = Evaluator().eval(chad_def(d), dict(env))
    finally:
        sys.setrecursionlimit(old)
    assert steps == _primal_affine(10_000)
    assert value == fvalue == pytest.approx(100.0)


@pytest.mark.parametrize("evm", ["map", "array", "parallel"])
def test_ten_thousand_steps_differentiate_on_every_runtime(evm):
    args = (0.5, 0.99, 10_000)
    ref = chad.grad(AFFINE, evm=evm, backend="interp")(*args)
    got = chad.grad(AFFINE, evm=evm)(*args)
    assert repr(got) == repr(ref)
    value, (dx, dw, dn) = got
    assert value == pytest.approx(100.0) and dx == pytest.approx(0.99 ** 10_000)
    assert dw == pytest.approx(10_000.0, rel=1e-9) and dn is None
