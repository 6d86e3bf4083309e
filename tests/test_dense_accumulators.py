"""Dense cotangent accumulators of the compiled runtime (docs/compiler.md,
"Dense accumulators"): identity index arrays known by construction
(chad/compile/known.py), gathers as views, bags of dense arrays turned into
arrays without a scatter by index (chad/arrays/bag.py dense_real), per-element
cells that start as one real and are added to in place (vector_support.vadd,
vseq), the shared cells' running sums in place (Pass.flush), inputs used
without a copy by `grad`, and the allocator's thresholds (chad/memory.py).

Every fast path is checked against the general path it replaces, bit for bit,
on values that include -0.0, the infinities and NaN; and the compiled gradients
against the counting evaluator's.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest

import chad
from chad.arrays.bag import (
    BEMPTY, BArray, BOne, BPlus, collect, dense_real, scatter, to_dense, zeros,
)
from chad.arrays.evaluate import eval_gather
from chad.arrays.lower import vzscatter
from chad.compile import known
from chad.compile import vector_support as V
from chad.compile.known import IOTA, NO_NEG_ZERO, Known, iota, is_iota
from chad.linear import LR

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECIAL = np.array([0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 1e-300, -1e300])


def _same(x, y) -> bool:
    """Bit for bit: values, NaN positions and the signs of zeros."""
    x, y = np.asarray(x), np.asarray(y)
    return x.shape == y.shape and x.tobytes() == y.tobytes()


def _general(bag, n):
    """scatter (zeros n) (collect bag) by the evaluator's functions."""
    z, _ = zeros(n, LR())
    pairs, _ = collect(bag, LR())
    return scatter(z, pairs, LR())[0]


def _values(rng, n):
    v = rng.normal(size=n)
    k = min(n, len(SPECIAL))
    v[:k] = SPECIAL[rng.permutation(len(SPECIAL))[:k]]
    return v


# ----------------------------------------------------------------- known arrays


def test_iota_is_known_while_it_lives_and_only_itself():
    a = iota(6)
    assert is_iota(a) and list(a) == list(range(6)) and a.dtype == np.int64
    assert not a.flags.writeable  # shared: the same n gives the same array again
    assert iota(6) is a and iota(7) is not a and len(iota(7)) == 7
    assert not is_iota(a.copy()) and not is_iota(np.arange(6)) and not is_iota(a[:3])
    ref = weakref.ref(a)
    del a
    for m in range(100, 100 + known.RECENT):  # push it out of the recent ones
        iota(m)
    gc.collect()
    assert ref() is None  # not kept alive by the record
    assert all(r() is not None for r in IOTA._refs.values())  # dead ones are dropped
    k = Known()
    b = np.zeros(2)
    k.add(b)
    assert b in k and np.zeros(2) not in k


def test_the_vectorised_loop_index_is_recorded():
    idx = V.vindex(5, 0, 1)
    assert is_iota(idx)
    assert V.vout(idx, 5, 1, np.int64, False, True) is idx  # in a derivative: no copy
    out = V.vout(idx, 5, 1, np.int64, False)  # anywhere else: the caller's own array
    assert out is not idx and out.flags.writeable and not is_iota(out)
    assert list(out) == list(range(5))
    assert not is_iota(V.vindex(5, 0, 2))  # a rank-2 region's index is a reshaped view


def test_a_gather_at_the_identity_is_a_view_with_the_general_values():
    rng = np.random.default_rng(0)
    a = rng.normal(size=9)
    for m in (0, 4, 9):
        idx = iota(m)
        general, general_cost = _gather(a, np.arange(m))
        out, cost = _gather(a, idx)
        assert _same(out, general) and cost == general_cost
        assert out.base is a or out is a  # a view, no copy
    with pytest.raises(Exception):
        _gather(a, iota(10))  # longer than a: the general path's index error


def _gather(a, idx):
    from chad.arrays.nodes import Gather
    from chad.terms import Var

    class Ev:
        def eval(self, t, env):
            return env[t.name], 0

    return eval_gather(Ev(), Gather(Var("a"), Var("i")), {"a": a, "i": idx})


def test_a_bag_at_the_identity_drops_its_indices():
    vals = np.arange(4.0)
    assert BArray(vals, iota(4)).idx is None
    plain = np.arange(4)
    assert BArray(vals, plain).idx is plain


# ----------------------------------------------------------------- bags to arrays


