"""Nested loops in a derivative (chad/arrays/nested.py, chad/arrays/
nested_support.py; docs/compiler.md, "Nested loops"): the forward pass of a
build whose body has a build is batched over both loops, and the outer
elements' backpropagators run as one batched function. Checked against the
interpreter on the three runtimes (bit for bit where numpy performs the
evaluator's operations, else within 1e-12 relative), that the batched code is
what runs (and the per-element code where it must: an empty inner loop, a
guard), the per-element reverse pass it falls back to, errors, and hostile
names. Nothing here is timed.
"""

from __future__ import annotations

import numpy as np
import pytest

import chad
from chad.arrays import nested_support
from chad.compile import backend, vector_support
from chad.errors import ChadError
from tests.test_vectorise import RUNTIMES, agree

pytestmark = pytest.mark.filterwarnings("error::SyntaxWarning", "error::RuntimeWarning")

SMV = ("def smv(m : Array (Array R), v : Array R) : R = "
       "sum (build (length m) (\\i -> sum (build (length v) (\\j -> m ! i ! j * v ! j))))")
MATVEC = ("def mv(m : Array (Array R), v : Array R) : Array R = "
          "build (length m) (\\i -> sum (build (length v) (\\j -> m ! i ! j * v ! j)))")
AFFINE = ("def aff(w : Array (Array R), b : Array R, x : Array R) : R = "
          "sum (build (length w) (\\i -> "
          "sum (build (length x) (\\j -> w ! i ! j * x ! j)) * 2.0 + b ! i))")
TANH = ("def t(w : Array (Array R), x : Array R) : R = "
        "sum (build (length w) (\\i -> sum (build (length x) (\\j -> tanh (w ! i ! j * x ! j)))))")
# the inner loop adds to a cell of the outer element (s): its reverse pass runs
# element by element (Nested.ready), the forward pass batched
OUTER_CELL = ("def oc(m : Array (Array R), a : Array R, v : Array R) : R = "
              "sum (build (length m) (\\i -> let s = a ! i in "
              "sum (build (length v) (\\j -> m ! i ! j * v ! j * s))))")

PROGRAMS = {"smv": SMV, "matvec": MATVEC, "affine": AFFINE, "tanh": TANH,
            "outer_cell": OUTER_CELL}
EXACT = {"smv", "matvec", "affine", "outer_cell"}


def _args(name, rng, rows, cols):
    m = [rng.normal(size=cols) for _ in range(rows)]
    v = rng.normal(size=cols)
    if name == "affine":
        return m, rng.normal(size=rows), v
    if name == "outer_cell":
        return m, rng.normal(size=rows), v
    return m, v


def _grad(text, args, **kw):
    if text is MATVEC:
        rows = len(args[0])
        ctg = list(np.linspace(-1.0, 2.0, rows)) if rows else []
        return chad.grad(text, **kw)(*args, ctg=ctg)
    return chad.grad(text, **kw)(*args)


def _source(text, evm="array"):
    prog = chad.load(text)
    return backend.gradient_module(prog, prog.find(None), "efficient", evm).source


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_outer_loop_of_the_gradient_is_batched(name):
    source = _source(PROGRAMS[name])
    assert "# build: vectorised (forward pass, nested loops)" in source
    assert "per-element loop" not in source


@pytest.mark.parametrize("evm", RUNTIMES)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("rows,cols", [(1, 1), (2, 3), (5, 4), (13, 7)])
def test_nested_gradients_agree_with_the_interpreter(name, evm, rows, cols):
    text = PROGRAMS[name]
    rng = np.random.default_rng(rows * 100 + cols)
    args = _args(name, rng, rows, cols)
    before = vector_support.FELL_BACK[0]
    got = _grad(text, args, evm=evm)
    if evm != "map":  # the map runtime compiles no inlined code
        assert vector_support.FELL_BACK[0] == before  # the batched code ran
    agree(got, _grad(text, args, backend="interp", evm=evm), exact=name in EXACT)


@pytest.mark.parametrize("name", ["smv", "affine"])
def test_special_values_bit_for_bit(name):
    text = PROGRAMS[name]
    vals = [0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 1e308, -1e308, 5e-324]
    m = [np.array(vals[k:] + vals[:k]) for k in range(4)]
    v = np.array(vals[::-1])
    args = (m, v) if name == "smv" else (m, np.array(vals[:4]), v)
    agree(_grad(text, args), _grad(text, args, backend="interp"), exact=True)


