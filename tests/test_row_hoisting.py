"""Row hoisting (chad/compile/rows.py; docs/compiler.md, "Vectorisation"): in
`build (length a) (i. body)` the compiled path reads the row `a ! i` once, so
the nested build of a matrix-vector product differentiates as a dot product,
whose forward and reverse passes are batched. Checked: the rewrite (where it
applies and where it must not), the generated code, and the gradients against
the interpreter (bit for bit: a row is hoisted only where each of its
positions gets one contribution), against central differences, on the three
runtimes, and the interpreter's errors (a rewritten program's errors are
replayed on the interpreter). Nothing here is timed.
"""

from __future__ import annotations

import numpy as np
import pytest

import chad
from chad.compile import backend
from chad.compile.rows import hoist_rows
from chad.compile.source import rewritten
from chad.errors import ChadError
from chad.terms import Build, Index, Let, Var, subterms
from tests.test_vectorise import RUNTIMES, agree

pytestmark = pytest.mark.filterwarnings("error::SyntaxWarning", "error::RuntimeWarning")

SMV = ("def smv(m : Array (Array R), v : Array R) : R = "
       "sum (build (length m) (\\i -> sum (build (length v) (\\j -> m ! i ! j * v ! j))))")
# the row read inside the inner loop and beside it, twice per position: not hoisted
TWICE = ("def f(m : Array (Array R), v : Array R) : R = "
         "sum (build (length m) (\\i -> m ! i ! 0 * 3.0 + "
         "sum (build (length v) (\\j -> m ! i ! j * v ! j + sin (m ! i ! j)))))")
# the size is another array's length: `w ! i` may fail, never hoisted
OTHER = ("def f(m : Array (Array R), w : Array (Array R), v : Array R) : R = "
         "sum (build (length m) (\\i -> sum (build (length v) (\\j -> w ! i ! j * v ! j))))")


def _body(text):
    return chad.load(text).find(None).body


def _grad_source(text, evm="array"):
    prog = chad.load(text)
    return backend.gradient_module(prog, prog.find(None), "efficient", evm).source


def _matrix(rng, rows, cols):
    return [rng.normal(size=cols) for _ in range(rows)]


def test_the_row_is_read_once_per_outer_element():
    new = hoist_rows(_body(SMV))
    outer = next(n for n in subterms(new) if type(n) is Build)
    assert type(outer.body) is Let and type(outer.body.rhs) is Index
    row = outer.body.name
    reads = [n for n in subterms(outer.body.body) if type(n) is Index]
    # every `m ! i` of the inner body is now the row variable
    assert reads and all(not (type(n.arr) is Var and n.arr.name == "m") for n in reads)
    assert any(type(n.arr) is Var and n.arr.name == row for n in reads)


def test_nothing_to_hoist_leaves_the_term_itself():
    for text in (OTHER,
                 "def f(m : Array (Array R)) : R = sum (build (length m) (\\i -> m ! i ! 0))",
                 "def dot(a : Array R, b : Array R) : R = "
                 "sum (build (length a) (\\i -> a ! i * b ! i))"):
        body = _body(text)
        assert hoist_rows(body) is body
    assert rewritten(chad.load(SMV)) and not rewritten(chad.load(OTHER))


def test_the_inner_build_of_the_gradient_is_vectorised():
    source = _grad_source(SMV)
    assert "# build: vectorised (forward pass, nested loops)" in source
    assert "per-element loop (an index" not in source
    with backend.rewriting_rows(False):
        assert "per-element loop (an index" in _grad_source(SMV)


@pytest.mark.parametrize("evm", RUNTIMES)
@pytest.mark.parametrize("rows,cols", [(0, 3), (1, 1), (3, 0), (4, 5), (17, 9)])
def test_a_matrix_vector_product_agrees_bit_for_bit(evm, rows, cols):
    rng = np.random.default_rng(rows * 31 + cols)
    args = (_matrix(rng, rows, cols), rng.normal(size=cols))
    want = chad.grad(SMV, backend="interp", evm=evm)(*args)
    got = chad.grad(SMV, evm=evm)(*args)
    agree(got, want, exact=True)


@pytest.mark.parametrize("evm", RUNTIMES)
def test_a_row_read_twice_is_not_hoisted_and_agrees_bit_for_bit(evm):
    """Hoisted, the row's cotangents would be summed in another order: not
    hoisted, the gradient is the interpreter's bit for bit."""
    assert not rewritten(chad.load(TWICE))
    rng = np.random.default_rng(5)
    args = (_matrix(rng, 6, 4), rng.normal(size=4))
    want = chad.grad(TWICE, backend="interp", evm=evm)(*args)
    agree(chad.grad(TWICE, evm=evm)(*args), want, exact=True)
    agree(chad.primal(TWICE)(*args), chad.primal(TWICE, backend="interp")(*args), exact=True)


def test_the_gradient_against_central_differences():
    rng = np.random.default_rng(7)
    m, v = _matrix(rng, 5, 4), rng.normal(size=4)
    _value, (gm, gv) = chad.grad(TWICE)(m, v)
    f = chad.primal(TWICE)
    h = 1e-6
    for i in range(5):
        for j in range(4):
            up = [r.copy() for r in m]
            down = [r.copy() for r in m]
            up[i][j] += h
            down[i][j] -= h
            assert abs((f(up, v) - f(down, v)) / (2 * h) - gm[i][j]) < 1e-6
    for j in range(4):
        up, down = v.copy(), v.copy()
        up[j] += h
        down[j] -= h
        assert abs((f(m, up) - f(m, down)) / (2 * h) - gv[j]) < 1e-6


def test_a_size_of_another_array_keeps_the_interpreters_errors():
    """`w ! i` is not hoisted: with an empty inner loop it is never read (no
    error); with a non-empty one it fails as on the interpreter."""
    rng = np.random.default_rng(3)
    m = _matrix(rng, 3, 2)
    w = _matrix(rng, 1, 2)
    empty = (m, w, np.zeros(0))
    agree(chad.grad(OTHER)(*empty), chad.grad(OTHER, backend="interp")(*empty), exact=True)
    with pytest.raises(ChadError) as compiled:
        chad.grad(OTHER)(m, w, np.ones(2))
    with pytest.raises(ChadError) as interp:
        chad.grad(OTHER, backend="interp")(m, w, np.ones(2))
    assert str(compiled.value) == str(interp.value)


def test_ragged_rows_fail_as_on_the_interpreter():
    args = ([np.ones(2), np.ones(1)], np.ones(2))
    for run in (chad.grad, chad.primal):
        with pytest.raises(ChadError) as compiled:
            run(SMV)(*args)
        with pytest.raises(ChadError) as interp:
            run(SMV, backend="interp")(*args)
        assert str(compiled.value) == str(interp.value)


def test_hostile_names_never_reach_the_source():
    text = SMV.replace("m :", "exec :").replace("m !", "exec !").replace("length m",
                                                                         "length exec")
    text = text.replace("v :", "os :").replace("v !", "os !").replace("length v", "length os")
    source = _grad_source(text)
    assert "exec" not in source and "os." not in source and "row$" not in source
    rng = np.random.default_rng(2)
    args = (_matrix(rng, 3, 3), rng.normal(size=3))
    agree(chad.grad(text)(*args), chad.grad(text, backend="interp")(*args), exact=True)
