"""Review of the negated running sums, known.ONE_HOT and the fused arithmetic
(docs/compiler.md, "Dense accumulators", "Native loops"). The first three
tests were written failing, each on a defect since mended (the leaf
cotangents could be made writeable again; two module docs gave a stale block
size); tests whose docstring says "holds" record what was checked and found
to hold (cheap, kept as guards)."""

from __future__ import annotations

import math
import re
import sys

import numpy as np
import pytest

import chad
from chad.arrays import bag
from chad.compile import backend, kernels, known
from chad.compile.fusion import evaluate, fused

from tests.test_vectorise import agree


def _same(got, want) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    got, want = got.reshape(-1), want.reshape(-1)
    gn, wn = np.isnan(got), np.isnan(want)
    return bool((gn == wn).all()
                and (got[~gn].view(np.int64) == want[~wn].view(np.int64)).all())


def _native_only():
    if not kernels.native():
        pytest.skip("the C extension is not built")


# ----------------------------------------------------------------- failing


def test_one_hot_leaf_cotangents_cannot_be_made_writeable_again():
    """vuntree makes its leaf cotangents read-only by `out.flags.writeable =
    False` on an array that OWNS its data, so numpy lets anyone turn the flag
    back on (`iota` in known.py is deliberately a view of a read-only base for
    exactly this reason: numpy then refuses). ONE_HOT and NO_NEG_ZERO trust
    the array by identity for as long as it lives ("never changed: what
    ONE_HOT records stays true"), so once the flag is back on and the array is
    changed, `bag._add_one_hot` silently produces wrong sums (it touches
    element k only and relies on every other element being +0.0). The
    invariant the optimisation needs is not enforced the way iota's is."""
    from chad.compile.vector_support import VecTree, vuntree
    hot = vuntree(2.0, VecTree(1.0, 1, 3, None))([])
    with pytest.raises(ValueError):
        hot.flags.writeable = True  # as for known.iota: numpy must refuse


def test_one_hot_recorded_facts_lie_after_a_write_gives_wrong_dense_sum():
    """The consequence of the above: the leaf cotangents changed after being
    recorded (here element 0 set to 5.0 once writes are re-enabled) are still
    ONE_HOT(k=1) and NO_NEG_ZERO, so dense_real(take=True) returns w with only
    element 1 updated; the general path (what the evaluator computes:
    0.0 + hot + w) gives 6.0 at element 0. Wrong values, silently."""
    from chad.compile.vector_support import VecTree, vuntree
    hot = vuntree(2.0, VecTree(1.0, 1, 3, None))([])
    try:
        hot.flags.writeable = True
    except ValueError:
        return  # enforced: the facts cannot be broken this way
    hot[0] = 5.0
    w = known.NO_NEG_ZERO.add(np.array([1.0, 2.0, 3.0]))
    b = bag.BPlus(bag.BArray(hot), bag.BArray(w))
    del w
    want = [0.0 + 5.0 + 1.0, 0.0 + 2.0 + 2.0, 0.0 + 0.0 + 3.0]
    assert bag.dense_real(b, 3, take=True).tolist() == want


def test_docstrings_state_the_fused_block_size_the_c_loop_uses():
    """kernels.py's module doc and fusion.py's module doc say the C loop takes
    blocks of 512 elements; _kernels.c's FUSE_BLOCK is 256 (the HEAD commit
    changed it) and docs/compiler.md says 256. Stale documentation of the
    memory behaviour of the new kernel (low severity)."""
    import pathlib

    from chad.compile import fusion
    root = pathlib.Path(kernels.__file__).parent
    block = int(re.search(r"#define FUSE_BLOCK (\d+)", (root / "_kernels.c").read_text()).group(1))
    for doc in (kernels.__doc__, fusion.__doc__):
        sizes = [int(s) for s in re.findall(r"blocks of (\d+) elements", doc)]
        assert sizes and all(s == block for s in sizes), (sizes, block)


# ----------------------------------------------------------------- holds