@pytest.mark.parametrize("evm", ["array", "parallel"])
def test_an_empty_inner_loop_runs_the_per_element_code(evm):
    """CHAD's `case length = 0` guard: the batched forward pass takes the
    non-empty branch; with an empty inner loop it falls back."""
    args = ([np.zeros(0), np.zeros(0)], np.zeros(0))
    before = vector_support.FELL_BACK[0]
    got = chad.grad(SMV, evm=evm)(*args)
    assert vector_support.FELL_BACK[0] == before + 1
    agree(got, chad.grad(SMV, backend="interp", evm=evm)(*args), exact=True)
    agree(chad.grad(SMV, evm=evm)([], np.ones(3)),
          chad.grad(SMV, backend="interp", evm=evm)([], np.ones(3)), exact=True)


def test_inner_loops_adding_to_outer_and_shared_cells_stay_batched(monkeypatch):
    """An inner loop adding to a cell of the outer element (s) or to a shared
    one (a captured real c): the contributions summed in the evaluator's order
    (nested_support.inner_adds), no element-by-element reverse pass."""
    calls = []
    original = vector_support._one_by_one
    monkeypatch.setattr(vector_support, "_one_by_one",
                        lambda *a: calls.append(1) or original(*a))
    shared = ("def sc(m : Array (Array R), c : R, v : Array R) : R = "
              "sum (build (length m) (\\i -> c * 3.0 + sum (build (length v) "
              "(\\j -> m ! i ! j * v ! j * c + c))))")
    rowmap = ("def rm(m : Array (Array R), c : R) : R = "
              "sum (build (length m) (\\i -> sum (map (\\x -> x * c * x) (m ! i))))")
    for rows, cols in [(1, 1), (4, 3), (9, 6)]:
        rng = np.random.default_rng(rows + cols)
        args = _args("outer_cell", rng, rows, cols)
        agree(_grad(OUTER_CELL, args), _grad(OUTER_CELL, args, backend="interp"), exact=True)
        m, v = args[0], args[2]
        for evm in RUNTIMES:
            agree(chad.grad(shared, evm=evm)(m, 0.7, v),
                  chad.grad(shared, backend="interp", evm=evm)(m, 0.7, v), exact=True)
            agree(chad.grad(rowmap, evm=evm)(m, -1.3),
                  chad.grad(rowmap, backend="interp", evm=evm)(m, -1.3), exact=True)
    assert not calls
    for text in (shared, rowmap):
        assert "forward pass, nested loops" in _source(text)


def test_ragged_rows_of_a_map_run_the_per_element_code():
    rowmap = ("def rm(m : Array (Array R)) : R = "
              "sum (build (length m) (\\i -> sum (map (\\x -> x * x) (m ! i))))")
    args = ([np.ones(3), np.arange(2.0)],)
    before = vector_support.FELL_BACK[0]
    agree(chad.grad(rowmap)(*args), chad.grad(rowmap, backend="interp")(*args), exact=True)
    assert vector_support.FELL_BACK[0] == before + 1


def test_the_per_element_reverse_pass_agrees_when_forced(monkeypatch):
    monkeypatch.setattr(nested_support.Nested, "ready", lambda self, depth: False)
    rng = np.random.default_rng(4)
    for name in ("smv", "affine"):
        args = _args(name, rng, 6, 5)
        agree(_grad(PROGRAMS[name], args), _grad(PROGRAMS[name], args, backend="interp"),
              exact=True)


def test_vjp_runs_the_backward_pass_twice():
    rng = np.random.default_rng(8)
    args = _args("smv", rng, 5, 4)
    value, back = chad.vjp(SMV)(*args)
    want_value, want_back = chad.vjp(SMV, backend="interp")(*args)
    agree(value, want_value, exact=True)
    for ct in (1.0, -2.5):
        agree(back(ct), want_back(ct), exact=True)


