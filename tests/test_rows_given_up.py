"""A nested loop's dense matrix cotangent without its last copy
(chad/arrays/cotangents.py `_rows_at_once`): the element pairs' cells summed
from +0.0 (recorded by nested_support.final2 as free of -0.0, for which
0.0 + x is x) that only the bag holds are given to the caller as they are
(a block of products kept as its factors, chad/compile/scaled.py, made in
one pass first and recorded the same way);
a matrix anything else holds, or one that may hold -0.0, is copied with
0.0 added, as before. The values are the interpreter's either way."""

from __future__ import annotations

import numpy as np
import pytest

import chad
from chad.arrays.bag import BArray
from chad.arrays.cotangents import _rows_at_once
from chad.arrays.nested_support import RowsTuple
from chad.compile.known import NO_NEG_ZERO, Known
from chad.types import ArrayT, Real

SMV = ("def smv(m : Array (Array R), v : Array R) : R = "
       "sum (build (length m) (\\i -> sum (build (length v) (\\j -> m ! i ! j * v ! j))))")
MATRIX = ArrayT(ArrayT(Real()))


def _bits(rows):
    return np.stack([np.asarray(r, dtype=np.float64) for r in rows]).tobytes()


@pytest.mark.parametrize("evm", ["array", "parallel"])
def test_the_matrix_cotangent_is_the_cells_own_array_and_the_interpreters(evm):
    """v holds -0.0 and the output cotangent makes d = +0.0 for some rows: the
    products d * v are -0.0 there, and the cells (0.0 + d * v) are +0.0, as
    the interpreter gives them."""
    rng = np.random.default_rng(0)
    m = [rng.standard_normal(6) for _ in range(5)]
    v = np.array([1.0, -0.0, 0.0, -2.0, 3.0, -0.0])
    for ctg in (1.0, 0.0, -0.0, -2.5):
        got = chad.grad(SMV, evm=evm)(m, v, ctg=ctg)[1]
        want = chad.grad(SMV, evm=evm, backend="interp")(m, v, ctg=ctg)[1]
        assert _bits(got[0]) == _bits(want[0]) and \
            np.asarray(got[1]).tobytes() == np.asarray(want[1]).tobytes()
        rows = got[0]
        base = rows[0].base
        assert base is not None and all(r.base is base for r in rows)
        assert base in NO_NEG_ZERO  # the cells' array itself, not a copy


def test_a_returned_matrix_is_the_callers_alone():
    """Changing the rows one call returned changes nothing another gives."""
    rng = np.random.default_rng(1)
    m = [rng.standard_normal(4) for _ in range(3)]
    v = rng.standard_normal(4)
    g = chad.grad(SMV)
    first = g(m, v)[1][0]
    want = _bits(first)
    for r in first:
        r[:] = np.nan
    assert _bits(g(m, v)[1][0]) == want


def _bag_of(mat):
    return BArray(RowsTuple(mat))


def _primal(n, m):
    return tuple(np.zeros(m) for _ in range(n))


def test_only_a_matrix_the_bag_alone_holds_is_given_up():
    def fresh(recorded: bool):
        mat = np.full((3, 4), 2.0)
        if recorded:
            NO_NEG_ZERO.add(mat)
        bag = _bag_of(mat)
        return bag, id(mat)

    bag, key = fresh(True)
    rows = _rows_at_once(MATRIX, _primal(3, 4), bag, 3)
    assert id(rows[0].base) == key
    bag, key = fresh(False)  # not known to be free of -0.0: 0.0 added, in a copy
    rows = _rows_at_once(MATRIX, _primal(3, 4), bag, 3)
    assert id(rows[0].base) != key
    held = np.full((3, 4), -0.0)  # recorded, but held here too: a copy
    NO_NEG_ZERO.add(held)
    rows = _rows_at_once(MATRIX, _primal(3, 4), _bag_of(held), 3)
    assert rows[0].base is not held and held[0, 0] == 0.0
    assert np.signbit(held[0, 0]) and not np.signbit(rows[0][0])


def test_without_the_record_the_copy_is_made(monkeypatch):
    """The same gradient with the record emptied: the same bits, a new array."""
    import chad.arrays.cotangents as cotangents

    rng = np.random.default_rng(2)
    m = [rng.standard_normal(5) for _ in range(4)]
    v = rng.standard_normal(5)
    g = chad.grad(SMV)
    given = g(m, v)[1][0]
    monkeypatch.setattr(cotangents, "NO_NEG_ZERO", Known())
    copied = g(m, v)[1][0]
    assert _bits(given) == _bits(copied)
    assert copied[0].base not in NO_NEG_ZERO
