"""Review of the late changes (b37fb83 merged if/else adds, 0165bb3 max/min
pairs in batched derivatives, a2faabd vsum of non-contiguous axes, 525ba95 x **
n batched, 4165c81 vtoreal and vjp values as copies): compiled gradients,
primals and vjps against the interpreter, bit for bit (within 1e-12 where
numpy's power is involved), on the three runtimes, with NaN, the infinities,
signed zeros, ties and values whose sums depend on the order of the
additions. Errors must be the interpreter's (type and message)."""

from __future__ import annotations

import numpy as np
import pytest

import chad
from chad.compile import backend
from tests.test_order import _cancelling
from tests.test_vectorise import RUNTIMES, agree

pytestmark = pytest.mark.filterwarnings("error::SyntaxWarning", "error::RuntimeWarning")

SPECIAL = [0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, 1e16, -1e16, 2.0, 0.5, 1e-310, -2.0]
CAPTURED = [(1.0, 1.0), (1e16, -1e16), (-0.0, 0.0), (0.0, -0.0), (np.nan, 1.0), (1.0, np.nan),
            (2.0, 2.0), (-1.0, 2.0), (np.inf, -np.inf), (1e-310, 3.0)]
CANCEL = np.array([1e16, 1.0, -1e16, 1.0, 3.0, -1e16, 1e16, 0.5, -2.0, 1e-8] * 5)


def _outcome(f):
    try:
        return "ok", f()
    except Exception as e:  # noqa: BLE001 - the error itself is compared
        return "err", type(e).__name__, str(e)


def _check(kind, text, args, exact=True, ctg=None):
    """chad.<kind>(text) on every runtime (primal: once) equals the
    interpreter's: the same value (agree) or the same error."""
    fn = getattr(chad, kind)

    def call(g):
        return g(*args) if ctg is None else g(*args, ctg=ctg)

    want = _outcome(lambda: call(fn(text, backend="interp")))
    makers = [lambda: fn(text)] if kind == "primal" else \
        [lambda evm=evm: fn(text, evm=evm) for evm in RUNTIMES]
    for make in makers:
        got = _outcome(lambda: call(make()))
        assert got[0] == want[0], (got, want)
        if got[0] == "err":
            assert got[1:] == want[1:], (got, want)
        else:
            agree(got[1], want[1], exact)


def _back(text):
    src = backend.gradient_module(chad.load(text), chad.load(text).find(None)).source
    return src.split("def vb", 1)[1] if "def vb" in src else ""


# ------------------------------------------------------------ merged if/else adds (b37fb83)

MERGE = {
    # the same cells, in other orders per branch
    "order": "if x > 0.0 then x * w + x * u else u * (x * 3.0) + w * (x * 0.5)",
    # two adds to w in each branch, in other orders and of other values
    "twice_same": "if x > 0.0 then x * w + w * 3.0 else w * 0.5 + w * (x * 2.0)",
    # a branch adding twice to w, the other twice to u: not mergeable (masks)
    "twice_diff": "if x > 0.0 then x * w + w * x * 2.0 + u else u * x + u * x * 7.0 + w",
    # literal-only values (d itself) to the shared cells
    "units": "if x > 0.0 then w + u + x else u - w - x",
    # merged adds inside a nested case, under the enclosing mask
    "nested": "if x > -1.0 then (if x > 1.0 then w * x + u else u * x + w * 2.0) else x * x",
    "nested_big": ("if x > 0.0 then (if x > 1.0 then w * x + u * 1e16 "
                   "else u * x + w * (0.0 - 1e16)) else w * 1e16 - u"),
    "nested_both": ("if x < 5.0 then (if x > 1.0 then w * x - u * x else u * 3.0 + w * x) "
                    "else (if x > 7.0 then w * x + u else u * x + w)"),
    # adds around the case to the same shared cell
    "around": "x * w + (if x > 0.0 then w * x else w * 2.0) + x * w",
    "min_max_branches": "if x > 0.0 then min(x, w) * u else max(u, x * w) + w",
    "squares": "if x > 0.0 then x * w + u * x else x * x * u + x * w",
}


def _merge_text(body):
    return f"def f(w : R, u : R, a : Array R) : R = sum (map (\\x -> {body}) a)"