def test_ragged_rows_fail_as_on_the_interpreter():
    args = ([np.ones(3), np.ones(2)], np.ones(3))
    with pytest.raises(ChadError) as compiled:
        chad.grad(SMV)(*args)
    with pytest.raises(ChadError) as interp:
        chad.grad(SMV, backend="interp")(*args)
    assert str(compiled.value) == str(interp.value)


def test_hostile_names_never_reach_the_source():
    text = (AFFINE.replace("w ", "exec ").replace("(length w)", "(length exec)")
            .replace("w !", "exec !").replace("x ", "os ").replace("(length x)", "(length os)")
            .replace("x !", "os !").replace("b ", "import ").replace("b !", "import !"))
    assert "exec" in text and "import" in text
    source = _source(text)
    assert "exec" not in source and "import" not in source and "os." not in source
    rng = np.random.default_rng(9)
    args = _args("affine", rng, 3, 2)
    agree(chad.grad(text)(*args), chad.grad(text, backend="interp")(*args), exact=True)


def test_row_bags_are_built_with_the_evaluators_additions():
    """RowBags replays the element's adds with plusv, in order."""
    from chad.arrays.bag import BArray, BPlus

    vals = np.arange(6.0).reshape(2, 3)
    cell = nested_support.RowBags()
    cell.items.append(("rows", vals, None))
    cell.items.append(("rows", vals * 2, None))
    bag = cell.bag(1)
    assert type(bag) is BPlus and type(bag.left) is BArray
    assert list(bag.left.vals) == [6.0, 8.0, 10.0] and list(bag.right.vals) == [3.0, 4.0, 5.0]
    assert len(cell.finals(2)) == 2


SPECIAL_ROWS = np.array([[0.0, -0.0, 1.5, np.inf], [-0.0, -0.0, -1.5, -np.inf],
                         [np.nan, 0.0, 1e308, 2.0], [-0.0, 5e-324, 1e308, -2.0]])


def _chain(rows, cell):
    """The bag the evaluator's n adds of BArray (rows[k]) make."""
    from chad.compile.support import padd
    from chad.arrays.bag import BArray

    for k in range(len(rows)):
        cell = padd(BArray(rows[k].copy()), cell)
    return cell


def _bits(a):
    return np.asarray(a, dtype=np.float64).tobytes()


@pytest.mark.parametrize("before", [None, "bag"])
def test_a_brows_bag_sums_as_its_chain_of_adds(before):
    from chad.arrays.bag import BArray, BEMPTY, BRows, collect, scatter, to_dense, zeros
    from chad.compile.support import padd
    from chad.linear import LR

    cell = BEMPTY if before is None else BArray(np.array([1.0, -0.0, 3.0, -0.0]))
    rows = SPECIAL_ROWS
    want = to_dense(_chain(rows, cell), 4, LR())
    got_bag = padd(BRows(rows), cell)
    assert _bits(to_dense(got_bag, 4, LR())) == _bits(want)
    # collected pair by pair (its vals and idx made), the same sums again
    pairs, _ = collect(got_bag, LR())
    assert _bits(scatter(zeros(4, LR())[0], pairs, LR())[0]) == _bits(want)
    # a later add on its left
    later = BArray(np.array([-0.0, 2.0, -3.0, 0.0]))
    assert _bits(to_dense(padd(later, got_bag), 4, LR())) == \
        _bits(to_dense(padd(later, _chain(rows, cell)), 4, LR()))


def test_rows_densified_at_once_as_one_by_one():
    from chad.arrays.bag import BArray
    from chad.arrays.cotangents import densify
    from chad.types import ArrayT, R

    ty = ArrayT(ArrayT(R))
    rows = SPECIAL_ROWS
    tup = nested_support.RowsTuple(rows)
    primal = tuple(np.zeros(4) for _ in range(4))
    fast = densify(ty, primal, BArray(tup))
    slow = densify(ty, primal, BArray(tuple(tup)))  # a plain tuple: row by row
    assert [_bits(r) for r in fast] == [_bits(r) for r in slow]
    # rows longer than the primal's: the general path (and its error)
    short = tuple(np.zeros(3) for _ in range(4))
    with pytest.raises(Exception) as one:
        densify(ty, short, BArray(tup))
    with pytest.raises(Exception) as other:
        densify(ty, short, BArray(tuple(tup)))
    assert type(one.value) is type(other.value) and str(one.value) == str(other.value)


