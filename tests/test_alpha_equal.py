"""`terms.alpha_equal`: terms the same up to the names of their bound
variables (the simplifier's shared second component, chad/simplify/rewrite.py,
compares two backpropagators with it). Free variables must keep their names;
literals compare by value and kind (-0.0 is not 0.0, 1 is not 1.0, NaN is
NaN); capture lists count unless ignored; deep terms need no deep stack.
"""

from __future__ import annotations

import math

import pytest

from chad.parser import parse_expr
from chad.terms import Lam, Let, Prim, PureEVM, Unit, Var, alpha_equal

SAME = [
    (r"\(x : R) -> let y = x in y * 2.0", r"\(z : R) -> let w = z in w * 2.0"),
    (r"\(x : R) -> \(y : R) -> x + y", r"\(a : R) -> \(b : R) -> a + b"),
    ("case v of { inl a -> a | inr b -> b + 1.0 }", "case v of { inl c -> c | inr d -> d + 1.0 }"),
    ("build n (\\i -> a ! i)", "build n (\\k -> a ! k)"),
]
DIFFERENT = [
    (r"\(x : R) -> let y = x in y * 2.0", r"\(z : R) -> let w = z in z * 2.0"),   # another binder read
    (r"\(x : R) -> \(y : R) -> x + y", r"\(a : R) -> \(b : R) -> b + a"),         # swapped
    (r"\(x : R) -> x + w", r"\(x : R) -> x + v"),                                  # free names
    (r"\(x : R) -> x * 0.0", r"\(x : R) -> x * -0.0"),                             # signed zero
    ("build n (\\i -> a ! i)", "build m (\\i -> a ! i)"),
    ("build n (\\i -> a ! i)", "build n (\\i -> a ! n)"),
    (r"\(x : R) -> let y = x in w", r"\(x : R) -> let w = x in w"),               # free vs bound
]


@pytest.mark.parametrize("a,b", SAME)
def test_same_up_to_bound_names(a, b):
    assert alpha_equal(parse_expr(a), parse_expr(b))
    assert alpha_equal(parse_expr(b), parse_expr(a))


@pytest.mark.parametrize("a,b", DIFFERENT)
def test_different(a, b):
    assert not alpha_equal(parse_expr(a), parse_expr(b))
    assert not alpha_equal(parse_expr(b), parse_expr(a))


def test_literals_by_kind_and_bits():
    one, onef = Prim("ILIT", Unit(), 1), Prim("LIT", Unit(), 1.0)
    assert not alpha_equal(one, onef)
    nan = Prim("LIT", Unit(), math.nan)
    assert alpha_equal(nan, Prim("LIT", Unit(), float("nan")))
    assert not alpha_equal(Prim("LIT", Unit(), 0.0), Prim("LIT", Unit(), -0.0))


def test_capture_lists():
    a = Lam("d", None, PureEVM(Unit()), captures=("r1",))
    b = Lam("e", None, PureEVM(Unit()), captures=("r2",))
    assert not alpha_equal(a, b)
    assert alpha_equal(a, b, ignore_captures=True)
    c = Lam("e", None, PureEVM(Var("q")), captures=("q",))
    assert not alpha_equal(a, c, ignore_captures=True)  # the body's reads still count


def test_deep_terms():
    def chain(prefix: str, n: int):
        t = Var(f"{prefix}{n - 1}")
        for k in reversed(range(n)):
            t = Let(f"{prefix}{k}", Var("x") if k == 0 else Var(f"{prefix}{k - 1}"), t)
        return t
    assert alpha_equal(chain("a", 5000), chain("b", 5000))
    assert not alpha_equal(chain("a", 5000), chain("b", 4999))
