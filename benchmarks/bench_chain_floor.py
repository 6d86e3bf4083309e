"""How fast can CPython run the gradient of the 1000-let chain at all?

The compiled-gradient benchmark (bench_compiled.py) compares chad with JAX
`jit` on the chain (benchmarks/compiled_suite/chain.py). This one adds the
floor of any Python code backend beside them, in one process, interleaved
rounds: the ideal hand-written VJP fully unrolled (straight-line code, the
cosines in locals) and as a loop (as chain.numpy_impl). If chad is already at
or below these, beating JAX would need native code, not better Python
(docs/compiler.md, "What limits it"). JAX is skipped when it is not installed.
Writes benchmarks/out/chain_floor.md.
"""

from __future__ import annotations

import gc
import math
import os
import statistics
import time

from benchmarks.compiled_suite import chain, common

ROUNDS = 21
BATCH = 0.03  # seconds per tool per round
OUT = os.path.join(os.path.dirname(__file__), "out", "chain_floor.md")


def unrolled(n: int):
    """The ideal VJP as straight-line Python (only generated names and reprs)."""
    step, half = repr(chain.STEP), repr(chain.HALF)
    lines = ["def g(x0, y, _sin=math.sin, _cos=math.cos):"]
    for k in range(n):
        lines.append(f"    c{k} = _cos(x{k}); x{k + 1} = x{k} + {step} * (y + {half} * _sin(x{k}))")
    lines.append("    gx = 1.0; gy = 0.0")
    for k in range(n - 1, -1, -1):
        lines.append(f"    t = gx * {step}; gy += t; gx = gx + t * {half} * c{k}")
    lines.append(f"    return x{n}, gx, gy")
    ns = {"math": math}
    exec(compile("\n".join(lines), "<ideal chain vjp>", "exec"), ns)
    return ns["g"]


def tools(n: int) -> dict:
    import chad

    x0, y = chain.ARGS
    ideal = unrolled(n)
    out = {"chad": (lambda g=chad.grad(chain.text(n), "chain"): g(x0, y)),
           "ideal unrolled": lambda: ideal(x0, y),
           "ideal loop": chain.numpy_impl(n).grad}
    if common.available("jax"):
        out["jax"] = chain.jax_impl(n).grad
    return out


def flat(result) -> list[float]:
    """(value, (dx, dy)) or (value, dx, dy), of floats or 0-d arrays."""
    out = []
    for r in result:
        out.extend(flat(r) if isinstance(r, tuple) else [float(r)])
    return out


def check(fns: dict) -> None:
    """Every tool computes the same value and gradient before it is timed."""
    ref = flat(fns["chad"]())
    for k, f in fns.items():
        got = flat(f())
        assert len(got) == 3 and all(math.isclose(a, b, rel_tol=1e-9) for a, b in zip(got, ref)), \
            (k, got, ref)


def measure(fns: dict) -> dict:
    times = {k: [] for k in fns}
    for _ in range(ROUNDS):
        for k, f in fns.items():
            gc.disable()
            start, calls = time.perf_counter(), 0
            while time.perf_counter() - start < BATCH:
                f()
                calls += 1
            times[k].append((time.perf_counter() - start) / calls)
            gc.enable()
    return times


def main() -> None:
    n = chain.N
    fns = tools(n)
    check(fns)
    load = os.getloadavg()[0]
    times = measure(fns)
    med = {k: statistics.median(v) for k, v in times.items()}
    rows = [f"| {k} | {med[k] * 1e6:.0f} µs [{min(v) * 1e6:.0f}, {max(v) * 1e6:.0f}] | "
            f"{med['chad'] / med[k]:.2f} |" for k, v in times.items()]
    text = "\n".join([
        "# The 1000-let chain: chad against the floor of Python code",
        "",
        f"Written by `python -m benchmarks chain_floor` ({time.strftime('%Y-%m-%d %H:%M')}, "
        f"load average {load:.1f} at the start). {ROUNDS} interleaved rounds of "
        f"{BATCH * 1000:.0f} ms per tool; medians [min, max] of the per-call gradient time.",
        "",
        "| tool | gradient per call | chad / tool |",
        "|---|---|---|",
        *rows, ""])
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write(text)
    print(text)
