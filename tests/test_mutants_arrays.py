"""Kill the mutants of the array extension (chad/arrays/evaluate.py, transform.py) that the
golden corpus, the oracle and the documented-rule tests let survive (`make mutate`,
docs/mutation-report.md).

Pinned: the documented errors of chad/arrays/evaluate.py (an index out of range, index n
included, is an EvalError naming the index and the length, in the source and in the
derivative's Gather; an Array Z element outside int64 is an EvalError naming the first such
element, from build and from map); the representation of array values (the derivative
returns the source's float64 array; the cotangent of an Array R, through a build, a map or a
fold, is a dense float64 array), on the counting evaluator and compiled; exact gradients.
Array literals: their value, step count (1 + the elements'), left-to-right evaluation, and
their derivative's gradients (against finite differences) and step counts (derived from the
documented rules); `sum` of an Array Z (exact, 1 + c(s) + n); `sum` of an Array R without
numpy's warnings. The gather reads of docs/arrays.md ("Gathers"): which reads become gathers
(one per distinct read evaluated once per element; not under a branch, in a lambda, in a
nested loop's body, nor of an array bound inside the body), counted in the derivative term,
and their gradients for elements that are reals, pairs, sums and arrays (finite
differences). The derivative's runtime errors name the source's line:column.
"""

from __future__ import annotations

import numpy as np
import pytest

import chad
from chad.errors import EvalError


# chad/arrays/evaluate.py: an index out of range (index n included) is an EvalError naming
# the index and the length, in the source's `xs ! i` and in the derivative, where a build's
# indexing of an outer array is one Gather over all the indices (chad/arrays/transform.py).
@pytest.mark.parametrize("index,bad", [("i + 1", 2), ("i + 2", 2), ("i - 1", -1)])
def test_an_index_out_of_range_is_an_eval_error_in_the_source_and_the_gather(index, bad):
    text = f"def f(xs : Array R) : R = sum (build (length xs) (\\i -> xs ! ({index})))"
    with pytest.raises(EvalError) as primal:
        chad.run(text, [[1.0, 2.0]])
    with pytest.raises(EvalError) as derivative:
        chad.grad(text)([1.0, 2.0])
    for e in (primal, derivative):
        assert f"index {bad} out of range for an array of length 2" in str(e.value)


# The derivative's primal value of an Array R is the same float64 array as the source's
# (Unzip with the element type fixes the representation), and the cotangent of a folded
# Array R is a dense float64 array with 0.0 for the elements that get no cotangent
# (UnTree's dense_of with the element's cotangent type).
@pytest.mark.parametrize("backend", ["interp", "compiled"])
@pytest.mark.parametrize("form", ["build (length xs) (\\i -> xs ! i * 2.0)",
                                  "map (\\x -> x * 2.0) xs"])
def test_the_derivative_of_a_build_or_map_returns_the_sources_array(form, backend):
    text = f"def f(xs : Array R) : Array R = {form}"
    source, _steps = chad.run(text, [[1.0, 2.0, 3.0]])
    value, (dxs,) = chad.grad(text, backend=backend)([1.0, 2.0, 3.0], ctg=[1.0, 0.5, 0.0])
    for v in (source, value):
        assert isinstance(v, np.ndarray) and v.dtype == np.float64
        assert v.tolist() == [2.0, 4.0, 6.0]
    assert isinstance(dxs, np.ndarray) and dxs.dtype == np.float64
    assert dxs.tolist() == [2.0, 1.0, 0.0]


@pytest.mark.parametrize("backend", ["interp", "compiled"])
@pytest.mark.parametrize("form", ["build (length xs) (\\i -> xs ! i * 2.0)",
                                  "build (length xs) (\\i -> xs ! i * xs ! (i + 0))",
                                  "map (\\x -> x * 2.0) xs"])
def test_the_derivative_of_an_empty_build_or_map_returns_the_sources_array(form, backend):
    """At n = 0 too (for a build with gather reads, the derivative's branch for an
    empty build, an empty array literal of the element type): the derivative's
    array is the source's, an empty float64 numpy array, and the cotangent too."""
    text = f"def f(xs : Array R) : Array R = {form}"
    source, _steps = chad.run(text, [[]])
    value, (dxs,) = chad.grad(text, backend=backend)([], ctg=[])
    for v in (source, value):
        assert isinstance(v, np.ndarray) and v.dtype == np.float64 and v.shape == (0,)
    assert isinstance(dxs, np.ndarray) and dxs.dtype == np.float64 and dxs.shape == (0,)


