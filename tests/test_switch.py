"""A case whose branches are (value, backpropagator) pairs in a vectorised
forward pass (chad/compile/switch.py; docs/compiler.md, "Branches"): the
values np.where, ONE batched backpropagator whose branches add under their
masks (vector_support.vaddm). Checked bit for bit against the interpreter on
the three runtimes, on values that take both branches and on IEEE's special
values; that the batched code is what compiles (and the per-element code where
it must); shared cells added to from both branches in the evaluator's order.
Nothing here is timed."""

from __future__ import annotations

import numpy as np
import pytest

import chad
from chad.compile import backend
from tests.test_vectorise import RUNTIMES, agree

pytestmark = pytest.mark.filterwarnings("error::SyntaxWarning", "error::RuntimeWarning")

RELU = "def f(a : Array R) : R = sum (map (\\x -> if x > 0.0 then x else 0.0) a)"
CLAMP = ("def f(a : Array R) : R = sum (map (\\x -> "
         "if x > 1.0 then 1.0 else if x < -1.0 then -1.0 else x * x) a)")
# both branches add to the captured w (a cell the elements share): the order
# of the adds is element by element, each its own branch's, in program order
SHARED = ("def f(w : R, a : Array R) : R = sum (map (\\x -> "
          "if x > 0.0 then x * w * w else sin (x * w)) a)")
SHARED_EXACT = ("def f(w : R, a : Array R) : R = sum (map (\\x -> "
                "if x > 0.0 then x * w * w else x * w - w) a)")
# one add to w in each branch (Pass.flush: np.where of the two, no compress)
LEAKY = ("def f(w : R, a : Array R) : R = "
         "sum (map (\\x -> if x > 0.0 then x * w else 0.01 * x * w) a)")
LETS = ("def f(a : Array R) : R = sum (map (\\x -> "
        "if x > 0.0 then let y = x * 2.0 in y * y + y else 0.01 * x) a)")
BUILD = ("def f(a : Array R, c : R) : Array R = build (length a) (\\i -> "
         "let x = a ! i in if x < c then c - x else x * c)")
ABS_SUM = ("def f(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> "
           "let d = a ! i - b ! i in if d > 0.0 then d else -d))")
VEC_OUT = "def f(a : Array R) : Array R = map (\\x -> if x >= 0.0 then exp x else x) a"
NESTED_CASE = ("def f(w : R, a : Array R) : R = sum (map (\\x -> "
               "if x > 0.0 then (if x > 2.0 then w * x else x * x) else w - x) a)")

PROGRAMS = {"relu": RELU, "clamp": CLAMP, "shared": SHARED, "shared_exact": SHARED_EXACT,
            "leaky": LEAKY, "lets": LETS, "build": BUILD,
            "abs_sum": ABS_SUM, "vec_out": VEC_OUT, "nested_case": NESTED_CASE}
# numpy's exp and sin may differ from the evaluator's in the last bit: within 1e-12
EXACT = {"relu", "clamp", "lets", "build", "abs_sum", "nested_case", "shared_exact", "leaky"}
SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.5, -3.5, 1e300, -1e300, np.inf, -np.inf, np.nan, 1e-310,
           2.0, 0.5]


def _source(text):
    prog = chad.load(text)
    return backend.gradient_module(prog, prog.find(None)).source


def _args(name, a, rng):
    n = len(a)
    if name in ("shared", "shared_exact", "nested_case", "leaky"):
        return (0.75, a)
    if name == "build":
        return (a, 0.25)
    if name == "abs_sum":
        return (a, rng.normal(size=n))
    return (a,)


def _ctg(name, n):
    return list(np.linspace(-1.0, 2.0, n)) if name in ("build", "vec_out") else None


def _grads(text, args, ctg, **kw):
    g = chad.grad(text, **kw)
    return g(*args) if ctg is None else g(*args, ctg=ctg)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_case_of_pairs_is_batched(name):
    src = _source(PROGRAMS[name])
    assert "vectorised (forward pass)" in src and "per-element loop" not in src, src
    assert "_vaddm(" in src or "_vselect(" in src.split("def vb", 1)[1], src


def test_an_if_else_adding_to_the_same_cells_is_merged():
    """Both branches add once to x's cell and once to w's: the batched
    function adds np.where of the two values, no masked add."""
    src = _source(LEAKY)
    back = src.split("def vb", 1)[1]
    assert "_vaddm(" not in back and back.count("_vselect(") == 2, back
    src = _source(RELU)  # one branch adds, the other does not: a masked add
    assert _source(RELU).split("def vb", 1)[1].count("_vaddm(") == 1, src


