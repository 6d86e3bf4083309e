"""Clamped loop indices (chad/compile/clamps.py, chad/compile/shifts.py,
vector_support.vclamp): the `if` of a clamp on integers recognised in a
vectorised body and run as np.clip; a loop index shifted and clamped recorded
as such, so that its gather is slices and its scatter (the gather's
cotangents) two runs of ordered adds and one elementwise add. Everything is
checked against the general path: fancy indexing, np.add.at with sums whose
value depends on the order of the adds, np.where of the comparisons, and the
interpreter's gradients, bit for bit, on the three runtimes.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import chad
from chad.arrays import bag as bag_module
from chad.compile import backend, clamps, shifts
from chad.compile.known import iota
from chad.compile.vector_support import vclamp, vgather, viadd, vout, vwhere
from chad.parser import parse_expr

RUNTIMES = ("array", "map", "parallel")


def _made(n: int, c: int, lo=None, hi=None) -> np.ndarray:
    """clip(iota + c, lo, hi) through the recorded path."""
    x = iota(n) if c == 0 else viadd(iota(n), c)
    if lo is not None:
        x = vclamp(x, lo, hi, True, True, True)
    return x


def _expected(n, c, lo=None, hi=None):
    x = np.arange(n, dtype=np.int64) + c
    return x if lo is None else np.clip(x, lo, hi)


CASES = [(n, c, lo, hi) for n in (1, 2, 3, 7, 40)
         for c in (-50, -3, -1, 0, 1, 2, 45)
         for lo, hi in ((None, None), (0, n - 1), (0, 0), (2, 5), (n - 1, n - 1), (-4, n + 3))]


# ----------------------------------------------------------------- the facts


@pytest.mark.parametrize("n,c,lo,hi", CASES)
def test_recorded_arrays_are_the_clipped_shift(n, c, lo, hi):
    x = _made(n, c, lo, hi)
    assert np.array_equal(x, _expected(n, c, lo, hi)) and x.dtype == np.int64
    f = shifts.fact(x)
    assert f is not None and f[0] == c
    assert not x.flags.writeable
    with pytest.raises(ValueError):
        x.flags.writeable = True
    # the fact holds of every element
    c2, l2, h2 = f
    assert np.array_equal(x, _expected(n, c2, l2, h2) if l2 is not None or h2 is not None
                          else np.arange(n) + c2)
    assert shifts.bound(x) == int(np.abs(x).max())


def test_disjoint_clamps_are_not_recorded():
    x = _made(10, 0, 6, 9)  # 6..9
    y = vclamp(x, 0, 3, True, True, True)  # every element 3
    assert np.array_equal(y, np.full(10, 3)) and shifts.fact(y) is None


def test_a_sum_past_int64_takes_the_exact_path():
    x = viadd(iota(5), 2 ** 63 - 3)
    assert shifts.fact(x) is None
    assert [int(v) for v in x] == [2 ** 63 - 3 + k for k in range(5)]


def test_arrays_not_recorded_have_no_fact():
    a = np.arange(5, dtype=np.int64) - 1
    assert shifts.fact(a) is None and shifts.bound(a) is None
    assert shifts.gather(np.ones(5), a) is None
    assert shifts.scatter(np.zeros(5), a, np.ones(5)) is None


def test_a_callers_array_is_a_writeable_copy():
    x = _made(6, -1, 0, 5)
    out = vout(x, 6, 1, np.int64, True, False)
    assert out is not x and out.flags.writeable and np.array_equal(out, x)
    assert shifts.fact(out) is None
    assert vout(x, 6, 1, np.int64, True, True) is x  # derivative code: the record itself


# ----------------------------------------------------------------- gathers


@pytest.mark.parametrize("n,c,lo,hi", CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.int64, object])
def test_gather_is_fancy_indexing(n, c, lo, hi, dtype):
    idx = _made(n, c, lo, hi)
    m = 60
    a = np.arange(m).astype(dtype) * 3 + 1
    inside = len(idx) == 0 or (int(idx.min()) >= 0 and int(idx.max()) < m)
    got = shifts.gather(a, idx)
    if not inside:
        assert got is None
        with pytest.raises(IndexError):
            vgather(a, idx)
        return
    assert got is not None and got.dtype == a.dtype
    assert np.array_equal(got, a[np.asarray(idx)])
    assert np.array_equal(vgather(a, idx), a[np.asarray(idx)])


def test_gather_reports_the_first_bad_index_through_the_general_path():
    from chad.arrays.evaluate import gather
    from chad.errors import EvalError
    idx = _made(8, 3)  # 3..10, past the end of 8
    with pytest.raises((EvalError, IndexError), match="index 8 out of range"):
        gather(np.zeros(8), idx)


# ----------------------------------------------------------------- scatters


def _order_sensitive(m: int, seed: int) -> np.ndarray:
    """Values whose sums depend on the order they are added in."""
    rng = np.random.default_rng(seed)
    return rng.choice([1e16, -1e16, 1.0, 3.0, -0.0, 0.5], size=m) * rng.choice([1.0, -1.0], m)


@pytest.mark.parametrize("n,c,lo,hi", CASES)
def test_scatter_is_add_at_in_order(n, c, lo, hi):
    idx = _made(n, c, lo, hi)
    m = 60
    for seed in range(4):
        vals = _order_sensitive(n, seed)
        start = _order_sensitive(m, seed + 10)
        want = start.copy()
        inside = int(idx.min()) >= 0 and int(idx.max()) < m
        got = start.copy()
        done = shifts.scatter(got, idx, vals)
        if not inside:
            assert done is None and got.tobytes() == start.tobytes()  # nothing added
            continue
        np.add.at(want, np.asarray(idx), vals)
        assert done is True and got.tobytes() == want.tobytes(), (n, c, lo, hi, seed)


def test_scatter_order_matters_here():
    """The check above can fail: adding the clamped run in another order gives
    other bits on these values."""
    vals = np.array([1e16, 1.0, -1e16, 1.0])
    idx = _made(4, -10, 0, 3)  # every element clamped to 0
    a, b = np.zeros(4), np.zeros(4)
    assert shifts.scatter(a, idx, vals)
    np.add.at(b, np.asarray(idx), vals[::-1])
    assert a.tobytes() != b.tobytes()


def test_scatter_through_the_bag():
    idx = _made(50, 1, 0, 49)
    vals = _order_sensitive(50, 3)
    out = np.zeros(50)
    assert bag_module._add_at(out, idx, vals)
    want = np.zeros(50)
    np.add.at(want, np.asarray(idx), vals)
    assert out.tobytes() == want.tobytes()


# ----------------------------------------------------------------- vclamp


def _chain(x, lo, hi, below_first, below_strict, above_strict):
    below = (x < lo) if below_strict else (x <= lo)
    above = (x > hi) if above_strict else (x >= hi)
    xs = np.asarray(x, dtype=object)
    if below_first:
        return np.where(below, lo, np.where(above, hi, xs))
    return np.where(above, hi, np.where(below, lo, xs))


@pytest.mark.parametrize("flags", list(itertools.product([True, False], repeat=3)))
@pytest.mark.parametrize("lo,hi", [(0, 9), (3, 3), (5, 2), (-2, -7), (0, 2 ** 70), (-2 ** 64, 4)])
def test_vclamp_is_the_if(flags, lo, hi):
    for x in (np.arange(-6, 12, dtype=np.int64), _made(18, -6),
              np.array([2 ** 65, -3, 4], dtype=object)):
        got = vclamp(x, lo, hi, *flags)
        want = _chain(x, lo, hi, *flags)
        assert [int(v) for v in np.asarray(got).ravel()] == [int(v) for v in want.ravel()], \
            (flags, lo, hi)


def test_vclamp_gives_the_where_chain_its_own_results_when_bounds_cross():
    """lo > hi: the strict and the non-strict tests differ at x = lo."""
    x = np.array([5], dtype=np.int64)
    assert int(vclamp(x, 5, 2, True, True, True)[0]) == 2   # 5 < 5 false, 5 > 2: hi
    assert int(vclamp(x, 5, 2, True, False, True)[0]) == 5  # 5 <= 5: lo
    assert int(vwhere(x <= 5, 5, 2)[0]) == 5


# ----------------------------------------------------------------- recognition


def _case(text: str):
    from chad.api_core import load
    prog = load(f"def f(x : Z, lo : Z, hi : Z) : Z = {text}")
    return prog.defs[-1].body


FORMS = [  # (the form, its below test strict, its above test strict)
    ("if x < lo then lo else if x > hi then hi else x", True, True),
    ("if x <= lo then lo else if x >= hi then hi else x", False, False),
    ("if lo > x then lo else if hi < x then hi else x", True, True),
    ("if lo >= x then lo else if hi <= x then hi else x", False, False),
    ("if x > hi then hi else if x < lo then lo else x", True, True),
    ("if hi < x then hi else if lo > x then lo else x", True, True),
    ("if x >= hi then hi else if lo >= x then lo else x", False, False),
    ("if x < lo then lo else if x >= hi then hi else x", True, False),
    ("if hi <= x then hi else if lo > x then lo else x", True, False),
    ("if x <= lo then lo else if hi < x then hi else x", False, True),
]
NOT_CLAMPS = [
    "if x < lo then hi else if x > hi then hi else x",     # a branch is not its bound
    "if x < lo then lo else if x > hi then hi else lo",    # the last branch is not x
    "if x < lo then lo else if x < hi then hi else x",     # both tests below
    "if x < lo then lo else if lo > hi then hi else x",    # another x
    "if x == lo then lo else if x > hi then hi else x",    # not an order
    "if x < lo then lo else x",                            # one test
]


@pytest.mark.parametrize("text,below_strict,above_strict", FORMS)
def test_clamp_forms_are_recognised(text, below_strict, above_strict):
    m = clamps.match(_case(text))
    assert m is not None
    from chad.terms import Var
    assert (m.x, m.lo, m.hi) == (Var("x"), Var("lo"), Var("hi"))
    assert m.below_first == text.startswith(("if x < lo", "if x <= lo", "if lo >"))
    assert (m.below_strict, m.above_strict) == (below_strict, above_strict)


@pytest.mark.parametrize("text", NOT_CLAMPS)
def test_other_ifs_are_not(text):
    assert clamps.match(_case(text)) is None


def test_real_clamps_are_not_recognised():
    """On R the clip and the `if` differ on -0.0 (clip(-0.0, 0.0, 1.0) may be -0.0)."""
    from chad.api_core import load
    prog = load("def f(x : R) : R = if x < 0.0 then 0.0 else if x > 1.0 then 1.0 else x")
    assert clamps.match(prog.defs[-1].body) is None


# ----------------------------------------------------------------- programs


PROGRAMS = {
    "stencil": """\