@pytest.mark.parametrize("backend", ["interp", "compiled"])
def test_the_cotangent_of_a_folded_array_is_dense(backend):
    text = "def f(xs : Array R) : R = fold (\\p -> fst p) xs"
    value, (dxs,) = chad.grad(text, backend=backend)([5.0, 2.0, 3.0, 4.0])
    assert value == 5.0
    assert isinstance(dxs, np.ndarray) and dxs.dtype == np.float64
    assert dxs.tolist() == [1.0, 0.0, 0.0, 0.0]
    text = "def f(xs : Array R) : R = fold (\\p -> fst p * snd p) xs"
    value, (dxs,) = chad.grad(text, backend=backend)([5.0, 2.0, 3.0])
    assert value == 30.0
    assert isinstance(dxs, np.ndarray) and dxs.tolist() == [6.0, 15.0, 10.0]


# chad/arrays/evaluate.py (_Numbers): build and map put an Array Z's elements straight into
# an int64 array; an element outside the 64-bit range is an EvalError naming the FIRST such
# element, raised once every element has been evaluated (as chad.values.make_array).
@pytest.mark.parametrize("form", ["build 4 (\\i -> n * n * (i + 1))",
                                  "map (\\i -> n * n * (i + 1)) (build 4 (\\i -> i))"])
def test_an_array_z_element_outside_int64_is_an_eval_error_naming_the_first(form):
    text = f"def f(n : Z) : Array Z = {form}"
    big = 2 ** 40
    with pytest.raises(EvalError) as e:
        chad.run(text, [big])
    assert f"outside the 64-bit range -2**63 .. 2**63-1: {big * big}" in str(e.value)
    assert f"{2 * big * big}" not in str(e.value)
    value, _steps = chad.run(text, [3])
    assert isinstance(value, np.ndarray) and value.dtype == np.int64
    assert value.tolist() == [9, 18, 27, 36]
    # only the first element is outside int64
    text = f"def f(n : Z) : Array Z = build 3 (\\i -> if i == 0 then n * n else i)"
    with pytest.raises(EvalError) as e:
        chad.run(text, [big])
    assert f": {big * big}" in str(e.value)


# chad/arrays/evaluate.py (eval_array_lit): `[e1, ..., en]` costs 1 + c(e1) + ... + c(en)
# (docs/cost-model.md, "Arrays"), evaluates its elements left to right (the error is the
# first failing element's), and gives the numpy array of make_array for Array R / Array Z
# and a tuple for other element types. The elements' costs follow the formalisation's rules:
# a variable 1, a literal 2, `x * x` 4 (prim MUL of a pair), `sin x` 2.
@pytest.mark.parametrize("n", [0, 1, 2, 3, 5])
def test_an_array_literal_costs_one_plus_its_elements_left_to_right(n):
    import math

    pool = [("x", 1, lambda x: x), ("x * x", 4, lambda x: x * x), ("2.0", 2, lambda x: 2.0),
            ("sin x", 2, math.sin)]
    elems = [pool[i % 4] for i in range(n)]
    lit = "[" + ", ".join(e for e, _, _ in elems) + "]" if n else "([] : Array R)"
    value, steps = chad.run(f"def f(x : R) : Array R = {lit}", [1.5])
    assert steps == 1 + sum(c for _, c, _ in elems)
    assert isinstance(value, np.ndarray) and value.dtype == np.float64
    assert value.tolist() == [f(1.5) for _, _, f in elems]
    # Array Z: an int64 array; pairs: a tuple of pairs
    value, steps = chad.run("def f(k : Z) : Array Z = [k, k * k, 7]", [3])
    assert steps == 1 + 1 + 4 + 2
    assert isinstance(value, np.ndarray) and value.dtype == np.int64 and value.tolist() == [3, 9, 7]
    value, steps = chad.run("def f(x : R) : Array (R * Z) = [(x, 1), (2.0, 2)]", [1.5])
    assert value == ((1.5, 1), (2.0, 2))
    assert steps == 1 + (1 + 1 + 2) + (1 + 2 + 2)


def test_an_array_literals_elements_are_evaluated_left_to_right():
    text = "def f(a : Array R) : Array R = [a ! 0, a ! 3, a ! 5]"
    with pytest.raises(EvalError) as e:
        chad.run(text, [[1.0, 2.0]])
    assert "index 3 out of range for an array of length 2" in str(e.value)


