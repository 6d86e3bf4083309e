"""chad/arrays/folds.py: a fold of an array built in a vectorised loop body,
evaluated as the evaluator's balanced tree level by level for every outer
element at once, and chad/arrays/lower.py's map over an array built in the
body. Checked: the tree's levels give reduce_balanced's grouping; `vfold`
equals a Python reduce_balanced per row, bit for bit, for combines that are
neither associative nor commutative; programs (kmeans, gmm, folds of `if`
combines, a fold in a nested build) are vectorised and give the interpreter's
values and errors. Nothing here is timed."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import chad
from chad.arrays.evaluate import reduce_balanced
from chad.arrays.folds import tree_levels, vfold
from chad.compile import backend
from chad.errors import ChadError
from tests.test_vectorise import _source, agree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _example(name: str) -> str:
    with open(os.path.join(ROOT, "examples", f"{name}.chad")) as fh:
        return fh.read()


@pytest.mark.parametrize("n", list(range(2, 40)) + [64, 100, 257, 1000, 1025, 4097])
def test_the_levels_are_the_evaluators_tree(n):
    want, _ = reduce_balanced([str(i) for i in range(n)], lambda l, r: (f"({l} {r})", 0))
    vals = [str(i) for i in range(n)] + [None] * (n - 1)
    for ids, left, right in tree_levels(n):
        for i, l, r in zip(ids, left, right):
            assert vals[l] is not None and vals[r] is not None  # operands ready
            vals[i] = f"({vals[l]} {vals[r]})"
    assert vals[-1] == want


def _lopsided(l, r):
    """Neither associative nor commutative: any other grouping or order shows."""
    return l * 0.5 - r * 3.0 + 1e-3


def _rows_reference(x, axis):
    last = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    out = np.empty(last.shape[:-1])
    for idx in np.ndindex(out.shape):
        row = [float(v) for v in last[idx]]
        out[idx], _ = reduce_balanced(row, lambda l, r: (_lopsided(l, r), 0))
    return np.expand_dims(out, axis)


@pytest.mark.parametrize("shape,axis", [((7,), 0), ((3, 5), 1), ((5, 3), 0), ((2, 9, 4), 1),
                                        ((4, 1, 6), 2), ((1, 33), 1), ((6, 2), 1)])
def test_vfold_is_a_balanced_fold_per_row(shape, axis):
    rng = np.random.default_rng(sum(shape) + axis)
    x = rng.standard_normal(shape) * 10.0 ** rng.integers(-5, 6, shape)
    got = vfold(x, shape[axis], axis, len(shape), _lopsided)
    assert got.shape == tuple(1 if k == axis else s for k, s in enumerate(shape))
    assert got.tobytes() == _rows_reference(x, axis).tobytes()


def test_vfold_of_a_value_independent_of_the_loop_and_of_one_element():
    x = np.array([[2.0], [-3.0]])  # (2, 1): independent of axis 1, folded over 4 copies
    got = vfold(x, 4, 1, 2, _lopsided)
    assert got.tobytes() == _rows_reference(np.repeat(x, 4, axis=1), 1).tobytes()
    one = vfold(np.array([[5.0, 6.0]]), 1, 0, 2, _lopsided)
    assert one.tobytes() == np.array([[5.0, 6.0]]).tobytes()


def test_vfold_of_no_element_fails_only_where_a_fold_runs():
    with pytest.raises(ValueError):
        vfold(np.zeros((3, 0)), 0, 1, 2, _lopsided, 3)
    assert vfold(np.zeros((0, 0)), 0, 1, 2, _lopsided, 0).shape == (0, 1)


PROGRAMS = {
    "min": "def f(a : Array R, b : Array R) : Array R = build (length a) (\\i -> "
           "fold (\\p -> min(fst p, snd p)) (build (length b) (\\j -> a ! i * b ! j)))",
    "lopsided": "def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
                "fold (\\p -> 0.5 * fst p - 3.0 * snd p) (build (length b) (\\j -> a ! i - b ! j))))",
    "max2": "def max2(p : R * R) : R = if fst p > snd p then fst p else snd p\n"
            "def f(a : Array R, b : Array R) : Array R = build (length a) (\\i -> "
            "let m = fold (\\p -> max2(p)) (build (length b) (\\j -> a ! i + b ! j)) in "
            "m + log (sum (map (\\v -> exp (v - m)) (build (length b) (\\j -> a ! i + b ! j)))))",
    "mapped": "def f(a : Array R, b : Array R) : Array R = build (length a) (\\i -> "
              "sum (map (\\v -> v * v) (build (length b) (\\j -> a ! i - b ! j))))",
    "outer": "def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
             "fold (\\p -> fst p * 0.5 + snd p) (build (length b) (\\j -> a ! i))))",
}


def _args(rng, n, m):
    a = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)
    b = rng.standard_normal(m)
    if n > 2:
        a[1] = math.nan
        a[2] = -0.0
    if m > 1:
        b[0] = 0.0
    return a, b


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_programs_are_vectorised_and_give_the_interpreters_values(name):
    text = PROGRAMS[name]
    src = _source(text)
    assert "per-element" not in src and "vectorised" in src
    rng = np.random.default_rng(len(name))
    for n, m in ((1, 1), (2, 3), (5, 1), (9, 16), (4, 33)):
        args = _args(rng, n, m)
        got = chad.primal(text)(*args)
        with backend.vectorising(False):
            loop = chad.primal(text)(*args)
        want = chad.primal(text, backend="interp")(*args)
        agree(loop, want, exact=True)
        agree(got, want, exact=name != "max2")  # (exp and log: numpy's, within 1e-12)


def test_a_fold_of_no_element_fails_as_the_interpreter_and_no_loop_no_fold():
    text = PROGRAMS["lopsided"]
    with pytest.raises(ChadError) as compiled:
        chad.primal(text)(np.ones(3), np.zeros(0))
    with pytest.raises(ChadError) as interp:
        chad.primal(text, backend="interp")(np.ones(3), np.zeros(0))
    assert str(compiled.value) == str(interp.value)
    assert "fold of an empty array" in str(compiled.value)
    assert chad.primal(text)(np.zeros(0), np.zeros(0)) == 0.0


def test_a_combine_reading_a_variable_of_the_program_stays_per_element():
    text = ("def f(a : Array R, w : R) : Array R = build (length a) (\\i -> "
            "fold (\\p -> fst p * w + snd p) (build 3 (\\j -> a ! i + toreal j)))")
    assert "per-element" in _source(text)
    a = np.array([1.0, -2.0, 3.5])
    assert chad.primal(text)(a, 0.5).tobytes() == \
        chad.primal(text, backend="interp")(a, 0.5).tobytes()


def test_a_map_over_an_array_built_at_another_depth_stays_per_element():
    # r is built at depth 1 (the loop over j), the map runs at depth 2 (inside k)
    text = ("def f(a : Array R) : Array R = build (length a) (\\i -> "
            "let r = build 3 (\\j -> a ! i * toreal j) in "
            "sum (build 2 (\\k -> sum (map (\\v -> v * toreal k) r))))")
    assert "per-element" in _source(text)
    rng = np.random.default_rng(5)
    a = rng.standard_normal(4)
    agree(chad.primal(text)(a), chad.primal(text, backend="interp")(a), exact=True)


def test_a_map_over_an_array_built_at_its_depth_is_vectorised():
    text = ("def f(a : Array R) : Array R = build (length a) (\\i -> "
            "sum (build 2 (\\k -> sum (map (\\v -> v * toreal k) (build 3 (\\j -> a ! i))))))")
    assert "per-element" not in _source(text)
    rng = np.random.default_rng(5)
    a = rng.standard_normal(4)
    agree(chad.primal(text)(a), chad.primal(text, backend="interp")(a), exact=True)


@pytest.mark.parametrize("name", ["kmeans", "gmm"])
def test_the_examples_primals_are_vectorised(name):
    text = _example(name)
    assert "per-element" not in _source(text)
    rng = np.random.default_rng(3)
    for npts, k in ((1, 1), (9, 3), (200, 4)):
        if name == "gmm":
            args = (rng.standard_normal(k), rng.standard_normal(2 * k),
                    rng.standard_normal(2 * k) * 0.1, rng.standard_normal(2 * npts))
        else:
            args = (rng.standard_normal(2 * npts), rng.standard_normal(2 * k))
        agree(chad.primal(text)(*args), chad.primal(text, backend="interp")(*args),
              exact=name == "kmeans")
