"""Vectorised array code (chad/compile/vectorise.py, chad/arrays/lower.py)
against the per-element loop and the interpreter.

Three executions of every program: compiled with vectorisation (the default),
compiled without it (`backend.vectorising(False)`: the evaluation rules' loops)
and the counting evaluator. Values agree bit for bit where numpy performs the
evaluator's operations in its order (elementwise arithmetic, a top-level sum);
numpy's own exp, log, sin, ... may differ from the math module's in the last
bit, and a sum over an inner loop of a 2-D block may add in another order: there
the agreement is within 1e-12 relative (of the magnitude of the values), and
NaN, the infinities and the sign of a zero elementwise as the evaluator's.
"""

from __future__ import annotations

import math
import os
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import chad
from chad.compile import backend
from chad.costmodel import generators as G
from chad.errors import ChadError
from chad.types import Real
from tests.oracle_agda import canon

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNTIMES = ("array", "map", "parallel")
RTOL = 1e-12

pytestmark = pytest.mark.filterwarnings("error::SyntaxWarning", "error::RuntimeWarning")

PROGRAMS = {
    "dot": "def dot(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> a ! i * b ! i))",
    "lse": "def lse(a : Array R) : R = let m = fold (\\p -> max(fst p, snd p)) a in "
           "log (sum (map (\\x -> exp (x - m)) a)) + m",
    "closure": "def clo(a : Array R, c : R) : Array R = map (\\x -> sin (x * c) / c + c) a",
    "matvec": "def mv(m : Array (Array R), v : Array R) : Array R = "
              "build (length m) (\\i -> sum (build (length v) (\\j -> m ! i ! j * v ! j)))",
    "summv": "def smv(m : Array (Array R), v : Array R) : R = "
             "sum (build (length m) (\\i -> sum (build (length v) (\\j -> m ! i ! j * v ! j))))",
    "outer": "def outer(a : Array R, b : Array R) : Array (Array R) = "
             "build (length a) (\\i -> build (length b) (\\j -> a ! i * b ! j - 2.0))",
    "iota": "def iota(n : Z) : Array R = build n (\\i -> toreal i * 0.5)",
    "gather": "def g(a : Array R, ix : Array Z) : Array R = "
              "build (length ix) (\\i -> a ! (ix ! i))",
    "const": "def c(n : Z, x : R) : Array R = build n (\\i -> x * 2.0)",
    "ident": "def ident(a : Array R) : Array R = map (\\x -> x) a",
}


def _args(name, rng, n=7):
    a, b = rng.normal(size=n), rng.normal(size=n)
    m = [rng.normal(size=max(n - 2, 0)) for _ in range(n)]
    return {
        "dot": (a, b), "lse": (a,), "closure": (a, 0.7), "matvec": (m, b[:max(n - 2, 0)]),
        "summv": (m, b[:max(n - 2, 0)]), "outer": (a, b[:3]), "iota": (n,),
        "gather": (a, np.array([3, 0, n - 1, 3], dtype=np.int64)), "const": (n, 1.5),
        "ident": (a,),
    }[name]


def _flat(v):
    """The leaves of a value (canon's form: floats as hex, sums as dicts), with
    the floats as floats again."""
    out, stack = [], [canon(v)]
    while stack:
        x = stack.pop()
        if isinstance(x, list):
            stack.extend(reversed(x))
        elif isinstance(x, dict):
            for key in sorted(x):
                out.append(key)
                stack.append(x[key])
        elif isinstance(x, str) and x != "nan" and not x.startswith(("inl", "inr")):
            out.append(float.fromhex(x))
        elif x == "nan":
            out.append(math.nan)
        else:
            out.append(x)
    return out


