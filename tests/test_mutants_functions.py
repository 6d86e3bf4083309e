"""Kill the mutants of the higher-order extension (chad/functions/evaluate.py,
efficient.py, calls.py) that the golden corpus, the oracle and the documented-rule tests let
survive (`make mutate`, docs/mutation-report.md).

Pinned: the derivative of a def call (no arguments; each of several arguments gets its own
cotangent component; under `naive-ho` the callee is differentiated with `naive-ho`, so the
call adds a constant number of steps to the callee's); the value and step count of every
function node's evaluation rule against the cost table of chad/functions/evaluate.py
(docs/cost-model.md); analytic gradients through closures in both forms of the efficient
transform (the literal appendix-C form and the fused form of docs/functions.md), also for a
closure that captures a variable bound by let, case, build, map or fold.
"""

from __future__ import annotations

import math

import pytest

import chad
from chad.costmodel.evaluate import Evaluator
from chad.errors import EvalError
from chad.functions import efficient as fefficient
from chad.functions.programs import t_n_source
from chad.functions.terms import (
    CApp, ClosedApp, ClosedLam, EnvOneT, EnvScatter, LCastPack, LFunZero, LogFold, LogOneT,
    LPackAs, LTagZero, MkClosure, Pack, Unpack,
)
from chad.functions.types import ClosedFn, EnvOne, LogOne, LPacked, Packed
from chad.runtime import make_evm
from chad.terms import AddEVM, Pair, Snd, Var
from chad.types import Real


# A call of a def without parameters: its derivative has no argument to send cotangents
# to, so the call's backpropagator is `\d -> pure ()` (chad/functions/calls.py).
ZERO_ARG = """
def k() : R = 2.0
def f(x : R) : R = x * k()
"""


def test_a_call_without_arguments_differentiates_as_a_constant():
    assert chad.grad(ZERO_ARG, "f")(3.0) == (6.0, (2.0,))
    assert chad.grad(ZERO_ARG, "f")(3.0, ctg=0.5) == (6.0, (1.0,))
    r = chad.cost(ZERO_ARG, [3.0], fn="f")
    # primal: prim (1) + pair (1) + x (1) + call (1 + the body's literal, 2) = 6
    assert (r.primal_steps, r.value, r.holds) == (6, 6.0, True)


# A call sends the components of the callee's cotangent tuple (dy1, (dy2, (dy3, ()))) to
# its arguments' backpropagators one by one (chad/functions/calls.py): with three or more
# arguments every argument must receive its own component.
MANY_ARGS = """
def g(a : R, b : R, c : R, d : R) : R = a * b + c * d * d
def f(x : R, y : R, z : R) : R = g(x, y * 2.0, z, x * z) + g(z, x, y, y)
"""


def test_a_call_sends_each_argument_its_own_cotangent():
    x, y, z = 1.5, 2.0, 0.5
    value = x * (2 * y) + z * (x * z) ** 2 + z * x + y * y * y
    dx = 2 * y + z * 2 * (x * z) * z + z
    dy = 2 * x + 3 * y * y
    dz = (x * z) ** 2 + z * 2 * (x * z) * x + x
    v, grads = chad.grad(MANY_ARGS, "f")(x, y, z)
    assert v == pytest.approx(value, rel=1e-12)
    assert grads == pytest.approx((dx, dy, dz), rel=1e-12)
    assert chad.cost(MANY_ARGS, [x, y, z], fn="f").holds


# Under the naive higher-order transform a call differentiates its callee with the same
# transform (docs/functions.md: the derivative of a def is built per def and per transform),
# so t_n's 2^n blow-up shows through a call, and the call adds the same number of steps
# whatever the callee (1 + its arguments, as a call, and the call's backpropagator).
def test_naive_ho_differentiates_the_callee_with_naive_ho():
    overhead, steps = set(), []
    for n in range(2, 7):
        callee = t_n_source(n, "t")
        program = callee + "def main(y : R) : R = t(y * 2.0)\n"
        through_call = chad.cost(program, [1.5], fn="main", transform="naive-ho").gradient_steps
        alone = chad.cost(callee, [3.0], fn="t", transform="naive-ho").gradient_steps
        overhead.add(through_call - alone)
        steps.append(through_call)
        assert chad.grad(program, "main", transform="naive-ho")(1.5) == (3.0, (2.0,))
    assert len(overhead) == 1
    assert all(b > 2 * a - 300 for a, b in zip(steps, steps[1:]))  # doubling


