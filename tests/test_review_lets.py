"""Review of 232ae30 (chad/compile/index_lets.py, terms.alpha_equal, the
simplifier's shared second component). Failing tests demonstrate bugs; tests
marked "holds" document what was checked and holds."""

from __future__ import annotations

import numpy as np
import pytest

import chad
from chad.api_core import load
from chad.compile import source
from chad.errors import ChadError
from chad.functions.terms import MkClosure
from chad.simplify import term_size
from chad.simplify.names import Fresh
from chad.simplify.rewrite import Pass
from chad.terms import Case, Pair, Prim, Unit, Var, alpha_equal

RUNTIMES = ("array", "map", "parallel")


def _outcome(f):
    try:
        return ("ok", repr(f()))
    except ChadError as e:
        return ("error", type(e).__name__, str(e))


# ---------------------------------------------------------------- index lets


# A let-bound index read inside an `iter` body in a build body. extract_gathers
# (chad/arrays/transform.py) walks iter/scan bodies (only lambdas, case
# branches and build/map/fold bodies are skipped), and so does _in_loop: once
# `j` is substituted, `a ! (i + 10)` no longer depends on a name bound in the
# body and becomes a gather hoisted out of an iter that runs 0 times. The
# interpreter (the program as written: `a ! j`, j let-bound, no gather) never
# reads; the compiled gradient reads index 10 and fails, and the replay turns
# it into a CompileError ("please report this").
ITER = """\
def f(a : Array R, s : Z) : R =
  sum (build (length a) (\\i -> let j = i + 10 in iter s (\\x -> x + a ! j) 0.0))
"""


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_index_let_in_iter_body_makes_gradient_fail(runtime):
    a = np.arange(1.0, 6.0)
    want = _outcome(lambda: chad.grad(ITER, evm=runtime, backend="interp")(a, 0))
    assert want[0] == "ok"
    got = _outcome(lambda: chad.grad(ITER, evm=runtime)(a, 0))
    assert got == want


def test_index_let_in_iter_body_vjp():
    a = np.arange(1.0, 6.0)
    want = _outcome(lambda: chad.vjp(ITER, backend="interp")(a, 0)[0])
    got = _outcome(lambda: chad.vjp(ITER)(a, 0)[0])
    assert want[0] == "ok"
    assert got == want


def test_index_let_in_iter_body_naive_ho():
    a = np.arange(1.0, 6.0)
    want = _outcome(lambda: chad.grad(ITER, transform="naive-ho", backend="interp")(a, 0))
    got = _outcome(lambda: chad.grad(ITER, transform="naive-ho")(a, 0))
    assert got == want


def _doubling_chain(k: int) -> str:
    lets = "let j0 = i in " + " ".join(f"let j{m} = j{m - 1} + j{m - 1} in" for m in range(1, k + 1))
    return ("def f(a : Array R) : R = sum (build (length a) (\\i -> "
            f"{lets} a ! (j{k} - j{k})))\n")


def test_index_let_chain_substitution_is_exponential():
    """Each rhs is small (3 nodes), but the substitution is transitive and a
    variable used twice doubles its rhs: k lets give 2^k nodes (k = 14: 83
    nodes become ~98,000; k = 30 does not finish)."""
    prog = load(_doubling_chain(14))
    d = prog.defs[-1]
    new = source.prepare_body(d.body, [p.name for p in d.params])
    assert term_size(new) < 20 * term_size(d.body), term_size(new)


def test_index_let_chain_still_correct_holds():
    """holds: a short doubling chain is rewritten and its gradient is right."""
    text = _doubling_chain(4)
    assert source.rewritten(load(text))
    a = np.arange(1.0, 6.0)
    for runtime in RUNTIMES:
        g = chad.grad(text, evm=runtime)(a)
        gi = chad.grad(text, evm=runtime, backend="interp")(a)
        assert g[0] == gi[0]
        np.testing.assert_allclose(g[1][0], gi[1][0], rtol=1e-12, atol=0)


SHADOW = {
    # an inner build rebinds i: uniquify runs first, no capture
    "inner build": """\
def f(a : Array R) : R =
  sum (build (length a) (\\i -> let j = i + 1 in let k = if j > length a - 1 then 0 else j in
     sum (build 2 (\\i -> a ! k * toreal i)) + a ! k))
""",
    # an iter rebinds i
    "iter": """\
def f(a : Array R) : R =
  sum (build (length a) (\\i -> let j = if i > 0 then i - 1 else 0 in
     iter 2 (\\i -> i + a ! j) (a ! j)))
""",
    # a case rhs used twice (its binders are then bound twice in the source)
    "case twice": """\
def f(a : Array R) : R =
  sum (build (length a) (\\i -> let j = if i > 0 then i - 1 else 0 in a ! j * a ! (j + 0) + a ! i))
""",
    # beyond int64 inside a substituted clamp
    "big": """\
def f(a : Array R, s : Z) : R =
  let n = length a in
  sum (build n (\\i -> let j = i * s - s * s in
    let k = if j < 0 then 0 else if j > n - 1 then n - 1 else j in a ! k * a ! i))
""",
}


