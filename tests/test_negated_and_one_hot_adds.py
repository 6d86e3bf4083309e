"""Two adds of a vectorised reverse pass made without a pass of their own
(docs/compiler.md, "Dense accumulators"):

* an add of `-x` to a cell the elements share (`exp (x - m)`'s cotangent of
  m) is kept as x with a flag, and the running sum (kernels.running, `negs`)
  negates each value as it reads it, by its sign bit as numpy's `negative`
  does, never folded into a subtraction (the two differ in a NaN's sign);
* the leaf cotangents of a fold by max or min (`unTree`: +0.0 but at the
  winning element, recorded in known.ONE_HOT) added to an array of sums with
  no -0.0 change that one element alone (bag._add_one_hot).

Both against a Python loop of IEEE additions and the interpreter, bit for
bit, NaN signs included."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

import chad
from chad.arrays import bag
from chad.compile import backend, kernels, known

from tests.test_vectorise import agree


def _sign_bits(x):
    return None if x is None else struct.pack("<d", x)


def _loop(parts, negs, n, start):
    """The evaluator's order with the negated parts' values negated first."""
    s, have, added = start, start is not None, False
    for i in range(n):
        for p, neg in zip(parts, negs):
            w = len(p) // n
            for x in p[i * w:(i + 1) * w]:
                x = -float(x) if neg else float(x)
                added = True
                s = x if not have else s + x
                have = True
    return s if added else None


@pytest.fixture
def impl(kernels_impl):
    return kernels_impl


@pytest.mark.parametrize("seed", range(30))
def test_running_with_negated_parts_is_the_loop_bit_for_bit(impl, seed):
    """One NaN at most (so which NaN an add returns is never in question): the
    sum's NaN is the negated part's NaN with its sign flipped, as s + (-x)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30))
    k = int(rng.integers(1, 4))
    parts, negs = [], []
    for _ in range(k):
        w = int(rng.integers(1, 3))
        parts.append(rng.normal(size=n * w) * rng.choice([1e-300, 1.0, 1e300], size=n * w))
        negs.append(bool(rng.random() < 0.6))
    zeros = rng.integers(0, n, size=3)
    parts[0][zeros] = rng.choice([0.0, -0.0], size=3)
    if seed % 2:
        j = int(rng.integers(0, k))
        parts[j][int(rng.integers(0, len(parts[j])))] = math.copysign(math.nan, rng.choice([1, -1]))
    start = [None, 0.0, -0.0, 2.5][seed % 4]
    want = _loop(parts, negs, n, start)
    got = kernels.running(parts, [None] * k, n, start, negs)
    assert _sign_bits(got) == _sign_bits(want)


def test_running_with_a_negated_nan_keeps_the_flipped_sign(impl):
    for sign in (1.0, -1.0):
        nan = math.copysign(math.nan, sign)
        got = kernels.running([np.array([1.0, nan, 2.0])], [None], 3, 0.5, [True])
        assert math.copysign(1.0, got) == -sign  # s + (-nan), not s - nan
        got = kernels.running([np.array([nan])], [None], 1, None, [True])
        assert math.copysign(1.0, got) == -sign


def test_running_negs_must_match_the_parts():
    if not kernels.native():
        pytest.skip("the C extension is not built")
    with pytest.raises(ValueError):
        kernels._native.running((np.ones(3),), (None,), 3, None, (True, False))


SHARED_MINUS = [
    "def f(w : R, a : Array R) : R = sum (map (\\x -> (x - w) * 2.0) a)",
    "def f(w : R, a : Array R) : R = sum (map (\\x -> (x - w) * (x - w)) a)",
    "def f(w : R, a : Array R) : R = sum (map (\\x -> w * 3.0 - x * w) a)",
    "def f(w : R, a : Array R) : R = sum (map (\\x -> if x > 0.0 then x - w else w - x) a)",
    "def f(w : R, a : Array R) : R = sum (map (\\x -> w - x) a)",
]


@pytest.mark.parametrize("text", SHARED_MINUS)
@pytest.mark.parametrize("evm", ["array", "parallel"])
def test_a_shared_cells_negated_adds_are_the_interpreters(text, evm):
    nan = math.nan
    rng = np.random.default_rng(len(text))
    inputs = [rng.normal(size=300), np.array([1.0, nan, 2.0, -nan]), np.array([-0.0, 0.0, -0.0]),
              np.array([1e308, -1e308, 1e308, 1e308])]
    compiled = chad.grad(text, evm=evm)
    interp = chad.grad(text, backend="interp")
    for a in inputs:
        for w in (0.5, -0.0, nan, -nan, 1e308):
            agree(compiled(w, a), interp(w, a), True)


