"""Review of 52f3d5d (no reference cycles in a gradient call), d8edcbb (a
batched reverse pass gets sum's cotangent as a Python float; the C select's
loop for two single values) and f39915b + 2b12117 (fold trees of short rows in
C; x ** 1 and x ** 0 batched without numpy's power).

Every test here checks a behaviour the changes promise and that the existing
tests did not cover; none of them fails on the reviewed code (no bug was found
that a user can hit, see the report of the review). They pin:

* the compiled gradients against the counting evaluator (the reference) and
  against the previous behaviour (the cotangent as a whole array, the numpy
  fold tree), bit for bit, on inputs the commits' own tests do not use;
* the C loops' new code (the select of two single values, `tree`) against
  numpy, bit for bit, and their refusal of malformed arguments;
* program order of errors and fork decisions in the rewritten fork recursions,
  and the absence of cycles on paths the commit's test does not run.
"""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

import chad
from chad.arrays.evaluate import reduce_balanced
from chad.arrays.folds import vtree2
from chad.compile import kernels, parallel_support
from chad.compile.vector_support import VecBack, vpowi
from chad.runtime.parallel_evm import PAction, ParallelEVM
from chad.runtime.registry import make_evm
from tests.conftest import in_threads
from tests.test_no_cycles import _cycles_made_by

EVMS = ["array", "map", "parallel"]


