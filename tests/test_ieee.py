"""Numerical edges follow IEEE 754 (docs/language.md, "Evaluation"): `log 0`,
`sqrt` at 0 and of a negative, a division by zero on R, `sin`/`cos` of an
infinity and an overflow of `exp`, `**` and `*` give infinities and NaN, as
numpy does, instead of runtime errors: in the evaluator and in every derivative
(target terms of the same primitive table), bit for bit the same on the
compiled backend and every runtime. Integer `div`/`mod` by zero stays a
runtime error with its location. `chad run` and `chad grad` warn on stderr
about a value or gradient that is not finite (exit 0) and `--strict` makes it
an error (exit 1); the library returns the IEEE values and warns about
nothing."""

from __future__ import annotations

import json
import math
import warnings

import pytest

import chad
from chad.cli import main
from chad.compile.codegen import Gen
from chad.primitives import PRIMITIVES
from chad.simplify import simplify
from chad.terms import Let, Pair, Prim, Var
from chad.types import Prod, R

NAN, INF = math.nan, math.inf
RUNTIMES = ("array", "map", "parallel")


def same(a, b) -> bool:
    """Equal bit for bit (NaN equals NaN, -0.0 differs from 0.0)."""
    return repr(a) == repr(b)


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


U = "def f(x : R) : R =\n  "
B = "def f(x : R, y : R) : R =\n  "
EDGES = [
    # (program, arguments, value, gradient)
    (U + "log x", [0.0], -INF, (INF,)),
    (U + "log x", [-0.0], -INF, (-INF,)),
    (U + "log x", [-1.0], NAN, (-1.0,)),           # the derivative's formula, 1 / x
    (U + "log x", [NAN], NAN, (NAN,)),
    (U + "log x", [INF], INF, (0.0,)),
    (U + "sqrt x", [0.0], 0.0, (INF,)),            # 0.5 / sqrt 0
    (U + "sqrt x", [-0.0], -0.0, (-INF,)),
    (U + "sqrt x", [-4.0], NAN, (NAN,)),
    (B + "x / y", [1.0, 0.0], INF, (INF, -INF)),
    (B + "x / y", [-1.0, 0.0], -INF, (INF, INF)),
    (B + "x / y", [1.0, -0.0], -INF, (-INF, -INF)),
    (B + "x / y", [0.0, 0.0], NAN, (INF, NAN)),
    (B + "x / y", [NAN, 0.0], NAN, (INF, NAN)),
    (U + "1.0 / x", [0.0], INF, (-INF,)),
    (U + "exp x", [1000.0], INF, (INF,)),
    (U + "exp x", [-INF], 0.0, (0.0,)),
    (B + "x * y", [1e300, 1e300], INF, (1e300, 1e300)),
    (U + "x * x", [1e200], INF, (2e200,)),
    (B + "x ** y", [10.0, 400.0], INF, (INF, INF)),
    (B + "x ** y", [-10.0, 401.0], -INF, (INF, 0.0)),
    (B + "x ** y", [0.0, -1.0], INF, (-INF, 0.0)),
    (B + "x ** y", [0.0, 0.5], 0.0, (INF, 0.0)),
    (B + "x ** y", [-8.0, 1.0 / 3.0], NAN, (NAN, 0.0)),
    (U + "x ** 400", [10.0], INF, (INF,)),
    (U + "x ** (-1)", [0.0], INF, (-INF,)),
    (U + "x ** (-1)", [-0.0], -INF, (-INF,)),
    (U + "sin (1.0 / x)", [0.0], NAN, (NAN,)),
    (U + "cos (exp x)", [1000.0], NAN, (NAN,)),
    (U + "log1p x", [-1.0], -INF, (INF,)),
    (U + "log1p x", [-2.0], NAN, (-1.0,)),
    (U + "toreal (floor x) + log x", [0.0], -INF, (INF,)),
    (U + "exp x - exp x", [1000.0], NAN, (NAN,)),   # inf - inf
    ("def f(a : Array R) : R =\n  sum (map (\\x -> log x) a)\n", [[0.0, 1.0]], -INF,
     ([INF, 1.0],)),
    ("def f(a : Array R) : R =\n  sum (map (\\x -> 1.0 / x) a)\n", [[0.0, -0.0]], NAN,
     ([-INF, -INF],)),
]


