"""Review of 46d0037 and db81cd2 (lines: s * arange + c, chad/compile/shifts.py
`line`, `recent_line`, `line_gather`, `_line_scatter`; vector_support.vindex,
vimul, viadd, _ibound, vgather, vout; chad/arrays/evaluate.py gather).

Tests named `test_bug_...` were written failing, each on a defect since
mended: a gather by a line was a view (of the argument, or shared by the
rows of a build), a nested loop's index line could be made writeable again,
and (older) an index bounded by 0 times an integer beyond int64 reached
numpy's int64 multiply. Tests whose docstring says "holds" record something
checked that held.
"""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import chad
from chad.api_core import compiled_primal
from chad.compile import shifts
from chad.compile.vector_support import vgather, viadd, vimul, vindex

RUNTIMES = ("array", "map", "parallel")


def _err(f, *args):
    try:
        return f(*args)
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"


# --------------------------------------------------------------------------
# BUG 1: a gather by a line is a strided *view* (line_gather), but the
# vectoriser still marks a gather's result fresh (chad/arrays/lower.py
# batch_index: `_vgather(...)`, fresh=True), so vout hands the view itself to
# the caller: "a 1-D array owning its data (never a view of an input)" no
# longer holds. Before 46d0037 the index 2 * j + 1 was a plain int64 array and
# the gather numpy's fancy indexing: a new array.


def test_bug_rows_of_a_gather_by_a_line_are_one_memory():
    """BUG: every row of `build n (\\i -> build m (\\j -> a ! (2 * j + 1)))` is
    the same strided view of `a` (the inner build's vout returns
    line_gather's slice), so the caller's rows alias one another: writing
    row 0 changes rows 1 and 2. The interpreter's rows are independent
    arrays (as the compiled ones were before the lines). An Array (Array R)
    whose rows share memory silently corrupts any caller that updates one
    row."""
    text = ("def f(a : Array R, n : Z, m : Z) : Array (Array R) = "
            "build n (\\i -> build m (\\j -> a ! (2 * j + 1)))")
    for backend in ("interp", None):
        rows = chad.primal(text, backend=backend)(np.arange(10.0), 3, 4)
        rows[0][0] = 99.0
        assert [float(r[0]) for r in rows] == [99.0, 1.0, 1.0], backend


def test_bug_a_gather_by_a_line_aliases_a_returned_array():
    """BUG: `(a, build n (\\i -> a ! (2 * i)))`: the compiled primal's second
    component is a view into its first (the strided slice a[0:2n-1:2]), so
    writing the gathered array changes the returned `a`; the interpreter's
    two components are independent."""
    text = "def f(a : Array R, n : Z) : Array R * Array R = (a, build n (\\i -> a ! (2 * i)))"
    for backend in ("interp", None):
        x, g = chad.primal(text, backend=backend)(np.arange(10.0), 4)
        assert not np.shares_memory(x, g), backend
        g[1] = -1.0
        assert list(x[:3]) == [0.0, 1.0, 2.0], backend


def test_bug_the_compiled_primal_returns_a_view_of_the_callers_argument():
    """BUG: the compiled primal entry (api_core.compiled_primal, no argument
    conversion) of `build n (\\i -> a ! (2 * i))` returns a view of the
    caller's own array `a`: a write to the result writes the argument.
    vout's contract is a result owning its data, never a view of an input."""
    text = "def f(a : Array R, n : Z) : Array R = build n (\\i -> a ! (2 * i))"
    a = np.arange(10.0)
    r = compiled_primal(text)(a, 3)
    assert list(r) == [0.0, 2.0, 4.0]
    assert not np.shares_memory(r, a)


# --------------------------------------------------------------------------
# BUG 2: vindex's line is not read-only for good. `line` sets WRITEABLE off on
# `values` and records `values[...]`, but vindex's `values` is
# `np.arange(n).reshape(shape)`: a view whose owner (the arange) stays
# writeable, so numpy lets anyone set the recorded array's WRITEABLE flag
# back on (known.iota and shifts._record make the owner read-only instead).
# The line is then also handed out again by recent_line to every later call.


def test_bug_a_nested_loops_index_line_can_be_made_writeable_again():
    """BUG: shifts.py promises "A recorded array is read-only for good (a
    view of a read-only array, whose WRITEABLE flag numpy refuses to set)",
    which is what lets `recent_line` give the same array to every later call
    and `affine`'s record never go stale. For vindex's lines numpy accepts
    `x.flags.writeable = True` (the arange under the reshape is writeable),
    after which a write changes the index array that the next call of any
    function at that shape is given, while its record still says (1, 0)."""
    x = vindex(7, 0, 2)
    assert shifts.affine(x) == (1, 0) and not x.flags.writeable
    try:
        with pytest.raises(ValueError):
            x.flags.writeable = True
    finally:
        shifts._RECENT_LINES.clear()  # (never hand a spoiled line to a later test)


# --------------------------------------------------------------------------
# Pre-existing (not from this change; found while probing lines at n = 1)


