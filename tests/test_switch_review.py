"""Adversarial review of chad/compile/switch.py: a case of (value,
backpropagator) pairs in a vectorised forward pass (np.where of the values,
ONE batched backpropagator whose branches add under masks: vector_support.vaddm,
Pass.flush; let-bound forward passes applied by vectorise.run_back;
vseq's fallback).

Every program is checked against the reference interpreter, bit for bit (only
+ - * / and comparisons), on IEEE's special values (NaN, the infinities, -0.0,
subnormals), on values whose sums in the shared cells depend on the order of
the additions (1e16, 1.0, -1e16 patterns), on empty and one-element arrays, on
the three runtimes, through `chad.vjp` (the backpropagator called again) and
`chad.primal`; and where the batched code must run, that it is what compiled
(so the agreement is the batched path's, not the per-element fallback's).

The tests at the end (`test_toreal_*`, `test_vjp_value_*`) fail: see their
docstrings (each passes with `backend.batching_cases(False)` and at the commit
before the change)."""

from __future__ import annotations

import numpy as np
import pytest

import chad
from chad.compile import backend
from chad.compile import parallel_support
from tests.test_vectorise import agree

pytestmark = pytest.mark.filterwarnings("error::SyntaxWarning", "error::RuntimeWarning")

RUNTIMES = ("array", "parallel", "map")

SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.5, -3.5, 1e300, -1e300, np.inf, -np.inf, np.nan, 1e-310,
           -1e-310, 2.0, 0.5, 1.5, -1.5, -2.0, 3.5, 1e16, -1e16]
# sums of these in a shared cell change with the order of the additions
CANCEL = [1e16, 1.0, -1e16, 3.0, -1.0, 1e16, -1e16, 0.5, 2.0, -0.5, -1e16, 1e16] * 3


def _source(text: str) -> str:
    prog = chad.load(text)
    return backend.gradient_module(prog, prog.find(None)).source


def _is_batched(text: str) -> bool:
    src = _source(text)
    # masked adds, or an if/else merged into adds of np.where (vectorise._merged)
    return "vectorised (forward pass)" in src and (
        "_vaddm(" in src or "_vselect(" in src.split("def vb", 1)[-1])


def _grads(text, args, ctg=None, **kw):
    g = chad.grad(text, **kw)
    return g(*args) if ctg is None else g(*args, ctg=ctg)


def _outcome(text, args, ctg=None, **kw):
    try:
        return "ok", _grads(text, args, ctg, **kw)
    except chad.ChadError as e:
        return "error", type(e).__name__, str(e)


def _same_as_interp(text, args, ctg=None, exact=True, evm="array"):
    got = _outcome(text, args, ctg, evm=evm)
    want = _outcome(text, args, ctg, evm=evm, backend="interp")
    assert got[0] == want[0], (got, want)
    if got[0] == "ok":
        agree(got[1], want[1], exact)
    else:
        assert got[1:] == want[1:]


def _map_r(body: str, params: str = "w : R, a : Array R") -> str:
    return f"def f({params}) : R = sum (map (\\x -> {body}) a)"


def _map_a(body: str, params: str = "w : R, a : Array R") -> str:
    return f"def f({params}) : Array R = map (\\x -> {body}) a"


