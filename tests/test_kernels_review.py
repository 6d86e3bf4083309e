"""Adversarial review of the native loops (chad/compile/_kernels.c,
chad/compile/kernels.py): `select` against np.where bit for bit on every
operand form the generated code may pass (and the ones it must leave to
np.where), `running` and `rows` against a plain Python loop of IEEE additions
(the evaluator's order), the C functions' argument checks, the GIL release, the
numpy fallbacks (kernels._native = None) against the same references, and the
compiled gradients of programs with `if`, max and min in map/build bodies
against the reference interpreter and between the two kinds of loops, on data
with NaN, the infinities and -0.0, at sizes where the C select runs."""

from __future__ import annotations

import math
import re
import struct
import threading

import numpy as np
import pytest

import chad
from chad.compile import kernels
from chad.compile import parallel_support
from tests.test_kernels import _loop  # the evaluator's order, one add after the other
from tests.test_vectorise import agree

N = kernels.SELECT_MIN  # the smallest size the C select runs at
SPECIAL = [0.0, -0.0, 1.0, -1.0, 1e308, -1e308, 5e-324, -5e-324, math.inf, -math.inf,
           math.nan, 1e16, -1e16, 2.0 ** 53, 0.1, -0.3]


# ------------------------------------------------------------------ helpers

@pytest.fixture
def impl(kernels_impl):
    """Both loops: the C extension's and numpy's (tests/conftest.py)."""
    return kernels_impl


def _needs_native():
    if not kernels.native():
        pytest.skip("the C extension is not built")


def _bits(x):
    if x is None:
        return None
    x = float(x)
    if math.isnan(x):
        return "nan"
    return struct.pack("<d", x)


def _same_as_where(got, want) -> bool:
    """got is np.where's result: type, shape, dtype and every bit."""
    if type(got) is not type(want):
        return False
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if got.dtype in (np.float16, np.float32, np.float64, np.complex64, np.complex128) \
            or got.dtype.kind in "iub":
        return got.tobytes() == want.tobytes()
    if got.dtype.kind in "fc":  # long doubles (padding bytes): values, NaN as NaN
        return np.array_equal(got, want, equal_nan=True)
    return all(x is y or x == y or (x != x and y != y)
               for x, y in zip(got.reshape(-1).tolist(), want.reshape(-1).tolist()))


def _check_select(c, a, b):
    try:
        want = np.where(c, a, b)
    except Exception as e:  # noqa: BLE001 - the same kind of error
        with pytest.raises(type(e)):
            kernels.select(c, a, b)
        return
    got = kernels.select(c, a, b)
    assert _same_as_where(got, want), (np.shape(c), np.shape(a), np.shape(b))
    # a new array, never one of the operands or a view of one
    for x in (c, a, b):
        if isinstance(x, np.ndarray):
            assert not np.shares_memory(got, x)
    assert isinstance(got, np.ndarray) and got.flags.writeable


def _values(rng, shape, special=True, big=False):
    x = rng.normal(size=shape) * rng.choice([1e-8, 1.0, 1e8], size=shape)
    x = x * rng.choice([1.0, 1e16], size=shape) if big else x
    flat = x.reshape(-1)
    if special and flat.size:
        k = flat.size // 4
        flat[rng.integers(0, flat.size, size=k)] = rng.choice(SPECIAL, size=k)
    return x


def _nan(payload: int, sign: int = 0) -> float:
    bits = (sign << 63) | (0x7FF << 52) | payload
    return np.array([bits], dtype=np.uint64).view(np.float64)[0]


# ------------------------------------------------------------------ select

def _forms(rng, n):
    """Every form a batched real takes in generated code, and some it does not."""
    base = _values(rng, 2 * n)
    ro = base[:n].copy()
    ro.flags.writeable = False
    return [base[:n].copy(), base[::2], base[::-1][:n], ro,
            np.broadcast_to(np.float64(-0.0), (n,)), base[:1].copy(), np.array(2.5),
            np.array(-0.0), -0.0, 1.5, math.nan, math.inf, np.float64(-0.0),
            np.float64(math.nan), _nan(0x123), _nan(0x1, 1)]


