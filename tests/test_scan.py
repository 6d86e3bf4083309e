"""`scan f x a` (the loops extension, chad/loops/; docs/language.md "Scan",
docs/cost-model.md "Scan"): syntax, typing, values, gradients against finite
differences, backends and runtimes bit for bit, the documented step counts,
linear scaling of the gradient and long arrays."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import chad
from chad.cli import main
from chad.costmodel.evaluate import Evaluator
from chad.costmodel.families import FAMILIES, study
from chad.errors import UsageError
from chad.parser import parse_program
from chad.printer import print_program
from chad.terms import Scan
from chad.transform.efficient import chad_def

from tests.fd import assert_gradient_matches_fd, assert_same_on_every_runtime

# the states, and a weighted sum of them (each element's cotangent differs)
SCALAR = "def f(x : R, w : R, a : Array R) : Array R = scan (\\p -> fst p * w + snd p) x a\n"
WEIGHTED = """def f(x : R, w : R, a : Array R) : R =
  let s = scan (\\p -> fst p * w + sin (snd p)) x a in
  sum (map (\\y -> y * y) s) + s ! 0 * 3.0
"""
PAIR = """def f(x : R, v : R, a : Array R) : R =
  let s = scan (\\p -> let (st, e) = p in (fst st + 0.1 * snd st * e, snd st - 0.1 * sin (fst st))) (x, v) a in
  sum (map (\\q -> fst q * snd q) s)
"""
NOT_A_LAMBDA = """def step(s : R, e : R, w : R) : R = s * w + sin (s * e)
def f(x : R, w : R, a : Array R) : R =
  let g = \\(p : R * R) -> step(fst p, snd p, w) in
  sum (scan g x a)
"""
LSTM = """def f(w : R, u : R, xs : Array R) : R =
  sum (scan (\\p -> let (h, x) = p in tanh (w * h + u * x)) 0.5 xs)
"""
PAIR_ELEMENTS = """def f(x : R, a : Array (R * R)) : R =
  sum (scan (\\p -> fst p * fst (snd p) + snd (snd p)) x a)
