"""n-tuples `(e1, ..., en)` and `let (x1, ..., xn) = e in b`: nested pairs, nested
to the right, so `R * R * R` is written and printed as users write it. The
quaternion rotation of the benchmarks, written with triples, gives the gradient
of its nested-pair version, on both backends and against finite differences."""

from __future__ import annotations

import pytest

import chad
from chad.printer import print_program
from chad.types import Prod, R
from tests.fd import assert_gradient_matches_fd

NESTED = """
def cross(a : R * (R * R), b : R * (R * R)) : R * (R * R) =
  let ax = fst a in let ay = fst (snd a) in let az = snd (snd a) in
  let bx = fst b in let by = fst (snd b) in let bz = snd (snd b) in
  (ay * bz - az * by, (az * bx - ax * bz, ax * by - ay * bx))
def f(a : R * (R * R), b : R * (R * R)) : R =
  let c = cross(a, b) in
  fst c + 2.0 * fst (snd c) + 3.0 * snd (snd c)
"""
TRIPLES = """
def cross(a : R * R * R, b : R * R * R) : R * R * R =
  let (ax, ay, az) = a in
  let (bx, by, bz) = b in
  (ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx)
def f(a : R * R * R, b : R * R * R) : R =
  let (c1, c2, c3) = cross(a, b) in
  c1 + 2.0 * c2 + 3.0 * c3
"""
ARGS = ((1.0, (2.0, 3.0)), (0.5, (-1.0, 4.0)))


def test_triples_are_right_nested_pairs():
    prog = chad.load(TRIPLES)
    assert prog.defs[0].result == Prod(R, Prod(R, R))
    assert str(prog.defs[0].result) == "R * R * R"
    assert chad.run("def f(x : R) : R * R * R * R = (x, x, x, x)\n", [1.0])[0] == \
        (1.0, (1.0, (1.0, 1.0)))


@pytest.mark.parametrize("backend", ["compiled", "interp"])
def test_the_natural_program_equals_the_workaround(backend):
    natural = chad.grad(TRIPLES, backend=backend)(*ARGS)
    workaround = chad.grad(NESTED, backend=backend)(*ARGS)
    assert natural == workaround


def test_gradient_against_finite_differences():
    assert_gradient_matches_fd(chad, chad.load(TRIPLES), ARGS)


def test_patterns_bind_in_order_and_shadow():
    src = "def f(x : R) : R = let (a, b, c, d) = (x, 2.0 * x, 3.0, x * x) in a + b * c - d\n"
    assert chad.run(src, [2.0])[0] == 2.0 + 4.0 * 3.0 - 4.0
    shadow = "def f(p : R * R * R) : R = let (p, q, r) = p in p * q + r\n"
    assert chad.run(shadow, [[2.0, [3.0, 4.0]]])[0] == 10.0
    assert chad.grad(shadow)((2.0, (3.0, 4.0)))[1] == ((3.0, (2.0, 1.0)),)


def test_printing_round_trips():
    prog = chad.load(TRIPLES)
    again = chad.load(print_program(prog))
    assert [d.body for d in again.defs] == [d.body for d in prog.defs]
    assert "R * R * R" in print_program(prog)


def test_a_pattern_of_the_wrong_arity_is_a_type_error():
    with pytest.raises(chad.TypeCheckError):
        chad.load("def f(p : R * R) : R = let (a, b, c) = p in a\n")
