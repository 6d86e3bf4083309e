"""chad/arrays/bag.py `scatter_reals`: the dense array of a bag of real
cotangents made leaf by leaf (np.add.at, elementwise adds, add_rows) instead of
collect's concatenated pairs, bit for bit `scatter (zeros n) (collect bag)`
(the interpreter's) and a Python chain of float adds in the bag's order; and
`gather`'s bounds check, whose error is the interpreter's."""

from __future__ import annotations

import math

import numpy as np
import pytest

import chad
from chad.arrays.bag import (
    BEMPTY, BArray, BOne, BPlus, BRows, collect, leaves, scatter, scatter_reals, to_dense, zeros,
)
from chad.arrays.evaluate import gather
from chad.errors import EvalError
from chad.linear import LR


def _bits(a) -> bytes:
    return np.asarray(a, dtype=np.float64).tobytes()


def _reference(bag, n):
    z, _ = zeros(n, LR())
    pairs, _ = collect(bag, LR())
    out, _ = scatter(z, pairs, LR())
    return out


def _chain(bag, n):
    """Every pair added to its element one Python float at a time, in the
    bag's order (collect's), from +0.0."""
    out = [0.0] * n
    for b, _ in leaves(bag):
        if isinstance(b, BOne):
            out[b.index] = out[b.index] + float(b.value)
        elif isinstance(b, BArray):
            vals = list(map(float, b.vals))
            idx = range(len(vals)) if b.idx is None else list(map(int, b.idx))
            for i, v in zip(idx, vals):
                out[i] = out[i] + v
    return np.array(out)


_SPECIAL = (0.0, -0.0, 1e17, -1e17, 1.0, 1e-300, math.inf, -math.inf, math.nan)


def _values(rng, k):
    v = rng.standard_normal(k) * 10.0 ** rng.integers(-8, 18, k)
    special = rng.random(k) < 0.2
    v[special] = rng.choice(_SPECIAL, int(special.sum()))
    return v


def _random_bag(rng, n, depth=0):
    kind = rng.integers(0, 6 if depth < 4 else 4)
    if kind == 0:
        return BOne(int(rng.integers(0, n)), float(_values(rng, 1)[0]))
    if kind == 1:  # indexed pairs, duplicates likely
        k = int(rng.integers(0, 2 * n + 1))
        return BArray(_values(rng, k), rng.integers(0, n, k))
    if kind == 2:  # a whole array, or a prefix of one
        return BArray(_values(rng, int(rng.integers(0, n + 1))))
    if kind == 3:
        return BRows(_values(rng, int(rng.integers(0, 5)) * n).reshape(-1, n)) if n else BEMPTY
    return BPlus(_random_bag(rng, n, depth + 1), _random_bag(rng, n, depth + 1))


@pytest.mark.parametrize("seed", range(60))
def test_bit_for_bit_the_interpreters_scatter_and_the_chain(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 9))
    bag = _random_bag(rng, n)
    got = scatter_reals(bag, n)
    assert got is not None
    assert _bits(got) == _bits(_reference(bag, n)) == _bits(_chain(bag, n))
    assert _bits(to_dense(bag, n, LR())) == _bits(got)


def test_duplicate_indices_each_add_their_value_in_order():
    # the large value first: left to right the small ones are lost; any
    # regrouping (or a buffered fancy add, which keeps only the last) differs
    vals = np.array([1e17, 1.0, 1.0, 1.0, -1e17, 5.0])
    idx = np.array([2, 2, 2, 2, 2, 0])
    bag = BPlus(BArray(np.array([0.0, -0.0, 3.0])), BArray(vals, idx))
    got = scatter_reals(bag, 3)
    assert _bits(got) == _bits(np.array([5.0, 0.0, 0.0]))
    assert _bits(got) == _bits(_chain(bag, 3))


def test_zero_is_positive_and_an_empty_bag_is_zeros():
    assert _bits(scatter_reals(BArray(np.array([-0.0, -0.0])), 2)) == _bits([0.0, 0.0])
    assert _bits(scatter_reals(BEMPTY, 3)) == _bits([0.0, 0.0, 0.0])


def test_runs_of_one_hot_adds_and_arrays_keep_their_order():
    bag = BPlus(BPlus(BOne(0, 1e17), BOne(0, 1.0)),
                BPlus(BArray(np.array([-1e17, 2.0])), BOne(0, 1.0)))
    got = scatter_reals(bag, 2)
    assert _bits(got) == _bits(_chain(bag, 2)) == _bits([1.0, 2.0])


@pytest.mark.parametrize("bag", [
    BArray(np.array([1.0]), np.array([5])),           # past the end
    BArray(np.array([1.0]), np.array([-1])),          # negative: numpy would wrap
    BOne(7, 1.0),
    BArray(np.array([1.0, 2.0, 3.0, 4.0])),            # longer than the array
    BArray([1.0, 2.0]),                                # not an ndarray: the general path
    BOne(0, None),
])
def test_bags_it_does_not_take_are_left_to_the_general_path(bag):
    assert scatter_reals(bag, 3) is None


def test_the_general_path_still_reports_an_internal_index_error():
    with pytest.raises(EvalError, match="internal: cotangent index"):
        to_dense(BArray(np.array([1.0]), np.array([-1])), 3, LR())


def test_gather_checks_bounds_as_before():
    a = np.arange(5.0)
    assert _bits(gather(a, np.array([4, 0, 0, 3]))) == _bits([4.0, 0.0, 0.0, 3.0])
    for bad in ([0, 5, 1], [2, -1]):
        with pytest.raises(EvalError, match="index"):
            gather(a, np.array(bad))


STENCIL = """\
def clamp(i : Z, n : Z) : Z = if i < 0 then 0 else if i > n - 1 then n - 1 else i
def energy(a : Array R) : R =
  let s = build (length a) (\\i -> 0.25 * a ! clamp(i - 1, length a) + 0.5 * a ! i
                                 + 0.25 * a ! clamp(i + 1, length a)) in
  sum (map (\\x -> x * x) s)
"""


@pytest.mark.parametrize("evm", ["array", "map", "parallel"])
def test_a_stencils_gradient_is_the_interpreters(evm):
    rng = np.random.default_rng(3)
    a = rng.standard_normal(257) * 10.0 ** rng.integers(-6, 7, 257)
    a[::17] = 1e17
    compiled = chad.grad(STENCIL, evm=evm)(a)
    interpreted = chad.grad(STENCIL, evm=evm, backend="interp")(a)
    assert compiled[0] == interpreted[0]
    assert _bits(compiled[1][0]) == _bits(interpreted[1][0])
