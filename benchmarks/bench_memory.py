"""Memory of the counting path: the peak memory of `chad.grad` (transform, then forward and backward
pass of the instrumented evaluator on the array EVM) on

* `def f(x : R) : R = sum (build n (\\i -> x * toreal i))` at n = 10^4, 10^5, 10^6;
* a chain of n nested lets, `let x{i} = x{i-1} * 1.0 + 0.5 in ...` (the program
  of tests/test_deep.py), at n = 10^4, 10^5.

Every case runs in a fresh subprocess (`python -m benchmarks.bench_memory --case
KIND N`), so that no case reuses memory another one freed. There the program is
parsed and checked (not measured), then, with the resident set's high-water mark
reset before each step (Linux: /proc/self/clear_refs; elsewhere ru_maxrss, which
earlier steps may mask):

* `g = chad.grad(prog)`: the transform (its peak, and what it keeps: the
  derivative program);
* `g(2.0)`: the evaluation, forward and backward (`eval` columns);
* the grad peak is max(transform peak, transform kept + evaluation peak);
* tracemalloc: the whole `chad.grad(prog)(2.0)` again, under tracemalloc; only for
  the builds at n <= 10^5. For the let chains tracemalloc is unusable: on CPython
  3.11 it walks the whole Python stack at every allocation, so its cost is
  quadratic in the nesting depth (10^3 lets already take half a minute); at
  n = 10^6 it would double the benchmark's time.

Sizes are per element (build) or per let, and as a multiple of the inputs' own
size: for the build, the n reals it builds (8 n bytes, the only data of size n in
the program); for the let chain, its program text (UTF-8 bytes). `cpu s` is the
child's CPU time. The build at 10^4 also prints its gradient step count, which
the memory work must not change (tests/test_golden.py and the others check the
counts exactly). The let chain of 10^5 runs in chad's default big-stack threads
(chad/deep.py, 256 MiB).

Measured on the 2-core development machine, bytes per element or per let, before
and after the evaluator's memory work (after/before in brackets):

    case          grad peak              eval peak             traced
    build 10^4     2566 -> 1008 (0.39)    2565 -> 1008 (0.39)   2425 -> 953 (0.39)
    build 10^5     2608 -> 1046 (0.40)    2608 -> 1046 (0.40)   2424 -> 952 (0.39)
    build 10^6     2612 -> 1051 (0.40)    2612 -> 1051 (0.40)      -
    lets 10^4     17256 -> 15481 (0.90)   4690 -> 2913 (0.62)      -
    lets 10^5     17382 -> 15596 (0.90)   4770 -> 2983 (0.63)      -

As multiples of the inputs' own size (grad peak): the builds 321-327 -> 126-131,
the let chains 496 -> 445 (10^4) and 473 -> 424 (10^5). The let chains' grad
peak is mostly the derivative program that the transform
builds and keeps during the evaluation (the `transform kept` column, about
12.6 KB per let), which the evaluator does not own.
"""

from __future__ import annotations

import gc
import json
import os
import pathlib
import resource
import subprocess
import sys

CASES = (("build", 10_000), ("build", 100_000), ("build", 1_000_000),
         ("lets", 10_000), ("lets", 100_000))
TRACE_MAX_BUILD = 100_000  # tracemalloc only for builds up to this size
STEPS_MAX = 10_000         # gradient step counts printed for builds up to this size
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


def can_reset_peak() -> bool:
    """Whether the resident high-water mark can be reset (Linux /proc)."""
    return _reset_peak()


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def resident_peak(fn) -> tuple[int, int, object]:
    """(peak resident bytes above the resident size before fn(), resident bytes
    kept after it, fn()). Without /proc: ru_maxrss, kept 0."""
    gc.collect()
    if _reset_peak():
        before = _status()["VmRSS"]
        result = fn()
        after = _status()
        return after["VmHWM"] - before, after["VmRSS"] - before, result
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result = fn()
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before, 0, result


def traced_peak(fn) -> int:
    """tracemalloc's peak (bytes) during fn(), above what was allocated before."""
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


# ----------------------------------------------------------------- one case


def measure(kind: str, n: int, trace: bool = False, steps: bool = False) -> dict:
    """In a fresh process: load the program, then measure chad.grad on it."""
    import chad

    src = PROGRAMS[kind](n)
    prog = chad.load(src)
    cpu0 = _cpu()
    t_peak, t_kept, g = resident_peak(lambda: chad.grad(prog, backend="interp"))
    e_peak, _, (value, grads) = resident_peak(lambda: g(2.0))
    cpu = _cpu() - cpu0
    out = {"kind": kind, "n": n, "input": input_bytes(kind, n, src),
           "rss": max(t_peak, t_kept + e_peak), "transform_peak": t_peak,
           "transform_kept": t_kept, "eval": e_peak, "cpu": cpu,
           "value": value, "grad": list(grads)}
    out["steps"] = chad.cost(prog, [2.0]).gradient_steps if steps else None
    out["traced"] = traced_peak(lambda: chad.grad(prog, backend="interp")(2.0)) if trace else None
    return out


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def start_case(kind: str, n: int, trace: bool = False, steps: bool = False):
    """Start measure(kind, n, ...) in a fresh subprocess; finish_case waits for it."""
    cmd = [sys.executable, "-m", "benchmarks.bench_memory", "--case", kind, str(n)]
    cmd += ["--trace"] * trace + ["--steps"] * steps
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish_case(proc) -> dict:
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(proc.args[2:])} failed (exit {proc.returncode}):\n"
                           f"{err[-2000:]}")
    return json.loads(out.strip().splitlines()[-1])


def run_case(kind: str, n: int, trace: bool = False, steps: bool = False) -> dict:
    """measure(kind, n, ...) in a fresh subprocess."""
    return finish_case(start_case(kind, n, trace, steps))


def main() -> None:
    head = ("case", "n", "grad peak MB", "B/elem", "x input", "transform kept B/elem",
            "eval B/elem", "traced B/elem", "x input", "cpu s")
    rows = []
    for kind, n in CASES:
        r = run_case(kind, n, trace=kind == "build" and n <= TRACE_MAX_BUILD,
                     steps=kind == "build" and n <= STEPS_MAX)
        tr = r["traced"]
        rows.append((kind, f"{n:,}", f"{r['rss'] / 1e6:.1f}", f"{r['rss'] / n:.0f}",
                     f"{r['rss'] / r['input']:.1f}", f"{r['transform_kept'] / n:.0f}",
                     f"{r['eval'] / n:.0f}", "-" if tr is None else f"{tr / n:.0f}",
                     "-" if tr is None else f"{tr / r['input']:.1f}", f"{r['cpu']:.1f}"))
        print(f"  {kind} n={n:,}: value {r['value']}, gradient {r['grad']}"
              + ("" if r["steps"] is None else f", gradient steps {r['steps']}"), flush=True)
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    print("  ".join(h.rjust(w) for h, w in zip(head, widths)))
    for row in rows:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
    print("(x input: 8 n bytes for the build, the program text for the lets; eval: "
          "the forward and backward passes; traced: tracemalloc, builds n <= 10^5)")


def _child(argv: list[str]) -> None:
    i = argv.index("--case")
    kind, n = argv[i + 1], int(argv[i + 2])
    print(json.dumps(measure(kind, n, "--trace" in argv, "--steps" in argv)))


if __name__ == "__main__":
    if "--case" in sys.argv:
        _child(sys.argv)
    else:
        main()
