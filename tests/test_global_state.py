"""A good citizen in someone else's process (chad/deep.py): a library call leaves the process-wide settings as it
found them — the recursion limit, `threading.stack_size()`, the garbage
collector — also when several threads call it at once; a host program that
recurses deeply afterwards still gets RecursionError (not a segmentation fault);
and concurrent calls work under an address-space limit (RLIMIT_AS), i.e. the
big-stack threads of chad.deep and of the parallel runtime are affordable.

The crash and the address-space checks run in a subprocess, so a segmentation
fault fails the test instead of killing pytest.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import chad
from chad import deep

PROGRAM = "def f(w : R, xs : Array R) : R = sum (map (\\(x : R) -> tanh (w * x) * x) xs)"
XS = [((i * 37) % 101) / 25.0 - 2.0 for i in range(300)]  # enough to fork on "parallel"

# A host recursion limit and thread stack size that chad would never choose.
HOST_LIMIT = 1234
HOST_STACK = 4 * 1024 * 1024


@pytest.fixture
def host_settings():
    """Put distinctive host values in force, and the previous ones back afterwards."""
    old_limit = sys.getrecursionlimit()
    old_stack = threading.stack_size(HOST_STACK)
    sys.setrecursionlimit(HOST_LIMIT)
    try:
        yield
    finally:
        sys.setrecursionlimit(old_limit)
        threading.stack_size(old_stack)


def _stack_size() -> int:
    """threading.stack_size() without changing it (called without an argument it
    also sets the size back to 0)."""
    size = threading.stack_size()
    threading.stack_size(size)
    return size


def _state():
    return sys.getrecursionlimit(), _stack_size(), gc.isenabled()


HOST_STATE = (HOST_LIMIT, HOST_STACK, True)


def _calls(evm: str):
    prog = chad.load(PROGRAM)
    return [
        lambda: chad.grad(prog, evm=evm)(0.5, XS),
        lambda: chad.cost(prog, [0.5, XS], evm=evm),
        lambda: chad.run(prog, [0.5, XS]),
        lambda: chad.grad(PROGRAM, evm=evm)(0.5, XS[:10]),  # parse + check too
    ]


@pytest.mark.parametrize("evm", ["array", "parallel"])
def test_single_calls_leave_the_process_settings_alone(host_settings, evm):
    assert _state() == HOST_STATE
    for call in _calls(evm):
        call()
        assert _state() == HOST_STATE


@pytest.mark.parametrize("evm", ["array", "parallel"])
def test_concurrent_calls_leave_the_process_settings_alone(host_settings, evm):
    calls = _calls(evm)
    errors: list = []

    def worker(i):
        try:
            for k in range(2):
                calls[(i + k) % len(calls)]()
        except BaseException as exc:  # reported below
            errors.append(exc)

    for _trial in range(3):
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert _state() == HOST_STATE


def test_the_limit_is_raised_only_while_deep_work_runs(host_settings):
    inside = deep.run_deep(sys.getrecursionlimit)
    nested = deep.run_deep(lambda: deep.run_deep(sys.getrecursionlimit))
    assert inside == nested == deep.RECURSION_LIMIT
    assert _state() == HOST_STATE
    # deep work that fails restores the settings too
    with pytest.raises(ZeroDivisionError):
        deep.run_deep(lambda: 1 / 0)
    assert _state() == HOST_STATE


def test_the_reliable_limit_is_the_hosts_outside_deep_work(host_settings):
    started, release = threading.Event(), threading.Event()

    def work():
        started.set()
        release.wait(60)
        return deep.reliable_recursion_limit()

    out: list = []
    t = threading.Thread(target=lambda: out.append(deep.run_deep(work)))
    t.start()
    started.wait(60)
    try:
        # another thread's deep work raised the limit, but this thread cannot rely on it
        assert sys.getrecursionlimit() == deep.RECURSION_LIMIT
        assert deep.reliable_recursion_limit() == HOST_LIMIT
    finally:
        release.set()
        t.join()
    assert out == [deep.RECURSION_LIMIT]  # inside deep work it can
    assert deep.reliable_recursion_limit() == HOST_LIMIT == sys.getrecursionlimit()


def test_a_limit_set_by_the_host_during_a_call_is_kept(host_settings):
    started, release = threading.Event(), threading.Event()

    def work():
        started.set()
        release.wait(60)

    t = threading.Thread(target=deep.run_deep, args=(work,))
    t.start()
    started.wait(60)
    assert sys.getrecursionlimit() == deep.RECURSION_LIMIT
    sys.setrecursionlimit(4321)  # the host changes its mind meanwhile
    release.set()
    t.join()
    assert sys.getrecursionlimit() == 4321


# ---------------------------------------------------------------------------
# in a subprocess: crashes and resource limits


def _run_python(*parts: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the code (parts, each dedented) in a fresh interpreter that imports
    this chad (not an installed one)."""
    code = "\n".join(textwrap.dedent(p) for p in parts)
    root = str(Path(chad.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code], cwd=root, env=env,
                          capture_output=True, text=True, timeout=timeout)