# ---------------------------------------------------------------------------------------
# The evaluation rules of the function nodes, one by one, against the cost table of
# chad/functions/evaluate.py (docs/cost-model.md, "Functions"). Variables cost 1.


TAG = Real()
OTHER = (Real(), Real())


def ev():
    return Evaluator(evm=make_evm("array"))


def test_pack_and_unpack():
    v, c = ev().eval(Pack(TAG, Var("x")), {"x": 4.0})
    assert (type(v), v.tag, v.value, c) == (Packed, TAG, 4.0, 1 + 1)
    body = Pair(Var("z"), Var("y"))
    v, c = ev().eval(Unpack(Var("p"), "z", body), {"p": Packed(TAG, 5.0), "y": 1.0})
    assert (v, c) == ((5.0, 1.0), 1 + 1 + 3)  # 1 + c(scrut) + c(body)
    with pytest.raises(EvalError):
        ev().eval(Unpack(Var("p"), "z", body), {"p": 5.0, "y": 1.0})


def test_mk_closure_and_capp():
    body = Pair(Var("x"), Pair(Var("a"), Var("b")))  # 5 steps
    mk = MkClosure(TAG, ("a", "b"), "x", body)
    env = {"a": 1.0, "b": 2.0, "y": 3.0}
    v, c = ev().eval(mk, env)
    assert c == 1 + 2  # as a lambda capturing two variables
    envt, fn = v.value
    assert (v.tag, envt) == (TAG, (1.0, (2.0, None)))
    assert (type(fn), fn.param, fn.captures, fn.body) == (ClosedFn, "x", ("a", "b"), body)
    v, c = ev().eval(CApp(mk, Var("y")), env)
    assert (v, c) == ((3.0, (1.0, 2.0)), 1 + 3 + 1 + 5)  # 1 + c(f) + c(e) + c(body)
    with pytest.raises(EvalError):
        ev().eval(mk, {"a": 1.0})


def test_closed_lam_and_closed_app():
    lam = ClosedLam("x", Pair(Var("x"), Var("x")))
    v, c = ev().eval(lam, {})
    assert c == 1
    v, c = ev().eval(ClosedApp(lam, Var("y")), {"y": 2.0})
    assert (v, c) == ((2.0, 2.0), 1 + 1 + 1 + 3)


def test_lcastpack():
    e = Var("d")
    assert ev().eval(LCastPack(TAG, e), {"d": LPacked(TAG, 7.0)}) == (7.0, 1 + 1)
    assert ev().eval(LCastPack(TAG, e), {"d": None}) == (None, 1 + 1 + 1)
    assert ev().eval(LCastPack(TAG, e), {"d": LPacked(OTHER, 7.0)}) == (None, 1 + 1 + 1)
    assert ev().eval(LCastPack(TAG, e), {"d": 7.0}) == (None, 1 + 1 + 1)


def test_lpackas_and_zeros():
    v, c = ev().eval(LPackAs(Var("p"), Var("d")), {"p": Packed(OTHER, 1.0), "d": 2.0})
    assert (type(v), v.tag, v.value, c) == (LPacked, OTHER, 2.0, 1 + 1 + 1)
    assert ev().eval(LFunZero(), {}) == (None, 1)
    assert ev().eval(LTagZero(), {}) == (None, 1)


def test_envone_and_logone():
    v, c = ev().eval(EnvOneT(2, Var("d")), {"d": 5.0})
    assert (type(v), v.index, v.ctg, c) == (EnvOne, 2, 5.0, 1 + 1)
    v, c = ev().eval(LogOneT(Var("a"), Var("d")), {"a": 1.5, "d": 5.0})
    assert (type(v), v.arg, v.ctg, c) == (LogOne, 1.5, 5.0, 1 + 1 + 1)