"""
IDENTITY = "def f(x : R, a : Array R) : Array R = scan (\\p -> fst p) x a\n"
SUMS = "def f(x : R, a : Array R) : Array R = scan (\\p -> fst p + snd p) x a\n"


def _scan(x, w, a):
    out, s = [], x
    for e in a:
        s = s * w + e
        out.append(s)
    return out


# ------------------------------------------------------------------ syntax


@pytest.mark.parametrize("text", [
    SCALAR, WEIGHTED, PAIR, NOT_A_LAMBDA, LSTM, PAIR_ELEMENTS, IDENTITY,
    "def f(x : R, a : Array R) : Array R = scan (\\p -> fst p + snd p) (scan (\\q -> fst q) x a ! 0) a\n",
    "def f(x : R, a : Array R) : R = sin (scan (\\p -> fst p * snd p) x a ! 0) + x\n",
    "def f(x : R, a : Array R) : Array R = let g = \\(p : R * R) -> fst p in scan g x a\n",
    "def f(x : R, a : Array R) : Array R = scan (\\(p : R * R) -> fst p * 2.0) x a\n",
    "def f(x : R, n : Z) : Array (Array R) = scan (\\p -> map (\\y -> y + snd p) (fst p)) [x] [1.0, 2.0]\n",
])
def test_parse_print_round_trip(text):
    p = parse_program(text)
    printed = print_program(p)
    assert parse_program(printed) == p
    assert print_program(parse_program(printed)) == printed
    checked = chad.load(text)
    assert parse_program(print_program(checked)).defs[-1].name == checked.defs[-1].name


def test_a_function_that_is_not_a_lambda_literal_is_applied_at_every_step():
    p = parse_program("def f(x : R, a : Array R) : Array R =\n"
                      "  let g = \\(p : R * R) -> fst p in scan g x a\n")
    s = p.defs[0].body.body
    assert isinstance(s, Scan)
    assert type(s.body).__name__ == "App" and s.body.arg.name == s.name
    assert "scan g x a" in print_program(p)


def test_scan_is_a_keyword():
    with pytest.raises(chad.ChadError):
        chad.load("def f(scan : R) : R = scan\n")


@pytest.mark.parametrize("text, line, col, words", [
    ("def f(x : R, a : Array R) : Array R =\n  scan (\\p -> fst p) x 2.0\n", 2, 24, "scan needs an array"),
    ("def f(x : R, a : Array R) : Array R =\n  scan (\\p -> fst p > 0.0) x a\n", 2, 15,
     "body of scan"),
    ("def f(x : R, a : Array R) : Array R =\n  let g = \\(p : R) -> p in\n  scan g x a\n", 3, 8,
     "function of scan"),
    ("def f(x : R, a : Array R) : Array R =\n  let g = \\(p : R * R) -> 1 in\n  scan g x a\n", 3, 8,
     "function of scan"),
    ("def f(x : Z, a : Array R) : Array R =\n  scan (\\p -> fst p) x a\n", 2, 22,
     "start value of scan"),
    ("def f(x : R, a : Array R) : R =\n  scan (\\p -> fst p) x a\n", 2, 3,
     "found Array R in the result of def f"),
])
def test_type_errors_have_a_location_and_exit_2(text, line, col, words, tmp_path, capsys):
    with pytest.raises(chad.ChadError) as e:
        chad.load(text)
    assert f":{line}:{col}:" in str(e.value), str(e.value)
    assert words in str(e.value)
    path = tmp_path / "bad.chad"
    path.write_text(text)
    assert main(["run", str(path), "--args", "[1.0, [2.0]]"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and f":{line}:{col}:" in out.err and "type error" in out.err


# ------------------------------------------------------------------ values


@pytest.mark.parametrize("a", [[], [1.5], [1.0, -2.0, 0.5, 3.0, 0.25]])
def test_values(a):
    value, _steps = chad.run(SCALAR, [0.5, 2.0, a])
    assert list(value) == _scan(0.5, 2.0, a)
    assert list(chad.primal(SCALAR)(0.5, 2.0, a)) == _scan(0.5, 2.0, a)


def test_empty_array_gives_an_empty_array_and_a_zero_gradient():
    value, steps = chad.run(SCALAR, [0.5, 2.0, []])
    assert len(value) == 0 and steps == 3
    v, (dx, dw, da) = chad.grad(SCALAR)(0.5, 2.0, [], ctg=[])
    assert len(v) == 0 and dx == 0.0 and dw == 0.0 and len(da) == 0


def test_pair_states_and_pair_elements():
    text = ("def f(a : Array (R * Z)) : Array (R * Z) =\n"
            "  scan (\\p -> (fst (fst p) + fst (snd p), snd (fst p) + snd (snd p))) (0.0, 0) a\n")
    value, _ = chad.run(text, [[[1.0, 1], [2.0, 2], [3.0, 3]]])
    assert value == ((1.0, 1), (3.0, 3), (6.0, 6))


def test_json_output_of_the_cli(tmp_path, capsys):
    path = tmp_path / "s.chad"
    path.write_text(SCALAR)
    assert main(["run", str(path), "--args", "[0.5, 2.0, [1.0, 2.0]]"]) == 0
    assert "[2.0, 6.0]" in capsys.readouterr().out.replace("\n", " ")


# ------------------------------------------------------------------ gradients


@pytest.mark.parametrize("text, args", [
    (WEIGHTED, [0.5, 0.9, [0.3, -0.2, 0.7, 1.1, 0.4]]),  # scalar state; w captured
    (WEIGHTED, [0.5, 0.9, [0.3]]),
    (PAIR, [1.0, 0.5, [0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4]]),  # pair state
    (NOT_A_LAMBDA, [0.3, 0.7, [0.5, 1.5, -0.5, 2.0, 0.1]]),  # f not a lambda literal
    (LSTM, [0.8, 0.6, [0.1, -0.4, 0.9, 0.3, -1.2, 0.5]]),    # the LSTM-like example
    (PAIR_ELEMENTS, [0.4, [[0.5, 0.1], [1.5, -0.3], [0.9, 0.2]]]),  # pair elements
    ("def f(x : R, a : Array R) : R =\n"
     "  sum (scan (\\p -> fst p * snd p + sum (scan (\\q -> fst q * snd q + 0.1) (snd p) a)) x a)\n",
     [0.3, [0.5, 0.8, 0.2]]),                             # nested scans
    ("def f(x : R, w : R, n : Z) : R =\n"
     "  let a = build n (\\i -> toreal i * w) in sum (scan (\\p -> fst p * 0.5 + snd p * x) x a)\n",
     [0.7, 0.3, 4]),                                      # a computed array
    ("def f(x : R, a : Array R) : R =\n"
     "  let s = scan (\\p -> iter 2 (\\t -> t * snd p + 0.1) (fst p)) x a in s ! 1 + s ! 2\n",
     [0.6, [0.9, 0.8, 0.7]]),                              # iter inside scan, sparse ctg
])
def test_gradient_matches_finite_differences(text, args):
    assert_gradient_matches_fd(chad, chad.load(text), args)


def test_gradient_by_hand():
    # s_0 = x w + a0, s_1 = s_0 w + a1; result sum: s_0 + s_1
    value, (dx, dw, da) = chad.grad(SCALAR)(0.5, 2.0, [1.0, 3.0], ctg=[1.0, 1.0])
    assert list(value) == [2.0, 7.0]
    assert dx == 2.0 + 4.0 and dw == 0.5 + (2.0 + 2.0 * 0.5)
    assert list(da) == [1.0 + 2.0, 1.0]


@pytest.mark.parametrize("text, args, ctg", [
    (SCALAR, (0.5, 0.9, [0.3, -0.2, 0.7]), [1.0, 2.0, 3.0]),
    (SCALAR, (0.5, 0.9, []), []),
    (WEIGHTED, (0.5, 0.9, [0.3, -0.2, 0.7, 1.1, 0.4]), 1.0),
    (PAIR, (1.0, 0.5, [0.2, 0.4, 0.6]), 1.0),
    (NOT_A_LAMBDA, (0.3, 0.7, [0.5, 1.5, -0.5]), 1.0),
    (LSTM, (0.8, 0.6, [0.1, -0.4, 0.9, 0.3]), 1.0),
    (PAIR_ELEMENTS, (0.4, [[0.5, 0.1], [1.5, -0.3]]), 1.0),
])
@pytest.mark.parametrize("evm", ["map", "array", "parallel"])
def test_interpreter_and_compiled_backend_agree_bit_for_bit(text, args, ctg, evm):
    ref = chad.grad(text, evm=evm, backend="interp")(*args, ctg=ctg)
    assert repr(chad.grad(text, evm=evm)(*args, ctg=ctg)) == repr(ref)
    assert repr(chad.grad(text, evm=evm, simplify=False)(*args, ctg=ctg)) == repr(ref)
    assert repr(chad.grad(text, evm="array", backend="interp")(*args, ctg=ctg)) == repr(ref)
    assert repr(chad.primal(text)(*args)) == repr(ref[0])


@pytest.mark.parametrize("text, args", [
    (NOT_A_LAMBDA, dict(x=0.3, w=0.7, a=np.array([0.5, 1.5]))),
    (LSTM, dict(w=0.8, u=0.6, xs=np.array([0.1, -0.4, 0.9]))),
])
def test_closure_conversion_keeps_value_and_steps(text, args):
    from chad.functions.convert import closure_convert_def

    prog = chad.load(text)
    d = prog.defs[-1]
    defs = {q.name: q for q in prog.defs}
    ref = Evaluator(defs).eval(d.body, dict(args))
    assert Evaluator(defs).eval(closure_convert_def(d).body, dict(args)) == ref


def test_naive_transform_rejects_scan_and_naive_ho_uses_the_efficient_rule():
    text = "def f(x : R) : R = let s = scan (\\p -> fst p + snd p) x [x] in x\n"
    with pytest.raises(UsageError, match="naive transform .* not Scan"):
        chad.grad(text, transform="naive")(0.5)
    ref = chad.grad(LSTM, backend="interp")(0.8, 0.6, [0.1, 0.2])
    assert repr(chad.grad(LSTM, transform="naive-ho", backend="interp")(0.8, 0.6, [0.1, 0.2])) == repr(ref)


def test_show_prints_the_forward_and_reverse_passes(tmp_path, capsys):
    path = tmp_path / "a.chad"
    path.write_text(SCALAR)
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "scanFwd" in out and "scanBack" in out


# ------------------------------------------------------------------ costs


@pytest.mark.parametrize("k", [0, 1, 2, 5, 17])
def test_primal_steps_as_documented(k):
    # 1 + c(x) + c(a) + k (3 + c(t)); c(fst p * w + snd p) = 9, c(fst p) = 2
    a = [0.5] * k
    assert chad.run(SCALAR, [0.5, 0.9, a])[1] == 3 + 12 * k
    assert chad.run(IDENTITY, [0.5, a])[1] == 3 + 5 * k


@pytest.mark.parametrize("k", [0, 1, 3])
def test_a_function_not_a_lambda_is_applied_at_every_step(k):
    # per step 3 + c(g p), c(g p) = app 1 + g 1 + p 1 + c(fst p) 2 = 5
    text = "def f(x : R, a : Array R) : Array R = let g = \\(p : R * R) -> fst p in scan g x a\n"
    # let: 1 + c(lambda, no captures) 1; scan: 1 + c(x) 1 + c(a) 1 + 8 k
    assert chad.run(text, [0.5, [0.5] * k])[1] == 2 + 3 + 8 * k


@pytest.mark.parametrize("k", [0, 1, 2, 3, 5])
def test_gradient_steps_as_documented(k):
    # docs/cost-model.md, "Scan": 75 + 49 k and 75 + 61 k with a dense cotangent
    r = chad.cost(IDENTITY, [0.5, [1.0] * k], [1.0] * k)
    assert (r.primal_steps, r.gradient_steps) == (3 + 5 * k, 75 + 49 * k)
    assert r.holds
    r = chad.cost(SUMS, [0.5, [1.0] * k], [1.0] * k)
    assert (r.primal_steps, r.gradient_steps) == (3 + 9 * k, 75 + 120 * k)
    assert r.holds


@pytest.mark.parametrize("text, args", [
    (WEIGHTED, lambda n: [0.5, 0.9, [0.3] * n]), (PAIR, lambda n: [1.0, 0.5, [0.2] * n]),
    (NOT_A_LAMBDA, lambda n: [0.3, 0.7, [0.5] * n]), (LSTM, lambda n: [0.8, 0.6, [0.1] * n]),
    (PAIR_ELEMENTS, lambda n: [0.4, [[0.5, 0.1]] * n]),
])
def test_gradient_steps_are_linear_in_n_and_th2_holds(text, args):
    """Exactly affine in n from n = 1 on, with TH2's constant 34 per step."""
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
    (WEIGHTED, [0.5, 0.9, [0.3, -0.2, 0.7]]), (PAIR, [1.0, 0.5, [0.2, 0.4]]),
    (LSTM, [0.8, 0.6, [0.1, -0.4, 0.9]]), (PAIR_ELEMENTS, [0.4, [[0.5, 0.1], [1.5, -0.3]]]),
])
def test_step_counts_and_results_do_not_depend_on_the_runtime(text, args):
    assert_same_on_every_runtime(chad.load(text), args)