HOST_RECURSION = """
    def host(n):  # each level passes through a C builtin, so it uses C stack too
        return sorted([n], key=lambda m: host(m - 1) if m else 0)

    try:
        host(10 ** 6)
    except RecursionError:
        print("RecursionError")
"""


@pytest.mark.parametrize("evm", ["array", "parallel"])
def test_host_deep_recursion_after_calls_raises_recursion_error(evm):
    proc = _run_python(f"""
        import sys, threading
        import chad
        prog = chad.load({PROGRAM!r})
        xs = {XS!r}
        chad.grad(prog, evm={evm!r})(0.5, xs)
        chad.cost(prog, [0.5, xs], evm={evm!r})
        chad.run(prog, [0.5, xs])
        threads = [threading.Thread(target=lambda: chad.grad(prog, evm={evm!r})(0.5, xs))
                   for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(sys.getrecursionlimit(), threading.stack_size())
    """, HOST_RECURSION)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.split() == ["1000", "0", "RecursionError"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS semantics")
def test_concurrent_calls_work_under_an_8_gib_address_space_limit():
    """16 concurrent gradients on each runtime, then a deep program (10,000 nested
    lets) on the parallel runtime, all with an 8 GiB address-space limit."""
    proc = _run_python(f"""
        import resource, threading
        import chad
        resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
        prog = chad.load({PROGRAM!r})
        xs = {XS!r}
        for evm in ("array", "parallel", "map"):
            # each runtime's own result (the array runtime's vectorised tanh is
            # numpy's, the others' the math module's)
            expected = chad.grad(prog, evm=evm)(0.5, xs)
            results, errors = [], []

            def work():
                try:
                    results.append(chad.grad(prog, evm=evm)(0.5, xs))
                except BaseException as exc:
                    errors.append(repr(exc))

            threads = [threading.Thread(target=work) for _ in range(16)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not errors, (evm, errors[:3])
            assert len(results) == 16
            for value, (dw, dxs) in results:
                assert value == expected[0] and dw == expected[1][0], evm
                assert list(dxs) == list(expected[1][1]), evm
        n = 10_000
        lines = ["def f(x : R) : R =", "  let x0 = x in"]
        lines += [f"  let x{{i}} = x{{i - 1}} * 1.0 + 0.5 in" for i in range(1, n)]
        lines.append(f"  x{{n - 1}}")
        deep_prog = chad.load("\\n".join(lines) + "\\n")
        _, (dx,) = chad.grad(deep_prog, evm="parallel", backend="interp")(2.0)
        assert dx == 1.0, dx
        print("ok")
    """, timeout=600)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])
    assert proc.stdout.split() == ["ok"]
