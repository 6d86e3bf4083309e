"""Vectorised array code (docs/compiler.md, "Vectorisation"): chad's compiled
primal and gradient against a hand-written numpy VJP, JAX `jit` and PyTorch
eager (those two when installed: `pip install -e '.[bench]'`; skipped if not),
on dot, logsumexp and map with a closure at n = 10^3 .. 10^6 and the sum of a
matrix-vector product at n = 10 .. 1000 (an n x n matrix).

Per case, every tool is timed in turn within a round (a batch of calls sized to
about 20 ms), rounds interleaved; the figure is the median over the rounds with
the spread (min .. max). chad's gradient is measured only up to the size where
one call stays under CHAD_BUDGET seconds (measured, or predicted from the last
size: linear, quadratic for the n x n matrix) (a gradient whose parts are not
vectorised runs element by element); the log-log slope of its time over n is
fitted on the sizes measured. Results: benchmarks/out/vectorised.md.
Nothing here fails on time.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import chad

OUT = Path(__file__).resolve().parent / "out" / "vectorised.md"
ROUNDS = 7
BATCH_S = 0.02
CHAD_BUDGET = 2.0   # seconds per call above which chad's gradient is not measured

PROGRAMS = {
    "dot": "def dot(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> a ! i * b ! i))",
    "logsumexp": "def lse(a : Array R) : R = let m = fold (\\p -> max(fst p, snd p)) a in "
                 "log (sum (map (\\x -> exp (x - m)) a)) + m",
    "map-closure": "def weighted(w : R, xs : Array R) : R = "
                   "let f = \\(x : R) -> tanh (w * x) * x in sum (map f xs)",
    "sum-matvec": "def smv(m : Array (Array R), v : Array R) : R = "
                  "sum (build (length m) (\\i -> "
                  "sum (build (length v) (\\j -> m ! i ! j * v ! j))))",
}
SIZES = {"dot": (10**3, 10**4, 10**5, 10**6), "logsumexp": (10**3, 10**4, 10**5, 10**6),
         "map-closure": (10**3, 10**4, 10**5, 10**6), "sum-matvec": (10, 100, 1000)}


def args_of(name: str, n: int, rng):
    if name == "dot":
        return (rng.normal(size=n), rng.normal(size=n))
    if name == "logsumexp":
        return (rng.normal(size=n),)
    if name == "map-closure":
        return (0.7, rng.normal(size=n))
    m = rng.normal(size=(n, n))
    return (tuple(m), rng.normal(size=n))


# ----------------------------------------------------------------- peers


def numpy_tools(name: str):
    """(primal, gradient) written by hand with numpy."""
    if name == "dot":
        return (lambda a, b: float(a @ b)), (lambda a, b: (float(a @ b), (b.copy(), a.copy())))
    if name == "logsumexp":
        def p(a):
            m = a.max()
            return float(np.log(np.exp(a - m).sum()) + m)

        def g(a):
            m = a.max()
            e = np.exp(a - m)
            s = e.sum()
            return float(np.log(s) + m), (e / s,)
        return p, g
    if name == "map-closure":
        def p(w, xs):
            return float(np.sum(np.tanh(w * xs) * xs))

        def g(w, xs):
            t = np.tanh(w * xs)
            dt = (1.0 - t * t) * xs
            return float(np.sum(t * xs)), (float(np.sum(dt * xs)), t + dt * w)
        return p, g

    def p(m, v):
        return float(np.sum(np.stack(m) @ v))

    def g(m, v):
        mat = np.stack(m)
        return float(np.sum(mat @ v)), (np.outer(np.ones(len(m)), v), mat.sum(axis=0))
    return p, g


def jax_tools(name: str):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    if name == "dot":
        f = lambda a, b: jnp.sum(a * b)  # noqa: E731
    elif name == "logsumexp":
        def f(a):
            m = jnp.max(a)
            return jnp.log(jnp.sum(jnp.exp(a - m))) + m
    elif name == "map-closure":
        f = lambda w, xs: jnp.sum(jnp.tanh(w * xs) * xs)  # noqa: E731
    else:
        f = lambda m, v: jnp.sum(m @ v)  # noqa: E731
    argnums = (0, 1) if name in ("dot", "map-closure", "sum-matvec") else (0,)
    p = jax.jit(f)
    g = jax.jit(jax.value_and_grad(f, argnums=argnums))
    conv = (lambda args: (jnp.asarray(np.stack(args[0])), jnp.asarray(args[1]))) \
        if name == "sum-matvec" else (lambda args: tuple(jnp.asarray(x) for x in args))
    return (lambda *a: p(*a).block_until_ready(),
            lambda *a: jax.block_until_ready(g(*a)), conv)


def torch_tools(name: str):
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)

    def f(*xs):
        if name == "dot":
            return (xs[0] * xs[1]).sum()
        if name == "logsumexp":
            m = xs[0].max()
            return torch.log(torch.exp(xs[0] - m).sum()) + m
        if name == "map-closure":
            return (torch.tanh(xs[0] * xs[1]) * xs[1]).sum()
        return (xs[0] @ xs[1]).sum()

    def p(*xs):
        with torch.no_grad():
            return f(*xs).item()

    def g(*xs):
        leaves = [x.detach().requires_grad_(True) for x in xs]
        y = f(*leaves)
        y.backward()
        return y.item(), [x.grad for x in leaves]

    def conv(args):
        if name == "sum-matvec":
            return (torch.from_numpy(np.stack(args[0])), torch.from_numpy(args[1]))
        return tuple(torch.tensor(x, dtype=torch.float64) if np.isscalar(x)
                     else torch.from_numpy(x) for x in args)
    return p, g, conv


# ----------------------------------------------------------------- timing


def batch_time(fn, args, k: int) -> float:
    t0 = time.perf_counter()
    for _ in range(k):
        fn(*args)
    return (time.perf_counter() - t0) / k


def measure(tools: dict, rounds: int) -> dict:
    """tool name -> (median, min, max) seconds per call, rounds interleaved."""
    ks = {}
    for key, (fn, args) in tools.items():
        one = batch_time(fn, args, 1)  # warm-up (and compile, for JAX)
        one = batch_time(fn, args, 1)
        ks[key] = max(1, min(10_000, int(BATCH_S / max(one, 1e-7))))
    samples: dict = {key: [] for key in tools}
    for _ in range(rounds):
        for key, (fn, args) in tools.items():
            samples[key].append(batch_time(fn, args, ks[key]))
    return {key: (statistics.median(v), min(v), max(v)) for key, v in samples.items()}


def fmt(s) -> str:
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if s < 1.0:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def slope(points) -> float | None:
    """Least-squares slope of log time over log n."""
    if len(points) < 2:
        return None
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(t) for _, t in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def run_case(name: str, sizes, rounds: int, rows: list, slopes: dict) -> None:
    rng = np.random.default_rng(0)
    text = PROGRAMS[name]
    chad_p, chad_g = chad.primal(text), chad.grad(text)
    np_p, np_g = numpy_tools(name)
    jx, tc = jax_tools(name), torch_tools(name)
    chad_g(*args_of(name, 10, rng))  # compile once, outside the budget check
    chad_p(*args_of(name, 10, rng))
    grad_ok = True
    last = None
    points = []
    for n in sizes:
        args = args_of(name, n, rng)
        want = np_g(*args)[0]
        got = chad_p(*args)
        assert abs(got - want) <= 1e-9 * max(1.0, abs(want)), (name, n, got, want)
        tools = {("chad", "primal"): (chad_p, args), ("numpy", "primal"): (np_p, args),
                 ("numpy", "grad"): (np_g, args)}
        if grad_ok and last is not None:  # the time predicted from the last size
            grad_ok = last[1] * (n / last[0]) ** (2 if name == "sum-matvec" else 1) < CHAD_BUDGET
        if grad_ok:
            one = CHAD_BUDGET
            for _ in range(2):  # the faster of two calls (a spike of the machine's load)
                t0 = time.perf_counter()
                value, _ = chad_g(*args)
                one = min(one, time.perf_counter() - t0)
                assert abs(value - want) <= 1e-9 * max(1.0, abs(want))
                if one > CHAD_BUDGET:
                    break
            grad_ok = one < CHAD_BUDGET
            last = (n, one)
            if grad_ok:
                tools[("chad", "grad")] = (chad_g, args)
        for tool, peer in (("jax", jx), ("torch", tc)):
            if peer is not None:
                p, g, conv = peer
                peer_args = conv(args)
                tools[(tool, "primal")] = (p, peer_args)
                tools[(tool, "grad")] = (g, peer_args)
        res = measure(tools, rounds)
        med = lambda k: res[k][0] if k in res else None  # noqa: E731
        if ("chad", "grad") in res:
            points.append((n, med(("chad", "grad"))))
        ratio = lambda a, b: None if a is None or b is None else a / b  # noqa: E731
        rows.append([
            name, str(n),
            _cell(res, ("chad", "grad")), _cell(res, ("chad", "primal")),
            _cell(res, ("numpy", "grad")), _cell(res, ("jax", "grad")),
            _cell(res, ("torch", "grad")),
            _r(ratio(med(("chad", "grad")), med(("chad", "primal")))),
            _r(ratio(med(("chad", "grad")), med(("jax", "grad")))),
            _r(ratio(med(("chad", "primal")), med(("jax", "primal")))),
            _r(ratio(med(("chad", "primal")), med(("numpy", "primal")))),
        ])
        print("  ".join(rows[-1]), flush=True)
    slopes[name] = slope(points)


def _cell(res, key) -> str:
    if key not in res:
        return "-"
    m, lo, hi = res[key]
    return f"{fmt(m)} ({fmt(lo)}..{fmt(hi)})"


def _r(x) -> str:
    return "-" if x is None else f"{x:.3g}"


HEADER = ["program", "n", "chad grad", "chad primal", "numpy VJP", "JAX jit grad",
          "PyTorch grad", "chad grad/primal", "chad/JAX grad", "chad/JAX primal",
          "chad/numpy primal"]


def main(argv: list[str] | None = None) -> None:
    argv = argv or []
    quick = "--quick" in argv
    rounds = 3 if quick else ROUNDS
    rows: list = []
    slopes: dict = {}
    print("  ".join(HEADER))
    for name in PROGRAMS:
        sizes = SIZES[name][:2] if quick else SIZES[name]
        run_case(name, sizes, rounds, rows, slopes)
    lines = ["# Vectorised arrays: chad compiled against numpy, JAX and PyTorch", "",
             f"`python -m benchmarks vectorised` ({time.strftime('%Y-%m-%d %H:%M')}, "
             f"Python {sys.version.split()[0]}, numpy {np.__version__}); per call, median "
             f"of {rounds} interleaved rounds (min..max). chad's gradient is measured "
             f"while one call takes under {CHAD_BUDGET} s.", "",
             "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines += ["", "Log-log slope of chad's gradient time over n (sizes measured):", ""]
    lines += [f"- {name}: {'-' if s is None else f'{s:.2f}'}" for name, s in slopes.items()]
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    print(f"slopes: {slopes}\nwritten {OUT}")


if __name__ == "__main__":
    main(sys.argv[1:])
