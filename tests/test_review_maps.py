"""Review of 1e9fcf3 (chad/compile/index_lets.py `_index_maps`, `_loop_read`
/ `_safe_here`, `_bounded`; extract_gathers skipping iter/scan bodies; the
Array Z fast paths in chad/values.py and chad/arrays/cotangents.py). Failing
tests demonstrate bugs; tests marked "holds" document what was checked."""

from __future__ import annotations

import json

import numpy as np
import pytest

import chad
from chad.api_core import load
from chad.compile import source
from chad.errors import ChadError, UsageError

RUNTIMES = ("array", "map", "parallel")


def _norm(v):
    """Bit-exact comparable form (floats as hex, arrays with their dtype)."""
    if isinstance(v, np.ndarray):
        return ("nd", str(v.dtype), [_norm(x) for x in v.tolist()])
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [_norm(x) for x in v])
    if isinstance(v, (float, np.floating)):
        return float(v).hex()
    return repr(v)


def _outcome(f):
    try:
        return ("ok", _norm(f()))
    except ChadError as e:
        return ("error", type(e).__name__, str(e))


def _vjp(text, args, ct=1.0, **kw):
    def go():
        y, back = chad.vjp(text, **kw)(*args)
        return y, back(ct)
    return go


# ---------------------------------------------------------------------------
# BUG 1: `_eligible` (index_lets.py) maps a let's NAME to its right-hand side
# over the whole body, assuming names are unique. prepare_body renames apart
# first, but then inlines let-bound lambdas used more than once, and "a
# lambda's copies keep its binder names" (source.py): after `g a + g b` the two
# copies of g's body both bind `i` and `j`, with different right-hand sides
# (`a ! i` and `b ! i`, the argument variable renamed in). The last one wins
# and is substituted into BOTH copies.
#
# New in this commit: `let j = ks ! i` inside `build (length ks) ...` now
# counts as unable to fail (_loop_read/_safe_here), so the classic embedding
# lookup written as a helper lambda gets a silently wrong VALUE.

LAMBDA_LOOKUP = """\
def f(w : Array R, a : Array Z, b : Array Z) : R =
  let g = \\ks -> sum (build (length ks) (\\i -> let j = ks ! i in w ! j)) in
  g a + g b
"""
LOOKUP_ARGS = (np.arange(1.0, 8.0), np.array([0, 1, 2]), np.array([5, 6, 6, 6]))


def test_lambda_lookup_primal_value_is_wrong():
    # interpreter: (w0+w1+w2) + (w5+w6+w6+w6) = 6 + 27 = 33; compiled: 47
    # (the first copy reads w ! (b ! i))
    want = _outcome(lambda: chad.primal(LAMBDA_LOOKUP, backend="interp")(*LOOKUP_ARGS))
    assert want == ("ok", (33.0).hex())
    got = _outcome(lambda: chad.primal(LAMBDA_LOOKUP)(*LOOKUP_ARGS))
    assert got == want


def test_lambda_lookup_naive_ho_is_wrong():
    want = _outcome(lambda: chad.grad(LAMBDA_LOOKUP, transform="naive-ho",
                                      backend="interp")(*LOOKUP_ARGS))
    got = _outcome(lambda: chad.grad(LAMBDA_LOOKUP, transform="naive-ho")(*LOOKUP_ARGS))
    assert got == want


# The same with the new map rewrite: each copy's map becomes a build with its
# own fresh index (i$mN), so the surviving right-hand side `ks ! i$mN + 1` of
# the other copy names an index that is unbound here: an internal compiler
# error ("unbound variable 'i$m..'") where the program runs fine.
LAMBDA_MAP = """\
def f(w : Array R, a : Array Z, b : Array Z) : R =
  let g = \\ks -> sum (map (\\k -> let j = k + 1 in w ! j * w ! k) ks) in
  g a + g b
"""
MAP_ARGS = (np.arange(1.0, 8.0), np.array([0, 1, 2]), np.array([4, 5]))
COPIES = {"lookup": (LAMBDA_LOOKUP, LOOKUP_ARGS), "map": (LAMBDA_MAP, MAP_ARGS)}


def test_lambda_map_primal_internal_error():
    want = _outcome(lambda: chad.primal(LAMBDA_MAP, backend="interp")(*MAP_ARGS))
    assert want[0] == "ok"
    got = _outcome(lambda: chad.primal(LAMBDA_MAP)(*MAP_ARGS))
    assert got == want


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("name", sorted(COPIES))
def test_lambda_copies_gradient(name, runtime):
    text, args = COPIES[name]
    want = _outcome(lambda: chad.grad(text, evm=runtime, backend="interp")(*args))
    assert want[0] == "ok"
    got = _outcome(lambda: chad.grad(text, evm=runtime)(*args))
    assert got == want


@pytest.mark.parametrize("name", sorted(COPIES))
def test_lambda_copies_vjp(name):
    text, args = COPIES[name]
    want = _outcome(_vjp(text, args, backend="interp"))
    got = _outcome(_vjp(text, args))
    assert got == want


