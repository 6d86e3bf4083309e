"""Arrays (docs/arrays.md): wall-clock scaling of array gradients, and gradient vs primal.

1. For `build n (\\i -> a ! i * 2.0)`, a fold of squares, a loop reading `a` at
   computed indices under a branch (BOne path) and one reading it through an
   integer array (gathers): the gradient's wall time (forward + backward pass) at
   n = 2000 divided by that at n = 1000, per runtime (goal: in [1.8, 2.2], i.e.
   linear, where tape-based frameworks that materialise one dense cotangent per
   read go quadratic), next to the step-count ratio.
2. The dot product at n = 10^5: wall time of the primal (the source evaluator)
   and of the gradient, per runtime.

Times are the minimum over repeats and ratios the median of back-to-back pairs
(n = 1000 then n = 2000), with the garbage collector paused during each
measurement; the CPU-time ratio (process time, all threads)
is printed next to the wall-clock one because on a loaded machine wall time is
mostly waiting. Nothing here fails on wall time.
"""

from __future__ import annotations

import gc
import math
import statistics
import time

import numpy as np

import chad
from chad.costmodel.measure import prepare

RUNTIMES = ("map", "array", "parallel")
SIZES = (1000, 2000)
REPEATS = 11
DOT_N = 100_000

from .scaling_programs import PROGRAMS  # noqa: E402  (shared with the scaling test)


class Case:
    """A program at one size, made ready once (chad.costmodel.measure.prepare: parsed,
    arguments and cotangent decoded, gradient term built)."""

    def __init__(self, src, args, ctg):
        self.prepared = prepare(chad.load(src), args, ctg)

    def gradient(self, evm):
        """(wall seconds, CPU seconds, steps) of the gradient term (forward and
        backward pass) on the EVM (created, and its thread pool started, outside
        the measurement)."""
        gc.collect()
        gc.disable()
        try:
            t0, c0 = time.perf_counter(), time.process_time()
            _result, steps = self.prepared.gradient(evm)
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
        finally:
            gc.enable()
        return dt, dc, steps

    def primal(self):
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            self.prepared.primal()
            return time.perf_counter() - t0
        finally:
            gc.enable()


def table(rows, header):
    cols = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cols) for i in range(len(header))]
    for j, r in enumerate(cols):
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))
        if j == 0:
            print("  ".join("-" * w for w in widths))


def bench_scaling() -> dict:
    figures = {}
    rows = []
    for name, (src, make) in PROGRAMS.items():
        cases = {n: Case(src, *make(n)) for n in SIZES}
        for rt in RUNTIMES:
            evm = chad.make_evm(rt)
            for n in SIZES:  # warm up (and start the parallel runtime's pool)
                cases[n].gradient(evm)
            best = {n: math.inf for n in SIZES}
            wall_ratios, cpu_ratios = [], []
            steps = {}
            for _ in range(REPEATS):
                # the two sizes back to back, so that both see the same load;
                # the ratio is the median of these paired ratios
                pair = {}
                for n in SIZES:
                    dt, dc, s = cases[n].gradient(evm)
                    pair[n] = (dt, dc)
                    best[n] = min(best[n], dt)
                    steps[n] = s
                wall_ratios.append(pair[SIZES[1]][0] / pair[SIZES[0]][0])
                cpu_ratios.append(pair[SIZES[1]][1] / pair[SIZES[0]][1])
            evm.close()
            ratio = statistics.median(wall_ratios)
            cratio = statistics.median(cpu_ratios)
            sratio = steps[SIZES[1]] / steps[SIZES[0]]
            figures[(name, rt)] = (best[SIZES[0]], best[SIZES[1]], ratio, cratio, sratio)
            rows.append([name, rt, f"{best[SIZES[0]]:.3f}", f"{best[SIZES[1]]:.3f}",
                         f"{ratio:.2f}", "yes" if 1.8 <= ratio <= 2.2 else "NO",
                         f"{cratio:.2f}", f"{sratio:.3f}"])
    print(f"gradient time (s), n = {SIZES[0]} and {SIZES[1]}: best of {REPEATS}; ratios: "
          f"median of {REPEATS} back-to-back pairs (load average now: {_load()}):")
    table(rows, ["program", "runtime", f"wall({SIZES[0]})", f"wall({SIZES[1]})", "wall ratio",
                 "in [1.8, 2.2]", "cpu ratio", "steps ratio"])
    return figures


def bench_dot(n: int = DOT_N) -> dict:
    with open(_example("dot.chad")) as f:
        src = f.read()
    rng = np.random.default_rng(0)
    case = Case(src, [rng.normal(size=n), rng.normal(size=n)], 1.0)
    tp = case.primal()
    primal_steps = case.prepared.primal_steps
    rows = []
    figures = {"primal": tp}
    for rt in RUNTIMES:
        evm = chad.make_evm(rt).start()  # start the pool outside the measurement
        tg, _cpu, steps = case.gradient(evm)
        evm.close()
        figures[rt] = tg
        rows.append([rt, f"{tp:.2f}", f"{tg:.2f}", f"{tg / tp:.1f}", primal_steps, steps,
                     f"{steps / primal_steps:.1f}"])
    print(f"\ndot product, n = {n}: wall time (s) of the primal and of the gradient")
    table(rows, ["runtime", "primal", "gradient", "ratio", "primal steps", "gradient steps",
                 "steps ratio"])
    return figures


def _load() -> str:
    try:
        import os

        return "%.1f" % os.getloadavg()[0]
    except OSError:  # pragma: no cover
        return "?"


def _example(name: str) -> str:
    from pathlib import Path

    return str(Path(__file__).resolve().parent.parent / "examples" / name)


def main() -> None:
    bench_scaling()
    bench_dot()


if __name__ == "__main__":
    main()
