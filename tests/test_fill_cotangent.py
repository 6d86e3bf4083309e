"""A batched reverse pass whose elements all have the same cotangent (sum's:
BFill, a broadcast view) gets that real as a Python float
(chad/compile/vector_support.py, VecBack.run): what it computes from it alone
(`d * w`, then `* 0.01` in a map with an `if`) is one number instead of an
array of n equal ones, and numpy broadcasts it where it meets an array.

Checked: the pass receives a float exactly when the cotangent is such a
broadcast (not for an array of cotangents, not in a nested pass, which
reshapes it), and the gradients are the same bits as with the cotangent given
as a whole array, for every runtime and for special output cotangents."""

from __future__ import annotations

import math

import numpy as np
import pytest

import chad
from chad.compile import vector_support
from chad.compile.vector_support import VecBack

PROGRAMS = {
    "map-if": "def f(w : R, xs : Array R) : R = "
              "sum (map (\\x -> if x > 0.0 then x * w else 0.01 * x * w) xs)",
    "map-closure": "def f(w : R, xs : Array R) : R = "
                   "let g = \\(x : R) -> tanh (w * x) * x in sum (map g xs)",
    "dot": "def f(w : R, xs : Array R) : R = sum (build (length xs) (\\i -> w * xs ! i * xs ! i))",
    "max": "def f(w : R, xs : Array R) : R = sum (map (\\x -> max(x * w, 0.5)) xs)",
}
CTGS = [1.0, -0.0, 0.0, 2.5, math.inf, -math.inf, math.nan, 5e-324, 1e308]


def _xs(n: int) -> np.ndarray:
    xs = np.random.default_rng(n).normal(size=n)
    xs[::7] = 0.0
    xs[1::11] = -0.0
    return xs


def _bits(result) -> tuple:
    value, grads = result
    return (float(value).hex(),) + tuple(
        float(g).hex() if isinstance(g, float) else np.asarray(g, dtype=np.float64).tobytes()
        for g in grads)


@pytest.fixture
def seen(monkeypatch):
    """The types of the cotangents the batched passes were given."""
    types: list = []
    run = VecBack.run

    def recording(self, d, cells, base):
        fn = self.fn

        def spy(*args):
            types.append(type(args[len(self.caps)]))
            return fn(*args)

        self.fn = spy
        try:
            return run(self, d, cells, base)
        finally:
            self.fn = fn

    monkeypatch.setattr(VecBack, "run", recording)
    return types


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_pass_gets_one_real_for_sums_cotangent(name, seen):
    chad.grad(PROGRAMS[name])(0.7, _xs(300))
    assert seen and all(t is float for t in seen)


def test_an_array_of_cotangents_stays_an_array(seen):
    text = "def f(w : R, xs : Array R) : Array R = map (\\x -> x * w) xs"
    _v, back = chad.vjp(text)(0.7, _xs(300))
    back(np.linspace(-1.0, 1.0, 300))
    assert seen and all(t is np.ndarray for t in seen)


def test_a_nested_pass_keeps_the_array(seen):
    text = ("def f(m : Array (Array R), v : Array R) : R = sum (build (length m) (\\i -> "
            "sum (build (length v) (\\j -> m ! i ! j * v ! j))))")
    rng = np.random.default_rng(3)
    chad.grad(text)(rng.normal(size=(40, 30)), rng.normal(size=30))
    assert seen and np.ndarray in seen


@pytest.mark.parametrize("evm", ["array", "map", "parallel"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_same_bits_as_with_the_whole_array(name, evm, monkeypatch):
    grad = chad.grad(PROGRAMS[name], evm=evm)
    xs = _xs(700)
    fast = [_bits(grad(0.7, xs, ctg=c)) for c in CTGS]
    run = VecBack.run

    def whole(self, d, cells, base):  # the cotangent as an array of n reals
        return run(self, np.array(d, dtype=np.float64), cells, base)

    monkeypatch.setattr(vector_support.VecBack, "run", whole)
    slow = [_bits(grad(0.7, xs, ctg=c)) for c in CTGS]
    assert fast == slow


# ------------------------------------------------------------- the fill of ones


def test_the_fill_of_ones_is_made_once_per_length_and_never_writeable():
    """bag.fill keeps its last n copies of 1.0 (a gradient's output
    cotangent) and gives them again: numpy refuses to make them writeable,
    so no caller can change them; other values and lengths are new."""
    from chad.arrays.bag import fill

    ones = fill(7, 1.0)
    assert fill(7, 1.0) is ones and ones.tobytes() == np.ones(7).tobytes()
    with pytest.raises(ValueError):
        ones.flags.writeable = True
    for n, x in ((8, 1.0), (7, 2.0), (7, -0.0), (7, math.nan)):
        other = fill(n, x)
        assert other is not ones and not other.flags.writeable
        assert np.array_equal(other, np.full(n, x), equal_nan=True)


@pytest.mark.parametrize("evm", ["array", "map", "parallel"])
def test_gradients_after_the_kept_ones_are_arrays_of_their_own(evm):
    """Two gradient calls (output cotangent 1.0 both times): their array
    cotangents are the interpreter's, writeable, and share no memory with
    each other or with the kept ones."""
    from chad.arrays.bag import fill

    text = "def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> a ! i * b ! i))"
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal(6), rng.standard_normal(6)
    g = chad.grad(text, evm=evm)
    first, second = g(a, b)[1], g(a, b)[1]
    want = chad.grad(text, evm=evm, backend="interp")(a, b)[1]
    ones = fill(6, 1.0)
    for got in (first, second):
        for x, w in zip(got, want):
            assert np.asarray(x).tobytes() == np.asarray(w).tobytes()
            assert x.flags.writeable and not np.shares_memory(x, ones)
    for x, y in zip(first, second):
        assert not np.shares_memory(x, y)