def test_merged_path_is_taken_where_the_counts_match():
    assert "_vaddm(" not in _back(_merge_text(MERGE["order"]))
    assert "_vaddm(" not in _back(_merge_text(MERGE["twice_same"]))
    assert "_vaddm(" in _back(_merge_text(MERGE["twice_diff"]))  # counts differ
    nested = _back(_merge_text(MERGE["nested"]))
    assert "_vaddm(" in nested and "_vselect(" in nested  # merged under the outer mask


@pytest.mark.parametrize("name", sorted(MERGE))
def test_merged_branches_special_values(name):
    text = _merge_text(MERGE[name])
    rng = np.random.default_rng(abs(hash(name)) % 1000)
    for n in (0, 1, 2, 13):
        a = rng.choice(SPECIAL, size=n)
        for w, u in CAPTURED:
            _check("grad", text, (w, u, a))


@pytest.mark.parametrize("name", sorted(MERGE))
def test_merged_branches_cancellation(name):
    """Shared w and u get element 0's adds, then element 1's, ...: sums that
    depend on that order (1e16, 1, -1e16)."""
    text = _merge_text(MERGE[name])
    for w, u in ((1.0, 1.0), (1e16, 1.0), (1.0, -1e16), (-1.0, 1e16)):
        _check("grad", text, (w, u, CANCEL))
        _check("grad", text, (w, u, -CANCEL[::-1].copy()))


def test_merged_branches_in_a_build_with_cotangents():
    text = ("def f(w : R, u : R, a : Array R) : Array R = build (length a) (\\i -> "
            "let x = a ! i in if x > 0.0 then x * w + u * x else w * u - x * w)")
    rng = np.random.default_rng(11)
    for w, u in CAPTURED:
        a = rng.choice(SPECIAL, size=20)
        _check("grad", text, (w, u, a), ctg=[float(c) for c in rng.choice(SPECIAL, size=20)])
        _check("grad", text, (w, u, CANCEL), ctg=list(CANCEL[::-1]))


def test_merged_vjp_called_twice():
    text = _merge_text(MERGE["order"]).replace(": R = sum (map", ": Array R = (map").rstrip()
    a = np.array(SPECIAL)
    ct = list(np.linspace(-2.0, 2.0, len(a)))
    wv, wb = chad.vjp(text, backend="interp")(1e16, -1.0, a)
    for evm in RUNTIMES:
        v, b = chad.vjp(text, evm=evm)(1e16, -1.0, a.copy())
        agree(v, wv, True)
        agree(b(ct), wb(ct), True)
        agree(b(ct), wb(ct), True)


# ------------------------------------------------------------ max and min (0165bb3)

MAXMIN = {
    "batched_captured": "max(x, w) + min(x * u, w)",
    "captured_first": "max(w, x) - min(u, x)",
    "nested": "max(max(x, w), min(x, u)) - min(w, max(u, x))",
    "self_tie": "max(x, x) + min(x * 0.0, 0.0 - x * 0.0)",
    "zeros": "max(x, 0.0) + min(0.0 - 0.0, x) + max(0.0 - 0.0, x * w)",
    "in_ifs": "if x > 0.0 then (if x > w then max(x, u) else min(x, w)) else max(u, min(x, w))",
}


@pytest.mark.parametrize("name", sorted(MAXMIN))
def test_max_min_special_values_and_ties(name):
    text = _merge_text(MAXMIN[name])
    rng = np.random.default_rng(5)
    for n in (0, 1, 13):
        a = rng.choice(SPECIAL, size=n)
        for w, u in CAPTURED:
            _check("grad", text, (w, u, a))
    for w, u in ((1.0, 1.0), (0.0, -0.0), (-0.0, 0.0), (1e16, -1e16)):
        a = np.array([w, u, -0.0, 0.0, w, np.nan, u, 1.0, 1e16, -1e16])  # ties with w and u
        _check("grad", text, (w, u, a))
        _check("grad", text, (w, u, CANCEL))


def test_max_min_of_two_batched_arrays():
    text = ("def f(w : R, u : R, a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
            "max(a ! i, b ! i) * w - min(b ! i, a ! i) * u))")
    rng = np.random.default_rng(6)
    for n in (1, 9, 40):
        a, b = rng.choice(SPECIAL, size=n), rng.choice(SPECIAL, size=n)
        b[::3] = a[::3]  # ties
        for w, u in CAPTURED:
            _check("grad", text, (w, u, a, b))
    _check("grad", text, (1.0, 1.0, CANCEL, -CANCEL))
    _check("grad", text, (1.0, 1.0, np.array([0.0, -0.0]), np.array([-0.0, 0.0])))