@pytest.mark.parametrize("seed", range(6))
def test_dense_real_is_the_general_scatter_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    w = [_values(rng, n) for _ in range(4)]
    fill = np.broadcast_to(np.float64(-0.0), (n,))
    bags = [BArray(w[0]), BArray(fill), BPlus(BArray(w[0]), BArray(w[1])),
            BPlus(BPlus(BArray(w[2]), BEMPTY), BPlus(BArray(w[3]), BArray(w[1]))),
            BPlus(BArray(fill), BArray(w[2]))]
    for bag in bags:
        fast = dense_real(bag, n)
        assert fast is not None
        assert _same(fast, _general(bag, n)), bag
        assert _same(to_dense(bag, n, LR()), _general(bag, n))
    # anything else: the general path (None here)
    assert dense_real(BPlus(BArray(w[0]), BOne(0, 1.0)), n) is None
    assert dense_real(BArray(w[0], np.arange(n)[::-1].copy()), n) is None
    assert dense_real(BArray(w[0][:-1]), n) is None


def test_to_dense_takes_a_sole_array_free_of_negative_zeros_and_copies_otherwise():
    n = 5
    bag = BArray(NO_NEG_ZERO.add(np.array([1.0, 0.0, 2.0, np.nan, -3.0])))
    out = to_dense(bag, n, LR())
    assert out is bag.vals  # held by the bag alone: taken, 0.0 + v is v for it
    sums = NO_NEG_ZERO.add(np.array([1.0, 0.0, 2.0, np.nan, -3.0]))
    out = to_dense(BArray(sums), n, LR())
    assert out is not sums and _same(out, sums)  # the caller holds it too: a copy
    held = NO_NEG_ZERO.add(np.array([1.0, 0.0, 2.0, 4.0, -3.0]))
    bag = BArray(held)
    other = held  # noqa: F841  a second holder: never handed out twice
    out = to_dense(bag, n, LR())
    assert out is not held and _same(out, held)
    plain = np.array([-0.0, 1.0, -0.0, 2.0, 3.0])  # not known to be free of -0.0
    out = to_dense(BArray(plain), n, LR())
    assert out is not plain and _same(out, _general(BArray(plain), n))
    assert np.signbit(plain[0]) and not np.signbit(out[0])
    fill = to_dense(BArray(np.broadcast_to(np.float64(2.0), (n,))), n, LR())
    assert fill.flags.writeable and _same(fill, np.full(n, 2.0))


def test_vzscatter_is_the_scatter_of_zeros():
    rng = np.random.default_rng(3)
    n = 8
    w = _values(rng, n)
    for bag in (BArray(w), BPlus(BArray(w), BArray(w[::-1].copy())), None, BEMPTY,
                BPlus(BOne(2, -0.0), BArray(w)), BArray(w[:3], np.array([1, 1, 7]))):
        assert _same(vzscatter(n, bag), _general(BEMPTY if bag is None else bag, n))
    with pytest.raises(Exception):
        vzscatter(n, BArray(w[:2], np.array([0, n])))  # the rule's index error


# ----------------------------------------------------------------- cells


def test_vadd_adopts_only_what_it_may_and_never_changes_its_operand():
    n = 4
    for init in (None, 0.0, -0.0, 2.5):
        cells = [None, init]
        run = V.Pass(1)
        kept = np.array([1.0, -0.0, 3.0, np.inf])
        snapshot = kept.copy()
        fresh = np.array([0.5, -0.0, -3.0, 1.0])
        want = snapshot.copy() if init is None else snapshot + init
        V.vadd(cells, 1, run, kept, n)  # not adopted: kept is not changed
        assert _same(kept, snapshot) and _same(cells[1], want)
        want = fresh.copy() + want
        V.vadd(cells, 1, run, fresh, n, True)  # taken over, or added into the cell's own array
        assert _same(cells[1], want), init
        want = want + snapshot
        V.vadd(cells, 1, run, kept, n)
        assert _same(kept, snapshot) and _same(cells[1], want), init
        # a fresh array first: it becomes the cell (plus the initial real)
        cells, run = [None, init], V.Pass(1)
        first = np.array([-0.0, 2.0, -1.0, 0.0])
        want = first.copy() if init is None else first + init
        V.vadd(cells, 1, run, first, n, True)
        assert _same(cells[1], want) and cells[1] is first
    # an operand that is not an owned float64 array of n is never adopted
    cells, run = [None, 0.0], V.Pass(1)
    view = np.arange(8.0)[::2]
    V.vadd(cells, 1, run, view, n, True)
    V.vadd(cells, 1, run, view, n, True)
    assert _same(view, np.arange(8.0)[::2]) and _same(cells[1], 0.0 + view + view)