# Pre-existing since 232ae30 (same root cause, no map and no loop read): a let
# of `i + x` in a lambda applied to two different variables.
LAMBDA_SHIFT = """\
def f(w : Array R, p : Z, q : Z) : R =
  let g = \\x -> sum (build 3 (\\i -> let j = i + x in w ! j)) in
  g p + g q
"""


def test_lambda_shift_primal_value_is_wrong():
    args = (np.arange(1.0, 8.0), 0, 4)  # interpreter: 6 + 18 = 24; compiled: 36
    want = _outcome(lambda: chad.primal(LAMBDA_SHIFT, backend="interp")(*args))
    got = _outcome(lambda: chad.primal(LAMBDA_SHIFT)(*args))
    assert got == want


def test_lambda_once_holds():
    """holds: the helper applied once (no copy) is right."""
    text = ("def f(w : Array R, a : Array Z) : R = let g = \\ks -> sum (build (length ks) "
            "(\\i -> let j = ks ! i in w ! j)) in g a")
    args = (np.arange(1.0, 8.0), np.array([0, 6, 6]))
    assert source.rewritten(load(text))
    for runtime in RUNTIMES:
        assert _outcome(lambda: chad.grad(text, evm=runtime)(*args)) == \
            _outcome(lambda: chad.grad(text, evm=runtime, backend="interp")(*args))


# ---------------------------------------------------------------------------
# BUG 2 (pre-existing, at the boundary this commit touched): a 0-d numpy
# array, or a timedelta64 array, given for an Array Z: a TypeError, not a
# UsageError. _int64_array returns None for them and the general path does
# list(j) (0-d: "iteration over a 0-d array") / int(np.timedelta64)
# (np.timedelta64 is an np.integer).

ZT = "def f(w : Array R, ks : Array Z) : R = sum (map (\\k -> w ! k) ks)"


@pytest.mark.parametrize("bad", [np.array(3), np.array([1, 2], dtype="m8[s]")],
                         ids=["0-d", "timedelta64"])
@pytest.mark.parametrize("backend", ["interp", None])
def test_bad_array_z_argument_is_usage_error(bad, backend):
    w = np.arange(1.0, 8.0)
    with pytest.raises(UsageError):
        chad.grad(ZT, backend=backend)(w, bad)


# ---------------------------------------------------------------------------
# holds: the map rewrite against the interpreter, bit for bit, on the three
# runtimes (grad, primal, vjp) and the naive transforms

W = np.arange(1.0, 8.0)
KS = np.array([0, 3, 3, 6, 1])
M = [np.arange(3.0) + i for i in range(5)]
HOLDS = {
    "element used otherwise": ("def f(w : Array R, ks : Array Z) : R = "
                               "sum (map (\\k -> w ! k * toreal k) ks)", (W, KS)),
    "Array Z result": ("def f(v : Array Z, ks : Array Z) : Array Z = map (\\k -> v ! k + k) ks",
                       (np.arange(5, 12), KS)),
    "rows": ("def f(m : Array (Array R), ks : Array Z) : R = "
             "sum (map (\\r -> sum r) (map (\\k -> m ! k) ks))", (M, np.array([0, 4, 4, 1]))),
    "nested": ("def f(w : Array R, ks : Array Z, js : Array Z) : R = "
               "sum (map (\\k -> sum (map (\\j -> w ! j * w ! k) js)) ks)",
               (W, KS, np.array([2, 2, 5]))),
    "nested same array": ("def f(w : Array R, ks : Array Z) : R = "
                          "sum (map (\\k -> sum (map (\\j -> w ! (j + k)) ks)) ks)",
                          (W, np.array([0, 1, 3]))),
    "in lambda": ("def f(w : Array R, ks : Array Z) : R = let g = \\(x : R) -> "
                  "sum (map (\\k -> x * w ! k) ks) in g 2.0 + g 3.0", (W, KS)),
    "in case": ("def f(w : Array R, ks : Array Z, c : R) : R = "
                "if c > 0.0 then sum (map (\\k -> w ! k) ks) else 0.0", (W, KS, 1.0)),
    "in iter": ("def f(w : Array R, ks : Array Z, n : Z) : R = "
                "iter n (\\s -> s + sum (map (\\k -> w ! k * s) ks)) 1.0", (W, KS, 3)),
    "in iter 0 times": ("def f(w : Array R, ks : Array Z, n : Z) : R = "
                        "iter n (\\s -> s + sum (map (\\k -> w ! k * s) ks)) 1.0",
                        (W, np.array([9]), 0)),
    "empty": ("def f(w : Array R, ks : Array Z) : R = sum (map (\\k -> w ! k) ks)",
              (W, np.array([], dtype=np.int64))),
    "out of range": ("def f(w : Array R, ks : Array Z) : R = sum (map (\\k -> w ! k) ks)",
                     (np.array([]), np.array([0]))),
    "error order": ("def f(w : Array R, v : Array R, ks : Array Z) : R = "
                    "sum (map (\\k -> v ! (k - 2) + w ! k) ks)", (W, np.arange(3.0), np.array([9, 1]))),
    "div": ("def f(w : Array R, ks : Array Z) : R = sum (map (\\k -> w ! (div(10, k))) ks)",
            (W, np.array([5, 0]))),
    "rebound": ("def f(w : Array R, ks : Array Z) : R = let ks = map (\\k -> k + 1) ks in "
                "sum (map (\\k -> w ! k) ks)", (W, np.array([0, 5]))),
    "shadowing let": ("def f(w : Array R, ks : Array Z) : R = "
                      "sum (map (\\k -> let ks = 2 in w ! (k + ks)) ks)", (W, np.array([0, 4]))),
    "huge": ("def f(w : Array R, ks : Array Z) : R = sum (map (\\k -> w ! (k + k)) ks)",
             (W, [2 ** 62])),
    "Array (Array Z)": ("def f(w : Array R, kss : Array (Array Z)) : R = "
                        "sum (map (\\ks -> sum (map (\\k -> w ! k) ks)) kss)",
                        (W, [[1, 2], [], [6]])),
}


