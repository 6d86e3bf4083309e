"""The programs of benchmarks/bench_compiled.py (chad's compiled gradients
against PyTorch eager, JAX jit, HIPS autograd and a hand-written VJP), one
module per program: chad's text, its inputs, and each peer's implementation.

    mul_sin      x * y + sin x
    rotvecquat   rotating a 3-vector by a quaternion (tomsmeding/ad-dualrev-th)
    chain        a 1000-let scalar chain
    mlp          an MLP 10-20-5 with softmax cross-entropy
    dot          the dot product, n = 1000

common.py holds what they share. tests/test_bench_compiled_suite.py checks
every implementation against chad's interpreter.
"""

from __future__ import annotations

from . import chain, dot, mlp, mul_sin, rotvecquat
from .common import Case

MODULES = (mul_sin, rotvecquat, chain, mlp, dot)


def cases(quick: bool = False) -> list[Case]:
    """The programs in the order of the tables (quick: the chain is shorter)."""
    return [m.case(quick) for m in MODULES]