# chad/arrays/evaluate.py (_isum): `sum` on an Array Z (prim ISUM) is the exact integer sum
# (no int64 wrap-around) and costs 1 + c(s) + n, as SUM.
@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_the_sum_of_an_array_z_is_exact_and_costs_one_plus_argument_plus_n(n):
    value, steps = chad.run("def f(k : Z) : Z = sum (build k (\\i -> i * i))", [n])
    assert value == sum(i * i for i in range(n)) and isinstance(value, int)
    # 1 + c(build) + n, c(build) = 1 + c(k) + n c(i * i) = 2 + 4 n
    assert steps == 1 + (2 + 4 * n) + n
    big = [2 ** 62] * n
    value, steps = chad.run("def f(a : Array Z) : Z = sum a", [big])
    assert value == n * 2 ** 62 and steps == 2 + n
    # its derivative is the zero bag: the real parameter's cotangent only
    text = "def f(x : R, a : Array Z) : R = x * toreal (sum a)"
    for backend in ("interp", "compiled"):
        value, (dx, _da) = chad.grad(text, backend=backend)(2.0, [1, 2, n])
        assert value == 2.0 * (3 + n) and dx == 3.0 + n


def assert_gradients_match_fd(text, args, ctg=1.0, backends=("interp", "compiled")):
    """chad.grad of text's def at args, on the counting evaluator (interp, which runs the
    rules of chad/arrays/evaluate.py) and compiled, against central differences of the
    primal for the cotangent ctg."""
    from tests.fd import fd_gradient, get

    prog = chad.load(text)
    d = prog.find(None)
    f = chad.primal(prog)
    fd = fd_gradient(lambda a: f(*a), d.params, list(args), ctg, d.result)
    assert fd, "not differentiable at these arguments"
    for backend in backends:
        _value, grads = chad.grad(prog, backend=backend)(*args, ctg=ctg)
        for (i, path), expected in fd.items():
            assert get(grads[i], path) == pytest.approx(expected, rel=1e-6, abs=1e-6), (backend, i, path)


# chad/arrays/transform.py (chad_array_lit): element k's backpropagator gets component k of
# the scattered cotangent; every element and every component counts, for reals, pairs and
# with discrete elements (whose backpropagator is `pure ()`).
@pytest.mark.parametrize("text,args,ctg", [
    ("def f(x : R, y : R) : R = let v = [x * y, sin x, y * y] in v ! 0 * 3.0 + v ! 1 * 5.0 + v ! 2 * 7.0",
     [1.5, -0.5], 1.0),
    ("def f(x : R, y : R) : Array R = [x * y, sin x, y * y, x]", [1.5, -0.5], [1.0, 2.0, 3.0, 5.0]),
    ("def f(x : R, y : R) : R = sum [x * y, x, x * x]", [1.5, -0.5], 1.0),
    ("def f(x : R) : R = ([x * x] ! 0) * 3.0", [1.5], 1.0),
    ("def f(x : R, y : R) : R = let v = [(x, y), (y * y, x * x)] in fst (v ! 0) * snd (v ! 1) + snd (v ! 0) * fst (v ! 1) * 3.0",
     [1.5, -0.5], 1.0),
    ("def f(x : R, k : Z) : R = let v = [k, k * k] in x * toreal (v ! 1)", [1.5, 3], 1.0),
])
def test_the_gradient_of_an_array_literal_matches_finite_differences(text, args, ctg):
    assert_gradients_match_fd(text, args, ctg)


# chad/arrays/evaluate.py (_sum): `sum` of an Array R follows IEEE 754 as numpy does, without
# numpy's warnings (docs/language.md, "Evaluation": the library warns about nothing): an
# overflow gives inf and inf + -inf gives NaN, with warnings turned into errors here.
def test_the_sum_of_an_array_r_is_ieee_without_warnings():
    import math
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value, steps = chad.run("def f(a : Array R) : R = sum a", [[1e308, 1e308]])
        assert value == math.inf and steps == 1 + 1 + 2
        value, steps = chad.run("def f(x : R) : R = sum [exp x, 0.0 - exp x]", [1000.0])
        assert math.isnan(value)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5])
