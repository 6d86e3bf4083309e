"""The parallel runtime against the array runtime on two independent heavy
branches (examples/two_branches.chad: a map over a and a map over b, summed),
compiled gradients, n = 10^5, 10^6 and 4 * 10^6 elements per array
(docs/runtimes.md, "Parallel compiled code").

Both runtimes run the same inlined, vectorised code; the parallel one runs the
two forward maps and the two reverse passes on two threads (numpy releases the
GIL in its loops). Before timing, both gradients are checked to be identical,
bit for bit, at every size, and the parallel one to have forked.

Per size, the two runtimes are timed in turn within a round (one call each,
alternating which goes first), rounds interleaved in one process; the figure is
the median over the rounds with the spread (min .. max), and the ratio is
array time / parallel time (medians; > 1: the parallel runtime is faster).
The machine's other load shows in the spread: a ratio near 2 needs both cores
free. A control, timed in the same rounds, runs the two branches' primal
numpy work one after the other and on two threads: its ratio is what two
threads can gain at the load of the moment. Results: benchmarks/out/parallel.md. Nothing here fails on time.

The whole run is made twice: in this process, with the C library's malloc as
configured, and in a child process whose glibc malloc keeps freed memory
(TUNED_MALLOC; and numpy asks for no transparent huge pages): numpy
allocates its temporaries afresh for every operation,
and on this kind of machine the page faults of fresh memory (and the unmapping
of freed blocks, which every thread of the process must take part in) can
cost more than the arithmetic; both runtimes run under the same setting.

`--quick`: n = 10^5 and 10^6 only, fewer rounds. `--no-tuned`: the first run only.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import chad
from chad.compile import parallel_support

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "examples" / "two_branches.chad"
OUT = Path(__file__).resolve().parent / "out" / "parallel.md"
SIZES = (10 ** 5, 10 ** 6, 4 * 10 ** 6)
ROUNDS = {10 ** 5: 41, 10 ** 6: 21, 4 * 10 ** 6: 11}


def _bits(result) -> tuple:
    value, grads = result
    return (float(value).hex(),) + tuple(np.asarray(g, dtype=np.float64).tobytes() for g in grads)


def inputs(n: int):
    rng = np.random.default_rng(n)
    return rng.standard_normal(n), rng.standard_normal(n)


def check(grads: dict, n: int) -> int:
    """Both runtimes' gradients identical at n; the number of forks the
    parallel one decided."""
    a, b = inputs(n)
    want = _bits(grads["array"](a, b))
    parallel_support.stats.reset()
    got = _bits(grads["parallel"](a, b))
    forks = parallel_support.stats.decided
    if got != want:
        raise AssertionError(f"n = {n}: the parallel gradient differs from the array one")
    return forks


def _branch_a(x):
    return np.sum(np.exp(np.sin(x)) * x)


def _branch_b(y):
    return np.sum(np.tanh(y) * np.cos(y))


def control_functions() -> dict:
    """The machine's ceiling at this moment: the two branches' primal numpy
    work one after the other, and on two threads (the pool of the parallel
    runtime's forks): their ratio is what two threads gain at the current load."""
    pool = parallel_support._pool()

    def sequential(a, b):
        return _branch_a(a) + _branch_b(b)

    def threads(a, b):
        fut = pool.submit(_branch_b, b)
        ra = _branch_a(a)
        return ra + fut.result()

    return {"numpy, sequential": sequential, "numpy, two threads": threads}


def measure(grads: dict, n: int, rounds: int) -> dict:
    a, b = inputs(n)
    for g in grads.values():  # warm up: compiled, caches and pool filled
        g(a, b)
    times: dict[str, list] = {name: [] for name in grads}
    order = list(grads)
    for r in range(rounds):
        for name in (order if r % 2 == 0 else order[::-1]):
            g = grads[name]
            t = time.perf_counter()
            g(a, b)
            times[name].append(time.perf_counter() - t)
    return times


def _ms(xs) -> str:
    return f"{statistics.median(xs) * 1e3:.1f} ({min(xs) * 1e3:.1f} .. {max(xs) * 1e3:.1f})"


# glibc's malloc told to keep freed memory for reuse (one arena for all
# threads, no mmap/munmap of large blocks, no trimming): numpy's temporaries of
# 0.8 to 32 MB then cost no page faults after the first call; and numpy not
# asking for transparent huge pages (whose faults may compact memory first)
TUNED_MALLOC = {"MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": str(1 << 30),
                "MALLOC_TRIM_THRESHOLD_": str(1 << 32), "MALLOC_TOP_PAD_": str(1 << 27),
                "NUMPY_MADVISE_HUGEPAGE": "0"}


def _cpu_ticks():
    """(idle, total) jiffies of all CPUs (Linux), or None."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    return fields[3], sum(fields)


def run(sizes, quick: bool) -> list[dict]:
    prog = chad.load(PROGRAM.read_text())
    grads = {"array": chad.grad(prog, evm="array"), "parallel": chad.grad(prog, evm="parallel")}
    grads.update(control_functions())
    rows = []
    for n in sizes:
        forks = check(grads, n)
        if forks == 0:
            raise AssertionError(f"n = {n}: the parallel runtime did not fork")
        rounds = max(5, ROUNDS[n] // (3 if quick else 1))
        before = _cpu_ticks()
        times = measure(grads, n, rounds)
        after = _cpu_ticks()
        idle = (100.0 * (after[0] - before[0]) / max(1, after[1] - before[1])
                if before and after else float("nan"))
        rows.append({"n": n, "times": times, "forks": forks, "rounds": rounds, "idle": idle})
        print(f"n = {n:>8}: {_summary(rows[-1])}", flush=True)
    return rows


def _ratio(times, a, b, pick=statistics.median) -> float:
    return pick(times[a]) / pick(times[b])


def _summary(row) -> str:
    t = row["times"]
    return (f"array {_ms(t['array'])} ms, parallel {_ms(t['parallel'])} ms, ratio "
            f"{_ratio(t, 'array', 'parallel'):.2f} (of the minima "
            f"{_ratio(t, 'array', 'parallel', min):.2f}), {row['forks']} forks per call; control"
            f" {_ratio(t, 'numpy, sequential', 'numpy, two threads'):.2f}; CPUs idle"
            f" {row['idle']:.0f}%")


def main(argv: list[str] | None = None) -> None:
    argv = argv or []
    quick = "--quick" in argv
    sizes = SIZES[:2] if quick else SIZES
    if "--child" in argv:  # the tuned-malloc run, in its own process
        print(json.dumps(run(sizes, quick)))
        return
    print("default malloc:")
    sections = [("glibc malloc as configured by default", run(sizes, quick))]
    if "--no-tuned" not in argv:
        print("malloc keeping freed memory, no huge pages (a child process):", flush=True)
        env = dict(os.environ, **TUNED_MALLOC)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        out = subprocess.run([sys.executable, "-m", "benchmarks.bench_parallel", "--child"]
                             + (["--quick"] if quick else []), env=env, cwd=str(ROOT),
                             check=True, capture_output=True, text=True).stdout
        lines = out.strip().splitlines()
        for line in lines[:-1]:
            print(line)
        sections.append(("glibc malloc keeping freed memory, numpy without huge pages: "
                         + ", ".join(f"{k}={v}" for k, v in TUNED_MALLOC.items()),
                         json.loads(lines[-1])))
    write(sections)


def write(sections) -> None:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        "# Parallel runtime: two independent heavy branches",
        "",
        "Generated by `python -m benchmarks parallel` (benchmarks/bench_parallel.py).",
        "The compiled gradient of examples/two_branches.chad,",
        "`sum (map (\\x -> exp (sin x) * x) a) + sum (map (\\y -> tanh y * cos y) b)`,",
        "with |a| = |b| = n, on the array runtime and on the parallel runtime (the same",
        "inlined, vectorised code, the two maps' forward passes and reverse passes each",
        "run on two threads). Both gradients checked identical, bit for bit, before timing.",
        "Times in ms: median over interleaved rounds (min .. max); ratio = array / parallel",
        "(medians), and of the minima. Control: the two branches' primal numpy work",
        "(`exp (sin x) * x` and `tanh y * cos y`, summed) one after the other and on two",
        "threads, timed in the same rounds: its ratio (sequential / two threads) is what",
        "two threads could gain at the machine's load of the moment. CPUs idle: the",
        "share of the machine's CPU time that was idle while the rounds ran (the",
        "benchmark's own threads included: with both cores free, a two-thread run",
        "leaves little idle).",
        f"CPUs: {os.cpu_count()}; load average (1 min) at the end: {load:.2f}.",
    ]
    for title, rows in sections:
        lines += [
            "",
            f"## {title}",
            "",
            "| n | rounds | array ms | parallel ms | ratio (medians) | ratio (minima) |"
            " forks per call | control | CPUs idle |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for row in rows:
            t = row["times"]
            lines.append(
                f"| {row['n']:,} | {row['rounds']} | {_ms(t['array'])} | {_ms(t['parallel'])} |"
                f" {_ratio(t, 'array', 'parallel'):.2f} |"
                f" {_ratio(t, 'array', 'parallel', min):.2f} | {row['forks']} |"
                f" {_ratio(t, 'numpy, sequential', 'numpy, two threads'):.2f} |"
                f" {row['idle']:.0f}% |")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