def _f64(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


NAN_PAYLOAD = _f64(0x7FF8000000001234)
NEG_NAN_PAYLOAD = _f64(0xFFF8000000004321)
SNAN = _f64(0x7FF0000000000001)
POOL = np.array([0.0, -0.0, 1.0, -1.0, 2.0, math.nan, -math.nan, NAN_PAYLOAD, NEG_NAN_PAYLOAD,
                 math.inf, -math.inf, 5e-324, -5e-324, 1e308])


def _bits(r):
    """A value or gradient as exact bits (NaN payloads and signs included)."""
    if isinstance(r, (tuple, list)):
        return tuple(_bits(x) for x in r)
    if isinstance(r, np.ndarray):
        return ("A", r.shape, np.ascontiguousarray(r, dtype=np.float64).tobytes())
    if isinstance(r, float):
        return ("F", struct.pack("<d", r))
    return (type(r).__name__, repr(r))


def _nan_bits(r):
    """As _bits, every NaN one NaN (the evaluator's NaN signs are not promised)."""
    if isinstance(r, (tuple, list)):
        return tuple(_nan_bits(x) for x in r)
    if isinstance(r, np.ndarray):
        a = np.array(r, dtype=np.float64)
        a[np.isnan(a)] = np.nan
        return ("A", a.shape, a.tobytes())
    if isinstance(r, float):
        return ("F", "nan" if r != r else struct.pack("<d", r))
    return (type(r).__name__, repr(r))


# ------------------------------------------------------------ sum's cotangent as a float

# rank-1 backpropagators with every kind of consumer of the cotangent: a
# captured real only (the pass computes one number), integer code, calls,
# pairs, lets, iter, closures, a case on a flag outside the loop, x ** 1
FILL_PROGRAMS = [
    "def f(w : R, xs : Array R) : R = sum (map (\\x -> w) xs)",
    "def f(w : R, xs : Array R) : R = sum (map (\\x -> x) xs)",
    "def f(w : R, xs : Array R) : R = sum (map (\\x -> if x > 0.0 then w else 2.0 * w) xs)",
    "def f(w : R, xs : Array R) : R = sum (map (\\x -> if w > 0.0 then x else w) xs)",
    "def f(w : R, xs : Array R) : R = sum (map (\\x -> max(w, x) + min(x, w)) xs)",
    "def f(w : R, xs : Array R) : R = sum (build (length xs) (\\i -> toreal i * w))",
    "def f(w : R, xs : Array R) : R = "
    "sum (build (length xs) (\\i -> if mod(i, 2) == 0 then xs ! i * w else w))",
    "def f(w : R, xs : Array R) : R = sum (map (\\x -> let p = (x, w) in fst p * snd p) xs)",
    "def f(w : R, xs : Array R) : R = sum (map (\\x -> iter 3 (\\s -> s * w + x) x) xs)",
    "def f(w : R, xs : Array R) : R = sum (map (\\x -> log w + x / w) xs)",
    "def f(w : R, xs : Array R) : R = sum (map (\\x -> (x * w) ** 1 + (x * w) ** 0) xs)",
    "def g(a : R, b : R) : R = if a > b then a * b else a - b\n"
    "def f(w : R, xs : Array R) : R = sum (map (\\x -> g(x, w) + g(w, 0.5)) xs)",
]


def _xs(n: int) -> np.ndarray:
    xs = np.random.default_rng(n).normal(size=n)
    xs[::7] = 0.0
    xs[1::11] = -0.0
    return xs


@pytest.mark.parametrize("evm", ["array", "parallel"])
@pytest.mark.parametrize("text", FILL_PROGRAMS)
def test_the_float_cotangent_gives_the_whole_arrays_bits(text, evm, forking, monkeypatch):
    """The pass given sum's cotangent as one real gives the bits of the pass
    given it as n reals (C select: n >= 512; the parallel runtime forking
    its passes), for w = 0.0 too (a Python float divided by zero would raise
    where numpy gives an infinity), and the evaluator's values."""
    xs = _xs(700)
    grad = chad.grad(text, evm=evm)
    ctgs = [1.0, -0.0, math.nan, math.inf, 5e-324]
    fast = [_bits(grad(w, xs, ctg=c)) for w in (0.7, 0.0) for c in ctgs]
    run = VecBack.run

    def whole(self, d, cells, base):
        return run(self, np.array(d, dtype=np.float64), cells, base)

    monkeypatch.setattr(VecBack, "run", whole)
    slow = [_bits(grad(w, xs, ctg=c)) for w in (0.7, 0.0) for c in ctgs]
    assert fast == slow
    ref = chad.grad(text, backend="interp")
    assert [_nan_bits(ref(w, xs, ctg=c)) for w in (0.7, 0.0) for c in ctgs] == \
        [_nan_bits(grad(w, xs, ctg=c)) for w in (0.7, 0.0) for c in ctgs]


@pytest.mark.parametrize("n", [1, 2, 600])
def test_a_users_broadcast_cotangent_is_the_full_arrays(n):
    """vjp with a user's cotangent that is a broadcast of one number (any
    dtype: float32, int, a zero-stride view made by hand) gives the gradient
    of the same cotangent as a full float64 array; n = 1 included."""
    text = "def f(w : R, xs : Array R) : Array R = map (\\x -> if x > 0.0 then x * w else 0.01 * x * w) xs"
    xs = _xs(max(n, 3))[:n]
    ctgs = [np.broadcast_to(np.float32(2.5), n), np.broadcast_to(np.array(3), n),
            np.broadcast_to(-0.0, n), np.broadcast_to(math.nan, n),
            np.lib.stride_tricks.as_strided(np.array([NAN_PAYLOAD]), shape=(n,), strides=(0,))]
    for evm in EVMS:
        for c in ctgs:
            _v, back = chad.vjp(text, evm=evm)(0.7, xs)
            _v2, back2 = chad.vjp(text, evm=evm)(0.7, xs)
            assert _bits(back(c)) == _bits(back2(np.array(c, dtype=np.float64)))


def test_a_pass_of_no_element_keeps_its_array(monkeypatch):
    """sum over an empty map: the pass is not given a float (n = 0), and the
    gradient is the evaluator's."""
    text = "def f(w : R, xs : Array R) : R = sum (map (\\x -> x * w) xs) + w"
    for evm in EVMS:
        got = chad.grad(text, evm=evm)(0.7, np.zeros(0))
        want = chad.grad(text, backend="interp")(0.7, np.zeros(0))
        assert _bits(got) == _bits(want)


# ------------------------------------------------------------ the C select of two values


def test_the_select_of_two_single_values_is_np_where_bit_for_bit():
    """select(mask, a, b) with a and b both one value (Python floats or
    zero-stride arrays): NaN payloads, signed zeros, a mask of bytes other
    than 0 and 1; and select_ints of two ints (the same loop on int64 bits)."""
    if not kernels.native():
        pytest.skip("the C extension is not built")
    rng = np.random.default_rng(0)
    n = 2000
    mask = rng.random(n) < 0.5
    raw = rng.integers(0, 4, size=n, dtype=np.uint8)  # bytes 0..3 read as bools
    for a, b in [(NAN_PAYLOAD, -0.0), (NEG_NAN_PAYLOAD, 0.0), (SNAN, math.inf), (-0.0, 0.0)]:
        for ao, bo in [(a, b), (np.broadcast_to(a, n), np.broadcast_to(b, n)),
                       (a, np.broadcast_to(b, n))]:
            out = kernels.select(mask, ao, bo)
            assert out.tobytes() == np.where(mask, a, b).astype(np.float64).tobytes()
            got = np.empty(n)
            kernels._native.select(raw.view(np.bool_), ao, bo, got)
            assert got.tobytes() == np.where(raw != 0, a, b).astype(np.float64).tobytes()
    ints = kernels.select_ints(mask, 2 ** 62 + 1, -3)
    assert ints.dtype == np.int64 and np.array_equal(ints, np.where(mask, 2 ** 62 + 1, -3))


# ------------------------------------------------------------ fold trees in C


def _tree_by_python(row, is_max):
    def combine(l, r):
        return (r if (r[0] > l[0] if is_max else r[0] < l[0]) else l), 0

    return reduce_balanced([(float(x), j) for j, x in enumerate(row)], combine)[0]


def _vtree2_both(monkeypatch, *args):
    native = vtree2(*args)
    with monkeypatch.context() as m:
        m.setattr(kernels, "_native", None)
        fallback = vtree2(*args)
    return native, fallback


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 31, 63, 64, 65])
def test_vtree2_is_the_numpy_tree_on_every_layout(m, monkeypatch):
    """vtree2 with the C loop and with numpy (kernels._native = None) give
    the same values (bits: NaN payloads, signed zeros, subnormals), leaves,
    shapes and dtypes, and the evaluator's tree, for rank 2 and 3 blocks
    with the fold's axis anywhere, Fortran order, reversed rows, a row
    broadcast over the outer loop and a block of no row."""
    if not kernels.native():
        pytest.skip("the C extension is not built")
    rng = np.random.default_rng(m)
    cases = [((6, m), 1, 2), ((m,), 0, 1), ((1, m), 1, 2), ((4, 3, m), 2, 3), ((4, m, 3), 1, 3),
             ((m, 4), 0, 2), ((0, m), 1, 2), ((5, 1), 1, 2)]
    for shape, axis, rank in cases:
        x = rng.choice(POOL, size=shape)
        for xx in (x, np.asfortranarray(x), np.flip(x, axis=-1)):
            for is_max in (True, False):
                (v1, k1), (v2, k2) = _vtree2_both(monkeypatch, xx, m, axis, rank, is_max)
                assert v1.shape == v2.shape and k1.shape == k2.shape
                assert v1.dtype == v2.dtype == np.float64 and k1.dtype == k2.dtype == np.int64
                assert np.ascontiguousarray(v1).tobytes() == np.ascontiguousarray(v2).tobytes()
                assert np.array_equal(k1, k2)
                if rank == 2 and axis == 1 and shape[1] == m:
                    for i, row in enumerate(np.asarray(xx)):
                        want = _tree_by_python(row, is_max)
                        assert int(k1[i, 0]) == want[1]
                        assert struct.pack("<d", float(v1[i, 0])) == struct.pack("<d", want[0])


