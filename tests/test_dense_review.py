"""Review of f6a0000 (bag.scatter_reals, gather's bounds check) and b255f81
(_rows_at_once / _matrix_of over several leaves, dense_real's stacked runs,
the nested reverse pass adopting a fresh array as an inner loop's cells).

Every fast path is compared, bit for bit with every NaN made one canonical
NaN, with the general path it shortcuts (collect + scatter; to_dense + per-row
densify; the index the old gather reported) and with a Python chain of float adds; the nested
programs with the interpreter on the three runtimes.

No disagreement was found (at the time of writing every test here passes):
these are the cases the commits' own tests leave out -- blocks of rows long
enough for add_rows' one-reduce path inside scatter_reals, runs of arrays
between blocks in dense_real, random mixes of leaf kinds and primal shapes for
_rows_at_once (errors included), the exact index gather reports, and nested
derivatives that add one fresh product to a cell several times, read it again,
or are run twice through vjp (the adopted array must not be shared). Checked
to fail on mutants: Exec.add keeping the adopted product in its CSE table
("reuse" bodies, the vector vjp), _rows_at_once ignoring the primal's row
lengths, _blocks summing a stacked run in another order.

Found on the way, not caused by these commits (also at b216c7e), not tested
here: a local function applied twice, `let g = \\x -> x * v ! 0 in g (m ! i)
* g (m ! i)`, gives a gradient for v one ulp off the interpreter's with the
simplifier on (simplify=False agrees).
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

import chad
from chad import cotangents as C
from chad.arrays import cotangents as AC
from chad.arrays import nested_support
from chad.arrays.bag import BEMPTY, BArray, BOne, BPlus, BRows, dense_real, scatter_reals, to_dense
from chad.arrays.evaluate import element, gather
from chad.arrays.nested_support import RowsTuple
from chad.compile.known import MatrixRows
from chad.errors import EvalError
from chad.linear import LR
from chad.transform.common import D2
from chad.types import ArrayT, Real
from tests.test_scatter_reals import _chain, _reference

MATRIX = ArrayT(ArrayT(Real()))
RUNTIMES = ("array", "map", "parallel")
_SPECIAL = (0.0, -0.0, 1e17, -1e17, 1.0, 1e-300, math.inf, -math.inf, math.nan)


def _canon(x) -> bytes:
    """The bytes of a (nested) array of reals, every NaN the same NaN."""
    if isinstance(x, (tuple, list)) and x and not isinstance(x[0], (float, int)):
        return b"|".join(_canon(y) for y in x)
    a = np.array(x, dtype=np.float64)
    a[np.isnan(a)] = np.nan
    return a.tobytes()


def _flat(x, out):
    if isinstance(x, (tuple, list)):
        for y in x:
            _flat(y, out)
    elif isinstance(x, np.ndarray):
        out.extend(_flat_nan(v) for v in np.asarray(x, dtype=np.float64).ravel().tolist())
    elif x is None:
        out.append(None)
    else:
        out.append(_flat_nan(float(x)))
    return out


def _flat_nan(v: float):
    return "nan" if math.isnan(v) else v.hex()


def _bits(result) -> list:
    return _flat(result, [])


def _values(rng, k):
    v = rng.standard_normal(k) * 10.0 ** rng.integers(-8, 18, k)
    special = rng.random(k) < 0.25
    v[special] = rng.choice(_SPECIAL, int(special.sum()))
    return v


def _tree(rng, parts):
    parts = list(parts)
    while len(parts) > 1:
        i = int(rng.integers(0, len(parts) - 1))
        parts[i:i + 2] = [BPlus(parts[i], parts[i + 1])]
    return parts[0]


# ----------------------------------------------------------------- scatter_reals


def _leaf(rng, n):
    k = rng.integers(0, 7)
    if k == 0:
        return BOne(int(rng.integers(0, n)), float(_values(rng, 1)[0]))
    if k == 1:  # indexed pairs, duplicates likely, indices of another integer type
        c = int(rng.integers(0, 3 * n + 1))
        idx = rng.integers(0, n, c).astype(rng.choice([np.int64, np.int32, np.uint16]))
        return BArray(_values(rng, c), idx)
    if k == 2:  # a whole array or a prefix of one
        return BArray(_values(rng, int(rng.integers(0, n + 1))))
    if k == 3:  # a block long enough for add_rows' one reduce (>= 8 rows)
        return BRows(_values(rng, int(rng.integers(8, 20)) * n).reshape(-1, n))
    if k == 4:  # a fill (BFill) at indices of its own
        c = int(rng.integers(1, n + 2))
        return BArray(np.broadcast_to(_values(rng, 1), (c,)), rng.integers(0, n, c))
    if k == 5:
        return BEMPTY
    return BArray(np.broadcast_to(_values(rng, 1), (n,)))


@pytest.mark.parametrize("seed", range(120))
def test_scatter_reals_with_long_blocks_and_mixed_leaves(seed):
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(2, 7))  # >= 2 columns: add_rows' reduce path
    bag = _tree(rng, [_leaf(rng, n) for _ in range(int(rng.integers(1, 10)))])
    got = scatter_reals(bag, n)
    assert got is not None
    want = _reference(bag, n)
    assert _canon(got) == _canon(want) == _canon(_chain(bag, n))
    assert _canon(to_dense(bag, n, LR())) == _canon(want)


def test_scatter_reals_a_block_of_rows_after_cancelling_pairs():
    # 1e17 from a one-hot add, then 9 rows of 1.0 (one reduce over out stacked
    # above them), then -1e17: left to right every 1.0 is lost
    n = 2
    rows = np.ones((9, n))
    bag = BPlus(BPlus(BOne(0, 1e17), BOne(1, 1e17)),
                BPlus(BRows(rows), BArray(np.array([-1e17, -1e17]))))
    got = scatter_reals(bag, n)
    assert _canon(got) == _canon([0.0, 0.0]) == _canon(_reference(bag, n))


# ----------------------------------------------------------------- dense_real's runs


@pytest.mark.parametrize("seed", range(120))
def test_dense_real_runs_of_arrays_between_blocks(seed):
    rng = np.random.default_rng(2000 + seed)
    n = int(rng.integers(1, 6))
    parts = []
    for _ in range(int(rng.integers(8, 40))):
        c = rng.random()
        if c < 0.75:
            parts.append(BArray(_values(rng, n)))
        elif c < 0.85:
            parts.append(BRows(_values(rng, int(rng.integers(0, 12)) * n).reshape(-1, n)))
        elif c < 0.95:
            parts.append(BArray(np.broadcast_to(_values(rng, 1), (n,))))
        else:
            parts.append(BEMPTY)
    bag = _tree(rng, parts)
    want = _reference(bag, n)
    got = dense_real(bag, n)
    assert got is not None
    assert _canon(got) == _canon(want) == _canon(_chain(bag, n))
    assert _canon(to_dense(bag, n, LR())) == _canon(want)


# ----------------------------------------------------------------- gather


@pytest.mark.parametrize("a", [np.arange(5.0), tuple(np.arange(5.0)), np.arange(10.0).reshape(5, 2)],
                         ids=["array", "tuple", "matrix"])
@pytest.mark.parametrize("idx,bad", [([0, 7, -1], 7), ([-2, 9, 1], -2), ([4, 4, 5], 5),
                                     ([3, -1], -1)])
def test_gather_reports_the_first_index_out_of_range(a, idx, bad):
    for ix in (idx, np.array(idx, dtype=np.int32)):
        with pytest.raises(EvalError) as e:
            gather(a, ix)
        assert f"index {bad} out of range" in str(e.value)


def test_gather_reads_as_indexing_did():
    rng = np.random.default_rng(5)
    a = _values(rng, 7)
    for idx in ([], [6, 0, 0, 3], np.array([1, 1], dtype=np.int32), np.arange(7)[::-1]):
        got = gather(a, idx)
        assert type(got) is np.ndarray and got.dtype == np.float64
        assert _canon(got) == _canon(a[np.asarray(idx, dtype=np.int64)])


# ----------------------------------------------------------------- _rows_at_once


def _general(ct, primal):
    """densify's general path: to_dense, then each row's densify."""
    n = len(primal)
    dense = to_dense(BEMPTY if ct is None else ct, n, D2(MATRIX.elem))
    return tuple(C.densify(MATRIX.elem, element(primal, i), dense[i]) for i in range(n))


def _row_leaf(rng, n, m):
    c = rng.random()
    mat = _values(rng, n * m).reshape(n, m)
    if c < 0.35:
        return BArray(RowsTuple(mat))
    if c < 0.7:
        return BArray(tuple(BArray(r) for r in mat))
    if c < 0.75:
        return BEMPTY
    if c < 0.8:
        return BOne(int(rng.integers(0, n)), BArray(_values(rng, m)))
    if c < 0.85:
        return BArray(tuple(BArray(r) for r in mat), np.arange(n)[::-1].copy())
    if c < 0.9:  # rows of other lengths
        return BArray(tuple(BArray(_values(rng, int(rng.integers(0, m + 2)))) for _ in range(n)))
    if c < 0.95:  # a row that is a sum of bags
        return BArray(tuple(BPlus(BArray(r), BArray(r)) if i == 0 else BArray(r)
                            for i, r in enumerate(mat)))
    return BArray(RowsTuple(_values(rng, n * (m + 1)).reshape(n, m + 1)))


def _outcome(f):
    try:
        return ("ok", _canon(f()))
    except Exception as e:  # noqa: BLE001 - the two paths must fail alike
        return ("err", type(e).__name__, str(e))


@pytest.mark.parametrize("seed", range(200))
def test_rows_at_once_is_the_general_path_for_mixed_leaves_and_primals(seed):
    rng = np.random.default_rng(3000 + seed)
    n, m = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    bag = _tree(rng, [_row_leaf(rng, n, m) for _ in range(int(rng.integers(1, 12)))])
    shape = rng.random()
    if shape < 0.4:
        primal = tuple(np.zeros(m) for _ in range(n))
    elif shape < 0.6:
        primal = MatrixRows(tuple(np.zeros(m) for _ in range(n)), np.zeros((n, m)))
    elif shape < 0.8:  # ragged: some rows longer
        primal = tuple(np.zeros(m + int(rng.integers(0, 2))) for _ in range(n))
    else:
        primal = tuple(np.zeros(m + 1) for _ in range(n))
    assert _outcome(lambda: AC.densify(MATRIX, primal, bag)) == \
        _outcome(lambda: _general(bag, primal))


BATCH = """\
def batch(w : Array (Array R), b : Array R, xs : Array (Array R)) : R =
  sum (build (length xs) (\\k -> let x = xs ! k in
    sum (build (length w) (\\i -> let r = w ! i in
      b ! i * sum (build (length x) (\\j -> r ! j * x ! j))))))
