"""The JAX-shaped reverse API (chad/api.py): grad with argnums, value_and_grad,
vjp, jacrev and resolve, for decorated functions and text programs alike;
each against central differences and against the others."""

from __future__ import annotations

import math

import numpy as np
import pytest

import chad
from chad import Array
from chad.errors import ChadError, UsageError


@chad.function
def scalar(x: float, y: float) -> float:
    return x * y + math.sin(x) * y ** 2


@chad.function
def with_arrays(w: Array[float], x: Array[float], b: float) -> float:
    z = sum(w[i] * x[i] for i in range(len(x))) + b
    return math.tanh(z) + 0.5 * z ** 2


@chad.function
def vector_out(a: Array[float], s: float) -> Array[float]:
    return [math.exp(a[i] * s) - a[i] for i in range(len(a))]


@chad.function
def tuple_io(p: tuple[float, float], n: int) -> tuple[float, Array[float]]:
    u, v = p
    return u * v * n, [u + k * v for k in range(n)]


@chad.function
def matrix_in(m: Array[Array[float]], v: Array[float]) -> float:
    return sum(sum(m[i][j] * v[j] for j in range(len(v))) ** 2 for i in range(len(m)))


TEXT = "def f(x : R, y : R) : R = x * y + sin x * y ** 2"
RNG = np.random.default_rng(7)
A3 = RNG.normal(size=3)
B3 = RNG.normal(size=3)
M = RNG.normal(size=(2, 3))


# ------------------------------------------------------------ finite differences

def _flat(v):
    if isinstance(v, tuple):
        return np.concatenate([_flat(x) for x in v]) if v else np.zeros(0)
    return np.asarray(v, dtype=float).ravel()


def _rebuild(like, flat):
    if isinstance(like, tuple):
        out, k = [], 0
        for x in like:
            n = _flat(x).size
            out.append(_rebuild(x, flat[k:k + n]))
            k += n
        return tuple(out)
    if isinstance(like, np.ndarray):
        return flat.reshape(like.shape).copy()
    return float(flat[0])


def fd_jacobian(f, args, i, h=1e-6):
    """d f(args) / d args[i] by central differences: result-size x argument-size."""
    x0 = _flat(args[i])
    cols = []
    for k in range(x0.size):
        e = np.zeros_like(x0)
        e[k] = h
        hi, lo = list(args), list(args)
        hi[i], lo[i] = _rebuild(args[i], x0 + e), _rebuild(args[i], x0 - e)
        cols.append((_flat(f(*hi)) - _flat(f(*lo))) / (2 * h))
    return np.stack(cols, axis=1)


def close(a, b, rtol=1e-6, atol=1e-7):
    np.testing.assert_allclose(_flat(a), _flat(b), rtol=rtol, atol=atol)


# ------------------------------------------------------------ grad, value_and_grad

SCALAR_CASES = [
    (scalar, (1.3, -0.7)),
    (with_arrays, (A3, B3, 0.2)),
    (matrix_in, (M, A3)),
]


@pytest.mark.parametrize("f,args", SCALAR_CASES, ids=[f.__name__ for f, _ in SCALAR_CASES])
def test_grad_against_finite_differences(f, args):
    for i in range(len(args)):
        g = chad.grad(f, argnums=i)(*args)
        assert np.shape(g) == np.shape(args[i])
        close(g, fd_jacobian(f, args, i))


@pytest.mark.parametrize("f,args", SCALAR_CASES, ids=[f.__name__ for f, _ in SCALAR_CASES])
def test_value_and_grad_agree_with_call_and_grad(f, args):
    nums = tuple(range(len(args)))
    value, grads = chad.value_and_grad(f, argnums=nums)(*args)
    assert value == pytest.approx(f(*args), rel=1e-14)
    assert value == pytest.approx(f.__wrapped__(*args), rel=1e-12)
    assert isinstance(grads, tuple) and len(grads) == len(args)
    for i in nums:
        close(grads[i], chad.grad(f, i)(*args), rtol=1e-14, atol=0)
    # vjp with cotangent 1 gives the same gradients; so does jacrev
    out, vjp_fn = chad.vjp(f, *args)
    assert out == pytest.approx(value, rel=1e-14)
    for i, g in enumerate(vjp_fn(1.0)):
        close(g, grads[i], rtol=1e-14, atol=0)
    close(chad.jacrev(f, argnums=nums)(*args), grads, rtol=1e-14, atol=0)