def test_fuse_matches_numpy_on_many_layouts_holds():
    """holds: kernels.fuse against the expression's numpy operators, bit for
    bit (NaN as NaN), on 1-5-D shapes around the block size (255/256/257/513
    columns, many short rows), broadcast axes, reversed, every-other and
    every-third-reversed views, Fortran order, stride-0 broadcast_to views
    and real leaves."""
    _native_only()
    rng = np.random.default_rng(11)

    def mk(shape):
        a = rng.normal(size=shape)
        r, nd = rng.random(), len(shape)
        if r < 0.2 and nd >= 2:
            a = np.moveaxis(rng.normal(size=tuple(reversed(shape))), range(nd),
                            list(reversed(range(nd))))
        elif r < 0.4 and nd:
            ax = int(rng.integers(0, nd))
            sl = [slice(None)] * nd
            sl[ax] = slice(None, None, -1)
            a = a[tuple(sl)]
        elif r < 0.55 and nd:
            ax = int(rng.integers(0, nd))
            big = list(shape)
            big[ax] = 2 * shape[ax] + 1
            sl = [slice(None)] * nd
            sl[ax] = slice(1, None, 2)
            a = rng.normal(size=big)[tuple(sl)]
        elif r < 0.65:
            a = np.broadcast_to(rng.normal(size=(1,) * nd), shape)
        return a

    ran = 0
    for _ in range(250):
        nd = int(rng.integers(1, 6))
        dims = [int(rng.choice([1, 2, 3, 7, 17, 255, 256, 257, 513])) for _ in range(nd)]
        while np.prod(dims) > 40000:
            dims[int(rng.integers(0, nd))] = 2
        env = {}
        for k in range(int(rng.integers(1, 5))):
            if rng.random() < 0.15:
                env[f"v{k}"] = float(rng.normal())
                continue
            shp = [d if rng.random() < 0.7 else 1 for d in dims][int(rng.integers(0, nd)):]
            env[f"v{k}"] = mk(shp)
        names = list(env)

        def ex(d):
            if d == 0 or rng.random() < 0.2:
                return str(rng.choice(names)) if rng.random() < 0.9 else "0.5"
            if rng.random() < 0.15:
                return f"(-{ex(d - 1)})"
            return f"({ex(d - 1)} {rng.choice(list('+-*/'))} {ex(d - 1)})"

        text = ex(4)
        call = fused(text)
        if call is None:
            continue
        head, rest = call[len("_vfuse("):-1].split(", ", 1)
        leaves = eval(f"({rest},)", {}, env)
        try:
            with np.errstate(all="ignore"):
                want = eval(text, {}, env)
        except (ValueError, ZeroDivisionError):
            continue
        got = kernels.fuse(eval(head), *leaves)
        assert _same(got, want), text
        ran += 1
    assert ran > 100


def test_fuse_sixteen_dims_and_no_leaks_holds():
    """holds: 16-D operands (the C limit) with broadcasting and a fully
    reversed transpose give numpy's values; 17-D falls back; the leaves' and
    the code's reference counts are unchanged after 1000 calls, on the C path
    and on each fallback (int array, big-endian, shapes that do not
    broadcast)."""
    _native_only()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2,) * 16)
    y = rng.normal(size=(2, 1) * 8)
    z = x.transpose(list(range(15, -1, -1)))
    assert _same(kernels.fuse(b"01+2*", x, y, z), (x + y) * z)
    x17 = rng.normal(size=(1,) * 17)
    assert _same(kernels.fuse(b"01+0*", x17, 1.0), (x17 + 1.0) * x17)
    a = np.arange(12.0).reshape(3, 4)
    code = b"01*2+"
    for leaves in [(a, np.arange(4.0), 2.5), (a, np.arange(4), 2.5),
                   (a, a.astype(">f8"), 2.5), (a, np.ones(5), 2.5)]:
        before = [sys.getrefcount(v) for v in leaves] + [sys.getrefcount(code)]
        for _ in range(1000):
            try:
                kernels._native.fuse(code, leaves)
            except ValueError:
                pass
        assert [sys.getrefcount(v) for v in leaves] + [sys.getrefcount(code)] == before


def test_fused_code_survives_register_renaming_holds():
    """holds: the bytes literal of `_vfuse` has no lowercase letter, quote or
    backslash for any leaf count up to MAX_LEAVES, so registers.py's renaming
    (`[a-z]+[0-9]+`) never rewrites it, and the call is valid Python."""
    from chad.compile.fusion import MAX_LEAVES
    for k in range(3, MAX_LEAVES + 1):  # at least two operations
        call = fused(" + ".join(f"v{j}" for j in range(1, k + 1)))
        lit = call[len("_vfuse("):call.index(", ")]
        assert re.fullmatch(r"b'[0-9:;<=>?@A-W+\-*/~]+'", lit), lit
        compile(call, "<fused>", "eval")


