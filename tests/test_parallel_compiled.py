"""The parallel runtime's compiled code (docs/runtimes.md, "Parallel compiled
code"): the array runtime's inlined, vectorised code with fork points
(chad/compile/parallel_codegen.py, chad/compile/parallel_support.py).

What is promised: its gradients are the array runtime's bit for bit (forks or
not: a forked half's adds to older cells are replayed in program order at the
join); it forks where independent heavy parts are large, and not for small
arrays; an error in a forked half is the error of the sequential code. Nothing
here is timed (benchmarks/bench_parallel.py measures the speedup).
"""

from __future__ import annotations

import math
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chad
from chad.compile import backend, parallel_support
from chad.compile.parallel_support import ForkCells, pseq, pvals, replay
from chad.compile.support import padd
from chad.costmodel import generators as G
from chad.values import Inj
from tests.oracle_agda import canon

ROOT = Path(__file__).resolve().parent.parent
TWO = (ROOT / "examples" / "two_branches.chad").read_text()
BIG = parallel_support.GRAIN * 2  # elements per array: every branch forks


def _bits(result) -> tuple:
    """A (value, gradients) result as exact bit patterns."""
    value, grads = result
    out = [float(value).hex()]
    for g in grads:
        if isinstance(g, np.ndarray):
            out.append((g.dtype.str, g.shape, g.tobytes()))
        elif isinstance(g, float):
            out.append(g.hex())
        else:
            out.append(repr(g))
    return tuple(out)


def _arrays(k: int, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n) * 3.0 for _ in range(k)]


def _same(prog, *args):
    """The parallel gradient equals the array one bit for bit; the forks decided."""
    want = _bits(chad.grad(prog, evm="array")(*args))
    parallel_support.stats.reset()
    got = _bits(chad.grad(prog, evm="parallel")(*args))
    assert got == want
    return parallel_support.stats.decided


# ---------------------------------------------------------------- the example


def test_the_example_is_bit_identical_and_forks_for_large_arrays():
    prog = chad.load(TWO)
    a, b = _arrays(2, BIG)
    # two forks per call: the forward maps (lets) and the reverse passes (>>)
    assert _same(prog, a, b) == 2
    # ... bit for bit with the array runtime every time, whichever half ends first
    want = _bits(chad.grad(prog, evm="array")(a, b))
    g = chad.grad(prog, evm="parallel")
    parallel_support.stats.reset()
    main = threading.get_ident()
    for _ in range(5):
        assert _bits(g(a, b)) == want
    assert parallel_support.stats.decided == 10
    # the halves really ran on other threads (a half not started when the
    # forking thread is done with its own is run there instead: with 10^5
    # elements of work per half, that is not all ten times)
    assert parallel_support.stats.pooled > 0
    assert parallel_support.stats.threads and main not in parallel_support.stats.threads


def test_no_fork_for_small_arrays():
    prog = chad.load(TWO)
    a, b = _arrays(2, 1000)
    assert _same(prog, a, b) == 0
    # one large and one small branch: still no fork (both halves must be heavy)
    a2, = _arrays(1, BIG)
    assert _same(prog, a2, b) == 0


def test_the_grain_decides_the_forks():
    prog = chad.load(TWO)
    a, b = _arrays(2, 1000)
    with parallel_support.grain(500):
        assert _same(prog, a, b) == 2
    with parallel_support.grain(10 ** 5):
        assert _same(prog, a, b) == 0


def test_the_generated_code_has_fork_points_only_on_the_parallel_runtime():
    prog = chad.load(TWO)
    d = prog.find(None)
    par = backend.gradient_module(prog, d, "efficient", "parallel").source
    arr = backend.gradient_module(prog, d, "efficient", "array").source
    assert "_pvals(" in par and "_pseq(" in par
    assert "_pvals(" not in arr and "_pseq(" not in arr
    # a single branch has nothing to fork
    one = chad.load("def f(a : Array R) : R = sum (map (\\x -> exp (sin x) * x) a)")
    src = backend.gradient_module(one, one.find(None), "efficient", "parallel").source
    assert "_pvals(" not in src and "_pseq(" not in src


# ---------------------------------------------------------------- several branches, shared cells

SHARED = """
def f(w : R, a : Array R, b : Array R) : R =
  let c = w * 2.0 in
  sum (map (\\x -> w * sin x + c * x) a) + sum (map (\\y -> c * cos y - w * y * y) b)
"""

FOUR = """
def f(w : R, a : Array R, b : Array R, c : Array R, d : Array R) : R =
  sum (map (\\x -> w * exp (sin x)) a) + sum (map (\\y -> tanh (w * y)) b)
  + sum (map (\\z -> w * w * cos z) c) + sum (map (\\u -> sin (u * w) * u) d)
"""

# element bodies with a branch: not vectorised, the per-element closures run
# through the EVM interface (FastArrayEVM) on the forked half's cells
LOOPS = """
def f(w : R, a : Array R, b : Array R) : R =
  sum (map (\\x -> if x > 0.0 then w * x else sin (w * x)) a)
  + sum (map (\\y -> if y > 1.0 then w * y * y else w + y) b)
"""