def test_the_shared_cells_running_sum_is_sequential():
    rng = np.random.default_rng(5)
    for cur in (None, 0.0, -0.0, 1e16, np.nan):
        for parts in (1, 2, 3):
            n = 50
            vs = [_values(rng, n) * 1e8 for _ in range(parts)]
            for adopt in (False, True):
                cells = [cur, None]
                run = V.Pass(1)
                for v in vs:
                    V.vadd(cells, 0, run, v.copy(), n, adopt)
                run.flush(cells)
                want = cur
                for i in range(n):  # element 0's adds, then element 1's, ...
                    for v in vs:
                        want = float(v[i]) if want is None else want + float(v[i])
                assert _same(np.float64(cells[0]), np.float64(want)), (cur, parts, adopt)


# ----------------------------------------------------------------- through the API

DOT = "def dot(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> a ! i * b ! i))"
TWICE = ("def f(a : Array R, b : Array R) : R = "
         "sum (build (length a) (\\i -> let t = a ! i * b ! i in t * t + a ! i))")
LSE = ("def lse(a : Array R) : R = let m = fold (\\p -> max(fst p, snd p)) a in "
       "log (sum (map (\\x -> exp (x - m)) a)) + m")
SHARED = "def f(a : Array R, c : R) : R = sum (map (\\x -> x * c - c * c) a)"


@pytest.mark.parametrize("text", [DOT, TWICE, LSE, SHARED])
@pytest.mark.parametrize("evm", ["array", "map", "parallel"])
def test_gradients_leave_inputs_alone_and_own_their_data(text, evm):
    rng = np.random.default_rng(11)
    n = 9
    a = rng.normal(size=n)
    a[2] = -0.0
    args = (a, rng.normal(size=n)) if "b :" in text else (a,) if "lse" in text else (a, 0.7)
    before = [np.array(x, copy=True) if isinstance(x, np.ndarray) else x for x in args]
    value, grads = chad.grad(text, evm=evm)(*args)
    ivalue, igrads = chad.grad(text, evm=evm, backend="interp")(*args)
    for x, y in zip(args, before):
        assert _same(x, y)  # the inputs are untouched
    assert value == ivalue
    arrays = [g for g in grads if isinstance(g, np.ndarray)]
    for g, ig in zip(grads, igrads):
        np.testing.assert_allclose(g, ig, rtol=1e-12, atol=0)
        assert np.array_equal(np.signbit(g), np.signbit(ig))
    for g in arrays:
        assert g.flags.writeable and g.flags.owndata
        assert not any(np.shares_memory(g, x) for x in args if isinstance(x, np.ndarray))
    for i, g in enumerate(arrays):
        assert not any(np.shares_memory(g, h) for h in arrays[i + 1:])


def test_dot_gradient_bit_for_bit_and_its_negative_zeros():
    a = np.array([1.0, -0.0, 2.0, 0.0, -3.0])
    b = np.array([-0.0, 5.0, -0.0, -1.0, 0.0])
    for ctg in (1.0, -0.0, 0.0, -2.0):
        v, g = chad.grad(DOT)(a, b, ctg=ctg)
        iv, ig = chad.grad(DOT, backend="interp")(a, b, ctg=ctg)
        assert v == iv and all(_same(x, y) for x, y in zip(g, ig)), ctg


def test_a_vjp_keeps_its_own_copy_of_the_inputs():
    a, b = np.arange(4.0), np.ones(4)
    value, back = chad.vjp(DOT)(a, b)
    a[:] = 100.0  # the caller changes its array after the forward pass
    ga, gb = back(1.0)
    assert _same(ga, np.ones(4)) and _same(gb, np.arange(4.0))


# ----------------------------------------------------------------- the allocator