@pytest.mark.parametrize("n", [0, 1, 2, N - 1, N, N + 1, 3 * N + 7])
def test_select_is_np_where_on_every_operand_form(impl, n):
    rng = np.random.default_rng(n + 11)
    ops = _forms(rng, n)
    masks = [rng.random(n) < 0.5, np.ones(n, dtype=bool), np.zeros(n, dtype=bool),
             (rng.random(2 * n) < 0.5)[::2], (rng.random(n) < 0.5)[::-1],
             np.broadcast_to(np.True_, (n,))]
    for c in masks:
        for a in ops:
            for b in ops[::2]:
                _check_select(c, a, b)


def test_select_keeps_nan_payloads_and_signed_zeros(impl):
    n = 4 * N
    rng = np.random.default_rng(1)
    c = rng.random(n) < 0.5
    a = np.array([_nan(0x5), -0.0, _nan(0xABC, 1), 0.0] * N)
    b = np.array([-0.0, _nan(0x77), 0.0, _nan(0x1, 1)] * N)
    for x, y in [(a, b), (b, a), (a, _nan(0x42, 1)), (-0.0, b), (np.float64(_nan(3)), a),
                 (a[::-1], b[::-1]), (a.reshape(2, -1)[0], b.reshape(2, -1)[1])]:
        c2 = c[:np.shape(x)[0]] if np.ndim(x) else c[:np.shape(y)[0]]
        got = kernels.select(c2, x, y)
        want = np.where(c2, x, y)
        assert got.view(np.uint64).tolist() == want.view(np.uint64).tolist()


@pytest.mark.parametrize("shape", [(N, 1), (1, N), (2, N), (N, 3), (40, 30), (3, 4, 50),
                                   (2, 2, 2, 80)])
def test_select_of_blocks_and_broadcasts(impl, shape):
    """Regions of rank >= 2 (nested builds): C-ordered blocks, Fortran order,
    reversed axes, transposes, operands along one axis (n, 1) and (1, m), a
    mask broadcast, one-value blocks, 0-d arrays."""
    rng = np.random.default_rng(sum(shape))
    c = rng.random(shape) < 0.5
    a = _values(rng, shape)
    b = _values(rng, shape)
    ones = (1,) * len(shape)
    col = _values(rng, shape[:1] + (1,) * (len(shape) - 1))
    row = _values(rng, (1,) * (len(shape) - 1) + shape[-1:])
    last = _values(rng, shape[-1:])
    big = _values(rng, tuple(2 * s for s in shape))
    strided = big[tuple(slice(None, None, 2) for _ in shape)]
    rev = a[tuple(slice(None, None, -1) for _ in shape)]
    operands = [a, b, np.asfortranarray(a), rev, strided, col, row, last, -0.0, 1.5,
                np.float64(math.nan), np.array(0.25), np.full(ones, -0.0),
                np.broadcast_to(np.float64(2.0), shape)]
    masks = [c, np.asfortranarray(c), c[tuple(slice(None, None, -1) for _ in shape)],
             (rng.random(shape[:1] + (1,) * (len(shape) - 1)) < 0.5),
             (rng.random((1,) * (len(shape) - 1) + shape[-1:]) < 0.5),
             np.broadcast_to(rng.random(shape[-1:]) < 0.5, shape)]
    for m in masks:
        for x in operands:
            for y in operands[::3]:
                _check_select(m, x, y)
    if len(shape) == 2:
        t = np.ascontiguousarray(a.T).T  # a transposed block: not C-ordered
        _check_select(c, t, 1.0)
        _check_select(np.ascontiguousarray(c.T).T, a, t)