"""


@pytest.mark.parametrize("evm", RUNTIMES)
@pytest.mark.parametrize("case", ["square", "ragged_w", "short_x", "many"])
def test_a_shared_matrix_whose_rows_are_ragged_or_longer(evm, case):
    rng = np.random.default_rng(len(case) * 7)
    rows, cols, k = (3, 4, 12) if case != "many" else (5, 3, 40)
    widths = [cols] * rows
    if case == "ragged_w":
        widths = [cols + (i % 2) for i in range(rows)]
    xcols = cols - 1 if case == "short_x" else cols
    w = tuple(rng.standard_normal(c) * 10.0 ** rng.integers(-6, 17, c) for c in widths)
    b = rng.standard_normal(rows)
    xs = tuple(rng.standard_normal(xcols) * 10.0 ** rng.integers(-3, 9, xcols) for _ in range(k))
    got = chad.grad(BATCH, evm=evm)(w, b, xs)
    want = chad.grad(BATCH, evm=evm, backend="interp")(w, b, xs)
    assert _bits(got) == _bits(want)


# ----------------------------------------------------------------- adopted arrays

H = "def f(m : Array (Array R), v : Array R, c : R) : R = "
NESTED = {
    "smv": "m ! i ! j * v ! j",
    "twice": "m ! i ! j * v ! j + m ! i ! j * v ! j",
    "let_twice": "let p = m ! i ! j * v ! j in p * p + p",
    "square": "let x = m ! i ! j * v ! j in x * x",
    "cube": "let x = m ! i ! j in x * x * x * v ! j",
    "captured": "m ! i ! j * c * c + v ! j * c",
    "products": "(m ! i ! j * v ! j) * (m ! i ! j * v ! j) * c",
    "lets": "let a = m ! i ! j * v ! j in let b = a * c in b + a * b",
    "branch": "let a = m ! i ! j * v ! j in if a > 0.0 then a * a else - a",
    "max": "let p = m ! i ! j * v ! j in max(p, c) + max(p, 0.5) * p",
    # d * v ! j is added to p's cell twice, another add between: a CSE'd
    # product kept after the cells took it over would read d * v ! j + d * p
    "reuse": "let p = m ! i ! j * v ! j in p * p + p * v ! j",
    "reuse_c": "let p = m ! i ! j * c in p * p + p * v ! j + p * c",
}
OUTERS = {
    "sum": H + "sum (build (length m) (\\i -> sum (build (length v) (\\j -> {B}))))",
    "square": H + "sum (build (length m) (\\i -> let s = sum (build (length v) (\\j -> {B})) "
                  "in s * s))",
    "row": H + "sum (build (length m) (\\i -> let r = m ! i in sum (build (length r) "
               "(\\j -> {B}))))",
}


def _args(rng, rows, cols):
    m = [rng.standard_normal(cols) * 10.0 ** rng.integers(-3, 9, cols) for _ in range(rows)]
    m[0][0] = 1e17
    if rows > 1:
        m[-1][0] = -1e17
    v = rng.standard_normal(cols) * 10.0 ** rng.integers(-3, 9, cols)
    return m, v, float(rng.standard_normal())


@pytest.fixture
def adoptions(monkeypatch):
    """How many inner-loop adds kept a fresh array as the cells' array."""
    count = [0]
    real = nested_support.vadd2

    def spy(cells, level, v, shape, adopt=False):
        cur = cells[level]
        if adopt and not (type(cur) is np.ndarray and cur.shape == shape) \
                and type(v) is np.ndarray and v.shape == shape and v.flags.owndata:
            count[0] += 1
        return real(cells, level, v, shape, adopt)

    monkeypatch.setattr(nested_support, "vadd2", spy)
    return count


