"""Program 3 of the compiled-gradient benchmark: a chain of N = 1000 scalar lets,

    def chain(x0 : R, y : R) : R =
      let x1 = x0 + 0.01 * (y + 0.5 * sin x0) in
      ...
      let x1000 = x999 + 0.01 * (y + 0.5 * sin x999) in
      x1000

generated here: Euler steps of x' = y + 0.5 sin x. With y = 1.7 > 0.5 the flow
has no fixed point to converge to (x grows by about 0.017 a step), and each step
multiplies the derivative by 1 + 0.005 cos x, so values and both gradients stay
of moderate size (no overflow, no underflow, no vanishing) for any N. Long straight-line code: it measures
per-operation cost and, for chad and JAX, compile time.
"""

from __future__ import annotations

import math

from . import common
from .common import Case, Impl

N = 1000
QUICK_N = 100
ARGS = (0.4, 1.7)
STEP = 0.01
HALF = 0.5


def text(n: int = N) -> str:
    lines = [f"# {n} lets: x(k+1) = x(k) + {STEP} * (y + {HALF} * sin x(k))",
             "def chain(x0 : R, y : R) : R ="]
    lines += [f"  let x{k + 1} = x{k} + {STEP} * (y + {HALF} * sin x{k}) in" for k in range(n)]
    lines.append(f"  x{n}")
    return "\n".join(lines) + "\n"


def run(x, y, n, sin):
    """The chain on any numbers (floats, 0-d tensors, tracers, autograd boxes)."""
    for _ in range(n):
        x = x + STEP * (y + HALF * sin(x))
    return x


def numpy_impl(n: int = N) -> Impl:
    """Hand-written: the forward pass keeps cos x(k), the backward pass runs
    the chain rule in reverse."""
    x0, y = ARGS
    sin, cos = math.sin, math.cos

    def grad():
        cs = []
        x = x0
        for _ in range(n):
            cs.append(cos(x))
            x = x + STEP * (y + HALF * sin(x))
        gx, gy = 1.0, 0.0
        for k in range(n - 1, -1, -1):
            gy += gx * STEP
            gx = gx + gx * STEP * HALF * cs[k]
        return x, (gx, gy)

    return Impl(grad=grad, primal=lambda: run(x0, y, n, sin))


def torch_impl(n: int = N) -> Impl:
    t = common.torch()
    x, y = (common.torch_leaf(t, a) for a in ARGS)

    def grad():
        out = run(x, y, n, t.sin)
        return out, t.autograd.grad(out, (x, y))

    def primal():
        with t.no_grad():
            return run(x, y, n, t.sin)

    return Impl(grad=grad, primal=primal)


def jax_impl(n: int = N) -> Impl:
    """The loop unrolled by tracing, as chad's program is unrolled (a
    jax.lax.fori_loop would be a different program)."""
    jax, jnp = common.jax()

    def f(x, y):
        return run(x, y, n, jnp.sin)

    g = jax.jit(jax.value_and_grad(f, argnums=(0, 1)))
    p = jax.jit(f)
    x, y = (jnp.asarray(a) for a in ARGS)
    return Impl(grad=lambda: jax.block_until_ready(g(x, y)),
                primal=lambda: jax.block_until_ready(p(x, y)))


def autograd_impl(n: int = N) -> Impl:
    ag, anp = common.autograd()

    def f(x, y):
        return run(x, y, n, anp.sin)

    g = ag.value_and_grad(f, argnum=(0, 1))
    x, y = ARGS
    return Impl(grad=lambda: g(x, y), primal=lambda: f(x, y))


def case(quick: bool = False) -> Case:
    n = QUICK_N if quick else N
    return Case("chain", f"{n}-let chain", text(n), "chain", ARGS, None, True,
                {"torch": lambda: torch_impl(n), "jax": lambda: jax_impl(n),
                 "autograd": lambda: autograd_impl(n), "numpy": lambda: numpy_impl(n)},
                compile_guard=True)