@pytest.mark.parametrize("name", sorted(SHADOW))
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_substitutions_that_hold(name, runtime):
    """holds: shadowing, duplicated case binders, integers beyond int64."""
    text = SHADOW[name]
    a = np.arange(1.0, 6.0)
    argss = [(a, s) for s in (3, -3, 2**63, -2**63, 2**70)] if name == "big" else [(a,)]
    for args in argss:
        g = chad.grad(text, evm=runtime)(*args)
        gi = chad.grad(text, evm=runtime, backend="interp")(*args)
        assert g[0] == gi[0]
        np.testing.assert_allclose(g[1][0], gi[1][0], rtol=1e-12, atol=0)
        assert chad.primal(text)(*args) == chad.primal(text, backend="interp")(*args)


# ---------------------------------------------------------------- alpha_equal / shared second


def _closure(cap: str):
    """A fused closure (functions extension) capturing `cap` and returning it:
    captures are binders of its body AND reads of the enclosing scope."""
    return MkClosure("rho", (cap,), "z", Var(cap))


def test_alpha_equal_mkclosure_capturing_different_variables():
    """With ignore_captures, a closure node's capture list is skipped as a
    read, but MkClosure's captures are also binders of its body, so the body
    compares `p` with `q` through the binder map: two closures storing
    different variables are called alpha-equal."""
    assert not alpha_equal(_closure("p"), _closure("q"), ignore_captures=True)


def test_shared_second_floats_closures_of_different_variables():
    """case c of {inl x -> (1, pack[p]) | inr y -> (2, pack[q])} becomes
    (case ..., pack[p]): the inr branch's closure now stores p, not q."""
    one, two = Prim("ILIT", Unit(), 1), Prim("ILIT", Unit(), 2)
    t = Case(Var("c"), "x", Pair(one, _closure("p")), "y", Pair(two, _closure("q")))
    assert Pass({}, Fresh(set())).shared_second(t, t.scrut, t.lbody, t.rbody) is None


def test_alpha_equal_mkclosure_same_captures_holds():
    """holds: the same captured variable, other parameter names."""
    a = MkClosure("rho", ("p",), "z", Var("z"))
    b = MkClosure("rho", ("p",), "w", Var("w"))
    assert alpha_equal(a, b, ignore_captures=True)
    assert not alpha_equal(_closure("p"), _closure("q"))  # without ignore_captures


PAIRS = {
    "int-if": ("def f(x : R, c : Z) : R =\n"
               "  let p = if c > 0 then (1, x * x) else (2, x * x) in toreal (fst p) * snd p\n"),
    "nested": ("def f(x : R, c : Z) : R =\n"
               "  let p = if c > 0 then (if c > 1 then (1, x) else (3, x)) else (2, x) in\n"
               "  toreal (fst p) * snd p\n"),
}


@pytest.mark.parametrize("name", sorted(PAIRS))
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_shared_second_bit_for_bit_holds(name, runtime):
    """holds: the rule fires on these and gradients are the interpreter's."""
    text = PAIRS[name]
    for c in (0, 1, 2):
        g = chad.grad(text, evm=runtime)(1.5, c)
        gi = chad.grad(text, evm=runtime, backend="interp")(1.5, c)
        assert repr(g) == repr(gi)


# --------------------------------------------------------------------------
# Found in the fix of the iter case above: a read directly in an `iter` body
# (no let) was hoisted by CHAD's extract_gathers itself, so the gradient failed
# on the interpreter too where the program does not (chad/arrays/transform.py).


@pytest.mark.parametrize("backend", ["interp", "compiled"])
def test_a_read_in_an_iter_body_is_not_hoisted(backend):
    text = ("def f(a : Array R, s : Z) : R = "
            "sum (build (length a) (\\i -> iter s (\\x -> x + a ! (i + 10)) 0.0))")
    a = np.arange(5.0)
    assert chad.run(text, [list(a), 0])[0] == 0.0
    value, (ga, _) = chad.grad(text, backend=backend)(a, 0)
    assert value == 0.0 and not np.any(ga)
    with pytest.raises(ChadError, match="index 12 out of range"):  # (s > 0: it is read)
        chad.grad(text, backend=backend)(np.arange(12.0), 2)
