"""The Python front end's per-call cost: the programs of the compiled-gradient
benchmark (benchmarks/compiled_suite/) written as decorated Python
(compiled_suite/python_versions.py), called the JAX way, against the same
programs given as text.

    python -m benchmarks frontend            # about a minute
    python -m benchmarks frontend --quick    # a smoke run

Per program, after warm-up (the first call translates and compiles; its time is
reported separately), the time per call of

    py        the decorated function: `chad.value_and_grad(f, argnums=all)(*args)`
              (for the vector-valued quaternion program `chad.vjp(f, *args)`
              and its vjp_fn(ct)), and the primal `f(*args)`, on Python values
              (flat tuples, 2-D numpy arrays);
    same      its own translation through the text API (`chad.grad(program,
              name)` and `chad.primal(program, name)` on chad's values: pairs,
              tuples of rows), without the front end's conversions;
    text      the suite's text program through the text API, as
              bench_compiled.py calls it.

Reported: medians over interleaved rounds (each round runs every variant once,
a batch of calls of about BATCH_S of CPU time, garbage collector paused; times
are the process's CPU time, CLOCK below), and the ratios py / same (the front
end's own per-call cost: a decorated function's call plan,
chad/frontend/plans.py, converts its Python arguments straight to the compiled
code's values and the results back, where the text API checks chad's values)
and py / text, of the gradient's and the primal's medians and (in parentheses)
of the best rounds. Before timing, every variant's value and gradient are
checked against the text program's (compiled_suite/common.py `compare`).
Nothing here fails on time. Output: a table on stdout and
benchmarks/out/frontend.md (frontend-quick.md for a quick run).
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from pathlib import Path

import chad

from .compiled_suite import cases as suite_cases
from .compiled_suite import common
from .compiled_suite import python_versions

ROUNDS, QUICK_ROUNDS = 25, 3
BATCH_S, QUICK_BATCH_S = 0.02, 0.002
OUT = Path(__file__).resolve().parent / "out"
# The per-call times are the process's CPU time: the machines these run on are
# shared, and wall-clock time counts the other processes' turns too (at a load
# average of 8 on 2 cores a median of wall-clock batches moved by 3x between
# two identical variants). The first call's time is wall-clock.
CLOCK = time.process_time


def _batch(fn, k: int) -> float:
    gc.disable()
    try:
        t0 = CLOCK()
        for _ in range(k):
            fn()
        return (CLOCK() - t0) / k
    finally:
        gc.enable()


def _size(fn, target: float) -> int:
    # one call untimed: a variant's first call may build it (a decorated
    # function's first call builds its call plan), and must not size the batches
    fn()
    t0 = CLOCK()
    fn()
    one = max(CLOCK() - t0, 1e-7)
    return max(1, min(100_000, int(target / one)))


def variants(case, version):
    """{name: (grad call, primal call, unpack)}; and the first call's time."""
    f = version.fn
    t0 = time.perf_counter()
    prog, name = chad.resolve(f)
    vals = f.encode_args(version.args)
    kw = {} if case.ctg is None else {"ctg": case.ctg}
    if version.ctg is None:
        vg = chad.value_and_grad(f, argnums=tuple(range(len(version.args))))
        vg(*version.args)
        first = time.perf_counter() - t0

        def py_grad():
            return vg(*version.args)
    else:
        chad.vjp(f, *version.args)[1](version.ctg)
        first = time.perf_counter() - t0

        def py_grad():
            out, vjp_fn = chad.vjp(f, *version.args)
            return out, vjp_fn(version.ctg)
    g_same, g_text = chad.grad(prog, name), chad.grad(case.text, case.fn)
    p_same, p_text = chad.primal(prog, name), chad.primal(case.text, case.fn)
    if version.ctg is not None:  # the same API path (vjp) for the text programs too
        v_same, v_text = chad.vjp(prog, name), chad.vjp(case.text, case.fn)

        def same_grad():
            value, back = v_same(*vals)
            return value, back(case.ctg)

        def text_grad():
            value, back = v_text(*case.args)
            return value, back(case.ctg)
    else:
        def same_grad():
            return g_same(*vals, **kw)

        def text_grad():
            return g_text(*case.args, **kw)
    return {
        "py": (py_grad, lambda: f(*version.args)),
        "same": (same_grad, lambda: p_same(*vals)),
        "text": (text_grad, lambda: p_text(*case.args)),
    }, first


