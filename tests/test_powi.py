"""`x ** n` (POWI: a real to an integer power) batched in vectorised code
(vector_support.vpowi, the batched form beside the primitive in
chad/primitives.py): the evaluator's rules (the sign from the parity of n, zero
to a negative power an infinity, exponents beyond int64 and beyond the float
range) exactly, numpy's power for the magnitude within 1e-12 relative, as its
exp (numpy may use its own vectorised power, which differs from math.pow in
the last bit). Primal and gradient against the interpreter on the three
runtimes, and the loops batched. Nothing here is timed."""

from __future__ import annotations

import math

import numpy as np
import pytest

import chad
from chad.compile import backend
from chad.compile.vector_support import vpowi
from chad.primitives import _powi
from tests.test_vectorise import RUNTIMES, agree

pytestmark = pytest.mark.filterwarnings("error::SyntaxWarning", "error::RuntimeWarning")

SQUARES = ("def f(y : Array R, p : Array R) : R = "
           "sum (build (length y) (\\i -> (y ! i - p ! i) ** 2))")
POWERS = ("def f(a : Array R, k : Array Z) : R = "
          "sum (build (length a) (\\i -> a ! i ** (k ! i)))")
CUBE_MAP = "def f(a : Array R) : Array R = map (\\x -> x ** 3 - 2.0 * x ** (0 - 1)) a"
SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.5, -3.5, 1e300, -1e300, 1e-300, np.inf, -np.inf, np.nan,
           1e-310, 0.5]


def _close(x, y) -> bool:
    if math.isnan(y):
        return math.isnan(x)
    if math.isinf(y) or y == 0.0:
        return x.hex() == y.hex()
    return abs(x - y) <= 1e-12 * abs(y)


@pytest.mark.parametrize("n", [0, 1, 2, 3, -1, -2, 7, -7, 2 ** 63 + 1, -(2 ** 63) - 3,
                               10 ** 400, -(10 ** 400)])
def test_vpowi_is_the_evaluators_powi(n):
    x = np.array(SPECIAL + list(np.linspace(-3.0, 3.0, 13)))
    exps = np.array([n] * len(x), dtype=object if abs(n) >= 2 ** 63 else np.int64)
    for got in (vpowi(x, exps), vpowi(x, n)):
        for xi, g in zip(x, got):
            want = _powi((float(xi), n))
            assert _close(float(g), want), (xi, n, g, want)
            if not math.isnan(want):
                assert math.copysign(1.0, float(g)) == math.copysign(1.0, want), (xi, n, g, want)


def _source(text, what):
    prog = chad.load(text)
    d = prog.find(None)
    return (backend.primal_module(prog, d) if what == "primal"
            else backend.gradient_module(prog, d)).source


@pytest.mark.parametrize("text", [SQUARES, POWERS, CUBE_MAP])
def test_powers_are_batched(text):
    for what in ("primal", "grad"):
        src = _source(text, what)
        assert "vectorised" in src and "per-element loop" not in src, src
        assert "_vpowi(" in src


@pytest.mark.parametrize("evm", RUNTIMES)
def test_agree_with_the_interpreter(evm):
    rng = np.random.default_rng(5)
    n = 60
    a = np.concatenate((np.array(SPECIAL), rng.normal(size=n)))
    b = rng.normal(size=len(a))
    k = rng.integers(-4, 5, len(a)).astype(np.int64)
    cases = [(SQUARES, (a, b), None), (POWERS, (a, k), None),
             (CUBE_MAP, (a,), list(np.linspace(-1.0, 1.0, len(a))))]
    for text, args, ctg in cases:
        agree(chad.primal(text)(*args), chad.primal(text, backend="interp")(*args), exact=False)
        kw = {} if ctg is None else {"ctg": ctg}
        agree(chad.grad(text, evm=evm)(*args, **kw),
              chad.grad(text, backend="interp", evm=evm)(*args, **kw), exact=False)


@pytest.mark.parametrize("n", [0, 1, 2])
def test_vpowi_of_one_exponent_gives_a_new_array(n):
    """x ** 1 is x's own bits (and x ** 0 ones) without numpy's power, in an
    array of its own: the generated code may add into it in place."""
    x = np.array(SPECIAL)
    keep = x.copy()
    got = vpowi(x, n)
    assert not np.shares_memory(got, x)
    got += 1.0
    assert x.tobytes() == keep.tobytes()
    if n == 1:
        assert vpowi(x, 1).tobytes() == x.tobytes()  # NaN's and -0.0's bits included