BUILDS = """
def f(w : R, a : Array R, b : Array R) : R =
  let p = build (length a) (\\i -> a ! i * w) in
  let q = build (length b) (\\i -> sin (b ! i) + w) in
  sum (map (\\x -> x * x) p) + sum (map (\\y -> y * w) q)
"""


@pytest.mark.parametrize("text,k", [(SHARED, 2), (FOUR, 4), (LOOPS, 2), (BUILDS, 2)],
                         ids=["shared", "four", "loops", "builds"])
def test_several_branches_adding_to_shared_cells_are_bit_identical(text, k):
    prog = chad.load(text)
    arrays = _arrays(k, 4000, seed=k)
    with parallel_support.grain(1000):
        forks = _same(prog, 0.75, *arrays)
    assert forks >= 2
    # several runs, and values whose sums round (order matters)
    arrays = [x * 1e8 + 1e-8 for x in arrays]
    with parallel_support.grain(1000):
        for _ in range(3):
            _same(prog, 1.0 + 2.0 ** -40, *arrays)


def test_four_branches_fork_nested():
    """Four branches: the forward lets and the `>>` chain split 2 + 2, each half
    forking again (a ForkCells replayed onto a ForkCells)."""
    prog = chad.load(FOUR)
    arrays = _arrays(4, 4000, seed=4)
    with parallel_support.grain(1000):
        assert _same(prog, 0.5, *arrays) == 6  # 3 forks of the lets, 3 of the chain


def test_the_vjp_forks_too_and_agrees():
    prog = chad.load(SHARED)
    a, b = _arrays(2, 3000)
    with parallel_support.grain(1000):
        want_v, want_back = chad.vjp(prog, evm="array")(0.5, a, b)
        parallel_support.stats.reset()
        got_v, got_back = chad.vjp(prog, evm="parallel")(0.5, a, b)
        assert canon(got_v) == canon(want_v)
        assert canon(list(got_back(1.5))) == canon(list(want_back(1.5)))
    assert parallel_support.stats.decided >= 2


# ---------------------------------------------------------------- generated programs

COUNT = {"cases": 0, "forked": 0}


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(G.chains(10, arrays=True, functions=True) | G.programs(max_depth=4, max_params=3,
                                                               arrays=True))
def _generated(case):
    prog = case.program
    with parallel_support.grain(1):  # fork wherever two heavy parts read anything
        ref = chad.vjp(prog, evm="array")(*case.args)
        ref = canon(ref[0]), canon(list(ref[1](case.ctg)))
        parallel_support.stats.reset()
        got = chad.vjp(prog, evm="parallel")(*case.args)
        got = canon(got[0]), canon(list(got[1](case.ctg)))
    assert got == ref, case.source()
    COUNT["cases"] += 1
    COUNT["forked"] += parallel_support.stats.decided > 0


def test_generated_array_programs_are_bit_identical():
    """The checker's generated array programs (few have two independent heavy
    parts: BRANCHES below has them all)."""
    COUNT.update(cases=0, forked=0)
    _generated()
    assert COUNT["cases"] >= 75


# programs of 2 to 4 branches, each a sum over a map or build of one of the
# arrays (two branches may read the same array: both add to its cell), with
# random element bodies over the element, a shared scalar w and a let-bound c
# (both added to by every branch), some with a branch (not vectorised)

def _expr(draw, depth: int, var: str) -> str:
    leaves = [var, "w", "c", "0.5", "1.25"]
    if depth == 0:
        return draw(st.sampled_from(leaves))
    kind = draw(st.sampled_from(["leaf", "un", "bin", "bin", "if"]))
    if kind == "leaf":
        return draw(st.sampled_from(leaves))
    if kind == "un":
        f = draw(st.sampled_from(["sin", "cos", "tanh", "exp"]))
        inner = _expr(draw, depth - 1, var)
        return f"{f} ({inner} * 0.25)" if f == "exp" else f"{f} ({inner})"
    if kind == "bin":
        op = draw(st.sampled_from(["+", "-", "*"]))
        return f"({_expr(draw, depth - 1, var)} {op} {_expr(draw, depth - 1, var)})"
    return (f"(if {_expr(draw, depth - 1, var)} > 0.0 then {_expr(draw, depth - 1, var)} "
            f"else {_expr(draw, depth - 1, var)})")


