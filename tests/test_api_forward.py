"""The JAX-shaped forward API (chad/api.py: jvp, jacfwd, hessian) on decorated
functions and text programs: against central differences, against the reverse
API (the duality <vjp(ct), t> = <ct, jvp(t)>, jacfwd = jacrev, hessian = the
Jacobian of grad), and its errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import chad
from chad import Array
from chad.errors import UsageError


@chad.function
def scalar(x: float, y: float) -> float:
    return x * y + math.sin(x) * y ** 2


@chad.function
def mixed(a: Array[float], k: int, p: tuple[float, int, float]) -> tuple[float, float]:
    s = sum(a[i] * a[i] for i in range(len(a)))
    u, n, v = p
    return s * u + k * n, v * math.exp(0.1 * s)


@chad.function
def vector_out(a: Array[float], s: float) -> Array[float]:
    return [math.exp(a[i] * s) - a[i] for i in range(len(a))]


@chad.function
def cubic(a: Array[float]) -> float:
    return sum(a[i] * a[i] * sum(a[j] for j in range(len(a))) for i in range(len(a)))


def _flat(v) -> np.ndarray:
    if v is None:
        return np.zeros(0)
    if isinstance(v, tuple):
        return np.concatenate([_flat(x) for x in v]) if v else np.zeros(0)
    return np.atleast_1d(np.asarray(v, dtype=np.float64)).ravel()


def _shift(x, t, h):
    """x + h*t over floats, arrays and tuples (None: no tangent)."""
    if t is None:
        return x
    if isinstance(x, tuple):
        return tuple(_shift(a, b, h) for a, b in zip(x, t))
    if isinstance(x, np.ndarray):
        return x + h * np.asarray(t)
    return x + h * t


def _fd_jvp(f, primals, tangents, h=1e-6):
    up = f(*[_shift(x, t, h) for x, t in zip(primals, tangents)])
    down = f(*[_shift(x, t, -h) for x, t in zip(primals, tangents)])
    return (_flat(up) - _flat(down)) / (2 * h)


CASES = [
    (scalar, (0.7, -1.3), (0.4, 2.0)),
    (mixed, (np.array([0.5, -1.0, 2.0]), 3, (1.5, 2, -0.5)),
     (np.array([1.0, 0.3, -2.0]), None, (0.25, None, 1.0))),
    (vector_out, (np.array([0.1, 0.2, -0.4]), 0.9), (np.array([1.0, -1.0, 0.5]), 0.3)),
]


@pytest.mark.parametrize("f,primals,tangents", CASES, ids=["scalar", "mixed", "vector_out"])
@pytest.mark.parametrize("backend", ["compiled", "interp"])
def test_jvp_against_finite_differences_and_the_value(f, primals, tangents, backend):
    value, tangent = chad.jvp(f, primals, tangents, backend=backend)
    np.testing.assert_allclose(_flat(value), _flat(f(*primals)), rtol=1e-12)
    np.testing.assert_allclose(_flat(tangent), _fd_jvp(f, primals, tangents),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("f,primals,tangents", CASES, ids=["scalar", "mixed", "vector_out"])
def test_duality_with_vjp(f, primals, tangents):
    """<vjp(ct), t> = <ct, jvp(t)> for a few cotangents."""
    value, tangent = chad.jvp(f, primals, tangents)
    out, vjp_fn = chad.vjp(f, *primals)
    rng = np.random.default_rng(3)
    for _ in range(3):
        flat = rng.normal(size=_flat(value).size)
        if isinstance(value, tuple):
            ct = tuple(float(c) for c in flat)
        elif isinstance(value, np.ndarray):
            ct = flat
        else:
            ct = float(flat[0])
        grads = vjp_fn(ct)
        lhs = sum(float(np.dot(_flat(g), _flat(t))) for g, t in zip(grads, tangents))
        rhs = float(np.dot(flat, _flat(tangent)))
        assert lhs == pytest.approx(rhs, rel=1e-10, abs=1e-10)


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_jacfwd_equals_jacrev(argnums):
    args = (np.array([0.1, 0.2, -0.4, 1.1]), 0.9)
    fwd = chad.jacfwd(vector_out, argnums)(*args)
    rev = chad.jacrev(vector_out, argnums)(*args)
    for a, b in zip(fwd if isinstance(fwd, tuple) else (fwd,),
                    rev if isinstance(rev, tuple) else (rev,)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    if argnums == 0:
        assert np.shape(fwd) == (4, 4)


def test_jacfwd_of_a_text_program_and_a_scalar_function():
    text = chad.from_text("def f(x : R, y : R) : R = x * exp y")
    assert chad.jacfwd(text, (0, 1))(2.0, 0.5) == pytest.approx(
        (math.exp(0.5), 2.0 * math.exp(0.5)))
    grad = chad.grad(scalar, argnums=(0, 1))(0.7, -1.3)
    assert chad.jacfwd(scalar, (0, 1))(0.7, -1.3) == pytest.approx(grad, rel=1e-12)


@pytest.mark.parametrize("backend", ["compiled", "interp"])
def test_hessian_is_the_jacobian_of_the_gradient(backend):
    a = np.array([0.3, -0.7, 1.2])
    hess = chad.hessian(cubic, backend=backend)(a)
    grad = chad.grad(cubic)
    h = 1e-6
    fd = np.stack([(grad(a + h * e) - grad(a - h * e)) / (2 * h) for e in np.eye(3)], axis=-1)
    np.testing.assert_allclose(hess, fd, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(hess, hess.T, rtol=1e-12)


def test_jvp_of_a_text_program_with_fn():
    assert chad.jvp("def g(x : R) : R = x\ndef f(x : R) : R = x * x", (3.0,), (1.0,),
                    fn="f") == (9.0, 6.0)


@pytest.mark.parametrize("tangents,needle", [
    ((np.ones(3), 1, None), "tangents[1]"),
    ((np.ones(2), None, None), "tangents[0]"),
    ((np.ones(3), None), "2 tangent(s)"),
    ((np.ones(3), None, (1.0, 2.0)), "tangents[2]"),
])
def test_bad_tangents_are_usage_errors(tangents, needle):
    primals = (np.array([0.5, -1.0, 2.0]), 3, (1.5, 2, -0.5))
    with pytest.raises(UsageError) as e:
        chad.jvp(mixed, primals, tangents)
    assert needle in str(e.value)


def test_hessian_rejects_several_argnums_and_non_float_arguments():
    with pytest.raises(UsageError, match="one int"):
        chad.hessian(scalar, (0, 1))
    with pytest.raises(UsageError, match="no float"):
        chad.hessian(mixed, 1)