def test_select_leaves_other_operands_to_np_where(impl):
    """Other dtypes (big-endian, float32, ints, complex, object, longdouble),
    masks that are not bool arrays (ints, floats, a numpy bool, a Python bool,
    a list), sub-classes: np.where's own result, type and dtype included."""
    rng = np.random.default_rng(5)
    n = 2 * N
    c = rng.random(n) < 0.5
    a = _values(rng, n)
    others = [a.astype(">f8"), np.clip(a, -1e30, 1e30).astype(np.float32), np.float32(1.5), np.arange(n),
              np.int64(3), 3, True, 1j, np.longdouble(0.5), a.astype(object)[:n],
              np.array(2, dtype=np.int8), np.float16(2.0)]
    for x in others:
        _check_select(c, x, a)
        _check_select(c, a, x)
        _check_select(c, x, 0.5)
    for m in [c.astype(np.int8), c.astype(np.float64), np.True_, False, list(c[:n]),
              np.array(True), c.astype(np.uint8).view(bool)]:
        _check_select(m, a, -0.0)
        _check_select(m, 1.0, a)


def test_select_of_shapes_that_do_not_broadcast_raises_as_np_where(impl):
    c = np.ones(N + 3, dtype=bool)
    for a, b in [(np.ones(N + 2), 1.0), (np.ones(N + 3), np.ones(N + 4)),
                 (np.ones((2, N + 3)), np.ones((3, N + 3)))]:
        _check_select(c, a, b)


def test_select_fuzzed_against_np_where(impl):
    rng = np.random.default_rng(2024)

    def arr(shape, dtype):
        big = tuple(2 * s for s in shape)
        base = (rng.random(big) < 0.5) if dtype is bool else _values(rng, big)
        kind = int(rng.integers(0, 5))
        head = tuple(slice(None, s) for s in shape)
        if kind == 0:
            return np.ascontiguousarray(base[head])
        if kind == 1:
            return base[tuple(slice(None, None, 2) for _ in shape)][head]
        if kind == 2:
            return base[tuple(slice(None, None, -1) for _ in shape)][head]
        if kind == 3:
            return np.asfortranarray(base[head])
        x = np.ascontiguousarray(base[head])
        x.flags.writeable = False
        return x

    for _ in range(400):
        nd = int(rng.integers(1, 4))
        shape = tuple(int(rng.choice([1, 2, 3])) for _ in range(nd - 1)) + \
            (int(rng.choice([1, 7, N, N + 88])),)

        def op(dtype):
            r = rng.random()
            if dtype is not bool and r < 0.25:
                return [1.5, -0.0, math.nan, np.float64(-2.0), np.array(3.0)][int(rng.integers(5))]
            sub = tuple(s if rng.random() < 0.75 else 1 for s in shape)
            if rng.random() < 0.2 and len(sub) > 1:
                sub = sub[1:]
            return arr(sub, dtype)

        _check_select(op(bool), op(float), op(float))


def test_select_from_threads(impl):
    """The parallel runtime calls it from two threads at once."""
    rng = np.random.default_rng(9)
    n = 8 * N
    cases = []
    for _ in range(8):
        c = rng.random(n) < 0.5
        a, b = _values(rng, n), _values(rng, n)
        cases.append((c, a, b, np.where(c, a, b)))
    errors = []

    def work(k):
        try:
            for _ in range(30):
                c, a, b, want = cases[k]
                if not _same_as_where(kernels.select(c, a, b), want):
                    errors.append(k)
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


# ------------------------------------------------------------------ running and rows

@pytest.mark.parametrize("seed", range(30))
def test_running_of_views_and_blocks_is_the_sum_in_order(impl, seed):
    rng = np.random.default_rng(300 + seed)
    n = int(rng.integers(1, 25))
    parts, masks = [], []
    for _ in range(int(rng.integers(1, 5))):
        w = int(rng.integers(0, 4))
        block = _values(rng, (n, w), big=True)
        kind = int(rng.integers(0, 5))
        if kind == 1:
            block = np.asfortranarray(block)  # (n, w), not C-ordered
        elif kind == 2:
            block = block.reshape(-1)  # flat n * w
        elif kind == 3:
            block = np.ascontiguousarray(block[::-1])[::-1]  # negative stride
        elif kind == 4 and w == 1:
            block = np.broadcast_to(np.float64(rng.choice(SPECIAL)), (n,))
        parts.append(block)
        r = rng.random()
        masks.append(None if r < 0.35 else rng.random(n) < 0.5 if r < 0.6
                     else (rng.random((n, 1)) < 0.5) if r < 0.75
                     else list(rng.random(n) < 0.5) if r < 0.9
                     else (rng.random(2 * n) < 0.5)[::-2])
    start = None if seed % 3 == 0 else float(rng.choice(SPECIAL))
    assert _bits(kernels.running(parts, masks, n, start)) == _bits(_loop(parts, masks, n, start))


