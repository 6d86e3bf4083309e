"""Review of 232ae30 (clamped loop indices: chad/compile/clamps.py,
chad/compile/shifts.py, vector_support.vclamp / viadd / vgather / vout, and
`x + (-y)` emitted as numpy's `x - y`).

Tests marked BUG fail on the current code; tests marked HOLDS pass and
document something checked that holds.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import chad
from chad.compile import shifts
from chad.compile.known import iota
from chad.compile.vector_support import viadd

RUNTIMES = ("array", "map", "parallel")
I64 = 2 ** 63
CLAMP = "(if i + c < lo then lo else if i + c > hi then hi else i + c)"


def _both(make, *args):
    """(compiled, interpreter) results, or the error messages."""
    out = []
    for backend in (None, "interp"):
        f = make(backend)
        try:
            out.append(f(*args))
        except Exception as e:  # noqa: BLE001
            out.append(f"{type(e).__name__}: {e}")
    return out


def _ints(x):
    return x if isinstance(x, str) else [int(v) for v in x]


# --------------------------------------------------------------------------
# BUG 1: shifts.add hands numpy a Python int outside int64.
# `add` checks only that x[0] + y and x[-1] + y fit in int64, never that y
# itself does; np.add(x, y) then raises OverflowError (NEP 50). Before the
# change viadd took the exact (object) path: _ibound(x) + _ibound(y) >= 2**63.


@pytest.mark.parametrize("n,c,d", [(3, -I64 + 10, I64),          # sums 10, 11, 12
                                   (3, I64 - 10, -I64 - 5),       # sums -15, -14, -13
                                   (0, 0, 2 ** 64),               # empty loop
                                   (0, 0, -I64 - 1)])
def test_bug_shift_by_an_int_beyond_int64_primal(n, c, d):
    # BUG: the compiled primal fails with "internal compiler error ...
    # OverflowError: Python int too large to convert to C long"
    text = "def f(n : Z, c : Z, d : Z) : Array Z = build n (\\i -> (i + c) + d)"
    got, want = _both(lambda b: chad.primal(text, backend=b), n, c, d)
    assert _ints(got) == _ints(want)


@pytest.mark.parametrize("evm", RUNTIMES)
def test_bug_shift_by_an_int_beyond_int64_gradient(evm):
    # BUG: the index array of the gather (i + c) + d: c = -2**63 + 1 is
    # recorded, d = 2**63 does not fit int64, the sums 1.. do
    text = ("def f(a : Array R, c : Z, d : Z) : R = "
            "sum (build (length a - 1) (\\i -> a ! ((i + c) + d) * a ! i))")
    args = (np.arange(4.0), -I64 + 1, I64)
    want = chad.grad(text, backend="interp", evm=evm)(*args)
    got = chad.grad(text, evm=evm)(*args)
    assert got[0] == want[0] and np.array_equal(got[1][0], want[1][0])


def test_bug_viadd_of_a_recorded_index_and_a_big_int():
    # BUG (unit level): OverflowError from np.add inside shifts.add
    x = viadd(iota(3), -I64 + 10)
    assert shifts.fact(x) is not None
    assert [int(v) for v in viadd(x, I64)] == [10, 11, 12]
    assert len(viadd(iota(0), 2 ** 64)) == 0


# --------------------------------------------------------------------------
# BUG 2: `x + (-y)` as numpy's `x - y` changes a NaN's sign bit.
# The interpreter (and the code before the change) computes x + (-y): -NaN
# has its sign bit set and an add with one NaN operand returns that NaN. numpy's
# x - y returns y's NaN with its sign unchanged. docs/compiler.md ("Values")
# says these are "the same bits" and allows NaN sign differences only "where
# two NaNs meet in an add"; here only one NaN is involved. At 24efe73 the
# compiled bits equal the interpreter's.


@pytest.mark.parametrize("text", [
    "def f(w : R, xs : Array R) : Array R = map (\\x -> x - w) xs",
    "def f(w : R, xs : Array R) : Array R = map (\\x -> (-w) + x) xs",
])
def test_bug_subtraction_of_a_nan_keeps_the_interpreters_sign(text):
    xs = np.array([1.0, 2.0, -0.0])
    w = float("nan")
    got = chad.primal(text)(w, xs)
    want = chad.primal(text, backend="interp")(w, xs)
    assert np.array_equal(np.signbit(got), np.signbit(want)), (got.view(np.uint64),
                                                               want.view(np.uint64))


# --------------------------------------------------------------------------
# BUG 3 (NOT from this change: the same code and failure at 24efe73, found
# while looking for recorded arrays reaching a vjp's value). The vjp forward
# pass of a build reading an Array Z at its own index generates
# `if _visf64(v68):` before v68 is assigned: UnboundLocalError, reported as an
# internal compiler error (array and parallel runtimes).


@pytest.mark.parametrize("evm", ["array", "parallel"])
def test_bug_preexisting_vjp_of_a_build_reading_an_int_array(evm):
    text = ("def f(a : Array R) : Array Z = let n = length a in "
            "let idx = build n (\\i -> i + 1) in build n (\\i -> idx ! i)")
    a = np.arange(4.0)
    want, _ = chad.vjp(text, backend="interp", evm=evm)(a)
    got, _ = chad.vjp(text, evm=evm)(a)
    assert _ints(got) == _ints(want)


# --------------------------------------------------------------------------
# HOLDS: every form of the clamp (either test first, strict or not, either
# way round), lo > hi at run time included, gives the interpreter's primal
# and gradient bit for bit (vclamp's np.where path for lo > hi is the `if`).


def _forms():
    out = []
    for below_first in (True, False):
        for b, b_flip in (("<", ">"), ("<=", ">=")):
            for a, a_flip in ((">", "<"), (">=", "<=")):
                for fb in (False, True):
                    for fa in (False, True):
                        x = "(i + c)"
                        tb = f"lo {b_flip} {x}" if fb else f"{x} {b} lo"
                        ta = f"hi {a_flip} {x}" if fa else f"{x} {a} hi"
                        out.append(f"if {tb} then lo else if {ta} then hi else {x}"
                                   if below_first else
                                   f"if {ta} then hi else if {tb} then lo else {x}")
    return out


@pytest.mark.parametrize("form", _forms()[::5])
def test_holds_clamp_forms_and_lo_above_hi(form):
    tp = f"def f(n : Z, c : Z, lo : Z, hi : Z) : Array Z = build n (\\i -> {form})"
    tg = (f"def f(a : Array R, c : Z, lo : Z, hi : Z) : R = "
          f"sum (build (length a) (\\i -> a ! ({form}) * a ! i))")
    p, pi = chad.primal(tp), chad.primal(tp, backend="interp")
    g, gi = chad.grad(tg), chad.grad(tg, backend="interp")
    rng = np.random.default_rng(0)
    for n in (0, 1, 5):
        for c in (-3, 0, 2):
            for lo, hi in ((0, 4), (2, 2), (4, 0), (3, 1), (-1, 2)):
                assert _ints(p(n, c, lo, hi)) == _ints(pi(n, c, lo, hi))
                a = rng.normal(size=n)
                got, want = _both(lambda b: gi if b else g, a, c, lo, hi)
                if isinstance(want, str) or isinstance(got, str):
                    assert got == want  # the interpreter's error (index out of range)
                else:
                    assert got[0] == want[0] and np.array_equal(got[1][0], want[1][0])


# HOLDS: no recorded (read-only, shared) array reaches a caller: primal
# results, vjp values, tuples, Array (Array Z) rows.


@pytest.mark.parametrize("text", [
    f"def f(a : Array R, c : Z, lo : Z, hi : Z) : Array Z = build (length a) (\\i -> {CLAMP})",
    "def f(a : Array R, c : Z, lo : Z, hi : Z) : (R * Array Z) = (sum a, build (length a) (\\i -> i + c))",
    f"def f(a : Array R, c : Z, lo : Z, hi : Z) : Array (Array Z) = build 3 (\\j -> build (length a) (\\i -> {CLAMP}))",
])
def test_holds_no_recorded_array_reaches_the_caller(text):
    args = (np.arange(5.0), -1, 0, 4)
    outs = [chad.primal(text)(*args)] + [chad.vjp(text, evm=e)(*args)[0] for e in RUNTIMES]
    for v in outs:
        for x in (v if isinstance(v, tuple) else (v,)):
            if isinstance(x, np.ndarray):
                assert x.flags.writeable and shifts.fact(x) is None


# HOLDS: the stencil's vjp called twice, its gradient changed in between,
# and concurrent gradients (threads x three runtimes) are the interpreter's.


def test_holds_stencil_vjp_twice_and_mutation():
    text = open("examples/stencil.chad").read()
    a = np.array([1.0, 4.0, 2.0, 8.0, -0.0, 3.0])
    want = chad.vjp(text, backend="interp")(a)[1](1.0)[0]
    for evm in RUNTIMES:
        _, bp = chad.vjp(text, evm=evm)(a)
        g1 = bp(1.0)[0]
        assert np.array_equal(g1, want)
        g1[:] = 99.0
        assert np.array_equal(bp(1.0)[0], want)


def test_holds_concurrent_gradients():
    tg = (f"def f(a : Array R, c : Z, lo : Z, hi : Z) : R = "
          f"sum (build (length a) (\\i -> a ! {CLAMP} * a ! i))")
    gi = chad.grad(tg, backend="interp")
    rng = np.random.default_rng(3)
    cases = []
    for _ in range(20):
        n = int(rng.integers(1, 40))
        c, lo = int(rng.integers(-4, 4)), int(rng.integers(0, 3))
        hi = n - 1
        lo = min(lo, hi)
        a = rng.normal(size=n) * 1e16
        cases.append((a, c, lo, hi, gi(a, c, lo, hi)))
    bad = []

    def work(evm, seed):
        g = chad.grad(tg, evm=evm)
        r = np.random.default_rng(seed)
        for _ in range(100):
            a, c, lo, hi, want = cases[int(r.integers(len(cases)))]
            got = g(a, c, lo, hi)
            if not (got[0] == want[0] and np.array_equal(got[1][0], want[1][0])):
                bad.append((evm, c, lo, hi))

    threads = [threading.Thread(target=work, args=(e, s)) for s in range(3) for e in RUNTIMES]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad
