"""The programs of the compiled-gradient benchmark written as decorated Python
(`@chad.function`, chad/frontend/), for benchmarks/bench_frontend.py: the
front end's per-call cost, measured against the same programs given as text.

Each `Version` has the decorated function, its arguments as Python values
(flat tuples, 2-D numpy arrays for matrices), the cotangent in the result's
shape, and `same`: True when its translation is the suite's text program up to
names (the same terms, so the same step counts), False where it is written
differently: the quaternion program unpacks triples in one `let (x, y, z)`
where the text nests pairs, the chain's last `x1000 = e; return x1000` is
translated to `e` (no last let), and the MLP's maximum is a loop with `max`
where the text has a `fold`. Values and gradients agree in every case
(tests/test_frontend_bench.py).

The chain of 1000 lets is generated as a Python module (1000 assignments) in
a temporary directory: the front end reads a function's source from its file.
"""

from __future__ import annotations

import importlib.util
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import chad
from chad import Array

from . import chain as chain_case
from . import dot as dot_case
from . import mlp as mlp_case
from . import mul_sin as mul_sin_case
from . import rotvecquat as rot_case

Vec = tuple[float, float, float]


@chad.function
def f(x: float, y: float) -> float:
    return x * y + math.sin(x)


@chad.function
def dot3(p: Vec, q: Vec) -> float:
    px, py, pz = p
    qx, qy, qz = q
    return px * qx + py * qy + pz * qz


@chad.function
def vadd(p: Vec, q: Vec) -> Vec:
    px, py, pz = p
    qx, qy, qz = q
    return px + qx, py + qy, pz + qz


@chad.function
def scale(k: float, p: Vec) -> Vec:
    x, y, z = p
    return k * x, k * y, k * z


@chad.function
def cross(a: Vec, b: Vec) -> Vec:
    ax, ay, az = a
    bx, by, bz = b
    return ay * bz - az * by, az * bz - ax * bz, ax * by - ay * bx  # (as the Haskell source)


@chad.function
def rotvecquat(v: Vec, q: tuple[float, float, float, float]) -> Vec:
    qx, qy, qz, s = q
    u = (qx, qy, qz)
    return vadd(vadd(scale(2.0 * dot3(u, v), u), scale(s * s - dot3(u, u), v)),
                scale(2.0 * s, cross(u, v)))


@chad.function
def affine(w: Array[Array[float]], b: Array[float], x: Array[float]) -> Array[float]:
    return [sum(w[i][j] * x[j] for j in range(len(x))) + b[i] for i in range(len(w))]


@chad.function
def logsumexp(z: Array[float]) -> float:
    m = z[0]
    for i in range(1, len(z)):
        m = max(m, z[i])
    return m + math.log(sum(math.exp(v - m) for v in z))


@chad.function
def mlp(w1: Array[Array[float]], b1: Array[float], w2: Array[Array[float]], b2: Array[float],
        x: Array[float], y: Array[float]) -> float:
    h = np.tanh(affine(w1, b1, x))
    z = affine(w2, b2, h)
    return sum(y) * logsumexp(z) - sum(y[i] * z[i] for i in range(len(z)))


@chad.function
def dot(a: Array[float], b: Array[float]) -> float:
    return sum(a[i] * b[i] for i in range(len(a)))


def chain_function(n: int):
    """The chain of n lets as a decorated Python function (a generated module)."""
    lines = ["import math", "import chad", "", "", "@chad.function",
             "def chain(x0: float, y: float) -> float:"]
    lines += [f"    x{k + 1} = x{k} + {chain_case.STEP!r} * (y + {chain_case.HALF!r} * "
              f"math.sin(x{k}))" for k in range(n)]
    lines.append(f"    return x{n}")
    folder = Path(tempfile.mkdtemp(prefix="chad_chain_"))
    path = folder / f"chain_{n}.py"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"chad_bench_chain_{n}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.chain


@dataclass
class Version:
    key: str  # the suite case's key
    fn: Any  # the decorated function
    args: tuple  # Python arguments
    ctg: Any  # the cotangent in the result's shape (None: the result is a float)
    same: bool  # the translation is the suite's program (up to names)


def versions(quick: bool = False) -> list[Version]:
    v, q = rot_case.ARGS
    flat_v = (v[0], v[1][0], v[1][1])
    flat_q = (q[0], q[1][0], q[1][1][0], q[1][1][1])
    c0, (c1, c2) = rot_case.CTG
    n = chain_case.QUICK_N if quick else chain_case.N
    return [
        Version("mul_sin", f, mul_sin_case.ARGS, None, True),
        Version("rotvecquat", rotvecquat, (flat_v, flat_q), (c0, c1, c2), False),
        Version("chain", chain_function(n), chain_case.ARGS, None, False),
        Version("mlp", mlp, mlp_case.matrices(), None, False),
        Version("dot", dot, dot_case.vectors(), None, True),
    ]