def test_running_start_forms(impl):
    """A cell's value as the generated code holds it: a Python float, a numpy
    float64 (an array's element), -0.0."""
    x = np.array([1e16, 1.0, -1e16, 1.0])
    for start in [0.5, np.float64(0.5), -0.0, np.float64(-0.0), math.inf]:
        want = _loop([x], [None], 4, float(start))
        assert _bits(kernels.running([x], [None], 4, start)) == _bits(want)
        assert _bits(kernels.running([x, x], [None, np.array([1, 0, 1, 0], dtype=bool)], 4,
                                     start)) == \
            _bits(_loop([x, x], [None, [True, False, True, False]], 4, float(start)))


def test_running_of_no_parts_is_none(impl):
    """No part: nothing was added, so None (Pass.flush keeps the cell), the
    same with the C loops and with numpy's."""
    assert kernels.running([], [], 3, 1.5) is None
    assert kernels.running([], [], 0, None) is None


@pytest.mark.parametrize("seed", range(15))
def test_rows_of_views_are_each_rows_sum_in_order(impl, seed):
    rng = np.random.default_rng(500 + seed)
    n = int(rng.integers(1, 12))
    w = int(rng.integers(0, 5))
    vals = _values(rng, (n, w), big=True)
    kind = seed % 3
    if kind == 1:
        vals = np.asfortranarray(vals)
    elif kind == 2:
        vals = np.ascontiguousarray(vals[::-1])[::-1]
    if w == 0 or seed % 4 == 0:
        start = _values(rng, (2 * n,))[::-2] if seed % 2 else float(rng.choice(SPECIAL))
    else:
        start = None
    got = kernels.rows(vals, n, start)
    assert type(got) is np.ndarray and got.shape == (n,) and got.dtype == np.float64
    for i in range(n):
        s = None if start is None else float(start if np.ndim(start) == 0 else start[i])
        for x in vals[i]:
            s = float(x) if s is None else s + float(x)
        assert _bits(got[i]) == _bits(s)
    assert not np.shares_memory(got, vals)


def test_rows_of_no_outer_element(impl):
    """An outer loop of no element: an empty array, whatever the start, with
    the C loops and with numpy's."""
    for start in (None, 1.0, np.zeros(0)):
        got = kernels.rows(np.zeros((0, 3)), 0, start)
        assert type(got) is np.ndarray and got.shape == (0,) and got.dtype == np.float64


def test_running_and_rows_from_threads(impl):
    rng = np.random.default_rng(4)
    data = [(_values(rng, (200, 3)), rng.random(200) < 0.5) for _ in range(6)]
    wants = [(_loop([v, v[:, 0]], [None, m], 200, 0.5),
              [_bits(s) for s in _rows_ref(v)]) for v, m in data]
    errors = []

    def work(k):
        v, m = data[k]
        for _ in range(20):
            if _bits(kernels.running([v, v[:, 0]], [None, m], 200, 0.5)) != _bits(wants[k][0]):
                errors.append(("running", k))
            if [_bits(s) for s in kernels.rows(v, 200, None)] != wants[k][1]:
                errors.append(("rows", k))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def _rows_ref(v):
    out = []
    for row in v:
        s = None
        for x in row:
            s = float(x) if s is None else s + float(x)
        out.append(s)
    return out


# ------------------------------------------------------------------ the C functions' checks

