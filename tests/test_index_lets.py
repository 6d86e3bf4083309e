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
  is batched too, bit for bit the interpreter's; branches that read integer
  variables (`if i > 2 then i else 0`) add unit cotangents to their cells,
  adds the simplifier drops (CHAD's var rule records the variable's type on
  the add, AddEVM.ty), so their backpropagators are the same too.

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
LOOKUPS = {  # gathers by an index array (an embedding lookup)
    "map": "def f(w : Array R, ks : Array Z) : R = sum (map (\\k -> w ! k * w ! k) ks)",
    "let-read": "def f(w : Array R, ks : Array Z) : R = "
                "sum (build (length ks) (\\i -> let j = ks ! i in w ! j * toreal i))",
    "map-shifted": "def f(w : Array R, ks : Array Z) : R = "
                   "sum (map (\\k -> let j = k + 1 in w ! j * w ! k) ks)",
}
SHARED = {
    "toreal": """\
def f(a : Array R) : R =
  sum (build (length a) (\\i -> let j = if i > 2 then 1 else 2 in toreal j * a ! i))
""",
    # branches that read integer variables: their backpropagators add unit
    # cotangents to those variables' cells (dropped: AddEVM.ty)
    "toreal-var": """\
def f(a : Array R) : R =
  sum (build (length a) (\\i -> a ! i * toreal (if i > 2 then i else 0)))
""",
    "toreal-let": """\
def f(a : Array R) : R =
  let k = length a - 3 in
  sum (build (length a) (\\i -> toreal (if i > k then k else i * k) * a ! i))
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


def test_an_add_to_an_integers_cell_is_dropped():
    """`add l v` to a variable of type Z (or unit): its cotangents are unit,
    the add changes nothing; kept for a real's cell, for a value that may
    fail, and for an add whose type is not recorded."""
    from chad.terms import AddEVM, Index
    from chad.types import R, UNIT, Z
    p = _pass()
    d = Var("d")
    for ty in (Z, UNIT):
        assert p._add(d, AddEVM(0, "i", d, ty=ty)) == PureEVM(Unit())
    assert type(p._add(d, AddEVM(0, "x", d, ty=R))) is AddEVM
    assert type(p._add(d, AddEVM(0, "x", d))) is AddEVM
    failing = Index(Var("a"), Var("k"))
    assert type(p._add(failing, AddEVM(0, "i", failing, ty=Z))) is AddEVM


# ----------------------------------------------------------------- gathers by index arrays


@pytest.mark.parametrize("name", sorted(LOOKUPS))
def test_lookups_are_batched(name):
    src = _grad_source(LOOKUPS[name])
    assert "per-element loop" not in src and "_vseq(" in src, src


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("name", sorted(LOOKUPS))
def test_lookups_against_the_interpreter(name, runtime, monkeypatch):
    text = LOOKUPS[name]
    assert source.rewritten(load(text))
    runs = _spy(monkeypatch)
    g = chad.grad(text, evm=runtime)
    gi = chad.grad(text, evm=runtime, backend="interp")
    for n in (0, 1, 5, 200):
        rng = np.random.default_rng(n)
        w = rng.normal(size=9) * rng.choice([1.0, 1e16], size=9)
        for ks in (rng.integers(0, 8, size=n), np.zeros(n, dtype=np.int64),
                   rng.integers(0, 10, size=n)):  # (9: out of range for w ! (k + 1))
            try:
                want = gi(w, ks)
            except ChadError as e:
                with pytest.raises(ChadError, match=re.escape(str(e))):
                    g(w, ks)
                continue
            got = g(w, ks)
            assert got[0] == want[0] or abs(got[0] - want[0]) <= 1e-12 * abs(want[0])
            np.testing.assert_allclose(got[1][0], want[1][0], rtol=1e-12, atol=0)
            assert got[1][1] == want[1][1] == (None,) * n
    if runtime != "map":
        assert runs


def test_a_map_over_reals_stays_a_map():
    from chad.compile.index_lets import inline_index_lets
    body = _body("def f(w : Array R, xs : Array R) : R = sum (map (\\x -> x * w ! 0) xs)")
    assert inline_index_lets(body) is body


def test_a_map_whose_element_is_no_index_stays():
    from chad.compile.index_lets import inline_index_lets
    body = _body("def f(ks : Array Z) : R = sum (map (\\k -> toreal k) ks)")
    assert inline_index_lets(body) is body


# ----------------------------------------------------------------- Array Z at the boundary


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.uint64, np.int16])
def test_int_arrays_are_arguments(dtype):
    from chad.values import value_from_json
    from chad.types import ArrayT, Int
    j = np.array([0, 3, 7, 2], dtype=dtype)
    got = value_from_json(ArrayT(Int()), j)
    assert got.dtype == np.int64 and got.tolist() == [0, 3, 7, 2]
    got[0] = 5
    assert j[0] == 0  # a copy
    assert value_from_json(ArrayT(Int()), [0, 3, 7, 2]).tolist() == [0, 3, 7, 2]


def test_int_arrays_out_of_range_and_bools_are_errors():
    from chad.errors import UsageError
    from chad.types import ArrayT, Int
    from chad.values import value_from_json
    with pytest.raises(UsageError, match=r"args\[1\]: 18446744073709551615 is outside the range"):
        value_from_json(ArrayT(Int()), np.array([1, 2 ** 64 - 1], dtype=np.uint64))
    with pytest.raises(UsageError, match=r"args\[0\]: 9223372036854775808 is outside the range"):
        value_from_json(ArrayT(Int()), [2 ** 63, 1])
    with pytest.raises(UsageError, match="expected an integer"):
        value_from_json(ArrayT(Int()), np.array([True, False]))
    with pytest.raises(UsageError, match="expected an integer"):
        value_from_json(ArrayT(Int()), [1, True])