def test_family_scan_chain_is_bounded(capsys):
    r = study("scan_chain", "efficient")
    assert r.status == "bounded" and r.within, r.render()
    assert str(r.fit.primal) == "14*n + 5"
    assert str(r.fit.gradient) == "200*n + 104"
    assert r.fit.gradient.poly_degree == 1
    assert r.verdict.witness == (15, 0)  # c = 15 <= 34
    assert FAMILIES["scan_chain"].requires == "loops"
    assert main(["check", "--family", "scan_chain"]) == 0
    assert "bounded" in capsys.readouterr().out


# ------------------------------------------------------------------ long arrays


def test_ten_thousand_elements_do_not_recurse_in_the_evaluator():
    """The forward loops run in this thread with a small recursion limit."""
    prog = chad.load(LSTM)
    d = prog.defs[0]
    env = {"w": 0.8, "u": 0.6, "xs": np.full(10_000, 0.1)}
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(200)
    try:
        value, _steps = Evaluator().eval(d.body, dict(env))
        (fvalue, _bp), _ = Evaluator().eval(chad_def(d), dict(env))
    finally:
        sys.setrecursionlimit(old)
    assert value == fvalue


@pytest.mark.parametrize("evm", ["map", "array", "parallel"])
def test_ten_thousand_elements_differentiate_on_every_runtime(evm):
    args = (0.8, 0.6, [0.1] * 10_000)
    ref = chad.grad(LSTM, evm=evm, backend="interp")(*args)
    got = chad.grad(LSTM, evm=evm)(*args)
    assert repr(got) == repr(ref)
    value, (dw, du, dxs) = got
    assert len(dxs) == 10_000 and np.isfinite(value) and np.isfinite(dw) and np.isfinite(du)