# name -> (program, kind of arguments); every one of them batches its case of pairs
BATCHED = {
    # an if in both branches of an if, three deep; the captured w added to 0..3 times
    "three_deep": (_map_r(
        "if x > 0.0 then (if x > 1.0 then (if x > 2.0 then x * w * w * w else x * w * w) "
        "else x * w) else (if x < -1.0 then (if x < -2.0 then w else x) else w * w - x * w)"),
        "wa"),
    "four_deep": (_map_r(
        "if x > 0.0 then (if x > 1.0 then (if x > 2.0 then (if x > 3.0 then w * w * w * x "
        "else w * x * x) else w) else x * w * w) else (if x > -1.0 then (if x > -2.0 then "
        "w - x else x * x) else w * x)"), "wa"),
    # 3, 2, 1 and 0 adds to w, an else-if chain
    "adds_3_2_1_0": (_map_r(
        "if x > 1.0 then x * w * w * w else if x > 0.0 then x * w * w "
        "else if x > -1.0 then x * w else x"), "wa"),
    # two shared cells added to in different orders by the two branches
    "two_cells_orders": (_map_r("if x > 0.0 then x * w + x * v + w * v else v * x - w * x * v",
                                "w : R, v : R, a : Array R"), "wva"),
    "division_by_captured": (_map_r("if x > 0.0 then x / w else w / x - x / w / w"), "wa"),
    "and_or_not": (_map_r("if x > 0.0 && x < 2.0 || not (x > -1.0) then x * w else x + w * w"),
                   "wa"),
    "nan_test": (_map_r("if x != x then w else x * w"), "wa"),
    "equal_zero": (_map_r("if x == 0.0 then w * x else x * w * 2.0"), "wa"),
    "not_le": (_map_r("if not (x <= 0.0) then x * w else w - x"), "wa"),
    "lets_in_both": (_map_r(
        "if x > 0.0 then let y = x * w in let z = y * y in z + y * w "
        "else let y = x - w in y * y * w"), "wa"),
    # let-bound cases (forward passes applied in the batched backpropagator)
    "two_let_bound_cases": (_map_r(
        "let y = (if x > 0.0 then x * w else w * w * x) in "
        "let z = (if x < 1.0 then x * v else v * w) in y * z + w", "w : R, v : R, a : Array R"),
        "wva"),
    "case_on_a_case": (_map_r(
        "let y = (if x > 0.0 then x * w else x - w) in if y > 1.0 then y * w else y * y"), "wa"),
    "let_bound_case_in_branches": (_map_r(
        "if x > 0.0 then (let y = (if x > 1.0 then x * w else w) in y * y * w) "
        "else (let z = (if x < -1.0 then w * w else x) in z + z * w)"), "wa"),
    "closure_in_if": (_map_r("let g = \\y -> y * w in if x > 0.0 then g x else g (2.0 * x) + w"),
                      "wa"),
    "condition_on_a_let": (_map_r(
        "let z = x * w in if z > 0.0 then let y = z * 2.0 in y * y + y * w else 0.01 * z"), "wa"),
    "captured_and_element": (_map_r("if b && x > 0.0 then x * w else x * x",
                                    "b : Bool, w : R, a : Array R"), "bwa"),
    # Array results: a cotangent per element
    "array_nested": (_map_a(
        "if x > 0.0 then (if x > 1.0 then x * w * w else x * w) else w - x * w"), "wa"),
    "array_literals": (_map_a("if x > 0.0 then -0.0 else (if x < -1.0 then 1.0 else x * w)"),
                       "wa"),
    # builds reading a ! i (and b ! i) before the if
    "build_two_reads": ("def f(a : Array R, b : Array R, w : R) : Array R = "
                        "build (length a) (\\i -> let x = a ! i in let y = b ! i in "
                        "if x > y then (if x > 0.0 then x * w * y else y * w) "
                        "else (if y > w then x * y else w * w))", "abw"),
    "build_int_conditions": ("def f(a : Array R, b : Array R, w : R) : R = "
                             "sum (build (length a) (\\i -> let x = a ! i in "
                             "if i > 2 && toreal i < 6.5 then x * w * toreal i "
                             "else (if i == 0 then w else x * toreal i)))",
                             "abw"),
}


def _args(kind: str, a, rng, w=0.75):
    n = len(a)
    if kind == "wa":
        return (w, a)
    if kind == "wva":
        return (w, -1.25, a)
    if kind == "bwa":
        return (True, w, a)
    if kind == "abw":
        return (a, np.array(SPECIAL[::-1] * 3)[:n] if n else np.zeros(0), w)
    raise AssertionError(kind)


def _ctg(text: str, n: int, rng):
    if ": Array R =" not in text:
        return None
    c = rng.normal(size=n)
    c[::5] = -0.0
    return list(c)


@pytest.mark.parametrize("name", sorted(BATCHED))
def test_the_case_of_pairs_is_batched(name):
    assert _is_batched(BATCHED[name][0]), _source(BATCHED[name][0])