def test_bug_preexisting_a_zero_bound_index_times_an_int_beyond_int64():
    """BUG (pre-existing, also before 46d0037: vimul's general path): `j * k`
    with m = 1 (j's bound 0, so `_ibound(j) * _ibound(k) < 2**63`) and
    k = 2**64 runs numpy's int64 multiply of a Python int beyond int64:
    OverflowError, an internal compiler error; the interpreter gives 0."""
    text = "def f(n : Z, m : Z, k : Z) : Array (Array Z) = build n (\\i -> build m (\\j -> j * k))"
    want = chad.primal(text, backend="interp")(2, 1, 2 ** 64)
    got = _err(chad.primal(text), 2, 1, 2 ** 64)
    assert not isinstance(got, str), got
    assert [[int(v) for v in r] for r in got] == [[int(v) for v in r] for r in want]


# --------------------------------------------------------------------------
# holds


@pytest.mark.parametrize("evm", RUNTIMES)
def test_holds_gradient_through_line_gathers_and_scatters(evm):
    """holds: gradients (bits) and out-of-range errors of line gathers in a
    nested loop (2 * j + 1, 3 * i, i + j-mixed, n or m 0 or 1, arrays too
    short) equal the interpreter's on every EVM."""
    text = ("def f(a : Array R, b : Array R, n : Z, m : Z) : R = "
            "sum (build n (\\i -> sum (build m (\\j -> a ! (2 * j + 1) * b ! (3 * i) "
            "+ a ! (m * i + j)))))")
    rng = np.random.default_rng(3)
    for n, m, la, lb in ((3, 4, 20, 12), (0, 4, 9, 3), (3, 0, 9, 12), (1, 1, 3, 4),
                         (3, 4, 8, 12), (3, 4, 20, 6)):
        a, b = rng.normal(size=la), rng.normal(size=lb)
        a[::3] = -0.0
        got = _err(chad.grad(text, evm=evm), a, b, n, m)
        want = _err(chad.grad(text, evm=evm, backend="interp"), a, b, n, m)
        if isinstance(want, str):
            assert got == want
            continue
        assert repr(got[0]) == repr(want[0])
        for g, w in zip(got[1][:2], want[1][:2]):
            assert np.asarray(g).tobytes() == np.asarray(w).tobytes()


def test_holds_integer_lines_in_primals_equal_the_interpreters():
    """holds: lines under div, mod, comparisons, toreal, negation, scale 0,
    negative and beyond-int64 multipliers, gathers from object arrays of
    big ints: the compiled primal's values (or error) are the interpreter's."""
    head = "def f(a : Array Z, n : Z, m : Z, k : Z) : "
    bodies = [
        "Array (Array Z) = build n (\\i -> build m (\\j -> a ! (k * j + i)))",
        "Array (Array Z) = build n (\\i -> build m (\\j -> div(k * j + 1, 3) + mod(k * j - 7, 3)))",
        "Array (Array R) = build n (\\i -> build m (\\j -> toreal (k * j + i)))",
        "Array (Array Z) = build n (\\i -> build m (\\j -> if k * j < i then 1 else 0))",
        "Array (Array Z) = build n (\\i -> build m (\\j -> 0 - (k * (k * j) + k)))",
    ]
    big = np.array([2 ** 70 + v for v in range(12)], dtype=object)

    def norm(x):
        if isinstance(x, str):
            return x
        return [[repr(v) for v in np.asarray(r).tolist()] for r in x]

    for body in bodies:
        text = head + body
        for a in (np.arange(12), big):
            for n, m, k in ((2, 3, 2), (1, 1, 0), (2, 3, -1), (2, 3, 2 ** 63 - 1), (3, 2, 2 ** 62)):
                got = _err(chad.primal(text), a, n, m, k)
                want = _err(chad.primal(text, backend="interp"), a, n, m, k)
                assert norm(got) == norm(want), (body, n, m, k)


def test_holds_lines_made_by_threads_keep_their_values():
    """holds: threads making, reusing and dropping lines of many shapes,
    scales and shifts (the shared _RECENT_LINES, LINES) always get the
    values their record says."""
    bad = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(300):
            n = int(rng.integers(0, 6))
            axis = int(rng.integers(0, 2))
            s, c = int(rng.integers(0, 4)), int(rng.integers(-3, 4))
            x = viadd(vimul(vindex(n, axis, 2), s), c)
            want = np.arange(n, dtype=np.int64) * s + c
            if not np.array_equal(x.reshape(-1), want) or \
                    shifts.affine(x) not in (None, (s, c)):
                bad.append((n, axis, s, c))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


def test_holds_a_dead_lines_id_reused_is_not_a_line():
    """holds: a line garbage-collected, its id reused by a plain array: that
    array is not recorded (affine checks the weak reference)."""
    shifts._RECENT_LINES.clear()
    x = vimul(vindex(5, 0, 2), 3)
    key = id(x)
    del x
    gc.collect()
    for _ in range(2000):
        y = np.arange(5, dtype=np.int64).reshape(5, 1) * 7
        if id(y) == key:
            break
    assert shifts.affine(y) is None and shifts.bound(y) is None
    assert vgather(np.arange(40.0), y).tolist() == [[0.0], [7.0], [14.0], [21.0], [28.0]]