def test_the_c_functions_reject_bad_arguments_without_crashing():
    _needs_native()
    nat = kernels._native
    d = np.ones(4)
    m = np.ones(4, dtype=bool)
    bad_running = [
        ((d,), (None,), -1, None),
        ((d,), (None, None), 4, None),
        ([d], [None], 4, None),
        ((d.astype(">f8"),), (None,), 4, None),
        ((d.astype(np.int64),), (None,), 4, None),
        ((np.ones((2, 2)),), (None,), 2, None),
        ((np.ones(5),), (None,), 4, None),
        ((d,), (m.astype(np.int8),), 4, None),
        ((d,), (np.ones(3, dtype=bool),), 4, None),
        ((d,), (np.ones((4, 1), dtype=bool),), 4, None),
        ((d,), (None,), 4, "x"),
        ((d,), (None,), 4, 10 ** 400),
        (([1.0] * 4,), (None,), 4, None),
        ((d,), (None,), 0, None),
    ]
    for args in bad_running:
        with pytest.raises((TypeError, ValueError, BufferError, OverflowError)):
            nat.running(*args)
    out = np.empty(4)
    bad_rows = [
        (d, -1, None, out),
        (np.ones(5), 4, None, out),
        (d, 4, None, np.empty(3)),
        (d, 4, np.ones(3), out),
        (d, 4, np.ones(4, dtype=np.float32), out),
        (d, 4, None, np.empty(4, dtype=np.float32)),
        (d, 4, None, np.broadcast_to(np.float64(0.0), (4,))),
        (d.astype(">f8"), 4, None, out),
        (np.ones(0), 4, None, out),
        (d, 4, None, None),
    ]
    for args in bad_rows:
        with pytest.raises((TypeError, ValueError, BufferError)):
            nat.rows(*args)
    bad_select = [
        (m, d, d, np.empty(5)),
        (m[:3], d, d, out),
        (m, d[:3], d, out),
        (m, d, 1, out),
        (m, np.float64(1.0), d, out),
        (m, d, d, np.empty(8)[::2]),
        (m, d, d, np.empty(4, dtype=np.float32)),
        (m.astype(np.uint8), d, d, out),
        (m, d.astype(">f8"), d, out),
        (m, d, d, np.broadcast_to(np.float64(0.0), (4,))),
        (m.reshape(2, 2), d, d, out),
    ]
    for args in bad_select:
        with pytest.raises((TypeError, ValueError, BufferError)):
            nat.select(*args)
    with pytest.raises(TypeError):
        nat.running()
    # still alive, and right
    assert nat.running((d,), (None,), 4, None) == 4.0


def test_the_c_functions_accept_strided_buffers():
    _needs_native()
    nat = kernels._native
    base = np.arange(16.0)
    out = np.full(8, np.nan)[::-1]  # a writable, reversed output
    nat.rows(base[::-2], 8, base[:8][::-1], out)
    assert out.tolist() == [base[:8][::-1][i] + base[::-2][i] for i in range(8)]
    mv = memoryview(base[:4].copy())
    assert nat.running((mv,), (None,), 4, None) == 6.0


def test_the_loops_release_the_gil():
    """docs/compiler.md: both release the GIL (the parallel runtime's threads
    run them side by side): another thread runs Python code while they run."""
    _needs_native()
    nat = kernels._native
    big = np.broadcast_to(np.float64(1.0), (3 * 10 ** 8,))  # no memory, ~0.3 s of adds
    started = threading.Event()
    out = []

    def work():
        started.set()
        out.append(nat.running((big,), (None,), big.shape[0], None))

    t = threading.Thread(target=work)
    t.start()
    started.wait()
    count = 0
    while t.is_alive():
        count += 1
    t.join()
    assert out == [3e8]
    assert count > 1000


# ------------------------------------------------------------------ compiled gradients

def _data(rng, shape, frac=0.2):
    x = rng.normal(size=shape)
    flat = x.reshape(-1)
    k = int(flat.size * frac)
    flat[rng.integers(0, flat.size, size=k)] = rng.choice(
        [0.0, -0.0, math.nan, math.inf, -math.inf, 1e16, -1e16, 1.0, -1.0, 1e-310], size=k)
    return x