def test_the_tree_loop_refuses_more_malformed_calls():
    """kernels._native.tree raises (never writes through a bad buffer) for
    read-only outputs, unsigned or big-endian leaves, big-endian or 3-D
    rows, bool or float16 rows, outputs of the wrong kind or size."""
    if not kernels.native():
        pytest.skip("the C extension is not built")
    tree = kernels._native.tree
    x = np.arange(12.0).reshape(3, 4)
    v, k = np.empty(3), np.empty(3, dtype=np.int64)
    ro, rok = np.empty(3), np.empty(3, dtype=np.int64)
    ro.flags.writeable = False
    rok.flags.writeable = False
    bad = [(x, True, ro, k), (x, True, v, rok), (x, True, v, np.empty(3, dtype=np.uint64)),
           (x, True, v, np.empty(3, dtype=">i8")), (x.astype(">f8"), True, v, k),
           (np.zeros((3, 4, 1)), True, v, k), (x > 3, True, v, k),
           (x.astype(np.float16), True, v, k), (x, True, np.empty(3, dtype=np.int64), k),
           (x, True, v, np.empty(3)), (x, True, np.empty(4), k), (x, True, np.empty(6)[::2], k),
           (None, True, v, k), (x, np.array([True, False]), v, k)]
    v[:], k[:] = -7.0, -7
    for args in bad:
        with pytest.raises((ValueError, TypeError, BufferError)):
            tree(*args)
        assert v.tolist() == [-7.0] * 3 and k.tolist() == [-7] * 3, args  # nothing written
    x2 = memoryview(bytearray(96)).cast("d", (3, 4))  # any 2-D buffer of doubles
    tree(x2, False, v, k)
    assert v.tolist() == [0.0] * 3 and k.tolist() == [0] * 3


