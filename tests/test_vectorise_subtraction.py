"""`x + (-y)` in a vectorised body is numpy's `x - y` (chad/compile/vectorise.py,
Batcher._prim): IEEE 754 defines the one as the other, so the values are the
same bits (infinities and signed zeros included; a NaN stays a NaN), in one
pass over the arrays instead of two. The language writes `x - y` so, and CHAD's
derivative of tanh has `1 - t * t`.
"""

from __future__ import annotations

import numpy as np
import pytest

import chad
from chad.compile import backend

PROGRAMS = {
    "sub": "def f(w : R, xs : Array R) : R = sum (map (\\x -> x - w * x) xs)",
    "neg-first": "def f(w : R, xs : Array R) : R = sum (map (\\x -> (-x) + w * x * x) xs)",
    "tanh": "def f(w : R, xs : Array R) : R = sum (map (\\x -> tanh (w * x) * x) xs)",
    "both-negated": "def f(w : R, xs : Array R) : R = sum (map (\\x -> (-x) + (-(w * x))) xs)",
}
SPECIAL = [0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 1e308, -1e308, 5e-324]


def _source(text: str, what: str) -> str:
    from chad.api_core import load
    prog = load(text)
    d = prog.defs[-1]
    return (backend.primal_module(prog, d) if what == "primal" else
            backend.gradient_module(prog, d)).source


def _same(x, y) -> bool:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    nan = np.isnan(x) & np.isnan(y)
    return x.shape == y.shape and bool(np.all(nan | (x.view(np.int64) == y.view(np.int64))))


@pytest.mark.parametrize("name", ["sub", "neg-first", "both-negated"])
def test_the_primal_subtracts(name):
    src = _source(PROGRAMS[name], "primal")
    assert "# map: vectorised" in src and " - " in src and "+ (-" not in src, src


def test_the_derivative_of_tanh_subtracts():
    src = _source(PROGRAMS["tanh"], "grad")
    assert "(1.0 - (" in src, src


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_values_are_the_interpreters(name):
    text = PROGRAMS[name]
    g, gi = chad.grad(text), chad.grad(text, backend="interp")
    p = chad.primal(text)
    xs = np.array(SPECIAL + list(np.random.default_rng(0).normal(size=20)))
    for w in (0.5, -0.0, 0.0, -3.0, np.inf):
        want = gi(w, xs)
        got = g(w, xs)
        if name == "tanh":  # numpy's tanh against the math module's: 1e-12
            np.testing.assert_allclose(got[1][1], want[1][1], rtol=1e-12, atol=0)
            continue
        assert _same(got[0], want[0]) and _same(p(w, xs), want[0])
        assert _same(got[1][0], want[1][0]) and _same(got[1][1], want[1][1])
