"""Adversarial review of the MatrixRows / column_sums / lazy RowsTuple change
(git log 8ed8852..16c7701): Array (Array R) arguments given as 2-D float64
arrays (any layout), lists or tuples of rows, the dense sum of a BRows bag
(chad/arrays/bag.py dense_real, chad/compile/order.py) and the lazy RowsTuple
(chad/arrays/nested_support.py).

The standard: the compiled backend gives the interpreter's values, gradients
and errors bit for bit; nothing a caller does to its arrays after a call
changes what it got; results do not alias the caller's inputs."""

from __future__ import annotations

import numpy as np
import pytest

import chad
from chad.arrays.bag import BEMPTY, BArray, BPlus, BRows, dense_real, to_dense
from chad.arrays.cotangents import densify
from chad.arrays.nested_support import RowsTuple
from chad.compile import order
from chad.compile.convert import arguments
from chad.compile.known import MatrixRows, matrix_of
from chad.linear import LR, plusv
from chad.types import ArrayT, R
from tests.test_order import _cancelling  # rows whose column sums show any other order

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning",
                                        "ignore::PendingDeprecationWarning")  # np.asmatrix

RUNTIMES = ("array", "parallel", "map")

M2 = "def f(m : Array (Array R), v : Array R) : "
SMV = M2 + ("R = sum (build (length m) (\\i -> "
            "sum (build (length v) (\\j -> m ! i ! j * v ! j))))")
TWO = ("def f(m : Array (Array R), w : Array (Array R)) : R = sum (build (length m) "
       "(\\i -> sum (build (length (m ! i)) (\\j -> m ! i ! j * w ! i ! j))))")
# two nested loops adding rows to v's cell: a bag BPlus of two BRows (add_rows)
TWO_LOOPS = ("def f(m : Array (Array R), w : Array (Array R), v : Array R) : R = "
             "sum (build (length m) (\\i -> sum (build (length v) (\\j -> m ! i ! j * v ! j)))) + "
             "sum (build (length w) (\\i -> sum (build (length v) (\\j -> w ! i ! j * v ! j))))")
NESTED = {
    "smv": SMV,
    "sq": M2 + ("R = sum (build (length m) (\\i -> sum (build (length v) "
                "(\\j -> m ! i ! j * m ! i ! j * v ! j))))"),
    "rowmap": M2 + "R = sum (build (length m) (\\i -> sum (map (\\x -> x * x * v ! 0) (m ! i))))",
    "let_row": M2 + ("R = sum (build (length m) (\\i -> let r = m ! i in "
                     "sum (build (length v) (\\j -> r ! j * v ! j * r ! j))))"),
    "outer": M2 + ("R = sum (build (length m) (\\i -> sum (build (length v) "
                   "(\\j -> m ! i ! 0 * v ! j + m ! 0 ! j))))"),
    "rev_rows": M2 + ("R = sum (build (length m) (\\i -> sum (build (length v) "
                      "(\\j -> m ! (length m - 1 - i) ! j * v ! j))))"),
    "if_rows": M2 + ("R = sum (build (length m) (\\i -> sum (build (length v) "
                     "(\\j -> if m ! i ! j > 0.0 then m ! i ! j * v ! j else v ! j))))"),
    "row_len": M2 + "R = sum (build (length m) (\\i -> toreal (length (m ! i)) * m ! i ! 0))",
}
ROWS_OUT = "def f(m : Array (Array R)) : Array (Array R) = m"
ROW_OUT = "def f(m : Array (Array R)) : Array R = m ! 1"
MAT_AND_SUM = M2 + ("Array (Array R) * R = (m, sum (build (length m) (\\i -> "
                    "sum (build (length v) (\\j -> m ! i ! j * m ! i ! j * v ! j)))))")


# ------------------------------------------------------------------ helpers

def _bits(x):
    if isinstance(x, (tuple, list)):
        return tuple(_bits(y) for y in x)
    return np.asarray(x, dtype=np.float64).tobytes()


def _outcome(fn):
    """('ok', bits of the result) or ('error', type name, message)."""
    try:
        return ("ok", _bits(fn()))
    except Exception as e:  # noqa: BLE001 - compared by type and message
        return ("error", type(e).__name__, str(e))


