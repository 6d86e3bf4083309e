"""Review of b9b1fe8 (a call of a def with array parameters in the inner loop of
a nested loop, in derivative code: Exec.inner_run_evm, PairOnes), 3f03e80 (a
case on an unbatched Bool in a nested reverse pass; negative loop sizes inside
loops of no element) and b9e14a2 (vpowi's one exponent for all elements).

Compiled results against the interpreter on the three runtimes: primal, vjp's
value and its backpropagator called twice, inputs not mutated, errors the
interpreter's. The two `test_fails_*` groups show real disagreements."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

import chad
from tests.test_vectorise import _source, agree

RUNTIMES = ("array", "map", "parallel")
MAXF = "fold (\\q -> max(fst q, snd q)) "
MINF = "fold (\\q -> min(fst q, snd q)) "


def _outcome(f):
    try:
        return "ok", f()
    except Exception as e:  # noqa: BLE001 (the message is compared)
        return "err", str(e)


def _same(got, want, exact: bool) -> None:
    assert got[0] == want[0], (got, want)
    if got[0] == "err":
        assert got[1] == want[1]
    else:
        agree(got[1], want[1], exact=exact)


def _check(text, args, exact=True, ds=(1.0, -0.0, -2.5), evms=RUNTIMES):
    for evm in evms:
        mine = copy.deepcopy(args)
        _same(_outcome(lambda: chad.primal(text)(*mine)),
              _outcome(lambda: chad.primal(text, backend="interp")(*copy.deepcopy(args))), exact)
        got = _outcome(lambda: chad.vjp(text, evm=evm)(*mine))
        want = _outcome(lambda: chad.vjp(text, evm=evm, backend="interp")(*copy.deepcopy(args)))
        assert got[0] == want[0], (evm, got, want)
        if got[0] == "err":
            assert got[1] == want[1], evm
            continue
        agree(got[1][0], want[1][0], exact=exact)
        for d in ds:
            for _ in range(2):  # the backpropagator twice
                _same(_outcome(lambda: got[1][1](d)), _outcome(lambda: want[1][1](d)), exact)
        for x, y in zip(args, mine):  # the inputs are not mutated
            if isinstance(x, np.ndarray):
                assert x.tobytes() == np.asarray(y).tobytes(), evm


def _batched(text) -> bool:
    src = _source(text, "grad")
    return "nested loops" in src and "per-element" not in src


# ------------------------------------------------------------------ failing


# A fold by max of calls whose values do not depend on the outer element (the
# real parameter taking `a ! i` is unused), in a batched nested loop: the tree
# is 1 x m (vtree2 of a value of the inner loop only) but its cotangent is
# n x 1; folds.vuntree2 broadcasts the cotangent to the leaves' shape (1, 1)
# and raises (internal compiler error) for any n != 1.
UNUSED_REAL = ("def g(w : R, x : Array R, j : Z) : R = x ! j * 2.0\n"
               "def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
               + MAXF + "(build (length b) (\\j -> g(a ! i, b, j)))))")


@pytest.mark.parametrize("n", [0, 2])
def test_fails_fold_of_calls_not_reading_the_outer_element(n):
    assert _batched(UNUSED_REAL)
    args = (np.arange(n, dtype=float) - 0.5, np.array([1.0, 2.0, 3.0]))
    want = chad.grad(UNUSED_REAL, backend="interp")(*args)
    for evm in ("array", "parallel"):
        agree(chad.grad(UNUSED_REAL, evm=evm)(*args), want, exact=True)


def test_fold_of_calls_not_reading_the_outer_element_more():
    # (the same with the call's value read through min and a second call)
    text = ("def g(w : R, x : Array R, j : Z) : R = max(x ! j, 1.0)\n"
            "def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> a ! i * "
            + MINF + "(build (length b) (\\j -> g(a ! i, b, j) - g(a ! i * 2.0, b, 0)))))")
    _check(text, (np.array([0.5]), np.array([1.0, 2.0, 3.0])))  # n = 1 works


# A negative inner size (`length b - 1`, b empty) inside an outer loop of no
# element: 3f03e80 makes it no error in vindex/vtake/vsum/vfold/vtree2, but
# the nested reverse pass still uses the unclamped size: Exec.loop's
# `shape = (n, fns.size)` (chad/arrays/nested.py) is (0, -1), and
# PairOnes.add / vadd2 np.broadcast_to(..., (0, -1)) and folds.vuntree2
# np.zeros((0, -1)) raise (internal compiler error); the interpreter runs
# no inner loop and returns zeros.
NEG = {
    "call": ("def g(x : Array R, j : Z, y : Array R, i : Z) : R = x ! j * y ! i\n"
             "def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
             "sum (build (length b - 1) (\\j -> g(b, j, a, i)))))"),
    "call_max": ("def g(x : Array R, j : Z, y : Array R, i : Z) : R = x ! j * y ! i\n"
                 "def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
                 + MAXF + "(build (length b - 1) (\\j -> g(b, j, a, i)))))"),
    "index": ("def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
              "sum (build (length b - 1) (\\j -> a ! i * toreal j))))"),
}


@pytest.mark.parametrize("name", sorted(NEG))
def test_fails_negative_inner_size_with_no_outer_element_in_the_reverse_pass(name):
    text = NEG[name]
    assert _batched(text)
    args = (np.zeros(0), np.zeros(0))
    want = chad.grad(text, backend="interp")(*args)
    for evm in ("array", "parallel"):
        agree(chad.grad(text, evm=evm)(*args), want, exact=True)


@pytest.mark.parametrize("name", sorted(NEG))
def test_negative_inner_size_otherwise(name):
    # outer elements: the evaluator's error; no negative size: the same values
    text = NEG[name]
    for a, b in ((np.array([1.0, 2.0]), np.zeros(0)), (np.zeros(0), np.array([3.0])),
                 (np.array([1.5, -2.0, 3.0]), np.array([3.0, -0.0, -1.0]))):
        _check(text, (a, b), ds=(1.0, -0.0))


# ------------------------------------------------------------------ passing


CALLS = {
    # several calls per pair, the same index read several times, real parameters
    "reals": ("def g(x : Array R, j : Z, w : R, v : R) : R = x ! j * w * x ! j + v * w\n"
              "def f(w : R, a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
              "sum (build (length b) (\\j -> g(b, j, a ! i, b ! j) * g(a, i, b ! j, w)))))"),
    "nested_call": ("def g(x : Array R, j : Z, w : R) : R = x ! j * w + w\n"
                    "def f(w : R, a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
                    "sum (build (length b) (\\j -> g(b, j, g(a, i, b ! j))))))"),
    "min_fold": ("def g(x : Array R, i : Z, y : Array R, j : Z) : R = "
                 "max(x ! i - y ! j, y ! j * x ! 0) * x ! i\n"
                 "def f(w : R, a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
                 + MINF + "(build (length b) (\\j -> g(a, i, b, j) + g(b, j, a, i)))))"),
    "mixed_adds": ("def g(x : Array R, j : Z) : R = x ! j * x ! j\n"
                   "def f(w : R, a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
                   "sum (build (length b) (\\j -> b ! j * a ! i + g(b, j) - g(a, i) * w))))"),
    "two_loops": ("def g(x : Array R, j : Z, w : R) : R = x ! j * w\n"
                  "def f(w : R, a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
                  "sum (build (length b) (\\j -> g(b, j, a ! i) * toreal j)) * "
                  "sum (build (length a) (\\j -> g(a, j, a ! i) * toreal j))))"),
    "captured_case": ("def g(x : Array R, j : Z, y : Array R, i : Z) : R = x ! j * y ! i\n"
                      "def f(w : R, a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
                      + MINF + "(build (length b) (\\j -> g(b, j, a, i) * max(w, 0.0) "
                      "+ max(g(a, i, b, j), w)))))"),
    "out_of_range": ("def g(x : Array R, j : Z, y : Array R, i : Z) : R = x ! (j + i) * y ! i\n"
                     "def f(w : R, a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
                     "sum (build (length b) (\\j -> g(b, j, a, i)))))"),
    "negative_index": ("def g(x : Array R, j : Z, y : Array R, i : Z) : R = x ! (j - 1) * y ! i\n"
                       "def f(w : R, a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
                       "sum (build (length b) (\\j -> g(b, j, a, i)))))"),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_calls_in_the_inner_loop(name):
    text = CALLS[name]
    rng = np.random.default_rng(len(name))
    for n, k, w in ((3, 4, 0.5), (1, 1, -0.0), (4, 2, -1.5)):
        a, b = rng.standard_normal(n), rng.standard_normal(k)
        if k > 1:
            b[-1] = b[0]  # a tie
        if n > 2:
            a[1], a[2] = -0.0, math.inf
        _check(text, (w, a, b), ds=(1.0, -0.0))


SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -3.5, 1e300, -1e300, 1e-300, np.inf, -np.inf,
                    np.nan, 1e-310, -1e-310, 1.5e154, 0.5])


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, -1, -2, -3, 7, 1075, -1075, 2 ** 53 + 1])
def test_powi_literal_on_special_values(n):
    lit = str(n) if n >= 0 else f"(0 - {-n})"
    for text in (f"def f(a : Array R) : R = sum (build (length a) (\\i -> a ! i ** {lit}))",
                 f"def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
                 f"sum (build (length b) (\\j -> (a ! i - b ! j) ** {lit}))))"):
        args = (SPECIAL,) if "b :" not in text else (SPECIAL[:9], SPECIAL[7:])
        _check(text, args, exact=False, ds=(1.0, -0.0), evms=("array",))


@pytest.mark.parametrize("w", [0.5, -0.0, 0.0, -2.0, math.nan, math.inf])
def test_cases_on_a_captured_real_in_the_nested_reverse_pass(w):
    text = ("def f(w : R, a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
            "let v = max(w, 0.0) in " + MAXF + "(build (length b) (\\j -> "
            "v * a ! i - b ! j + min(w, 1.0) * max(a ! i * b ! j, w)))))")
    assert _batched(text)
    rng = np.random.default_rng(3)
    _check(text, (w, rng.standard_normal(3), rng.standard_normal(4)), ds=(1.0, -0.0))
