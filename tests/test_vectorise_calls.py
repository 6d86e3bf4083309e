"""Vectorisation through closures, calls and conditionals (chad/compile/source.py,
chad/compile/inline.py, chad/compile/vectorise.py; docs/compiler.md,
"Vectorisation"): the compiled path inlines a let-bound lambda into its
applications and a small def into its calls, and batches `if` (np.where),
comparisons and exact integer arithmetic. Checked: the generated code says the
loops are vectorised, and the results agree with the interpreter (bit for bit
where numpy performs the evaluator's operations in its order, else within
1e-12 relative) and with central differences, on the three runtimes. Nothing
here is timed.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import chad
from chad.compile import backend
from chad.errors import ChadError, UsageError
from tests.test_vectorise import RUNTIMES, agree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.filterwarnings("error::SyntaxWarning", "error::RuntimeWarning")

MAP_CLOSURE = ("def weighted(w : R, xs : Array R) : R = "
               "let f = \\(x : R) -> tanh (w * x) * x in sum (map f xs)")
with open(os.path.join(ROOT, "examples", "stencil.chad")) as _fh:
    STENCIL = _fh.read()


def _source(text, what="grad", fn=None, evm="array"):
    prog = chad.load(text)
    d = prog.find(fn)
    if what == "primal":
        return backend.primal_module(prog, d).source
    return backend.gradient_module(prog, d, "efficient", evm).source


def _comments(source):
    return [line.strip() for line in source.splitlines() if line.strip().startswith("# ")
            and ("vectorised" in line or "per-element" in line)]


def _fd(f, args, pos, h=1e-6):
    """Central differences of f in its argument `pos` (a float or an Array R)."""
    x = np.atleast_1d(np.array(args[pos], dtype=float))
    out = np.empty_like(x)
    for k in range(len(x)):
        up, down = x.copy(), x.copy()
        up[k] += h
        down[k] -= h
        a_up, a_down = list(args), list(args)
        a_up[pos] = up if np.ndim(args[pos]) else float(up[0])
        a_down[pos] = down if np.ndim(args[pos]) else float(down[0])
        out[k] = (f(*a_up) - f(*a_down)) / (2 * h)
    return out


# --------------------------------------------------------------- map with a closure


def test_the_gradient_of_a_map_with_a_closure_is_vectorised():
    from chad.compile.source import rewritten

    assert rewritten(chad.load(MAP_CLOSURE)) and not rewritten(chad.load(LETS))
    source = _source(MAP_CLOSURE)
    assert _comments(source) == ["# unzipMap: vectorised (forward pass)"]
    assert "_vseq(" in source and "_C" not in source.split("def ")[1]  # no closure value
    # the primal too, and with vectorisation off neither
    assert _comments(_source(MAP_CLOSURE, "primal")) == ["# map: vectorised"]
    with backend.vectorising(False):
        assert all("per-element" in c for c in _comments(_source(MAP_CLOSURE)))


@pytest.mark.parametrize("n", [0, 1, 2, 9, 300])
def test_a_map_with_a_closure_agrees_with_the_interpreter(n):
    rng = np.random.default_rng(n)
    args = (0.7, rng.normal(size=n) * 3.0)
    want = chad.grad(MAP_CLOSURE, backend="interp")(*args)
    for evm in RUNTIMES:
        agree(chad.grad(MAP_CLOSURE, evm=evm)(*args), want, exact=False)
        value, back = chad.vjp(MAP_CLOSURE, evm=evm)(*args)
        agree((value, back(1.0)), want, exact=False)
    agree(chad.primal(MAP_CLOSURE)(*args), chad.primal(MAP_CLOSURE, backend="interp")(*args),
          exact=False)


def test_a_map_with_a_closure_against_central_differences():
    rng = np.random.default_rng(7)
    args = [0.7, rng.normal(size=12)]
    f = chad.primal(MAP_CLOSURE, backend="interp")
    for evm in RUNTIMES:
        _value, (gw, gxs) = chad.grad(MAP_CLOSURE, evm=evm)(*args)
        assert abs(_fd(f, args, 0)[0] - gw) <= 1e-6 * max(1.0, abs(gw))
        assert np.allclose(_fd(f, args, 1), gxs, rtol=1e-6, atol=1e-6)


# a lambda that must not be inlined blindly: a capture rebound between the
# let and the use, a parameter named as a capture, a lambda used as a value,
# a lambda applied twice and a lambda literal applied to a non-variable
LAMBDAS = {
    "rebound": "def f(w : R, xs : Array R) : R = let g = \\(x : R) -> x * w in "
               "let w = 2.5 in sum (map g xs) + w",
    "param": "def f(w : R, xs : Array R) : R = let g = \\(w : R) -> w * w in "
             "sum (map g xs) * w",
    "value": "def f(w : R, xs : Array R) : R = let g = \\(x : R) -> x * w in "
             "let h = g in sum (map h xs) + g w",
    "twice": "def f(w : R, xs : Array R) : R = let g = \\(x : R) -> sin (x * w) in "
             "sum (map g xs) + g (w + 1.0) + g (g w)",
    "literal": "def f(w : R, xs : Array R) : R = (\\(y : R) -> y * y + w) (sum (map (\\x -> x * w) xs))",
    "nested": "def f(w : R, xs : Array R) : R = let g = \\(x : R) -> x * w in "
              "let k = \\(y : R) -> g y + g (y * y) in sum (map k xs)",
}


@pytest.mark.parametrize("name", sorted(LAMBDAS))
def test_inlined_lambdas_keep_their_meaning(name):
    text = LAMBDAS[name]
    rng = np.random.default_rng(3)
    args = (0.3, rng.normal(size=6))
    want = chad.grad(text, backend="interp")(*args)
    for evm in RUNTIMES:
        agree(chad.grad(text, evm=evm)(*args), want, exact=False)
    agree(chad.primal(text)(*args), chad.primal(text, backend="interp")(*args), exact=False)
    if name in ("twice", "nested", "param"):  # every use applied: inlined, batched
        assert "unzipMap: vectorised (forward pass)" in _source(text)


def test_the_naive_transform_still_refuses_lambdas():
    """The naive transform is first-order only: the compiled path keeps the
    program as written for it (an error, as on the interpreter)."""
    with pytest.raises(UsageError):
        chad.grad(MAP_CLOSURE, backend="interp", transform="naive")(0.5, np.ones(3))
    with pytest.raises(UsageError):
        chad.grad(MAP_CLOSURE, transform="naive")(0.5, np.ones(3))


# --------------------------------------------------------------- the stencil


def test_the_stencils_primal_is_vectorised():
    assert _comments(_source(STENCIL, "primal", "stencil")) == ["# build: vectorised"]
    # energy's module holds stencil's compiled body too (a call of a def that calls)
    assert sorted(_comments(_source(STENCIL, "primal", "energy"))) == [
        "# build: vectorised", "# map: vectorised"]
    grad = _comments(_source(STENCIL, "grad", "energy"))
    assert grad and all("per-element" not in c for c in grad), grad


@pytest.mark.parametrize("n", [0, 1, 2, 3, 50])
def test_the_stencil_agrees_with_the_interpreter(n):
    a = np.random.default_rng(n).normal(size=n)
    for fn in ("stencil", "energy"):
        agree(chad.primal(STENCIL, fn)(a), chad.primal(STENCIL, fn, backend="interp")(a),
              exact=True)
    want = chad.grad(STENCIL, "energy", backend="interp")(a)
    for evm in RUNTIMES:
        agree(chad.grad(STENCIL, "energy", evm=evm)(a), want, exact=True)
        value, back = chad.vjp(STENCIL, "energy", evm=evm)(a)
        agree((value, back(1.0)), want, exact=True)


def test_the_stencil_against_central_differences():
    a = np.random.default_rng(5).normal(size=9)
    f = chad.primal(STENCIL, "energy")
    fd = _fd(f, [a], 0)
    for evm in RUNTIMES:
        _value, (g,) = chad.grad(STENCIL, "energy", evm=evm)(a)
        assert np.allclose(fd, g, rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------- conditionals and integers

INTS = ("def f(n : Z, k : Z) : Array R = "
        "build n (\\i -> if i * k > 5 && not (i == 3) then toreal (i * k + k) else toreal (0 - i * k))")
INTS_Z = "def f(n : Z, k : Z) : Array Z = build n (\\i -> if i < 2 || i >= n - 1 then i * k else 0 - i)"
INTS_W = "def f(n : Z, k : Z) : Array R = build n (\\i -> toreal (if i < 2 then i else k))"


@pytest.mark.parametrize("text", [INTS, INTS_Z, INTS_W])
def test_integer_arithmetic_is_exact(text):
    """Batched integer arithmetic never wraps: operands near and beyond int64's
    range give the interpreter's (Python's) integers."""
    assert _comments(_source(text, "primal")) == ["# build: vectorised"]
    for k in (3, -7, 2 ** 31, 2 ** 62, 2 ** 63 - 1, -2 ** 63, 2 ** 64 + 5, -2 ** 70):
        try:
            want = chad.primal(text, backend="interp")(6, k)
        except (ChadError, OverflowError):
            continue  # an Array Z beyond int64: not representable either way
        agree(chad.primal(text)(6, k), want, exact=True)


def test_a_branch_that_might_fail_is_not_batched():
    """np.where computes both branches: a branch that could fail (here an index
    the evaluator reads only when it is in range) keeps the per-element loop."""
    text = ("def f(n : Z, a : Array R) : Array R = "
            "build n (\\i -> if i < length a then a ! i * 2.0 else -1.0)")
    assert _comments(_source(text, "primal")) == [
        "# build: per-element loop (a branch of a case that might fail)"]
    a = np.array([1.0, -2.0, 3.5])
    for n in (0, 2, 5):
        agree(chad.primal(text)(n, a), chad.primal(text, backend="interp")(n, a), exact=True)


def test_conditionals_on_reals_with_special_values():
    text = ("def f(a : Array R, c : R) : Array R = "
            "map (\\x -> if x < c then x * 2.0 else if x == c then 0.0 - x else x - c) a")
    assert _comments(_source(text, "primal")) == ["# map: vectorised"]
    a = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1.5])
    for c in (0.0, -0.0, 1.5, np.nan):
        agree(chad.primal(text)(a, c), chad.primal(text, backend="interp")(a, c), exact=True)


# --------------------------------------------------------------- lets in a batched reverse pass

LETS = ("def f(a : Array R, c : R) : R = "
        "sum (map (\\x -> let y = x * c in let z = y * y - c in z * y + x) a)")


def test_lets_in_a_map_body_batch_their_reverse_pass():
    """CHAD's let is `scope` (a cell for the variable's cotangent) bound to
    the rest of the action: batched as one per-element cell, an array; the same
    gradient bit for bit (no exp or tanh here), values of very different
    magnitudes included."""
    source = _source(LETS)
    assert "unzipMap: vectorised (forward pass)" in source and "_np.full(" in source
    rng = np.random.default_rng(17)
    for n in (0, 1, 2, 33):
        a = rng.normal(size=n) * 10.0 ** rng.integers(-6, 6, size=n)
        want = chad.grad(LETS, backend="interp")(a, 1.7)
        for evm in RUNTIMES:
            agree(chad.grad(LETS, evm=evm)(a, 1.7), want, exact=True)
            value, back = chad.vjp(LETS, evm=evm)(a, 1.7)
            agree((value, back(1.0)), want, exact=True)


# --------------------------------------------------------------- deep programs


def test_a_deep_program_of_lambda_applications_and_calls(monkeypatch):
    """3,000 nested lets (three times Python's recursion limit) applying a
    let-bound lambda and calling a small def: the source rewrites walk the term
    with loops (no RecursionError), stop at their budget (lowered here to 5,000
    nodes, which the program passes; the lambda, still applied beyond it, is
    kept) and give the interpreter's value and gradient."""
    from chad.compile import inline, source

    monkeypatch.setattr(source, "BUDGET", 5_000)
    monkeypatch.setattr(inline, "BUDGET", 5_000)
    reached = []
    go = source._Rewriter.go

    def spy(self, t):
        out = go(self, t)
        reached.append(self.added)
        return out

    monkeypatch.setattr(source._Rewriter, "go", spy)
    n = 3_000
    lines = ["def g(x : R) : R = x * 2.0", "", "def f(x : R) : R =",
             "  let h = \\(y : R) -> y * 1.0 + 0.5 in", "  let x0 = g(x) in"]
    lines += [f"  let x{i} = h (g(x{i - 1}) * 0.5) in" for i in range(1, n)]
    text = "\n".join(lines + [f"  x{n - 1}"]) + "\n"
    value, (dx,) = chad.grad(text)(2.0)
    assert value == 4.0 + 0.5 * (n - 1) and dx == 2.0
    assert chad.primal(text)(2.0) == value
    assert max(reached) >= source.BUDGET  # the budget stopped the rewrite


def test_an_array_of_comparisons_is_not_a_number_array():
    """A comparison is batched as a numpy bool array, but an array of Bools is
    the evaluator's tuple of injections: such a build keeps its loop."""
    text = "def f(n : Z, c : Z) : Array Bool = build n (\\i -> i < c || i == 4)"
    assert _comments(_source(text, "primal")) == [
        "# build: per-element loop (the elements are not numbers)"]
    for n in (0, 3, 6):
        assert chad.primal(text)(n, 2) == chad.primal(text, backend="interp")(n, 2)


# --------------------------------------------------------------- a map over an inlined call


def test_a_map_over_an_inlined_calls_result_is_vectorised():
    """examples/mlp.chad: `map (\\a -> max(0.0, a)) (dense(w1, b1, x))`, the call
    inlined as `let n = length x in build ...`, whose type the checker records
    on the build (chad/arrays/lower.py `_type_of`)."""
    with open(os.path.join(ROOT, "examples", "mlp.chad")) as fh:
        text = fh.read()
    comments = _comments(_source(text, "primal"))
    assert comments and all("per-element" not in c for c in comments), comments
    rng = np.random.default_rng(4)
    for _ in range(5):
        args = (rng.normal(size=3), rng.normal(size=12), rng.normal(size=4),
                rng.normal(size=12), rng.normal(size=3), int(rng.integers(0, 3)))
        args[1][::5] = 0.0  # ReLU at 0
        agree(chad.primal(text)(*args), chad.primal(text, backend="interp")(*args),
              exact=False)  # (exp, log: numpy's)
    with pytest.raises(ChadError) as compiled:
        chad.primal(text)(*args[:5], 7)  # z ! 7 of 3 classes: the interpreter's error
    with pytest.raises(ChadError) as interp:
        chad.primal(text, backend="interp")(*args[:5], 7)
    assert str(compiled.value) == str(interp.value)