LETS = {
    "map_let": "def f(m : Array (Array R)) : R = sum (build (length m) (\\i -> "
               "sum (map (\\x -> let y = x * x in y * y + y) (m ! i))))",
    "build_let": "def f(m : Array (Array R), v : Array R) : R = sum (build (length m) (\\i -> "
                 "sum (build (length v) (\\j -> let t = m ! i ! j * v ! j in t * t - t))))",
    "lets_captured": "def f(m : Array (Array R), c : R) : R = sum (build (length m) (\\i -> "
                     "sum (map (\\x -> let y = x * c in let z = y * y in z + y * c) (m ! i))))",
}


@pytest.mark.parametrize("evm", RUNTIMES)
@pytest.mark.parametrize("name", sorted(LETS))
def test_lets_in_inner_bodies_stay_batched_and_exact(name, evm, monkeypatch):
    """CHAD's let in an inner loop's backpropagator (a scope per element
    pair): batched, bit for bit, no element-by-element reverse pass."""
    text = LETS[name]
    assert "forward pass, nested loops" in _source(text)
    calls = []
    original = vector_support._one_by_one
    monkeypatch.setattr(vector_support, "_one_by_one",
                        lambda *a: calls.append(1) or original(*a))
    for rows, cols in [(1, 1), (4, 3), (7, 5)]:
        rng = np.random.default_rng(rows * 7 + cols)
        m = [rng.normal(size=cols) for _ in range(rows)]
        args = {"map_let": (m,), "build_let": (m, rng.normal(size=cols)),
                "lets_captured": (m, -0.6)}[name]
        _batched_and_exact(text, evm, args)
    assert not calls


def _batched_and_exact(text, evm, args):
    """The compiled gradient ran the batched code (no fallback) and is the
    interpreter's bit for bit."""
    before = vector_support.FELL_BACK[0]
    got = chad.grad(text, evm=evm)(*args)
    if evm != "map":
        assert vector_support.FELL_BACK[0] == before
    agree(got, chad.grad(text, backend="interp", evm=evm)(*args), exact=True)


OUTER = {
    "outer": "def f(a : Array R, v : Array R) : R = sum (build (length a) (\\i -> "
             "sum (build (length v) (\\j -> a ! i * v ! j - 0.5 * v ! j))))",
    "outer_twice": "def f(a : Array R, v : Array R) : R = sum (build (length a) (\\i -> "
                   "a ! i + sum (build (length v) (\\j -> a ! i * v ! j * a ! i))))",
}


@pytest.mark.parametrize("evm", RUNTIMES)
@pytest.mark.parametrize("name", sorted(OUTER))
def test_outer_products_are_batched_and_exact(name, evm):
    """`a ! i` read in the inner loop (a gather at the indices [i, i, ...]):
    its elements along the inner loop, and the cotangents of `a` as one BArray
    of the pairs in the evaluator's order."""
    text = OUTER[name]
    assert "forward pass, nested loops" in _source(text)
    for rows, cols in [(1, 1), (4, 3), (7, 5)]:
        rng = np.random.default_rng(rows * 3 + cols)
        args = (rng.normal(size=rows) * np.array([1e16, -1e16, 1.0, -0.0, 3.0, 2.0, 1.0])[:rows],
                rng.normal(size=cols))
        _batched_and_exact(text, evm, args)


def test_a_reverse_pass_keeping_nothing_returns_the_rules_result():
    """The outer product's outer reverse pass keeps no cell: batched, it still
    returns what the evaluation rule's chain of scopes returns (the last
    element's cells and its action's result), and the gradient's cells."""
    text = OUTER["outer"]
    prog = chad.load(text)
    d = prog.find(None)
    batched = backend.gradient_module(prog, d, "efficient", "array")
    with backend.vectorising(False):
        per_element = backend.gradient_module(prog, d, "efficient", "array")
    assert "forward pass, nested loops" in batched.source
    for n in (0, 1, 4):
        args = (np.linspace(-1.0, 2.0, n), np.array([0.5, -0.0, 3.0]), 1.0)
        got, want = batched.entry(*args), per_element.entry(*args)
        assert got[0].hex() == want[0].hex()
        assert got[1][0] == want[1][0]  # the rule's result (the gradients: tests above)