MAPS = {
    "masked_shared": "if x > 0.0 then x * w * w else w",
    "merged": "if x > w then w * w else x",
    "nested_if": "if x > 0.0 then (if x > 1.0 then w else x * w) else x * x",
    "let_cell": "let y = x * w in if y > 0.0 then y * y else 0.0 - y",
    "let_if": "let y = (if x > 0.0 then x * w else w) in y * y",
    "maxmin": "max(x * w, 0.0) + min(x, w) * max(w, x)",
    "three_way": "if x > 0.0 then x * w else (if x < 0.0 then w * w * x else w)",
    "nan_test": "if x == x then x * w else w",
}


def _compare(text, args, ctg=None, evm="array", interp=True):
    def run(**kw):
        g = chad.grad(text, evm=evm, **kw)
        return g(*args) if ctg is None else g(*args, ctg=ctg)

    if evm == "parallel":
        with parallel_support.grain(64):
            got = run()
    else:
        got = run()
    if interp:
        agree(got, run(backend="interp"), True)
    saved = kernels._native
    kernels._native = None
    try:
        fallback = run()
    finally:
        kernels._native = saved
    agree(got, fallback, True)


@pytest.mark.parametrize("name", sorted(MAPS))
@pytest.mark.parametrize("evm", ["array", "parallel", "map"])
def test_compiled_gradient_of_an_if_in_a_map(name, evm):
    text = f"def f(w : R, a : Array R) : R = sum (map (\\x -> {MAPS[name]}) a)"
    rng = np.random.default_rng(len(name))
    for w in (0.7, -0.0, math.nan):
        _compare(text, (w, _data(rng, N + 88)), evm=evm, interp=evm != "map" or w == 0.7)


@pytest.mark.parametrize("name", ["masked_shared", "merged", "maxmin"])
def test_compiled_gradient_of_an_array_result(name):
    body = re.sub(r"\bx\b", "a ! i", MAPS[name])
    text = f"def f(w : R, a : Array R) : Array R = build (length a) (\\i -> {body})"
    rng = np.random.default_rng(3)
    n = 2 * N
    _compare(text, (0.3, _data(rng, n)), ctg=_data(rng, n))


NESTED = {
    "inner_if": "sum (build (length m) (\\i -> sum (build (length (m ! i)) (\\j -> "
                "if m ! i ! j > 0.0 then m ! i ! j * w else w + m ! i ! j))))",
    "inner_if_v": "sum (build (length m) (\\i -> sum (build (length v) (\\j -> "
                  "if m ! i ! j > w then m ! i ! j * v ! j else w * v ! j))))",
    "row_if": "sum (build (length m) (\\i -> w + sum (map (\\x -> "
              "if x > 0.0 then x * w else w) (m ! i))))",
    "row_max": "sum (build (length m) (\\i -> let s = v ! 0 * w in "
               "sum (map (\\x -> max(x * s, w) + s) (m ! i)) + w * s))",
    "shared_rows": "sum (build (length m) (\\i -> w + sum (build (length v) "
                   "(\\j -> m ! i ! j * w + v ! j * w + w)) + w * w))",
}


@pytest.mark.parametrize("name", sorted(NESTED))
@pytest.mark.parametrize("evm", ["array", "parallel"])
def test_compiled_gradient_of_nested_loops(name, evm):
    text = "def f(w : R, m : Array (Array R), v : Array R) : R = " + NESTED[name]
    rng = np.random.default_rng(len(name) + 1)
    _compare(text, (0.3, _data(rng, (N + 8, 3)), _data(rng, 3)), evm=evm)


def test_compiled_gradient_of_nested_loops_with_an_array_result():
    text = ("def f(w : R, m : Array (Array R)) : Array R = build (length m) (\\i -> "
            "sum (build (length (m ! i)) (\\j -> if m ! i ! j > w then m ! i ! j * w "
            "else w * w)))")
    rng = np.random.default_rng(8)
    _compare(text, (0.1, _data(rng, (N, 2))), ctg=_data(rng, N))