def _interp_rows(a):
    """The interpreter's argument: rows copied (so nothing it does can touch ours)."""
    if isinstance(a, np.ndarray) and a.ndim == 2:
        return tuple(np.array(r) for r in a)
    return a


def _grad_agrees(text, args, evm="array"):
    want = _outcome(lambda: chad.grad(text, backend="interp", evm=evm)(
        *[_interp_rows(a) for a in args]))
    got = _outcome(lambda: chad.grad(text, evm=evm)(*args))
    assert got == want, (text, evm, got[:1], want[:1], got[1:] if got[0] == "error" else "",
                         want[1:] if want[0] == "error" else "")
    return got




def _chain_sum(rows, start=None):
    """The evaluator's order, one Python float at a time: start + rows[0] + rows[1] + ..."""
    rows = np.asarray(rows, dtype=np.float64)
    m = rows.shape[1]
    acc = [0.0] * m if start is None else [float(x) for x in start]
    for k in range(rows.shape[0]):
        acc = [a + float(x) for a, x in zip(acc, rows[k])]
    return np.array(acc, dtype=np.float64)


def _layouts(mat):
    """mat in many memory layouts, every one a 2-D float64 numpy array."""
    ro = mat.copy()
    ro.flags.writeable = False
    padded = np.zeros((mat.shape[0] * 2 + 1, mat.shape[1] * 3 + 2))
    padded[1::2, 2::3] = mat
    return {
        "C": mat,
        "F": np.asfortranarray(mat),
        "transposed_view": np.ascontiguousarray(mat.T).T,
        "strided_view": padded[1::2, 2::3],
        "reversed_view": np.ascontiguousarray(mat[::-1])[::-1],
        "read_only": ro,
    }


# ------------------------------------------------------------------ 2-D arguments

@pytest.mark.parametrize("evm", RUNTIMES)
def test_smv_gradient_for_every_layout_of_a_2d_argument(evm):
    rng = np.random.default_rng(1)
    mat = rng.standard_normal((5, 4)) * 10.0 ** rng.integers(-8, 9, (5, 4))
    mat[1, 2] = -0.0
    v = rng.standard_normal(4)
    for name, arg in _layouts(mat).items():
        keep = np.array(arg)
        _grad_agrees(SMV, (arg, v), evm)
        assert _bits(arg) == _bits(keep), name  # the caller's array untouched
    for arg in (list(mat), tuple(mat), [np.array(r) for r in mat]):
        _grad_agrees(SMV, (arg, v), evm)


@pytest.mark.parametrize("shape,vlen", [((0, 3), 3), ((4, 0), 0), ((4, 0), 2), ((1, 3), 3),
                                        ((3, 2), 3), ((2, 5), 3), ((1, 1), 1)])
def test_empty_single_and_mismatched_shapes_agree_including_errors(shape, vlen):
    rng = np.random.default_rng(sum(shape) + vlen)
    mat = rng.standard_normal(shape)
    v = rng.standard_normal(vlen)
    for arg in (mat, list(mat), np.asfortranarray(mat)):
        for text in (SMV, NESTED["rowmap"], NESTED["row_len"]):
            _grad_agrees(text, (arg, v))


def test_special_values_in_a_2d_argument_bit_for_bit():
    vals = [0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, 1e308, -1e308, 5e-324, -5e-324]
    mat = np.array([vals[k:] + vals[:k] for k in range(6)])
    v = np.array(vals[::-1])
    for evm in RUNTIMES:
        for arg in (mat, np.asfortranarray(mat), list(mat)):
            _grad_agrees(SMV, (arg, v), evm)
            _grad_agrees(NESTED["sq"], (arg, v), evm)


def test_a_single_nan_in_a_2d_argument():
    mat = np.arange(12.0).reshape(3, 4)
    mat[1, 2] = np.nan
    v = np.array([1.0, -0.0, np.inf, 2.0])
    for arg in (mat, list(mat)):
        got = chad.grad(SMV)(arg, v)
        want = chad.grad(SMV, backend="interp")(_interp_rows(mat), v)
        g, w = np.asarray(got[1][1]), np.asarray(want[1][1])
        assert np.array_equal(np.isnan(g), np.isnan(w))
        assert _bits(g[~np.isnan(g)]) == _bits(w[~np.isnan(w)])