def bag(*entries):
    out = None
    for i, d in entries:
        one = EnvOne(i, d)
        out = one if out is None else out.plus(one)[0]
    return out


def test_envscatter():
    e = ev()
    targets = ((0, "a", None), (2, "b", None), (1, "env", 3))
    t = EnvScatter(Var("bag"), targets)
    act, c = e.eval(t, {"bag": bag((0, 1.0), (2, 4.0), (1, 2.0), (0, 0.5))})
    assert c == 1 + 1 + 4  # 1 + c(e) + number of entries
    r, cells, rc = e.evm.run(act, [10.0, None, 20.0])
    # entry (i, d) goes to targets[i]: d itself, or the one-entry bag [(sub, d)]
    assert r is None and cells[0] == 11.5 and cells[2] == 22.0
    assert (type(cells[1]), cells[1].index, cells[1].ctg) == (EnvOne, 3, 4.0)
    assert rc == 1 + 3 + (4 * 2 + 3 * 2)  # four adds (plusv 1 each), three thens
    act, c = e.eval(t, {"bag": None})
    assert c == 1 + 1
    assert e.evm.run(act, [10.0, None, 20.0]) == (None, [10.0, None, 20.0], 1 + 3 + 1)
    act, c = e.eval(t, {"bag": bag((2, 2.0))})
    assert c == 1 + 1 + 1
    r, cells, rc = e.evm.run(act, [10.0, None, 20.0])
    assert (cells[0], cells[1].ctg, cells[2], rc) == (10.0, 2.0, 20.0, 1 + 3 + 2)


def test_logfold():
    e = ev()
    log = LogOne(1.0, 2.0).plus(LogOne(3.0, 4.0))[0].plus(LogOne(5.0, 8.0))[0]
    body = AddEVM(0, "c", Snd(Var("e")))  # 1 + 2
    t = LogFold(Var("log"), "e", body)
    act, c = e.eval(t, {"log": log, "e": "outer"})
    assert c == 1 + 1 + 3 * (1 + 3)
    assert e.evm.run(act, [0.5]) == (None, [14.5], 1 + 1 + (3 * 2 + 2 * 2))
    act, c = e.eval(t, {"log": None})
    assert c == 1 + 1
    assert e.evm.run(act, [0.5]) == (None, [0.5], 1 + 1 + 1)
    # the body sees each entry (argument, cotangent)
    t = LogFold(Var("log"), "e", AddEVM(0, "c", Var("e")))
    act, _ = e.eval(t, {"log": LogOne(1.0, 2.0)})
    assert e.evm.run(act, [None]) == (None, [(1.0, 2.0)], 1 + 1 + 2)


# ---------------------------------------------------------------------------------------
# Gradients through closures, in both forms of the efficient transform (docs/functions.md:
# the literal appendix-C form of Efficient CHAD, Smeding & Vákár, and the fused form), against
# the analytic derivatives. The fused form also satisfies TH2's bound.

CLOSURES = [
    # f x = x a b + c: main = a^2 b + a b^2 + 2 c (a closure with three captures and a let)
    ("""def main(a : R, b : R, c : R) : R =
  let f = \\(x : R) -> let t = x * a in t * b + c in f a + f b""",
     [1.5, 2.0, 0.5], 11.5, (10.0, 8.25, 2.0)),
    # g x = (b a + x) x, through a closure built inside a closure:
    # main = a^2 b + a^2 + a b^2 + b^2
    ("""def main(a : R, b : R) : R =
  let g = \\(x : R) -> let h = \\(y : R) -> y * a + x in h b * x in g a + g b""",
     [1.5, 2.0], 16.75, (13.0, 12.25)),
    # compose (mul a) (+ b): main = 2 a^2 b + 2 a b (examples/compose.chad)
    ("""def compose(f : R -> R, g : R -> R) : R -> R = \\(x : R) -> f (g x)
def main(a : R, b : R) : R =
  let mul = \\(u : R) -> \\(v : R) -> u * v in
  let h = compose(mul a, \\(y : R) -> y + b) in
  h (h b) + mul b a""", [0.5, 2.0], 3.0, (8.0, 1.5)),
    # a closure without captures, applied twice: main = sin (sin a) * b
    ("""def main(a : R, b : R) : R = let s = \\(x : R) -> sin x in s (s a) * b""",
     [0.5, 2.0], None, None),
]


