"""Review of four commits: the extension's loops built for AVX2 and the baseline
(e0318ea, `WIDE_LOOP`), a single loop's batched backpropagator capturing only
what it reads (0a1bbb8, vectorise.back_function_tree), scatter_reals' lazy
zeros (c7b8a97, chad/arrays/bag.py), and docs (477421f).

No bug found in them; these tests keep what was checked:

* the loops moved into `WIDE_LOOP` functions, in the installed module (its
  AVX2 clones where the machine has AVX2) against a build of the same file
  with the clones off and -mno-avx2 (the baseline's code): select and the
  fold trees bit for bit, NaN payloads included; colsum (start, col, add,
  out being start, strided and reversed out), scaled (with add) and dots the
  same bits wherever the result is not a NaN, and a NaN where the other has
  one (where two NaNs meet, which one is the result changes with the vector
  width: `docs/compiler.md`, "Values" -- e.g. scaled of col = NaN(payload 1)
  and block = -NaN(payload 2) gives -NaN(2) in SSE2 and NaN(1) in the AVX2
  clone; IEEE's choice, not promised);
* the fold trees across blocks of rows (more rows than one block), with ties
  of 0.0 / -0.0 and NaNs of distinct payloads keeping the left, against the
  evaluator's balanced reduction;
* no reference or buffer leaked by colsum, scaled, select, tree and dots,
  on success and on every error path;
* the batched backpropagator's parameters and the atoms passed to it agree in
  number and order (a dropped capture between two kept ones), every captured
  parameter is read, and compiled gradients agree with the interpreter on
  the array, parallel and map runtimes (closures capturing several values,
  values read only by the forward pass, captured values read twice, `if` in
  map bodies, pairs, nested lambdas);
* scatter_reals against the parent commit's version on fuzzed bags (BOne,
  BPlus, BChain, BRows, BArray with and without indices, shorter arrays,
  strided / reversed / broadcast values, BEMPTY, None, NaN payloads, signed
  zeros): the same bits, a new writable array that never shares memory with
  a leaf's values, and the leaves untouched.
"""

from __future__ import annotations

import importlib.util
import math
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

import chad
from chad.arrays import bag as bagmod
from chad.arrays.bag import BEMPTY, BArray, BChain, BOne, BPlus, BRows, leaves, scatter_reals
from chad.compile import backend, kernels
from tests.test_scatter_reals import _reference

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "chad" / "compile" / "_kernels.c"

NANS = np.array([0x7FF8000000000001, 0xFFF8000000000ABC, 0x7FF0000000000001,
                 0xFFF4000000000000, 0x7FF8DEAD00000000], dtype=np.uint64).view(np.float64)
SPECIALS = np.array([0.0, -0.0, math.inf, -math.inf, 5e-324, -5e-324, 2.2250738585072014e-308 / 3,
                     1e308, -1e308, 1.0, -1.0, 3.0])


def _adversarial(rng, shape):
    """Reals of every magnitude, signed zeros, infinities, subnormals and NaNs
    of several payloads and both signs."""
    x = rng.standard_normal(shape) * np.exp(rng.uniform(-700, 700, shape))
    flat = x.reshape(-1)
    k = rng.integers(0, 3, flat.size)
    flat[k == 0] = SPECIALS[rng.integers(0, len(SPECIALS), flat.size)][k == 0]
    m = rng.random(flat.size) < 0.1
    flat[m] = NANS[rng.integers(0, len(NANS), flat.size)][m]
    return x


def _u64(a):
    return np.ascontiguousarray(a).view(np.uint64).copy()