def _norm(g):
    """Gradients as plain tuples of floats (arrays as lists) for repr."""
    return tuple(list(map(float, x)) if hasattr(x, "__len__") else x for x in g)


@pytest.mark.parametrize("src, args, value, grad", EDGES)
def test_edges_are_ieee_on_every_backend_and_runtime(src, args, value, grad):
    src += "\n"
    assert same(chad.run(src, args)[0], value)
    assert same(chad.primal(src)(*args), value)
    results = {("interp", "spec"): chad.grad(src, evm="spec", backend="interp")(*args)}
    for evm in RUNTIMES:
        for backend in ("interp", "compiled"):
            results[(backend, evm)] = chad.grad(src, evm=evm, backend=backend)(*args)
    if "Array" not in src:  # first-order: the naive transform too
        for backend in ("interp", "compiled"):
            results[("naive", backend)] = chad.grad(src, transform="naive",
                                                    backend=backend)(*args)
    for where, (v, g) in results.items():
        assert same(v, value), where
        assert same(_norm(g), grad), where


@pytest.mark.parametrize("src, args, value, grad", EDGES[:12])
def test_vjp_gives_the_same_edges(src, args, value, grad):
    for evm in RUNTIMES:
        for backend in ("interp", "compiled"):
            v, back = chad.vjp(src + "\n", evm=evm, backend=backend)(*args)
            assert same(v, value) and same(_norm(back(1.0)), grad), (evm, backend)


SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e300, -1e300, 1e-310, INF, -INF, NAN]


def test_every_inline_template_equals_its_evaluation_on_special_values():
    """The compiled code's templates (`({0} / {1})` would raise) give exactly
    `evaluate`'s result, infinities and NaN included."""
    ns = dict(Gen(inline=True).ns)
    checked = 0
    for p in PRIMITIVES.values():
        if p.inline is None or p.evaluate is None:
            continue
        if p.arg == R:
            points = [(x,) for x in SPECIAL]
        elif p.arg == Prod(R, R):
            points = [(x, y) for x in SPECIAL for y in SPECIAL]
        else:
            continue
        for pt in points:
            arg = pt[0] if len(pt) == 1 else pt
            code = p.inline.format(*[repr(x).replace("inf", "_INF").replace("nan", "_NAN")
                                     for x in pt])
            got = eval(code, {**ns, "_INF": INF, "_NAN": NAN})  # noqa: S307 (our own templates)
            assert same(got, p.evaluate(arg)), (p.name, pt)
            checked += 1
    assert checked > 100


@pytest.mark.parametrize("op, arg_t", [("DIV", "RR"), ("POW", "RR"), ("LOG", "R"),
                                       ("SQRT", "R"), ("LOG1P", "R"), ("SIN", "R"),
                                       ("COS", "R"), ("EXP", "R")])
def test_real_primitives_never_raise(op, arg_t):
    ev = PRIMITIVES[op].evaluate
    for x in SPECIAL:
        if arg_t == "R":
            assert isinstance(ev(x), float)
        else:
            for y in SPECIAL:
                assert isinstance(ev((x, y)), float)


def test_powi_and_toreal_never_raise():
    ev = PRIMITIVES["POWI"].evaluate
    for x in SPECIAL:
        for n in (0, 1, -1, 2, -2, 3, -3, 401, -401, 10 ** 400, -(10 ** 400) - 1):
            assert isinstance(ev((x, n)), float)
    assert same(PRIMITIVES["TOREAL"].evaluate(10 ** 400), INF)
    assert same(PRIMITIVES["TOREAL"].evaluate(-(10 ** 400)), -INF)
    assert same(chad.run("def f(n : Z) : R = toreal n\n", [10 ** 400])[0], INF)