INPUTS = {
    "special": SPECIAL,
    "cancel": CANCEL,
    "random": list(np.random.default_rng(7).normal(size=40) * 2.0),
    "empty": [],
    "single_neg": [-0.5],
    "single_pos": [2.5],
    "neg_zeros": [-0.0, -0.0, 0.0],
}


@pytest.mark.parametrize("inputs", sorted(INPUTS))
@pytest.mark.parametrize("name", sorted(BATCHED))
def test_agrees_with_the_interpreter_bit_for_bit(name, inputs):
    text, kind = BATCHED[name]
    rng = np.random.default_rng(len(name))
    a = np.array(INPUTS[inputs], dtype=np.float64)
    for w in (0.75, -0.0, np.nan, 1e16):
        _same_as_interp(text, _args(kind, a, rng, w), _ctg(text, len(a), rng))


@pytest.mark.parametrize("evm", RUNTIMES)
@pytest.mark.parametrize("name", ["three_deep", "two_cells_orders", "two_let_bound_cases",
                                  "array_nested", "build_two_reads", "let_bound_case_in_branches"])
def test_every_runtime(name, evm):
    text, kind = BATCHED[name]
    rng = np.random.default_rng(3)
    for vals in (SPECIAL, CANCEL):
        a = np.array(vals)
        _same_as_interp(text, _args(kind, a, rng), _ctg(text, len(a), rng), evm=evm)


@pytest.mark.parametrize("name", ["array_nested", "build_two_reads", "two_let_bound_cases"])
def test_vjp_called_again_and_primal(name):
    text, kind = BATCHED[name]
    rng = np.random.default_rng(5)
    a = np.array(SPECIAL)
    args = _args(kind, a, rng)
    value, back = chad.vjp(text)(*args)
    want_value, want_back = chad.vjp(text, backend="interp")(*args)
    agree(value, want_value, True)
    agree(chad.primal(text)(*args), chad.primal(text, backend="interp")(*args), True)
    arr = ": Array R =" in text
    cts = ([list(rng.normal(size=len(a))), [-0.0] * len(a), list(rng.normal(size=len(a)))]
           if arr else [1.0, -0.0, -3.5])
    for ct in cts + cts[:1]:
        agree(back(ct), want_back(ct), True)


def test_transcendental_branches_within_tolerance():
    """exp, sin, tanh, sqrt, log in the branches (numpy's may differ in the last
    bit: within 1e-12), their derivatives reading forward values."""
    text = _map_r("if x > 0.5 then sqrt x * w + tanh (x * w) else "
                  "(if x > -1.0 then exp (x * w) * sin x else log (-x) * w)")
    assert _is_batched(text)
    for vals in (SPECIAL, list(np.random.default_rng(1).normal(size=30) * 3)):
        for w in (0.75, -0.0, 2.0):
            _same_as_interp(text, (w, np.array(vals)), exact=False)


def test_gradients_with_respect_to_every_argument_and_shared_order():
    """Each shared cell (w, v) gets each element's adds, those of the element's
    branch in program order, element after element: any other order changes
    these sums (1e16 + 1 - 1e16)."""
    text = _map_r("if x > 1.0 then x * w + v * x * w - x * v "
                  "else if x > -1.0 then v * x + w * x * x else w * v", "w : R, v : R, a : Array R")
    assert _is_batched(text)
    a = np.array([1e16, 0.5, -1e16, 3.0, -0.25, 1e16, 2.0, -3.0, -1e16, 0.75] * 4)
    for w, v in ((1.0, 1.0), (1e16, -1.0), (-0.0, 1e-310), (3.0, -1e16)):
        _same_as_interp(text, (w, v, a))
        with backend.batching_cases(False):
            off = _grads(text, (w, v, a))
        agree(_grads(text, (w, v, a)), off, True)


def test_big_arrays_agree_with_the_interpreter():
    text, kind = BATCHED["two_cells_orders"]
    rng = np.random.default_rng(11)
    a = rng.normal(size=10_000) * 3.0
    a[rng.integers(0, len(a), 300)] = 1e16
    a[rng.integers(0, len(a), 300)] = -1e16
    a[rng.integers(0, len(a), 30)] = np.nan
    a[rng.integers(0, len(a), 30)] = -0.0
    _same_as_interp(text, _args(kind, a, rng))