NESTED = [
    "def f(a : Array R, xs : Array R) : R = sum (build (length xs) (\\i -> sum (build "
    "(length a) (\\c -> (xs ! i - a ! c) * (xs ! i + a ! c) / (a ! c * 2.0 - xs ! i)))))",
    "def f(a : Array R, xs : Array R) : R = sum (build (length xs) (\\i -> sum (build "
    "(length a) (\\c -> -(xs ! i * a ! c) - (a ! c - xs ! i) * (xs ! i / 3.0)))))",
    "def f(a : Array R, xs : Array R) : R = sum (build (length xs) (\\i -> fold "
    "(\\p -> min(fst p, snd p)) (build (length a) (\\c -> (xs ! i - a ! c) * (xs ! i - a ! c) "
    "+ xs ! i * a ! c))))",
]


@pytest.mark.parametrize("text", NESTED)
def test_fused_nested_gradients_are_the_interpreters_bit_for_bit_holds(text):
    """holds: gradients of nested loops of + - * / (which get `_vfuse`) equal
    the interpreter's bit for bit (not within a tolerance, as
    test_fusion.py's gmm-like test), with zeros of both signs, NaNs of both
    signs, infinities, subnormals, huge values and empty arrays, on the array
    and parallel runtimes."""
    prog = chad.load(text)
    assert "_vfuse(" in backend.gradient_module(prog, prog.find(None)).source
    nan = math.nan
    rng = np.random.default_rng(len(text))
    inputs = [(rng.normal(size=4), rng.normal(size=300)),
              (np.array([0.0, -0.0, 1e308, -1e308, math.inf]),
               np.array([-0.0, 0.0, nan, -nan, 1e-310, 2.0])),
              (np.array([]), np.array([1.0])), (np.array([1.0, 2.0]), np.array([]))]
    ref = chad.grad(text, backend="interp")
    for evm in ("array", "parallel"):
        comp = chad.grad(text, evm=evm)
        for a, xs in inputs:
            if "fold" in text and not len(a):
                continue  # a fold of an empty array: an error on both
            agree(comp(a, xs), ref(a, xs), True)


FOLDS = [
    "def f(a : Array R, xs : Array R) : R = let m = fold (\\p -> max(fst p, snd p)) a in "
    "sum (map (\\x -> x * m) xs) + sum (map (\\y -> y * m) a)",
    "def f(a : Array R, xs : Array R) : R = let b = map (\\x -> x * 2.0) a in "
    "fold (\\p -> max(fst p, snd p)) b + fold (\\p -> max(fst p, snd p)) b + sum b",
    "def f(a : Array R, xs : Array R) : R = sum (map (\\x -> x * "
    "fold (\\p -> max(fst p, snd p)) a) xs)",
]


@pytest.mark.parametrize("text", FOLDS)
def test_one_hot_leaf_cotangents_in_more_contexts_holds(text):
    """holds: a fold's read-only leaf cotangents added together with other
    cotangents of the same array (twice, inside a map, through a map's
    result) neither crash on the read-only array nor differ from the
    interpreter, and the gradient handed back is writeable."""
    rng = np.random.default_rng(4)
    ref = chad.grad(text, backend="interp")
    for evm in ("array", "parallel"):
        comp = chad.grad(text, evm=evm)
        for a, xs in [(rng.normal(size=40), rng.normal(size=30)),
                      (np.array([1.0, 3.0, 3.0, -2.0]), np.array([1.0, -1.0])),
                      (np.array([-0.0, 0.0]), np.array([0.0, -0.0]))]:
            for ctg in (1.0, -1.0, 0.0, 1e308):
                got = comp(a, xs, ctg=ctg)
                agree(got, ref(a, xs, ctg=ctg), True)
                assert got[1][0].flags.writeable


def test_evaluate_is_the_expression_holds():
    """holds: fusion.evaluate (the fallback) gives the expression's values and
    types for ints, numpy scalars and mixed leaves."""
    for text, env in [("(v1 * v2) - (-v1)", {"v1": 3, "v2": 2.5}),
                      ("((v1 / v2) + v1) * v2", {"v1": np.float64(2.0), "v2": np.arange(3)})]:
        call = fused(text)
        head, rest = call[len("_vfuse("):-1].split(", ", 1)
        with np.errstate(all="ignore"):
            got = evaluate(eval(head), eval(f"({rest},)", {}, env))
            want = eval(text, {}, env)
        assert type(got) is type(want) and np.array_equal(got, want, equal_nan=True)
