"""Review of "an inner loop's adds to the outer element's cells and to shared
cells batched" (chad/arrays/nested_support.py vadd_in / inner_adds,
vector_support.Pass.flush, chad/arrays/lower.py batch_unzip_map /
batch_length / row_length): failing cases first, then the strongest cases
that held.

Failing (at the time of writing):

* A `map` over each outer element's row when every row is empty (n >= 1 rows
  of length 0) and the map's body adds to a shared cell (a captured real c):
  inner_adds keeps an n x 0 part for c's cell, Pass.flush runs
  cumsum_in_place on the empty sequence, `seq[0] = cur + seq[0]` raises
  IndexError, and the call fails with "internal compiler error" where the
  interpreter gives the gradient (0.0 for c). The build form (`build (length
  v)` with v empty) passes its `case length = 0` guard to the per-element
  code; the map has no such guard.
* docs/compiler.md ("Nested loops") says `length (m ! i)` is batched as an
  inner size; `build (length (m ! i)) (\\j -> m ! i ! j * v ! j)` compiles to
  per-element loops ("a gather of a batched array other than a row"); only
  `let r = m ! i in build (length r) (\\j -> r ! j ...)` is batched.

Nothing here is timed.
"""

from __future__ import annotations

import copy

import math

import numpy as np
import pytest

import chad
from chad.compile import backend, parallel_support, vector_support
from chad.errors import ChadError
from tests.test_vectorise import RUNTIMES, agree

pytestmark = pytest.mark.filterwarnings("error::SyntaxWarning", "error::RuntimeWarning")


def _source(text, evm="array"):
    prog = chad.load(text)
    return backend.gradient_module(prog, prog.find(None), "efficient", evm).source


def _outcome(text, args, evm, backend_=None, ctg=None):
    extra = {} if ctg is None else {"ctg": ctg}
    kw = {} if backend_ is None else {"backend": backend_}
    try:  # (on copies of the arguments, which the caller may use again)
        return ("ok", chad.grad(text, evm=evm, **kw)(*copy.deepcopy(args), **extra))
    except ChadError as e:
        return ("err", type(e).__name__, str(e))


def _same(text, args, evm, ctg=None):
    want = _outcome(text, args, evm, "interp", ctg)
    got = _outcome(text, args, evm, None, ctg)
    assert got[0] == want[0], (got, want)
    if want[0] == "ok":
        agree(got[1], want[1], exact=True)
    else:
        assert got == want
    return got


# ------------------------------------------------------------------ failing

EMPTY_ROWS = {
    "map_c": ("def f(m : Array (Array R), c : R) : R = "
              "sum (build (length m) (\\i -> sum (map (\\x -> x * c) (m ! i))))", ()),
    "map_c_then_c": ("def f(m : Array (Array R), c : R) : R = "
                     "sum (build (length m) (\\i -> sum (map (\\x -> x * c) (m ! i)))) + c", ()),
    "map_s_c": ("def f(m : Array (Array R), c : R, a : Array R) : R = "
                "sum (build (length m) (\\i -> let s = a ! i in "
                "sum (map (\\x -> x * s * c) (m ! i))))", (np.ones(3),)),
}


@pytest.mark.parametrize("evm", ["array", "parallel"])
@pytest.mark.parametrize("rows", [1, 3])
@pytest.mark.parametrize("name", sorted(EMPTY_ROWS))
def test_a_map_over_empty_rows_adding_to_a_shared_cell(name, rows, evm):
    # every row empty: rectangular (row_length 0), no guard; the map's adds to
    # c's cell are an n x 0 part; the evaluator's gradient of c is 0.0 (or 1.0)
    text, rest = EMPTY_ROWS[name]
    args = ([np.zeros(0) for _ in range(rows)], 0.5) + tuple(a[:rows] for a in rest)
    want = chad.grad(text, backend="interp", evm=evm)(*args)
    got = chad.grad(text, evm=evm)(*args)  # ChadError: internal compiler error (IndexError)
    agree(got, want, exact=True)


LEN_ROW = ("def f(m : Array (Array R), v : Array R) : R = "
           "sum (build (length m) (\\i -> sum (build (length (m ! i)) (\\j -> m ! i ! j * v ! j))))")


def test_length_of_a_row_as_the_inner_size_is_batched():
    # docs/compiler.md: "`length (m ! i)` as an inner size"; the `let r = m ! i`
    # form is batched (test_let_row_length_is_batched below), this one is not
    assert "forward pass, nested loops" in _source(LEN_ROW)


# ------------------------------------------------------------- what held

