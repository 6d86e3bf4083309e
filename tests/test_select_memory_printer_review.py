"""Review of 55b20db (kernels.select_ints for `_vwhere`'s integer ifs, the C
select's loops for one broadcast operand), 44f05d3 / b60840c (the malloc
setting in chad/memory.py, applied by chad/deep.py's thread_stack_size before
chad's first thread) and b0e00c8 (print_surface parenthesises a let).

Checked:

* select_ints is np.where (values, dtype, shape, exception type) for every
  operand `vwhere` can pass when both fit: int64 arrays (contiguous, strided,
  reversed, broadcast), Python ints at the int64 limits, floats, numpy
  scalars, bools, 0-d and 2-D arrays, other integer dtypes, object arrays,
  masks that are strided, reversed, broadcast or numpy bool scalars;
  and the float select with its new stride-0 loops bit for bit;
* compiled integer ifs (1-D above the C select's threshold, rank-2 regions,
  integers beyond int64) and a clamp stencil's gradient against the
  interpreter;
* chad.memory: no chad import of its own, CHAD_MALLOC=system leaves malloc
  alone at every call site (thread_stack_size included), the setting is made
  once under concurrent callers and before chad's first thread;
* print_surface: hand-built operands (case, lambdas, minus, annotations,
  application, lets) and random programs parse back to the same program.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings

import chad
from chad.checker import check_program
from chad.compile import kernels
from chad.compile.vector_support import vwhere
from chad.costmodel.generators import (
    annotate_injections, chains, language_programs, print_surface, programs,
)
from chad.parser import parse_program

ROOT = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------- select_ints
def _outcome(f, *args):
    try:
        r = f(*args)
    except Exception as e:
        return type(e)
    r = np.asarray(r)
    return r.dtype, r.shape, (r.tolist() if r.dtype == object else r.tobytes())


def _int_operands(rng, n):
    ints = rng.integers(-2 ** 63, 2 ** 63 - 1, size=2 * n, dtype=np.int64, endpoint=True)
    ints[:3] = [-2 ** 63, 2 ** 63 - 1, 0]
    return [ints[:n], ints[::2], ints[::-1][:n], np.broadcast_to(np.int64(7), (n,)),
            np.arange(n, dtype=np.int64)[::-1],
            0, -1, 2 ** 63 - 1, -2 ** 63, 2 ** 63, -2 ** 63 - 1, True, np.int64(3),
            0.5, np.float64(2.0), ints[:n].astype(np.int32), ints[:n].astype(np.uint8),
            ints[:n] > 0, np.array(5), np.array([5]), ints[:n].astype(np.uint64),
            ints[:n].astype(">i8"), ints[:n].reshape(1, n), ints[:n].astype(object),
            ints[: n - 1]]


def _masks(rng, n):
    return [rng.random(n) < 0.5, (rng.random(2 * n) < 0.5)[::2],
            np.broadcast_to(np.bool_(True), (n,)), (rng.random(n) < 0.5)[::-1],
            np.zeros(n, dtype=bool), np.ones(n, dtype=bool), np.bool_(False),
            (rng.random(n) < 0.5).reshape(1, n)]


@pytest.mark.parametrize("n", [511, 512, 1031])
def test_select_ints_is_np_where_for_everything_vwhere_passes(kernels_impl, n):
    rng = np.random.default_rng(n)
    ops = _int_operands(rng, n)
    bad = []
    for c in _masks(rng, n):
        for a, b in itertools.product(ops, ops):
            if _outcome(kernels.select_ints, c, a, b) != _outcome(np.where, c, a, b):
                bad.append((getattr(c, "strides", c), type(a).__name__, getattr(a, "dtype", None),
                            getattr(a, "strides", None), type(b).__name__,
                            getattr(b, "dtype", None), getattr(b, "strides", None)))
    assert not bad, bad[:5]


@pytest.mark.parametrize("n", [512, 777])
def test_vwhere_is_np_where_on_int64_and_exact_beyond(kernels_impl, n):
    rng = np.random.default_rng(7)
    c = rng.random(n) < 0.5
    ints = rng.integers(-2 ** 40, 2 ** 40, size=n, dtype=np.int64)
    for a, b in [(ints, 0), (0, ints), (ints, ints[::-1]), (3, -4), (ints[::-1], 2 ** 63 - 1)]:
        got, want = vwhere(c, a, b), np.where(c, a, b)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    got = vwhere(c, ints, 2 ** 70)  # beyond int64: Python ints, exact
    assert got.tolist() == [int(x) if m else 2 ** 70 for m, x in zip(c, ints)]


def test_float_select_broadcast_loops_are_np_where_bit_for_bit(kernels_impl):
    rng = np.random.default_rng(3)
    n = 700
    f = rng.normal(size=2 * n)
    f[:6] = [np.nan, -0.0, np.inf, -np.inf, 0.0, -np.nan]
    ops = [f[:n], f[::2], f[::-1][:n], np.broadcast_to(np.float64(-0.0), (n,)),
           np.broadcast_to(np.float64(np.nan), (n,)), 0.5, -0.0, np.float64(1.5),
           float("nan"), np.array(2.0), np.array([3.0]), f[:n].reshape(1, n)]
    bad = []
    for c in [rng.random(n) < 0.5, (rng.random(2 * n) < 0.5)[::2],
              np.broadcast_to(np.bool_(True), (n,))]:
        for a, b in itertools.product(ops, ops):
            if _outcome(kernels.select, c, a, b) != _outcome(np.where, c, a, b):
                bad.append((type(a).__name__, getattr(a, "strides", None),
                            type(b).__name__, getattr(b, "strides", None)))
    assert not bad, bad[:5]


# ----------------------------------------------------------------- programs
ZPROGS = {
    "clamp": "def f(n : Z, k : Z) : Array Z = build n (\\i -> if i < k then i else k)",
    "lit": "def f(n : Z, k : Z) : Array Z = build n (\\i -> if i > k then 0 else i)",
    "neg": "def f(n : Z, k : Z) : Array Z = build n (\\i -> if i < k then 0 - i else k * 2)",
    "real": "def f(n : Z, k : Z) : Array R = build n (\\i -> toreal (if i > k then k else i * k))",
    "rank2": ("def f(n : Z, k : Z) : Array (Array Z) = "
              "build n (\\i -> build 40 (\\j -> if i + j < k then j else i - k))"),
}


def _plain(v):
    if isinstance(v, np.ndarray):
        return _plain(v.tolist())
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    return v


def _result(f):
    try:
        return ("ok", _plain(f()))
    except Exception as e:  # the interpreter's error: the compiled code's too
        return ("error", type(e).__name__)


@pytest.mark.parametrize("name", sorted(ZPROGS))
def test_integer_ifs_compiled_are_the_interpreters(name):
    text = ZPROGS[name]
    prim = chad.primal(text)
    for n in ([5, 600] if name == "rank2" else [5, 600, 1100]):
        for k in [3, 300, -7, 2 ** 62, 2 ** 63 - 1, -2 ** 63, 2 ** 63, 2 ** 70]:
            got = _result(lambda: prim(n, k))
            want = _result(lambda: chad.run(text, [n, k])[0])
            assert got == want, (name, n, k)


def test_clamp_stencil_gradient_is_the_interpreters():
    text = (ROOT / "examples" / "stencil.chad").read_text()
    a = np.random.default_rng(11).normal(size=700)
    a[[3, 10]] = [-0.0, 0.0]
    value, (g,) = chad.grad(text)(a)
    ivalue, (ig,) = chad.grad(text, backend="interp")(a)
    assert np.float64(value).tobytes() == np.float64(ivalue).tobytes()
    assert np.asarray(g, dtype=np.float64).tobytes() == np.asarray(ig, dtype=np.float64).tobytes()


# ----------------------------------------------------------------- chad/memory.py
def _python(code: str, **env_extra):
    env = dict(os.environ)
    env.pop("CHAD_MALLOC", None)
    env.update(env_extra)
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


def test_memory_imports_nothing_of_chad_and_deep_imports_first():
    code = """
        import sys
        import chad.memory
        mods = sorted(m for m in sys.modules if m == "chad" or m.startswith("chad."))
        import chad.deep, chad.compile.backend, chad.runtime.parallel_evm
        print(mods)
    """
    assert _python(code) == "['chad', 'chad.memory']"


_RECORD = """
    import ctypes, sys
    calls = []
    real = ctypes.CDLL
    class Rec(real):
        def __init__(self, name, *a, **k):
            calls.append(name)
            super().__init__(name, *a, **k)
    ctypes.CDLL = Rec
    import chad, chad.deep, chad.memory
    import numpy as np
    from chad.runtime.parallel_evm import ParallelEVM
    with chad.deep.thread_stack_size(1 << 20):
        pass
    chad.deep.run_deep(lambda: 1)
    ParallelEVM(max_workers=2).start()
    chad.primal("def f(a : Array R) : R = sum (map (\\\\x -> x * x) a)")(np.ones(3))
    libc = [c for c in calls if c and "libc" in str(c) or c == "libc.so.6"]
    print(chad.memory.keep_freed_memory(), len(libc))