@st.composite
def branches(draw):
    k = draw(st.integers(2, 4))
    parts = []
    for j in range(k):
        arr = draw(st.sampled_from(["a", "b", "d"]))
        body = _expr(draw, draw(st.integers(1, 3)), "@")
        if draw(st.booleans()):
            parts.append(f"sum (map (\\x -> {body.replace('@', 'x')}) {arr})")
        else:
            body = body.replace("@", f"({arr} ! i)")
            parts.append(f"sum (build (length {arr}) (\\i -> {body}))")
    lets = "".join(f"  let s{j} = {p} in\n" for j, p in enumerate(parts))
    combine = draw(st.sampled_from(["+", "*"]))
    result = f" {combine} ".join(f"s{j}" for j in range(k))
    return ("def f(w : R, a : Array R, b : Array R, d : Array R) : R =\n"
            f"  let c = w * 1.5 in\n{lets}  {result} + c\n")


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(branches(), st.integers(0, 2 ** 32 - 1))
def _branch_programs(text, seed):
    prog = chad.load(text)
    arrays = _arrays(3, 300, seed)
    with parallel_support.grain(100):
        forks = _same(prog, 0.625, *arrays)
    COUNT["cases"] += 1
    COUNT["forked"] += forks > 0


def test_generated_branches_are_bit_identical_and_fork():
    COUNT.update(cases=0, forked=0)
    _branch_programs()
    assert COUNT["cases"] >= 30
    assert COUNT["forked"] >= COUNT["cases"] * 3 // 4, COUNT


# ---------------------------------------------------------------- errors

BAD = """
def f(a : Array R, b : Array R) : R =
  sum (map (\\x -> exp (sin x) * x) a) + sum (build (length b) (\\i -> b ! (i + 1)))
"""


def test_an_error_in_a_forked_branch_is_reported_as_sequentially():
    prog = chad.load(BAD)
    a, b = _arrays(2, BIG)
    errors = {}
    for evm in ("array", "parallel"):
        with pytest.raises(chad.EvalError) as e:
            chad.grad(prog, evm=evm)(a, b)
        errors[evm] = (str(e.value), e.value.loc)
    assert errors["parallel"] == errors["array"]
    assert "out of range" in errors["array"][0]
    # the compiled code itself raises the array code's exception
    d = prog.find(None)
    raised = {}
    for evm in ("array", "parallel"):
        entry = backend.gradient_module(prog, d, "efficient", evm).entry
        parallel_support.stats.reset()
        with pytest.raises(Exception) as e:
            entry(a, b, 1.0)
        raised[evm] = (type(e.value), str(e.value))
        # the failing branch is the second half of a fork on the parallel runtime
        assert parallel_support.stats.decided == (evm == "parallel")
    assert raised["parallel"] == raised["array"]


def _half(log: list, tag, fail: bool = False):
    def act(cells):
        log.append(tag)
        cells[0] = padd(float(len(log)), cells[0])
        if fail:
            raise ValueError(f"half {tag}")
        return tag

    return act


def test_fork_errors_first_in_program_order_and_the_other_half_finished():
    for fail in ((True, False), (False, True), (True, True)):
        log: list = []
        cells = [0.0]
        with pytest.raises(ValueError) as e:
            with parallel_support.grain(1):
                pseq(cells, (_half(log, "a", fail[0]), _half(log, "b", fail[1])), (5, 5))
        assert str(e.value) == ("half a" if fail[0] else "half b")
        # no half is still running once the fork has raised
        n = len(log)
        assert n == len(log) and set(log) <= {"a", "b"}
    with pytest.raises(ZeroDivisionError):
        with parallel_support.grain(1):
            pvals((lambda: 1.0, lambda: 1 / 0), (5, 5))


# ---------------------------------------------------------------- the cells of a forked half


def test_forkcells_log_adds_to_older_cells_and_replay_them_in_order():
    big = 2.0 ** 53  # big + 1.0 rounds back to big: the order of additions shows
    cells = [big, None]
    view = ForkCells(len(cells))
    assert len(view) == 2 and view[0] is None and view[1] is None
    for v in (1.0, 1.0, -big):
        view[0] = padd(v, view[0])
    view.append(0.0)  # the half's own scope cell: an ordinary cell
    view[2] = padd(3.0, view[2])
    assert view.pop() == 3.0
    view[1] = padd(Inj(0, 2.0), view[1])
    replay(cells, view.log)
    seq = big
    for v in (1.0, 1.0, -big):
        seq = seq + v
    assert cells[0] == seq == 0.0  # ((big + 1) + 1) - big, not big + (1 + 1 - big)
    assert cells[1] == Inj(0, 2.0)


def test_replay_onto_a_forked_half_passes_older_cells_on():
    outer = [1.0, 2.0]
    mid = ForkCells(2)
    mid.append(10.0)  # level 2: mid's own
    inner = ForkCells(3)
    inner[0] = padd(0.5, inner[0])
    inner[2] = padd(0.25, inner[2])
    replay(mid, inner.log)
    assert mid[2] == 10.25 and mid.log == [(0, 0.5, padd)]
    replay(outer, mid.log)
    assert outer == [1.5, 2.0]


def test_psize_counts_array_elements():
    a = np.zeros(1000)
    assert parallel_support.psize(a) == 1000
    assert parallel_support.psize((a, (a, 3.0))) == 2000
    assert parallel_support.psize(1.5, None, "x") == 0
    assert parallel_support.psize(7) == 7
    assert math.isclose(parallel_support.psize(np.zeros((3, 4))), 12)
