"""Review of 4f6e026 (fewer copies in nested reverse passes: `ones_bag` keeps
reversed views, `shared_adds` writes rows at their own indices once with
`_last_first`, `_ibound` of an iota is its length) and 85afc87 (malloc: one
arena for all threads, M_ARENA_MAX 1 in chad/memory.py).

Checked:

* the new helpers against the code they replace (np.stack + a reversed
  contiguous copy), on every mix of index kinds (None, 1-D, 2-D), n = 0, m = 0,
  one item; the bags they make through every consumer (collect, scatter,
  scatter_reals, dense_real, to_dense, size), combined with other adds to the
  same cell, the arrays behind the views never changed;
* `_ibound` against the full pass, on an iota and its slices and views;
* compiled gradients against the interpreter's, bit for bit, on the three
  runtimes (forced forks on the parallel one), for grad and vjp; a vjp's
  backpropagator called again with other cotangents, after the caller
  scribbled over the gradients it returned; fixed programs (kmeans, calls with
  array parameters in an inner loop, outer products, pair lets) and random
  ones;
* the allocator: glibc's M_ARENA_MAX, mallopt's answer, and that the parallel
  runtime's pool threads allocate from the one (main) heap, as the docs say
  (docs/compiler.md "The allocator", docs/runtimes.md "One heap for all
  threads").

The `test_fails_*` tests show a real disagreement."""

from __future__ import annotations

import copy
import os
import random
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import chad
import chad.compile.parallel_support as PS
from chad.arrays.bag import (
    BEMPTY, BArray, BOne, BPlus, BRows, collect, dense_real, scatter, scatter_reals,
    to_dense, zeros,
)
from chad.arrays.nested_support import (
    RowBags, _indices, ones_bag, shared_adds, vdense_bags,
)
from chad.arrays.bag import last_first as _last_first
from chad import memory
from chad.compile.known import NO_NEG_ZERO, iota
from chad.compile.support import padd
from chad.compile.vector_support import _ibound
from chad.linear import LR
from tests.test_vectorise import agree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNTIMES = ("array", "map", "parallel")


def _bits(x):
    return np.asarray(x, dtype=np.float64).tobytes()


# ------------------------------------------------------------------ the helpers


def _old_last_first(items, n):
    """The code 4f6e026 replaced (np.stack, a reversed contiguous copy)."""
    m = items[0][1].shape[1]
    if not m:  # (reshape(-1, 0) is ambiguous: no pair)
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    vals = np.stack([x for _kind, x, _idx in items], axis=1).reshape(-1, m)
    idx = np.stack([_indices(ix, n, m) for _kind, _x, ix in items], axis=1).reshape(-1, m)
    return (np.ascontiguousarray(vals[::-1]).reshape(-1),
            np.ascontiguousarray(idx[::-1]).reshape(-1))


def _random_idx(rng, kind, n, m, width):
    if kind == "none":
        return None
    if kind == "iota":
        return iota(m)
    if kind == "1d":
        return rng.integers(0, width, m).astype(np.int64)
    return rng.integers(0, width, (n, m)).astype(np.int64)


@pytest.mark.parametrize("n,m,p", [(1, 1, 1), (3, 4, 1), (3, 4, 2), (2, 3, 5), (5, 1, 3),
                                   (1, 6, 2), (4, 0, 2), (7, 2, 9)])
def test_last_first_is_the_old_stack_and_reversed_copy(n, m, p):
    rng = np.random.default_rng(n * 100 + m * 10 + p)
    kinds = ["none", "iota", "1d", "2d"]
    for trial in range(8):
        items = []
        for q in range(p):
            x = rng.standard_normal((n, m))
            if trial % 2 and m:
                x[:, 0] = -0.0
            kind = kinds[(trial + q) % 4] if trial < 4 else kinds[rng.integers(0, 4)]
            items.append(("rows", x, _random_idx(rng, kind, n, m, max(m, 1) + 2)))
        want_v, want_i = _old_last_first(items, n)
        got_v = _last_first([x for _k, x, _i in items], n, m, np.float64)
        got_i = _last_first([_indices(ix, n, m) for _k, _x, ix in items], n, m, np.int64)
        assert got_v.dtype == np.float64 and got_i.dtype == np.int64
        assert got_v.tobytes() == want_v.tobytes()
        assert np.array_equal(got_i, want_i)