def agree(got, want, exact: bool) -> None:
    """got equals want: bit for bit when exact, else within RTOL, with NaN, the
    infinities and the signs of zeros (elementwise) the same."""
    g, w = _flat(got), _flat(want)
    assert len(g) == len(w), (got, want)
    for x, y in zip(g, w):
        assert type(x) is type(y), (got, want)
        if isinstance(y, float):
            if math.isnan(y) or math.isinf(y) or y == 0.0 or exact:
                assert x.hex() == y.hex() or (math.isnan(x) and math.isnan(y)), (got, want)
            else:
                assert abs(x - y) <= RTOL * abs(y), (x, y)
        else:
            assert x == y, (got, want)


def _source(text, what="primal"):
    prog = chad.load(text)
    d = prog.find(None)
    if what == "primal":
        return backend.primal_module(prog, d).source
    return backend.gradient_module(prog, d).source


def _three(text, args):
    vec = chad.primal(text)(*args)
    with backend.vectorising(False):
        loop = chad.primal(text)(*args)
    interp = chad.primal(text, backend="interp")(*args)
    return vec, loop, interp


EXACT = {"dot", "matvec", "summv", "outer", "iota", "gather", "const", "ident"}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_vectorised_loop_and_interpreter_agree(name):
    text = PROGRAMS[name]
    assert "vectorised" in _source(text)  # the choice is shown, and it is numpy
    with backend.vectorising(False):
        assert "vectorised" not in _source(text)
    rng = np.random.default_rng(1)
    for n in (1, 2, 7, 40):
        if name in ("matvec", "summv", "gather") and n < 4:
            continue
        vec, loop, interp = _three(text, _args(name, rng, n))
        agree(loop, interp, exact=True)
        agree(vec, interp, exact=name in EXACT)


def test_the_results_own_their_data():
    """A vectorised build of `a ! i` or a map of the identity is a new array, not
    a view of the argument (the evaluator's arrays are fresh)."""
    a = np.arange(5.0)
    out = chad.primal(PROGRAMS["ident"])(a)
    out[0] = 99.0
    assert a[0] == 0.0


def test_empty_loops_and_unbatchable_hoisting():
    # size 0: an empty array, no error
    assert chad.primal(PROGRAMS["const"])(0, 1.5).shape == (0,)
    # an index of a constant could fail where a loop of size 0 never evaluates
    # it: not hoisted out of the loop, so the build stays a per-element loop
    text = "def f(n : Z, a : Array R) : Array R = build n (\\i -> a ! 5 * 2.0)"
    assert "build: per-element loop" in _source(text)
    assert chad.primal(text)(0, np.zeros(2)).shape == (0,)


@pytest.mark.parametrize("text,args", [
    (PROGRAMS["dot"].replace("length a", "length a + 1"), (np.ones(3), np.ones(4))),
    ("def f(n : Z, a : Array R) : Array R = build n (\\i -> a ! i)", (-1, np.ones(3))),
    (PROGRAMS["gather"], (np.ones(3), np.array([0, 3], dtype=np.int64))),
    (PROGRAMS["gather"], (np.ones(3), np.array([0, -1], dtype=np.int64))),
    (PROGRAMS["matvec"], ([np.ones(2), np.ones(1)], np.ones(2))),
])
def test_errors_are_the_interpreters(text, args):
    assert "vectorised" in _source(text)
    with pytest.raises(ChadError) as compiled:
        chad.primal(text)(*args)
    with pytest.raises(ChadError) as interp:
        chad.primal(text, backend="interp")(*args)
    assert str(compiled.value) == str(interp.value)


SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e308, -1e308, 1e-310, math.inf, -math.inf,
           math.nan, 3.0, 710.0, -745.5]
UNARY = ["exp", "log", "sin", "cos", "tanh", "sqrt", "abs", "atan", "log1p", "-"]
BINARY = ["+", "*", "/", "**", "max", "min"]


