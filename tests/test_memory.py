"""Memory of the counting path (benchmarks/bench_memory.py measures it at larger
sizes).

Not timing tests: each bounds the peak memory of a gradient per element (or per
let) by a fixed number of bytes, well above what the evaluator needs now and well
below what it needed before (a dict per closure, a Python closure, cells and a
float per element of sequenceScoped, three Python frames per let):

* `sum (build n (\\i -> x * toreal i))`: tracemalloc's peak of chad.grad at
  n = 10^4 (before: about 2430 bytes per element; now about 950), and the
  resident peak of chad.grad at n = 10^5 in a fresh process (before: about 2600;
  now about 1050);
* a chain of 10^4 nested lets: the resident peak of the evaluation (forward and
  backward pass, after the transform) in a fresh process (before: about 4700
  bytes per let; now about 2900). tracemalloc cannot measure it: on CPython 3.11
  it walks the whole Python stack at every allocation, quadratic in the depth.

The resident peaks need Linux's /proc/self/clear_refs (else skipped); their two
processes run side by side.
"""

from __future__ import annotations

import tracemalloc

import pytest

import chad
from benchmarks.bench_memory import build_program, can_reset_peak, finish_case, start_case

BUILD_TRACED_N = 10_000
BUILD_TRACED_BYTES = 1500    # per element, tracemalloc
BUILD_RSS_N = 100_000
BUILD_RSS_BYTES = 1600       # per element, resident, chad.grad
LETS_N = 10_000
LETS_EVAL_BYTES = 3800       # per let, resident, forward + backward pass


def test_build_gradient_traced_peak_per_element():
    n = BUILD_TRACED_N
    prog = chad.load(build_program(n))
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        value, (dx,) = chad.grad(prog, backend="interp")(2.0)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert dx == pytest.approx(n * (n - 1) / 2)
    assert peak / n < BUILD_TRACED_BYTES, f"{peak / n:.0f} bytes per element"


@pytest.mark.skipif(not can_reset_peak(), reason="needs /proc/self/clear_refs (Linux)")
def test_build_and_let_chain_resident_peaks():
    build = start_case("build", BUILD_RSS_N)
    lets = start_case("lets", LETS_N)
    b, r = finish_case(build), finish_case(lets)
    n, m = BUILD_RSS_N, LETS_N
    assert b["grad"] == [pytest.approx(n * (n - 1) / 2)]
    assert r["value"] == pytest.approx(2.0 + 0.5 * (m - 1)) and r["grad"] == [1.0]
    over = []
    if b["rss"] / n >= BUILD_RSS_BYTES:
        over.append(f"build {n}: {b['rss'] / n:.0f} bytes per element (limit {BUILD_RSS_BYTES})")
    if r["eval"] / m >= LETS_EVAL_BYTES:
        over.append(f"{m} lets: {r['eval'] / m:.0f} bytes per let (limit {LETS_EVAL_BYTES})")
    assert not over, "; ".join(over)