def test_the_gradient_steps_of_an_array_literal_follow_the_documented_rules(n):
    """chad [x, ..., x] (n times; docs/arrays.md, "array literal") = let r1 = (x, \\[] d -> add x d)
    in ... let rn = .. in ([fst r1, ..., fst rn], \\[r1..rn] d -> let ds = scatter (zeros n)
    (collect d) in snd r1 (ds ! 0) >> ... >> snd rn (ds ! (n - 1))), with the rules of
    docs/cost-model.md (as tests/test_cost_rules_documented.py derives the build's):
      CHAD t: n lets (1 + pair 3) + pair (1 + literal (1 + 2n) + lam with n captures (1 + n))
              = 3 + 7n; snd 4 + 7n
      zeros n: 1 + 2 + n; collect d (a BArray of n): 3 + n; scatter: 1 + (3 + n) + (3 + n) + n
              pairs = 7 + 3n (with the zero cotangent, collect of BEmpty 3 and no pair: 7 + n)
      element k: app 1 + snd rk 2 + ds ! k (1 + 1 + 2) + add x d 2 = 9; `>>` 4 each
      body: let 1 + (7 + 3n) + 9n + 4 (n - 1) = 4 + 16n; m = 1 + (4 + 7n) + 1 + (4 + 16n) = 10 + 23n
      env: pair (LZERO 2) unit = 4; run: n adds (1 + plusv 1) and 2 per `>>`: 4n - 2
      total 1 + (10 + 23n) + 4 + (1 + 1 param + 4n - 2) = 15 + 27n; with the zero cotangent 15 + 25n.
    n = 0 (`([] : Array R)`, backpropagator \\[] d -> pure ()): CHAD t = pair (1 + [] 1 + lam 1) = 3,
      snd 4; m = 1 + 4 + 1 + pure () 2 = 8; env 4; run of pure 1: total 1 + 8 + 4 + (1 + 1 + 1) = 16."""
    lit = "[" + ", ".join(["x"] * n) + "]" if n else "([] : Array R)"
    text = f"def f(x : R) : Array R = {lit}"
    rep = chad.cost(text, [1.5], [1.0] * n)
    assert (rep.primal_steps, rep.gradient_steps) == (1 + n, 15 + 27 * n if n else 16)
    rep = chad.cost(text, [1.5], None)
    assert (rep.primal_steps, rep.gradient_steps) == (1 + n, 15 + 25 * n if n else 16)


# An error in the derivative's primal pass names the same line:column as the source's
# (docs/language.md, "Errors": reported with the line and column): the derivative's build (with and
# without gathers, whose index arrays are builds of their own), its Gather, an index that is
# not a gather read (outside a build, or under a case branch) and the FoldTree of a fold
# keep the source form's location (chad/arrays/transform.py), and the Gather's out-of-range
# error carries it (chad/arrays/evaluate.py).
@pytest.mark.parametrize("body,args,at,says", [
    ("sum (build k (\\i -> x))", [1.0, -1], "build k", ("negative size -1",)),
    ("sum (build k (\\i -> x * xs ! i))", [1.0, -1], "build k", ("negative size -1",)),
    ("sum (build (length xs) (\\i -> x * xs ! (i + 1)))", [1.0, 0], "xs ! (i + 1)", ("index 2", "length 2")),
    ("[x, x] ! k", [1.0, 2], "[x, x] ! k", ("index 2", "length 2")),
    ("sum (build (length xs) (\\i -> if i > 0 then xs ! (i + 5) else x))", [1.0, 0], "xs ! (i + 5)",
     ("index 6", "length 2")),
    ("fold (\\p -> fst p * x) (build k (\\i -> x))", [1.0, 0], "fold", ("fold of an empty array",)),
])
def test_an_error_in_the_derivative_names_the_source_location(body, args, at, says):
    """docs/language.md, "Arrays": a negative build size, an index out of range (naming the
    index and the length) and a fold of an empty array are runtime errors."""
    text = f"def f(x : R, k : Z) : R =\n  let xs = [x, 2.0 * x] in\n  {body}"
    col = text.splitlines()[2].index(at) + 1
    calls = [lambda: chad.run(text, args)] + [
        (lambda b=b: chad.grad(text, backend=b)(*args)) for b in ("interp", "compiled")]
    for call in calls:
        with pytest.raises(EvalError) as e:
            call()
        assert str(e.value).startswith(f"<input>:3:{col}: runtime error: "), str(e.value)
        assert all(part in str(e.value) for part in says), str(e.value)