def test_parallel_runtime_forking_big_arrays():
    """Two heavy maps with ifs adding to the shared w and v: the parallel
    runtime forks (a ForkCells half: masked shared-cell adds deferred to the
    join); the gradient bit for bit the per-element code's (checked against
    the interpreter by the other tests), and the interpreter's on a forced
    fork of small arrays."""
    text = ("def f(w : R, v : R, a : Array R, b : Array R) : R = "
            "sum (map (\\x -> if x > 0.0 then x * w * v else x * w - v) a) + "
            "sum (map (\\x -> if x < 0.5 then (if x < -0.5 then x * w * w else v * x) "
            "else w * v * x) b)")
    assert _is_batched(text)
    rng = np.random.default_rng(2)
    n = 100_000
    a, b = rng.normal(size=n) * 1e8, rng.normal(size=n)
    a[::7], a[3::7], a[5::11], a[6::13] = 1e16, -1e16, -0.0, np.nan
    b[::5], b[2::5] = 1e16, -1e16
    parallel_support.stats.reset()
    got = _grads(text, (1.0, -1.0, a, b), evm="parallel")
    assert parallel_support.stats.decided > 0
    with backend.batching_cases(False):
        want = _grads(text, (1.0, -1.0, a, b))
    agree(got, want, True)
    with parallel_support.grain(1):
        _same_as_interp(text, (1.0, -1.0, a[:60], b[:60]), evm="parallel")


# ---------------------------------------------------------------- what must stay per element

# the condition does not depend on the element: batched since (a mask of n
# copies of the flag, chad/compile/switch.py), but for a Bool parameter (its
# cotangent's scope of a sum type stays per element)
BATCHED_FLAGS = {"captured_real", "inner_captured"}

PER_ELEMENT = {
    "captured_real": (_map_r("if w > 0.0 then x * w else x - w"), "wa"),
    "captured_bool": (_map_r("if b then x * w else x", "b : Bool, w : R, a : Array R"), "bwa"),
    "inner_captured": (_map_r("if x > 0.0 then (if w > 0.0 then x * w else w * w) else x"),
                       "wa"),
    # a branch reading an array at a computed index might fail
    "index_in_branch": ("def f(a : Array R, b : Array R, w : R) : R = sum (build (length a) "
                        "(\\i -> let x = a ! i in if x > 0.0 then b ! i * x else x * w))", "abw"),
    "floor_in_branch": (_map_r("if x > 0.0 then toreal (floor x) * w else x * w"), "wa"),
}


@pytest.mark.parametrize("name", sorted(PER_ELEMENT))
def test_cases_kept_per_element_agree(name):
    text, kind = PER_ELEMENT[name]
    assert ("per-element loop" in _source(text)) is (name not in BATCHED_FLAGS)
    rng = np.random.default_rng(4)
    a = np.array(SPECIAL)
    for w in (0.75, -0.5):
        args = _args(kind, a, rng, w)
        if kind == "bwa":
            for flag in (True, False):
                _same_as_interp(text, (flag,) + args[1:])
        else:
            _same_as_interp(text, args)


def test_errors_are_the_interpreters():
    """A branch indexing past the end only for elements that take it, and
    floor of an infinity in the branch taken: the interpreter's error, and none
    where no element reaches it."""
    text, _ = PER_ELEMENT["index_in_branch"]
    a = np.array([1.0, -2.0, 3.0, -4.0])
    _same_as_interp(text, (a, np.ones(2), 0.5))          # a ! 2 > 0: b ! 2 fails
    _same_as_interp(text, (a[[1, 3]], np.ones(1), 0.5))  # no element reads b ! 1
    text, _ = PER_ELEMENT["floor_in_branch"]
    _same_as_interp(text, (0.5, np.array([1.0, np.inf])))
    _same_as_interp(text, (0.5, np.array([1.0, -np.inf, np.nan])))


