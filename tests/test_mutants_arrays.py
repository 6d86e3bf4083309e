"""Kill the mutants of the array extension (chad/arrays/evaluate.py, transform.py) that the
golden corpus, the oracle and the documented-rule tests let survive (`make mutate`,
docs/mutation-report.md).

Pinned: the documented errors of chad/arrays/evaluate.py (an index out of range, index n
included, is an EvalError naming the index and the length, in the source and in the
derivative's Gather; an Array Z element outside int64 is an EvalError naming the first such
element, from build and from map); the representation of array values (the derivative
returns the source's float64 array; the cotangent of an Array R, through a build or a fold,
is a dense float64 array); exact gradients.
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
@pytest.mark.parametrize("form", ["build (length xs) (\\i -> xs ! i * 2.0)",
                                  "map (\\x -> x * 2.0) xs"])
def test_the_derivative_of_a_build_or_map_returns_the_sources_array(form):
    text = f"def f(xs : Array R) : Array R = {form}"
    source, _steps = chad.run(text, [[1.0, 2.0, 3.0]])
    value, (dxs,) = chad.grad(text)([1.0, 2.0, 3.0], ctg=[1.0, 0.5, 0.0])
    for v in (source, value):
        assert isinstance(v, np.ndarray) and v.dtype == np.float64
        assert v.tolist() == [2.0, 4.0, 6.0]
    assert isinstance(dxs, np.ndarray) and dxs.dtype == np.float64
    assert dxs.tolist() == [2.0, 1.0, 0.0]


def test_the_cotangent_of_a_folded_array_is_dense():
    text = "def f(xs : Array R) : R = fold (\\p -> fst p) xs"
    value, (dxs,) = chad.grad(text)([5.0, 2.0, 3.0, 4.0])
    assert value == 5.0
    assert isinstance(dxs, np.ndarray) and dxs.dtype == np.float64
    assert dxs.tolist() == [1.0, 0.0, 0.0, 0.0]
    text = "def f(xs : Array R) : R = fold (\\p -> fst p * snd p) xs"
    value, (dxs,) = chad.grad(text)([5.0, 2.0, 3.0])
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