def check(impls) -> str | None:
    """Every variant's gradient against the text program's."""
    ref = impls["text"][0]()
    for name in ("py", "same"):
        got = impls[name][0]()
        ok, err = common.compare(got[1], ref[1])
        if not ok:
            return f"{name}: gradient differs from the text program's (error {err:.2g})"
    return None


def measure(impls, rounds: int, batch_s: float) -> dict:
    series = {(n, k): [] for n in impls for k in ("grad", "primal")}
    sizes = {(n, k): _size(impls[n][0 if k == "grad" else 1], batch_s) for n, k in series}
    keys = list(series)
    for r in range(rounds):
        order = keys[r % len(keys):] + keys[:r % len(keys)]
        for n, k in order:
            fn = impls[n][0 if k == "grad" else 1]
            series[(n, k)].append(_batch(fn, sizes[(n, k)]))
    return ({key: statistics.median(ts) for key, ts in series.items()},
            {key: min(ts) for key, ts in series.items()})


def fmt(s: float) -> str:
    for unit, scale in (("ns", 1e9), ("µs", 1e6), ("ms", 1e3)):
        if s * scale < 1000:
            return f"{s * scale:.3g} {unit}"
    return f"{s:.3g} s"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    quick = "--quick" in argv
    rounds, batch_s = (QUICK_ROUNDS, QUICK_BATCH_S) if quick else (ROUNDS, BATCH_S)
    cases = {c.key: c for c in suite_cases(quick)}
    header = ["program", "first call", "grad py", "grad same", "grad text", "py/same",
              "py/text", "primal py", "primal same", "primal text", "py/same (primal)",
              "py/text (primal)", "same program"]
    rows = []
    for version in python_versions.versions(quick):
        case = cases[version.key]
        impls, first = variants(case, version)
        problem = check(impls)
        if problem is not None:
            print(f"{case.key}: {problem}; not timed")
            rows.append([case.key, fmt(first)] + ["-"] * 10 + [problem])
            continue
        t, best = measure(impls, rounds, batch_s)
        g, p = {n: t[(n, "grad")] for n in impls}, {n: t[(n, "primal")] for n in impls}
        gb, pb = {n: best[(n, "grad")] for n in impls}, {n: best[(n, "primal")] for n in impls}

        def ratio(a, b, c, d):
            return f"{a / b:.3g} ({c / d:.3g})"

        rows.append([case.title, fmt(first), fmt(g["py"]), fmt(g["same"]), fmt(g["text"]),
                     ratio(g["py"], g["same"], gb["py"], gb["same"]),
                     ratio(g["py"], g["text"], gb["py"], gb["text"]), fmt(p["py"]),
                     fmt(p["same"]), fmt(p["text"]),
                     ratio(p["py"], p["same"], pb["py"], pb["same"]),
                     ratio(p["py"], p["text"], pb["py"], pb["text"]),
                     "yes" if version.same else "no (written differently)"])
        print(" | ".join(rows[-1]), flush=True)
    lines = ["# The Python front end: per-call cost", "",
             f"{'quick run, ' if quick else ''}{rounds} rounds; medians of per-call times "
             "(CPU time of the process); "
             "py = the decorated function called the JAX way, same = its translation through "
             "the text API on chad's values, text = the suite's text program; ratios of "
             "medians, in parentheses of best rounds (benchmarks/bench_frontend.py).", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    OUT.mkdir(exist_ok=True)
    path = OUT / ("frontend-quick.md" if quick else "frontend.md")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