@pytest.mark.parametrize("rows", [
    "int64_row", "float32_row", "big_endian_row", "python_list_row", "ragged_short",
    "ragged_long", "empty_row", "2d_row", "0d_rows", "matrix_subclass", "int64_2d",
    "float32_2d", "big_endian_2d", "3d", "1d",
])
def test_odd_rows_give_the_interpreters_value_or_error(rows):
    rng = np.random.default_rng(3)
    mat = rng.standard_normal((3, 4))
    v = rng.standard_normal(4)
    arg = {
        "int64_row": [mat[0], np.arange(4), mat[2]],
        "float32_row": [mat[0], mat[1].astype(np.float32), mat[2]],
        "big_endian_row": [mat[0], mat[1].astype(">f8"), mat[2]],
        "python_list_row": [mat[0], list(mat[1]), mat[2]],
        "ragged_short": [mat[0], mat[1][:2], mat[2]],
        "ragged_long": [mat[0], np.concatenate((mat[1], [7.0])), mat[2]],
        "empty_row": [mat[0], np.zeros(0), mat[2]],
        "2d_row": [mat[0], mat[1:]],
        "0d_rows": [np.array(1.0), np.array(2.0)],
        "matrix_subclass": np.asmatrix(mat),
        "int64_2d": np.arange(12).reshape(3, 4),
        "float32_2d": mat.astype(np.float32),
        "big_endian_2d": mat.astype(">f8"),
        "3d": mat.reshape(3, 4, 1),
        "1d": mat[0],
    }[rows]
    for text in (SMV, NESTED["rowmap"]):
        want = _outcome(lambda: chad.grad(text, backend="interp")(arg, v))
        got = _outcome(lambda: chad.grad(text)(arg, v))
        assert got == want, (got[:1], want)
        want = _outcome(lambda: chad.vjp(text, backend="interp")(arg, v)[1](1.0))
        got = _outcome(lambda: chad.vjp(text)(arg, v)[1](1.0))
        assert got == want, (got[:1], want)


@pytest.mark.parametrize("name", sorted(NESTED))
@pytest.mark.parametrize("evm", RUNTIMES)
def test_nested_programs_agree_on_2d_and_list_arguments(name, evm):
    text = NESTED[name]
    for n, k in [(1, 3), (4, 4), (9, 6)]:
        rng = np.random.default_rng(n * 10 + k)
        mat = rng.standard_normal((n, k)) * 10.0 ** rng.integers(-6, 7, (n, k))
        v = rng.standard_normal(k)
        for arg in (mat, list(mat), np.asfortranarray(mat)):
            _grad_agrees(text, (arg, v), evm)


@pytest.mark.parametrize("evm", RUNTIMES)
def test_two_parameters_given_the_same_array_object(evm):
    rng = np.random.default_rng(7)
    mat = rng.standard_normal((5, 5)) * 10.0 ** rng.integers(-8, 9, (5, 5))
    keep = mat.copy()
    got = chad.grad(TWO, evm=evm)(mat, mat)
    want = chad.grad(TWO, backend="interp", evm=evm)(_interp_rows(mat), _interp_rows(mat))
    assert _bits(got) == _bits(want)
    assert _bits(mat) == _bits(keep)
    rows = list(mat)
    assert _bits(chad.grad(TWO, evm=evm)(rows, rows)) == _bits(want)
    for g in got[1]:
        for r in g:
            assert not np.shares_memory(r, mat)
    # the gradients of the two parameters are separate arrays
    assert not any(np.shares_memory(a, b) for a in got[1][0] for b in got[1][1])


