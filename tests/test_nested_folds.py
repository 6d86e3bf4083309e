"""Derivatives of loops whose body folds, maps or calls over an array built in
the body (chad/arrays/folds.py fold trees, chad/arrays/nested.py `untree`,
`run_evm`, pair scopes; chad/arrays/lower.py unzipMap over a built array and
the scatter of a bag cell): kmeans' nearest centre and gmm's log-sum-exp per
point batched over both loops. Checked: the generated code is vectorised and
runs batched (no fallback, no element-by-element reverse pass); gradients
equal the interpreter's on the three runtimes, bit for bit where numpy does the
evaluator's operations (within 1e-12 relative with exp and log), with NaN,
ties, signed zeros and infinities in the rows, output cotangents -0.0, 0.0 and
others, empty loops; the errors are the interpreter's. Nothing here is timed."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import chad
import chad.compile.vector_support as VS
from chad.arrays.bag import BArray, BPlus, to_dense
from chad.arrays.evaluate import reduce_balanced
from chad.arrays.folds import vtree2, vuntree2
from chad.arrays.nested_support import RowBags, vdense_bags
from chad.errors import ChadError
from chad.linear import LR
from tests.test_vectorise import _source, agree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNTIMES = ("array", "map", "parallel")

SQ = "(a ! i - b ! j) * (a ! i - b ! j)"
PROGRAMS = {
    # exact: only +, -, *, max, min
    "nearest": f"def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
               f"fold (\\p -> min(fst p, snd p)) (build (length b) (\\j -> {SQ}))))",
    "weighted": "def f(w : R, a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
                "fold (\\p -> max(fst p, snd p)) (build (length b) (\\j -> w * a ! i * b ! j))))",
    "pairlet": "def f(a : Array R, w : Array R) : R = sum (build (length a) (\\i -> "
               "sum (build (div(length w, 2)) (\\j -> let (s0, s1) = (w ! (2 * j), w ! (2 * j + 1)) "
               "in (a ! i - s0) * s1 * s1 + s0))))",
    # exp and log: numpy's
    "lse": "def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
           "let m = fold (\\p -> max(fst p, snd p)) (build (length b) (\\j -> a ! i * b ! j)) in "
           "m + log (sum (map (\\v -> exp (v - m)) (build (length b) (\\j -> a ! i * b ! j))))))",
    "lse_call": "def lse(x : Array R) : R =\n"
                "  let m = fold (\\p -> max(fst p, snd p)) x in\n"
                "  m + log (sum (map (\\v -> exp (v - m)) x))\n"
                "def f(a : Array R, b : Array R) : R = "
                "sum (build (length a) (\\i -> lse(build (length b) (\\j -> a ! i * b ! j))))",
    # a def with array parameters called in the inner loop (a run per element pair)
    "call": "def sq(x : Array R, i : Z, y : Array R, j : Z) : R = (x ! i - y ! j) ** 2 + x ! i * y ! j\n"
            "def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
            "fold (\\p -> min(fst p, snd p)) (build (length b) (\\j -> sq(a, i, b, j)))))",
    "two_calls": "def g(x : Array R, i : Z, w : R) : R = x ! i * w\n"
                 "def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
                 "sum (build (length b) (\\j -> g(b, j, a ! i) + g(a, i, b ! j) * g(b, j, 0.5)))))",
    "call_row": "def g(x : Array R, j : Z) : R = x ! j * x ! j\n"
                "def f(m : Array (Array R)) : R = sum (build (length m) (\\i -> "
                "let r = m ! i in sum (build (length r) (\\j -> g(r, j) + r ! j))))",
}
EXACT = {"nearest", "weighted", "pairlet", "call", "two_calls", "call_row"}


def _example(name: str) -> str:
    with open(os.path.join(ROOT, "examples", f"{name}.chad")) as fh:
        return fh.read()


def _args(name, rng, n, k, special):
    a = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)
    b = rng.standard_normal(k)
    if special and n > 3:
        a[1], a[2], a[3] = math.nan, -0.0, math.inf
    if special and k > 2:
        b[0], b[1] = 0.0, b[2]  # a zero and a tie
    if name == "weighted":
        return (-0.5, a, b)
    if name == "pairlet":
        return (a, rng.standard_normal(2 * k))
    if name == "call_row":
        m = rng.standard_normal((n, k))
        if special and n > 1 and k > 1:
            m[1, 0], m[0, 1] = -0.0, math.inf
        return (m,)
    return (a, b)


class _Counts:
    """Forward passes that fell back, reverse passes run element by element."""

    def __init__(self, monkeypatch):
        self.one_by_one = 0
        real = VS._one_by_one

        def counted(*args, **kw):
            self.one_by_one += 1
            return real(*args, **kw)

        monkeypatch.setattr(VS, "_one_by_one", counted)
        self.fell = VS.FELL_BACK[0]

    def batched(self) -> bool:
        return self.one_by_one == 0 and VS.FELL_BACK[0] == self.fell


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_vectorised_both_loops(name):
    src = _source(PROGRAMS[name], "grad")
    assert "per-element" not in src and "nested loops" in src


@pytest.mark.parametrize("evm", RUNTIMES)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_gradients_are_the_interpreters(name, evm, monkeypatch):
    text = PROGRAMS[name]
    rng = np.random.default_rng(len(name))
    for n, k, special in ((6, 5, True), (1, 1, False), (4, 8, False), (9, 3, True)):
        args = _args(name, rng, n, k, special)
        counts = _Counts(monkeypatch)
        for d in (1.0, -0.0, 0.0, -2.5):
            value, back = chad.vjp(text, evm=evm)(*args)
            want_value, want_back = chad.vjp(text, evm=evm, backend="interp")(*args)
            agree(value, want_value, exact=name in EXACT)
            agree(back(d), want_back(d), exact=name in EXACT)
        if not special or name in ("nearest", "weighted"):
            assert counts.batched(), (n, k)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_empty_loops_and_the_fold_of_nothing(name):
    text = PROGRAMS[name]
    rng = np.random.default_rng(4)
    args = _args(name, rng, 0, 3, False)
    agree(chad.grad(text)(*args), chad.grad(text, backend="interp")(*args), exact=True)
    if name in ("pairlet", "two_calls", "call_row"):
        return
    args = _args(name, rng, 3, 0, False)
    with pytest.raises(ChadError) as compiled:
        chad.grad(text)(*args)
    with pytest.raises(ChadError) as interp:
        chad.grad(text, backend="interp")(*args)
    assert str(compiled.value) == str(interp.value)


@pytest.mark.parametrize("evm", RUNTIMES)
@pytest.mark.parametrize("name", ["gmm", "kmeans"])
def test_the_examples_gradients_are_vectorised_and_the_interpreters(name, evm, monkeypatch):
    text = _example(name)
    assert "per-element" not in _source(text, "grad")
    rng = np.random.default_rng(8)
    for npts, k in ((40, 3), (1, 1), (5, 4)):
        if name == "gmm":
            args = (rng.standard_normal(k), rng.standard_normal(2 * k),
                    rng.standard_normal(2 * k) * 0.1, rng.standard_normal(2 * npts))
        else:
            args = (rng.standard_normal(2 * npts), rng.standard_normal(2 * k))
            args[1][-2:] = args[1][:2]  # two centres the same: ties
        counts = _Counts(monkeypatch)
        got = chad.grad(text, evm=evm)(*args)
        assert counts.batched()
        agree(got, chad.grad(text, evm=evm, backend="interp")(*args), exact=name == "kmeans")


def test_a_pair_let_outside_the_inner_loop_is_not_taken_for_its_own():
    # q is the outer element's pair: the inner loop's adds to it are not its own
    text = ("def f(a : Array R, c : Array R) : R = sum (build (length a) (\\i -> "
            "let q = (a ! i, 2.0 * a ! i) in sum (build (length c) (\\j -> fst q * c ! j + snd q))))")
    rng = np.random.default_rng(2)
    for evm in RUNTIMES:
        args = (rng.standard_normal(5), rng.standard_normal(4))
        agree(chad.grad(text, evm=evm)(*args), chad.grad(text, evm=evm, backend="interp")(*args),
              exact=True)


# ----------------------------------------------------------------- the helpers


def _winner(row, is_max):
    """The evaluator's tree: its value and the leaf it came from."""
    pick = (lambda l, r: r if r[0] > l[0] else l) if is_max else \
        (lambda l, r: r if r[0] < l[0] else l)
    (v, i), _ = reduce_balanced([(float(x), j) for j, x in enumerate(row)],
                                lambda l, r: (pick(l, r), 0))
    return v, i