H = "def f(m : Array (Array R), v : Array R, a : Array R, c : R) : R = "
HELD = {
    # several adds per inner element to the outer element's cell s
    "s_multi": "sum (build (length m) (\\i -> let s = a ! i in "
               "sum (build (length v) (\\j -> m ! i ! j * s + v ! j * s + s))))",
    # outer-level adds to s before and after the inner loop
    "s_before_after": "sum (build (length m) (\\i -> let s = a ! i in "
                      "s * 2.0 + sum (build (length v) (\\j -> m ! i ! j * s)) + s))",
    # shared c: several adds per inner element, outer-level adds around the loop
    "c_multi": "sum (build (length m) (\\i -> c + sum (build (length v) "
               "(\\j -> m ! i ! j * c + v ! j * c + c)) + c * a ! i))",
    "s_two_loops": "sum (build (length m) (\\i -> let s = a ! i in "
                   "sum (build (length v) (\\j -> m ! i ! j * s)) * "
                   "sum (build (length v) (\\j -> v ! j * s))))",
    # two inner loops in one outer body adding to the same shared cell
    "c_two_loops": "sum (build (length m) (\\i -> let r = m ! i in c * a ! i + "
                   "sum (build (length v) (\\j -> r ! j * c + c)) * "
                   "sum (build (length v) (\\j -> r ! j * v ! j * c + c * c)) + c))",
    "s_and_c": "sum (build (length m) (\\i -> let s = a ! i * c in "
               "sum (build (length v) (\\j -> m ! i ! j * s * c + s))))",
    "nested_lets": "sum (build (length m) (\\i -> let s = a ! i in let t = s * c in "
                   "sum (build (length v) (\\j -> m ! i ! j * s * t + t)) + t * s))",
    "div": "sum (build (length m) (\\i -> let s = a ! i in "
           "sum (build (length v) (\\j -> m ! i ! j / s - c / s))))",
    # maps over each outer element's row, capturing outer values
    "map_row": "sum (build (length m) (\\i -> let s = a ! i in "
               "sum (map (\\x -> x * s + x * c + s) (m ! i))))",
    "two_maps_c": "sum (build (length m) (\\i -> c + sum (map (\\x -> x * c + c) (m ! i)) * "
                  "sum (map (\\x -> x * x * c + c) (m ! i)) + c))",
    "two_maps_s": "sum (build (length m) (\\i -> let s = a ! i in s + "
                  "sum (map (\\x -> x * s + s) (m ! i)) * "
                  "sum (map (\\x -> x * s * c + s) (m ! i)) + s * c))",
    "map_and_build": "sum (build (length m) (\\i -> let s = a ! i in let r = m ! i in "
                     "sum (map (\\x -> x * s + c) r) + "
                     "sum (build (length r) (\\j -> r ! j * v ! j * s * c))))",
    "map_index": "sum (build (length m) (\\i -> sum (map (\\x -> x * toreal i * c) (m ! i))))",
    "map_sqrt": "sum (build (length m) (\\i -> let s = a ! i in "
                "sum (map (\\x -> sqrt (x * x + s * s) * c) (m ! i))))",
    "map_row_length": "sum (build (length m) (\\i -> let r = m ! i in "
                      "toreal (length r) * c + sum (map (\\x -> x * c) r)))",
}

_CANCEL = np.array([1e16, -1e16, 1.0, -0.0, 3.0, 0.1, 1e-3, -1.0])
_SPECIAL = np.array([0.0, -0.0, math.inf, -math.inf, math.nan, 1e308, -1e308, 5e-324, 1.0])


def _cases():
    out = {}
    for k, (rows, cols) in enumerate([(3, 4), (1, 1), (5, 2), (2, 7), (4, 4)]):
        for pname, pool in (("cancel", _CANCEL), ("special", _SPECIAL),
                            ("zeros", np.array([-0.0, 0.0, -0.0]))):
            rng = np.random.default_rng(100 * k + len(pname))
            out[f"{pname}{rows}x{cols}"] = (
                [rng.choice(pool, size=cols) for _ in range(rows)], rng.choice(pool, size=cols),
                rng.choice(pool, size=rows), float(rng.choice(pool)))
    out["all_negzero"] = ([np.full(4, -0.0) for _ in range(3)], np.array([-0.0, 0.0, -0.0, 1.0]),
                          np.array([-0.0, -0.0, 0.0]), -0.0)
    out["empty_outer"] = ([], np.ones(3), np.zeros(0), 0.5)
    return out


@pytest.mark.parametrize("evm", RUNTIMES)
@pytest.mark.parametrize("case", sorted(_cases()))
@pytest.mark.parametrize("name", sorted(HELD))
def test_held_inner_adds_to_outer_and_shared_cells_bit_for_bit(name, case, evm):
    _same(H + HELD[name], _cases()[case], evm)


@pytest.mark.parametrize("name", sorted(HELD))
def test_held_the_batched_path_is_taken(name):
    text = H + HELD[name]
    assert "forward pass, nested loops" in _source(text)
    rng = np.random.default_rng(1)
    args = ([rng.choice(_CANCEL, size=4) for _ in range(3)], rng.choice(_CANCEL, size=4),
            rng.choice(_CANCEL, size=3), 1.0)
    for evm in ("array", "parallel"):
        before = vector_support.FELL_BACK[0]
        _same(text, args, evm)
        assert vector_support.FELL_BACK[0] == before