# ------------------------------------------------------------ vsum on strided blocks (a2faabd)

SUMS = {
    "colsum": "build (length v) (\\j -> sum (build (length m) (\\i -> m ! i ! j)))",
    "colsum_w": "build (length v) (\\j -> sum (build (length m) (\\i -> m ! i ! j * v ! j)))",
    "rowsum": "build (length m) (\\i -> sum (build (length v) (\\j -> m ! i ! j)))",
    "colsum_plus": ("build (length v) (\\j -> sum (build (length m) (\\i -> m ! i ! j + 1.0)) "
                    "+ sum (build (length m) (\\i -> v ! j)))"),
    "stride": "build (length v) (\\j -> sum (build (length m) (\\i -> m ! i ! (2 * j))))",
    "reversed": "build (length v) (\\j -> sum (build (length m) (\\i -> m ! (length m - 1 - i) ! j)))",
}
SHAPES = [(1, 1), (3, 2), (8, 3), (64, 5), (200, 7), (5, 40)]


@pytest.mark.parametrize("name", sorted(SUMS))
def test_column_sums_primal(name):
    text = f"def f(m : Array (Array R), v : Array R) : Array R = {SUMS[name]}"
    rng = np.random.default_rng(7)
    for n, k in SHAPES:
        block = _cancelling(rng, n, 2 * k if name == "stride" else k)
        m = [row for row in block]
        _check("primal", text, (m, rng.normal(size=k) * 1e8))
        _check("primal", text, (list(block.T.copy()), rng.normal(size=n) * 1e8))


def test_column_sums_total_and_gradient():
    text = ("def f(m : Array (Array R), v : Array R) : R = "
            "sum (build (length v) (\\j -> sum (build (length m) (\\i -> m ! i ! j * v ! j))))")
    rng = np.random.default_rng(8)
    for n, k in SHAPES:
        m = [row for row in _cancelling(rng, n, k)]
        v = rng.normal(size=k)
        _check("primal", text, (m, v))
        _check("grad", text, (m, v))


def test_transposed_product_primal():
    text = ("def f(m : Array (Array R), v : Array R) : Array R = build (length (m ! 0)) (\\j -> "
            "sum (build (length m) (\\i -> m ! i ! j * v ! i)))")
    rng = np.random.default_rng(9)
    for n, k in SHAPES:
        m = [row for row in _cancelling(rng, n, k)]
        v = rng.normal(size=n) * 1e8
        v[0] = 1.0
        _check("primal", text, (m, v))


@pytest.mark.parametrize("name", sorted(SUMS))
def test_column_sums_ragged_rows_give_the_interpreters_error(name):
    text = f"def f(m : Array (Array R), v : Array R) : Array R = {SUMS[name]}"
    for m in ([np.ones(3), np.ones(2), np.ones(3)], [np.ones(3), np.ones(4), np.ones(2)],
              [np.ones(1)], []):
        _check("primal", text, (m, np.ones(3)))


# ------------------------------------------------------------ x ** n (525ba95), toreal (4165c81)

POWERS = {
    "array_exponents": "sum (build (length a) (\\i -> a ! i ** (k ! i)))",
    "negative": "sum (map (\\x -> x ** (0 - 3) + x ** 0 - x ** (0 - 2)) a)",
    "huge": "sum (map (\\x -> x ** 100000000000000000000000000001) a)",
    "huge_negative": "sum (map (\\x -> x ** (0 - 100000000000000000000000000001)) a)",
    "overflowing": "sum (build (length a) (\\i -> a ! i ** (k ! i - 1) + a ! i ** (k ! i * 4)))",
    "product": "sum (build (length a) (\\i -> (a ! i ** (k ! i)) * (a ! i ** 2)))",
    "beyond_float": ("sum (build (length a) (\\i -> a ! i ** (k ! i * 1" + "0" * 400 + ")))"),
}
BASES = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e-310, 1.0, -1.0, 2.0, -2.0,
         0.5, -0.5, 1e300, -1e300, 3.0]
EXPONENTS = [0, 1, -1, 2, -2, 3, -3, 7, -7, 1024, -1075, 2 ** 62, 2 ** 63 - 1, -(2 ** 63),
             -(2 ** 63) + 1, 1, 1]