def _memory_setting(env_value):
    env = dict(os.environ)
    env.pop("CHAD_MALLOC", None)
    if env_value is not None:
        env["CHAD_MALLOC"] = env_value
    code = ("import chad.memory as m; print(m.keep_freed_memory(), "
            "m.keep_freed_memory())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=ROOT, check=True)
    return out.stdout.split()


def test_the_allocator_setting_and_its_opt_out():
    import platform

    glibc = platform.libc_ver()[0] == "glibc"
    assert _memory_setting(None) == [str(glibc)] * 2
    assert _memory_setting("system") == ["False", "False"]


REPEATED = ("def f(c : R, xs : Array R) : R = "
            "sum (map (\\x -> (x * c) * (x * c) + tanh (x * c) * tanh (x * c) + x * c) xs)")


@pytest.mark.parametrize("evm", ["array", "parallel"])
def test_a_repeated_expression_is_computed_once_and_never_changed_by_an_add(evm):
    """The batched region computes `x * c` and `tanh (x * c)` once (vectorise.py,
    Batcher._cse), and its backpropagator reads the forward pass's arrays of
    them instead of computing them again (Batcher.outer); a value an add takes
    over in place is not served again, so
    the gradients are the interpreter's (elementwise products and sums bit for
    bit; numpy's tanh within 1e-12)."""
    from chad.api_core import load
    from chad.compile import backend

    prog = load(REPEATED)
    src = backend.gradient_module(prog, prog.defs[-1], "efficient", evm).source
    # tanh (x * c): once in the forward pass, read (not recomputed) by the
    # batched backpropagator, which gets the forward's array as a parameter
    assert src.count("_np.tanh(") == 1, src
    assert src[src.index("def vb"):].count("_np.tanh(") == 0, src
    rng = np.random.default_rng(2)
    xs = rng.normal(size=11)
    xs[3] = -0.0
    for c in (0.7, -1.3, 0.0):
        v, (gc, gx) = chad.grad(REPEATED, evm=evm)(c, xs)
        iv, (igc, igx) = chad.grad(REPEATED, evm=evm, backend="interp")(c, xs)
        np.testing.assert_allclose(gx, igx, rtol=1e-12, atol=1e-300)
        assert abs(gc - igc) <= 1e-12 * max(1.0, abs(igc)) and abs(v - iv) <= 1e-12 * abs(iv)


def test_two_dense_arrays_are_added_in_place_into_one_only_the_bag_holds():
    """BPlus of two dense arrays, the first free of -0.0 (0.0 + w1 is w1): the
    sum goes into whichever array only the bag holds, else into a new one; the
    values are the general scatter's, bit for bit."""
    n = 6
    w1 = np.array([0.0, 2.0, np.inf, 1.0, 0.0, 5.0])
    w2 = np.array([-0.0, 1.0, -np.inf, np.nan, 0.0, -5.0])
    want = _general(BPlus(BArray(w1.copy()), BArray(w2.copy())), n)
    # neither held elsewhere: the sum is one of them, the other is not changed
    bag = BPlus(BArray(NO_NEG_ZERO.add(w1.copy())), BArray(w2.copy()))
    left, right = bag.left, bag.right
    out = to_dense(bag, n, LR())
    assert _same(out, want) and (out is right.vals or out is left.vals)
    # both held by the caller too: a new array, neither changed
    a, b = NO_NEG_ZERO.add(w1.copy()), w2.copy()
    out = to_dense(BPlus(BArray(a), BArray(b)), n, LR())
    assert _same(out, want) and out is not a and out is not b
    assert _same(a, w1) and _same(b, w2)
    # the first may hold -0.0: never in place (0.0 + w1 is not w1 there)
    first = np.array([-0.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    bag = BPlus(BArray(first.copy()), BArray(w2.copy()))
    out = to_dense(bag, n, LR())
    assert _same(out, _general(BPlus(BArray(first), BArray(w2.copy())), n))
    assert out is not bag.left.vals and out is not bag.right.vals


# ----------------------------------------------------------------- review findings

IOTA_PRIMAL = "def f(a : Array R) : Array Z = build (length a) (\\i -> i)"
READ_I = "def g(a : Array R) : R = sum (build (length a) (\\i -> a ! i * toreal i))"


def test_a_build_of_its_index_is_a_new_writeable_array_for_the_caller():
    """The recorded iota is the compiled code's own (found in review: the primal
    handed it out, read-only and the same object each call)."""
    f = chad.primal(IOTA_PRIMAL)
    a = np.array([1.0, -2.0, 3.0, 0.5])
    ref = chad.primal(IOTA_PRIMAL, backend="interp")(a)
    r1, r2 = f(a), f(a)
    assert ref.flags.writeable and r1.flags.writeable
    assert r1 is not r2 and not np.shares_memory(r1, r2)
    assert list(r1) == list(ref) and not is_iota(r1)
    r1[0] = 7  # the caller's own array: later calls do not see it
    value, (ga,) = chad.grad(READ_I)(a)
    rv, (rg,) = chad.grad(READ_I, backend="interp")(a)
    assert value == rv and _same(ga, rg)
    assert list(f(a)) == [0, 1, 2, 3]


def test_the_recorded_iota_cannot_be_made_writeable():
    a = iota(9)
    with pytest.raises(ValueError):
        a.flags.writeable = True
    with pytest.raises(ValueError):
        a[0] = 5