@pytest.mark.parametrize("op", UNARY + BINARY)
def test_special_values_as_the_interpreter(op):
    """Every batched primitive on infinities, NaN, zeros of both signs,
    overflows and subnormals: the evaluator's results (its IEEE values)."""
    if op in UNARY:
        body = f"{op} (a ! i)" if op != "-" else "- (a ! i)"
        text = f"def f(a : Array R) : Array R = build (length a) (\\i -> {body})"
        args = (np.array(SPECIAL),)
    else:
        x = [u for u in SPECIAL for _ in SPECIAL]
        y = [v for _ in SPECIAL for v in SPECIAL]
        e = f"{op}(a ! i, b ! i)" if op in ("max", "min") else f"a ! i {op} b ! i"
        text = f"def f(a : Array R, b : Array R) : Array R = build (length a) (\\i -> {e})"
        args = (np.array(x), np.array(y))
    assert "vectorised" in _source(text)
    vec, loop, interp = _three(text, args)
    agree(loop, interp, exact=True)
    agree(vec, interp, exact=op in ("+", "*", "/", "-", "abs", "sqrt", "max", "min"))


def test_hostile_names_never_reach_the_vectorised_source():
    text = ("def f(os : Array R, exec : R) : Array R = "
            "map (\\__import__ -> let v3 = __import__ * exec in let _np = v3 + 1.0 in _np) os")
    source = _source(text)
    assert "vectorised" in source
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("#"))
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_']*", code))
    assert not ({"os", "exec", "__import__"} & words)
    assert "v3" not in words or re.search(r"\bv3 = ", code)  # only as a generated local
    a = np.array([1.0, -2.0, 0.25])
    vec, loop, interp = _three(text, (a, 3.0))
    agree(vec, interp, exact=True)


# --------------------------------------------------------------- gradients


@pytest.mark.parametrize("name", ["dot", "lse", "closure", "summv"])
def test_finite_differences_of_the_vectorised_primal(name):
    """The compiled gradient against central differences of the vectorised primal
    (its first argument, an Array R)."""
    text = PROGRAMS[name]
    if name == "closure":
        text = text.replace(": Array R = map", ": R = sum (map").rstrip() + ")"
    rng = np.random.default_rng(3)
    args = list(_args(name, rng, 6))
    f = chad.primal(text)
    _value, grads = chad.grad(text)(*args)
    x = np.array(args[0] if name != "summv" else args[1], dtype=float)
    pos = 0 if name != "summv" else 1
    g = np.asarray(grads[pos])
    h = 1e-6
    for k in range(len(x)):
        up, down = x.copy(), x.copy()
        up[k] += h
        down[k] -= h
        fd = (f(*_with(args, pos, up)) - f(*_with(args, pos, down))) / (2 * h)
        assert abs(fd - g[k]) <= 1e-6 * max(1.0, abs(g[k])), (k, fd, g[k])


def _with(args, pos, x):
    out = list(args)
    out[pos] = x
    return out


@pytest.mark.parametrize("name", ["dot", "lse", "closure", "summv", "gather"])
def test_gradients_on_every_runtime(name):
    text = PROGRAMS[name]
    if name == "closure":
        text = text.replace(": Array R = map", ": R = sum (map").rstrip() + ")"
    if name == "gather":
        text = text.replace(": Array R = build", ": R = sum (build").rstrip() + ")"
    args = _args(name, np.random.default_rng(5), 7)
    want = chad.grad(text, backend="interp")(*args)
    for evm in RUNTIMES:
        agree(chad.grad(text, evm=evm)(*args), want, exact=False)
        value, back = chad.vjp(text, evm=evm)(*args)
        agree((value, back(1.0)), want, exact=False)


# --------------------------------------------------------------- examples and generated programs


def _example_cases():
    out = []
    for name in sorted(os.listdir(os.path.join(ROOT, "examples"))):
        if name.endswith(".chad"):
            text = open(os.path.join(ROOT, "examples", name)).read()
            args = re.search(r"^# args: (.*)$", text, re.M)
            ctg = re.search(r"^# ctg: (.*)$", text, re.M)
            if args:
                out.append((name, text, args.group(1), ctg.group(1) if ctg else None))
    return out


