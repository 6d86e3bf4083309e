"""Review of the nested-loop derivatives (chad/arrays/nested.py,
chad/arrays/nested_support.py, vectorise.py's closures, vector_support's
vtake_numbers / vseq): failing cases, then the strongest cases that held.

Failing (at the time of writing):

* Two gathers of one captured vector in the inner loop (`v ! j` and
  `v ! (j + 1)`): the outer elements' two bag adds to v's shared cell are
  made as "all n of the first, then all n of the second" (`vbagadd` per add
  site), the evaluator makes them element by element (A0, B0, A1, B1, ...):
  the cotangent of v is summed in another order, not bit for bit (and with
  cancellation not even close).
* A nested forward pass reading an untyped `a ! i` checks at run time that a
  is a float64 ndarray (`vtake_numbers`); an Array Z (`toreal (k ! i)`) or an
  array literal (a tuple) fails that guard every time, and the region
  silently runs its per-element code (`vector_support.FELL_BACK` grows).

Nothing here is timed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import chad
from chad.compile import vector_support
from chad.errors import ChadError
from tests.test_vectorise import RUNTIMES, agree

pytestmark = pytest.mark.filterwarnings("error::SyntaxWarning", "error::RuntimeWarning")


def _grad(text, args, **kw):
    return chad.grad(text, **kw)(*args)


def _same(text, args, evm="array", exact=True, ctg=None):
    extra = {} if ctg is None else {"ctg": ctg}
    want = chad.grad(text, backend="interp", evm=evm)(*args, **extra)
    got = chad.grad(text, evm=evm)(*args, **extra)
    agree(got, want, exact=exact)


# ------------------------------------------------------------------ failing

SHIFT = ("def f(m : Array (Array R), v : Array R) : R = "
         "sum (build (length m) (\\i -> sum (build (length v - 1) "
         "(\\j -> m ! i ! j * v ! j * v ! (j + 1)))))")


@pytest.mark.parametrize("evm", RUNTIMES)
def test_two_reads_of_a_captured_vector_are_added_in_the_evaluators_order(evm):
    # d/dv[1] = sum over rows i of m[i][1] * v[2] (read at j = 1) and
    # m[i][0] * v[0] (read at j + 1 = 1): the evaluator adds them row by row
    # ((1e16 + 1) - 1e16 + 1 = 1 + 1), not read by read (1e16 - 1e16 + 1 + 1)
    args = ([[1.0, 1e16, 0.0], [1.0, -1e16, 0.0]], [1.0, 1.0, 1.0, 1.0])
    want = chad.grad(SHIFT, backend="interp", evm=evm)(*args)
    got = chad.grad(SHIFT, evm=evm)(*args)
    assert list(want[1][1]) == [2.0, 0.0, 0.0, 0.0]
    agree(got, want, exact=True)  # compiled: [2.0, 2.0, 0.0, 0.0]


@pytest.mark.parametrize("evm", ["array", "parallel"])
def test_two_reads_of_a_captured_vector_bit_for_bit_on_random_values(evm):
    rng = np.random.default_rng(0)
    args = ([rng.normal(size=3) for _ in range(2)], rng.normal(size=4))
    _same(SHIFT, args, evm=evm)


INT_OUTER = ("def f(m : Array (Array R), k : Array Z, v : Array R) : R = "
             "sum (build (length m) (\\i -> toreal (k ! i) * "
             "sum (build (length v) (\\j -> m ! i ! j * v ! j))))")
INT_INNER = ("def f(m : Array (Array R), k : Array Z, v : Array R) : R = "
             "sum (build (length m) (\\i -> sum (build (length v) "
             "(\\j -> m ! i ! j * v ! j * toreal (k ! j)))))")
LITERAL = ("def f(m : Array (Array R), v : Array R, c : R) : R = "
           "let w = [1.0, c, 3.0] in sum (build (length m) (\\i -> "
           "sum (build (length w) (\\j -> m ! i ! j * w ! j))))")


@pytest.mark.parametrize("evm", ["array", "parallel"])
@pytest.mark.parametrize("text,args", [
    (INT_OUTER, ([np.full(3, 2.0), np.arange(3.0)], np.array([4, 5]), np.arange(3.0))),
    (INT_INNER, ([np.full(3, 2.0), np.arange(3.0)], np.array([4, 5, 6]), np.arange(3.0))),
    (LITERAL, ([np.arange(3.0), np.ones(3)], np.ones(3), 1.25)),
], ids=["int_outer", "int_inner", "array_literal"])
def test_nested_loops_reading_other_arrays_run_the_batched_code(text, args, evm):
    before = vector_support.FELL_BACK[0]
    got = chad.grad(text, evm=evm)(*args)
    agree(got, chad.grad(text, backend="interp", evm=evm)(*args), exact=True)
    assert vector_support.FELL_BACK[0] == before  # vtake_numbers: "not an Array R"


# ------------------------------------------------------------- what held

H = "def f(m : Array (Array R), v : Array R, a : Array R, c : R) : R = "
HELD = {
    "plus_b": H + "sum (build (length m) (\\i -> "
                  "sum (build (length v) (\\j -> m ! i ! j * v ! j)) + a ! i))",
    "times_c": H + "sum (build (length m) (\\i -> "
                   "sum (build (length v) (\\j -> m ! i ! j * v ! j)) * c))",
    "inner_reads_s": H + "sum (build (length m) (\\i -> let s = a ! i in "
                         "sum (build (length v) (\\j -> m ! i ! j * s + v ! j))))",
    "rev": H + "sum (build (length m) (\\i -> "
               "sum (build (length v) (\\j -> m ! i ! j * v ! (length v - 1 - j)))))",
    "row_let_shift": H + "sum (build (length m) (\\i -> let r = m ! i in "
                         "sum (build (length v - 1) (\\j -> r ! (j + 1) * v ! j))))",
    "same_row_two_lets": H + "sum (build (length m) (\\i -> let r = m ! i in let q = m ! i in "
                             "sum (build (length v) (\\j -> r ! j * q ! j))))",
    "sq_inner": H + "sum (build (length m) (\\i -> let t = "
                    "sum (build (length v) (\\j -> m ! i ! j * v ! j)) in t * t))",
    "m_used_after": H + "sum (build (length m) (\\i -> "
                        "sum (build (length v) (\\j -> m ! i ! j * v ! j)))) * sum (m ! 0) + sum v",
    "outer_cell": H + "sum (build (length m) (\\i -> let s = a ! i * a ! i in "
                      "sum (build (length v) (\\j -> m ! i ! j * v ! j * s)) + s))",
    "inner_size2": H + "sum (build (length m) (\\i -> sum (build 2 (\\j -> m ! i ! j * v ! j))))",
}

_SPECIAL = [0.0, -0.0, 1.5, -2.0, math.inf, -math.inf, math.nan, 1e308, -1e308, 5e-324]


def _shapes():
    rng = np.random.default_rng(2)
    adv = np.random.default_rng(5)
    return {
        "square": ([rng.normal(size=4) for _ in range(4)], rng.normal(size=4)),
        "rows_longer": ([rng.normal(size=6) for _ in range(3)], rng.normal(size=4)),
        "rows_shorter": ([rng.normal(size=3) for _ in range(3)], rng.normal(size=4)),
        "ragged": ([rng.normal(size=4), rng.normal(size=2)], rng.normal(size=4)),
        "empty_outer": ([], rng.normal(size=3)),
        "empty_inner": ([np.zeros(0), np.zeros(0)], np.zeros(0)),
        "special": ([np.array(_SPECIAL[k:] + _SPECIAL[:k]) for k in range(4)],
                    np.array(_SPECIAL[::-1])),
        "cancel": ([adv.choice([1e16, 1.0, -1e16, 3.0, 0.1, -0.0], size=4) for _ in range(4)],
                   adv.choice([1e16, 1.0, -1e16, 3.0, 0.1, 1e-3], size=4)),
    }


@pytest.mark.parametrize("evm", RUNTIMES)
@pytest.mark.parametrize("shape", sorted(_shapes()))
@pytest.mark.parametrize("name", sorted(HELD))
def test_held_nested_programs_agree_or_fail_alike(name, shape, evm):
    m, v = _shapes()[shape]
    args = (m, v, np.linspace(-1.0, 2.0, len(m)), -0.0 if shape == "special" else 1.75)
    text = HELD[name]
    try:
        want = ("ok", chad.grad(text, backend="interp", evm=evm)(*args))
    except ChadError as e:
        want = ("err", type(e).__name__, str(e))
    try:
        got = ("ok", chad.grad(text, evm=evm)(*args))
    except ChadError as e:
        got = ("err", type(e).__name__, str(e))
    assert got[0] == want[0], (got, want)
    if want[0] == "err":
        assert got == want
    else:
        agree(got[1], want[1], exact=True)


@pytest.mark.parametrize("evm", ["array", "parallel"])
def test_held_large_nested_loops_run_batched(evm, forking):
    """Long outer and long inner loops (past the C select's SELECT_MIN; the
    parallel runtime forking at grain 1) run batched, never falling back."""
    rng = np.random.default_rng(7)
    for rows, cols in [(1 << 11, 2), (2, 1 << 11)]:
        args = ([rng.normal(size=cols) for _ in range(rows)], rng.normal(size=cols),
                rng.normal(size=rows), 0.5)
        before = vector_support.FELL_BACK[0]
        _same(HELD["inner_reads_s"], args, evm=evm)
        assert vector_support.FELL_BACK[0] == before


def _math_elementwise(fn, orig):
    def f(x, *rest, **kw):
        if rest or kw:
            return orig(x, *rest, **kw)
        a = np.asarray(x, dtype=np.float64)
        out = np.array([fn(float(e)) for e in a.reshape(-1)], dtype=np.float64).reshape(a.shape)
        return out if out.ndim else float(out)
    return f


@pytest.mark.parametrize("evm", ["array", "parallel"])
def test_held_mlp_and_tanh_bit_for_bit_with_the_math_modules_functions(monkeypatch, evm):
    """With numpy's tanh / exp / log replaced by the math module's (the
    evaluator's), the batched nested passes are the interpreter's bit for bit:
    every difference under 1e-12 comes from those functions alone."""
    from benchmarks.bench_vectorised import MLP_TEXT, args_of

    for name in ("tanh", "exp", "log"):
        monkeypatch.setattr(np, name, _math_elementwise(getattr(math, name), getattr(np, name)))
    rng = np.random.default_rng(5)
    _same(MLP_TEXT, args_of("mlp-batch", 40, rng), evm=evm)
    tanh = ("def t(w : Array (Array R), x : Array R) : R = sum (build (length w) "
            "(\\i -> sum (build (length x) (\\j -> tanh (w ! i ! j * x ! j)))))")
    _same(tanh, ([rng.normal(size=200) for _ in range(300)], rng.normal(size=200)), evm=evm)


@pytest.mark.parametrize("evm", RUNTIMES)
def test_held_vjp_of_a_matvec_twice_with_special_cotangents(evm):
    text = ("def f(m : Array (Array R), v : Array R) : Array R = build (length m) "
            "(\\i -> sum (build (length v) (\\j -> m ! i ! j * v ! j)))")
    rng = np.random.default_rng(3)
    args = ([rng.normal(size=4) for _ in range(3)], rng.normal(size=4))
    value, back = chad.vjp(text, evm=evm)(*args)
    want_value, want_back = chad.vjp(text, backend="interp", evm=evm)(*args)
    agree(value, want_value, exact=True)
    for ct in ([1.0, -0.0, math.nan], [math.inf, 2.0, -3.0], [0.0, 0.0, 0.0]):
        agree(back(np.array(ct)), want_back(np.array(ct)), exact=True)


def test_held_generated_looking_names():
    text = ("def f(p1 : Array (Array R), cells2 : Array R, c3 : Array R) : R = "
            "sum (build (length p1) (\\v4 -> let vb5 = c3 ! v4 in "
            "sum (build (length cells2) (\\p6 -> p1 ! v4 ! p6 * cells2 ! p6 * vb5))))")
    rng = np.random.default_rng(4)
    _same(text, ([rng.normal(size=4) for _ in range(3)], rng.normal(size=4), rng.normal(size=3)))