def test_let_row_length_is_batched():
    text = ("def f(m : Array (Array R), v : Array R) : R = sum (build (length m) "
            "(\\i -> let r = m ! i in sum (build (length r) (\\j -> r ! j * v ! j))))")
    assert "forward pass, nested loops" in _source(text)


RAGGED = {
    "map": "def f(m : Array (Array R), a : Array R, c : R) : R = sum (build (length m) "
           "(\\i -> let s = a ! i in sum (map (\\x -> x * s * c) (m ! i))))",
    "let_row_length": "def f(m : Array (Array R), a : Array R, c : R) : R = sum (build (length m) "
                      "(\\i -> let s = a ! i in let r = m ! i in "
                      "sum (build (length r) (\\j -> r ! j * s * c))))",
}


@pytest.mark.parametrize("evm", ["array", "parallel"])
@pytest.mark.parametrize("name", sorted(RAGGED))
@pytest.mark.parametrize("lengths", [(2, 1, 3), (2, 2, 3), (3, 2, 2), (0, 1, 1)])
def test_held_ragged_rows_fall_back_and_agree(name, lengths, evm):
    m = [np.array([1e16, -1e16, 1.0][:k]) for k in lengths]
    args = (m, np.array([1.0, -0.0, 2.0]), 1.0)
    before = vector_support.FELL_BACK[0]
    _same(RAGGED[name], args, evm)
    assert vector_support.FELL_BACK[0] == before + 1


@pytest.mark.parametrize("evm", RUNTIMES)
def test_held_a_map_over_rows_with_fewer_outer_elements_or_too_many(evm):
    text = ("def f(m : Array (Array R), a : Array R, c : R) : R = sum (build (length a) "
            "(\\i -> let s = a ! i in sum (map (\\x -> x * s * c) (m ! i))))")
    # rows beyond the outer loop are never read (the last one is ragged)
    _same(text, ([np.array([1.0, 2.0]), np.array([3.0, 5.0]), np.array([1e16])],
                 np.array([1.0, -0.0]), 1.0), evm)
    # more outer elements than rows: the evaluator's index error
    _same(text, ([np.array([1.0, 2.0]), np.array([3.0, 5.0])], np.array([1.0, -0.0, 3.0]), 1.0),
          evm)


MV = ("def f(m : Array (Array R), v : Array R, a : Array R, c : R) : Array R = "
      "build (length m) (\\i -> let s = a ! i in "
      "sum (build (length v) (\\j -> m ! i ! j * v ! j * s * c + s)) + s * c)")


@pytest.mark.parametrize("evm", RUNTIMES)
def test_held_vjp_called_twice(evm):
    rng = np.random.default_rng(4)
    args = ([rng.choice(_CANCEL, size=3) for _ in range(4)], rng.choice(_CANCEL, size=3),
            rng.choice(_CANCEL, size=4), 1.0)
    _, back = chad.vjp(MV, evm=evm)(*args)
    _, ref = chad.vjp(MV, backend="interp", evm=evm)(*args)
    for ct in ([1.0, -1.0, 1e16, -0.0], [-0.0] * 4, [1.0] * 4, None):
        want = ref(ct)
        agree(back(ct), want, exact=True)
        agree(back(ct), want, exact=True)


FORKS = {
    "two_regions": "sum (build (length m) (\\i -> let s = a ! i in "
                   "sum (build (length v) (\\j -> m ! i ! j * s * c + c)) + c)) + "
                   "sum (build (length m) (\\i -> sum (map (\\x -> x * c + c) (m ! i)) * c))",
    "shared_let": "let d = c * c in sum (build (length m) (\\i -> let s = a ! i in "
                  "sum (build (length v) (\\j -> m ! i ! j * s * d + c)))) * "
                  "sum (build (length m) (\\i -> sum (map (\\x -> x * d + c) (m ! i))))",
}


@pytest.mark.parametrize("shape", [(1 << 10, 2), (3, 1 << 10)])
@pytest.mark.parametrize("name", sorted(FORKS))
def test_held_parallel_forks_over_large_nested_loops(name, shape, forking):
    """Nested loops whose halves fork (at grain 1: the fork paths of loops past
    GRAIN elements, on loops small enough for the interpreter's reference)."""
    rows, cols = shape
    rng = np.random.default_rng(12)
    args = ([rng.choice(_CANCEL, size=cols) for _ in range(rows)], rng.choice(_CANCEL, size=cols),
            rng.choice(_CANCEL, size=rows), 1.0)
    before, forks = vector_support.FELL_BACK[0], parallel_support.stats.decided
    _same(H + FORKS[name], args, "parallel")
    assert vector_support.FELL_BACK[0] == before
    assert parallel_support.stats.decided > forks
