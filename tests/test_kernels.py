"""chad/compile/kernels.py: the running sums of a vectorised pass's adds to a
cell, in the evaluator's order, by the C extension and by numpy's np.cumsum
(its fallback), both against a plain Python loop of IEEE additions (the
evaluator's own `plusv`, one add after the other); the branch-free select
against np.where, bit for bit."""

from __future__ import annotations

import math
import shutil
import struct

import numpy as np
import pytest

from chad.compile import kernels
from chad.compile import kernels as seqsum  # (the running sums' tests)

SPECIAL = [0.0, -0.0, 1.0, -1.0, 1e308, -1e308, 5e-324, -5e-324, math.inf, -math.inf,
           math.nan, 2.0 ** 53, 1.0 + 2.0 ** -52, 0.1, -0.3]


def _bits(x):
    if x is None:
        return None
    if math.isnan(x):
        return "nan"
    return struct.pack("<d", x)


def _loop(parts, masks, n, start):
    """The evaluator's order: element i's adds, part by part, one after the other."""
    s, have = start, start is not None
    added = False
    for i in range(n):
        for p, m in zip(parts, masks):
            p = np.asarray(p, dtype=np.float64).reshape(-1)
            if m is not None and not np.asarray(m).reshape(-1)[i]:
                continue
            w = len(p) // n
            for x in p[i * w:(i + 1) * w]:
                added = True
                s = float(x) if not have else s + float(x)
                have = True
    return s if added else None


def _values(rng, size, special: bool):
    x = rng.normal(size=size) * rng.choice([1e-8, 1.0, 1e8], size=size)
    if special and size:
        k = rng.integers(0, size + 1)
        x[rng.integers(0, size, size=k)] = rng.choice(SPECIAL, size=k)
    return x


@pytest.fixture
def impl(kernels_impl):
    """Both loops: the C extension's and numpy's (tests/conftest.py)."""
    return kernels_impl


@pytest.mark.parametrize("seed", range(40))
def test_running_is_the_sum_in_order(impl, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 40))
    k = int(rng.integers(1, 4))
    parts, masks = [], []
    for _ in range(k):
        w = int(rng.integers(0, 4)) if n else 0
        parts.append(_values(rng, n * w, special=seed % 3 == 0))
        masks.append(None if rng.random() < 0.5 else rng.random(n) < 0.5)
    start = None if seed % 2 else float(rng.choice(SPECIAL + [3.5]))
    want = _loop(parts, masks, n, start)
    assert _bits(seqsum.running(parts, masks, n, start)) == _bits(want)


@pytest.mark.parametrize("start", [None, 0.0, -0.0, 2.5])
def test_running_keeps_signed_zeros_and_its_first_value(impl, start):
    """-0.0 alone sums to -0.0 from no start, to 0.0 from 0.0: the sum starts
    at the first value added, not at a zero."""
    got = seqsum.running([np.array([-0.0, -0.0])], [None], 2, start)
    assert _bits(got) == _bits(_loop([[-0.0, -0.0]], [None], 2, start))


def test_running_of_nothing_is_none(impl):
    """No value added (no element, widths 0, all masked out): None, whatever the
    start, so Pass.flush leaves the cell as it is."""
    assert seqsum.running([np.zeros(0)], [None], 0, 1.5) is None
    assert seqsum.running([np.zeros(0)], [None], 5, None) is None
    assert seqsum.running([np.ones(3)], [np.zeros(3, dtype=bool)], 3, 2.0) is None


def test_running_reads_strided_and_broadcast_parts(impl):
    rng = np.random.default_rng(7)
    base = _values(rng, 64, special=False)
    views = [base[::2], base[::-1][:32], np.broadcast_to(np.float64(0.1), (32,)),
             np.asfortranarray(base.reshape(8, 8)).T.reshape(-1)[:32]]
    masks = [None, rng.random(32) < 0.5, None, np.broadcast_to(True, (32,))]
    want = _loop([np.array(v) for v in views], masks, 32, 1.0)
    assert _bits(seqsum.running(views, masks, 32, 1.0)) == _bits(want)


def test_running_of_a_long_array_matches_cumsum(impl):
    """The one-run fast path (one part, no mask) over 10^5 values."""
    x = _values(np.random.default_rng(3), 10 ** 5, special=False)
    assert _bits(seqsum.running([x], [None], len(x), None)) == _bits(float(np.cumsum(x)[-1]))
    want = float(np.cumsum(np.concatenate(([0.25], x)))[-1])
    assert _bits(seqsum.running([x], [None], len(x), 0.25)) == _bits(want)