def test_the_tree_loop_gives_the_same_rows_on_many_threads():
    """The loop releases the GIL: four threads folding the same blocks get
    the bits a single call gets."""
    if not kernels.native():
        pytest.skip("the C extension is not built")
    rng = np.random.default_rng(5)
    blocks = [rng.choice(POOL, size=(3000, m)) for m in (1, 2, 5, 17, 64)]
    want = [kernels.tree(b, True) for b in blocks]
    bad: list = []

    def work():
        for _ in range(5):
            for b, (v, k) in zip(blocks, want):
                gv, gk = kernels.tree(b, True)
                if gv.tobytes() != v.tobytes() or not np.array_equal(gk, k):
                    bad.append(1)

    in_threads(work)
    assert not bad


KMEANS_ARRAY = (
    "def sqdist(ps : Array R, i : Z, zs : Array R, c : Z) : R =\n"
    "  (ps ! (2 * i) - zs ! (2 * c)) ** 2 + (ps ! (2 * i + 1) - zs ! (2 * c + 1)) ** 2\n"
    "def kmeans(ps : Array R, zs : Array R) : R =\n"
    "  let n = div(length ps, 2) in\n"
    "  let k = div(length zs, 2) in\n"
    "  sum (build n (\\i -> fold (\\p -> OP(fst p, snd p)) (build k (\\c -> sqdist(ps, i, zs, c)))))\n")