def test_map_with_an_if_inside_another_loop():
    """The inner map's batched backpropagator runs at a deeper level of the
    cells (inside the outer map's per-element pass and inside iter)."""
    texts = [
        ("def f(w : R, m : Array (Array R)) : R = sum (map (\\r -> let s = sum r in "
         "sum (map (\\x -> if x > s then x * w * s else (if x < 0.0 then w * w else x * s)) r)) m)"),
        ("def f(w : R, a : Array R) : R = iter 3 (\\s -> s + sum (map (\\x -> "
         "if x > s then x * w * s else s * w) a)) 0.5"),
    ]
    m = [np.array([1.0, -2.0, 1e16, -1e16, 3.0, np.nan, -0.0]), np.array([]), np.array([2.0]),
         np.random.default_rng(2).normal(size=20)]
    for evm in RUNTIMES:
        _same_as_interp(texts[0], (0.75, m), evm=evm)
        _same_as_interp(texts[1], (0.75, m[0]), evm=evm)
        _same_as_interp(texts[1], (0.75, m[3]), evm=evm)


def test_jacrev_calls_the_backpropagator_per_result():
    text, _ = BATCHED["array_nested"]
    f = chad.from_text(text)
    a = np.array([1.0, -2.0, 3.0, 0.5, -0.0, 1e16, -1e16, 2.0])
    for argnums in (0, 1, (0, 1)):
        agree(chad.jacrev(f, argnums=argnums)(0.5, a),
              chad.jacrev(f, argnums=argnums, backend="interp")(0.5, a), True)


# ---------------------------------------------------------------- failing: bugs of the change

BIG = "1" + "0" * 400  # an integer beyond the float range: toreal gives inf


def test_toreal_beyond_float_range_in_a_branch_not_taken():
    """switch.py computes both branches' values (and lets) for every element,
    trusting failing.safe; `toreal` is `safe` but its batched form
    (`_np.asarray(z, dtype=_np.float64)`, chad/primitives.py TOREAL) raises
    OverflowError on an integer beyond the float range, where the evaluator
    gives inf. Here no element even takes the branch (i < 1 only for i = 0,
    where i * BIG is 0): the interpreter succeeds; the batched gradient raises
    "internal compiler error ... please report this" (per element, as before
    the change, it agrees)."""
    text = (f"def f(a : Array R) : R = sum (build (length a) (\\i -> let x = a ! i in "
            f"if i < 1 then x * toreal (i * {BIG}) else x * x))")
    assert _is_batched(text)
    a = np.array([1.0, 2.0, 3.0])
    with backend.batching_cases(False):
        _same_as_interp(text, (a,))
    _same_as_interp(text, (a,))


def test_toreal_beyond_float_range_in_a_branch_taken():
    """As above, the branch taken by element 1 (toreal of 10**400 is inf, a
    gradient of inf): the interpreter's IEEE values, the batched code an
    internal error."""
    text = (f"def f(a : Array R, w : R) : R = sum (build (length a) (\\i -> let x = a ! i in "
            f"if x > 0.0 then x * w else x * toreal (i * {BIG})))")
    assert _is_batched(text)
    a = np.array([1.0, -2.0, 3.0, 0.5])
    with backend.batching_cases(False):
        _same_as_interp(text, (a, 0.5))
    _same_as_interp(text, (a, 0.5))


def test_vjp_value_does_not_alias_the_batched_backpropagator():
    """chad.vjp's primal value must own its data: changing it must not change
    what the backpropagator computes (the interpreter's values are fresh;
    per element, before the change, they were). With the case batched, the
    map's result array is the very array the batched backpropagator reads as
    the forward value of sqrt / tanh (lower.py _forward_pairs: `_vout(ys, ...,
    fresh=True)` hands out the array the VecBack captures), so writing into
    the value corrupts the gradient. (The same aliasing exists for a plain
    vectorised `map (\\x -> sqrt x)` before this change; the change extends it
    to every map whose body is an if.)"""
    for body in ("sqrt (if x > 0.0 then x * w else x * x)",
                 "tanh (if x > 0.0 then x * w else x * x)"):
        text = _map_a(body)
        assert _is_batched(text)
        a = np.array([1.0, -2.0, 3.0, 0.5])
        ct = [1.0, 2.0, 3.0, 4.0]
        want = chad.vjp(text, backend="interp")(0.5, a)[1](ct)
        value, back = chad.vjp(text)(0.5, a)
        value[...] = 100.0
        agree(back(ct), want, False)
