"""Review of fb230fa..576bfc4: the C loops of dense sums (kernels.colsum,
scatter, chain), the lazy bag leaf BChain (chad/arrays/bag.py, made by
nested_support.shared_adds), last_first's whole-row copies, shapes.broadcast
(an array already of the shape is itself), the fold trees along the last axis
(folds.vtree2 / vuntree2), and the matrix cotangent given up without a copy
(nested_support.final2 records it in NO_NEG_ZERO, cotangents._rows_at_once).

Found (fixed since; the test kept):

* `kernels.colsum` (the Python wrapper) on a block that is not 2-D raised
  IndexError from `block.shape[1]` (or AttributeError for a non-array) before
  the C loop's own check, which raises TypeError ("expected a 2-D array of
  doubles"): the wrapper's errors were not the kernel's TypeError/ValueError.
* Noted without a test (a test would crash, not fail): `kernels.chain` checked
  every index before its adds and then added without a test while the GIL is
  released, so another thread changing an index array meanwhile could make it
  write outside `out`. Each index is now tested again as it is used.

Held (the strongest checks that passed): the three C loops against plain
IEEE loops in the evaluator's order on cancelling values and every layout
(reversed, strided, Fortran, stride-0 rows, unaligned), their refusal of
big-endian / non-float64 / non-int64 / read-only / wrong-rank operands with
TypeError or ValueError (out unchanged), chain's all-or-nothing index check;
BChain's len / size / collect / scatter against the BPlus chain of BArrays
it stands for, with and without the C loop; last_first against the plain
reversed copy; compiled gradients of programs making BChains (scattered
directly, and collected where a map's reverse pass scatters the bag) bit for
bit against the interpreter on the three runtimes, with forks at grain 1,
errors alike for indices out of range; gmm and kmeans with the math module's
exp/log; the given-up matrix: its rows the interpreter's, never shared with
another output or a later call, vjp's backpropagator called again after the
caller scribbled over the rows; broadcast's identity only at the same shape
and dtype; vuntree2's one-leaf-per-row path against np.put_along_axis; the
compiled gradient from several Python threads at once.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pytest

import chad
from chad.arrays import folds
from chad.arrays.bag import (
    BArray, BChain, BEMPTY, BOne, BPlus, collect, last_first, scatter, scatter_reals,
    to_dense, zeros,
)
from chad.arrays.nested_support import _indices, shared_adds
from chad.compile import kernels, parallel_support
from chad.compile.known import NO_NEG_ZERO
from chad.compile.shapes import broadcast
from chad.compile.support import padd
from chad.linear import LR
from tests.conftest import in_threads
from tests.test_nested_review import _math_elementwise
from tests.test_nested_review2 import _same as _same_as_interp
from tests.test_scatter_kernels import _chain_loop, _column_loop, _same
from tests.test_vectorise import RUNTIMES, agree

ROOT = Path(__file__).resolve().parent.parent
CANCEL = np.array([1e16, -1e16, 1.0, -0.0, 0.0, 3.0, 0.1, 1e-3, -1.0, 2.0 ** 53])
SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 1e308, -1e308, 5e-324, math.inf, -math.inf,
                    math.nan, 2.0 ** 53, 1e16, -1e16, 0.1])


def _native_only():
    if not kernels.native():
        pytest.skip("the C extension is not built")


def _values(rng, shape):
    pick = rng.integers(0, 3, size=shape)
    wide = rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 17, size=shape)
    return np.where(pick == 0, rng.choice(SPECIAL, size=shape), wide)


# ----------------------------------------------------------------- the C loops: failing


def test_colsum_wrapper_raises_the_kernels_error_on_a_block_not_2d():
    """kernels.colsum reads `block.shape[1]` to size its output before the C
    loop checks the block: a 1-D or 0-d block raises IndexError (a list
    AttributeError), where the C loop itself raises TypeError ("expected a
    2-D array of doubles"). The kernels' contract: an operand they cannot
    read raises TypeError or ValueError."""
    _native_only()
    out = np.empty(3)
    with pytest.raises(TypeError):
        kernels._native.colsum(None, np.zeros(3), None, None, out)  # the C loop: TypeError
    for bad in (np.zeros(3), np.float64(1.0), np.zeros(()), [[1.0, 2.0]]):
        with pytest.raises((TypeError, ValueError)):
            kernels.colsum(bad)


# ----------------------------------------------------------------- the C loops: held


def _layouts(rng, n, m):
    base = _values(rng, (n, m))
    yield base
    yield base[::-1, ::-1]
    wide = np.empty((n, 3 * m))
    wide[:, ::3] = base
    yield wide[:, ::3]
    yield np.asfortranarray(base)
    if n:
        yield np.broadcast_to(base[0], (n, m))
    yield np.broadcast_to(base[:, :1], (n, m)) if m else base
    raw = np.zeros(n * m * 8 + 1, dtype=np.uint8)  # unaligned doubles
    un = raw[1:].view(np.float64).reshape(n, m)
    un[...] = base
    yield un


@pytest.mark.parametrize("shape", [(1, 1), (4, 3), (9, 128), (2, 129), (0, 4), (3, 0)])
def test_held_colsum_is_the_loop_on_every_layout(shape):
    _native_only()
    rng = np.random.default_rng(sum(shape))
    for block in _layouts(rng, *shape):
        with np.errstate(all="ignore"):
            assert _same(kernels.colsum(block), _column_loop(block))
            start = _values(rng, (shape[1],))
            start[:1] = -0.0  # kept: -0.0 + -0.0 is -0.0
            assert _same(kernels.colsum(block, start), _column_loop(block, start))
            assert _same(kernels.colsum(block, start[::-1]), _column_loop(block, start[::-1]))


def test_held_the_c_loops_refuse_what_they_cannot_read():
    _native_only()
    b = np.arange(6.0).reshape(2, 3)
    for bad in (b.astype(">f8"), b.astype(np.float32), b.astype(np.int64), b.astype(complex),
                b.astype(object), b.reshape(2, 3, 1)):
        with pytest.raises(TypeError):
            kernels.colsum(bad)
    for start in (np.zeros(3, ">f8"), np.zeros(3, np.int64), np.zeros((1, 3)), [0.0] * 3):
        with pytest.raises(TypeError):
            kernels.colsum(b, start)
    with pytest.raises(ValueError):
        kernels.colsum(b, np.zeros(2))
    out = np.arange(5.0)
    keep = out.copy()
    one = np.ones(2)
    for idx in (np.array([1, 2], np.int32), np.array([1, 2], np.uint64), np.array([1, 2], ">i8"),
                np.array([1.0, 2.0])):
        with pytest.raises(TypeError):
            kernels.scatter(out, idx, one)
    with pytest.raises(TypeError):
        kernels.scatter(out, np.array([1, 2]), np.ones(2, ">f8"))
    with pytest.raises(ValueError):
        kernels.scatter(out, np.array([1, 2]), np.ones(3))
    with pytest.raises((TypeError, ValueError)):
        kernels.scatter(np.broadcast_to(0.0, (5,)), np.array([1]), np.ones(1))
    v, i = (np.ones((2, 2)),), (np.zeros((2, 2), np.int64),)
    for vals, idx in (((v[0].astype(">f8"),), i), ((v[0].astype(np.float32),), i),
                      (v, (i[0].astype(np.int32),)), (v, (i[0].astype(">i8"),)),
                      (v, (i[0].astype(np.uint64),)), ((np.ones(2),), (np.zeros(2, np.int64),))):
        with pytest.raises(TypeError):
            kernels.chain(out, vals, idx)
    with pytest.raises(ValueError):
        kernels.chain(out, (np.ones((2, 2)), np.ones((2, 3))), (i[0], np.zeros((2, 3), np.int64)))
    with pytest.raises(ValueError):
        kernels.chain(out, v, ())
    with pytest.raises(TypeError):
        kernels.chain(out, list(v), list(i))
    with pytest.raises((TypeError, ValueError)):
        kernels.chain(np.broadcast_to(0.0, (5,)), v, i)
    assert _same(out, keep)


@pytest.mark.parametrize("seed", range(6))
def test_held_chain_is_the_loop_and_all_or_nothing(seed):
    _native_only()
    rng = np.random.default_rng(100 + seed)
    n, m, p, size = int(rng.integers(1, 7)), int(rng.integers(1, 5)), int(rng.integers(1, 4)), 6
    parts = []
    for k in range(p):
        x = _values(rng, (n, m))
        ix = rng.integers(0, size, (n, m))
        kind = (seed + k) % 4
        if kind == 1:
            x, ix = np.asfortranarray(x), np.asfortranarray(ix)
        elif kind == 2:
            ix = np.broadcast_to(ix[0], (n, m))  # the same row for every element
            x = np.broadcast_to(x[:, :1], (n, m))
        elif kind == 3:
            x, ix = x[::-1], ix[::-1]
        parts.append((x, ix))
    start = _values(rng, (size,))
    out = start.copy()
    with np.errstate(all="ignore"):
        assert kernels.chain(out, tuple(x for x, _ in parts), tuple(i for _, i in parts)) is True
        assert _same(out, _chain_loop(start, parts, n, m))
        wide = np.zeros(2 * size)  # a strided out
        wide[::2] = start
        assert kernels.chain(wide[::2], tuple(x for x, _ in parts),
                             tuple(i for _, i in parts)) is True
        assert _same(wide[::2], _chain_loop(start, parts, n, m))
    # an index out of range anywhere (negative, past the end, in the last row
    # the loop would reach last): False and out unchanged
    for bad in (-1, size, 2 ** 62, -(2 ** 63)):
        for where in ((0, 0), (n - 1, m - 1)):
            broken = [(x, np.array(ix)) for x, ix in parts]
            broken[-1][1][where] = bad
            out = start.copy()
            assert kernels.chain(out, tuple(x for x, _ in broken),
                                 tuple(i for _, i in broken)) is False
            assert _same(out, start)
    row = np.broadcast_to(np.array([0, size]), (n, 2))  # a stride-0 part's one row
    out = start.copy()
    assert kernels.chain(out, (np.ones((n, 2)),), (row,)) is False
    assert _same(out, start)


def test_held_chain_and_scatter_on_empty_shapes():
    _native_only()
    out = np.array([1.0, -0.0])
    assert kernels.chain(out, (), ()) is True
    assert kernels.chain(out, (np.zeros((0, 3)),), (np.zeros((0, 3), np.int64),)) is True
    assert kernels.chain(out, (np.zeros((3, 0)),), (np.zeros((3, 0), np.int64),)) is True
    assert kernels.scatter(out, np.zeros(0, np.int64), np.zeros(0)) is True
    assert _same(out, np.array([1.0, -0.0]))
    empty = np.zeros(0)
    assert kernels.chain(empty, (np.zeros((2, 0)),), (np.zeros((2, 0), np.int64),)) is True
    assert kernels.chain(empty, (np.ones((1, 1)),), (np.zeros((1, 1), np.int64),)) is False
    assert kernels.scatter(empty, np.array([0]), np.ones(1)) is False


# ----------------------------------------------------------------- BChain and last_first


def _chain_bag_parts(rng, n, m, p, size):
    items = []
    for k in range(p):
        x = rng.choice(CANCEL, (n, m))
        kind = k % 3
        if kind == 0:
            idx = rng.integers(0, size, (n, m))
        elif kind == 1:
            idx = rng.integers(0, size, m)  # one row of indices for every element
        else:
            idx = None if m <= size else rng.integers(0, size, m)
        items.append(("rows", x, idx))
    return items


def _old_chain(items, n, base=BEMPTY):
    """The evaluator's chain: element i's adds in order, i = 0 .. n-1, each
    `cell = plusv(b, cell)`."""
    cell = base
    for i in range(n):
        for _kind, x, idx in items:
            ix = None if idx is None else (idx[i] if np.ndim(idx) == 2 else idx)
            cell = padd(BArray(np.array(x[i]), None if ix is None else np.array(ix)), cell)
    return cell


@pytest.mark.parametrize("shape", [(1, 1, 1), (4, 3, 2), (7, 2, 3), (3, 0, 2), (5, 4, 1)])
def test_held_bchain_is_the_chain_it_stands_for(shape, monkeypatch):
    n, m, p = shape
    size = 5
    rng = np.random.default_rng(sum(shape) * 7 + 1)
    items = _chain_bag_parts(rng, n, m, p, size)
    base = BPlus(BOne(1, -0.0), BArray(rng.choice(CANCEL, size)))
    cells = [base]
    shared_adds(cells, 0, items, n)
    bag = cells[0]
    chain = bag.left
    assert type(chain) is BChain
    want = _old_chain(items, n, base)
    assert len(chain) == n * p * m
    # one leaf of n * p * m pairs, as the BArray of them made before (not the
    # n * p BArrays of the chain: its potential and collect's work are one leaf's)
    assert chain.size() == 1 + len(chain.vals) == 1 + len(chain.idx) == 1 + n * p * m
    assert bag.size() == 1 + chain.size() + base.size()
    got_pairs, got_work = collect(bag, LR())
    want_pairs, _ = collect(want, LR())
    assert got_work == 1 + 1 + n * p * m + collect(base, LR())[1]
    assert _same(got_pairs.idx, want_pairs.idx) and _same(got_pairs.vals, want_pairs.vals)
    want_dense = scatter(zeros(size, LR())[0], want_pairs, LR())[0]
    with np.errstate(all="ignore"):
        for native in (True, False):
            if not native:
                monkeypatch.setattr(kernels, "_native", None)
            cells = [base]
            shared_adds(cells, 0, items, n)  # a fresh bag: nothing made yet
            assert _same(scatter_reals(cells[0], size), want_dense)
            assert _same(to_dense(cells[0], size, LR()), want_dense)


def test_held_bchain_out_of_range_scatters_nothing_and_collects_alike():
    n, m = 3, 2
    idx = np.array([[0, 1], [1, 9], [0, 0]])
    items = [("rows", np.ones((n, m)), idx)]
    cells = [BEMPTY]
    shared_adds(cells, 0, items, n)
    assert scatter_reals(cells[0], 4) is None
    pairs, _ = collect(cells[0], LR())
    assert pairs.idx.tolist() == [0, 0, 1, 9, 0, 1]


def _ref_last_first(parts, n, m, dtype):
    out = np.empty((n, len(parts), m), dtype=dtype)
    back = out[::-1, ::-1]
    for p, x in enumerate(parts):
        back[:, p] = x
    return out.reshape(-1)


def test_held_last_first_is_the_reversed_copy_on_every_layout():
    rng = np.random.default_rng(7)
    for dtype in (np.float64, np.int64):
        for n, m in ((1, 1), (3, 4), (5, 1), (1, 7), (0, 3), (3, 0)):
            base = (rng.standard_normal((n, m)) * 1000).astype(dtype)
            layouts = [base, base[::-1], np.asfortranarray(base), base.astype(">" + base.dtype.str[1:])]
            big = np.zeros((2 * n, m + 3), dtype)
            big[::2, 1:m + 1] = base
            layouts.append(big[::2, 1:m + 1])
            if n:
                layouts.append(np.broadcast_to(base[0], (n, m)))
            raw = np.zeros(n * m * 8 + 1, np.uint8)
            un = raw[1:].view(dtype).reshape(n, m)
            un[...] = base
            layouts.append(un)
            for a in layouts:
                for b in layouts[::2]:
                    got = last_first([a, b], n, m, dtype)
                    assert got.dtype == dtype and got.flags.c_contiguous
                    assert got.tobytes() == _ref_last_first([a, b], n, m, dtype).tobytes()
                    assert not np.shares_memory(got, a)


def test_held_indices_of_an_add():
    assert _indices(None, 2, 3).tolist() == [[0, 1, 2]] * 2
    assert _indices([2, 0], 3, 2).tolist() == [[2, 0]] * 3
    ix = np.array([[1, 2], [3, 4]], dtype=np.int32)
    assert _indices(ix, 2, 2).dtype == np.int64


# ----------------------------------------------------------------- programs against the interpreter





class _Chains:
    def __init__(self, monkeypatch):
        self.made = 0
        self.scattered = 0
        init, into = BChain.__init__, BChain.scatter_into

        def counted_init(this, *a):
            self.made += 1
            init(this, *a)

        def counted_into(this, out):
            self.scattered += 1
            return into(this, out)

        monkeypatch.setattr(BChain, "__init__", counted_init)
        monkeypatch.setattr(BChain, "scatter_into", counted_into)


H = ("def f(c : R, a : Array R, w : Array R, m : Array (Array R)) : R = "
     "sum (build (length m) (\\i -> let r = m ! i in sum (build (length r) (\\j -> ")
CHAIN_PROGRAMS = {
    "own_rows": H + "r ! j * w ! (i + j)))))",
    "inner_only_values": H + "a ! j * w ! (i + j)))))",
    "constant_values": H + "w ! (i + j) * c))))",
    "two_adds": H + "w ! (2 * j) * c + r ! j * w ! (i + j)))))",
    "square": H + "w ! (i + j) * w ! (i + j)))))",
    "three_arrays": H + "w ! (i + j) * a ! (2 * j) * r ! j + a ! (i + j)))))",
    "shared_cell": H + "let t = r ! j + w ! (i + j) in t * t * c))))",
    # the bag collected: the map's reverse pass scatters w's bag (last_first)
    "collected": ("def f(c : R, a : Array R, w : Array R, m : Array (Array R)) : R = "
                  "let v = map (\\x -> x * x) w in sum (build (length m) (\\i -> let r = m ! i in "
                  "sum (build (length r) (\\j -> r ! j * v ! (i + j) + v ! (2 * j)))))"),
}


def _chain_args(rng, n, k, extra=3):
    m = [rng.choice(CANCEL, k) for _ in range(n)]
    a = rng.choice(CANCEL, n + 2 * k + extra)
    w = rng.choice(CANCEL, n + 2 * k + extra)
    return (float(rng.choice(CANCEL)), a, w, m)


@pytest.mark.parametrize("name", sorted(CHAIN_PROGRAMS))
def test_held_programs_making_chains_are_the_interpreters(name, monkeypatch):
    text = CHAIN_PROGRAMS[name]
    rng = np.random.default_rng(len(name))
    chains = _Chains(monkeypatch)
    for evm in RUNTIMES:
        for n, k in ((6, 4), (1, 1), (0, 3), (3, 0), (9, 2)):
            args = _chain_args(rng, n, k)
            for ctg in (1.0, -0.0, -2.5):
                _same_as_interp(text, args, evm, ctg=ctg)
    assert chains.made > 0
    if name != "collected":
        assert chains.scattered > 0


FORKED = ("def f(c : R, a : Array R, w : Array R, m : Array (Array R)) : R = "
          "sum (build (length m) (\\i -> let r = m ! i in sum (build (length r) (\\j -> "
          "r ! j * w ! (i + j))))) * sum (build (length m) (\\i -> let r = m ! i in "
          "sum (build (length r) (\\j -> a ! (i + j) * w ! (2 * j) + r ! j * c))))")


def test_held_chains_with_forks_everywhere(forking, monkeypatch):
    chains = _Chains(monkeypatch)
    rng = np.random.default_rng(3)
    parallel_support.stats.reset()
    for text in (FORKED, CHAIN_PROGRAMS["own_rows"], CHAIN_PROGRAMS["collected"]):
        for n, k in ((40, 3), (9, 5), (2, 1)):
            for ctg in (1.0, -0.0):
                _same_as_interp(text, _chain_args(rng, n, k), "parallel", ctg=ctg)
    assert parallel_support.stats.decided > 0 and chains.made > 0


@pytest.mark.parametrize("evm", RUNTIMES)
def test_held_indices_out_of_range_fail_alike(evm):
    rng = np.random.default_rng(9)
    neg = H + "r ! j * w ! (i - j)))))"
    for text in (CHAIN_PROGRAMS["own_rows"], CHAIN_PROGRAMS["collected"], neg):
        for n, k, lw in ((3, 4, 3), (5, 2, 5), (2, 3, 0)):
            m = [rng.standard_normal(k) for _ in range(n)]
            w = rng.standard_normal(lw)
            got = _same_as_interp(text, (1.5, w, w, m), evm)
            if text is not neg:
                assert got[0] == "err"


def test_held_vjp_of_chains_called_again(monkeypatch):
    text = ("def f(a : Array R, w : Array R, m : Array (Array R)) : Array R = "
            "build (length m) (\\i -> let r = m ! i in sum (build (length r) (\\j -> "
            "r ! j * w ! (i + j) + a ! (2 * j))))")
    rng = np.random.default_rng(4)
    for evm in RUNTIMES:
        n, k = 5, 3
        args = (rng.choice(CANCEL, 2 * k + 2), rng.choice(CANCEL, n + k + 2),
                [rng.choice(CANCEL, k) for _ in range(n)])
        value, back = chad.vjp(text, evm=evm)(*copy.deepcopy(args))
        want_value, want_back = chad.vjp(text, evm=evm, backend="interp")(*copy.deepcopy(args))
        agree(value, want_value, exact=True)
        for ct in ([1.0, -0.0, 1e16, -1e16, 0.5], [0.0] * 5, [math.inf, 1.0, -0.0, 2.0, 3.0]):
            got = back(np.array(ct))
            agree(got, want_back(np.array(ct)), exact=True)
            for g in got[:2]:
                g[...] = 777.0  # the caller's: nothing the next call reads
            for r in got[2]:
                r[...] = 777.0





@pytest.mark.parametrize("name", ["gmm", "kmeans"])
def test_held_gmm_and_kmeans_bit_for_bit_with_the_math_modules_functions(name, monkeypatch):
    """gmm's three chains and kmeans' trees along the last axis, with numpy's
    exp / log replaced by the math module's (the evaluator's)."""
    from benchmarks.bench_vectorised import PROGRAMS, args_of

    for fn in ("exp", "log"):
        monkeypatch.setattr(np, fn, _math_elementwise(getattr(math, fn), getattr(np, fn)))
    rng = np.random.default_rng(12)
    for n in (1, 2, 33):
        args = args_of(name, n, rng)
        if n > 2:
            args[-1][:4] = [1e16, -1e16, -0.0, 0.0]
        if name == "kmeans":
            args[1][-2:] = args[1][:2]  # ties
        for evm in RUNTIMES:
            _same_as_interp(PROGRAMS[name], args, evm)


# ----------------------------------------------------------------- the matrix given up


SMV = ("def smv(m : Array (Array R), v : Array R) : R = "
       "sum (build (length m) (\\i -> sum (build (length v) (\\j -> m ! i ! j * v ! j))))")
TWO = ("def f(m1 : Array (Array R), m2 : Array (Array R), v : Array R) : R = "
       "sum (build (length m1) (\\i -> let r1 = m1 ! i in let r2 = m2 ! i in "
       "sum (build (length v) (\\j -> let t = r1 ! j + r2 ! j in t * v ! j + t * t))))")
ROWS_AND_CHAIN = ("def f(w : Array R, m : Array (Array R)) : R = "
                  "sum (build (length m) (\\i -> let r = m ! i in sum (build (length r) "
                  "(\\j -> let t = r ! j + w ! (i + j) in t * t))))")


def _all_arrays(x):
    if isinstance(x, np.ndarray):
        yield x
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from _all_arrays(y)


@pytest.mark.parametrize("evm", RUNTIMES)
def test_held_given_up_rows_are_the_interpreters_and_the_callers_alone(evm):
    rng = np.random.default_rng(21)
    for text, args in (
            (SMV, ([rng.choice(CANCEL, 5) for _ in range(4)], rng.choice(CANCEL, 5))),
            (TWO, ([rng.choice(CANCEL, 3) for _ in range(4)], [rng.choice(CANCEL, 3) for _ in range(4)],
                   rng.choice(CANCEL, 3))),
            (ROWS_AND_CHAIN, (rng.choice(CANCEL, 9), [rng.choice(CANCEL, 3) for _ in range(5)]))):
        g = chad.grad(text, evm=evm)
        for ctg in (1.0, -0.0, 0.0, -3.0):
            first = g(*copy.deepcopy(args), ctg=ctg)
            want = chad.grad(text, evm=evm, backend="interp")(*copy.deepcopy(args), ctg=ctg)
            agree(first, want, exact=True)
            arrays = list(_all_arrays(first))
            for x in arrays:  # no two returned arrays share memory
                for y in arrays:
                    if x is not y and (x.base is None or x.base is not y.base):
                        assert not np.shares_memory(x, y)
            for x in arrays:
                x[...] = np.nan
            again = g(*copy.deepcopy(args), ctg=ctg)
            agree(again, want, exact=True)
            for x in _all_arrays(again):
                assert not any(np.shares_memory(x, y) for y in arrays)


def test_held_final2_records_only_sums_free_of_negative_zero():
    from chad.arrays.nested_support import final2

    for init, recorded in ((0.0, True), (1.5, True), (math.nan, True), (-0.0, False),
                           (None, False), (np.float64(0.0), True), (np.float64(-0.0), False)):
        cell = np.zeros((2, 3))
        out = final2(cell, init, (2, 3))
        assert out is cell and (cell in NO_NEG_ZERO) == recorded
    never = final2(None, -0.0, (2, 2))
    assert never not in NO_NEG_ZERO and math.copysign(1.0, never[0, 0]) < 0


# ----------------------------------------------------------------- broadcast, folds


def test_held_broadcast_is_the_array_only_at_its_shape_and_dtype():
    x = np.arange(6.0).reshape(2, 3)
    assert broadcast(x, (2, 3)) is x
    for other in (x.astype(np.float32), x.astype(">f8"), x[:, :1], x.reshape(1, 6)):
        got = broadcast(other, (2, 3)) if other.shape != (1, 6) else None
        if got is not None:
            assert got is not other and got.dtype == np.float64 and not got.flags.writeable
    i = np.arange(3)
    assert broadcast(i, (3,), np.dtype(np.int64)) is i
    assert broadcast(i, (3,)).dtype == np.float64
    assert broadcast(2.5, (2, 2)).tolist() == [[2.5, 2.5], [2.5, 2.5]]
    sub = x.view(np.matrix)  # a subclass: a base-class view, not the matrix
    assert type(broadcast(sub, (2, 3))) is np.ndarray


def test_held_vuntree2_one_leaf_per_row_is_put_along_axis():
    rng = np.random.default_rng(5)
    for rows, n in ((1, 1), (6, 5), (4, 1), (0, 3)):
        leaf = rng.integers(0, n, (rows, 1))
        for d in (rng.choice(CANCEL, (rows, 1)), np.array([[-0.0]]), -0.0, 2.0):
            want = np.zeros((rows, n))
            np.put_along_axis(want, leaf, np.broadcast_to(np.asarray(d, dtype=float), (rows, 1)),
                              axis=1)
            assert _same(folds.vuntree2(d, leaf, n, 1), want)
    leaf = np.array([[0], [5]])
    with pytest.raises(IndexError):
        folds.vuntree2(np.ones((2, 1)), leaf, 3, 1)


def test_held_vtree2_along_the_last_axis_is_moveaxis_free():
    rng = np.random.default_rng(6)
    x = rng.choice(np.array([1.0, -0.0, 0.0, math.nan, 2.0, 2.0, -math.inf]), (7, 5))
    for is_max in (True, False):
        v, leaf = folds.vtree2(x, 5, 1, 2, is_max)
        v0, l0 = folds.vtree2(np.ascontiguousarray(x.T), 5, 0, 2, is_max)
        assert _same(v, v0.T) and _same(leaf, l0.T)


# ----------------------------------------------------------------- threads


def test_held_compiled_gradients_from_several_threads_at_once():
    """The C loops release the GIL: gradients from four Python threads at
    once are the serial ones, bit for bit."""
    text = CHAIN_PROGRAMS["two_adds"]
    rng = np.random.default_rng(8)
    args = _chain_args(rng, 300, 4)
    g = chad.grad(text, evm="array")
    want = g(*copy.deepcopy(args))
    results, errors = [], []

    def work():
        try:
            for _ in range(5):
                results.append(g(*copy.deepcopy(args)))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    in_threads(work)
    assert not errors
    assert len(results) == 20
    for r in results:
        agree(r, want, exact=True)