# chad/arrays/transform.py (extract_gathers): only a read `a ! e` evaluated exactly once per
# element, of an array `a` bound outside the build, becomes a gather (computed for every
# element in the primal pass). A read under a case branch, in a lambda's body or in a nested
# loop's body is not (here it is out of range for the elements where the source never
# evaluates it), and neither is a read of an array bound inside the body (not in scope
# outside the build). Gradients against central differences.
@pytest.mark.parametrize("body", [
    # under a case branch: xs ! (i - 1) is read only for i > 0
    "if i > 0 then xs ! (i - 1) * xs ! i else xs ! i",
    # in a lambda's body, applied only when i + 1 is in range
    "let g = \\(y : R) -> y * xs ! (i + 1) in if i + 1 < length xs then g (xs ! i) else xs ! i",
    # in a nested map's body, over an array that is empty for the last i
    "xs ! i + sum (map (\\y -> y * xs ! (i + 1)) (build (length xs - 1 - i) (\\j -> xs ! j)))",
    # in a nested fold's body, over a one-element array for the last i
    "fold (\\p -> fst p * snd p * xs ! (i + 1)) (build (length xs - i) (\\j -> xs ! j))",
    # of an array bound inside the body
    "let ys = [xs ! i, 2.0 * xs ! i] in ys ! 0 * ys ! 1 + ys ! (i - i)",
])
def test_only_the_reads_evaluated_once_per_element_become_gathers(body):
    text = f"def f(xs : Array R) : R = sum (build (length xs) (\\i -> {body}))"
    assert_gradients_match_fd(text, [[1.5, -0.5, 2.0]])


# docs/arrays.md, "Gathers": each distinct read `a ! e` evaluated exactly once per element
# (also in a case's scrutinee, in the size of a nested build and in the array of a nested map
# or fold) is ONE gather, however often it occurs; reads under a case branch keep the BOne
# path (one BOne per occurrence). Counted in the derivative term; gradients against central differences.
@pytest.mark.parametrize("body,gathers,bones", [
    ("xs ! i * xs ! i + 3.0 * xs ! i", 1, 0),
    ("xs ! i * xs ! (i + 0)", 2, 0),
    ("if xs ! i > 1.0 then xs ! i * xs ! i else 2.0", 1, 2),  # a BOne per read in the branch
    ("toreal (length (build (floor (xs ! i)) (\\j -> j))) + xs ! i", 1, 0),
    ("sum (map (\\y -> y * y) [xs ! i, 1.0])", 1, 0),
    ("fold (\\p -> fst p * snd p) [xs ! i, 2.0, xs ! i]", 1, 0),
])
def test_each_distinct_read_evaluated_once_per_element_is_one_gather(body, gathers, bones):
    from chad.arrays.nodes import BOneT, Gather
    from chad.terms import subterms
    from chad.transform.efficient import SPEC

    text = f"def f(xs : Array R) : R = sum (build (length xs) (\\i -> {body}))"
    term = SPEC.forward_term(chad.load(text).find(None))
    assert sum(isinstance(x, Gather) for x in subterms(term)) == gathers
    assert sum(isinstance(x, BOneT) for x in subterms(term)) == bones
    assert_gradients_match_fd(text, [[1.5, 0.5, 2.5]])


# A gather read of an array of pairs, of sums or of arrays: the fresh variable that replaces
# the read keeps the read's type, which the rules of fst, snd, case and map read
# (chad/arrays/transform.py, extract_gathers). Gradients against central differences.
@pytest.mark.parametrize("text,args", [
    ("def f(xs : Array (R * R)) : R = sum (build (length xs) (\\i -> fst (xs ! i) * snd (xs ! i)))",
     [[(1.5, 0.5), (2.5, 1.0)]]),
    ("def f(xs : Array (R * R)) : R = sum (build (length xs) (\\i -> fst (xs ! i)))",
     [[(1.5, 0.5), (2.5, 1.0)]]),
    ("def f(xs : Array (R + R)) : R = sum (build (length xs) (\\i -> "
     "case xs ! i of { inl a -> a * a | inr b -> b }))", "sums"),
    ("def f(xs : Array (Array R)) : R = sum (build (length xs) (\\i -> "
     "sum (map (\\y -> y * y) (xs ! i)) + toreal (length (xs ! i))))", [[[1.5, 0.5], [2.5]]]),
])
def test_a_gather_read_of_pairs_sums_or_arrays_matches_finite_differences(text, args):
    from chad.values import Inj

    if args == "sums":
        args = [[Inj(0, 1.5), Inj(1, 2.5), Inj(0, -0.5)]]
    assert_gradients_match_fd(text, args)
