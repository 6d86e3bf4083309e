"""Vectorised array code (docs/compiler.md, "Vectorisation"): chad's compiled
primal and gradient against a hand-written numpy VJP, JAX `jit` and PyTorch
eager (those two when installed: `pip install -e '.[bench]'`; skipped if not),
on dot, logsumexp, map with a closure, a map whose body is an `if` (a leaky
ReLU times a captured weight: chad/compile/switch.py) and a 1-D stencil
(examples/stencil.chad: clamped borders, reads at indices computed by a def
call) at n = 10^3 .. 10^6,
the sum of a matrix-vector product at n = 10 .. 1000 (an n x n matrix) and the
10-20-5 MLP of the compiled-gradient benchmark on a batch of n = 64 inputs (the
loss summed over the batch), and the ported examples kmeans (the sum of each
point's squared distance to its nearest centre) and gmm (a Gaussian mixture's
negative log-likelihood) with n = 10^3 .. 10^5 points in 2-D and 5 centres or
components (a fold or a log-sum-exp over the centres inside the loop over the
points: chad/arrays/folds.py).
Every tool is given the same arguments: vectors and matrices as float64 numpy
arrays, 1-D and 2-D (chad takes a 2-D array for an Array (Array R): its rows;
until 2026-11-28 chad was given tuples of rows, which it stacked inside the
timed call while the peers got them stacked before timing).

Per case, every tool is timed in turn within a round (a batch of calls sized to
about 20 ms), rounds interleaved; the figure is the median over the rounds with
the spread (min .. max). chad's gradient is measured only up to the size where
one call stays under CHAD_BUDGET seconds (measured, or predicted from the last
size: linear, quadratic for the n x n matrix) (a gradient whose parts are not
vectorised runs element by element); the log-log slope of its time over n is
fitted on the sizes measured. Before timing, chad's value and gradient are
checked against the numpy VJP's at every size. Results: benchmarks/out/vectorised.md
and the plot benchmarks/out/vectorised.png (with matplotlib).
Nothing here fails on time. `--quick`: the two smallest sizes, 3 rounds;
`--only=dot,sum-matvec`: those programs, printed only (nothing written).
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import chad
from chad.compile import kernels
from chad.memory import keep_freed_memory

OUT = Path(__file__).resolve().parent / "out" / "vectorised.md"
ROUNDS = 7
BATCH_S = 0.02
CHAD_BUDGET = 2.0   # seconds per call above which chad's gradient is not measured

MLP_TEXT = """\
def max2(p : R * R) : R = if fst p > snd p then fst p else snd p

def logsumexp(z : Array R) : R =
  let m = fold (\\p -> max2(p)) z in
  m + log (sum (map (\\x -> exp (x - m)) z))

def affine(w : Array (Array R), b : Array R, x : Array R) : Array R =
  build (length w) (\\i -> sum (build (length x) (\\j -> w ! i ! j * x ! j)) + b ! i)

def loss(w1 : Array (Array R), b1 : Array R, w2 : Array (Array R), b2 : Array R,
         x : Array R, y : Array R) : R =
  let h = map (\\a -> tanh a) (affine(w1, b1, x)) in
  let z = affine(w2, b2, h) in
  sum y * logsumexp(z) - sum (build (length z) (\\i -> y ! i * z ! i))

def batch(w1 : Array (Array R), b1 : Array R, w2 : Array (Array R), b2 : Array R,
          xs : Array (Array R), ys : Array (Array R)) : R =
  sum (build (length xs) (\\k -> loss(w1, b1, w2, b2, xs ! k, ys ! k)))