@pytest.mark.parametrize("outer", sorted(OUTERS))
@pytest.mark.parametrize("body", sorted(NESTED))
def test_adopted_products_are_the_interpreters_on_every_runtime(outer, body):
    text = OUTERS[outer].replace("{B}", NESTED[body])
    rng = np.random.default_rng(len(outer) * 31 + len(body))
    for rows, cols in ((3, 4), (1, 1), (4, 1)):
        args = _args(rng, rows, cols)
        want = _bits(chad.grad(text, backend="interp")(*args))
        for evm in RUNTIMES:
            assert _bits(chad.grad(text, evm=evm)(*args)) == want, (evm, rows, cols)


@pytest.mark.parametrize("body", ["let_twice", "square", "lets", "max"])
def test_the_programs_above_do_adopt(body, adoptions):
    # (guards the relevance of the comparisons: the adopting path runs)
    text = OUTERS["sum"].replace("{B}", NESTED[body])
    chad.grad(text)(*_args(np.random.default_rng(1), 3, 4))
    assert adoptions[0] > 0


def test_the_sum_of_a_matrix_vector_product_keeps_its_products(kept):
    # (its two products, d * v ! j and d * m ! i ! j, are kept as their factors
    # now, chad/compile/scaled.py, instead of adopted: that path runs)
    chad.grad(OUTERS["sum"].replace("{B}", NESTED["smv"]))(*_args(np.random.default_rng(1), 3, 4))
    assert kept[0] >= 2  # (and the reversed view of one, for its column sums)


