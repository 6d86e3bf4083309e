"""Program 4 of the compiled-gradient benchmark: a 10-20-5 multilayer perceptron
with a tanh hidden layer and softmax cross-entropy against a target
distribution y,

    h = tanh (W1 x + b1),   z = W2 h + b2,
    loss = (sum y) * logsumexp z - y . z

(logsumexp subtracting the maximum, as in examples/softmax_xent.chad). Weight
matrices are lists of rows (`Array (Array R)`) in chad, 2-D arrays for the
peers; the gradient is taken with respect to all six inputs (weights, biases,
x and y). Inputs are random with a fixed seed.
"""

from __future__ import annotations

import numpy as np

from . import common
from .common import Case, Impl

SIZES = (10, 20, 5)

TEXT = """\
# A 10-20-5 MLP, tanh hidden layer, softmax cross-entropy against y
def max2(p : R * R) : R = if fst p > snd p then fst p else snd p

def logsumexp(z : Array R) : R =
  let m = fold (\\p -> max2(p)) z in
  m + log (sum (map (\\x -> exp (x - m)) z))

def affine(w : Array (Array R), b : Array R, x : Array R) : Array R =
  build (length w) (\\i -> sum (build (length x) (\\j -> w ! i ! j * x ! j)) + b ! i)

def mlp(w1 : Array (Array R), b1 : Array R, w2 : Array (Array R), b2 : Array R,
        x : Array R, y : Array R) : R =
  let h = map (\\a -> tanh a) (affine(w1, b1, x)) in
  let z = affine(w2, b2, h) in
  sum y * logsumexp(z) - sum (build (length z) (\\i -> y ! i * z ! i))
"""


def matrices():
    """(W1, b1, W2, b2, x, y) as float64 numpy arrays, W as 2-D."""
    n_in, n_hid, n_out = SIZES
    rng = np.random.default_rng(20240611)
    w1 = rng.normal(scale=1 / np.sqrt(n_in), size=(n_hid, n_in))
    b1 = rng.normal(scale=0.1, size=n_hid)
    w2 = rng.normal(scale=1 / np.sqrt(n_hid), size=(n_out, n_hid))
    b2 = rng.normal(scale=0.1, size=n_out)
    x = rng.normal(size=n_in)
    y = rng.uniform(0.1, 1.0, size=n_out)
    return w1, b1, w2, b2, x, y / y.sum()


def chad_args():
    """The inputs as chad takes them: a matrix is a tuple of rows."""
    w1, b1, w2, b2, x, y = matrices()
    return tuple(w1), b1, tuple(w2), b2, x, y


def loss(w1, b1, w2, b2, x, y, np_):
    """The loss with a numpy-like module np_ (numpy, autograd.numpy, jax.numpy)."""
    h = np_.tanh(w1 @ x + b1)
    z = w2 @ h + b2
    m = np_.max(z)
    return np_.sum(y) * (m + np_.log(np_.sum(np_.exp(z - m)))) - np_.dot(y, z)


def numpy_impl() -> Impl:
    """The vector-Jacobian product written out by hand in numpy."""
    w1, b1, w2, b2, x, y = matrices()

    def grad():
        h = np.tanh(w1 @ x + b1)
        z = w2 @ h + b2
        m = np.max(z)
        e = np.exp(z - m)
        s = np.sum(e)
        lse = m + np.log(s)
        sy = np.sum(y)
        value = sy * lse - np.dot(y, z)
        gz = sy * e / s - y
        gy = lse - z
        gh = w2.T @ gz
        ga = gh * (1.0 - h * h)
        return value, (np.outer(ga, x), ga, np.outer(gz, h), gz, w1.T @ ga, gy)

    return Impl(grad=grad, primal=lambda: loss(w1, b1, w2, b2, x, y, np))


def torch_impl() -> Impl:
    t = common.torch()
    leaves = tuple(common.torch_leaf(t, a) for a in matrices())

    def f(w1, b1, w2, b2, x, y):
        h = t.tanh(w1 @ x + b1)
        z = w2 @ h + b2
        m = t.max(z)
        return t.sum(y) * (m + t.log(t.sum(t.exp(z - m)))) - t.dot(y, z)

    def grad():
        out = f(*leaves)
        return out, t.autograd.grad(out, leaves)

    def primal():
        with t.no_grad():
            return f(*leaves)

    return Impl(grad=grad, primal=primal)


def jax_impl() -> Impl:
    jax, jnp = common.jax()

    def f(*a):
        return loss(*a, jnp)

    g = jax.jit(jax.value_and_grad(f, argnums=tuple(range(6))))
    p = jax.jit(f)
    args = tuple(jnp.asarray(a) for a in matrices())
    return Impl(grad=lambda: jax.block_until_ready(g(*args)),
                primal=lambda: jax.block_until_ready(p(*args)))


def autograd_impl() -> Impl:
    ag, anp = common.autograd()

    def f(*a):
        return loss(*a, anp)

    g = ag.value_and_grad(f, argnum=tuple(range(6)))
    args = matrices()
    return Impl(grad=lambda: g(*args), primal=lambda: f(*args))


def case(quick: bool = False) -> Case:
    return Case("mlp", "MLP 10-20-5 + softmax xent", TEXT, "mlp", chad_args(), None, False,
                {"torch": torch_impl, "jax": jax_impl, "autograd": autograd_impl,
                 "numpy": numpy_impl})