"""

PROGRAMS = {
    "dot": "def dot(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> a ! i * b ! i))",
    "logsumexp": "def lse(a : Array R) : R = let m = fold (\\p -> max(fst p, snd p)) a in "
                 "log (sum (map (\\x -> exp (x - m)) a)) + m",
    "map-closure": "def weighted(w : R, xs : Array R) : R = "
                   "let f = \\(x : R) -> tanh (w * x) * x in sum (map f xs)",
    "map-if": "def leaky(w : R, xs : Array R) : R = "
              "sum (map (\\x -> if x > 0.0 then x * w else 0.01 * x * w) xs)",
    "sum-matvec": "def smv(m : Array (Array R), v : Array R) : R = "
                  "sum (build (length m) (\\i -> "
                  "sum (build (length v) (\\j -> m ! i ! j * v ! j))))",
    "stencil": (Path(__file__).resolve().parent.parent / "examples" / "stencil.chad").read_text(),
    "mlp-batch": MLP_TEXT,
    "kmeans": (Path(__file__).resolve().parent.parent / "examples" / "kmeans.chad").read_text(),
    "gmm": (Path(__file__).resolve().parent.parent / "examples" / "gmm.chad").read_text(),
}
SIZES = {"dot": (10**3, 10**4, 10**5, 10**6), "logsumexp": (10**3, 10**4, 10**5, 10**6),
         "map-closure": (10**3, 10**4, 10**5, 10**6), "map-if": (10**3, 10**4, 10**5, 10**6),
         "sum-matvec": (10, 100, 1000),
         "stencil": (10**3, 10**4, 10**5, 10**6), "mlp-batch": (64,),
         "kmeans": (10**3, 10**4, 10**5), "gmm": (10**3, 10**4, 10**5)}
MLP_SHAPE = (10, 20, 5)
CLUSTERS = 5  # kmeans' centres and gmm's components, in 2-D (examples/kmeans.chad, gmm.chad)


def args_of(name: str, n: int, rng):
    if name == "dot":
        return (rng.normal(size=n), rng.normal(size=n))
    if name == "logsumexp":
        return (rng.normal(size=n),)
    if name in ("map-closure", "map-if"):
        return (0.7, rng.normal(size=n))
    if name == "stencil":
        return (rng.normal(size=n),)
    if name == "kmeans":
        return (rng.normal(size=2 * n), rng.normal(size=2 * CLUSTERS))
    if name == "gmm":
        k = CLUSTERS
        return (rng.normal(size=k), rng.normal(size=2 * k), rng.normal(size=2 * k) * 0.1,
                rng.normal(size=2 * n))
    if name == "mlp-batch":
        i, h, o = MLP_SHAPE
        return (rng.normal(size=(h, i)) * 0.3, rng.normal(size=h) * 0.1,
                rng.normal(size=(o, h)) * 0.3, rng.normal(size=o) * 0.1,
                rng.normal(size=(n, i)), rng.uniform(0.0, 1.0, size=(n, o)))
    return (rng.normal(size=(n, n)), rng.normal(size=n))


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
    if name == "map-if":
        def p(w, xs):
            return float(np.sum(np.where(xs > 0.0, xs * w, 0.01 * xs * w)))

        def g(w, xs):
            pos = xs > 0.0
            return (float(np.sum(np.where(pos, xs * w, 0.01 * xs * w))),
                    (float(np.sum(np.where(pos, xs, 0.01 * xs))), np.where(pos, w, 0.01 * w)))
        return p, g

    if name == "stencil":
        def parts(a):
            n = len(a)
            i = np.arange(n)
            im, ip = np.maximum(i - 1, 0), np.minimum(i + 1, n - 1)
            return im, ip, 0.25 * a[im] + 0.5 * a + 0.25 * a[ip]

        def p(a):
            s = parts(a)[2]
            return float(s @ s)

        def g(a):
            n = len(a)
            im, ip, s = parts(a)
            ds = 2.0 * s
            q = 0.25 * ds
            return float(s @ s), (0.5 * ds + np.bincount(im, q, n) + np.bincount(ip, q, n),)
        return p, g
    if name == "kmeans":
        def dists(ps, zs):
            diff = ps.reshape(-1, 1, 2) - zs.reshape(1, -1, 2)
            return diff, np.sum(diff * diff, axis=2)

        def p(ps, zs):
            return float(np.sum(np.min(dists(ps, zs)[1], axis=1)))

        def g(ps, zs):
            diff, d = dists(ps, zs)
            c = np.argmin(d, axis=1)  # the first nearest: the fold's leftmost minimum
            near = diff[np.arange(len(c)), c]  # p_i - z_c
            dz = np.zeros((len(zs) // 2, 2))
            np.add.at(dz, c, -2.0 * near)
            return float(np.sum(d[np.arange(len(c)), c])), ((2.0 * near).reshape(-1),
                                                            dz.reshape(-1))
        return p, g
    if name == "gmm":
        def terms(alphas, mus, logstd, xs):
            x, mu, s = xs.reshape(-1, 1, 2), mus.reshape(1, -1, 2), logstd.reshape(1, -1, 2)
            z = (x - mu) * np.exp(-s)
            t = alphas.reshape(1, -1) - s.sum(axis=2) - 0.5 * np.sum(z * z, axis=2)
            m = t.max(axis=1, keepdims=True)
            e = np.exp(t - m)
            lse_rows = m[:, 0] + np.log(e.sum(axis=1))
            am = alphas.max()
            ea = np.exp(alphas - am)
            lse_a = am + np.log(ea.sum())
            n = len(xs) // 2
            return n * lse_a - lse_rows.sum(), (x, mu, s, z, e / e.sum(axis=1, keepdims=True),
                                                 ea / ea.sum(), n)

        def p(*args):
            return float(terms(*args)[0])

        def g(*args):
            value, (x, mu, s, z, soft, soft_a, n) = terms(*args)
            dt = -soft  # d value / d t (n x k)
            dalphas = n * soft_a + dt.sum(axis=0)
            dz = -dt[:, :, None] * z  # d t / d z = -z
            es = np.exp(-s)
            dx = np.sum(dz * es, axis=1)
            dmu = -np.sum(dz * es, axis=0)
            ds = -dt.sum(axis=0)[:, None] - np.sum(dz * z, axis=0)
            return float(value), (dalphas, dmu.reshape(-1), ds.reshape(-1), dx.reshape(-1))
        return p, g
    if name == "mlp-batch":
        def fwd(w1, b1, w2, b2, xs, ys):
            w1, w2, xs, ys = (np.asarray(x) for x in (w1, w2, xs, ys))
            hid = np.tanh(xs @ w1.T + b1)
            z = hid @ w2.T + b2
            m = z.max(axis=1, keepdims=True)
            e = np.exp(z - m)
            se = e.sum(axis=1, keepdims=True)
            lse = m + np.log(se)
            sy = ys.sum(axis=1, keepdims=True)
            loss = float(np.sum(sy * lse) - np.sum(ys * z))
            return loss, (w1, w2, xs, ys, hid, z, e / se, lse, sy)

        def p(*args):
            return fwd(*args)[0]

        def g(*args):
            loss, (w1, w2, xs, ys, hid, z, soft, lse, sy) = fwd(*args)
            dz = sy * soft - ys
            da = (dz @ w2) * (1.0 - hid * hid)
            return loss, (da.T @ xs, da.sum(axis=0), dz.T @ hid, dz.sum(axis=0),
                          da @ w1, lse - z)
        return p, g

    def p(m, v):
        return float(np.sum(np.asarray(m) @ v))

    def g(m, v):
        mat = np.asarray(m)
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
    elif name == "map-if":
        f = lambda w, xs: jnp.sum(jnp.where(xs > 0.0, xs * w, 0.01 * xs * w))  # noqa: E731
    elif name == "stencil":
        def f(a):
            n = a.shape[0]
            i = jnp.arange(n)
            s = 0.25 * a[jnp.maximum(i - 1, 0)] + 0.5 * a + 0.25 * a[jnp.minimum(i + 1, n - 1)]
            return jnp.sum(s * s)
    elif name == "kmeans":
        def f(ps, zs):
            diff = ps.reshape(-1, 1, 2) - zs.reshape(1, -1, 2)
            return jnp.sum(jnp.min(jnp.sum(diff * diff, axis=2), axis=1))
    elif name == "gmm":
        def f(alphas, mus, logstd, xs):
            x, mu, s = xs.reshape(-1, 1, 2), mus.reshape(1, -1, 2), logstd.reshape(1, -1, 2)
            z = (x - mu) * jnp.exp(-s)
            t = alphas.reshape(1, -1) - s.sum(axis=2) - 0.5 * jnp.sum(z * z, axis=2)
            m = jax.lax.stop_gradient(t.max(axis=1, keepdims=True))
            am = jax.lax.stop_gradient(alphas.max())
            lse_a = am + jnp.log(jnp.sum(jnp.exp(alphas - am)))
            lse_rows = m[:, 0] + jnp.log(jnp.sum(jnp.exp(t - m), axis=1))
            return (xs.shape[0] // 2) * lse_a - jnp.sum(lse_rows)
    elif name == "mlp-batch":
        def f(w1, b1, w2, b2, xs, ys):
            z = jnp.tanh(xs @ w1.T + b1) @ w2.T + b2
            m = jnp.max(z, axis=1, keepdims=True)
            lse = m + jnp.log(jnp.sum(jnp.exp(z - m), axis=1, keepdims=True))
            return jnp.sum(jnp.sum(ys, axis=1, keepdims=True) * lse) - jnp.sum(ys * z)
    else:
        f = lambda m, v: jnp.sum(m @ v)  # noqa: E731
    argnums = {"dot": (0, 1), "map-closure": (0, 1), "map-if": (0, 1), "sum-matvec": (0, 1),
               "mlp-batch": tuple(range(6)), "kmeans": (0, 1),
               "gmm": (0, 1, 2, 3)}.get(name, (0,))
    p = jax.jit(f)
    g = jax.jit(jax.value_and_grad(f, argnums=argnums))
    conv = lambda args: tuple(jnp.asarray(_stacked(x)) for x in args)  # noqa: E731
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
        if name == "map-if":
            w, x = xs
            return torch.where(x > 0.0, x * w, 0.01 * x * w).sum()
        if name == "stencil":
            a = xs[0]
            n = a.shape[0]
            i = torch.arange(n)
            s = (0.25 * a[torch.clamp(i - 1, min=0)] + 0.5 * a
                 + 0.25 * a[torch.clamp(i + 1, max=n - 1)])
            return (s * s).sum()
        if name == "kmeans":
            ps, zs = xs
            diff = ps.reshape(-1, 1, 2) - zs.reshape(1, -1, 2)
            return (diff * diff).sum(dim=2).min(dim=1).values.sum()
        if name == "gmm":
            alphas, mus, logstd, x = xs
            xx, mu, s = x.reshape(-1, 1, 2), mus.reshape(1, -1, 2), logstd.reshape(1, -1, 2)
            z = (xx - mu) * torch.exp(-s)
            t = alphas.reshape(1, -1) - s.sum(dim=2) - 0.5 * (z * z).sum(dim=2)
            return (x.shape[0] // 2) * torch.logsumexp(alphas, 0) - torch.logsumexp(t, 1).sum()
        if name == "mlp-batch":
            w1, b1, w2, b2, x, y = xs
            z = torch.tanh(x @ w1.T + b1) @ w2.T + b2
            lse = torch.logsumexp(z, dim=1, keepdim=True)
            return (y.sum(dim=1, keepdim=True) * lse).sum() - (y * z).sum()
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
        return tuple(torch.tensor(x, dtype=torch.float64) if np.isscalar(x)
                     else torch.from_numpy(_stacked(x)) for x in args)
    return p, g, conv


def _stacked(x):
    """A matrix given as a tuple of rows (chad's gradient of an Array (Array R))
    as a 2-D array."""
    return np.stack(x) if isinstance(x, tuple) else x


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


def run_case(name: str, sizes, rounds: int, rows: list, slopes: dict,
             series: dict | None = None) -> None:
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
        want, want_grads = np_g(*args)
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
                value, grads = chad_g(*args)
                one = min(one, time.perf_counter() - t0)
                assert abs(value - want) <= 1e-9 * max(1.0, abs(want))
                check_grads(name, n, grads, want_grads)
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
        if series is not None:
            for key, (m, _lo, _hi) in res.items():
                if key[1] == "grad":
                    series.setdefault(name, {}).setdefault(key[0], []).append((n, m))
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


def check_grads(name, n, grads, want) -> None:
    """chad's gradients against the numpy VJP's (1e-9, relative to the largest)."""
    grads = [g for g in grads if g is not None]  # the Z arguments' (none here)
    assert len(grads) == len(want), (name, n, len(grads), len(want))
    for k, (g, w) in enumerate(zip(grads, want)):
        g = np.asarray(_stacked(g) if isinstance(g, tuple) else g, dtype=np.float64)
        w = np.asarray(w, dtype=np.float64)
        scale = max(1.0, float(np.max(np.abs(w))) if w.size else 1.0)
        assert g.shape == w.shape and np.max(np.abs(g - w), initial=0.0) <= 1e-9 * scale, \
            (name, n, k)


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


def dot_memory(n: int = 10**6) -> dict:
    """Peak memory (tracemalloc: numpy's allocations are traced) of one dot
    gradient at n, above what was allocated before the call, as a multiple of
    the inputs' own size (2 arrays of n reals), for chad's compiled gradient and
    the hand-written numpy VJP (JAX's and PyTorch's allocators are not traced).
    Each is called once before, so nothing compiled or cached is counted; the
    gradients returned are (1.0 of the inputs' size)."""
    import tracemalloc

    rng = np.random.default_rng(1)
    args = args_of("dot", n, rng)
    inputs = sum(a.nbytes for a in args)
    out = {}
    for tool, fn in (("chad", chad.grad(PROGRAMS["dot"])), ("numpy", numpy_tools("dot")[1])):
        fn(*args)
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            result = fn(*args)
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        del result
        out[tool] = peak / inputs
    return out


def main(argv: list[str] | None = None) -> None:
    argv = argv or []
    quick = "--quick" in argv
    only = None
    for a in argv:  # --only=a,b: a subset, printed only (the table and plot keep every program)
        if a.startswith("--only="):
            only = [x for x in a[len("--only="):].split(",") if x]
            unknown = [x for x in only if x not in PROGRAMS]
            if unknown or not only:
                raise SystemExit(f"--only= takes names among {', '.join(PROGRAMS)}; got {only}")
    rounds = 3 if quick else ROUNDS
    rows: list = []
    slopes: dict = {}
    series: dict = {}
    print("  ".join(HEADER))
    for name in PROGRAMS:
        if only is not None and name not in only:
            continue
        sizes = SIZES[name][:2] if quick else SIZES[name]
        run_case(name, sizes, rounds, rows, slopes, series)
    if only is not None:
        print(f"slopes: {slopes} (--only: nothing written)")
        return
    lines = ["# Vectorised arrays: chad compiled against numpy, JAX and PyTorch", "",
             f"`python -m benchmarks vectorised` ({time.strftime('%Y-%m-%d %H:%M')}, "
             f"Python {sys.version.split()[0]}, numpy {np.__version__}); per call, median "
             f"of {rounds} interleaved rounds (min..max). chad's gradient is measured "
             f"while one call takes under {CHAD_BUDGET} s.", "",
             "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines += ["", "Log-log slope of chad's gradient time over n (sizes measured):", ""]
    lines += [f"- {name}: {'-' if s is None else f'{s:.2f}'}" for name, s in slopes.items()]
    mem = dot_memory(10**5 if quick else 10**6)
    size = "10^5" if quick else "10^6"
    lines += ["", f"Peak memory of one dot gradient at n = {size} above the baseline "
              f"(tracemalloc), as a multiple of the inputs' own size: chad "
              f"{mem['chad']:.2f}, numpy VJP {mem['numpy']:.2f} (goal: chad at most 3).", "",
              "chad sets glibc's malloc thresholds when it compiles its first function "
              "(chad/memory.py; CHAD_MALLOC=system to leave them): every tool "
              f"timed here runs in the same process with that setting "
              f"(set: {keep_freed_memory()}). chad's loops in C (chad/compile/"
              f"kernels.py; CHAD_NATIVE=0 for numpy's): {kernels.native()}."]
    print(f"memory: {mem}")
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    print(f"slopes: {slopes}\nwritten {OUT}")
    plot(series)


def plot(series: dict) -> None:
    """Gradient time per call against n, one panel per program (log-log)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return
    names = list(series)
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3.2), squeeze=False)
    for ax, name in zip(axes[0], names):
        for tool, pts in sorted(series[name].items()):
            ns, ts = zip(*pts)
            ax.plot(ns, ts, marker="o", label=tool)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(name)
        ax.set_xlabel("n")
    axes[0][0].set_ylabel("gradient, s per call")
    axes[0][0].legend(fontsize="small")
    fig.tight_layout()
    png = OUT.with_suffix(".png")
    fig.savefig(png, dpi=110)
    print(f"written {png}")


if __name__ == "__main__":
    main(sys.argv[1:])
