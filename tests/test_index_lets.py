"""Integer lets in loop bodies, in derivatives (chad/compile/index_lets.py, the
simplifier's shared second component, chad/simplify/rewrite.py `shared_second`):

* a let-bound integer read as an index (`let j = i - 1 in a ! (if j < 0 then 0
  else j)`) is substituted into its uses before the transformation, so CHAD
  hoists the read into a gather and both passes of the loop are batched (it
  ran element by element); the program counts as rewritten (its gather's
  cotangents are added in another order: within 1e-12 of the interpreter);
* a case on a Bool whose branches are pairs with the same second component (an
  integer `if`'s CHAD: `(i - 1, \\d -> ...)` and `(0, \\d -> ...)`, the same
  backpropagator) is the pair of a case of the first components and that
  component, so an integer `if` the index rewrite leaves (`toreal (if ...)`)
  is batched too, bit for bit the interpreter's.

Each is checked on the three runtimes: the batched reverse pass runs (its
VecBack's `run`), no forward pass falls back, and the gradients are the
interpreter's; and against the cases the rewrites must leave alone.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import chad
from chad.api_core import load
from chad.errors import ChadError
from chad.compile import backend, source, vector_support
from chad.compile.index_lets import inline_index_lets
from chad.simplify.names import Fresh
from chad.simplify.rewrite import Pass
from chad.terms import Case, Lam, Pair, Prim, PureEVM, Unit, Var, subterms

RUNTIMES = ("array", "map", "parallel")

INDEX = {
    "shifted": """\
def f(a : Array R) : R =
  let n = length a in
  sum (build n (\\i -> let j = i - 1 in let k = i + 1 in
    0.25 * a ! (if j < 0 then 0 else j) + 0.5 * a ! i
    + 0.25 * a ! (if k > n - 1 then n - 1 else k)))
""",
    "let-if": """\
def f(a : Array R) : R =
  let n = length a in
  sum (build n (\\i -> let j = if i > 0 then i - 1 else 0 in a ! j * a ! i))
""",
    "chain": """\
def f(a : Array R, s : Z) : R =
  let n = length a in
  sum (build n (\\i -> let j = i + s in let k = if j > n - 1 then j - n else j in
    let m = if k < 0 then 0 else k in a ! m * a ! i + a ! k))
""",
    "nested": """\
def f(m : Array (Array R), v : Array R) : R =
  sum (build (length m) (\\i ->
    sum (build (length v) (\\j -> let l = if j > 0 then j - 1 else 0 in m ! i ! j * v ! l))))
""",
}
SHARED = {
    "toreal": """\
def f(a : Array R) : R =
  sum (build (length a) (\\i -> let j = if i > 2 then 1 else 2 in toreal j * a ! i))
""",
}


def _spy(monkeypatch):
    runs = []
    orig = vector_support.VecBack.run

    def run(self, *a, **k):
        runs.append(1)
        return orig(self, *a, **k)
    monkeypatch.setattr(vector_support.VecBack, "run", run)
    return runs


def _grad_source(text: str) -> str:
    prog = load(text)
    return backend.gradient_module(prog, prog.defs[-1]).source


@pytest.mark.parametrize("name", sorted(INDEX) + sorted(SHARED))
def test_the_derivative_is_batched(name):
    text = {**INDEX, **SHARED}[name]
    src = _grad_source(text)
    assert "per-element loop" not in src, src
    assert "_vseq(" in src


def _args(name, n, rng):
    a = rng.normal(size=n) * rng.choice([1.0, 1e16, 1e-3], size=n)
    if name == "nested":
        return (rng.normal(size=(n, 4)), a[:4] if n >= 4 else rng.normal(size=4))
    return (a, 2) if name == "chain" else (a,)


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("name", sorted(INDEX) + sorted(SHARED))
def test_gradients_against_the_interpreter(name, runtime, monkeypatch):
    text = {**INDEX, **SHARED}[name]
    exact = name in SHARED
    assert source.rewritten(load(text)) == (not exact)
    runs = _spy(monkeypatch)
    g = chad.grad(text, evm=runtime)
    gi = chad.grad(text, evm=runtime, backend="interp")
    fell = vector_support.FELL_BACK[0]
    for n in (0, 1, 2, 3, 7, 60):
        rng = np.random.default_rng(n)
        args = _args(name, n, rng)
        try:
            want = gi(*args)
        except ChadError as e:  # an index out of range: the same error
            with pytest.raises(ChadError, match=re.escape(str(e))):
                g(*args)
            continue
        got = g(*args)
        assert got[0] == want[0]
        if exact:
            assert np.asarray(got[1][0]).tobytes() == np.asarray(want[1][0]).tobytes()
        else:
            np.testing.assert_allclose(got[1][0], want[1][0], rtol=1e-12, atol=0)
    assert vector_support.FELL_BACK[0] == fell
    if runtime != "map":  # (the map runtime runs its actions through the EVM)
        assert runs, "the reverse pass ran element by element"


def test_errors_are_the_interpreters():
    text = """\
