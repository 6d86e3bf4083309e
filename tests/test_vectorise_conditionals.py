"""Conditionals, comparisons and integer arithmetic in vectorised bodies
(chad/compile/vectorise.py: Batcher._case, _discrete; vector_support.viadd,
vimul, vineg, viwhere), beside tests/test_vectorise_calls.py.

`if c then x else y` in a build or map body is np.where(c, x, y) when both
branches cannot fail; integer arithmetic is int64 numpy code where the
operands' magnitudes allow and arrays of Python integers where they do not
(the language's integers are unbounded): values are the interpreter's, bit for
bit, including integers far beyond 64 bits and the evaluator's error for an
Array Z element outside int64. Names of the program never reach the source.
"""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

import chad
from chad.compile import backend

RUNTIMES = ("array", "map", "parallel")

CLAMP = """\
def cl(a : Array R) : Array R =
  let n = length a in
  build n (\\i -> let j = i - 1 in let k = i + 1 in
    0.25 * a ! (if j < 0 then 0 else j) + 0.5 * a ! i
    + 0.25 * a ! (if k > n - 1 then n - 1 else k))
"""
SELECT = ("def sel(a : Array R, c : R) : Array R = "
          "map (\\x -> if x > c || x == 0.0 then x * 2.0 else if not (x < -c) then c else -x) a")
INTS = ("def ints(n : Z, k : Z) : Array R = "
        "build n (\\i -> toreal (i * 3 + k - (if i >= 2 && i != 4 then k else 2 * k)))")
ENERGY = """\
def en(a : Array R) : R =
  let n = length a in
  sum (build n (\\i -> let j = if i > 0 then i - 1 else 0 in a ! j * a ! i))
"""


def _primal_source(text: str) -> str:
    from chad.api_core import load
    prog = load(text)
    return backend.primal_module(prog, prog.defs[-1]).source


def _same(x, y) -> bool:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    return x.shape == y.shape and x.tobytes() == y.tobytes()


@pytest.mark.parametrize("text", [CLAMP, SELECT, INTS, ENERGY])
def test_the_bodies_are_vectorised(text):
    src = _primal_source(text)
    assert re.search(r"# (build|map): vectorised", src), src
    assert "per-element loop" not in src, src
    assert re.search(r"(_vselect|_vwhere)\(", src), src


def _cases(rng):
    a = rng.normal(size=9)
    a[1], a[3], a[5] = -0.0, 0.0, np.nan
    return [(CLAMP, (a,)), (CLAMP, (a[:1],)), (CLAMP, (a[:0],)),
            (SELECT, (a, 0.3)), (SELECT, (a, -0.0)), (SELECT, (a, np.inf)),
            (INTS, (7, 5)), (INTS, (0, 5)), (INTS, (6, -(2**40))), (ENERGY, (a[:6],))]


def test_values_are_the_interpreters_bit_for_bit():
    rng = np.random.default_rng(4)
    for text, args in _cases(rng):
        got = chad.primal(text)(*args)
        want = chad.run(text, [x.tolist() if isinstance(x, np.ndarray) else x
                               for x in args])[0]
        assert _same(got, want), (text, args, got, want)


def test_huge_unbatched_integers_stay_exact():
    """k from 2**62 on: 2 * k and i * 3 + k - 2 * k leave int64 (np.where of such
    Python integers would give uint64 or fail); the values stay exact."""
    for k in (2**48, -(2**48), 2**48 - 1, 2**62 + 7, 10**30):
        got = chad.primal(INTS)(5, k)
        want = chad.run(INTS, [5, k])[0]
        assert _same(got, want), k
    with backend.vectorising(False):
        assert _same(chad.primal(INTS)(5, 2**70), chad.primal(INTS)(5, 2**70))


def test_integers_beyond_int64_stay_exact():
    """i * k * k and a Z read from an input array: int64 where the operands'
    magnitudes allow, Python integers where they do not (vector_support.viadd,
    vimul, viwhere), as the language's unbounded integers."""
    text = ("def c(n : Z, k : Z) : Array R = "
            "build n (\\i -> toreal (i * k * k - (if i > 1 then k * k else 1)))")
    assert "vectorised" in _primal_source(text)
    for k in (3, 2**31, 2**40, -(2**62)):
        got = chad.primal(text)(5, k)
        want = chad.run(text, [5, k])[0]
        assert _same(got, want), k
    read = "def r(a : Array Z, k : Z) : Array Z = map (\\x -> x * k + 1) a"
    a = np.array([2**62, -3, 7], dtype=np.int64)
    for k in (1, -2, 0):  # x * k beyond int64 on the way for k = -2: -2**63 + 1 at the end
        got = chad.primal(read)(a, k)
        want = chad.run(read, [a.tolist(), k])[0]
        assert [int(x) for x in got] == [int(x) for x in want], k
    with pytest.raises(chad.ChadError, match="64-bit range"):
        chad.primal(read)(a, 4)  # 2**64 + 1 is no element of an Array Z: the evaluator's error


def test_a_branch_that_might_fail_is_not_batched():
    text = "def f(a : Array R) : Array R = map (\\x -> if x > 0.0 then x else a ! 7) a"
    src = _primal_source(text)
    assert "per-element loop (a branch of a case that might fail)" in src
    a = np.array([1.0, -1.0])
    with pytest.raises(chad.ChadError):
        chad.primal(text)(a)  # the evaluator's index error: 7 out of range
    assert _same(chad.primal(text)(np.array([1.0, 2.0])), [1.0, 2.0])


@pytest.mark.parametrize("evm", RUNTIMES)
def test_gradients_through_conditional_indices(evm):
    rng = np.random.default_rng(9)
    a = rng.normal(size=8)
    for text in (CLAMP.replace("Array R =", "R =").replace(
            "build n", "sum (build n").rstrip() + ")\n", ENERGY):
        value, (g,) = chad.grad(text, evm=evm)(a)
        ivalue, (ig,) = chad.grad(text, evm=evm, backend="interp")(a)
        assert value == ivalue
        np.testing.assert_allclose(g, ig, rtol=1e-12, atol=0)
        h = 1e-6
        for i in range(len(a)):
            e = np.zeros_like(a)
            e[i] = h
            fd = (chad.primal(text)(a + e) - chad.primal(text)(a - e)) / (2 * h)
            assert abs(fd - g[i]) <= 1e-6 * max(1.0, abs(fd)), (text, i)


def test_no_thread_is_needed_and_the_source_splices_no_name():
    hostile = CLAMP.replace("cl(", "import_os_system(").replace(" n ", " __import__ ")
    hostile = hostile.replace("let n =", "let __import__ =").replace("n - 1", "__import__ - 1")
    src = _primal_source(hostile)
    assert "vectorised" in src
    code = "\n".join(line for line in src.splitlines() if not line.lstrip().startswith("#"))
    assert "__import__" not in code and "import_os_system" not in code
    code = ("import numpy as np, chad, threading\n"
            "started = []\n"
            "orig = threading.Thread.start\n"
            "threading.Thread.start = lambda self: (started.append(1), orig(self))[1]\n"
            f"print(list(chad.primal({CLAMP!r})(np.arange(5.0))), len(started))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split("]")
    assert out[1].strip() == "0"
