"""Memory of the counting path (issue "A good citizen in someone else's process",
point 9): the peak memory of `chad.grad(prog)(2.0)` (transform, forward pass and
backward pass of the instrumented evaluator, array EVM) on

* `def f(x : R) : R = sum (build n (\\i -> x * toreal i))` at n = 10^4, 10^5, 10^6;
* a chain of n nested lets `let x{i} = x{i-1} * 1.0 + 0.5 in ...` (the program of
  tests/test_deep.py) at n = 10^4, 10^5.

Every case runs in a fresh subprocess (`python -m benchmarks.bench_memory --case
KIND N`), so that no case reuses memory another one freed. There the program is
parsed and checked first (not measured), then:

* RSS: the kernel's high-water mark of the resident set is reset (Linux:
  `/proc/self/clear_refs`), grad runs, and the peak is VmHWM minus the resident
  size just before (without /proc, ru_maxrss minus that size, which the load's
  own peak may mask);
* tracemalloc: grad runs again under tracemalloc and its peak is reported; only
  for the builds at n <= 10^5. For the let chains tracemalloc is unusable: on
  CPython 3.11 it walks the whole Python stack at every allocation, so its cost
  is quadratic in the nesting depth (10^3 lets already take half a minute); at
  n = 10^6 it would double the benchmark's two minutes.

Columns: the peak in MB, per element (build) or per let, and as a multiple of the
inputs' own size: for the build, the n reals it builds (8 n bytes: the only data
of size n in the program); for the let chain, its program text (UTF-8 bytes).
The step counts are printed too: the memory work must not change them.
"""

from __future__ import annotations

import gc
import json
import os
import pathlib
import resource
import subprocess
import sys
import time

CASES = (("build", 10_000), ("build", 100_000), ("build", 1_000_000),
         ("lets", 10_000), ("lets", 100_000))
TRACE_MAX_BUILD = 100_000  # tracemalloc only for builds up to this size
BIG_STACK = 512 * 1024 * 1024  # the let chains' big-stack threads (see measure)
ROOT = pathlib.Path(__file__).resolve().parent.parent


def build_program(n: int) -> str:
    return f"def f(x : R) : R = sum (build {n} (\\i -> x * toreal i))\n"


def lets_program(n: int) -> str:
    lines = ["def f(x : R) : R =", "  let x0 = x in"]
    lines += [f"  let x{i} = x{i - 1} * 1.0 + 0.5 in" for i in range(1, n)]
    lines.append(f"  x{n - 1}")
    return "\n".join(lines) + "\n"


PROGRAMS = {"build": build_program, "lets": lets_program}


def input_bytes(kind: str, n: int, src: str) -> int:
    """The inputs' own size: 8 n for a build of n reals, the text for the lets."""
    return 8 * n if kind == "build" else len(src.encode())


# ----------------------------------------------------------------- resident set


def _status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    return out


def _reset_peak() -> bool:
    """Reset the kernel's resident high-water mark (VmHWM); False if impossible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def rss_peak(fn) -> tuple[int, object]:
    """(peak resident bytes above the resident size before fn(), fn())."""
    gc.collect()
    if _reset_peak():
        before = _status()["VmRSS"]
        result = fn()
        return _status()["VmHWM"] - before, result
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result = fn()
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before, result


def traced_peak(fn) -> int:
    """tracemalloc's peak (bytes) during fn()."""
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# ----------------------------------------------------------------- one case


def measure(kind: str, n: int, trace: bool) -> dict:
    """Run in a fresh process: load the program, then measure grad."""
    import chad
    import chad.deep

    if kind == "lets":
        # The transform of 10^5 nested lets overflows the default big stack
        # (chad/deep.py, 64 MiB) with a segmentation fault: give it 512 MiB.
        chad.deep.STACK_BYTES = max(chad.deep.STACK_BYTES, BIG_STACK)
    src = PROGRAMS[kind](n)
    prog = chad.load(src)

    def gradient():
        return chad.grad(prog)(2.0)

    t0 = time.perf_counter()
    rss, (value, grads) = rss_peak(gradient)
    seconds = time.perf_counter() - t0
    steps = chad.cost(prog, [2.0]).gradient_steps if n <= 10_000 else None
    out = {"kind": kind, "n": n, "input": input_bytes(kind, n, src), "rss": rss,
           "seconds": seconds, "value": value, "grad": list(grads), "steps": steps,
           "traced": traced_peak(gradient) if trace else None}
    return out


def run_case(kind: str, n: int) -> dict:
    trace = kind == "build" and n <= TRACE_MAX_BUILD
    cmd = [sys.executable, "-m", "benchmarks.bench_memory", "--case", kind, str(n)]
    if trace:
        cmd.append("--trace")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} {n} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _mb(x: int) -> str:
    return f"{x / 1e6:.1f}"


def main() -> None:
    head = ("case", "n", "RSS peak MB", "B/elem", "x input", "traced MB", "B/elem",
            "x input", "s")
    rows = []
    for kind, n in CASES:
        r = run_case(kind, n)
        tr = r["traced"]
        rows.append((kind, f"{n:,}", _mb(r["rss"]), f"{r['rss'] / n:.0f}",
                     f"{r['rss'] / r['input']:.1f}",
                     "-" if tr is None else _mb(tr), "-" if tr is None else f"{tr / n:.0f}",
                     "-" if tr is None else f"{tr / r['input']:.1f}", f"{r['seconds']:.1f}"))
        print(f"  {kind} n={n:,}: value {r['value']}, gradient {r['grad']}"
              + ("" if r["steps"] is None else f", gradient steps {r['steps']}"), flush=True)
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    print("  ".join(h.rjust(w) for h, w in zip(head, widths)))
    for row in rows:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
    print("(x input: 8 n bytes for the build, the program text for the lets; "
          "traced: tracemalloc, builds n <= 10^5 only; s: the RSS run)")


def _child(argv: list[str]) -> None:
    kind, n = argv[argv.index("--case") + 1], int(argv[argv.index("--case") + 2])
    print(json.dumps(measure(kind, n, "--trace" in argv)))


if __name__ == "__main__":
    if "--case" in sys.argv:
        _child(sys.argv)
    else:
        main()
