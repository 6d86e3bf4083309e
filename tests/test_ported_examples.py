"""The examples ported from the AD benchmark suites (ADBench, GradBench,
ad-dualrev-th): examples/{gmm,ba,lstm,ode,kmeans,llsq,lse,mlp}.chad. Each runs on
the arguments of its `# args:` line: its gradient against finite differences of
its primal, the compiled backend against the interpreter bit for bit (array,
map and parallel runtimes), and the TH2 cost bound of `chad.cost`."""

from __future__ import annotations

import json
import math
import pathlib

import numpy as np
import pytest

import chad
from chad.demo import header

from tests.fd import assert_gradient_matches_fd

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
PORTED = ["gmm", "ba", "lstm", "ode", "kmeans", "llsq", "lse", "mlp"]


def load(name):
    text = (EXAMPLES / f"{name}.chad").read_text()
    args = json.loads(header(text, "args"))
    return text, chad.load(text, f"{name}.chad"), args


@pytest.mark.parametrize("name", PORTED)
def test_ported_example_gradient_matches_finite_differences(name):
    text, prog, args = load(name)
    assert header(text, "fn") is None and header(text, "ctg") is None  # last def, R result
    value = chad.primal(prog)(*args)
    assert math.isfinite(value)
    assert_gradient_matches_fd(chad, prog, args, rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("name", PORTED)
@pytest.mark.parametrize("evm", ["array", "map", "parallel"])
def test_ported_example_compiled_and_interp_agree_bit_for_bit(name, evm):
    _, prog, args = load(name)
    ref = chad.grad(prog, evm=evm, backend="interp")(*args)
    assert repr(chad.grad(prog, evm=evm, backend="compiled")(*args)) == repr(ref)
    if evm != "array":
        assert repr(chad.grad(prog, evm="array", backend="interp")(*args)) == repr(ref)
    assert repr(chad.primal(prog)(*args)) == repr(ref[0])


@pytest.mark.parametrize("name", PORTED)
def test_ported_example_cost_bound_holds(name):
    _, prog, args = load(name)
    r = chad.cost(prog, args)
    assert r.holds and r.gradient_steps <= r.bound
    assert r.primal_steps > 0 and r.primal_steps == chad.run(prog, args)[1]


def test_ported_examples_are_the_files_in_examples():
    assert all((EXAMPLES / f"{n}.chad").exists() for n in PORTED)


# ---- the values against straightforward Python versions of the same objectives

def _lse(xs):
    m = max(xs)
    return m + math.log(sum(math.exp(x - m) for x in xs))


def _gmm(alphas, mus, logstd, xs):
    k, n = len(alphas), len(xs) // 2
    total = 0.0
    for i in range(n):
        terms = []
        for c in range(k):
            z = [(xs[2 * i + j] - mus[2 * c + j]) * math.exp(-logstd[2 * c + j]) for j in range(2)]
            terms.append(alphas[c] - logstd[2 * c] - logstd[2 * c + 1] - 0.5 * (z[0] ** 2 + z[1] ** 2))
        total += _lse(terms)
    return n * _lse(alphas) - total


def _ba(cam, x, w, feat):
    r = np.array(cam[0:3])
    p = np.array(x) - np.array(cam[3:6])
    theta = np.linalg.norm(r)
    k = r / theta
    y = p * math.cos(theta) + np.cross(k, p) * math.sin(theta) + k * (k @ p) * (1 - math.cos(theta))
    u = y[:2] / y[2]
    rsq = u @ u
    proj = cam[6] * u * (1 + cam[9] * rsq + cam[10] * rsq ** 2) + np.array(cam[7:9])
    e = w * (proj - np.array(feat))
    return float(e @ e)


def _lstm(wts, h, c, xs, ys):
    sig = lambda v: 1 / (1 + math.exp(-v))  # noqa: E731
    loss = 0.0
    for x, y in zip(xs, ys):
        gate = lambda g: wts[3 * g] * x + wts[3 * g + 1] * h + wts[3 * g + 2]  # noqa: E731
        i, f, o, g = sig(gate(0)), sig(gate(1)), sig(gate(2)), math.tanh(gate(3))
        c = f * c + i * g
        h = o * math.tanh(c)
        loss += (h - y) ** 2
    return loss


def _ode(k, c, x, v, dt, xt, vt):
    for _ in range(20):
        x, v = x + dt * v, v + dt * (-k * x - c * v)
    return (x - xt) ** 2 + (v - vt) ** 2


def _kmeans(ps, zs):
    P, Z = np.array(ps).reshape(-1, 2), np.array(zs).reshape(-1, 2)
    return float(sum(min(((p - z) ** 2).sum() for z in Z) for p in P))


def _llsq(w, xs, y):
    X = np.array(xs).reshape(len(y), len(w))
    return float(((np.array(y) - X @ np.array(w)) ** 2).sum())


def _mlp(x, w1, b1, w2, b2, label):
    h = np.maximum(0.0, np.array(w1).reshape(len(b1), len(x)) @ np.array(x) + np.array(b1))
    z = np.array(w2).reshape(len(b2), len(b1)) @ h + np.array(b2)
    return _lse(list(z)) - z[label]


REFERENCES = dict(gmm=_gmm, ba=_ba, lstm=_lstm, ode=_ode, kmeans=_kmeans, llsq=_llsq,
                  lse=_lse, mlp=_mlp)


@pytest.mark.parametrize("name", PORTED)
def test_ported_example_value_matches_a_python_reference(name):
    _, prog, args = load(name)
    assert chad.primal(prog)(*args) == pytest.approx(REFERENCES[name](*args), rel=1e-12, abs=1e-14)


def test_the_finite_difference_check_can_fail(monkeypatch):
    """A gradient off by a few per cent in one entry is caught."""
    _, prog, args = load("gmm")
    real = chad.grad

    def skewed(*a, **k):
        at = real(*a, **k)

        def call(*xs, **kw):
            value, grads = at(*xs, **kw)
            g0 = grads[0].copy()
            g0[1] *= 1.03
            return value, (g0,) + tuple(grads[1:])
        return call

    monkeypatch.setattr(chad, "grad", skewed)
    with pytest.raises(AssertionError):
        assert_gradient_matches_fd(chad, prog, args, rel=1e-5, abs=1e-7)


def test_ba_at_the_zero_rotation_has_a_finite_gradient_matching_fd():
    """The small-angle branch of the rotation (r = 0): no sqrt of 0 is differentiated."""
    _, prog, args = load("ba")
    cam = [0.0, 0.0, 0.0] + args[0][3:]
    args = [cam] + args[1:]
    _, grads = chad.grad(prog)(*args)
    assert all(np.all(np.isfinite(g)) for g in grads)
    assert_gradient_matches_fd(chad, prog, args, rel=1e-4, abs=1e-7)