def _chain(items, n, init=BEMPTY):
    """The evaluator's chain: element i's adds in order, i = 0 .. n-1, each
    cell = plusv(b, cell), b = BArray(x[i], idx or idx[i])."""
    cell = init
    for i in range(n):
        for _kind, x, ix in items:
            if ix is not None and getattr(ix, "ndim", 1) == 2:
                ix = ix[i]
            cell = padd(BArray(x[i], ix), cell)
    return cell


@pytest.mark.parametrize("width", [1, 3, 4])
def test_shared_adds_of_rows_at_their_own_indices_is_the_chain(width):
    rng = np.random.default_rng(width)
    for n in (0, 1, 2, 5):
        for kinds in (("1d",), ("2d",), ("none", "2d"), ("1d", "iota", "2d"), ("2d", "2d", "none")):
            items = [("rows", rng.standard_normal((n, width)),
                      _random_idx(rng, k, n, width, width + 3)) for k in kinds]
            for init in (None, BArray(np.arange(width + 3.0)), BOne(1, -0.0)):
                cells = [init]
                shared_adds(cells, 0, items, n)
                want = _chain(items, n, BEMPTY if init is None else init)
                got_p, _ = collect(cells[0] if cells[0] is not None else BEMPTY, LR())
                want_p, _ = collect(want, LR())
                assert np.array_equal(np.arange(len(got_p.vals)) if got_p.idx is None else got_p.idx,
                                      np.arange(len(want_p.vals)) if want_p.idx is None else want_p.idx)
                assert _bits(got_p.vals) == _bits(want_p.vals)
                size = width + 3
                assert _bits(to_dense(cells[0], size, LR())) == _bits(to_dense(want, size, LR()))


def _ones_chain(idx, vals):
    """BOne adds of (idx[k], vals[k]) in order: the evaluator's chain."""
    cell = BEMPTY
    for i, v in zip(idx.reshape(-1).tolist(), vals.reshape(-1).tolist()):
        cell = padd(BOne(i, v), cell)
    return cell


@pytest.mark.parametrize("shape", [(1,), (4,), (3, 2), (2, 3, 2), (0, 3), (3, 0)])
def test_ones_bag_through_every_consumer(shape):
    rng = np.random.default_rng(len(shape))
    size = 6
    idx = rng.integers(0, size, shape).astype(np.int64)
    vals = rng.standard_normal(shape)
    if vals.size:
        vals.reshape(-1)[0] = -0.0
    keep_i, keep_v = idx.copy(), vals.copy()
    bag = ones_bag(idx, vals)
    want = _ones_chain(idx, vals)
    if not idx.size:
        assert bag is BEMPTY
        return
    assert bag.size() == 1 + vals.size
    gp, _ = collect(bag, LR())
    wp, _ = collect(want, LR())
    assert np.array_equal(gp.idx, wp.idx) and _bits(gp.vals) == _bits(wp.vals)
    base = np.full(size, 0.5)
    assert _bits(scatter(base, gp, LR())[0]) == _bits(scatter(base, wp, LR())[0])
    assert _bits(scatter_reals(bag, size)) == _bits(scatter_reals(want, size))
    assert dense_real(bag, size, take=True) is None
    # combined with other adds to the same cell: arrays of sums, a fill,
    # one-hot adds, a BRows
    for other in (np.arange(size, dtype=np.float64) + 1.0, ):
        for make in (lambda: BPlus(BArray(NO_NEG_ZERO.add(np.array(other))), bag),
                     lambda: BPlus(bag, BArray(NO_NEG_ZERO.add(np.array(other)))),
                     lambda: BPlus(BPlus(BOne(2, 1.5), bag), BArray(np.full(size, -0.0))),
                     lambda: BPlus(BRows(np.ones((2, size))), BPlus(bag, bag))):
            got = to_dense(make(), size, LR())
            ref_bag = make()
            ref_p, _ = collect(ref_bag, LR())
            ref, _ = scatter(zeros(size, LR())[0], ref_p, LR())
            assert _bits(got) == _bits(ref)
    # nothing above changed the arrays the bag's views read
    assert np.array_equal(idx, keep_i) and vals.tobytes() == keep_v.tobytes()
    assert np.array_equal(np.asarray(bag.idx)[::-1], keep_i.reshape(-1))
    assert _bits(np.asarray(bag.vals)[::-1]) == _bits(keep_v.reshape(-1))