@pytest.mark.parametrize("evm", RUNTIMES)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("n", [0, 1, 9, 200])
def test_agrees_with_the_interpreter(name, evm, n):
    rng = np.random.default_rng(n)
    a = rng.normal(size=n) * 2.0
    if n > 3:
        a[:3] = [0.0, -0.0, 1.0]
    args = _args(name, a, rng)
    ctg = _ctg(name, n)
    got = _grads(PROGRAMS[name], args, ctg, evm=evm)
    want = _grads(PROGRAMS[name], args, ctg, backend="interp", evm=evm)
    agree(got, want, exact=name in EXACT)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_special_values(name):
    rng = np.random.default_rng(1)
    a = np.array(SPECIAL)
    args = _args(name, a, rng)
    ctg = _ctg(name, len(a))
    agree(_grads(PROGRAMS[name], args, ctg),
          _grads(PROGRAMS[name], args, ctg, backend="interp"), exact=name in EXACT)


def test_shared_cell_order_under_cancellation():
    """The captured w gets element 0's add, then element 1's, ...: values
    whose sum depends on that order (large terms cancelling around small ones)."""
    a = np.array([1e8, -1e-8, 1e8, 3.0, -1e8, 1e-8, -1e8, 0.5] * 8)
    args = (1.0, a)
    agree(chad.grad(SHARED_EXACT)(*args), chad.grad(SHARED_EXACT, backend="interp")(*args),
          exact=True)
    agree(chad.grad(LEAKY)(*args), chad.grad(LEAKY, backend="interp")(*args), exact=True)
    agree(chad.grad(NESTED_CASE)(*args), chad.grad(NESTED_CASE, backend="interp")(*args),
          exact=True)


def test_vjp_twice_and_cotangents_of_both_signs():
    a = np.array([-1.0, 0.5, 2.0, -0.0, 3.0])
    value, back = chad.vjp(VEC_OUT)(a)
    want_value, want_back = chad.vjp(VEC_OUT, backend="interp")(a)
    agree(value, want_value, exact=False)
    for ctg in ([1.0, -1.0, 0.5, -0.0, 2.0], [-0.0] * 5):
        agree(back(ctg), want_back(ctg), exact=False)
        agree(back(ctg), want_back(ctg), exact=False)


CASES_KEPT_PER_ELEMENT = {
    # a branch reading an array at a computed index might fail: per element
    "index": ("def f(a : Array R, b : Array R) : R = sum (map (\\x -> "
              "if x > 0.0 then b ! 0 * x else x) a)"),
    # a branch matching a value it reads (a sum type), not a Bool
    "reads_binder": ("def f(a : Array R) : R = sum (map (\\x -> "
                     "case (if x > 0.0 then inl x else inr (x * 2.0)) of "
                     "{ inl y -> y * y | inr z -> z }) a)"),
}


@pytest.mark.parametrize("name", sorted(CASES_KEPT_PER_ELEMENT))
def test_cases_that_stay_per_element_still_agree(name):
    text = CASES_KEPT_PER_ELEMENT[name]
    a = np.array([1.0, -2.0, 0.5, -0.0])
    args = (a, np.array([3.0])) if name == "index" else (a,)
    agree(chad.grad(text)(*args), chad.grad(text, backend="interp")(*args), exact=True)
    if name == "index":
        with pytest.raises(chad.ChadError) as got:
            chad.grad(text)(a, np.zeros(0))
        with pytest.raises(chad.ChadError) as want:
            chad.grad(text, backend="interp")(a, np.zeros(0))
        assert str(got.value) == str(want.value)


def test_a_branch_adding_to_a_cell_with_no_value_runs_element_by_element():
    """vseq's guard (VecBack.masked): an element's cell that starts as no
    value (None) cannot hold a branch's adds for some elements only, so the
    per-element closures run; vaddm itself refuses such a cell."""
    from chad.compile import vector_support as vs

    def fn(*args):
        raise AssertionError("the batched function must not run")

    def closure(i):
        def back(ct):
            def act(cells):
                cells[1] = ct * 2.0 if cells[1] is None else cells[1] + ct * 2.0
                return None
            return act
        return back

    n = 3
    lazy = lambda: (None, tuple(closure(i) for i in range(n)))  # noqa: E731
    back = vs.VecBack(fn, n, (), lazy, False, None, (1,))
    act = vs.vseq(back, np.array([1.0, -0.0, 3.0]), (None,), (0,))
    cells = [None]
    (got, rest) = act(cells)
    assert rest is None and got.tolist() == [2.0, -0.0, 6.0]
    run = vs.Pass(0)
    with pytest.raises(RuntimeError):
        vs.vaddm([None], 0, run, np.ones(2), 2, np.array([True, False]))



