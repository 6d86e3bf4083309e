"""Program 5 of the compiled-gradient benchmark: the dot product of two vectors
of length n = 1000 (the program of examples/dot.chad), gradient with respect
to both. Inputs are random with a fixed seed."""

from __future__ import annotations

import numpy as np

from . import common
from .common import Case, Impl

N = 1000

TEXT = """\
# examples/dot.chad
def dot(a : Array R, b : Array R) : R = sum (build (length a) (\\i -> a ! i * b ! i))
"""


def vectors(n: int = N):
    rng = np.random.default_rng(1000)
    return rng.normal(size=n), rng.normal(size=n)


def numpy_impl() -> Impl:
    a, b = vectors()

    def grad():
        return a @ b, (b.copy(), a.copy())  # fresh arrays, as every other tool returns

    return Impl(grad=grad, primal=lambda: a @ b)


def torch_impl() -> Impl:
    t = common.torch()
    a, b = (common.torch_leaf(t, v) for v in vectors())

    def grad():
        out = t.dot(a, b)
        return out, t.autograd.grad(out, (a, b))

    def primal():
        with t.no_grad():
            return t.dot(a, b)

    return Impl(grad=grad, primal=primal)


def jax_impl() -> Impl:
    jax, jnp = common.jax()
    g = jax.jit(jax.value_and_grad(jnp.dot, argnums=(0, 1)))
    p = jax.jit(jnp.dot)
    a, b = (jnp.asarray(v) for v in vectors())
    return Impl(grad=lambda: jax.block_until_ready(g(a, b)),
                primal=lambda: jax.block_until_ready(p(a, b)))


def autograd_impl() -> Impl:
    ag, anp = common.autograd()
    g = ag.value_and_grad(anp.dot, argnum=(0, 1))
    a, b = vectors()
    return Impl(grad=lambda: g(a, b), primal=lambda: anp.dot(a, b))


def case(quick: bool = False) -> Case:
    return Case("dot", f"dot, n = {N}", TEXT, "dot", vectors(), None, False,
                {"torch": torch_impl, "jax": jax_impl, "autograd": autograd_impl,
                 "numpy": numpy_impl})
