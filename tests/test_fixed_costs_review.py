"""Review of 80e9cbb (fixed costs of a small nested gradient). No failing case
was found: every test here PASSES on this commit; they cover cases the
commit's own tests do not (the shortcuts against the general paths they
replace, and the CSE of untyped reads on more program shapes)."""

from __future__ import annotations

import numpy as np
import pytest

import chad
from chad.arrays.bag import BEMPTY, BPlus, BRows, dense_real
from chad.arrays.nested_support import shared_adds
from chad.compile import backend
from chad.compile.known import iota


def _old_dense_real(bag, n):
    """dense_real's BRows case before the commit: BPlus(BEMPTY, bag)."""
    return dense_real(BPlus(BEMPTY, bag), n)


@pytest.mark.parametrize("rows", [
    np.zeros((0, 3)), np.array([[-0.0, -0.0, 1.0]]), np.array([[-0.0, np.nan], [-0.0, np.inf]]),
    np.arange(6, dtype=np.int64).reshape(3, 2), np.array([[1e308, -1e308], [1e308, 1e-300]]),
    np.random.default_rng(0).standard_normal((9, 4))[:, ::2],
])
def test_dense_real_of_brows_is_the_bplus_path(rows):
    """PASSES. dense_real(BRows) (the new direct column sum) gives the bytes
    the old BPlus(BEMPTY, BRows) path gave: empty and int64 rows (None),
    -0.0, NaN, inf, overflow, a non-contiguous block."""
    n = rows.shape[1]
    got, want = dense_real(BRows(rows), n), _old_dense_real(BRows(rows), n)
    if want is None:
        assert got is None
    else:
        assert got.tobytes() == want.tobytes()
    assert dense_real(BRows(rows), n + 1) is None  # (a width that is not n)


class _Cells(list):
    """(not `list` itself: shared_adds' element-by-element loop)"""


@pytest.mark.parametrize("item", [
    ("rows", np.array([[-0.0, 1.0], [np.nan, -0.0], [2.0, 3.0]]), None),
    ("rows", np.array([[-0.0, 1.0], [np.nan, -0.0], [2.0, 3.0]]), "iota"),
    ("rows", np.array([[-0.0, -0.0], [-0.0, -0.0], [-0.0, -0.0]]), None),
])
@pytest.mark.parametrize("start", ["empty", "array"])
def test_one_shared_add_of_rows_is_the_element_loops(item, start):
    """PASSES. shared_adds' one-item fast path (one BRows) gives, made
    dense, the bytes of the evaluator's chain of per-element adds."""
    from chad.arrays.bag import BArray, to_dense
    from chad.linear import LR
    kind, x, idx = item
    if idx == "iota":
        idx = iota(x.shape[1])
    init = BEMPTY if start == "empty" else BArray(np.array([-0.0, 5.0]), None)
    fast = [init]
    shared_adds(fast, 0, [(kind, x, idx)], 3)
    assert type(fast[0]) is not type(init) or start == "array"
    slow = _Cells([init])
    shared_adds(slow, 0, [(kind, x, idx)], 3)
    a = np.asarray(to_dense(fast[0], 2, LR()))
    b = np.asarray(to_dense(slow[0], 2, LR()))
    assert a.tobytes() == b.tobytes()


_PROGS = [
    "def f(m : Array (Array R), v : Array R) : R = sum (build (length m) (\\i -> sum (build "
    "(length v) (\\j -> let x = v ! j in x * x * m ! i ! j))))",
    "def f(m : Array (Array R), v : Array R) : R = sum (build (length m) (\\i -> let s = v ! i in "
    "sum (build (length v) (\\j -> m ! i ! j * v ! j * s)) + s * s))",
    "def f(m : Array (Array R), v : Array R) : R = sum (build (length m) (\\i -> sum (build "
    "(length v) (\\j -> max(m ! i ! j * v ! j, v ! j)))))",
    "def g(a : R, b : R) : R = a * b + a\ndef f(m : Array (Array R), v : Array R) : R = sum "
    "(build (length m) (\\i -> sum (build (length v) (\\j -> g(m ! i ! j, v ! j) * v ! j))))",
    "def f(m : Array (Array R), v : Array R) : R = sum (build (length m) (\\i -> sum (build "
    "(length (m ! i)) (\\j -> m ! i ! j * v ! j * v ! j))))",
    "def f(m : Array (Array R), v : Array R) : R = sum (build (length m) (\\i -> fold (\\p -> "
    "max(fst p, snd p)) (build (length v) (\\j -> m ! i ! j * v ! j + v ! j))))",
]


def _data():
    rng = np.random.default_rng(0)
    return [
        ([rng.standard_normal(4) for _ in range(4)], rng.standard_normal(4)),
        ([np.array([-0.0, -0.0]), np.array([-0.0, -0.0])], np.array([-0.0, -0.0])),
        ([np.zeros(0), np.zeros(0)], np.zeros(0)),
        ([], np.zeros(0)),
        ([rng.standard_normal(3), rng.standard_normal(2), rng.standard_normal(3)],
         rng.standard_normal(3)),  # ragged: the guard's fallback
    ]


def _same(a, b):
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return np.asarray(a, dtype=float).tobytes() == np.asarray(b, dtype=float).tobytes()


@pytest.mark.parametrize("evm", ["array", "map", "parallel"])
@pytest.mark.parametrize("k", range(len(_PROGS)))
def test_untyped_reads_read_once_give_the_interpreters_bits(k, evm):
    """PASSES. The CSE of `_vtake_numbers` (a let-bound v ! j read twice, an
    outer v ! i read in both loops, a call's argument, a fold by max, ragged
    rows falling back, empty arrays, -0.0) gives the interpreter's bits on
    every runtime; the region reads each untyped array once per key."""
    text = _PROGS[k]
    prog = chad.load(text)
    src = backend.gradient_module(prog, prog.find("f")).source
    assert "forward pass, nested loops" in src
    for m, v in _data():
        try:
            want = chad.grad(text, "f", evm=evm, backend="interp")(m, v)
        except Exception as e:  # (the compiled code raises the evaluator's error)
            with pytest.raises(type(e)):
                chad.grad(text, "f", evm=evm)(m, v)
            continue
        got = chad.grad(text, "f", evm=evm)(m, v)
        assert _same(got[0], want[0])
        assert _same(got[1][0], want[1][0]) and _same(got[1][1], want[1][1])