MATRIX_OUT = ("def f(m : Array (Array R), v : Array R) : Array (Array R) = "
              "build (length m) (\\i -> let r = m ! i in build (length r) (\\j -> "
              "let p = r ! j * v ! j in p * p + p))")
VECTOR_OUT = ("def f(m : Array (Array R), v : Array R) : Array R = "
              "build (length m) (\\i -> sum (build (length v) (\\j -> "
              "let p = m ! i ! j * v ! j in p * p + p * v ! j)))")


@pytest.mark.parametrize("evm", RUNTIMES)
@pytest.mark.parametrize("text", [MATRIX_OUT, VECTOR_OUT], ids=["matrix", "vector"])
def test_vjp_twice_with_other_cotangents_shares_nothing(text, evm):
    rng = np.random.default_rng(17)
    m = [rng.standard_normal(4) * 10.0 ** rng.integers(-3, 9, 4) for _ in range(3)]
    v = rng.standard_normal(4)
    m0, v0 = copy.deepcopy(m), v.copy()

    def ctg(value, scale):
        if text is MATRIX_OUT:
            return [list(rng.standard_normal(len(r)) * scale) for r in value]
        return list(rng.standard_normal(len(value)) * scale)

    value, back = chad.vjp(text, evm=evm)(m, v)
    ivalue, iback = chad.vjp(text, evm=evm, backend="interp")(m, v)
    seen = _bits(value)
    assert seen == _bits(ivalue)
    c1, c2 = ctg(value, 1.0), ctg(value, -1e17)
    g1, g2, g1_again = back(c1), back(c2), back(c1)
    assert _bits(g1) == _bits(iback(c1)) == _bits(g1_again)
    assert _bits(g2) == _bits(iback(c2))
    assert _bits(value) == seen  # the forward values the caller holds
    assert _bits(m) == _bits(m0) and _bits(v) == _bits(v0)  # the arguments