@pytest.mark.parametrize("name,text,args,ctg", _example_cases(), ids=lambda v: str(v)[:20])
def test_every_example_on_every_runtime(name, text, args, ctg):
    import json

    args = json.loads(args)
    kw = {} if ctg is None else {"ctg": json.loads(ctg)}
    vec, loop, interp = _three(text, args)
    agree(loop, interp, exact=True)
    agree(vec, interp, exact=False)
    want = chad.vjp(text, backend="interp")(*args)
    want = (want[0], want[1](**kw))
    for evm in RUNTIMES:
        value, back = chad.vjp(text, evm=evm)(*args)
        agree((value, back(**kw)), want, exact=False)


VECTORISED = {"count": 0, "tried": 0}


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(G.programs(max_depth=4, max_params=3, arrays=True))
def _generated(case):
    prog = case.program
    text = case.source()
    d = prog.find(None)
    VECTORISED["tried"] += 1
    if "vectorised" in backend.primal_module(prog, d).source:
        VECTORISED["count"] += 1
    vec = chad.primal(prog)(*case.args)
    with backend.vectorising(False):
        loop = chad.primal(prog)(*case.args)
    interp = chad.primal(prog, backend="interp")(*case.args)
    agree(loop, interp, exact=True)
    agree(vec, interp, exact=False)
    want_v, back = chad.vjp(prog, backend="interp")(*case.args)
    want = (want_v, back(case.ctg))
    for evm in RUNTIMES:
        value, back = chad.vjp(prog, evm=evm)(*case.args)
        agree((value, back(case.ctg)), want, exact=False), text
    if isinstance(case.defn.result, Real):
        agree(chad.grad(prog)(*case.args, ctg=case.ctg), want, exact=False)


def test_generated_array_programs():
    VECTORISED.update(count=0, tried=0)
    _generated()
    assert VECTORISED["tried"] >= 150
    assert VECTORISED["count"] >= 10, VECTORISED  # the generators reach the batcher


@pytest.mark.parametrize("op", ["max", "min"])
def test_fold_of_max_and_min(op):
    """np.max / np.min only where the fold's order cannot matter: with NaN or a
    zero result (0.0 against -0.0) the evaluator's balanced fold runs."""
    text = f"def f(a : Array R) : R = fold (\\p -> {op}(fst p, snd p)) a"
    assert "fold: vectorised" in _source(text)
    cases = [[3.0, -1.0, 7.5, 7.5, 2.0], [math.nan, 1.0, 2.0], [1.0, math.nan, -3.0],
             [0.0, -0.0, -1.0], [-0.0, 0.0, 1.0], [-0.0, 0.0], [0.0, -0.0], [math.inf, -math.inf],
             [-2.0], [5e-324, -5e-324]]
    for xs in cases:
        vec, loop, interp = _three(text, (np.array(xs),))
        agree(loop, interp, exact=True)
        agree(vec, interp, exact=True)
    with pytest.raises(ChadError) as compiled:
        chad.primal(text)(np.zeros(0))
    with pytest.raises(ChadError) as interp:
        chad.primal(text, backend="interp")(np.zeros(0))
    assert str(compiled.value) == str(interp.value)


# --------------------------------------------------------------- batched reverse passes

SHARED = "def f(a : Array R, c : R) : R = sum (map (\\x -> x * c + c * c) a)"
INTS = ("def g(a : Array R, ix : Array Z) : R = "
        "sum (build (length ix) (\\i -> toreal (ix ! i) * a ! i))")


