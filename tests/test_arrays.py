"""Arrays (docs/arrays.md): values, source costs and errors, Bag / collect / scatter, the
derivatives of build / ! / length / fold / map / sum, gathers, cotangent JSON,
the examples, and every EVM."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import chad
from chad.api import decode_args
from chad.arrays import bag as B
from chad.arrays.nodes import BOneT, Gather
from chad.cli import main as cli_main
from chad.errors import EvalError, UsageError
from chad.linear import L_R, LPairT, phi, plusv, size, zerov
from chad.terms import subterms
from chad.transform.efficient import SPEC
from chad.types import ArrayT
from chad.values import env_tuple_to_cells
from chad.costmodel.measure import measure
from tests.fd import fd_gradient, get

EVMS = ["spec", "map", "array", "parallel"]
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run(src, *args, fn=None):
    return chad.run(src, list(args), fn)


# ----------------------------------------------------------------- source evaluation


@pytest.mark.parametrize("src,args,value,steps", [
    ("def f(a : Array R) : R = a ! 1", [[1.0, 2.0]], 2.0, 4),
    ("def f(a : Array R) : Z = length a", [[1.0, 2.0]], 2, 2),
    # 1 + size (ILIT: 2) + 3 elements * (TOREAL i: 2)
    ("def f(n : Z) : Array R = build 3 (\\i -> toreal i)", [0], [0.0, 1.0, 2.0], 9),
    # 1 + arg (1) + n (4)
    ("def f(a : Array R) : R = sum a", [[1.0, 2.0, 3.0, 4.0]], 10.0, 6),
    # 1 + array (1) + 3 combines * (ADD (pair (fst p) (snd p)): 6)
    ("def f(a : Array R) : R = fold (\\p -> fst p + snd p) a", [[1.0, 2.0, 3.0, 4.0]], 10.0, 20),
    # 1 + array (1) + 4 elements * (MUL (pair x x): 4)
    ("def f(a : Array R) : Array R = map (\\x -> x * x) a", [[1.0, 2.0, 3.0, 4.0]],
     [1.0, 4.0, 9.0, 16.0], 18),
])
def test_source_values_and_costs(src, args, value, steps):
    v, s = chad.run(src, args)
    assert s == steps
    np.testing.assert_array_equal(np.asarray(v), np.asarray(value))


def test_array_representations():
    v, _ = run("def f(a : Array R, n : Z) : Array (Array Z * R) = "
               "build n (\\i -> (build i (\\j -> j), a ! i))", [1.0, 2.0], 2)
    assert isinstance(v, tuple) and isinstance(v[1][0], np.ndarray)
    assert v[1][0].dtype == np.int64 and list(v[1][0]) == [0]
    m, _ = run("def f(a : Array R) : Array R = map (\\x -> x + 1.0) a", [1.0])
    assert isinstance(m, np.ndarray) and m.dtype == np.float64
    i, _ = run("def f(a : Array Z) : Z = a ! 0 + length a", [7])
    assert i == 8 and type(i) is int


@pytest.mark.parametrize("src,args,words", [
    ("def f(a : Array R) : R = a ! 5", [[1.0, 2.0]], ["index 5", "length 2"]),
    ("def f(a : Array R) : R = a ! (0 - 1)", [[1.0]], ["index -1", "length 1"]),
    ("def f(a : Array R) : R = fold (\\p -> fst p) a", [[]], ["fold", "empty", "length 0"]),
    ("def f(n : Z) : Array R = build n (\\i -> 1.0)", [-2], ["negative size -2"]),
])
def test_runtime_errors(src, args, words):
    for action in (lambda: chad.run(src, args), lambda: chad.grad(src)(*args)):
        with pytest.raises(EvalError) as e:
            action()
        for w in words:
            assert w in str(e.value)


def test_runtime_error_in_a_gather_names_index_and_length():
    src = "def f(a : Array R) : Array R = build 3 (\\i -> a ! (i + 1))"
    with pytest.raises(EvalError, match="index 3 out of range for an array of length 3"):
        chad.grad(src)([1.0, 2.0, 3.0], ctg=[1.0, 1.0, 1.0])


def test_fold_uses_one_balanced_order_in_primal_and_derivative():
    # (a0 - a1) - (a2 - (a3 - a4)) with the balanced split, mid = (lo + hi) // 2
    src = "def f(a : Array R) : R = fold (\\p -> fst p - snd p) a"
    a = [1.0, 2.0, 3.0, 4.0, 5.0]
    v, _ = chad.run(src, [a])
    assert v == (1.0 - 2.0) - (3.0 - (4.0 - 5.0))
    for evm in EVMS:
        value, (g,) = chad.grad(src, evm=evm)(a)
        assert value == v
        assert list(g) == [1.0, -1.0, -1.0, 1.0, -1.0]
    # bit-identical primal values for a rounding-sensitive combine
    b = list(np.random.default_rng(1).normal(size=37) * 1e3)
    src2 = "def f(a : Array R) : R = fold (\\p -> fst p * 1.0000001 + snd p / 3.0) a"
    assert chad.grad(src2)(b)[0] == chad.run(src2, [b])[0]


# ----------------------------------------------------------------- bags


def test_bag_monoid_costs_and_size():
    one = B.BOne(2, 1.5)
    assert plusv(B.BEMPTY, one) == (one, 1)
    assert plusv(one, B.BEMPTY) == (one, 1)
    both, c = plusv(one, B.BOne(0, 2.0))
    assert isinstance(both, B.BPlus) and c == 1
    assert plusv(None, one) == (one, 1)
    lt = B.BagT(L_R)
    assert zerov(lt) == (B.BEMPTY, 1)
    assert size(B.BEMPTY) == 1 and size(one) == 2 and size(both) == 5 == phi(both)
    assert size(B.BArray(np.ones(4))) == 5


def test_collect_and_scatter_are_linear_and_add_duplicates():
    bag = B.BPlus(B.BPlus(B.BOne(1, 1.0), B.BArray(np.array([1.0, 2.0]), np.array([1, 3]))),
                  B.BPlus(B.BEMPTY, B.BOne(1, 0.5)))
    pairs, work = B.collect(bag, L_R)
    assert list(pairs.idx) == [1, 1, 3, 1] and list(pairs.vals) == [1.0, 1.0, 2.0, 0.5]
    assert work == 7 + 2  # seven constructors, two BArray entries
    z, cz = B.zeros(4, L_R)
    out, cs = B.scatter(z, pairs, L_R)
    assert list(out) == [0.0, 2.5, 0.0, 2.0] and cz == 4 and cs == 4
    assert list(z) == [0.0] * 4  # scatter adds into a copy
    # non-real elements: plusv per pair
    lt = LPairT(L_R, L_R)
    pb = B.BPlus(B.BOne(0, (1.0, 2.0)), B.BOne(0, None))
    pairs, _ = B.collect(pb, lt)
    out, work = B.scatter(B.zeros(2, lt)[0], pairs, lt)
    assert out == ((1.0, 2.0), None) and work == 2


def test_a_deep_bplus_chain_is_collected_without_recursion():
    bag = B.BEMPTY
    for i in range(100_000):
        bag = B.BPlus(bag, B.BOne(i % 3, 1.0))
    assert bag.size() == 1 + 2 * 100_000 + 100_000
    assert list(B.to_dense(bag, 3, L_R)) == [33334.0, 33333.0, 33333.0]


# ----------------------------------------------------------------- derivatives


def _final_cells(src, args, ctg, evm="array"):
    """The cells after the gradient (TH2's term `run (...) zero-env` evaluates to
    (result, final cells)): one sparse cotangent per parameter; and the EVM."""
    machine = chad.make_evm(evm)
    m = measure(chad.load(src), args, ctg, evm=machine)
    return env_tuple_to_cells(m.result[1]), machine


def _nodes(t, cls):
    return [x for x in subterms(t) if isinstance(x, cls)]


def test_gather_build_is_one_barray_not_n_singletons():
    src = "def f(a : Array R) : Array R = build (length a) (\\i -> a ! i * 2.0)"
    term = SPEC.forward_term(chad.load(src).find(None))
    assert len(_nodes(term, Gather)) == 1 and not _nodes(term, BOneT)
    cells, _ = _final_cells(src, [[1.0, 2.0, 3.0]], [1.0, 10.0, 100.0])
    assert isinstance(cells[0], B.BArray) and len(cells[0]) == 3
    assert list(B.to_dense(cells[0], 3, L_R)) == [2.0, 20.0, 200.0]


def test_reads_under_a_branch_use_bone():
    src = ("def f(a : Array R) : R = sum (build (length a) (\\i -> "
           "if i < 1 then a ! 0 else a ! (i - 1)))")
    term = SPEC.forward_term(chad.load(src).find(None))
    assert not _nodes(term, Gather) and _nodes(term, BOneT)
    cells, _ = _final_cells(src, [[1.0, 2.0, 3.0]], 1.0)
    assert isinstance(cells[0], B.BPlus)
    assert list(B.to_dense(cells[0], 3, L_R)) == [2.0, 1.0, 0.0]


def test_gather_of_let_bound_variables_is_not_extracted():
    # b is bound inside the build body: its read stays an ordinary index
    src = ("def f(a : Array R) : R = sum (build (length a) (\\i -> "
           "let b = a in let j = i in b ! j + a ! j))")
    term = SPEC.forward_term(chad.load(src).find(None))
    assert not _nodes(term, Gather)
    value, (g,) = chad.grad(src)([1.0, 2.0])
    assert value == 6.0 and list(g) == [2.0, 2.0]


@pytest.mark.parametrize("src", [
    "def f(a : Array R) : R = sum (map (\\x -> x * x) a)",
    "def f(a : Array R) : R = fold (\\p -> fst p * snd p) a",
    "def f(a : Array R) : R = sum a",
])
def test_map_fold_sum_give_one_barray(src):
    cells, _ = _final_cells(src, [[1.0, 2.0, 3.0]], 1.0)
    assert isinstance(cells[0], B.BArray) and len(cells[0]) == 3


def test_length_and_integer_arrays():
    src = "def f(a : Array R, p : Array Z) : R = a ! (p ! 0) * toreal (length a + p ! 1)"
    value, (ga, gp) = chad.grad(src)([1.0, 5.0], [1, 3])
    assert value == 25.0 and list(ga) == [0.0, 5.0] and gp == (None, None)


def test_parallel_runtime_forks_on_big_sequences_and_trees():
    for src in ["def f(a : Array R) : R = sum (map (\\x -> sin x * x) a)",
                "def f(a : Array R) : R = fold (\\p -> fst p * snd p + sin (fst p)) a"]:
        cells, machine = _final_cells(src, [list(np.linspace(0, 1, 300))], 1.0, evm="parallel")
        assert machine.forks_submitted > 0  # decided by the actions' weights, not by timing
        ref, _ = _final_cells(src, [list(np.linspace(0, 1, 300))], 1.0, evm="array")
        np.testing.assert_allclose(B.to_dense(cells[0], 300, L_R), B.to_dense(ref[0], 300, L_R),
                                   rtol=1e-12)


# ----------------------------------------------------------------- cotangent JSON


def test_cotangent_json_for_arrays():
    src = "def f(a : Array (R * R)) : Array (R * R) = map (\\p -> (snd p, fst p * 2.0)) a"
    a = [[1.0, 2.0], [3.0, 4.0]]
    value, (g,) = chad.grad(src)(a, ctg=[[1.0, 0.0], None])
    assert g == ((0.0, 1.0), (0.0, 0.0))
    value, (g,) = chad.grad(src)(a, ctg=None)  # null: the zero
    assert g == ((0.0, 0.0), (0.0, 0.0))
    with pytest.raises(UsageError, match="length 2"):
        chad.grad(src)(a, ctg=[[1.0, 0.0]])
    with pytest.raises(UsageError, match=r"ctg\[1\]\[0\]"):
        chad.grad(src)(a, ctg=[[1.0, 0.0], ["x", 0.0]])


def test_dense_gradient_json_shapes(capsys):
    src = EXAMPLES / "matvec.chad"
    assert cli_main(["grad", str(src), "--args", "[[[1.0,2.0],[3.0,4.0]],[5.0,6.0]]",
                     "--ctg", "[1.0,0.5]", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"value": [17.0, 39.0],
                   "gradient": [[[5.0, 6.0], [2.5, 3.0]], [2.5, 4.0]]}


# ----------------------------------------------------------------- the examples


def _softmax_xent_grad(z, y):
    z, y = np.asarray(z), np.asarray(y)
    lse = np.log(np.sum(np.exp(z - z.max()))) + z.max()
    return sum(y) * np.exp(z - lse) - y, lse - z


EXAMPLE_CASES = [
    ("dot.chad", None, [[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]], None,
     lambda a, b: (np.asarray(b), np.asarray(a))),
    ("matvec.chad", None, [[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [0.5, -1.0, 2.0]], [1.0, -2.0],
     lambda m, v: (np.outer([1.0, -2.0], v), np.asarray(m).T @ np.array([1.0, -2.0]))),
    ("sumsq.chad", None, [[1.0, -2.0, 3.0, 0.5]], None, lambda a: (2 * np.asarray(a),)),
    ("softmax_xent.chad", None, [[0.5, 2.0, -1.0, 0.0], [0.1, 0.6, 0.3, 0.0]], None,
     _softmax_xent_grad),
    ("stencil.chad", None, [[1.0, 2.0, 4.0, 8.0, -1.0]], None, None),
    ("pairs.chad", "radii", [[[1.0, 2.0], [3.0, -4.0]], [0.5, 2.0]], None, None),
    ("pairs.chad", "prodall", [[[1.0, 2.0], [3.0, -4.0], [0.5, 1.5]]], [1.0, -1.0], None),
]


@pytest.mark.parametrize("file,fn,args,ctg,expected", EXAMPLE_CASES,
                         ids=[f"{c[0]}:{c[1]}" for c in EXAMPLE_CASES])
def test_examples_gradients(file, fn, args, ctg, expected):
    prog = chad.load((EXAMPLES / file).read_text(), str(file))
    d = prog.find(fn)
    kw = {} if ctg is None else {"ctg": ctg}
    results = {evm: chad.grad(prog, fn, evm=evm)(*args, **kw) for evm in EVMS}
    value, g = results["array"]
    if expected is not None:
        for got, want in zip(g, expected(*args)):
            np.testing.assert_allclose(np.asarray(got, dtype=float), want, rtol=1e-10, atol=1e-12)
    env = decode_args(d, args)
    vals = [env[p.name] for p in d.params]
    if ctg is None:
        dense_ctg = 1.0
    elif isinstance(d.result, ArrayT):
        dense_ctg = np.asarray(ctg)
    else:
        dense_ctg = tuple(ctg)
    fd = fd_gradient(lambda a: chad.run(prog, list(a), fn)[0], d.params, vals, dense_ctg, d.result)
    for (i, path), want in fd.items():
        assert abs(get(g[i], path) - want) < 1e-5 * (1 + abs(want))
    for evm, (v2, g2) in results.items():
        assert np.allclose(np.asarray(v2, dtype=float), np.asarray(value, dtype=float))
        for a, b in zip(g2, g):
            np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float),
                                       rtol=1e-12, atol=1e-14)
    r = chad.cost(prog, args, fn=fn, **kw)
    assert r.holds


@pytest.mark.parametrize("file", ["dot.chad", "matvec.chad", "sumsq.chad", "softmax_xent.chad"])
def test_chad_grad_prints_the_examples(file, capsys):
    args = {"dot.chad": "[[1.0,2.0],[3.0,4.0]]",
            "matvec.chad": "[[[1.0,2.0],[3.0,4.0]],[5.0,6.0]]",
            "sumsq.chad": "[[1.0,2.0,3.0]]",
            "softmax_xent.chad": "[[1.0,2.0,3.0],[0.0,1.0,0.0]]"}[file]
    extra = ["--ctg", "[1.0,1.0]"] if file == "matvec.chad" else []
    for evm in ("map", "array", "parallel"):
        assert cli_main(["grad", str(EXAMPLES / file), "--args", args, "--evm", evm,
                         "--json"] + extra) == 0
        out = json.loads(capsys.readouterr().out)
        assert "gradient" in out and all(
            not isinstance(x, float) or math.isfinite(x) for x in np.ravel(out["gradient"][0]))
    assert cli_main(["show", str(EXAMPLES / file)]) == 0
    shown = capsys.readouterr().out
    assert "<" not in shown.replace("<=", "")  # every node has a notation


def test_show_notation_of_the_array_derivatives(capsys):
    assert cli_main(["show", str(EXAMPLES / "dot.chad")]) == 0
    out = capsys.readouterr().out
    for word in ("gather", "unzip", "sequenceScoped", "scatter", "collect", "BArray", "BFill"):
        assert word in out
    assert cli_main(["show", str(EXAMPLES / "sumsq.chad")]) == 0
    out = capsys.readouterr().out
    for word in ("foldTree", "unTree", "getA", "unzipMap", "scatterBag"):
        assert word in out