def test_the_in_place_dense_sum_never_writes_into_an_array_a_view_reads():
    # dense_real(take=True) adds into an array of sums that only the bag holds
    # (its reference count): the array behind a ones bag's reversed view is
    # held by the view too, and must keep its values
    size = 5
    for first in (True, False):
        base = NO_NEG_ZERO.add(np.array([1.0, 2.0, -3.0, 0.5, 4.0]))
        ones = ones_bag(np.array([4, 3, 2, 1, 0], dtype=np.int64), base)
        other = NO_NEG_ZERO.add(np.array([0.25, -1.0, 8.0, 2.0, 1.0]))
        pair = (BArray(base), BArray(other)) if first else (BArray(other), BArray(base))
        del base, other
        dense = to_dense(BPlus(*pair), size, LR())
        assert _bits(dense) == _bits(np.array([1.0, 2.0, -3.0, 0.5, 4.0])
                                     + np.array([0.25, -1.0, 8.0, 2.0, 1.0]))
        assert _bits(ones.vals) == _bits([4.0, 0.5, -3.0, 2.0, 1.0])
        # (pairs (0, 4.0), (1, 0.5), ..., (4, 1.0): the last add first)
        assert _bits(to_dense(ones, size, LR())) == _bits([4.0, 0.5, -3.0, 2.0, 1.0])


def test_row_bags_of_ones_items_are_the_chain():
    rng = np.random.default_rng(5)
    n, m, k = 3, 4, 2
    idx = rng.integers(0, 5, (n, m, k)).astype(np.int64)
    vals = rng.standard_normal((n, m, k))
    cell = RowBags()
    cell.items.append(("ones", vals, idx))
    cell.items.append(("rows", rng.standard_normal((n, 5)), None))
    dense = vdense_bags(cell, n, 5)
    for i in range(n):
        want = padd(BArray(cell.items[1][1][i]), _ones_chain(idx[i], vals[i]))
        assert _bits(dense[i]) == _bits(to_dense(want, 5, LR()))
        assert _bits(to_dense(cell.bag(i), 5, LR())) == _bits(dense[i])
    # twice (a backpropagator called again reads the same items)
    assert _bits(vdense_bags(cell, n, 5)) == _bits(dense)


# ------------------------------------------------------------------ _ibound