@pytest.mark.parametrize("text,marker", [
    (PROGRAMS["dot"], "build: vectorised (forward pass)"),
    (PROGRAMS["lse"], "unzipMap: vectorised (forward pass)"),
    (SHARED, "unzipMap: vectorised (forward pass)"),
    (INTS, "build: vectorised (forward pass)"),
])
def test_batched_reverse_passes_bit_for_bit(text, marker):
    """The forward pass batched (the ys and one batched backpropagator) and the
    reverse pass run on arrays of cells: the same gradients as the evaluator's,
    bit for bit where no exp is involved. SHARED adds every element's
    contribution to c's one cell: in the evaluator's order (a running sum), so
    values of very different magnitudes give its result exactly. INTS reads an
    Array Z in the body: the run-time check sends it to the per-element code."""
    source = _source(text, "grad")
    assert marker in source and "_vseq(" in source
    rng = np.random.default_rng(11)
    for n in (1, 2, 9, 300):
        a = rng.normal(size=n) * 10.0 ** rng.integers(-8, 8, size=n)
        args = {"dot": (a, rng.normal(size=n)), "lse": (a,), "shared": (a, 1.3),
                "ints": (a, rng.integers(-3, 3, size=n))}
        key = ("dot" if "dot" in text else "lse" if "lse" in text
               else "shared" if text == SHARED else "ints")
        want = chad.grad(text, backend="interp")(*args[key])
        for evm in RUNTIMES:
            agree(chad.grad(text, evm=evm)(*args[key]), want, exact=key != "lse")
            value, back = chad.vjp(text, evm=evm)(*args[key])
            agree((value, back(1.0)), want, exact=key != "lse")


def test_the_batched_backpropagators_read_as_arrays():
    """A VecBack / VecPairs read as an array (by anything but sequenceScoped or
    unzip) is the per-element code's array of closures (pairs), computed once."""
    from chad.compile import vector_support as V

    calls = []

    def lazy():
        calls.append(1)
        return tuple((float(i), f"closure {i}") for i in range(3))

    back = V.VecBack(None, 3, (), lazy, pairs=True)
    pairs = V.VecPairs(np.arange(3.0), back)
    assert len(back) == 3 and len(pairs) == 3
    assert back[1] == "closure 1" and list(back) == ["closure 0", "closure 1", "closure 2"]
    assert pairs[2] == (2.0, "closure 2") and list(pairs)[0] == (0.0, "closure 0")
    assert V.vunzip(pairs)[1] is back and V.vunzip((1, 2)) is None
    # sequenceScoped's dispatch: only a VecBack with an Array R of cotangents
    assert V.vseq(tuple(back), np.zeros(3), (0.0,), (0,)) is None
    assert V.vseq(back, [0.0, 0.0, 0.0], (0.0,), (0,)) is None
    assert V.vseq(back, np.zeros(3), ((0.0, 0.0),), (0,)) is None
    assert V.vseq(back, np.zeros(3), (0.0,), ()) is None
    assert calls == [1, 1]  # back's closures and pairs' pairs, once each


@pytest.mark.parametrize("op", ["max", "min"])
def test_gradient_of_a_fold_by_max_and_min(op):
    """foldTree / unTree of max (min) as np.argmax (argmin): the cotangent goes to
    the leftmost winner, as the balanced fold's; NaN, a zero cotangent (whose
    sign the tree's additions may change) and a single element as the evaluator."""
    text = (f"def f(a : Array R) : R = let m = fold (\\p -> {op}(fst p, snd p)) a in "
            "m * m + sum (map (\\x -> x * m) a)")
    assert "foldTree: vectorised" in _source(text, "grad")
    cases = [[1.0, 3.0, 3.0, 2.0], [0.0, -0.0, -1.0], [-0.0, 0.0], [math.nan, 1.0], [5.0],
             [2.0, -1.0, 2.0, math.inf], [-0.0], [1.0, -math.inf, -math.inf, 0.5]]
    for xs in cases:
        a = np.array(xs)
        interp = chad.vjp(text, backend="interp")(a)
        for evm in RUNTIMES:
            agree(chad.grad(text, evm=evm)(a), (interp[0], interp[1](1.0)), exact=True)
            value, back = chad.vjp(text, evm=evm)(a)
            for d in (1.0, -2.5, 0.0, -0.0, math.nan):
                agree((value, back(d)), (interp[0], interp[1](d)), exact=True)