def test_nothing_the_caller_does_later_changes_a_gradient():
    rng = np.random.default_rng(8)
    mat = rng.standard_normal((4, 3))
    v = rng.standard_normal(3)
    for arg in (mat.copy(), list(mat.copy())):
        got = chad.grad(TWO)(arg, arg)
        snap = _bits(got)
        if isinstance(arg, np.ndarray):
            arg[:] = 99.0
        else:
            for r in arg:
                r[:] = 99.0
        assert _bits(got) == snap
    g = chad.grad(SMV)
    first = g(mat, v)
    snap = _bits(first)
    for row in first[1][0]:
        row[:] = -1.0  # the caller changes its result
    first[1][1][:] = -1.0
    assert _bits(g(mat, v)) == snap


def test_primal_results_do_not_alias_the_input_or_each_other():
    mat = np.arange(12.0).reshape(3, 4)
    for arg in (mat, list(mat), tuple(mat)):
        out = chad.primal(ROWS_OUT)(arg)
        assert not any(np.shares_memory(r, mat) for r in out)
        out[0][0] = 123.0  # the caller changes the result ...
        again = chad.primal(ROWS_OUT)(arg)  # ... and calls again
        assert float(again[0][0]) == 0.0 and float(mat[0, 0]) == 0.0
        row = chad.primal(ROW_OUT)(arg)
        assert not np.shares_memory(row, mat)
        row[:] = -5.0
        assert _bits(chad.primal(ROW_OUT)(arg)) == _bits(mat[1])
        if isinstance(arg, np.ndarray):
            arg[1, 1] = 42.0  # the caller changes its input after the call
            assert float(row[1]) == -5.0
            arg[1, 1] = 5.0


@pytest.mark.parametrize("evm", RUNTIMES)
def test_vjp_called_twice_and_its_backprop_called_twice(evm):
    rng = np.random.default_rng(9)
    mat = rng.standard_normal((4, 3))
    v = rng.standard_normal(3)
    ctg = ([list(rng.standard_normal(3)) for _ in range(4)], 0.5)
    f = chad.vjp(MAT_AND_SUM, evm=evm)
    val1, bp1 = f(mat, v)
    g1 = _bits(bp1(ctg))
    val2, bp2 = f(list(mat), v)
    assert _bits(bp1(ctg)) == g1 == _bits(bp2(ctg))
    fi = chad.vjp(MAT_AND_SUM, backend="interp", evm=evm)
    wv, wbp = fi(_interp_rows(mat), v)
    assert _bits(val1) == _bits(wv) and g1 == _bits(wbp(ctg))
    # the caller changes the value it got, then backpropagates again
    for r in val1[0]:
        r[:] = 1e6
    assert _bits(bp1(ctg)) == g1


# ------------------------------------------------------------------ dense sums of BRows bags

@pytest.mark.parametrize("evm", ["array", "parallel"])
@pytest.mark.parametrize("n", [1, 2, 3, 8, 9, 40])
def test_brows_dense_sums_with_cancellation_end_to_end(n, evm):
    """The gradient of v is a chain of adds of rows (a BRows bag; two of them
    for TWO_LOOPS, the second through order.add_rows): the interpreter's sum."""
    rng = np.random.default_rng(100 + n)
    m = _cancelling(rng, n, 4)
    w = _cancelling(rng, n, 4)[::-1].copy()
    m[n // 2, 1] = -0.0
    v = np.ones(4)
    for arg_m, arg_w in ((m, w), (list(m), list(w)), (np.asfortranarray(m), w)):
        _grad_agrees(SMV, (arg_m, v), evm)
        _grad_agrees(TWO_LOOPS, (arg_m, arg_w, v), evm)


def _layout(block, kind):
    if kind == "C":
        return block
    if kind == "reversed":
        return np.ascontiguousarray(block[::-1])[::-1]
    if kind == "F":
        return np.asfortranarray(block)
    if kind == "transposed":
        return np.ascontiguousarray(block.T).T
    if kind == "row_step":
        return np.repeat(block, 2, axis=0)[::2]
    if kind == "col_step":
        return np.repeat(block, 2, axis=1)[:, ::2]
    if kind == "broadcast":  # one row (of mixed magnitudes) n times: stride 0
        return np.broadcast_to(block[2 if len(block) > 3 else 0], block.shape)
    raise AssertionError(kind)


LAYOUTS = ["C", "reversed", "F", "transposed", "row_step", "col_step", "broadcast"]
SHAPES = [(1, 3), (2, 2), (7, 3), (8, 2), (9, 3), (33, 5), (64, 2)]


@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES)
def test_column_sums_are_the_python_loop_for_any_layout(kind, shape):
    rng = np.random.default_rng(sum(shape))
    block = _layout(_cancelling(rng, *shape), kind)
    assert _bits(order.column_sums(block)) == _bits(_chain_sum(block))
    rev = block[::-1]
    assert _bits(order.column_sums(rev)) == _bits(_chain_sum(rev))


