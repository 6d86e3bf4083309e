"""Array literals `[e1, ..., en]` (`[]` with its type ascribed or known from the
context): parsed, printed, type checked, evaluated (cost 1 + the elements'),
differentiated (CHAD: each element's backpropagator gets its component of the
scattered cotangent), on both backends, against finite differences; generated
by the checker; and the program that needed an if-chain in a build, written the
natural way."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

import chad
from chad.costmodel import generators as G
from chad.printer import print_program
from chad.terms import ArrayLit, subterms
from tests.fd import assert_gradient_matches_fd

NATURAL = """
def f(a : R, b : R, c : R) : R =
  let v = [a * b, sin c, b] in
  v ! 0 * v ! 2 + sum v
"""
WORKAROUND = """
def f(a : R, b : R, c : R) : R =
  let v = build 3 (\\i -> if i == 0 then a * b else if i == 1 then sin c else b) in
  v ! 0 * v ! 2 + sum v
"""
ARGS = (1.5, -2.0, 0.25)


@pytest.mark.parametrize("backend", ["compiled", "interp"])
@pytest.mark.parametrize("evm", ["array", "map", "parallel"])
def test_natural_equals_the_if_chain_workaround(backend, evm):
    assert chad.grad(NATURAL, backend=backend, evm=evm)(*ARGS) == \
        chad.grad(WORKAROUND, backend=backend, evm=evm)(*ARGS)


def test_against_finite_differences():
    assert_gradient_matches_fd(chad, chad.load(NATURAL), ARGS)


def test_nested_literals_pairs_and_the_empty_literal():
    src = """
def f(x : R) : R =
  let m = [[x, 1.0], [2.0 * x, x * x]] in
  let ps = [(x, 1), (3.0, 2)] in
  let e = ([] : Array R) in
  m ! 1 ! 1 + fst (ps ! 0) * toreal (snd (ps ! 1)) + toreal (length e)
"""
    for backend in ("compiled", "interp"):
        value, (dx,) = chad.grad(src, backend=backend)(3.0)
        assert value == 9.0 + 6.0 and dx == 6.0 + 2.0
    # the context gives []'s type
    assert chad.run("def f(x : R) : Array R = []\n", [1.0])[0].tolist() == []


def test_type_errors():
    with pytest.raises(chad.TypeCheckError, match="element type of \\[\\] is not known"):
        chad.load("def f(x : R) : Z = length []\n")
    with pytest.raises(chad.TypeCheckError, match="element 1 of the array literal") as e:
        chad.load("def f(x : R) : Array R = [x, 1]\n")
    assert e.value.loc.col == 30
    with pytest.raises(chad.ParseError, match="']' to close"):
        chad.load("def f(x : R) : Array R = [x, x\n")


@pytest.mark.parametrize("n", [0, 1, 3, 6])
def test_cost_is_one_plus_the_elements(n):
    elems = ", ".join(["x * x"] * n)
    src = f"def f(x : R) : Array R = ([{elems}] : Array R)\n"
    assert chad.run(src, [2.0])[1] == 1 + 4 * n  # x * x: MUL, its pair, two variables
    if n:
        assert chad.cost(f"def f(x : R) : R = sum [{elems}]\n", [2.0]).holds


def test_print_round_trip():
    for src in (NATURAL, "def f(x : R) : Array R = ([] : Array R)\n"):
        prog = chad.load(src)
        assert chad.load(print_program(prog)).defs[0].body == prog.defs[0].body


def test_the_generators_make_literals():
    count = [0, 0]

    @settings(max_examples=80, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(G.programs(max_depth=4, max_params=2, arrays=True))
    def collect(case):
        count[1] += 1
        if any(type(t) is ArrayLit for t in subterms(case.defn.body)):
            count[0] += 1
            chad.load(case.source())  # prints and parses back

    collect()
    assert count[0] >= 5, count