@pytest.mark.parametrize("name", sorted(HOLDS))
def test_map_rewrite_holds(name):
    text, args = HOLDS[name]
    assert source.rewritten(load(text))
    assert _outcome(lambda: chad.primal(text)(*args)) == \
        _outcome(lambda: chad.primal(text, backend="interp")(*args))
    for runtime in RUNTIMES:
        for transform in ("efficient", "naive", "naive-ho"):
            assert _outcome(lambda: chad.grad(text, evm=runtime, transform=transform)(*args)) == \
                _outcome(lambda: chad.grad(text, evm=runtime, transform=transform,
                                           backend="interp")(*args)), (runtime, transform)
        if not name.startswith("Array Z"):
            assert _outcome(_vjp(text, args, evm=runtime)) == \
                _outcome(_vjp(text, args, evm=runtime, backend="interp"))


@pytest.mark.parametrize("arg", [
    np.array([1, 2], dtype=np.uint64), np.array([1, -1], dtype=np.int8),
    np.array([1, 2], dtype=object), np.arange(10)[::3], np.array([1, 2], dtype=">i8"),
    (1, 2), [np.int64(1), np.int32(2)], np.array([True, False]), np.array([[1, 2], [3, 4]]),
    np.array([1, 2 ** 63], dtype=np.uint64), [1, 2 ** 64], [1, True], np.array([1.0, 2.0]),
    np.zeros((0, 3), dtype=np.int64),
], ids=lambda a: repr(a)[:30])
def test_array_z_arguments_holds(arg):
    """holds: numpy/list arguments for Array Z give the interpreter's result or
    its UsageError."""
    want = _outcome(lambda: chad.grad(ZT, backend="interp")(W, arg))
    assert _outcome(lambda: chad.grad(ZT)(W, arg)) == want
    assert _outcome(lambda: chad.primal(ZT)(W, arg)) == \
        _outcome(lambda: chad.primal(ZT, backend="interp")(W, arg))


def test_array_array_z_numpy_and_mutation_holds():
    """holds: 2-D int arrays for Array (Array Z), and a caller's arrays mutated
    between a vjp's forward and backward pass change nothing."""
    text = HOLDS["Array (Array Z)"][0]
    for kss in (np.array([[1, 2], [3, 4]], dtype=np.uint8), [np.array([1]), np.array([2, 3])]):
        assert _outcome(lambda: chad.grad(text)(W, kss)) == \
            _outcome(lambda: chad.grad(text, backend="interp")(W, kss))
    w, ks = W.copy(), np.array([0, 1, 2])
    y, back = chad.vjp("def f(w : Array R, ks : Array Z) : R = sum (map (\\k -> w ! k * w ! k) ks)")(w, ks)
    ks[:] = 6
    w[:] = 100.0
    g = back(1.0)
    assert y == 14.0 and g[0].tolist() == [2.0, 4.0, 6.0, 0, 0, 0, 0] and g[1] == (None,) * 3


def test_cli_and_run_holds(tmp_path, capsys):
    from chad.cli import main
    f = tmp_path / "m.chad"
    f.write_text("def f(w : Array R, ks : Array Z) : R = sum (map (\\k -> w ! k * w ! k) ks)\n")
    outs = []
    for extra in ([], ["--backend", "interp"]):
        assert main(["grad", str(f), "--args", "[[1.0, 2.0, 3.0], [0, 2, 2]]", "--json", *extra]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert outs[0] == outs[1] == {"value": 19.0, "gradient": [[2.0, 0.0, 12.0], [None, None, None]]}
    assert chad.run(f.read_text(), [[1.0, 2.0, 3.0], [0, 2, 2]])[0] == 19.0