def test_grad_negative_argnums_and_interp_backend():
    g = chad.grad(with_arrays, argnums=-1)(A3, B3, 0.2)
    close(g, chad.grad(with_arrays, argnums=2)(A3, B3, 0.2))
    compiled = chad.grad(with_arrays, argnums=(0, 1, 2))(A3, B3, 0.2)
    interp = chad.grad(with_arrays, argnums=(0, 1, 2), backend="interp")(A3, B3, 0.2)
    close(compiled, interp, rtol=1e-13, atol=1e-15)


# ------------------------------------------------------------ vjp and jacrev

def test_jacrev_of_a_vector_result_against_finite_differences():
    args = (A3, 0.8)
    j0 = chad.jacrev(vector_out)(*args)
    assert j0.shape == (3, 3)
    close(j0, fd_jacobian(vector_out, args, 0))
    j1 = chad.jacrev(vector_out, argnums=1)(*args)
    assert j1.shape == (3,)
    close(j1, fd_jacobian(vector_out, args, 1)[:, 0])


def test_vjp_is_the_cotangent_times_the_jacobian():
    args = (A3, 0.8)
    out, vjp_fn = chad.vjp(vector_out, *args)
    close(out, vector_out(*args), rtol=1e-15, atol=0)
    ct = np.array([0.3, -1.0, 2.0])
    ga, gs = vjp_fn(ct)
    jac = chad.jacrev(vector_out, argnums=(0, 1))(*args)
    close(ga, ct @ jac[0])
    close(gs, ct @ jac[1])
    # and against finite differences of <ct, f>
    close(ga, fd_jacobian(lambda a, s: ct @ vector_out(a, s), args, 0))


def test_tuple_inputs_and_outputs():
    args = ((1.5, -0.5), 3)
    out, vjp_fn = chad.vjp(tuple_io, *args)
    want = tuple_io.__wrapped__(*args)
    assert out[0] == pytest.approx(want[0])
    close(out[1], want[1])
    gp, gn = vjp_fn((1.0, np.array([1.0, 0.0, 2.0])))
    assert gn is None  # an int's gradient
    assert isinstance(gp, tuple) and len(gp) == 2
    f = lambda p: tuple_io(p, 3)[0] + np.dot([1.0, 0.0, 2.0], tuple_io(p, 3)[1])  # noqa: E731
    close(gp, fd_jacobian(f, [args[0]], 0))
    jac = chad.jacrev(tuple_io)(*args)  # (d out0 / dp, d out1 / dp)
    assert isinstance(jac, tuple) and len(jac) == 2
    close(jac[0], fd_jacobian(lambda p: tuple_io(p, 3)[0], [args[0]], 0))
    close(np.stack(jac[1][0:1] + jac[1][1:2], axis=1),
          fd_jacobian(lambda p: tuple_io(p, 3)[1], [args[0]], 0))


def test_matrix_argument_keeps_its_shape():
    g = chad.grad(matrix_in)(M, A3)
    assert isinstance(g, np.ndarray) and g.shape == M.shape
    close(g, fd_jacobian(matrix_in, (M, A3), 0).reshape(M.shape))


# ------------------------------------------------------------ text programs

def test_text_programs_take_the_same_api():
    f = chad.from_text(TEXT)
    args = (1.3, -0.7)
    close(chad.grad(f, argnums=(0, 1))(*args), chad.grad(scalar, argnums=(0, 1))(*args),
          rtol=1e-14, atol=0)
    v, g = chad.value_and_grad(TEXT, argnums=1)(*args)
    assert v == pytest.approx(scalar(*args), rel=1e-14)
    close(g, fd_jacobian(scalar, args, 1))
    close(chad.jacrev(TEXT, argnums=0)(*args), fd_jacobian(scalar, args, 0))
    out, vjp_fn = chad.vjp(f, *args)
    close(vjp_fn(2.0), 2.0 * np.asarray(chad.grad(f, argnums=(0, 1))(*args)))
    assert f(*args) == pytest.approx(scalar(*args), rel=1e-14)