@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES)
def test_add_rows_is_the_python_loop_for_any_layout(kind, shape):
    """add_rows(out, block) is documented as out + block[0] + block[1] + ... in
    every column, in that order."""
    rng = np.random.default_rng(7 + sum(shape))
    block = _layout(_cancelling(rng, *shape), kind)
    start = rng.standard_normal(shape[1]) * 1e16
    want = _chain_sum(block, start)
    assert _bits(order.add_rows(start.copy(), block)) == _bits(want)


def _plus_chain(rows, cell=BEMPTY):
    """The evaluator's cell after `cell = plusv(BArray(rows[k]), cell)`, k = 0 .. n-1."""
    for k in range(len(rows)):
        cell, _ = plusv(BArray(np.array(rows[k], dtype=np.float64)), cell)
    return cell


@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("n_rows", [1, 3, 8, 12, 40])
def test_dense_sum_of_brows_after_another_part_is_the_chain_of_adds(kind, n_rows):
    """dense_real of BRows bags of any row layout (BRows takes any 2-D float64
    rows; nested_support.rows_of makes broadcast ones) next to another part:
    the same additions in the same order as the bag of plain BArrays."""
    rng = np.random.default_rng(n_rows)
    m = 4
    a = _cancelling(rng, n_rows, m)
    b = _cancelling(rng, n_rows, m)[::-1].copy()
    w = rng.standard_normal(m) * 1e16
    ra, rb = _layout(a, kind), _layout(b, kind)
    cases = [
        (BPlus(BRows(rb), BRows(ra)), BPlus(_plus_chain(rb), _plus_chain(ra))),
        (BPlus(BArray(w.copy()), BRows(ra)), BPlus(BArray(w.copy()), _plus_chain(ra))),
        (BPlus(BRows(ra), BArray(w.copy())), BPlus(_plus_chain(ra), BArray(w.copy()))),
    ]
    for bag, plain in cases:
        want = to_dense(plain, m, LR())  # the general path: collect and scatter
        assert _bits(dense_real(bag, m)) == _bits(want)
    # and the chain itself, one Python float at a time (last row first)
    bag = BPlus(BArray(w.copy()), BRows(ra))
    assert _bits(dense_real(bag, m)) == _bits(_chain_sum(np.asarray(ra)[::-1], w + 0.0))


# ------------------------------------------------------------------ MatrixRows, RowsTuple

def _conv(copy=True):
    class P:
        ty = ArrayT(ArrayT(R))

    return arguments([P()], copy=copy)


def test_conversion_of_odd_2d_arrays_and_lists():
    conv = _conv()
    slow = lambda a: "slow"  # noqa: E731
    mat = np.arange(12.0).reshape(3, 4)
    for arg in _layouts(mat).values():
        # with copies (results may hold the rows): a plain tuple of rows that
        # own their data; without: the rows of a C-ordered matrix
        (got,) = conv([arg], slow)
        assert type(got) is tuple and not any(np.shares_memory(r, arg) for r in got)
        assert [list(r) for r in got] == mat.tolist()
        assert all(r.flags.writeable and r.flags.owndata for r in got)
        (got,) = _conv(copy=False)([arg], slow)
        assert type(got) is MatrixRows and got.matrix.flags.c_contiguous
        assert [list(r) for r in got] == mat.tolist()
    for arg in (np.zeros((0, 3)), np.zeros((3, 0)), mat[:1]):
        for c in (True, False):
            (got,) = _conv(copy=c)([arg], slow)
            assert type(got) is (tuple if c else MatrixRows) and len(got) == arg.shape[0]
            assert [len(r) for r in got] == [arg.shape[1]] * arg.shape[0]
    for bad in (mat.astype(">f8"), mat.astype(np.float32), mat.reshape(3, 4, 1),
                np.asmatrix(mat), [mat[0], list(mat[1])], [mat[0], mat[1].astype(">f8")],
                [mat[0], mat[1:]]):
        assert conv([bad], slow) == "slow"
    # rows of different lengths: a plain tuple of copies, no matrix
    ragged = [mat[0], mat[1][:2]]
    (got,) = conv([ragged], slow)
    assert type(got) is tuple and not any(np.shares_memory(a, b) for a, b in zip(got, ragged))
    (got,) = _conv(copy=False)([ragged], slow)
    assert got.shape() is None and got.matrix is None and matrix_of(got, 2, 2) is None


