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

`--quick`: n = 10^5 and 10^6 only, fewer rounds.
"""

from __future__ import annotations

import os
import statistics
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


def main(argv: list[str] | None = None) -> None:
    argv = argv or []
    quick = "--quick" in argv
    sizes = SIZES[:2] if quick else SIZES
    prog = chad.load(PROGRAM.read_text())
    grads = {"array": chad.grad(prog, evm="array"), "parallel": chad.grad(prog, evm="parallel")}
    grads.update(control_functions())
    rows = []
    for n in sizes:
        forks = check(grads, n)
        if forks == 0:
            raise AssertionError(f"n = {n}: the parallel runtime did not fork")
        rounds = max(5, ROUNDS[n] // (3 if quick else 1))
        times = measure(grads, n, rounds)
        ratio = statistics.median(times["array"]) / statistics.median(times["parallel"])
        best = min(times["array"]) / min(times["parallel"])
        ceiling = (statistics.median(times["numpy, sequential"])
                   / statistics.median(times["numpy, two threads"]))
        rows.append((n, times, ratio, best, forks, rounds, ceiling))
        print(f"n = {n:>8}: array {_ms(times['array'])} ms, parallel {_ms(times['parallel'])} ms,"
              f" ratio {ratio:.2f} (of the minima {best:.2f}), {forks} forks per call;"
              f" numpy two threads / sequential ratio {ceiling:.2f}", flush=True)
    write(rows)


def write(rows) -> None:
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
        "threads, timed in the same rounds: its ratio is what two threads could gain at",
        "the machine's load of the moment.",
        f"CPUs: {os.cpu_count()}; load average (1 min) at the end: {load:.2f}.",
        "",
        "| n | rounds | array ms | parallel ms | ratio (medians) | ratio (minima) | forks per call"
        " | control: numpy sequential / two threads |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n, times, ratio, best, forks, rounds, ceiling in rows:
        lines.append(f"| {n:,} | {rounds} | {_ms(times['array'])} | {_ms(times['parallel'])} |"
                     f" {ratio:.2f} | {best:.2f} | {forks} | {ceiling:.2f} |")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