# ------------------------------------------------------------ the C loops


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """(installed module, the same source built without clones for the
    baseline x86-64: no AVX2)."""
    if not kernels.native():
        pytest.skip("the C extension is not built")
    gcc = shutil.which("gcc")
    if gcc is None or sys.platform != "linux":
        pytest.skip("no gcc to build the baseline")
    text = SOURCE.read_text()
    guard = ("#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && "
             "defined(__linux__)")
    assert text.count(guard) >= 1
    d = tmp_path_factory.mktemp("baseline")
    src = d / "_kernels.c"
    src.write_text(text.replace(guard, "#if 0"))
    so = d / ("_kernels" + sysconfig.get_config_var("EXT_SUFFIX"))
    flags = ["-O3", "-fno-fast-math", "-ffp-contract=off", "-shared", "-fPIC",
             "-I" + sysconfig.get_paths()["include"]]
    if "x86_64" in (sysconfig.get_platform() or ""):
        flags.append("-mno-avx2")
    done = subprocess.run([gcc, *flags, "-o", str(so), str(src)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip("the baseline did not build: " + done.stderr[-500:])
    spec = importlib.util.spec_from_file_location("review_wide_baseline._kernels", so)
    base = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(base)
    return kernels._native, base


def _same_or_nan(a, b) -> bool:
    """The same bits, or both NaN (of any payload)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    na, nb = np.isnan(a), np.isnan(b)
    return bool((na == nb).all()) and (_u64(a)[~na] == _u64(b)[~nb]).all()


def _blocks(rng, n, m):
    big = _adversarial(rng, (2 * n + 1, 2 * m + 1))
    out = [big[:n, :m], big[::2, ::2][:n, :m], big[::-1][:n, :m], big[:n, :m][:, ::-1],
           big[::-2][:n, ::-1][:, :m], np.asfortranarray(big[:n, :m]),
           np.broadcast_to(big[0, :m], (n, m)), np.broadcast_to(big[:n, :1], (n, m))]
    return [b for b in out if b.shape == (n, m)]


SHAPES = [(0, 3), (1, 1), (1, 7), (3, 1), (5, 4), (7, 9), (17, 33), (64, 5), (3, 130),
          (100, 257), (257, 3)]


@pytest.mark.parametrize("n,m", SHAPES)
def test_colsum_scaled_dots_clones_are_the_baselines_values(builds, n, m):
    """colsum (with start, col, add; out being start; strided and reversed
    out) and scaled (with add) and dots: the AVX2 clones' results are the
    baseline's bits wherever they are not NaN, NaN where it has one."""
    inst, base = builds
    rng = np.random.default_rng(n * 1000 + m)
    for blk in _blocks(rng, n, m):
        col, st = _adversarial(rng, n), _adversarial(rng, m)
        for c in (None, col, col[::-1], np.broadcast_to(col[:1], (n,)) if n else col):
            for add in ([None] if c is None else [None, 0.0, -0.0, 2.5, float(NANS[1]), math.inf]):
                for start in (None, st, st[::-1]):
                    got = []
                    for mod in (inst, base):
                        out = np.empty(m)
                        mod.colsum(c, blk, add, start, out)
                        buf = np.full(3 * m + 1, 7.0)
                        views = [buf[::2][:m], buf[::-1][:m]]
                        for v in views:
                            v[:] = st
                            mod.colsum(c, blk, add, v, v)
                        got.append((out, buf))
                    assert _same_or_nan(got[0][0], got[1][0]), (c is None, add, start is None)
                    assert _same_or_nan(got[0][1], got[1][1])
                if c is not None:
                    pair = []
                    for mod in (inst, base):
                        out = np.empty((n, m))
                        mod.scaled(c, blk, add, out)
                        pair.append(out)
                    assert _same_or_nan(*pair), add
        other = _adversarial(rng, (n, m))
        for b2 in (other, other[::-1], np.broadcast_to(other[:1], (n, m)) if n else other):
            pair = []
            for mod in (inst, base):
                out = np.empty(n)
                mod.dots(blk, b2, out)
                pair.append(out)
            assert _same_or_nan(*pair)


@pytest.mark.parametrize("n,m", SHAPES + [(300, 1), (1000, 2), (1000, 7), (50, 64)])
def test_tree_clones_are_the_baselines_bits(builds, n, m):
    """The fold trees: value bits (NaN payloads included) and leaves the
    baseline's, on adversarial rows and on rows of ties and NaNs only."""
    inst, base = builds
    rng = np.random.default_rng(n + 7 * m)
    pool = np.concatenate([[0.0, -0.0, 1.0, -1.0, math.inf, -math.inf], NANS])
    for blk in _blocks(rng, n, m) + [pool[rng.integers(0, len(pool), (n, m))]]:
        for is_max in (True, False):
            got = []
            for mod in (inst, base):
                v, k = np.empty(n), np.empty(n, np.int64)
                mod.tree(blk, is_max, v, k)
                got.append((_u64(v), k))
            assert (got[0][0] == got[1][0]).all() and (got[0][1] == got[1][1]).all()


@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 7, 8, 31, 1000, 1003])
def test_select_clones_are_the_baselines_bits(builds, n):
    """select: every stride case (contiguous, strided, reversed, broadcast,
    Python floats, bool bytes other than 0 and 1) the baseline's bits, NaN
    payloads included, and np.where's."""
    inst, base = builds
    rng = np.random.default_rng(n)
    a, b = _adversarial(rng, 2 * n + 1), _adversarial(rng, 2 * n + 1)
    mk = rng.random(2 * n + 1) < 0.5
    odd = np.frombuffer(rng.integers(0, 256, 2 * n + 1, dtype=np.uint8).tobytes(), dtype=np.bool_)
    for mask in (mk[:n], mk[::2][:n], mk[::-1][:n], odd[:n], odd[::2][:n],
                 np.broadcast_to(mk[:1], (n,))):
        for x in (a[:n], a[::2][:n], a[::-1][:n], np.broadcast_to(a[:1], (n,)), float(NANS[1]),
                  -0.0):
            for y in (b[:n], b[1::2][:n], np.broadcast_to(b[:1], (n,)), float(NANS[4]), -0.0):
                got = []
                for mod in (inst, base):
                    out = np.empty(n)
                    mod.select(mask, x, y, out)
                    got.append(_u64(out))
                assert (got[0] == got[1]).all()
                want = np.where(mask.view(np.uint8) != 0, x, y)
                assert (got[0] == _u64(np.broadcast_to(want, (n,)))).all()