def test_flush_of_masked_adds_to_a_shared_cell_is_the_chain_of_adds():
    """Pass.flush: masked adds (the values of the elements that made them,
    element by element, in program order; complementary masks too) give the
    evaluator's running sum."""
    from chad.compile import vector_support as vs

    rng = np.random.default_rng(4)
    n = 50
    v1, v2, v3 = (rng.normal(size=n) * 10.0 ** rng.integers(-8, 9, n) for _ in range(3))
    c = rng.normal(size=n) > 0
    d = rng.normal(size=n) > 0

    def chain(adds):
        acc = 0.25
        for i in range(n):
            for v, m in adds:
                if m is None or m[i]:
                    acc = acc + float(v[i])
        return acc

    for adds in ([(v1, c), (v2, ~c)], [(v1, c), (v2, d)], [(v1, c), (v2, ~c), (v3, None)],
                 [(v1, None), (v2, ~c)], [(v1, c & d), (v2, ~c), (v3, c & ~d)]):
        run = vs.Pass(1)
        cells = [0.25]
        for v, m in adds:
            if m is None:
                vs.vadd(cells, 0, run, v.copy(), n)
            else:
                vs.vaddm(cells, 0, run, v, n, m)
        run.flush(cells)
        assert cells[0].hex() == chain(adds).hex()


# max and min (their derivatives add `case c of d | 0.0`, or take a component
# of `case c of lpair 0 d | lpair d 0`: np.where, the linear zero LZERO being a
# constant that cannot fail, chad/compile/failing.py; vectorise._where_pairs)
MAXMIN = {
    "relu_max": "def f(a : Array R) : R = sum (map (\\x -> max(0.0, x)) a)",
    "min_cap": "def f(w : R, a : Array R) : R = sum (map (\\x -> min(x * w, 1.0)) a)",
    "max_pair": ("def f(a : Array R, b : Array R) : R = "
                 "sum (build (length a) (\\i -> max(a ! i, b ! i) * a ! i))"),
}


@pytest.mark.parametrize("evm", RUNTIMES)
@pytest.mark.parametrize("name", sorted(MAXMIN))
def test_max_and_min_in_a_map_are_batched_and_agree(name, evm):
    text = MAXMIN[name]
    src = _source(text)
    assert "vectorised (forward pass)" in src and "per-element loop" not in src, src
    a = np.array(SPECIAL + [-0.0, 0.0, 1.0, 1.0])
    rng = np.random.default_rng(2)
    args = {"relu_max": (a,), "min_cap": (0.5, a),
            "max_pair": (a, np.concatenate((a[::-1][1:], [0.0])))}[name]
    agree(chad.grad(text, evm=evm)(*args), chad.grad(text, backend="interp", evm=evm)(*args),
          exact=True)
    b = rng.normal(size=300)
    args = {"relu_max": (b,), "min_cap": (1.5, b), "max_pair": (b, rng.normal(size=300))}[name]
    agree(chad.grad(text, evm=evm)(*args), chad.grad(text, backend="interp", evm=evm)(*args),
          exact=True)


FLAG = "def f(w : R, a : Array R) : R = sum (map (\\x -> if w > 0.0 then x * w else x - w) a)"


@pytest.mark.parametrize("evm", RUNTIMES)
@pytest.mark.parametrize("w", [0.5, -0.5, 0.0, -0.0, float("nan"), float("inf")])
def test_a_case_on_a_bool_outside_the_loop_is_one_mask(w, evm):
    """`if w > 0.0` in a map body: the same branch for every element, batched
    as a mask of n copies of the flag."""
    src = _source(FLAG)
    assert "vectorised (forward pass)" in src and "_np.full(" in src, src
    a = np.array(SPECIAL + list(np.linspace(-2.0, 2.0, 9)))
    agree(chad.grad(FLAG, evm=evm)(w, a), chad.grad(FLAG, backend="interp", evm=evm)(w, a),
          exact=True)