def test_the_library_returns_ieee_values_without_warnings():
    src = "def f(a : Array R, y : R) : R =\n  sum (map (\\x -> log x / y) a) + exp (y * 1000.0)\n"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for evm in RUNTIMES:
            for backend in ("interp", "compiled"):
                v, (ga, gy) = chad.grad(src, evm=evm, backend=backend)([0.0, 2.0], 0.0)
                assert math.isnan(v), (evm, backend)
        # array cotangents that add inf and -inf: NaN, no numpy warning
        acc = ("def f(a : Array R, w : R) : R =\n  sum (map (\\x -> x * w * w) a) - "
               "sum (map (\\x -> x * w * w) a) + a ! 0 * w * w - a ! 0 * w * w\n")
        for evm in RUNTIMES + ("spec",):
            for backend in ("interp",) if evm == "spec" else ("interp", "compiled"):
                v, (ga, gw) = chad.grad(acc, evm=evm, backend=backend)([1.0, 2.0], 1e300)
                assert same((v, list(map(float, ga))), (NAN, [NAN, NAN])), (evm, backend)
        assert math.isinf(chad.run("def f(x : R) : R = exp x\n", [1000.0])[0])
        assert math.isnan(chad.primal(src)([INF, -INF], 1.0))


def test_a_dead_real_division_is_dropped_by_the_simplifier():
    t = Let("z", Prim("DIV", Pair(Var("x"), Var("y"))), Var("x"))
    assert simplify(t) == Var("x")
    keep = Let("z", Prim("IDIV", Pair(Var("x"), Var("y"))), Var("x"))
    assert simplify(keep) != Var("x")


# ----------------------------------------------------------------- integers: still errors
@pytest.mark.parametrize("body", ["div(n, m)", "mod(n, m)"])
def test_integer_division_by_zero_is_still_a_runtime_error(body, tmp_path, capsys):
    f = write(tmp_path, "z.chad", f"def f(x : R, n : Z, m : Z) : R =\n  x * toreal ({body})\n")
    for backend in ("interp", "compiled"):
        with pytest.raises(chad.EvalError, match="division by zero") as e:
            chad.grad(open(f).read(), backend=backend)(1.0, 3, 0)
        assert e.value.loc is not None and e.value.loc.line == 2
    for cmd in ("run", "grad"):
        for extra in ([], ["--strict"]):
            code, out, err = run_cli(capsys, cmd, f, "--args", "[1.0, 3, 0]", *extra)
            assert code == 2 and out == ""
            assert "z.chad:2:" in err and "runtime error: division by zero" in err
            assert "Traceback" not in err


def test_floor_of_an_infinity_is_still_a_runtime_error():
    with pytest.raises(chad.EvalError, match="floor of inf"):
        chad.run("def f(x : R) : Z = floor (1.0 / x)\n", [0.0])


# ----------------------------------------------------------------- the command line
DIV = "def f(x : R, y : R) : R = x / y\n"


def test_grad_warns_about_a_value_and_gradients_that_are_not_finite(tmp_path, capsys):
    f = write(tmp_path, "d.chad", DIV)
    code, out, err = run_cli(capsys, "grad", f, "--args", "[0.0, 0.0]")
    assert code == 0
    assert out == 'value: "nan"\ngradient: ["inf", "nan"]\n'
    assert err.splitlines() == [
        "chad grad: warning: the value of f is not finite (nan)",
        "chad grad: warning: the gradient of f with respect to x is not finite (inf)",
        "chad grad: warning: the gradient of f with respect to y is not finite (nan)",
    ]
    code, out, err = run_cli(capsys, "grad", f, "--args", "[1.0, 0.0]", "--json",
                             "--backend", "interp")
    assert code == 0 and json.loads(out) == {"value": "inf", "gradient": ["inf", "-inf"]}
    assert "chad grad: warning: the value of f is not finite (inf)" in err