@pytest.mark.parametrize("seed", range(20))
def test_rows_are_each_rows_sum_in_order(impl, seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(0, 12))
    w = int(rng.integers(0 if seed % 2 == 0 else 1, 6))
    values = _values(rng, n * w, special=seed % 3 == 0)
    start = None if seed % 2 else _values(rng, n, special=True)
    got = seqsum.rows(values.reshape(n, w), n, start)
    assert got.shape == (n,) and got.dtype == np.float64
    for i in range(n):
        s0 = None if start is None else float(start[i])
        want = _loop([values[i * w:(i + 1) * w]], [None], 1, s0)
        assert _bits(float(got[i])) == _bits(want if want is not None else s0)


def test_rows_from_one_start_for_all(impl):
    """A cell's common initial real (a Python float) starts every row."""
    got = seqsum.rows(np.array([[1e16, 1.0], [-0.0, -0.0]]), 2, -0.0)
    assert [_bits(float(x)) for x in got] == [_bits((-0.0 + 1e16) + 1.0), _bits(-0.0)]


def test_the_extension_rejects_what_it_cannot_read():
    if not seqsum.native():
        pytest.skip("the C extension is not built")
    native = seqsum._native
    with pytest.raises(TypeError):
        native.running((np.ones(3, dtype=np.float32),), (None,), 3, None)
    with pytest.raises(TypeError):
        native.running((np.ones((3, 1)),), (None,), 3, None)
    with pytest.raises(ValueError):
        native.running((np.ones(4),), (None,), 3, None)
    with pytest.raises(ValueError):
        native.running((np.ones(3),), (np.ones(2, dtype=bool),), 3, None)
    with pytest.raises(ValueError):
        native.rows(np.ones(4), 3, None, np.empty(3))
    with pytest.raises(ValueError):
        native.rows(np.ones(0), 3, None, np.empty(3))
    with pytest.raises((TypeError, BufferError, ValueError)):
        native.rows(np.ones(3), 3, None, np.broadcast_to(np.float64(0.0), (3,)))


def test_the_extension_is_built_where_a_compiler_is():
    """`pip install -e .` builds it (setup.py) on a machine with a C compiler:
    a failed build must not go unnoticed (chad would run numpy's slower sums)."""
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler here")
    import os
    if os.environ.get("CHAD_NATIVE", "").strip() == "0":
        pytest.skip("CHAD_NATIVE=0")
    assert seqsum.native()


def _same_bits(x, y) -> bool:
    x, y = np.asarray(x), np.asarray(y)
    return x.shape == y.shape and x.dtype == y.dtype == np.float64 and \
        np.array_equal(x.view(np.int64), y.view(np.int64))


def _operands(rng, n):
    """Every form a batched real takes: arrays, views, Python and numpy floats."""
    base = _values(rng, 2 * n, special=True)
    return [base[:n].copy(), base[::2].copy(), base[::2], base[::-1][:n],
            np.broadcast_to(np.float64(-0.0), (n,)), -0.0, 1.5, math.nan, np.float64(2.0)]


@pytest.mark.parametrize("n", [0, 1, 511, 512, 2000])
def test_select_is_np_where_bit_for_bit(impl, n):
    rng = np.random.default_rng(n)
    ops = _operands(rng, n)
    masks = [rng.random(n) < 0.5, np.ones(n, dtype=bool), np.zeros(n, dtype=bool),
             (rng.random(2 * n) < 0.5)[::2]]
    for c in masks:
        for a in ops:
            for b in ops[::3]:
                assert _same_bits(kernels.select(c, a, b), np.where(c, a, b))


@pytest.mark.parametrize("shape", [(40, 30), (3, 700), (2, 3, 200)])
def test_select_of_blocks(impl, shape):
    """A region of rank 2 or more: C-ordered blocks, and operands broadcast
    along an axis (np.where then)."""
    rng = np.random.default_rng(sum(shape))
    c = rng.random(shape) < 0.5
    a = _values(rng, math.prod(shape), special=True).reshape(shape)
    row = _values(rng, shape[-1], special=True)
    col = _values(rng, shape[0], special=False).reshape((shape[0],) + (1,) * (len(shape) - 1))
    for x, y in [(a, -0.0), (0.25, a), (a, a[::-1].copy()), (a, row), (col, a),
                 (np.asfortranarray(a), a), (a.reshape(shape)[..., ::-1], 1.0)]:
        assert _same_bits(kernels.select(c, x, y), np.where(c, x, y))
    assert _same_bits(kernels.select(np.asfortranarray(c), a, 1.0), np.where(c, a, 1.0))