@pytest.fixture(params=[False, True], ids=["fused", "literal"])
def form(request):
    old = fefficient.LITERAL
    fefficient.LITERAL = request.param
    yield request.param
    fefficient.LITERAL = old


@pytest.mark.parametrize("text,args,value,grads", CLOSURES)
def test_closure_gradients_in_both_forms(form, text, args, value, grads):
    if value is None:  # sin (sin a) * b
        a, b = args
        value = math.sin(math.sin(a)) * b
        grads = (math.cos(math.sin(a)) * math.cos(a) * b, math.sin(math.sin(a)))
    v, g = chad.grad(text, "main")(*args)
    assert v == pytest.approx(value, rel=1e-12)
    assert g == pytest.approx(grads, rel=1e-12)
    v, g = chad.grad(text, "main")(*args, ctg=2.0)
    assert g == pytest.approx(tuple(2 * x for x in grads), rel=1e-12)
    r = chad.cost(text, args, fn="main")
    assert r.value == pytest.approx(value, rel=1e-12)
    if not form:
        assert r.holds


# A closure that captures a variable bound by let, case, build (its index), map (its
# element) or fold (its pair): closure conversion reads the captured variable's type from
# the transform's context (chad/functions/convert.py; the literal form builds the closure's
# environment with it), so each binder must push its type there (chad/transform/efficient.py,
# chad/arrays/transform.py). Gradients in both forms, on the counting evaluator and
# compiled, against central differences.
CAPTURES = [
    # let: x * (x * x)
    ("def f(x : R) : R = let a = x * x in let g = \\(y : R) -> y * a in g x", [1.5]),
    # case: x * (x * x)
    ("def f(x : R) : R = case (inl (x * x) : R + R) of { inl a -> (\\(y : R) -> y * a) x | inr b -> b }",
     [1.5]),
    # build: sum of xs ! i * i * xs ! 0, the closure capturing the index i and xs
    ("def f(xs : Array R) : R = sum (build (length xs) (\\i -> "
     "let g = \\(y : R) -> y * toreal i * xs ! 0 in g (xs ! i)))", [[1.5, -0.5, 2.0]]),
    # map: sum of squares, the closure capturing the element
    ("def f(xs : Array R) : R = sum (map (\\x -> let g = \\(y : R) -> y * x in g x) xs)",
     [[1.5, -0.5, 2.0]]),
    # fold: the product, the closure capturing the pair
    ("def f(xs : Array R) : R = fold (\\p -> let g = \\(y : R) -> y * fst p in g (snd p)) xs",
     [[1.5, -0.5, 2.0]]),
]


@pytest.mark.parametrize("text,args", CAPTURES)
def test_a_closure_capturing_a_bound_variable_in_both_forms(form, text, args):
    from tests.fd import fd_gradient, get

    prog = chad.load(text)
    d = prog.find(None)
    f = chad.primal(prog)
    fd = fd_gradient(lambda a: f(*a), d.params, list(args), 1.0, d.result)
    assert fd
    for backend in ("interp", "compiled"):
        value, grads = chad.grad(prog, backend=backend)(*args)
        assert value == pytest.approx(f(*args), rel=1e-12)
        for (i, path), expected in fd.items():
            assert get(grads[i], path) == pytest.approx(expected, rel=1e-6, abs=1e-6), (backend, i, path)
    assert chad.cost(prog, args).value == pytest.approx(f(*args), rel=1e-12)