@pytest.mark.parametrize("name", sorted(POWERS))
def test_powi_primal_and_gradient(name):
    text = f"def f(a : Array R, k : Array Z) : R = {POWERS[name]}"
    for shift in range(0, len(BASES), 2):
        a = np.array([BASES[(shift + j) % len(BASES)] for j in range(len(EXPONENTS))])
        for k in (EXPONENTS, EXPONENTS[shift:] + EXPONENTS[:shift]):
            k = np.array(k, dtype=np.int64)
            _check("primal", text, (a, k), exact=False)
            _check("grad", text, (a, k), exact=False)


def test_powi_exponents_beyond_int64_from_a_list():
    text = ("def f(a : Array R, k : Array Z) : Array R = "
            "build (length a) (\\i -> a ! i ** (k ! i))")
    a = [2.0, -1.0, 0.0, -0.0, 0.5]
    k = [10 ** 30, 10 ** 30 + 1, -(10 ** 30) - 1, -(10 ** 30) - 1, 3]
    _check("primal", text, (a, k), exact=False)
    _check("grad", text, (a, k), exact=False, ctg=[1.0, -1.0, 1.0, 1.0, 2.0])


def test_toreal_beyond_the_float_range():
    big = "1" + "0" * 200
    text = ("def f(a : Array R, k : Array Z) : R = sum (build (length a) (\\i -> "
            f"a ! i * toreal (k ! i * {big} * {big}) + toreal (k ! i * k ! i * k ! i)))")
    a = np.array([1.0, -1.0, 0.5, -0.5, 2.0, -0.0, 0.0, np.nan, np.inf, -2.0])
    k = np.array([1, -1, 3, 2 ** 40, -(2 ** 40) - 1, 0, -3, 2, 5, 2 ** 21 + 1], dtype=np.int64)
    _check("primal", text, (a, k), exact=False)
    _check("grad", text, (a, k), exact=False)


# ------------------------------------------------------------ vjp values are copies (4165c81)

VJP = {
    "exp": "map (\\x -> exp (x * w)) a",
    "tanh": "map (\\x -> tanh x * w) a",
    "if": "map (\\x -> if x > 0.0 then x * w else w * 0.5) a",
    "merged": "map (\\x -> if x > 0.0 then x * w else w * x * 0.5) a",
    "max": "map (\\x -> max(x, w)) a",
    "powi": "map (\\x -> (x * w) ** 3) a",
    "ident": "map (\\x -> x) a",
    "div": "map (\\x -> w / x) a",
}


@pytest.mark.parametrize("name", sorted(VJP) + ["rows"])
def test_vjp_twice_with_the_value_mutated(name):
    if name == "rows":
        text = ("def f(w : R, a : Array R) : Array (Array R) = build (length a) (\\i -> "
                "build (length a) (\\j -> exp (a ! i * a ! j * w)))")
    else:
        text = f"def f(w : R, a : Array R) : Array R = {VJP[name]}"
    a0 = np.array([0.5, -1.0, 2.0, -0.0, 0.25, 3.0, -2.0])
    ct = list(np.linspace(-1.0, 1.0, len(a0)))
    if name == "rows":
        ct = [ct for _ in a0]
    wv, wb = chad.vjp(text, backend="interp")(0.7, a0.copy())
    want = wb(ct)
    for evm in RUNTIMES:
        a = a0.copy()
        v, back = chad.vjp(text, evm=evm)(0.7, a)
        agree(v, wv, False)
        agree(back(ct), want, False)
        for row in (v if name == "rows" else [v]):
            row[:] = 1e9
        a[:] = -5.0
        agree(back(ct), want, False)


def test_merged_branches_in_a_nested_loop():
    """The if/else in the body of an inner build (a rank-2 batched region):
    shared w and u added to by every (i, j), row by row."""
    text = ("def f(w : R, u : R, a : Array R) : R = sum (build (length a) (\\i -> "
            "sum (build (length a) (\\j -> let x = a ! i * a ! j in "
            "if x > 0.0 then x * w + u * a ! j else u * x + w * a ! i))))")
    rng = np.random.default_rng(12)
    for w, u in CAPTURED[:6]:
        _check("grad", text, (w, u, rng.choice(SPECIAL, size=7)))
    _check("grad", text, (1.0, 1.0, CANCEL[:12]))