@pytest.mark.parametrize("is_max", [True, False])
@pytest.mark.parametrize("nan", [False, True])
def test_vtree2_is_the_evaluators_tree(is_max, nan):
    rng = np.random.default_rng(int(is_max) + 2 * int(nan))
    x = rng.integers(-3, 4, (30, 11)).astype(float)  # many ties
    x[rng.random(x.shape) < 0.1] = -0.0
    if nan:
        x[rng.random(x.shape) < 0.15] = math.nan
    x[0, :] = math.nan if nan else 0.0
    val, leaf = vtree2(x, 11, 1, 2, is_max)
    for r in range(30):
        v, i = _winner(x[r], is_max)
        assert leaf[r, 0] == i
        assert val[r, 0].tobytes() == np.float64(v).tobytes()
    d = rng.standard_normal((30, 1))
    d[3, 0] = -0.0
    leaves = vuntree2(d, leaf, 11, 1)
    want = np.zeros((30, 11))
    want[np.arange(30), leaf[:, 0]] = d[:, 0]
    assert leaves.tobytes() == want.tobytes()


def test_vdense_bags_is_each_elements_scatter():
    rng = np.random.default_rng(6)
    n, m = 4, 5
    cell = RowBags()
    rows = [rng.standard_normal((n, m)) * 1e16, rng.standard_normal((n, m)),
            np.broadcast_to(rng.standard_normal(m), (n, m))]
    cell.items.extend(("rows", x, None) for x in rows)
    want = np.stack([to_dense(cell.bag(i), m, LR()) for i in range(n)])
    assert vdense_bags(cell, n, m).tobytes() == want.tobytes()
    # indices of their own: the general path
    cell.items.append(("rows", rows[1], np.array([4, 4, 0, 1, 2])))
    want = np.stack([to_dense(cell.bag(i), m, LR()) for i in range(n)])
    assert vdense_bags(cell, n, m).tobytes() == want.tobytes()
    shared = BPlus(BArray(np.ones(m)), BArray(np.full(m, 2.0)))
    assert vdense_bags(shared, 2, m).tobytes() == np.full((2, m), 3.0).tobytes()
