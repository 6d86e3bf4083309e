"""What every program of the compiled-gradient benchmark shares: the `Case` (a
program in chad's language, its inputs, its cotangent and one implementation
per peer), the `Impl` a tool gives for a case (gradient and primal calls bound
to the inputs), the lazy set-up of the peers (PyTorch, JAX, HIPS autograd), the
chad implementations (compiled backend and interpreter), and the check that two
gradients are the same.

The peers are imported only when a case asks for them, so this package imports
without them (tests/test_imports.py imports every module on its own).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

# The tools, in the order of the tables. "chad" is the compiled backend (or the
# interpreter, if the benchmark is told to measure that); "chad-interp" is the
# reference evaluator (chad/costmodel/evaluate.py), timed on the small programs.
PEERS = ("torch", "jax", "autograd", "numpy")
MODULES = {"torch": "torch", "jax": "jax", "autograd": "autograd", "numpy": "numpy"}

RTOL = 1e-9  # the agreement required of every gradient and value, see `compare`


@dataclass
class Impl:
    """One tool's implementation of one case, bound to the case's inputs.

    grad()    value and gradient, in the tool's own representation
    primal()  the value alone
    unpack(r) (value, gradients) of grad()'s result as Python floats, tuples
              and numpy arrays, in the order of chad's parameters (for `compare`)
    """

    grad: Callable[[], Any]
    primal: Callable[[], Any]
    unpack: Callable[[Any], tuple[Any, Any]] = lambda r: r


@dataclass
class Case:
    """A benchmark program: chad's text and def, the inputs as chad takes them
    (floats, tuples for pairs, numpy arrays for Array R, tuples of arrays for
    Array (Array R)), the cotangent of the result (None: the result is R and the
    cotangent 1.0), and a factory per peer returning an `Impl`."""

    key: str
    title: str
    text: str
    fn: str
    args: tuple
    ctg: Any
    scalar: bool  # a "scalar program": no arrays (the goals single these out)
    peers: dict[str, Callable[[], Impl]] = field(default_factory=dict)
    # chad's compile time may be long (a big program): the benchmark compiles it
    # first in a child process with a time limit
    compile_guard: bool = False


def available(tool: str) -> bool:
    """Whether the peer's package is installed (without importing it)."""
    return importlib.util.find_spec(MODULES.get(tool, tool)) is not None


# ------------------------------------------------------------------ peers' set-up

def torch():
    """PyTorch, CPU, eager, one intra-op thread (the programs are tiny: threads
    cost more than they give, and the machine has two shared cores)."""
    import torch as t

    if t.get_num_threads() != 1:
        t.set_num_threads(1)
    return t


def jax():
    """(jax, jax.numpy) with float64 enabled, on the CPU."""
    import jax as j

    j.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    return j, jnp


def autograd():
    """(autograd, autograd.numpy): HIPS autograd."""
    import autograd as ag
    import autograd.numpy as anp

    return ag, anp


def torch_leaf(t, value):
    """A float64 leaf tensor requiring its gradient."""
    return t.tensor(value, dtype=t.float64, requires_grad=True)


def torch_ctg(t, ctg):
    """A cotangent in the shape torch.autograd.grad takes for a tuple of outputs."""
    return tuple(t.tensor(c, dtype=t.float64) for c in flatten(ctg))


# ------------------------------------------------------------------ chad

def chad_grad(text: str, fn: str, backend: str):
    """`chad.grad(text, fn, backend=...)`; without the keyword where chad.grad
    does not take it yet (then only the interpreter exists)."""
    import chad

    try:
        return chad.grad(text, fn, backend=backend)
    except TypeError:
        if backend != "interp":
            raise
        return chad.grad(text, fn)


def chad_primal(text: str, fn: str, backend: str):
    """`chad.primal(text, fn, backend=...)`, or chad.run where there is no primal."""
    import chad
    import chad.api as api

    primal = getattr(chad, "primal", None) or getattr(api, "primal", None)
    if primal is not None:
        return primal(text, fn, backend=backend)
    if backend != "interp":
        raise RuntimeError("chad has no primal(...) for the compiled backend")
    return lambda *args: chad.run(text, list(args), fn)[0]


def clear_compile_cache() -> bool:
    """Empty the compiled backend's cache (chad.compiler.clear_cache, or where
    it lives today, chad.compile.backend.clear_cache); False if there is none."""
    for name in ("chad.compiler", "chad.compile.backend"):
        try:
            clear = getattr(importlib.import_module(name), "clear_cache", None)
        except ImportError:
            continue
        if clear is not None:
            clear()
            return True
    return False


def chad_impl(case: Case, backend: str) -> Impl:
    """chad's gradient and primal of the case, on the given backend."""
    g = chad_grad(case.text, case.fn, backend)
    p = chad_primal(case.text, case.fn, backend)
    args = case.args
    if case.ctg is None:
        return Impl(grad=lambda: g(*args), primal=lambda: p(*args))
    ctg = case.ctg
    return Impl(grad=lambda: g(*args, ctg=ctg), primal=lambda: p(*args))


# ------------------------------------------------------------------ comparing

def flatten(x) -> np.ndarray:
    """Every real of a nested value (floats, tuples, lists, numpy arrays, torch
    tensors, jax arrays), row-major, as one float64 vector. Gradients that are
    the same function of the same inputs flatten to the same vector."""
    out: list[np.ndarray] = []

    def go(v):
        if v is None:
            return
        if isinstance(v, (tuple, list)):
            for e in v:
                go(e)
            return
        if hasattr(v, "detach"):  # a torch tensor
            v = v.detach().cpu().numpy()
        out.append(np.asarray(v, dtype=np.float64).ravel())

    go(x)
    return np.concatenate(out) if out else np.zeros(0)


def compare(got, want, rtol: float = RTOL) -> tuple[bool, float]:
    """(agree, error): the largest difference divided by the largest magnitude
    of `want` (a norm-wise relative error, so entries that are zero up to
    rounding do not fail the check), and whether it is at most rtol. Shapes must
    match."""
    a, b = flatten(got), flatten(want)
    if a.shape != b.shape:
        return False, float("inf")
    if a.size == 0:
        return True, 0.0
    scale = float(np.max(np.abs(b)))
    diff = float(np.max(np.abs(a - b)))
    if not np.isfinite(diff):
        return False, float("inf")
    err = diff / scale if scale > 0 else diff
    return err <= rtol, err