def clamp(i : Z, n : Z) : Z = if i < 0 then 0 else if i > n - 1 then n - 1 else i
def f(a : Array R, k : Z) : R =
  let n = length a in
  sum (build n (\\i -> let l = a ! clamp(i - k, n) in let r = a ! clamp(i + k, n) in
    l * a ! i + 0.5 * r * r))
""",
    "bounds-from-parameters": """\
def f(a : Array R, k : Z) : R =
  let n = length a in
  sum (build n (\\i -> let j = i + k in
    a ! (if j > n - 1 then n - 1 else if k > j then k else j) * a ! i))
""",
    "nested-clamps": """\
def f(a : Array R, k : Z) : R =
  let n = length a in
  sum (build n (\\i -> let j = i - 2 in let c = if j < 0 then 0 else if j > n - 1 then n - 1 else j in
    a ! (if c < k then k else if c > n - 2 then n - 2 else c) * 3.0 + a ! i))
""",
}


def _same(x, y) -> bool:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    return x.shape == y.shape and x.tobytes() == y.tobytes()


def _source(text: str) -> str:
    from chad.api_core import load
    prog = load(text)
    return backend.primal_module(prog, prog.defs[-1]).source


def test_the_stencil_is_exact():
    """The stencil reads its clamped indices through def calls: no rewrite, so
    the check above is bit for bit there."""
    from chad.api_core import load
    from chad.compile import source
    assert not source.rewritten(load(PROGRAMS["stencil"]))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_programs_use_the_clamp(name):
    src = _source(PROGRAMS[name])
    assert "_vclamp(" in src and "per-element loop" not in src, src


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_gradients_are_the_interpreters(name, runtime):
    text = PROGRAMS[name]
    g = chad.grad(text, evm=runtime)
    gi = chad.grad(text, evm=runtime, backend="interp")
    p = chad.primal(text)
    from chad.api_core import load
    from chad.compile import source
    exact = not source.rewritten(load(text))  # (let-bound indices: chad/compile/index_lets.py)
    for n in (0, 1, 2, 3, 6, 41):
        a = _order_sensitive(n, n) + np.random.default_rng(n).normal(size=n)
        for k in (0, 1, 2, 3, -1, 5, 60):
            try:
                want = gi(a, k)
            except Exception as e:  # an index out of range: the same error
                with pytest.raises(type(e)):
                    g(a, k)
                continue
            got = g(a, k)
            assert got[0] == want[0] or (np.isnan(got[0]) and np.isnan(want[0]))
            if exact:
                assert _same(got[1][0], want[1][0]), (name, runtime, n, k)
            else:
                np.testing.assert_allclose(got[1][0], want[1][0], rtol=1e-12, atol=0)
            assert p(a, k) == got[0] or np.isnan(got[0])


def test_the_parse_of_the_forms_is_an_if():
    """(The recognition reads the checker's int comparisons: ILT, IGT, ...)"""
    t = parse_expr("if x < lo then lo else x")
    assert type(t).__name__ == "Case"


# ----------------------------------------------------------------- lines: s * i + c


def _line(shape_n: int, axis: int, rank: int, scale: int, shift: int):
    from chad.compile.vector_support import vimul, vindex
    x = vindex(shape_n, axis, rank)
    if scale != 1:
        x = vimul(scale, x)
    return viadd(x, shift) if shift else x


@pytest.mark.parametrize("n,axis,rank,scale,shift", [
    (7, 0, 2, 2, 1), (7, 1, 2, 2, 0), (5, 1, 3, 3, -2), (1, 0, 2, 2, 1), (0, 0, 2, 2, 1),
    (6, 0, 2, 0, 4), (9, 0, 2, 1, 5)])
def test_a_nested_loops_index_times_and_plus_integers_is_a_line(n, axis, rank, scale, shift):
    """A nested region's loop index (vindex) and it times an integer >= 0 and
    plus an integer are recorded lines: the values of the operations, read-only
    for good, their bound without a pass, their gather a strided slice (or
    the general path: a scale of 0, an index out of range), their scatter
    np.add.at's adds."""
    from chad.compile.vector_support import _ibound
    x = _line(n, axis, rank, scale, shift)
    shape = [1] * rank
    shape[axis] = n
    want = (np.arange(n, dtype=np.int64) * scale + shift).reshape(shape)
    assert x.shape == want.shape and np.array_equal(x, want) and x.dtype == np.int64
    assert shifts.affine(x) == (scale, shift)
    assert not x.flags.writeable
    with pytest.raises(ValueError):
        x.flags.writeable = True
    assert _ibound(x) == (int(np.abs(want).max()) if n else 0)
    a = np.random.default_rng(n).normal(size=2 * n + 8)
    got = shifts.line_gather(a, x)
    if scale >= 1 and n and shift >= 0:
        assert got.shape == x.shape and np.array_equal(got, a[want])
        assert np.array_equal(vgather(a, x), a[want])
    else:
        assert got is None
    if n and shift >= 0:
        out, ref = a.copy(), a.copy()
        vals = np.random.default_rng(1).normal(size=x.shape) * 1e16
        done = shifts.scatter(out, x, vals)
        np.add.at(ref, want, vals)
        if scale >= 1:
            assert done and out.tobytes() == ref.tobytes()
        else:
            assert done is None


def test_lines_out_of_range_and_past_int64_take_the_general_path():
    from chad.compile.vector_support import vimul, vindex
    x = vindex(4, 0, 2)
    assert shifts.line_gather(np.zeros(3), x) is None  # index 3 of 3
    with pytest.raises(IndexError):
        vgather(np.zeros(3), x)
    big = 2 ** 62
    y = vimul(x, big)  # 3 * 2**62 leaves int64: exact integers
    assert shifts.affine(y) is None and y.dtype == object
    assert shifts.line_add(x, 2 ** 63) is None and shifts.line_mul(x, -1) is None
    assert int(viadd(x, 2 ** 63)[3, 0]) == 2 ** 63 + 3


def test_a_line_returned_is_a_writeable_copy():
    text = "def f(n : Z, m : Z) : Array (Array Z) = build n (\\i -> build m (\\j -> 2 * j + 1))"
    got = chad.primal(text)(3, 4)
    assert [list(r) for r in got] == [[1, 3, 5, 7]] * 3
    for row in got:
        assert row.flags.writeable and shifts.affine(row) is None
        row[0] = 9  # the caller's own
    assert [list(r) for r in chad.primal(text)(3, 4)] == [[1, 3, 5, 7]] * 3


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_gathers_by_lines_are_the_interpreters(runtime):
    """gmm's reads: `xs ! (2 * i)`, `xs ! (2 * i + 1)`, `w ! (2 * c)` in a
    nested loop, gradients bit for bit."""
    text = ("def f(xs : Array R, w : Array R) : R = "
            "sum (build (div(length xs, 2)) (\\i -> sum (build (div(length w, 2)) (\\c -> "
            "(xs ! (2 * i) - w ! (2 * c)) * (xs ! (2 * i + 1) - w ! (2 * c + 1))))))")
    rng = np.random.default_rng(4)
    for n, k in ((7, 3), (1, 1), (0, 2), (40, 5)):
        xs, w = rng.normal(size=2 * n) * 1e8, rng.normal(size=2 * k)
        got = chad.grad(text, evm=runtime)(xs, w)
        want = chad.grad(text, evm=runtime, backend="interp")(xs, w)
        assert repr(got[0]) == repr(want[0])
        for g, v in zip(got[1], want[1]):
            assert np.asarray(g).tobytes() == np.asarray(v).tobytes()


def test_lines_made_again_are_given_again():
    """A function called again at one size makes its lines once (the last
    RECENT_LINES kept): the same recorded array for the same shape, scale and
    shift, another for another."""
    from chad.compile.vector_support import vimul, vindex
    a, b = vindex(6, 0, 2), vindex(6, 0, 2)
    assert a is b and shifts.affine(a) == (1, 0)
    c, d = vimul(a, 3), vimul(b, 3)
    assert c is d and np.array_equal(c, np.arange(6).reshape(6, 1) * 3)
    assert vindex(6, 1, 2) is not a and vindex(6, 1, 2).shape == (1, 6)
    assert viadd(c, 1) is not c and shifts.affine(viadd(c, 1)) == (3, 1)


def test_a_gather_by_a_line_is_a_new_array():
    """`a ! (2 * i)` in a build: the caller's result is its own (writing it
    leaves the argument alone), as fancy indexing's copy was."""
    text = "def f(a : Array R) : Array R = build (div(length a, 2)) (\\i -> a ! (2 * i))"
    a = np.arange(10.0)
    got = chad.primal(text)(a)
    assert got.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert not np.shares_memory(got, a) and got.flags.writeable
    got[0] = 99.0
    assert a[0] == 0.0
    out = shifts.line_gather(a, viadd(iota(3), 1))
    assert out is not None and not np.shares_memory(out, a)