def test_ibound_of_an_iota_and_its_views():
    for n in (1, 2, 3, 17, 1000):
        a = iota(n)
        full = max(abs(int(a.max())), abs(int(a.min())))
        assert _ibound(a) == full == n - 1
        for view in (a[1:], a[: n // 2], a[::-1], a[::2], a[n - 1:]):
            if view.size:
                assert _ibound(view) == max(abs(int(view.max())), abs(int(view.min())))
            else:
                assert _ibound(view) == 0
    assert _ibound(iota(0)) == 0


def test_integer_arithmetic_on_the_loop_index_near_int64():
    for k in ("4611686018427387904", "4611686018427387903", "3074457345618258603"):
        text = (f"def f(a : Array R) : R = sum (build (length a) (\\i -> "
                f"a ! i * toreal (i * {k} + i * {k} - {k})))")
        for n in (1, 2, 3, 4):
            args = (np.linspace(-1.0, 1.0, n),)
            for evm in RUNTIMES:
                agree(chad.grad(text, evm=evm)(*args),
                      chad.grad(text, evm=evm, backend="interp")(*args), exact=True)
    # (i * k + i * k straddles 2**63 at i = 1 or 2: _ibound must not under-report)


# ------------------------------------------------------------------ compiled against interpreter


def _outcome(f):
    try:
        return "ok", f()
    except Exception as e:  # noqa: BLE001 (the message is compared)
        return "err", str(e)


def _ctg_like(v, rng):
    if isinstance(v, float):
        return float(rng.standard_normal())
    if isinstance(v, np.ndarray):
        return rng.standard_normal(v.shape)
    if isinstance(v, (list, tuple)):
        return type(v)(_ctg_like(x, rng) for x in v)
    return v


def _scribble(grads) -> None:
    for g in grads if isinstance(grads, (list, tuple)) else (grads,):
        if isinstance(g, np.ndarray) and g.flags.writeable:
            g[...] = 12345.0
        elif isinstance(g, (list, tuple)):
            _scribble(g)


def _check(text, args, exact=True, evms=RUNTIMES):
    rng = np.random.default_rng(11)
    for evm in evms:
        mine = copy.deepcopy(args)
        got = _outcome(lambda: chad.vjp(text, evm=evm)(*mine))
        want = _outcome(lambda: chad.vjp(text, evm=evm, backend="interp")(*copy.deepcopy(args)))
        assert got[0] == want[0], (evm, got, want)
        if got[0] == "err":
            assert got[1] == want[1], evm
            continue
        agree(got[1][0], want[1][0], exact=exact)
        cts = [_ctg_like(want[1][0], rng) for _ in range(2)]
        for d in cts + cts[:1]:  # the backpropagator again, other cotangents
            g = _outcome(lambda: got[1][1](d))
            w = _outcome(lambda: want[1][1](d))
            assert g[0] == w[0], (evm, g, w)
            if g[0] == "err":
                assert g[1] == w[1]
                continue
            agree(g[1], w[1], exact=exact)
            _scribble(g[1])  # the caller's arrays: nothing the next call reads
        for x, y in zip(args, mine):
            assert _bits_any(x) == _bits_any(y), evm  # inputs not mutated
        g = _outcome(lambda: chad.grad(text, evm=evm)(*copy.deepcopy(args)))
        w = _outcome(lambda: chad.grad(text, evm=evm, backend="interp")(*copy.deepcopy(args)))
        assert g[0] == w[0] and (g[0] == "ok" or g[1] == w[1]), (evm, g, w)
        if g[0] == "ok":
            agree(g[1], w[1], exact=exact)


def _bits_any(x):
    if isinstance(x, np.ndarray):
        return x.tobytes()
    if isinstance(x, (list, tuple)):
        return [_bits_any(y) for y in x]
    return repr(x)


G = "def g(x : Array R, i : Z, y : Array R, j : Z) : R = x ! i * y ! j\n"
MINF = "fold (\\p -> min(fst p, snd p)) "
MAXF = "fold (\\p -> max(fst p, snd p)) "


def _example(name):
    with open(os.path.join(ROOT, "examples", f"{name}.chad")) as fh:
        return fh.read()


PROGRAMS = {
    "kmeans": _example("kmeans"),
    "call_sq": ("def sq(x : Array R, i : Z, y : Array R, j : Z) : R = (x ! i - y ! j) ** 2 + x ! i * y ! j\n"
                "def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
                + MINF + "(build (length b) (\\j -> sq(a, i, b, j)))))"),
    "two_calls": ("def g(x : Array R, i : Z, w : R) : R = x ! i * w\n"
                  "def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
                  "sum (build (length b) (\\j -> g(b, j, a ! i) + g(a, i, b ! j) * g(b, j, 0.5)))))"),
    "call_row": ("def g(x : Array R, j : Z) : R = x ! j * x ! j\n"
                 "def f(m : Array (Array R)) : R = sum (build (length m) (\\i -> "
                 "let r = m ! i in sum (build (length r) (\\j -> g(r, j) + r ! j))))"),
    "outer_sum": ("def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
                  "sum (build (length b) (\\j -> a ! i * b ! j))))"),
    "outer_array": ("def f(a : Array R, b : Array R) : Array (Array R) = build (length a) (\\i -> "
                    "build (length b) (\\j -> a ! i * b ! j - b ! j * b ! j))"),
    "self_outer": ("def f(a : Array R) : R = sum (build (length a) (\\i -> "
                   "sum (build (length a) (\\j -> a ! i * a ! j)))) + sum a"),
    # the ones bag and other adds to the same cell (a's): outside the loops, rows
    "call_shared": (G + "def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> a ! i * "
                    "sum (build (length b) (\\j -> g(a, i, b, j) + g(b, j, a, i))))) "
                    "+ sum (build (length a) (\\i -> a ! i * a ! i)) + sum a"),
    "call_plus_row": (G + "def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
                      "sum (build (length b) (\\j -> g(a, i, b, j) + a ! i * b ! j))))"),
    "call_same": (G + "def f(a : Array R) : R = sum (build (length a) (\\i -> "
                  "sum (build (length a) (\\j -> g(a, i, a, j) * g(a, j, a, i)))))"),
    "pairlet_call": ("def h(w : Array R, j : Z) : R = w ! (2 * j) * w ! (2 * j + 1)\n"
                     "def f(a : Array R, w : Array R) : R = sum (build (length a) (\\i -> "
                     "sum (build (div(length w, 2)) (\\j -> let (s0, s1) = (w ! (2 * j), w ! (2 * j + 1)) "
                     "in (a ! i - s0) * s1 + h(w, j) * a ! i))))"),
    "rows_mixed_idx": ("def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
                       "sum (build (div(length b, 2)) (\\j -> a ! i * b ! (2 * j) + b ! j * a ! i "
                       "+ max(a ! i * b ! (length b - 1 - j), b ! (i + j))))))"),
}


def _args_for(name, rng, n, m, special):
    a = rng.standard_normal(n) * 10.0 ** rng.integers(-2, 3, n)
    b = rng.standard_normal(m)
    if special and n > 2:
        a[1], a[2] = -0.0, a[0]
    if special and m > 2:
        b[0], b[1] = 0.0, b[2]
    if name == "kmeans":
        return (rng.standard_normal(2 * n), rng.standard_normal(2 * m))
    if name == "pairlet_call":
        return (a, rng.standard_normal(2 * m))
    if name == "rows_mixed_idx":
        return (a, rng.standard_normal(2 * m + n))
    if name == "call_row":
        return ([rng.standard_normal(m) for _ in range(n)],)
    if name in ("self_outer", "call_same"):
        return (a,)
    return (a, b)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_programs_against_the_interpreter(name):
    text = PROGRAMS[name]
    rng = np.random.default_rng(len(name))
    for n, m, special in ((3, 4, True), (1, 1, False), (0, 3, False), (3, 0, False), (5, 2, True)):
        _check(text, _args_for(name, rng, n, m, special))


FORKED = {
    "calls": G + ("def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
                  "sum (build (length b) (\\j -> g(a, i, b, j))))) + sum (build (length b) (\\i -> "
                  "sum (build (length a) (\\j -> g(b, i, a, j) * a ! j))))"),
    "outer": ("def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
              "sum (build (length b) (\\j -> a ! i * b ! j)))) * sum (build (length b) (\\i -> "
              "sum (build (length a) (\\j -> b ! i * a ! j * a ! j))))"),
    "nearest": ("def sqdist(ps : Array R, i : Z, zs : Array R, c : Z) : R = (ps ! i - zs ! c) ** 2\n"
                "def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> " + MINF
                + "(build (length b) (\\c -> sqdist(a, i, b, c))))) + sum (build (length b) (\\i -> "
                + MAXF + "(build (length a) (\\c -> sqdist(b, i, a, c)))))"),
}


@pytest.mark.parametrize("name", sorted(FORKED))
def test_programs_with_forks_everywhere(name):
    rng = np.random.default_rng(len(name))
    with PS.grain(1):  # fork wherever two parts read anything
        PS.stats.reset()
        for n, m in ((3, 4), (5, 2), (1, 3)):
            a, b = rng.standard_normal(n), rng.standard_normal(m)
            if n > 2:
                a[1] = -0.0
            _check(FORKED[name], (a, b), evms=("parallel",))
        assert PS.stats.decided > 0


# ------------------------------------------------------------------ random programs

DEFS = ("def g(x : Array R, i : Z, y : Array R, j : Z) : R = x ! i * y ! j\n"
        "def h(x : Array R, i : Z) : R = x ! i * x ! i\n"
        "def k(x : Array R, i : Z, w : R) : R = max(x ! i, w) * w\n")
ATOMS = ["a ! i", "b ! j", "g(a, i, b, j)", "g(b, j, a, i)", "h(a, i)", "h(b, j)",
         "k(b, j, a ! i)", "k(a, i, b ! j)", "w", "toreal j", "1.5", "g(a, i, a, i)",
         "b ! (length b - 1 - j)"]


def _expr(r, d):
    if d == 0 or r.random() < 0.3:
        return r.choice(ATOMS)
    op = r.choice(["+", "-", "*", "max", "min", "*"])
    x, y = _expr(r, d - 1), _expr(r, d - 1)
    return f"{op}({x}, {y})" if op in ("max", "min") else f"({x} {op} {y})"


def _random_program(r):
    red = r.choice(["sum ", MINF, MAXF])
    inner = f"{red}(build (length b) (\\j -> {_expr(r, 3)}))"
    if r.random() < 0.4:
        inner = f"a ! i * {inner}"
    if r.random() < 0.3:
        inner = f"let (u, v) = (a ! i, w) in u * v + {inner}"
    top = f"sum (build (length a) (\\i -> {inner}))"
    if r.random() < 0.3:
        top += " + sum a"
    if r.random() < 0.2:
        top += " + sum (build (length b) (\\j -> b ! j * w))"
    return DEFS + f"def f(w : R, a : Array R, b : Array R) : R = {top}"


@pytest.mark.parametrize("block", range(4))
def test_random_programs(block):
    for s in range(block * 12, block * 12 + 12):
        r = random.Random(s)
        text = _random_program(r)
        rng = np.random.default_rng(s)
        n, m = r.choice([(3, 4), (2, 2), (4, 1), (1, 3), (0, 2), (3, 0)])
        a, b = rng.standard_normal(n), rng.standard_normal(m)
        if n > 2 and r.random() < 0.5:
            a[1], a[2] = -0.0, a[0]
        if m > 1 and r.random() < 0.5:
            b[1] = b[0]
        _check(text, (r.choice([0.5, -0.0, -1.25]), a, b))


ROW_ATOMS = ["r ! j", "a ! i", "g(r, j, a, i)", "g(a, i, r, j)", "h(r, j)", "h(r, 0)",
             "k(r, j, a ! i)", "w", "toreal j", "(m ! i) ! j", "r ! 0", "g(r, j, r, j)", "a ! j"]


def _row_expr(r, d):
    if d == 0 or r.random() < 0.3:
        return r.choice(ROW_ATOMS)
    op = r.choice(["+", "-", "*", "max", "min", "*"])
    x, y = _row_expr(r, d - 1), _row_expr(r, d - 1)
    return f"{op}({x}, {y})" if op in ("max", "min") else f"({x} {op} {y})"


def _random_row_program(r):
    body = _row_expr(r, 3)
    kind = r.choice(["sum", "array", "fold"])
    head = "def f(w : R, a : Array R, m : Array (Array R)) : "
    if kind == "array":
        return DEFS + head + (f"Array (Array R) = build (length a) (\\i -> let r = m ! i in "
                              f"build (length r) (\\j -> {body}))")
    red = "sum " if kind == "sum" else r.choice([MINF, MAXF])
    inner = f"{red}(build (length r) (\\j -> {body}))"
    if r.random() < 0.4:
        inner = f"a ! i * {inner}"
    top = f"sum (build (length a) (\\i -> let r = m ! i in {inner}))"
    if r.random() < 0.3:
        top += " + sum (build (length m) (\\i -> (m ! i) ! 0 * w))"
    return DEFS + head + "R = " + top


@pytest.mark.parametrize("block", range(2))
def test_random_programs_over_rows(block):
    # rows of an Array (Array R): RowBags with one-hot items (item_bag, ones_bag
    # per outer element), outputs of arrays of rows
    for s in range(block * 12, block * 12 + 12):
        r = random.Random(1000 + s)
        text = _random_row_program(r)
        rng = np.random.default_rng(s)
        n, k = r.choice([(3, 4), (2, 2), (4, 1), (1, 3), (0, 2), (3, 5)])
        a = rng.standard_normal(max(n, k))
        rows = [rng.standard_normal(k) for _ in range(n)]
        if n > 1 and k > 1 and r.random() < 0.5:
            rows[1][0], rows[0][1] = -0.0, rows[0][0]
        _check(text, (r.choice([0.5, -0.0, -1.25, 2.0]), a, rows))


# ------------------------------------------------------------------ the allocator


def test_m_arena_max_is_glibc_s():
    header = "/usr/include/malloc.h"
    if not os.path.exists(header):
        pytest.skip("no malloc.h")
    with open(header) as fh:
        text = fh.read()
    found = {name: int(v) for name, v in re.findall(r"#define\s+(M_\w+)\s+(-?\d+)", text)}
    assert found["M_ARENA_MAX"] == memory.M_ARENA_MAX
    assert found["M_TRIM_THRESHOLD"] == memory.M_TRIM_THRESHOLD
    assert found["M_MMAP_THRESHOLD"] == memory.M_MMAP_THRESHOLD


_ARENA_PROBE = textwrap.dedent("""
    import ctypes, sys
    import numpy as np
    import chad
    import chad.compile.parallel_support as PS
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = (ctypes.c_size_t,)
    libc.free.argtypes = (ctypes.c_void_p,)

    def main_heap():
        # glibc: bit 2 (NON_MAIN_ARENA) of a chunk's size field, just before it
        p = libc.malloc(64)
        size = ctypes.c_size_t.from_address(p - ctypes.sizeof(ctypes.c_size_t)).value
        libc.free(p)
        return not (size & 4)

    text = ("def f(a : Array R, b : Array R) : R = "
            "sum (build (length a) (\\\\i -> a ! i * b ! i))")
    a, b = np.linspace(0.0, 1.0, 50), np.linspace(1.0, 2.0, 50)
    if sys.argv[1] == "interp-first":
        chad.grad(text, backend="interp")(a, b)  # the interpreter, before any compile
    print(chad.grad(text, evm="parallel")(a, b)[0])
    pool = PS._pool()
    print("main", main_heap())
    print("pool", all(pool.submit(main_heap).result() for _ in range(4)))
""")


def _arena_probe(order):
    import platform
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc only")
    env = dict(os.environ)
    env.pop("CHAD_MALLOC", None)
    env.pop("MALLOC_ARENA_MAX", None)
    out = subprocess.run([sys.executable, "-c", _ARENA_PROBE, order], capture_output=True,
                         text=True, env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    return lines


def test_pool_threads_share_the_main_heap_when_compiled_first():
    lines = _arena_probe("compiled-first")
    assert lines["main"] == "True" and lines["pool"] == "True"


def test_fails_pool_threads_share_the_main_heap_after_an_interpreter_call():
    # docs/compiler.md: chad "lets threads share the one heap (M_ARENA_MAX 1 ...)"
    # and memory.py: set "before the parallel runtime starts a thread". One
    # call of the interpreter (run on a chad-deep thread, chad/deep.py) before
    # the first compile leaves that thread's arena on glibc's free list; the
    # compiled parallel runtime's pool thread, started after mallopt, takes it
    # (glibc hands out free-list arenas whatever M_ARENA_MAX says), so its
    # halves allocate from an arena of their own, not the one heap.
    lines = _arena_probe("interp-first")
    assert lines["main"] == "True"
    assert lines["pool"] == "True"