def test_lazy_matrix_rows_are_the_rows():
    rows = [np.arange(4.0), np.arange(4.0, 8.0), np.arange(8.0, 12.0)]
    lazy = MatrixRows(rows)
    assert lazy.shape() is None
    assert lazy.matrix.tolist() == np.array(rows).tolist()
    assert lazy.shape() == (3, 4)
    assert matrix_of(lazy, 2, 3).tolist() == [[0.0, 1.0, 2.0], [4.0, 5.0, 6.0]]
    assert matrix_of(lazy, 4, 1) is None and matrix_of(lazy, 1, 5) is None
    assert MatrixRows(()).matrix is None


def test_rows_tuple_is_the_sequence_of_row_bags():
    rng = np.random.default_rng(4)
    rows = rng.standard_normal((4, 3))
    rows[1, 2] = -0.0
    lazy = RowsTuple(rows)
    assert len(lazy) == 4
    assert [_bits(b.vals) for b in lazy] == [_bits(r) for r in rows]
    assert _bits(lazy[-1].vals) == _bits(rows[3])
    assert [_bits(b.vals) for b in lazy[1:3]] == [_bits(r) for r in rows[1:3]]
    ty = ArrayT(ArrayT(R))
    primal = tuple(np.zeros(3) for _ in range(4))
    fast = densify(ty, primal, BArray(RowsTuple(rows)))
    slow = densify(ty, primal, BArray(tuple(BArray(np.array(r)) for r in rows)))
    assert _bits(fast) == _bits(slow)
    as_matrix = MatrixRows(np.zeros((4, 3)), np.zeros((4, 3)))
    assert _bits(densify(ty, as_matrix, BArray(RowsTuple(rows)))) == _bits(slow)
    # a primal of other row lengths than the cotangent's: the general path's answer
    short = MatrixRows(np.zeros((4, 2)), np.zeros((4, 2)))
    with pytest.raises(Exception) as got:
        densify(ty, short, BArray(RowsTuple(rows)))
    with pytest.raises(Exception) as want:
        densify(ty, tuple(np.zeros(2) for _ in range(4)),
                BArray(tuple(BArray(np.array(r)) for r in rows)))
    assert type(got.value) is type(want.value) and str(got.value) == str(want.value)


def test_a_returned_argument_is_a_plain_tuple_as_the_interpreters():
    """The interpreter (and the compiled code before the change) returns an
    Array (Array R) as a tuple; the compiled code now hands the caller its
    internal MatrixRows (a tuple subclass carrying a cached matrix)."""
    mat = np.arange(6.0).reshape(2, 3)
    for arg in (mat, list(mat), tuple(mat)):
        want = chad.primal(ROWS_OUT, backend="interp")(arg)
        got = chad.primal(ROWS_OUT)(arg)
        assert _bits(got) == _bits(want)
        assert type(got) is type(want) is tuple, type(got)
    v = np.ones(3)
    want = chad.vjp(MAT_AND_SUM, backend="interp")(mat, v)[0]
    got = chad.vjp(MAT_AND_SUM)(mat, v)[0]
    assert _bits(got) == _bits(want)
    assert type(got[0]) is type(want[0]) is tuple, type(got[0])
