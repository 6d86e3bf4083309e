"""The fixed costs of a small compiled gradient (docs/compiler.md, "Speed"):
the shortcuts that spare a call of a few hundred reals its Python overhead
give what the general paths give.

* `_sum` (the SUM primitive) reduces a float64 array with numpy's own reduce,
  without np.sum's wrapper: numpy's pairwise sum, bit for bit, and no warning
  for inf + -inf.
* A nested forward pass reads an untyped `v ! j` as numbers once, for its
  body and for what its backpropagators capture.
* `Nested.ready` remembers its answer for each depth.
* `shapes.view` of a 2-D array is np.broadcast_to's view.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import chad
from chad.arrays.evaluate import _sum
from chad.arrays.nested_support import LoopAdds, Nested
from chad.compile import backend
from chad.compile.shapes import view

SMV = ("def smv(m : Array (Array R), v : Array R) : R = sum (build (length m) (\\i -> "
       "sum (build (length v) (\\j -> m ! i ! j * v ! j))))")


def _arrays():
    rng = np.random.default_rng(11)
    # magnitudes far apart: a sum in another order (left to right, or by
    # another split) gives other bits
    big = rng.standard_normal(1000) * 10.0 ** rng.integers(-8, 9, 1000)
    return [
        np.zeros(0), np.array([-0.0]), np.array([-0.0, -0.0]), np.array([np.inf, -np.inf]),
        np.array([1e308, 1e308]), np.array([np.nan, 1.0]), big, big[::3], big[::-1],
        rng.standard_normal((7, 9))[:, 2],  # a strided column
        np.arange(10, dtype=np.int64),  # (not float64: the general path)
    ]


@pytest.mark.parametrize("k", range(len(_arrays())))
def test_sum_is_numpys_sum_bit_for_bit(k):
    a = _arrays()[k]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # inf + -inf: NaN, without numpy's warning
        got = _sum(a)
    with np.errstate(all="ignore"):
        want = float(np.sum(np.asarray(a, dtype=np.float64)))
    assert type(got) is float
    assert np.float64(got).tobytes() == np.float64(want).tobytes()


def test_the_left_to_right_sum_would_differ():
    """(The arrays above tell numpy's sum from a sum left to right.)"""
    big = _arrays()[6]
    left = 0.0
    for x in big.tolist():
        left += x
    assert left != _sum(big)


def test_a_nested_forward_pass_reads_v_once():
    prog = chad.load(SMV)
    source = backend.gradient_module(prog, prog.find(None)).source
    assert "forward pass, nested loops" in source
    assert source.count("_vtake_numbers(") == 1
    rng = np.random.default_rng(3)
    m, v = rng.standard_normal((6, 4)), rng.standard_normal(4)
    value, (dm, dv) = chad.grad(SMV)(m, v)
    ref_value, (ref_dm, ref_dv) = chad.grad(SMV, backend="interp")(m, v)
    assert value == ref_value
    assert np.array_equal(np.stack(dm), np.stack(ref_dm)) and np.array_equal(dv, ref_dv)


def test_nested_ready_is_per_depth():
    loop = LoopAdds(scopes=1, cells=2)
    loop.levels.append(3)  # fits when 3 < depth + 1 + 2: depth 1 and up
    nested = Nested((loop,))
    assert [nested.ready(d) for d in (0, 1, 0, 5, 0)] == [False, True, False, True, False]
    bags = LoopAdds(scopes=0, cells=1)
    bags.bags.append(2)  # a bag's add to a cell not its own: 2 < depth
    nested = Nested((bags,))
    assert [nested.ready(d) for d in (3, 2, 3, 1)] == [True, False, True, False]


@pytest.mark.parametrize("shape,target", [
    ((1, 5), (4, 5)), ((4, 1), (4, 5)), ((4, 5), (4, 5)), ((1, 1), (3, 2)), ((1, 5), (0, 5)),
    ((2, 5), (4, 5)), ((4, 5), (4, 6)),
])
def test_view_of_a_matrix_is_broadcast_tos(shape, target):
    x = np.arange(float(np.prod(shape))).reshape(shape)
    try:
        want = np.broadcast_to(x, target)
    except ValueError:
        with pytest.raises(ValueError):
            view(x, target)
        return
    got = view(x, target)
    assert got.shape == want.shape and got.strides == want.strides
    assert np.array_equal(got, want) and not got.flags.writeable
    assert np.shares_memory(got, x) or not x.size or not got.size
