"""Array (Array R) arguments of compiled code given as a 2-D float64 array or
as rows of one length: the rows of one matrix (chad/compile/known.py
`MatrixRows`), read at once by vectorised code. The results are the ones the
interpreter gives and the ones rows of other shapes give, bit for bit, and
nothing the caller does to its array later changes them."""

from __future__ import annotations

import numpy as np
import pytest

import chad
from chad.compile.convert import arguments
from chad.compile.known import MatrixRows, matrix_of
from chad.compile.vector_support import vtake2

SMV = ("def smv(m : Array (Array R), v : Array R) : R = sum (build (length m) (\\i -> "
       "sum (build (length v) (\\j -> m ! i ! j * v ! j))))")
ROWS_OUT = "def f(m : Array (Array R)) : Array (Array R) = m"
FIRST = "def f(m : Array (Array R)) : R = m ! 0 ! 1 * 2.0"


def _bits(x):
    if isinstance(x, (tuple, list)):
        return tuple(_bits(y) for y in x)
    return np.asarray(x, dtype=np.float64).tobytes()


def _interp(text):
    return chad.grad(text, backend="interp")


@pytest.mark.parametrize("n", [1, 2, 5, 30])
def test_matrix_tuple_and_list_give_the_interpreters_gradient(n):
    rng = np.random.default_rng(n)
    mat = rng.standard_normal((n, n))
    mat[0, 0] = -0.0
    v = rng.standard_normal(n)
    g = chad.grad(SMV)
    want = _interp(SMV)(tuple(mat), v)
    for m in (mat, tuple(mat), list(mat), np.asfortranarray(mat), mat.T.copy().T):
        got = g(m, v)
        assert _bits(got[0]) == _bits(want[0])
        assert _bits(got[1]) == _bits(want[1])


def test_conversion_makes_matrix_rows_only_for_rows_of_one_length():
    from chad.types import ArrayT, R

    class P:
        ty = ArrayT(ArrayT(R))

    conv = arguments([P()])
    mat = np.arange(6.0).reshape(2, 3)
    for arg in (mat, tuple(mat), list(mat)):
        # copies (a call whose results may hold the rows): a plain tuple of
        # rows that own their data, as the interpreter gives
        (got,) = conv([arg], None)
        assert type(got) is tuple and [list(r) for r in got] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
        assert all(r.flags.owndata and not np.shares_memory(r, mat) for r in got)
    # without copies (a call whose results cannot hold the rows): the rows
    # themselves, their matrix made when vectorised code reads it
    given = list(mat)
    (got,) = arguments([P()], copy=False)([given], None)
    assert type(got) is MatrixRows and all(a is b for a, b in zip(got, given))
    assert got.shape() is None and got.matrix.tolist() == mat.tolist()
    (got,) = arguments([P()], copy=False)([mat], None)
    assert type(got) is MatrixRows and got.matrix is mat and np.shares_memory(got[1], mat)
    ragged = (np.zeros(2), np.zeros(3))
    (got,) = conv([ragged], None)
    assert type(got) is tuple and [len(r) for r in got] == [2, 3]
    # not float64 rows: the general decoding (lambda: its own result)
    assert conv([np.arange(6).reshape(2, 3)], lambda a: "slow") == "slow"
    assert conv([np.zeros((2, 3, 1))], lambda a: "slow") == "slow"


def test_later_changes_to_the_callers_array_change_nothing():
    f = chad.primal(ROWS_OUT)
    mat = np.arange(6.0).reshape(2, 3)
    out = f(mat)
    mat[0, 0] = 99.0
    assert [list(r) for r in out] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    out2 = f(list(mat))
    mat[1, 2] = -7.0
    assert float(out2[1][2]) == 5.0


def test_a_few_reads_and_errors_as_the_interpreter():
    g, want = chad.grad(FIRST), _interp(FIRST)
    mat = np.arange(6.0).reshape(2, 3)
    assert _bits(g(mat)) == _bits(want(tuple(mat)))
    short = np.zeros((1, 1))
    with pytest.raises(Exception) as got:
        g(short)
    with pytest.raises(Exception) as exp:
        want(tuple(short))
    assert type(got.value) is type(exp.value) and str(got.value) == str(exp.value)


def test_vtake2_reads_the_matrix_itself():
    mat = np.arange(12.0).reshape(3, 4)
    rows = MatrixRows(mat, mat)
    block = vtake2(rows, 3, 0, 4, 1, 2)
    assert np.shares_memory(block, mat) and block.shape == (3, 4)
    lazy = MatrixRows(tuple(r.copy() for r in mat))  # the matrix made at the first read
    assert lazy.shape() is None
    first = vtake2(lazy, 3, 0, 4, 1, 2)
    assert lazy.shape() == (3, 4) and np.shares_memory(vtake2(lazy, 3, 0, 4, 1, 2), first)
    ragged = MatrixRows((np.zeros(2), np.zeros(3)))
    assert ragged.matrix is None and matrix_of(ragged, 2, 2) is None
    with pytest.raises(IndexError):
        vtake2(ragged, 2, 0, 3, 1, 2)
    assert vtake2(ragged, 2, 0, 2, 1, 2).tolist() == [[0.0, 0.0], [0.0, 0.0]]
    part = vtake2(rows, 2, 0, 3, 1, 2)
    assert part.tolist() == mat[:2, :3].tolist()
    assert matrix_of(rows, 4, 4) is None and matrix_of(tuple(mat), 3, 4) is None
    with pytest.raises(IndexError):
        vtake2(rows, 3, 0, 5, 1, 2)  # a row shorter than the read: the evaluator's error
    plain = vtake2(tuple(mat), 3, 0, 4, 1, 2)
    assert plain.tolist() == block.tolist() and not np.shares_memory(plain, mat)


@pytest.mark.parametrize("evm", ["array", "parallel", "map"])
def test_runtimes_agree_on_matrix_arguments(evm):
    rng = np.random.default_rng(5)
    mat, v = rng.standard_normal((7, 7)), rng.standard_normal(7)
    got = chad.grad(SMV, evm=evm)(mat, v)
    want = _interp(SMV)(tuple(mat), v)
    assert _bits(got[1]) == _bits(want[1]) and _bits(got[0]) == _bits(want[0])