def test_compiled_gradient_of_forked_halves_adding_to_a_shared_cell():
    """The parallel runtime's forked half defers its pass's sums to the join
    (Pass.flush, sum_into): the array runtime's and the evaluator's values."""
    text = ("def f(w : R, a : Array R, b : Array R, m : Array (Array R)) : R = "
            "sum (map (\\x -> if x > 0.0 then x * w else w) a) + "
            "sum (map (\\y -> if y > w then y * w * w else y + w) b) + "
            "sum (build (length m) (\\i -> w + sum (map (\\x -> x * w + w) (m ! i)))) + "
            "sum (map (\\x -> max(x, w) * w) a)")
    rng = np.random.default_rng(12)
    n = 2 * N
    for w in (0.3, -0.0, 1e16):
        args = (w, _data(rng, n), _data(rng, n), _data(rng, (n, 3)))
        before = parallel_support.stats.decided
        with parallel_support.grain(64):
            par = chad.grad(text, evm="parallel")(*args)
        arr = chad.grad(text, evm="array")(*args)
        agree(par, arr, True)
        agree(arr, chad.grad(text, evm="array", backend="interp")(*args), True)
        assert parallel_support.stats.decided > before  # it did fork


def test_vjp_called_twice_gives_the_same_cotangents():
    text = "def f(w : R, a : Array R) : Array R = map (\\x -> if x > 0.0 then x * w else w * w) a"
    rng = np.random.default_rng(21)
    a = _data(rng, 2 * N)
    ctg = _data(rng, 2 * N)
    _, back = chad.vjp(text)(0.5, a)
    first = back(ctg)
    second = back(ctg)
    agree(first, second, True)
    _, ref = chad.vjp(text, backend="interp")(0.5, a)
    agree(first, ref(ctg), True)


def test_primal_of_an_if_in_a_build():
    rng = np.random.default_rng(31)
    a = _data(rng, 3 * N)
    for body in ["if a ! i > 0.0 then a ! i else 0.0 - 0.0", "if a ! i > w then w else a ! i",
                 "if i > 300 then a ! i * w else w",
                 "if a ! i == a ! i then 0.0 - 0.0 else 0.0"]:
        text = f"def f(w : R, a : Array R) : Array R = build (length a) (\\i -> {body})"
        for w in (0.5, -0.0, math.nan):
            got = chad.primal(text)(w, a)
            agree(got, chad.primal(text, backend="interp")(w, a), True)
            saved = kernels._native
            kernels._native = None
            try:
                agree(got, chad.primal(text)(w, a), True)
            finally:
                kernels._native = saved


def test_chad_native_0_runs_numpys_loops_with_the_same_values():
    """docs/compiler.md: CHAD_NATIVE=0 chooses numpy's loops at run time, with
    the same values (a process of its own: the choice is made at import)."""
    import os
    import subprocess
    import sys
    code = (
        "import math, numpy as np, chad\n"
        "from chad.compile import kernels\n"
        "rng = np.random.default_rng(0)\n"
        "a = rng.normal(size=1500); a[::7] = -0.0; a[5] = math.nan; a[9] = math.inf\n"
        "text = 'def f(w : R, a : Array R) : R = sum (map (\\\\x -> "
        "if x > 0.0 then x * w * w else w) a)'\n"
        "v, (gw, ga) = chad.grad(text)(0.7, a)\n"
        "print(kernels.native(), float(v).hex(), float(gw).hex(), "
        "np.asarray(ga, dtype=np.float64).tobytes().hex()[:4000])\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    outs = {}
    for flag in ("0", "1"):
        env["CHAD_NATIVE"] = flag
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        outs[flag] = r.stdout.split()
    assert outs["0"][0] == "False"
    assert outs["1"][0] == str(kernels.native())
    assert outs["0"][1:] == outs["1"][1:]
