"""Program 1 of the compiled-gradient benchmark: `x * y + sin x`, two scalars in,
one out. So small that its time per call is the tools' fixed overhead."""

from __future__ import annotations

import math

from . import common
from .common import Case, Impl

TEXT = "def f(x : R, y : R) : R = x * y + sin x\n"
ARGS = (0.7, -1.3)


def numpy_impl() -> Impl:
    """Hand-written in plain Python floats (numpy would only add overhead)."""
    x, y = ARGS
    sin, cos = math.sin, math.cos

    def grad():
        return x * y + sin(x), (y + cos(x), x)

    return Impl(grad=grad, primal=lambda: x * y + sin(x))


def torch_impl() -> Impl:
    t = common.torch()
    x, y = (common.torch_leaf(t, a) for a in ARGS)

    def f(x, y):
        return x * y + t.sin(x)

    def grad():
        out = f(x, y)
        return out, t.autograd.grad(out, (x, y))

    def primal():
        with t.no_grad():
            return f(x, y)

    return Impl(grad=grad, primal=primal)


def jax_impl() -> Impl:
    jax, jnp = common.jax()

    def f(x, y):
        return x * y + jnp.sin(x)

    g = jax.jit(jax.value_and_grad(f, argnums=(0, 1)))
    p = jax.jit(f)
    x, y = (jnp.asarray(a) for a in ARGS)
    return Impl(grad=lambda: jax.block_until_ready(g(x, y)),
                primal=lambda: jax.block_until_ready(p(x, y)))


def autograd_impl() -> Impl:
    ag, anp = common.autograd()

    def f(x, y):
        return x * y + anp.sin(x)

    g = ag.value_and_grad(f, argnum=(0, 1))
    x, y = ARGS
    return Impl(grad=lambda: g(x, y), primal=lambda: f(x, y))


def case(quick: bool = False) -> Case:
    return Case("mul_sin", "x * y + sin x", TEXT, "f", ARGS, None, True,
                {"torch": torch_impl, "jax": jax_impl, "autograd": autograd_impl,
                 "numpy": numpy_impl})