def test_grad_warns_about_a_gradient_alone(tmp_path, capsys):
    f = write(tmp_path, "s.chad", "def g(x : R, w : R) : R = sqrt x * w\n")
    code, out, err = run_cli(capsys, "grad", f, "--args", "[0.0, 2.0]")
    assert code == 0 and out == "value: 0.0\ngradient: [\"inf\", 0.0]\n"
    assert err == "chad grad: warning: the gradient of g with respect to x is not finite (inf)\n"


def test_strict_makes_it_an_error_with_exit_1(tmp_path, capsys):
    f = write(tmp_path, "d.chad", DIV)
    code, out, err = run_cli(capsys, "grad", f, "--args", "[1.0, 0.0]", "--strict", "--json")
    assert code == 1
    assert json.loads(out) == {"value": "inf", "gradient": ["inf", "-inf"]}  # still printed
    assert "chad grad: error: the value of f is not finite (inf)" in err
    assert "warning" not in err
    code, out, err = run_cli(capsys, "grad", f, "--args", "[1.0, 2.0]", "--strict")
    assert (code, err) == (0, "") and out == "value: 0.5\ngradient: [0.5, -0.25]\n"


def test_run_warns_too_and_takes_strict(tmp_path, capsys):
    f = write(tmp_path, "p.chad", "def h(x : R) : R * (R + R) = (log x, inr (exp (-x)))\n")
    code, out, err = run_cli(capsys, "run", f, "--args", "[0.0]")
    assert code == 0 and json.loads(out) == ["-inf", {"inr": 1.0}]
    assert err == "chad run: warning: the value of h is not finite (-inf at [0])\n"
    code, out, err = run_cli(capsys, "run", f, "--args", "[-1000.0]", "--strict")
    assert code == 1 and json.loads(out) == ["nan", {"inr": "inf"}]
    assert err == "chad run: error: the value of h is not finite (nan at [0])\n"
    code, out, err = run_cli(capsys, "run", f, "--args", "[1.0]", "--strict")
    assert code == 0 and err == ""


def test_array_gradients_name_the_element(tmp_path, capsys):
    f = write(tmp_path, "a.chad", "def k(a : Array R) : R = sum (map (\\x -> sqrt x) a)\n")
    code, out, err = run_cli(capsys, "grad", f, "--args", "[[4.0, 0.0]]")
    assert code == 0 and json.loads(out.split("gradient: ")[1]) == [[0.25, "inf"]]
    assert err == "chad grad: warning: the gradient of k with respect to a is not finite " \
                  "(inf at [1])\n"


def test_no_numpy_warning_reaches_stderr(tmp_path, capsys):
    f = write(tmp_path, "n.chad", "def f(a : Array R) : R = sum a\n")
    code, out, err = run_cli(capsys, "run", f, "--args", '[["inf", "-inf"]]')
    assert code == 0 and out.strip() == '"nan"'
    assert err == "chad run: warning: the value of f is not finite (nan)\n"


# ----------------------------------------------------------------- finite inputs: unchanged
FINITE = [
    (B + "x / y", [1.0, 2.0], 0.5, (0.5, -0.25)),
    (U + "log x", [math.e], 1.0, (1.0 / math.e,)),
    (U + "sqrt x", [4.0], 2.0, (0.25,)),
    (U + "exp x", [0.0], 1.0, (1.0,)),
    (B + "x ** y", [2.0, 3.0], 8.0, (12.0, math.log(2.0) * 8.0)),
    (U + "sin x * cos x", [0.0], 0.0, (1.0,)),
    (U + "log1p x", [0.0], 0.0, (1.0,)),
]


@pytest.mark.parametrize("src, args, value, grad", FINITE)
def test_finite_inputs_are_unchanged(src, args, value, grad, tmp_path, capsys):
    for backend in ("interp", "compiled"):
        v, g = chad.grad(src + "\n", backend=backend)(*args)
        assert same(v, value) and same(tuple(g), grad), backend
    f = write(tmp_path, "f.chad", src + "\n")
    code, out, err = run_cli(capsys, "grad", f, "--args", json.dumps(args), "--strict")
    assert code == 0 and err == ""