@pytest.mark.parametrize("evm", ["array", "parallel"])
def test_an_elements_own_negated_adds_are_the_interpreters(evm):
    """`w - x`: x's own cell gets -d (negated by vadd), w's the running sum of
    them; the cotangents an array with NaNs of both signs and zeros."""
    text = "def f(w : R, a : Array R) : Array R = map (\\x -> w - x * 0.5) a"
    nan = math.nan
    rng = np.random.default_rng(5)
    a = rng.normal(size=64)
    ctg = rng.normal(size=64)
    ctg[[3, 9, 20, 21]] = [nan, -nan, -0.0, 0.0]
    _, back = chad.vjp(text, evm=evm)(0.25, a)
    _, ref = chad.vjp(text, backend="interp")(0.25, a)
    agree(back(ctg), ref(ctg), True)


def test_the_negation_is_not_computed_for_a_shared_cells_add():
    """The generated reverse pass passes x itself (`_vadd(..., False, True)`)
    and computes no `-x` array."""
    text = "def f(w : R, a : Array R) : R = sum (map (\\x -> exp (x - w)) a)"
    prog = chad.load(text)
    src = backend.gradient_module(prog, prog.find(None)).source
    back = src[src.index("\ndef vb"):]
    back = back[:back.index("return None")]
    assert ", False, True)" in back
    assert "(-" not in back


LEAF_PROGRAMS = [
    "def f(a : Array R) : R = let m = fold (\\p -> max(fst p, snd p)) a in "
    "m * 3.0 + sum (map (\\x -> x * x) a)",
    "def f(a : Array R) : R = let m = fold (\\p -> min(fst p, snd p)) a in "
    "sum (map (\\x -> x * 0.5) a) - m",
    "def f(a : Array R) : R = let m = fold (\\p -> max(fst p, snd p)) a in "
    "sum (map (\\x -> x * m) a)",
]


@pytest.fixture
def one_hot_adds(monkeypatch):
    """Counts the leaf cotangents added to one element only."""
    seen = []
    real = bag._add_one_hot

    def spy(parts, n):
        out = real(parts, n)
        seen.append(out is not None)
        return out

    monkeypatch.setattr(bag, "_add_one_hot", spy)
    return seen


@pytest.mark.parametrize("text", LEAF_PROGRAMS)
def test_a_folds_leaf_cotangents_change_one_element(text, one_hot_adds):
    rng = np.random.default_rng(7)
    inputs = [rng.normal(size=500), np.array([1.0, 3.0, 3.0, -2.0]), np.array([-0.0, 0.0, -0.0]),
              np.array([5.0]), np.array([1e308, -1e308, 2.0])]
    compiled = chad.grad(text)
    interp = chad.grad(text, backend="interp")
    for a in inputs:
        for ctg in (1.0, -1.0, 0.0, 1e-300, 1e308):
            agree(compiled(a, ctg=ctg), interp(a, ctg=ctg), True)
    assert any(one_hot_adds)


def test_the_leaf_cotangents_are_read_only_and_recorded():
    from chad.compile.vector_support import VecTree, vuntree
    tree = VecTree(4.0, 2, 5, None)
    out = vuntree(1.5, tree)([])
    assert known.ONE_HOT.fact(out) == 2 and out in known.NO_NEG_ZERO
    assert not out.flags.writeable
    assert out.tolist() == [0.0, 0.0, 1.5, 0.0, 0.0]
    assert known.ONE_HOT.fact(out.copy()) is None


def test_the_one_hot_add_takes_an_array_only_the_bag_holds(one_hot_adds):
    """An array of sums only the bag holds gets the one element added in
    place; one someone else holds is not changed: the general path adds
    into a new array, to the same values."""
    from chad.compile.vector_support import VecTree, vuntree
    for order in (0, 1):
        hot = vuntree(2.0, VecTree(1.0, 1, 3, None))([])
        b = bag.BArray(known.NO_NEG_ZERO.add(np.array([1.0, 2.0, 3.0])))
        b = bag.BPlus(bag.BArray(hot), b) if order else bag.BPlus(b, bag.BArray(hot))
        out = bag.dense_real(b, 3, take=True)
        assert out.tolist() == [1.0, 4.0, 3.0] and one_hot_adds[-1]
    w = known.NO_NEG_ZERO.add(np.array([1.0, 2.0, 3.0]))
    b = bag.BPlus(bag.BArray(hot), bag.BArray(w))
    out = bag.dense_real(b, 3, take=True)
    assert out.tolist() == [1.0, 4.0, 3.0] and not one_hot_adds[-1]
    assert w.tolist() == [1.0, 2.0, 3.0]