def test_select_leaves_other_types_to_np_where():
    """Integers, object arrays and a Python bool: np.where's own result."""
    c = np.arange(1000) % 3 == 0
    ints = np.arange(1000)
    assert np.array_equal(kernels.select(c, ints, -ints), np.where(c, ints, -ints))
    assert kernels.select(c, ints, 0.5).dtype == np.where(c, ints, 0.5).dtype
    assert _same_bits(kernels.select(True, np.ones(3), 0.0), np.where(True, np.ones(3), 0.0))


def test_select_rejects_what_it_cannot_read():
    if not kernels.native():
        pytest.skip("the C extension is not built")
    native = kernels._native
    c, a = np.ones(4, dtype=bool), np.ones(4)
    with pytest.raises(ValueError):
        native.select(c, a, np.ones(3), np.empty(4))
    with pytest.raises(ValueError):
        native.select(c, a, a, np.empty(8)[::2])
    with pytest.raises(TypeError):
        native.select(c.astype(np.int8), a, a, np.empty(4))


PROGRAMS = {
    "leaky": ("def leaky(w : R, xs : Array R) : R = "
              "sum (map (\\x -> if x > 0.0 then x * w else 0.01 * x * w) xs)",
              lambda rng, n: (0.7, rng.normal(size=n))),
    "lse": ("def lse(a : Array R) : R = let m = fold (\\p -> max(fst p, snd p)) a in "
            "log (sum (map (\\x -> exp (x - m)) a)) + m", lambda rng, n: (rng.normal(size=n),)),
    "closure": ("def weighted(w : R, xs : Array R) : R = "
                "let f = \\(x : R) -> tanh (w * x) * x in sum (map f xs)",
                lambda rng, n: (0.3, rng.normal(size=n))),
    "clamp": ("def clamp(w : R, xs : Array R) : R = sum (map (\\x -> "
              "if x > w then w else if x < 0.0 - w then 0.0 - w else x * w) xs)",
              lambda rng, n: (0.5, rng.normal(size=n))),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_compiled_gradients_are_the_same_with_either_loops(name, monkeypatch):
    """The compiled gradient with the C loops and with numpy's, bit for bit, at
    sizes where the C select runs, on data with signed zeros and NaN."""
    import chad
    if not kernels.native():
        pytest.skip("the C extension is not built")
    text, make = PROGRAMS[name]
    rng = np.random.default_rng(len(name))
    g = chad.grad(text)
    for n in (SELECT_N, 3 * SELECT_N + 1):
        args = make(rng, n)
        xs = args[-1]
        xs[::7] = -0.0
        if name != "lse":
            xs[5] = math.nan
        native = g(*args)
        monkeypatch.setattr(kernels, "_native", None)
        fallback = g(*args)
        monkeypatch.undo()
        assert _bits(native[0]) == _bits(fallback[0])
        for a, b in zip(native[1], fallback[1]):
            a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
            assert a.shape == b.shape and a.tobytes() == b.tobytes()


SELECT_N = kernels.SELECT_MIN


@pytest.mark.parametrize("flag", [True, False])
def test_running_reads_one_bool_as_every_elements_mask(impl, flag):
    """A branch on a Bool the loop does not change masks every element alike."""
    x = np.array([1e16, 1.0, -1e16, 1.0])
    got = seqsum.running([x], [np.bool_(flag)], 4, 0.5)
    want = _loop([x], [[flag] * 4], 4, 0.5)
    assert _bits(got) == _bits(want)


@pytest.mark.parametrize("n", [3, 512, 1500])
def test_select_ints_is_np_where(impl, n):
    """Integer ifs (a clamp's `if i < 0 then 0 else i`): int64 arrays and
    Python ints within int64, bit for bit and dtype; anything else np.where's."""
    rng = np.random.default_rng(n)
    ints = rng.integers(-2 ** 63, 2 ** 63 - 1, size=n, dtype=np.int64, endpoint=True)
    ints[:3] = [-2 ** 63, 2 ** 63 - 1, 0]
    ops = [ints, np.arange(n, dtype=np.int64), 0, -1, 2 ** 63 - 1, -2 ** 63, ints[::-1].copy()]
    for c in (rng.random(n) < 0.5, np.zeros(n, dtype=bool), np.arange(n) < 1):
        for a in ops:
            for b in ops:
                got, want = kernels.select_ints(c, a, b), np.where(c, a, b)
                assert got.dtype == want.dtype and np.array_equal(got, want)
    c = rng.random(n) < 0.5
    for a, b in [(ints, 0.5), (ints.astype(object), 1), (ints, 2 ** 64), (ints[::2], 1)]:
        assert _outcome(kernels.select_ints, c, a, b) == _outcome(np.where, c, a, b)


def _outcome(f, *args):
    """f's result (dtype and values) or the type of what it raised."""
    try:
        r = f(*args)
    except Exception as e:  # (np.where's own error: the same one)
        return type(e)
    return r.dtype, r.tolist()


def test_integer_ifs_take_the_c_select(monkeypatch):
    """An `if` on Z (`_vwhere`: a neighbour's index, not a clamp, which is
    np.clip: tests/test_shifts.py) runs the C select at sizes where it is
    chosen, and the gradient is the same with numpy's."""
    import chad
    if not kernels.native():
        pytest.skip("the C extension is not built")
    calls = []
    module = kernels._native

    class Spy:  # the C module, its select counted
        def __getattr__(self, name):
            return getattr(module, name)

        @staticmethod
        def select(*a):
            calls.append(1)
            return module.select(*a)

    monkeypatch.setattr(kernels, "_native", Spy())
    text = ("def prev(i : Z, n : Z) : Z = if i > 0 then i - 1 else n - 1\n"
            "def en(a : Array R) : R = let n = length a in "
            "sum (build n (\\i -> a ! prev(i, n) * a ! i))")
    g = chad.grad(text)
    a = np.random.default_rng(5).normal(size=4000)
    native = g(a)
    assert calls
    monkeypatch.setattr(kernels, "_native", None)
    fallback = g(a)
    assert _bits(native[0]) == _bits(fallback[0])
    assert np.asarray(native[1][0]).tobytes() == np.asarray(fallback[1][0]).tobytes()


# ------------------------------------------------------------------ fold trees


def _tree_by_python(row, is_max):
    """The evaluator's fold of one row: reduce_balanced over (value, leaf)
    leaves with the combine `b if b > a else a` (min: <)."""
    from chad.arrays.evaluate import reduce_balanced

    def combine(l, r):
        return (r if (r[0] > l[0] if is_max else r[0] < l[0]) else l), 0

    return reduce_balanced([(float(x), j) for j, x in enumerate(row)], combine)[0]


@pytest.mark.parametrize("m", [1, 2, 3, 5, 8, 13, 64, 65, 200])
def test_the_fold_trees_of_rows_are_the_evaluators(impl, m):
    """vtree2 (the C loop for short rows, numpy's argmax or its levels of
    np.where otherwise) against the balanced reduction itself, bit for bit:
    ties of 0.0 and -0.0, NaNs (a comparison with one keeps the left side),
    infinities; rows along either axis, any layout, a broadcast row."""
    from chad.arrays.folds import vtree2
    rng = np.random.default_rng(m)
    pool = [0.0, -0.0, 1.0, -1.0, math.nan, -math.nan, math.inf, -math.inf, 2.0, 0.5]
    blocks = [rng.choice(pool, size=(7, m)), rng.normal(size=(9, m)),
              np.asfortranarray(rng.choice(pool, size=(4, m))),
              np.broadcast_to(rng.choice(pool, size=m), (3, m))]
    for block in blocks:
        for is_max in (True, False):
            for axis, x in ((1, block), (0, block.T)):
                vals, leaves = vtree2(x, m, axis, 2, is_max)
                assert vals.shape == leaves.shape == (len(block), 1)[::1 if axis == 1 else -1]
                for i, row in enumerate(block):
                    want = _tree_by_python(row, is_max)
                    got = (float(vals.reshape(-1)[i]), int(leaves.reshape(-1)[i]))
                    assert got[1] == want[1], (row, is_max)
                    assert struct.pack("<d", got[0]) == struct.pack("<d", want[0]), (row, is_max)


def test_the_tree_loop_rejects_what_it_cannot_read():
    if not kernels.native():
        pytest.skip("the C extension is not built")
    tree = kernels._native.tree
    x = np.zeros((3, 4))
    v, k = np.empty(3), np.empty(3, dtype=np.int64)
    for bad in [(np.zeros(4), True, v, k), (x.astype(np.float32), True, v, k),
                (x, True, np.empty(2), k), (x, True, v, np.empty(3)),
                (np.zeros((3, 0)), True, v, k), (x, True, v, np.empty(3, dtype=np.int32))]:
        with pytest.raises((ValueError, TypeError, BufferError)):
            tree(*bad)
    with pytest.raises(TypeError):
        tree(x, True, v)
    tree(x, False, v, k)
    assert k.tolist() == [0, 0, 0] and v.tolist() == [0.0, 0.0, 0.0]