@pytest.mark.parametrize("op", ["min", "max"])
@pytest.mark.parametrize("k", [1, 2, 5, 64, 65])
def test_kmeans_with_ties_and_nans_is_the_evaluators(op, k):
    """kmeans' nearest (farthest) centre with two equal centres (a tie the
    tree breaks to the left) and NaN coordinates, on every runtime, against
    the evaluator (NaN signs aside), with special cotangents."""
    rng = np.random.default_rng(k)
    ps = rng.normal(size=2 * (300 if k < 64 else 30))  # (the evaluator: n * k steps)
    ps[5::37] = np.nan
    zs = rng.normal(size=2 * k)
    zs[2 * (k // 2):2 * (k // 2) + 2] = zs[0:2]
    text = KMEANS_ARRAY.replace("OP", op)
    for c in (1.0, -0.0, math.inf):
        want = _nan_bits(chad.grad(text, backend="interp")(ps, zs, ctg=c))
        for evm in EVMS:
            assert _nan_bits(chad.grad(text, evm=evm)(ps, zs, ctg=c)) == want, (evm, c)


# ------------------------------------------------------------ x ** 1 and x ** 0


@pytest.mark.parametrize("k", [0, 1])
def test_powers_one_and_zero_are_the_evaluators_bits(k):
    """x ** 1 keeps x's bits (a signaling NaN's too, as math.pow does), x ** 0
    is 1.0 for everything, in maps over the values and over x * w: the
    values against the evaluator bit for bit, the gradients NaN aside."""
    xs = np.array(list(POOL) + [SNAN, -SNAN] * 2 + [3.5, -0.25] * 300)
    for text in (f"def f(w : R, xs : Array R) : Array R = map (\\x -> x ** {k}) xs",
                 f"def f(w : R, xs : Array R) : Array R = map (\\x -> (x * w) ** {k} + w ** {k}) xs"):
        ctg = np.linspace(-1.0, 1.0, len(xs))
        want = chad.grad(text, backend="interp")(0.5, xs, ctg=ctg)
        for evm in EVMS:
            got = chad.grad(text, evm=evm)(0.5, xs, ctg=ctg)
            assert _bits(got[0]) == _bits(want[0]), evm  # the values: every bit
            # the gradients: a sum of NaNs' sign and payload is not promised
            assert _nan_bits(got[1]) == _nan_bits(want[1]), evm


def test_vpowi_of_one_value_and_of_a_broadcast():
    """vpowi with exponents 1 and 0 of a 0-d value and of a read-only
    broadcast: new arrays of the evaluator's values, never views."""
    for x in (np.array(-0.0), np.broadcast_to(np.array([NAN_PAYLOAD]), (5,)),
              np.array([[1.5], [-2.0]])):
        for k in (0, 1):
            got = np.asarray(vpowi(x, k))
            assert got.shape == np.shape(x) and not np.shares_memory(got, x)
            want = [chad.primitives._powi((float(v), k)) for v in np.ravel(x)]
            assert got.reshape(-1).tobytes() == np.array(want).tobytes()


# ------------------------------------------------------------ the fork recursions


class _Boom(Exception):
    pass


def _parts(fail=(), n=8):
    def part(i):
        def f(*_args):
            if i in fail:
                raise _Boom(i)
            return i
        return f
    return [part(i) for i in range(n)]


@pytest.mark.parametrize("fail", [(), (0,), (7,), (3, 5), (6, 2), (1, 4, 6)])
def test_the_compiled_forks_raise_the_first_error_in_program_order(fail):
    """pvals and pseq forking at every split (three levels): the results in
    order, or the error of the first failing part in program order,
    whichever half (pool or inline) it ran in; empty lists."""
    with parallel_support.grain(1):
        parallel_support.stats.reset()
        if fail:
            with pytest.raises(_Boom) as e1:
                parallel_support.pvals(_parts(fail), [10] * 8)
            with pytest.raises(_Boom) as e2:
                parallel_support.pseq([None], _parts(fail), [10] * 8)
            assert e1.value.args[0] == e2.value.args[0] == min(fail)
        else:
            assert parallel_support.pvals(_parts(), [10] * 8) == list(range(8))
            assert parallel_support.pseq([None], _parts(), [10] * 8) == 7
            assert parallel_support.stats.decided == 2 * 7  # a fork at every split
        assert parallel_support.pvals([], []) == []
        assert parallel_support.pseq([None], [], []) is None


def test_the_parallel_evms_sequence_keeps_order_costs_and_errors():
    """ParallelEVM.sequence (now a _Sequence object) forking at every split:
    the last result and the array EVM's cost; the first error in program
    order from nested sequences; nothing for an empty list."""
    evm = ParallelEVM(grain=1, max_workers=2)
    array = make_evm("array")

    def acts(machine, n, fail=()):
        out = []
        for i in range(n):
            def fn(cells, i=i):
                if i in fail:
                    raise _Boom(i)
                return i, 3
            out.append(PAction(fn, 5) if machine is evm else fn)
        return out

    for n in (1, 2, 5, 8):
        r = evm.run(evm.sequence(acts(evm, n)), [0.0])
        a = array.run(array.sequence(acts(array, n)), [0.0])
        assert (r[0], r[2]) == (a[0], a[2])
    nested = evm.sequence([evm.sequence(acts(evm, 4, fail=(1, 3)) if i >= 2 else acts(evm, 4))
                           for i in range(4)])
    with pytest.raises(_Boom) as e:
        evm.run(nested, [])
    assert e.value.args[0] == 1
    assert evm.run(evm.sequence([]), [])[0] is None


# ------------------------------------------------------------ no cycles on other paths


def test_a_jvp_and_repeated_backpropagators_leave_no_cycles(forking):
    """Forward mode (compiled and interpreted) and a vjp's backpropagator
    called three times, on every runtime and backend with a fold tree (the
    interpreter's unTree), leave no reference cycle."""
    text = ("def f(xs : Array R, zs : Array R) : Array R = build (length xs) (\\i -> "
            "fold (\\p -> max(fst p, snd p)) (build (length zs) (\\c -> xs ! i * zs ! c)))")
    xs, zs = np.array([1.0, -2.0, 0.5]), np.array([0.3, -1.0, 2.0, 0.0])
    func = chad.from_text(text)
    for backend in ("compiled", "interp"):
        def jvp():
            chad.jvp(func, (xs, zs), (xs, zs), backend=backend)
        jvp()
        assert _cycles_made_by(jvp) == 0
    for evm in ("array", "map", "parallel", "spec"):
        for backend in ("compiled", "interp"):
            if evm == "spec" and backend == "compiled":
                continue
            vjp = chad.vjp(text, evm=evm, backend=backend)

            def call():
                _v, back = vjp(xs, zs)
                for c in ([1.0, 2.0, 3.0], [-1.0, 0.0, 5.0], [1.0, 2.0, 3.0]):
                    back(np.array(c))
            call()
            assert _cycles_made_by(call) == 0, (evm, backend)


@pytest.mark.parametrize("family", ["iter_chain", "scan_chain", "nested_maps", "build_index",
                                    "nested_lambdas"])
def test_the_cost_families_leave_no_cycles(family, forking):
    """The loops' and functions' families (iter, scan, nested maps and
    lambdas) on the runtimes whose code the cycles were in (the parallel
    ones, forking at grain 1, on both backends; the spec LACM's
    `EVMBase.sequence`); the array and map runtimes run every example in
    tests/test_no_cycles.py (kept short: make test's time)."""
    from chad.costmodel.families import FAMILIES
    inst = FAMILIES[family].make(6)
    src = inst.source()
    for evm, backend in (("parallel", "compiled"), ("parallel", "interp"), ("spec", "interp")):
        grad = chad.grad(src, evm=evm, backend=backend)
        grad(*inst.args, ctg=inst.ctg)
        assert _cycles_made_by(lambda: grad(*inst.args, ctg=inst.ctg)) == 0, (evm, backend)


def test_step_counts_are_the_same_on_every_runtime():
    """The rewritten sequence (parallel EVM, LACM's balanced then-tree) and
    unTree count the array EVM's steps for folds by max and min."""
    programs = [
        ("def f(xs : Array R) : R = fold (\\p -> max(fst p, snd p)) xs",
         [[3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]]),
        ("def f(xs : Array R) : R = fold (\\p -> min(fst p, snd p)) (map (\\x -> x * x) xs)",
         [[3.0, -1.0, 4.0, math.nan, 5.0, -0.0, 0.0]]),
        (KMEANS_ARRAY.replace("OP", "min"), [[0.1, 0.2, 1.1, 0.9, -0.8, 0.4], [0.0, 0.1, 1.0, 1.1]]),
    ]
    for text, args in programs:
        counts = {evm: (r.primal_steps, r.gradient_steps)
                  for evm in ("array", "map", "parallel", "spec")
                  for r in [chad.cost(text, args, evm=evm)]}
        assert len(set(counts.values())) == 1, counts


def test_the_parallel_evms_sequence_takes_a_generator():
    """sequence reads its actions twice (their functions and their weights):
    a generator of actions gives the same chain as a list (it was read empty
    the second time)."""
    machine = ParallelEVM(grain=1, max_workers=2)
    want = machine.run(machine.sequence([machine.add(0, float(i)) for i in range(6)]), [0.0])
    got = machine.run(machine.sequence(machine.add(0, float(i)) for i in range(6)), [0.0])
    assert got[:2] == want[:2] and got[1] == [15.0]