def _tree_by_python(row, is_max):
    """The evaluator's balanced fold of one row (chad/arrays/evaluate.py)."""
    from chad.arrays.evaluate import reduce_balanced

    def combine(left, right):
        return (right if (right[0] > left[0] if is_max else right[0] < left[0]) else left), 0

    return reduce_balanced([(x, j) for j, x in enumerate(row)], combine)[0]


@pytest.mark.parametrize("m", [1, 2, 3, 5, 8, 9, 64, 129])
def test_the_tree_loop_across_blocks_of_rows_is_the_evaluators(m):
    """More rows than one block of the loop (B = 2^15 / (2 m), at most 256):
    ties of 0.0 and -0.0 and NaNs of distinct payloads keep the left, the
    value's bits the winning element's."""
    if not kernels.native():
        pytest.skip("the C extension is not built")
    rng = np.random.default_rng(m)
    n = 2 * min(256, max(1, (1 << 15) // (2 * m))) + 3
    pool = np.concatenate([[0.0, -0.0, 1.0, -1.0, math.inf, -math.inf], NANS])
    x = pool[rng.integers(0, len(pool), (n, m))]
    for rows in (x, x[::-1], np.asfortranarray(x)):
        for is_max in (True, False):
            vals, leaves_ = kernels.tree(rows, is_max)
            for i in range(n):
                row = [float(v) for v in rows[i]]
                want = _tree_by_python(row, is_max)
                assert int(leaves_[i]) == want[1]
                assert _u64(vals[i:i + 1])[0] == _u64(np.array([want[0]]))[0]


def test_the_loops_leak_no_reference_or_buffer():
    """colsum, scaled, select, tree and dots release every buffer they took,
    on success and on each error path (the arrays' reference counts are
    unchanged after a thousand calls)."""
    if not kernels.native():
        pytest.skip("the C extension is not built")
    k = kernels._native
    a2 = np.random.default_rng(0).standard_normal((50, 40))
    col, st, o1, o2 = np.ones(50), np.ones(40), np.empty(40), np.empty((50, 40))
    mk, av, bv, ov = np.ones(40, bool), np.ones(40), np.ones(40), np.empty(40)
    v, lv, d = np.empty(50), np.empty(50, np.int64), np.empty(50)
    objs = [a2, col, st, o1, o2, mk, av, bv, ov, v, lv, d]
    calls = [
        lambda: k.colsum(col, a2, 1.5, st, o1), lambda: k.colsum(None, a2, None, None, o1),
        lambda: k.colsum(col, a2, None, st, o2), lambda: k.colsum(col[:3], a2, None, st, o1),
        lambda: k.colsum(col, a2, "x", st, o1), lambda: k.colsum(col, a2, 1.0, st[:3], o1),
        lambda: k.scaled(col, a2, 2.0, o2), lambda: k.scaled(col, a2, None, o1),
        lambda: k.scaled(col[:3], a2, None, o2), lambda: k.scaled(col, a2, None, o2.T),
        lambda: k.select(mk, av, bv, ov), lambda: k.select(mk, 1.0, bv, ov),
        lambda: k.select(mk[:3], av, bv, ov), lambda: k.select(mk, av[:3], bv, ov),
        lambda: k.select(av, av, bv, ov), lambda: k.select(mk, av, bv, o2),
        lambda: k.tree(a2, True, v, lv), lambda: k.tree(a2, False, v[:3], lv),
        lambda: k.tree(a2[:, :0], True, v, lv), lambda: k.tree(col, True, v, lv),
        lambda: k.tree(a2, True, v, d), lambda: k.dots(a2, a2, d), lambda: k.dots(a2, a2[:3], d),
    ]
    for i, call in enumerate(calls):
        before = [sys.getrefcount(o) for o in objs]
        for _ in range(1000):
            try:
                call()
            except (TypeError, ValueError):
                pass
        assert [sys.getrefcount(o) for o in objs] == before, i


# ------------------------------------------------------------ captures


PROGRAMS = {
    "map-closure": "def f(w : R, xs : Array R) : R = let f = \\(x : R) -> tanh (w * x) * x in "
                   "sum (map f xs)",
    "map-if": "def f(w : R, xs : Array R) : R = "
              "sum (map (\\x -> if x > 0.0 then x * w else 0.01 * x * w) xs)",
    "several": "def f(a : R, b : R, c : R, xs : Array R) : R = "
               "sum (map (\\x -> a * x + b * sin x + c) xs)",
    "forward-only": "def f(a : R, b : R, xs : Array R) : R = let k = a * b in "
                    "sum (map (\\x -> k + x * x) xs)",
    "read-twice": "def f(w : R, xs : Array R) : R = sum (map (\\x -> w * x * w) xs)",
    "if-captures": "def f(a : R, b : R, c : R, xs : Array R) : R = "
                   "sum (map (\\x -> if x > a then b * x else c * x * x) xs)",
    "if-forward": "def f(a : R, b : R, c : R, xs : Array R) : R = "
                  "sum (map (\\x -> if x > a then tanh (b * x) else exp (c * x) * b) xs)",
    "if-nested": "def f(a : R, b : R, c : R, xs : Array R) : R = sum (map (\\x -> if x > a then "
                 "(if x > b then x * c else x * a) else c * b * x) xs)",
    "if-compare": "def f(a : R, b : R, c : R, xs : Array R) : R = "
                  "sum (map (\\x -> if x * b > a then tanh (x * b) * c else c * x) xs)",
    "tanh-affine": "def f(w : R, b : R, v : R, xs : Array R) : R = "
                   "sum (map (\\x -> tanh (w * x + b) * v) xs)",
    "dropped-between": "def f(a : R, b : R, c : R, d : R, xs : Array R) : R = "
                       "sum (map (\\x -> d * x + b * tanh (x) + a + c * x * x) xs)",
    "pair": "def f(a : R, b : R, xs : Array R) : R = let p = (a * b, a + b) in "
            "sum (map (\\x -> fst p * x + snd p * x * x) xs)",
    "nested-lambdas": "def f(w : R, v : R, xs : Array R) : R = let g = \\(x : R) -> x * w in "
                      "let k = \\(y : R) -> g y * v + g (y * y) in sum (map k xs)",
    "build-if": "def f(a : Array R, w : R, v : R) : R = sum (build (length a) (\\i -> "
                "if a ! i > w then tanh (a ! i * v) * w else a ! i * v * v))",
    "affine": "def f(w : Array (Array R), b : Array R, x : Array R) : R = sum (build (length w) "
              "(\\i -> tanh (sum (build (length x) (\\j -> w ! i ! j * x ! j)) + b ! i)))",
}
# the evaluator's bits exactly (no transcendental function of numpy's, no
# lambda inlined: docs/compiler.md, "Values")
EXACT = {"map-if", "several", "forward-only", "read-twice", "if-captures", "if-nested",
         "if-compare", "pair"}

_DEF = re.compile(r"^def (vb[0-9]+)\((.*)\):$", re.M)
_BACK = re.compile(r"_VecBack\((vb[0-9]+), [^,]+, \(([^()]*)\)")


def _args(text, n, rng):
    header = re.match(r"def \w+\((.*?)\)\s*:", text).group(1)
    out = []
    for part in header.split(","):
        ty = part.split(":")[1].strip()
        if ty == "R":
            out.append(float(rng.normal()))
        elif ty == "Array R":
            x = rng.normal(size=n)
            x[1::7] = -0.0
            out.append(x)
        else:
            out.append(tuple(rng.normal(size=n) for _ in range(n)))
    return tuple(out)


def _flat(x):
    if isinstance(x, (tuple, list)):
        return [y for z in x for y in _flat(z)]
    return list(np.asarray(x, dtype=np.float64).ravel())


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_atoms_passed_match_the_parameters(name):
    """Every `_VecBack(vbN, n, (atoms...))` passes as many atoms as vbN has
    captured parameters (all but its last four), and vbN reads each of
    them."""
    prog = chad.load(PROGRAMS[name])
    source = backend.gradient_module(prog, prog.find(None)).source
    defs = {m.group(1): [p.strip() for p in m.group(2).split(",")] for m in _DEF.finditer(source)}
    for m in _DEF.finditer(source):
        body = source[m.end():].split("\ndef ", 1)[0]
        read = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", body))
        assert all(p in read for p in defs[m.group(1)][:-4]), (m.group(1), defs[m.group(1)])
    for m in _BACK.finditer(source):
        atoms = [a.strip() for a in m.group(2).split(",") if a.strip()]
        assert len(atoms) == len(defs[m.group(1)]) - 4, (m.group(0), defs[m.group(1)])


@pytest.mark.parametrize("n", [0, 1, 2, 9, 130])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_compiled_gradients_are_the_interpreters_on_every_runtime(name, n):
    text = PROGRAMS[name]
    args = _args(text, n, np.random.default_rng(n))
    want = _flat(chad.grad(text, backend="interp")(*args))
    for evm in ("array", "parallel", "map"):
        got = _flat(chad.grad(text, evm=evm)(*args))
        assert len(got) == len(want)
        g, w = np.array(got), np.array(want)
        if name in EXACT:
            assert _same_or_nan(g, w), evm
        else:
            assert np.allclose(g, w, rtol=1e-10, atol=1e-13, equal_nan=True), evm
    p, q = chad.primal(text)(*args), chad.primal(text, backend="interp")(*args)
    assert math.isclose(p, q, rel_tol=1e-10, abs_tol=1e-13) or (math.isnan(p) and math.isnan(q))


# ------------------------------------------------------------ scatter_reals


def _reals(rng, k):
    x = rng.standard_normal(k) * 10.0 ** rng.integers(-300, 300, k)
    r = rng.random(k)
    x[r < 0.15] = -0.0
    x[(r > 0.2) & (r < 0.23)] = math.inf
    x[(r > 0.23) & (r < 0.26)] = -math.inf
    x[(r > 0.26) & (r < 0.3)] = 5e-324 * rng.integers(-3, 3, k)[(r > 0.26) & (r < 0.3)]
    m = (r > 0.3) & (r < 0.35)
    x[m] = NANS[rng.integers(0, len(NANS), m.sum())]
    return x


def _leaf(rng, n):
    k = int(rng.integers(0, 12))
    if k == 0:
        return BOne(int(rng.integers(0, max(n, 1))), float(_reals(rng, 1)[0]))
    if k == 1:
        return BEMPTY
    if k == 2:
        return None
    if k in (3, 4, 5):
        c = int(rng.integers(0, 5))
        v = [_reals(rng, n), _reals(rng, 2 * n)[::2], _reals(rng, n)[::-1],
             np.broadcast_to(_reals(rng, 1), (n,)), _reals(rng, n)][c]
        return BArray(v)
    if k == 6:
        return BArray(_reals(rng, int(rng.integers(0, n + 1))))  # shorter
    if k == 7:
        return BArray(_reals(rng, n), np.arange(n))  # the identity, given
    if k == 8:
        m = int(rng.integers(0, 2 * n + 1))
        return BArray(_reals(rng, m), rng.integers(0, max(n, 1), m))
    if k == 9:
        return BRows(_reals(rng, int(rng.integers(0, 4)) * n).reshape(-1, n) if n
                     else np.zeros((2, 0)))
    if k == 10:
        r, m = int(rng.integers(0, 4)), int(rng.integers(0, 3))
        parts = [(_reals(rng, r * m).reshape(r, m), rng.integers(0, max(n, 1), (r, m)))
                 for _ in range(int(rng.integers(1, 3)))]
        return BChain(parts, r, m)
    with np.errstate(all="ignore"):
        return BArray(_reals(rng, n).astype(np.float32)) if rng.random() < 0.5 \
            else BArray([1.0] * n)


def _tree(rng, n, depth=0):
    if depth > 3 or rng.random() < 0.35:
        return _leaf(rng, n)
    return BPlus(_tree(rng, n, depth + 1), _tree(rng, n, depth + 1))


def test_scatter_reals_is_the_interpreters_scatter_bit_for_bit():
    """On fuzzed bags it takes (None: the general path's): the interpreter's
    scatter (zeros n) (collect bag) bit for bit, a NaN as a NaN
    (tests/test_scatter_reals.py's reference), a new writable C-ordered array sharing no memory with any
    leaf's values, the leaves untouched."""
    rng = np.random.default_rng(2026)
    taken = 0
    for _ in range(6000):
        n = int(rng.integers(0, 9))
        bag = _tree(rng, n)
        bag = BEMPTY if bag is None else bag
        firsts = [leaf.vals for leaf, _ in leaves(bag) if type(leaf) is BArray]
        snaps = [np.array(f, copy=True) if isinstance(f, np.ndarray) else None for f in firsts]
        got = scatter_reals(bag, n)
        if got is None:
            continue
        want = _reference(bag, n)
        assert got.dtype == np.float64 and got.shape == (n,)
        nan = np.isnan(want)  # (where two NaNs meet, which one is IEEE's choice)
        assert (np.isnan(got) == nan).all(), bag
        assert got[~nan].tobytes() == want[~nan].tobytes(), bag
        assert got.flags.writeable and got.flags.c_contiguous
        for f, s in zip(firsts, snaps):
            if isinstance(f, np.ndarray):
                assert not np.shares_memory(got, f)
                assert f.tobytes() == s.tobytes()
        first = next((leaf for leaf, _ in leaves(bag)), None)
        taken += type(first) is BArray and first.idx is None and \
            isinstance(first.vals, np.ndarray) and first.vals.shape == (n,)
    assert taken > 100  # the new path ran


def test_scatter_reals_first_array_is_a_new_array():
    """A bag of one BArray of n reals: a copy with -0.0 made +0.0 (0.0 + v),
    NaN payloads kept; mutating the result leaves the bag's values alone."""
    v = np.array([-0.0, 1.5, float(NANS[1]), -math.inf, 5e-324])
    got = scatter_reals(BArray(v), len(v))
    assert _u64(got).tolist() == _u64(np.array([0.0, 1.5, float(NANS[1]), -math.inf,
                                                 5e-324])).tolist()
    got[:] = 9.0
    assert v[1] == 1.5 and math.copysign(1.0, v[0]) < 0
    assert bagmod.to_dense(BArray(v), len(v), bagmod.LR()) is not v