def f(a : Array R, s : Z) : R =
  sum (build (length a) (\\i -> let j = i + s in a ! j * a ! i))
"""
    a = np.arange(5.0)
    with pytest.raises(ChadError) as got:
        chad.grad(text)(a, 3)
    with pytest.raises(ChadError) as want:
        chad.grad(text, backend="interp")(a, 3)
    assert str(got.value) == str(want.value)


# ----------------------------------------------------------------- what stays


def _body(text: str):
    prog = load(text)
    return prog.defs[-1].body


def _lets(t) -> set:
    return {u.name for u in subterms(t) if type(u).__name__ == "Let"}


@pytest.mark.parametrize("text", [
    # a right-hand side that may fail (an index)
    "def f(a : Array R, b : Array Z) : R = sum (build (length a) (\\i -> "
    "let j = b ! i in a ! j))",
    # a real
    "def f(a : Array R) : R = sum (build (length a) (\\i -> let x = a ! i in x * x))",
    # not read as an index
    "def f(a : Array R) : R = sum (build (length a) (\\i -> let j = i + 1 in toreal j * a ! i))",
    # outside any loop
    "def f(a : Array R, s : Z) : R = let j = s + 1 in a ! j",
    # too large
    "def f(a : Array R) : R = sum (build (length a) (\\i -> let j = " + " + ".join(["i"] * 30)
    + " in a ! (j - j)))",
])
def test_lets_left_alone(text):
    body = _body(text)
    assert inline_index_lets(body) is body


def test_substituted_lets_go():
    body = _body(INDEX["shifted"])
    new = inline_index_lets(body)
    assert new is not body
    assert {"j", "k"} <= _lets(body) and not {"j", "k"} & _lets(new)
    assert "n" in _lets(new)  # (outside the loop)


def test_a_body_only_renamed_is_not_rewritten():
    """A def whose body has an integer let that is not substituted, and names
    bound twice, is the def itself (renaming apart alone is no rewrite)."""
    text = ("def f(a : Array R) : R = let k = 1 in "
            "sum (build (length a) (\\k -> let j = k in toreal j * a ! k))")
    assert not source.rewritten(load(text))


# ----------------------------------------------------------------- the shared second component


def _pass():
    return Pass({}, Fresh(set()))


def _case(second_left, second_right, lname="x", rname="y"):
    one = Prim("ILIT", Unit(), 1)
    two = Prim("ILIT", Unit(), 2)
    return Case(Var("c"), lname, Pair(one, second_left), rname, Pair(two, second_right))


def _lam(name, body=None):
    return Lam(name, None, body if body is not None else PureEVM(Unit()), captures=())


def test_the_shared_second_component_is_floated():
    t = _case(_lam("d1"), _lam("d2"))
    out = _pass().shared_second(t, t.scrut, t.lbody, t.rbody)
    assert type(out) is Pair and type(out.left) is Case
    assert out.left.lbody == Prim("ILIT", Unit(), 1) and out.left.rbody == Prim("ILIT", Unit(), 2)
    assert out.right == _lam("d1")


@pytest.mark.parametrize("left,right,lname", [
    (_lam("d1"), _lam("d2", PureEVM(Var("d2"))), "x"),      # other bodies
    (_lam("d1", PureEVM(Var("q"))), _lam("d2", PureEVM(Var("r"))), "x"),  # other free names
    (Var("x"), Var("x"), "x"),                              # reads what the case matched
    (Prim("LIT", Unit(), 0.0), Prim("LIT", Unit(), -0.0), "x"),  # 0.0 is not -0.0
])
def test_other_pairs_stay(left, right, lname):
    t = _case(left, right, lname=lname, rname=lname)
    assert _pass().shared_second(t, t.scrut, t.lbody, t.rbody) is None
