"""chad's compiled gradients against peers: PyTorch eager (CPU), JAX `jit` (CPU),
HIPS autograd and a hand-written Python/numpy vector-Jacobian product, on five
programs (benchmarks/compiled_suite/): `x * y + sin x`, rotating a vector by a
quaternion (the `frotvecquat` benchmark of tomsmeding/ad-dualrev-th), a
1000-let scalar chain, a 10-20-5 MLP with softmax cross-entropy, and the dot
product at n = 1000.

    python -m benchmarks compiled            # about 2 minutes
    python -m benchmarks.bench_compiled --quick     # a smoke run, a few seconds
    CHAD_BENCH_QUICK=1 python -m benchmarks compiled  # the same, through the driver

Per program and tool: the time per call of the gradient (value and gradient with
respect to every input) and of the primal, after warm-up. Every tool's gradient
and value are first checked against chad's interpreter (to 1e-9, relative to the
largest entry), so no tool is timed computing a different function; a tool that
disagrees is reported and not timed. Then the tools are interleaved round by
round (each round: every tool and kind once, a batch of calls of about
`BATCH_S` each, the order rotated between rounds so that none is always first),
in one process, with the garbage collector paused during each batch (as
benchmarks/bench_arrays.py does). Reported: the median over rounds and the
interquartile range, gradient / primal per tool, and chad / peer per peer.

Set-ups: PyTorch float64 tensors, eager, one intra-op thread
(torch.set_num_threads(1): the programs are tiny and the two cores shared);
gradients by torch.autograd.grad, primal under torch.no_grad(). JAX with
float64 (jax_enable_x64), `jax.jit` of `jax.value_and_grad` (`jax.vjp` for the
vector-valued quaternion program), inputs already device arrays, every result
waited for (block_until_ready); its first call (trace and XLA compile) is
reported separately. autograd: `autograd.value_and_grad` (`make_vjp` for the
quaternion), which is `autograd.grad` returning the value too, as every other
tool does. chad: `chad.grad(text, fn, backend=...)` and `chad.primal`, called
on Python floats, tuples and numpy arrays; its compile time is that of an empty
cache: `chad.grad(...)` plus its first call. A program whose compile time may
be long (the chain) is compiled first in a child process with a time limit
(`COMPILE_LIMIT_S`), so that a slow compiler cannot stall the run; past the
limit chad is reported as not timed there. The interpreter
(`backend="interp"`) is timed for reference where one gradient call takes less
than `INTERP_CAP_S`.

The goals checked (a verdict per goal, with the figure): the compiled gradient
at least 10x faster than PyTorch eager and faster per call than JAX jit on the
three scalar programs; compiled gradient / compiled primal at most 4 (median
over the suite); a gradient call of `x * y + sin x` under 10 microseconds; the
compile time of the 1000-let chain under 1 s.

Output: a table on stdout, benchmarks/out/compiled.md (markdown) and
benchmarks/out/compiled.png (per program, per-call times on a log scale);
a quick run writes compiled-quick.md and compiled-quick.png instead. A peer
that is not installed (`pip install -e '.[bench]'`) is skipped with a message.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .compiled_suite import cases as suite_cases
from .compiled_suite import common

# The backend measured as "chad" (also --backend). "interp" measures the
# interpreter; if "compiled" fails on x * y + sin x the benchmark says so and
# measures the interpreter.
CHAD_BACKEND = "compiled"

ROUNDS, QUICK_ROUNDS = 21, 3
BATCH_S, QUICK_BATCH_S = 0.025, 0.002    # target wall time of one batch of calls
INTERP_CAP_S, QUICK_INTERP_CAP_S = 0.1, 0.02
CASE_BUDGET_S, QUICK_CASE_BUDGET_S = 25.0, 1.0   # time of the rounds of one program
MIN_ROUNDS = 3
COMPILE_LIMIT_S, QUICK_COMPILE_LIMIT_S = 60.0, 10.0  # the child's limit, see compile_guard
ROOT = Path(__file__).resolve().parent.parent
WARMUP_S = 0.05
MAX_BATCH = 200_000

TOOLS = ("chad", "chad-interp", "torch", "jax", "autograd", "numpy")
KINDS = ("grad", "primal")
OUT = Path(__file__).resolve().parent / "out"

# Goal thresholds.
TORCH_FACTOR = 10.0
GRAD_PRIMAL_MAX = 4.0
OVERHEAD_MAX_S = 10e-6
COMPILE_MAX_S = 1.0


@dataclass
class Series:
    """The per-call times (seconds) of one tool and kind, one per round."""

    fn: object
    batch: int = 1
    fn_time: float = 0.0  # the best single call at warm-up (s)
    times: list[float] = field(default_factory=list)

    def stats(self):
        if not self.times:
            return None
        t = sorted(self.times)
        if len(t) >= 4:
            q1, _, q3 = statistics.quantiles(t, n=4, method="inclusive")
        else:
            q1, q3 = t[0], t[-1]
        return {"median": statistics.median(t), "q1": q1, "q3": q3,
                "min": t[0], "max": t[-1], "n": len(t), "batch": self.batch}


@dataclass
class ToolResult:
    first_call: float | None = None      # construction + first gradient call (s)
    first_call_cpu: float | None = None  # the same, CPU time of the process (s)
    primal_first: float | None = None    # construction + first primal call (s)
    error: float | None = None           # relative gradient error against the reference
    status: str = "ok"                   # ok | skipped: ... | MISMATCH ... | failed: ...
    grad: dict | None = None
    primal: dict | None = None


# ------------------------------------------------------------------ helpers

def fmt_time(s: float | None) -> str:
    """Three significant digits in ns, µs, ms or s (never "1e+03 µs")."""
    if s is None:
        return "-"
    for unit, scale in (("ns", 1e9), ("µs", 1e6), ("ms", 1e3)):
        v = float(f"{s * scale:.3g}")
        if v < 1000:
            return f"{v:.3g} {unit}"
    return f"{s:.3g} s"


def fmt_ratio(r: float | None) -> str:
    if r is None:
        return "-"
    return f"{r:.3g}"


def table(rows, header) -> list[str]:
    cols = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cols) for i in range(len(header))]
    out = []
    for j, r in enumerate(cols):
        out.append("  ".join(c.rjust(w) for c, w in zip(r, widths)))
        if j == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def md_table(rows, header) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def timed(fn):
    t0 = time.perf_counter()
    r = fn()
    return time.perf_counter() - t0, r


def warm_up(fn) -> float:
    """Call fn for WARMUP_S (at least 3 times); the best single call time."""
    best, start, n = float("inf"), time.perf_counter(), 0
    while n < 3 or time.perf_counter() - start < WARMUP_S:
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        n += 1
        if best > 0.2:  # a slow tool: three calls are enough
            break
    return best


def batch_time(fn, k: int) -> float:
    """Seconds per call over k calls, the garbage collector paused."""
    gc.disable()
    try:
        t0 = time.perf_counter()
        for _ in range(k):
            fn()
        return (time.perf_counter() - t0) / k
    finally:
        gc.enable()


def versions() -> dict[str, str]:
    import numpy

    out = {"python": platform.python_version(), "numpy": numpy.__version__}
    for name in ("torch", "jax", "autograd"):
        if common.available(name):
            try:
                from importlib.metadata import version

                out[name] = version(name)
            except Exception:  # pragma: no cover
                out[name] = "?"
    return out


def _load() -> str:
    try:
        return "%.1f" % os.getloadavg()[0]
    except OSError:  # pragma: no cover
        return "?"


# ------------------------------------------------------------------ chad backend

def probe_backend(backend: str) -> tuple[str, str]:
    """(the backend to measure as chad, a note): `backend` if it computes the
    gradient and the primal of `x * y + sin x`, else the interpreter."""
    if backend == "interp":
        return "interp", "chad measured with backend=\"interp\" (the constant CHAD_BACKEND)"
    from .compiled_suite import mul_sin

    try:
        c = mul_sin.case()
        impl = common.chad_impl(c, backend)
        impl.grad()
        impl.primal()
        return backend, f"chad measured with backend=\"{backend}\""
    except Exception as e:  # the compiled backend is not there yet
        return "interp", (f"the {backend} backend failed on x * y + sin x "
                          f"({type(e).__name__}: {e}); chad measured with backend=\"interp\"")


def chad_setup(case, backend: str):
    """(Impl, first-call seconds of the gradient, of the primal, CPU seconds of
    the gradient's first call). With the compiled backend, from an empty cache:
    compile time."""
    if backend != "interp":
        common.clear_compile_cache()
    c0 = time.process_time()
    t0 = time.perf_counter()
    g = common.chad_grad(case.text, case.fn, backend)
    args, ctg = case.args, case.ctg
    grad = (lambda: g(*args)) if ctg is None else (lambda: g(*args, ctg=ctg))
    grad()
    t_grad = time.perf_counter() - t0
    cpu_grad = time.process_time() - c0
    t0 = time.perf_counter()
    p = common.chad_primal(case.text, case.fn, backend)
    p(*args)
    t_primal = time.perf_counter() - t0
    return common.Impl(grad=grad, primal=lambda: p(*args)), t_grad, t_primal, cpu_grad


def compile_guard(case, backend: str, quick: bool, limit: float) -> str | None:
    """Compile the case's gradient in a child process first (for programs whose
    compile time may be long): None if that took less than `limit` seconds,
    else why chad is not measured on this program."""
    cmd = [sys.executable, "-m", "benchmarks.bench_compiled", "--probe-compile", case.key,
           "--backend", backend] + (["--quick"] if quick else [])
    try:
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=limit + 5)
    except subprocess.TimeoutExpired:
        return f"not timed: compiling took more than {limit:g} s (stopped)"
    try:
        report = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return f"failed: the compile probe exited {r.returncode}: {r.stderr.strip()[-300:]}"
    if report.get("error"):
        return f"failed: {report['error']}"
    if report["seconds"] > limit:
        return f"not timed: compiling took {fmt_time(report['seconds'])} > {limit:g} s"
    return None


def probe_compile(key: str, backend: str, quick: bool) -> None:
    """The child of compile_guard: one JSON line {"seconds", "error"}."""
    case = next(c for c in suite_cases(quick) if c.key == key)
    t0 = time.perf_counter()
    try:
        chad_setup(case, backend)
        err = None
    except Exception as e:
        err = f"{type(e).__name__}: {e}"
    print(json.dumps({"seconds": time.perf_counter() - t0, "error": err}), flush=True)


# ------------------------------------------------------------------ one program

def run_case(case, backend: str, peers: list[str], rounds: int, batch_s: float,
             interp_cap: float, case_budget: float, compile_limit: float, quick: bool,
             log) -> dict[str, ToolResult]:
    results: dict[str, ToolResult] = {t: ToolResult() for t in TOOLS}
    impls: dict[str, common.Impl] = {}

    # the reference: chad's interpreter
    ref_impl, ref_first, ref_pfirst, _ = chad_setup(case, "interp")
    ref_value, ref_grads = ref_impl.grad()
    t_interp = min(timed(ref_impl.grad)[0] for _ in range(2))

    if backend == "interp":
        impls["chad"] = ref_impl
        results["chad"].first_call, results["chad"].primal_first = ref_first, ref_pfirst
        results["chad-interp"].status = "skipped: chad is the interpreter here"
    else:
        why = compile_guard(case, backend, quick, compile_limit) if case.compile_guard else None
        if why:
            results["chad"].status = why
        else:
            try:
                impl, tg, tp, tc = chad_setup(case, backend)
                impls["chad"] = impl
                results["chad"].first_call, results["chad"].primal_first = tg, tp
                results["chad"].first_call_cpu = tc
            except Exception as e:
                results["chad"].status = f"failed: {type(e).__name__}: {e}"
        if t_interp <= interp_cap:
            impls["chad-interp"] = ref_impl
            results["chad-interp"].first_call = ref_first
            results["chad-interp"].primal_first = ref_pfirst
        else:
            results["chad-interp"].status = (f"skipped: one gradient call takes "
                                             f"{fmt_time(t_interp)} > {fmt_time(interp_cap)}")

    for tool in common.PEERS:
        if tool not in peers:
            results[tool].status = "skipped: not installed"
            continue
        try:
            t0 = time.perf_counter()
            impl = case.peers[tool]()
            impl.grad()  # JAX: trace and compile
            results[tool].first_call = time.perf_counter() - t0
            results[tool].primal_first = timed(impl.primal)[0]
            impls[tool] = impl
        except Exception as e:
            results[tool].status = f"failed: {type(e).__name__}: {e}"

    # the check: same value and gradient as the reference, before any timing
    for tool, impl in list(impls.items()):
        try:
            value, grads = impl.unpack(impl.grad())
            pvalue = impl.primal()
            ok_g, err_g = common.compare(grads, ref_grads)
            ok_v, err_v = common.compare(value, ref_value)
            ok_p, err_p = common.compare(pvalue, ref_value)
        except Exception as e:
            results[tool].status = f"failed in the check: {type(e).__name__}: {e}"
            del impls[tool]
            continue
        results[tool].error = max(err_g, err_v, err_p)
        if not (ok_g and ok_v and ok_p):
            results[tool].status = (f"MISMATCH with chad's interpreter (relative error: "
                                    f"gradient {err_g:.2g}, value {err_v:.2g}, "
                                    f"primal {err_p:.2g}); not timed")
            del impls[tool]

    # calibrate: a batch of calls takes about batch_s
    series: dict[tuple[str, str], Series] = {}
    for tool, impl in impls.items():
        for kind in KINDS:
            fn = impl.grad if kind == "grad" else impl.primal
            best = warm_up(fn)
            k = max(1, min(MAX_BATCH, int(batch_s / max(best, 1e-9))))
            series[(tool, kind)] = Series(fn, k, best)

    # fewer rounds where slow tools would take more than the case's budget
    per_round = sum(s.batch * s.fn_time for s in series.values())
    if per_round > 0 and rounds * per_round > case_budget:
        rounds = max(MIN_ROUNDS, min(rounds, int(case_budget / per_round)))
    keys = list(series)
    for r in range(rounds):
        shift = r % len(keys) if keys else 0
        for key in keys[shift:] + keys[:shift]:
            s = series[key]
            s.times.append(batch_time(s.fn, s.batch))
    for (tool, kind), s in series.items():
        setattr(results[tool], kind, s.stats())
    for tool, res in results.items():
        if res.status != "ok":
            log(f"  {tool}: {res.status}")
    return results


# ------------------------------------------------------------------ figures

def med(res: ToolResult, kind: str = "grad") -> float | None:
    st = getattr(res, kind)
    return st["median"] if st else None


def ratio(a, b):
    return a / b if a is not None and b is not None and b > 0 else None


def case_rounds(results: dict[str, ToolResult]) -> int:
    return max((r.grad["n"] for r in results.values() if r.grad), default=0)


def case_rows(results: dict[str, ToolResult]):
    chad_g = med(results["chad"])
    rows = []
    for tool in TOOLS:
        res = results[tool]
        if res.grad is None:
            if tool in ("chad", "chad-interp") or not res.status.startswith("skipped: not"):
                rows.append([tool, res.status.split(":")[0] + " (see the note)",
                             "", "", "", "", ""])
            continue
        g, p = res.grad, res.primal
        rows.append([
            tool,
            f"{fmt_time(g['median'])} [{fmt_time(g['q1'])}, {fmt_time(g['q3'])}]",
            f"{fmt_time(p['median'])} [{fmt_time(p['q1'])}, {fmt_time(p['q3'])}]",
            fmt_ratio(ratio(g["median"], p["median"])),
            fmt_ratio(ratio(chad_g, g["median"])) if tool != "chad" else "1",
            fmt_time(res.first_call),
            f"{res.error:.1e}" if res.error is not None else "-",
        ])
    return rows


HEADER = ["tool", "gradient/call [IQR]", "primal/call [IQR]", "grad/primal",
          "chad/tool (grad)", "first call", "rel. error"]


def goals(cases, all_results, backend: str, quick: bool) -> list[tuple[str, str, str]]:
    """(goal, verdict, figure) for each goal."""
    out = []
    scal = [c for c in cases if c.scalar]
    label = "chad" if backend == "compiled" else f"chad[{backend}]"

    def per_case(peer, test):
        figs, verdicts = [], []
        for c in scal:
            res = all_results[c.key]
            x = test(med(res["chad"]), med(res[peer]))
            if x is None:
                why = res["chad"].status if res["chad"].grad is None else res[peer].status
                figs.append(f"{c.key}: not measured ({why[:60]})")
                verdicts.append(None)
            else:
                figs.append(f"{c.key}: {x[1]}")
                verdicts.append(x[0])
        v = ("NOT met" if any(v is False for v in verdicts)
             else "not measured" if any(v is None for v in verdicts) else "met")
        return v, "; ".join(figs)

    def vs_torch(c, t):
        if c is None or t is None:
            return None
        f = t / c
        return f >= TORCH_FACTOR, f"torch/chad = {f:.3g}x"

    def vs_jax(c, j):
        if c is None or j is None:
            return None
        return c < j, f"chad {fmt_time(c)} vs jax {fmt_time(j)} (chad/jax = {c / j:.3g})"

    v, f = per_case("torch", vs_torch)
    out.append((f"{label} gradient >= {TORCH_FACTOR:g}x faster than PyTorch eager "
                "(3 scalar programs)", v, f))
    v, f = per_case("jax", vs_jax)
    out.append((f"{label} gradient faster per call than JAX jit (3 scalar programs)", v, f))

    gp = [ratio(med(all_results[c.key]["chad"]), med(all_results[c.key]["chad"], "primal"))
          for c in cases]
    gp = [x for x in gp if x is not None]  # the programs where chad was measured
    if gp:
        m = statistics.median(gp)
        out.append((f"{label} gradient / primal <= {GRAD_PRIMAL_MAX:g} (median over the suite)",
                    "met" if m <= GRAD_PRIMAL_MAX else "NOT met",
                    f"median {m:.3g} over {len(gp)} of {len(cases)} programs ("
                    + ", ".join(f"{x:.3g}" for x in gp) + ")"))
    else:
        out.append(("gradient / primal", "not measured", ""))

    t = med(all_results["mul_sin"]["chad"]) if "mul_sin" in all_results else None
    out.append((f"{label} gradient call of x * y + sin x < {fmt_time(OVERHEAD_MAX_S)}",
                "not measured" if t is None else "met" if t < OVERHEAD_MAX_S else "NOT met",
                fmt_time(t)))

    chain = next((c for c in cases if c.key == "chain"), None)
    ct = all_results["chain"]["chad"].first_call if chain else None
    if backend == "interp":
        out.append((f"compile time of the 1000-let chain < {COMPILE_MAX_S:g} s",
                    "not measured", f"no compiled backend (interpreter set-up + first call: "
                    f"{fmt_time(ct)})"))
    elif quick:
        out.append((f"compile time of the 1000-let chain < {COMPILE_MAX_S:g} s", "not measured",
                    f"quick run: the chain has {chain.title.split('-')[0]} lets "
                    f"({fmt_time(ct)})"))
    elif ct is None:
        st = all_results["chain"]["chad"].status
        over = st.startswith("not timed: compiling took")
        out.append((f"compile time of the 1000-let chain < {COMPILE_MAX_S:g} s",
                    "NOT met" if over else "not measured", st[:120]))
    else:
        cpu = all_results["chain"]["chad"].first_call_cpu
        out.append((f"compile time of the 1000-let chain < {COMPILE_MAX_S:g} s",
                    "met" if ct < COMPILE_MAX_S else "NOT met",
                    f"{fmt_time(ct)} ({fmt_time(cpu)} of CPU time: the machine is shared)"))
    return out


def write_markdown(path: Path, cases, all_results, goal_list, meta) -> None:
    lines = [f"# chad's compiled gradients against peers ({meta['date']})", "",
             "Written by `python -m benchmarks compiled` (benchmarks/bench_compiled.py; "
             "the programs: benchmarks/compiled_suite/). Do not edit by hand.", "",
             f"* machine: {meta['machine']}; 2 cores, shared (load average at the start "
             f"{meta['load']}); times are wall clock",
             f"* {meta['rounds']} rounds (fewer where the slow tools would take more than "
             f"{meta['case_budget']:g} s for a program: see each program), every tool and "
             f"kind once per round, a batch of about {fmt_time(meta['batch_s'])} (at least "
             "one call) each; median over rounds and [interquartile range]; garbage "
             "collector paused during a batch",
             f"* {meta['backend_note']}",
             "* versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()),
             "* PyTorch: float64, eager, torch.set_num_threads(1); JAX: float64, "
             "jit(value_and_grad) (jit of jax.vjp for the quaternion), first call "
             "(trace + compile) under \"first call\"; autograd: value_and_grad "
             "(make_vjp for the quaternion); numpy: a hand-written VJP "
             "(plain Python floats for the scalar programs)",
             "* chad's \"first call\" is its compile time: an empty cache, "
             "`chad.grad(text, fn)` and its first call",
             "* every gradient and value checked against chad's interpreter before "
             "timing (\"rel. error\": largest difference / largest entry)",
             ""]
    if meta["quick"]:
        lines.insert(2, "**A quick (smoke) run: few rounds, short batches, a 100-let chain; "
                        "not for quoting.**\n")
    for c in cases:
        lines += [f"## {c.title}", "", f"{case_rounds(all_results[c.key])} rounds", ""]
        lines += md_table(case_rows(all_results[c.key]), HEADER)
        lines.append("")
        notes = [(t, r.status) for t, r in all_results[c.key].items()
                 if r.status != "ok" and not r.status.startswith("skipped: not installed")]
        lines += [f"* {t}: {st}" for t, st in notes] + ([""] if notes else [])
    lines += ["## chad / peer, gradient per call (below 1: chad is faster)", ""]
    peers = [t for t in TOOLS if t != "chad"]
    rows = []
    for c in cases:
        res = all_results[c.key]
        rows.append([c.title] + [fmt_ratio(ratio(med(res["chad"]), med(res[t])))
                                 for t in peers])
    lines += md_table(rows, ["program"] + peers)
    lines += ["", "## Goals", ""]
    lines += md_table([[g, v, f] for g, v, f in goal_list], ["goal", "verdict", "figure"])
    lines.append("")
    path.write_text("\n".join(lines))


def write_plot(path: Path, cases, all_results, goal_list, meta) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    import numpy as np

    # the same tools in every panel: those measured on some program
    tools = [t for t in TOOLS if any(all_results[c.key][t].grad for c in cases)]
    ncols = 3
    nrows = (len(cases) + 1 + ncols - 1) // ncols  # one panel more, for the goals
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.4 * ncols, 4.0 * nrows), squeeze=False)
    colours = {"grad": "#3b6ea8", "primal": "#e0a030"}
    x = np.arange(len(tools))
    for ax, c in zip(axes.flat, cases):
        res = all_results[c.key]
        for j, kind in enumerate(KINDS):
            st = [getattr(res[t], kind) for t in tools]
            m = np.array([s["median"] * 1e6 if s else np.nan for s in st])
            lo = np.array([(s["median"] - s["q1"]) * 1e6 if s else 0.0 for s in st])
            hi = np.array([(s["q3"] - s["median"]) * 1e6 if s else 0.0 for s in st])
            ax.bar(x + (j - 0.5) * 0.38, m, 0.38, yerr=[lo, hi], capsize=2,
                   color=colours[kind], label="gradient" if kind == "grad" else "primal")
        ax.set_yscale("log")
        for i, t in enumerate(tools):
            if res[t].grad is None:
                ax.text(i, 0.02, "not\nmeasured", transform=ax.get_xaxis_transform(),
                        ha="center", va="bottom", fontsize=7, color="#a03030")
        ax.set_xticks(x)
        ax.set_xticklabels(tools, rotation=30, ha="right", fontsize=8)
        ax.set_title(c.title, fontsize=10)
        ax.set_ylabel("µs per call")
        ax.grid(axis="y", which="both", alpha=0.3)
    rest = list(axes.flat)[len(cases):]
    for ax in rest:
        ax.axis("off")
    if rest:
        text = "\n".join(f"[{v}] {g}" for g, v, _f in goal_list)
        rest[0].text(0.0, 1.0, "goals\n" + text, va="top", ha="left", fontsize=7.5,
                     wrap=True, transform=rest[0].transAxes)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(f"per-call time (median over rounds, IQR bars), {meta['date']}; "
                 f"{meta['backend_short']}" + ("; QUICK RUN" if meta["quick"] else ""),
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# ------------------------------------------------------------------ main

def parse(argv):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_compiled",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smoke run of a few seconds")
    ap.add_argument("--backend", choices=("compiled", "interp"), default=CHAD_BACKEND,
                    help=f"the chad backend measured as chad (default {CHAD_BACKEND})")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--out", type=Path, default=OUT, help="the output folder")
    ap.add_argument("--probe-compile", metavar="PROGRAM", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Run from the driver (`python -m benchmarks compiled`) with argv None:
    the defaults, or a quick run if the environment sets CHAD_BENCH_QUICK=1."""
    if argv is None:
        argv = ["--quick"] if os.environ.get("CHAD_BENCH_QUICK") == "1" else []
    opts = parse(argv)
    quick = opts.quick
    if opts.probe_compile:
        probe_compile(opts.probe_compile, opts.backend, quick)
        return
    rounds = opts.rounds or (QUICK_ROUNDS if quick else ROUNDS)
    batch_s = QUICK_BATCH_S if quick else BATCH_S
    interp_cap = QUICK_INTERP_CAP_S if quick else INTERP_CAP_S
    case_budget = QUICK_CASE_BUDGET_S if quick else CASE_BUDGET_S
    compile_limit = QUICK_COMPILE_LIMIT_S if quick else COMPILE_LIMIT_S

    def log(msg=""):
        print(msg, flush=True)

    peers = []
    for tool in common.PEERS:
        if common.available(tool):
            peers.append(tool)
        else:
            log(f"{tool}: not installed, skipped (pip install -e '.[bench]')")
    t0 = time.perf_counter()
    for tool in peers:  # imported here, so that no tool's first call includes an import
        t_imp = time.perf_counter()
        {"torch": common.torch, "jax": common.jax, "autograd": common.autograd}.get(
            tool, lambda: None)()
        log(f"{tool}: imported in {time.perf_counter() - t_imp:.1f} s")
    backend, note = probe_backend(opts.backend)
    log(note)
    meta = {
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.machine()}, {os.cpu_count()} logical CPUs, {platform.system()}",
        "load": _load(), "rounds": rounds, "batch_s": batch_s, "quick": quick,
        "case_budget": case_budget,
        "backend_note": note,
        "backend_short": "chad = " + ("compiled" if backend == "compiled" else backend),
        "versions": versions(),
    }
    cases = suite_cases(quick)
    all_results = {}
    for c in cases:
        log(f"\n{c.title}")
        t_case = time.perf_counter()
        res = run_case(c, backend, peers, rounds, batch_s, interp_cap, case_budget,
                       compile_limit, quick, log)
        all_results[c.key] = res
        for line in table(case_rows(res), HEADER):
            log("  " + line)
        log(f"  ({case_rounds(res)} rounds; {time.perf_counter() - t_case:.0f} s)")
    goal_list = goals(cases, all_results, backend, quick)
    log("\ngoals:")
    for g, v, f in goal_list:
        log(f"  [{v}] {g}: {f}")
    opts.out.mkdir(parents=True, exist_ok=True)
    stem = "compiled-quick" if quick else "compiled"
    md = opts.out / f"{stem}.md"
    write_markdown(md, cases, all_results, goal_list, meta)
    png = opts.out / f"{stem}.png"
    wrote = write_plot(png, cases, all_results, goal_list, meta)
    log(f"\nwrote {md}" + (f" and {png}" if wrote else " (matplotlib missing: no plot)")
        + f" ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main(sys.argv[1:])