"""


def test_chad_malloc_system_leaves_malloc_alone_at_every_call_site():
    assert _python(_RECORD, CHAD_MALLOC="system") == "False 0"
    assert _python(_RECORD, CHAD_MALLOC=" System ") == "False 0"


def test_setting_is_made_once_and_before_chads_first_thread():
    code = """
        import threading
        import chad.memory as m, chad.deep as d
        seen = []
        real = m._set
        m._set = lambda: (seen.append(threading.current_thread().name), real())[1]
        orig = threading.Thread.start
        before = []
        def start(self):
            before.append(m._done[0])
            return orig(self)
        threading.Thread.start = start
        d.run_deep(lambda: 1)
        from chad.runtime.parallel_evm import ParallelEVM
        ParallelEVM(max_workers=3).start()
        print(len(seen), before[0], all(b is not None for b in before), m.keep_freed_memory())
    """
    n, first, every, done = _python(code).split()
    assert n == "1" and first != "None" and every == "True" and first == done


def test_keep_freed_memory_is_thread_safe_and_idempotent():
    code = """
        import threading, time
        import chad.memory as m
        calls = []
        real = m._set
        def slow():
            calls.append(1)
            time.sleep(0.05)
            return real()
        m._set = slow
        results = []
        bar = threading.Barrier(16)
        def go():
            bar.wait()
            results.append(m.keep_freed_memory())
        ts = [threading.Thread(target=go) for _ in range(16)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        print(len(calls), len(set(results)), len(results), results[0] == m.keep_freed_memory())
    """
    assert _python(code) == "1 1 16 True"


# ----------------------------------------------------------------- print_surface
ROUND_TRIPS = [
    "def f(x : R + R) : R = (case x of { inl a -> a | inr b -> b }) + 1.0",
    "def f(x : R + R) : R = 1.0 + (case x of { inl a -> a | inr b -> b })",
    "def f(x : R + R) : R = sin (case x of { inl a -> a | inr b -> b })",
    "def f(x : (Array R) + (Array R)) : R = (case x of { inl a -> a | inr b -> b }) ! 0",
    "def f(x : (R -> R) + (R -> R)) : R = (case x of { inl a -> a | inr b -> b }) 1.0",
    "def f(x : R + R) : R = (\\y -> y) (case x of { inl a -> a | inr b -> b })",
    "def f(x : R + R) : R = case x of { inl a -> (let c = a in c) | inr b -> b }",
    "def f(x : R + R) : R = case x of { inl a -> (case x of { inl c -> c | inr d -> d }) | inr b -> b }",
    "def f(x : R) : R = - (-1.0)",
    "def f(x : R) : R = x ** -1.0",
    "def f(x : R) : R = (\\y -> y) (-x)",
    "def f(x : R) : R = (-x) ** 2.0",
    "def f(x : R) : R = x ** (2.0 ** 3.0)",
    "def f(x : R) : R + R = (inl (x : R) : R + R)",
    "def f(x : R) : (R -> R) + R = inl (\\y -> y * x) : (R -> R) + R",
    "def f(x : R) : R = (let g = (\\y -> y) in g) x",
    "def f(x : R) : R = (let y = x in y) ** 2.0",
    "def f(x : R) : R = - (let y = x in y)",
    "def f(x : R) : Bool = not (let y = x in y < 1.0) && (x > 0.0)",
    "def f(a : Array R) : R = (let b = a in b) ! 0",
    "def f(x : R) : R = fst (let p = (x, x) in p)",
    "def f(x : R) : R = iter (let k = 2 in k) (\\s -> s * x) (let y = x in y)",
    "def f(x : R) : R = sum (scan (\\p -> fst p + snd p) 0.0 [x])",
    "def f(x : Z) : Z = div(x, 2) + mod(-x, 3)",
    "def f(x : R) : Array R = map (\\z -> -z) [x, -x, (let y = x in y)]",
    "def f(x : R) : R = (\\(y : R) -> let z = y in z) x + 1.0",
]


@pytest.mark.parametrize("src", ROUND_TRIPS)
def test_print_surface_round_trips_hand_built_operands(src):
    prog = check_program(parse_program(src + "\n"))
    printed = print_surface(annotate_injections(prog))
    assert check_program(parse_program(printed)).defs == prog.defs, printed


_GEN = settings(max_examples=250, deadline=None, database=None,
                suppress_health_check=list(HealthCheck), phases=[Phase.generate])


def _round_trip(case):
    prog = annotate_injections(case.program)
    printed = print_surface(prog)
    assert check_program(parse_program(printed)).defs == check_program(prog).defs, printed


@_GEN
@given(language_programs(max_depth=4, max_params=4))
def test_print_surface_round_trips_random_language_programs(case):
    _round_trip(case)


@_GEN
@given(programs(max_depth=4, rich=True))
def test_print_surface_round_trips_random_rich_programs(case):
    _round_trip(case)


@_GEN
@given(chains(arrays=True, functions=True))
def test_print_surface_round_trips_chains(case):
    _round_trip(case)