def test_the_earlier_call_forms_still_work():
    value, (dx, dy) = chad.grad(TEXT)(1.3, -0.7)
    assert (dx, dy) == pytest.approx(chad.grad(scalar, argnums=(0, 1))(1.3, -0.7), rel=1e-14)
    value2, back = chad.vjp(TEXT, "f")(1.3, -0.7)
    assert value2 == value and back(1.0) == pytest.approx((dx, dy))


def test_resolve():
    prog, name = chad.resolve(with_arrays)
    assert name == "with_arrays" and prog.find(name).name == name
    prog2, name2 = chad.resolve(TEXT)
    assert name2 == "f"
    assert chad.resolve(chad.from_text(TEXT)) == (prog2, name2) or chad.resolve(
        chad.from_text(TEXT))[1] == "f"
    with pytest.raises(UsageError):
        chad.resolve(42)


# ------------------------------------------------------------ bad input

BAD = [
    (lambda: chad.grad(scalar)(1.0), "takes 2 argument"),
    (lambda: chad.grad(scalar)(1.0, "2"), "argument y of scalar: expected float"),
    (lambda: chad.grad(with_arrays)(M, B3, 0.2), "shape (2, 3)"),
    (lambda: chad.grad(with_arrays)(A3.astype(complex), B3, 0.2), "dtype complex128"),
    (lambda: chad.grad(with_arrays)(A3[:2], B3, 0.2), "out of range"),  # a runtime error
    (lambda: chad.grad(tuple_io), "need a float result"),
    (lambda: chad.grad(tuple_io, argnums=1), "need a float result"),
    (lambda: chad.jacrev(tuple_io, argnums=1), "has no float"),
    (lambda: chad.grad(scalar, argnums=2), "has 2 argument"),
    (lambda: chad.grad(scalar, argnums=(0, 0)), "twice"),
    (lambda: chad.grad(scalar, argnums=True), "argnums must be"),
    (lambda: chad.vjp(vector_out, A3, 0.8)[1](np.ones(2)), None),  # wrong cotangent length
    (lambda: chad.vjp(vector_out, A3, 0.8)[1]("x"), "cotangent"),
    (lambda: chad.grad(chad.from_text(TEXT), fn="g"), None),
    (lambda: chad.value_and_grad(TEXT, fn="nope"), "nope"),
    (lambda: chad.grad(matrix_in)(np.ones((2, 2, 2)), A3), None),
]


@pytest.mark.parametrize("call,message", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_arguments_are_chad_errors(call, message):
    with pytest.raises(ChadError) as info:
        call()
    if message is not None:
        assert message in str(info.value)


def test_run_and_cost_take_python_arguments():
    value, steps = chad.run(scalar, [1.3, -0.7])
    text_value, text_steps = chad.run(TEXT, [1.3, -0.7])
    assert value == text_value and steps == text_steps  # the same program, step for step
    report = chad.cost(scalar, [1.3, -0.7])
    assert report.primal_steps == steps and report.holds
    assert report.gradient_steps == chad.cost(TEXT, [1.3, -0.7]).gradient_steps
    r2 = chad.cost(vector_out, [A3, 0.8], ctg=np.ones(3))
    assert r2.holds and r2.ctg_size >= 3


def test_keyword_arguments():
    assert scalar(x=1.3, y=-0.7) == scalar(1.3, -0.7)
    assert chad.grad(scalar, argnums=1)(1.3, y=-0.7) == chad.grad(scalar, argnums=1)(1.3, -0.7)
    with pytest.raises(UsageError, match="missing the argument y"):
        scalar(x=1.0)
    with pytest.raises(UsageError, match="unexpected or repeated argument x"):
        scalar(1.0, x=2.0)


@chad.function
def int_array_sum(a: Array[int], x: float) -> float:
    return sum(a) * x


def test_out_of_range_numbers_are_usage_errors():
    with pytest.raises(UsageError, match="too large for a float"):
        scalar(10 ** 400, 1.0)
    with pytest.raises(UsageError, match="64-bit"):
        int_array_sum([2 ** 70, 1], 1.0)
    assert int_array_sum([2, 3], 1.5) == 7.5
    assert int_array_sum(np.array([2, 3]), 1.5) == 7.5
    with pytest.raises(UsageError, match="expected chad.Array\\[int\\]"):
        int_array_sum(np.array([2.0, 3.0]), 1.5)
