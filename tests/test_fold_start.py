"""`fold f z a`, a fold with a start value: defined on empty arrays (its value is
z), the same balanced order as `fold f a` over z, a0, ..., a(n-1); values and
gradients on both backends and against finite differences; its documented cost
(docs/cost-model.md) against the evaluator; and the program that needed a
sentinel element, written the natural way. Also `sum` on Array Z (ISUM), which
needed a fold."""

from __future__ import annotations

import pytest

import chad
from tests.fd import assert_gradient_matches_fd

NATURAL = """
def f(a : Array R, x : R) : R =
  let m = fold (\\p -> let (l, r) = p in if l < r then r else l) (0.0 - 1000.0) a in
  m * x + fold (\\p -> fst p + snd p) x a
"""
# the workaround: a sentinel element prepended by hand
SENTINEL = """
def f(a : Array R, x : R) : R =
  let b = build (length a + 1) (\\i -> if i == 0 then 0.0 - 1000.0 else a ! (i - 1)) in
  let c = build (length a + 1) (\\i -> if i == 0 then x else a ! (i - 1)) in
  let m = fold (\\p -> let (l, r) = p in if l < r then r else l) b in
  m * x + fold (\\p -> fst p + snd p) c
"""


@pytest.mark.parametrize("backend", ["compiled", "interp"])
@pytest.mark.parametrize("a", [[1.0, 5.0, 2.0], [], [-3.0], [0.5, 0.25, 4.0, -1.0, 2.0]])
def test_natural_equals_the_sentinel_workaround(backend, a):
    got = chad.grad(NATURAL, backend=backend)(a, 3.0)
    want = chad.grad(SENTINEL, backend=backend)(a, 3.0)
    assert got[0] == want[0]
    assert list(got[1][0]) == list(want[1][0]) and got[1][1] == want[1][1]


def test_empty_array_gives_the_start_value_and_gradients():
    value, (da, dx) = chad.grad(NATURAL)([], 3.0)
    assert value == -1000.0 * 3.0 + 3.0 and list(da) == [] and dx == -1000.0 + 1.0


def test_against_finite_differences():
    prog = chad.load(NATURAL)
    args = list(chad.api.decode_args(prog.find(None), [[1.0, 5.0, 2.0], 3.0]).values())
    assert_gradient_matches_fd(chad, prog, args)


@pytest.mark.parametrize("n", [0, 1, 2, 5, 8])
def test_cost_is_the_documented_formula(n):
    src = "def f(a : Array R, x : R) : R = fold (\\p -> fst p + snd p) x a\n"
    combine = chad.run("def g(p : R * R) : R = fst p + snd p\n", [[1.0, 2.0]])[1]  # c(t)
    _, steps = chad.run(src, [[1.0] * n, 2.0])
    c_z = c_a = 1  # the variables x and a
    assert steps == c_z + c_a + 17 + 14 * n + n * combine
    assert chad.cost(src, [[1.0] * n, 2.0]).holds


def test_two_argument_fold_is_unchanged_and_applies_with_parentheses():
    two = "def f(a : Array R) : R = fold (\\p -> fst p + snd p) a\n"
    assert chad.run(two, [[1.0, 2.0, 3.0]])[0] == 6.0
    with pytest.raises(chad.EvalError, match="empty"):
        chad.run(two, [[]])
    fns = """
def f(x : R) : R =
  let fs = build 3 (\\i -> \\(y : R) -> y + toreal i) in
  (fold (\\p -> \\(y : R) -> (fst p) ((snd p) y)) fs) x
"""
    assert chad.run(fns, [1.0])[0] == 4.0


def test_sum_of_an_array_of_integers():
    """The integer sum that needed a fold, written as `sum`."""
    natural = "def f(a : Array Z, x : R) : R = toreal (sum a) * x\n"
    workaround = "def f(a : Array Z, x : R) : R = toreal (fold (\\p -> fst p + snd p) 0 a) * x\n"
    for backend in ("compiled", "interp"):
        assert chad.grad(natural, backend=backend)([1, 2, 3], 2.0) == \
            chad.grad(workaround, backend=backend)([1, 2, 3], 2.0)
    assert chad.run("def f(a : Array Z) : Z = sum a\n", [[2 ** 62, 2 ** 62]])[0] == 2 ** 63
    assert chad.run("def f(a : Array Z) : Z = sum a\n", [[]])[0] == 0
    # cost 1 + c(a) + n, as sum on Array R
    assert chad.run("def f(a : Array Z) : Z = sum a\n", [[1] * 7])[1] == 1 + 1 + 7
    with pytest.raises(chad.TypeCheckError, match="Array R or Array Z"):
        chad.load("def f(a : Array (R * R)) : R = sum a\n")
