"""A gradient leaves no reference cycles behind: everything a call makes (the
forward pass's residuals, arrays of n reals among them) is freed when the
call returns, by reference counting, not when Python's cyclic GC next runs.

The GC runs after so many container allocations, not after so many bytes: a
cycle holding a call's arrays kept the parallel runtime's forward results of
the two-branch benchmark alive for several calls (183 MB more in use after
each call at n = 4 * 10^6, and fresh pages to fault in for the next one). The
cycles were local functions calling themselves (a closure refers to its own
cell): the fork recursion of the compiled parallel runtime and of the
parallel EVM's `sequence`, fold's balanced reduction and unTree's actions.

Checked on every bundled example, on the three runtimes (and the
formalisation's LACM on the interpreter), with both backends,
for grad and vjp; the parallel runtimes fork at every heavy-enough split
(grain 1), so their fork paths run on these small inputs.
"""

from __future__ import annotations

import gc
import json
import os
import re

import pytest

import chad
from chad import api_core
from chad.compile import parallel_support
from chad.runtime.parallel_evm import ParallelEVM

ROOT = os.path.join(os.path.dirname(__file__), "..", "examples")
EXAMPLES = sorted(f for f in os.listdir(ROOT) if f.endswith(".chad"))


def _example(name: str):
    text = open(os.path.join(ROOT, name)).read()
    args = json.loads(re.search(r"^# args: (.*)$", text, re.M).group(1))
    m = re.search(r"^# ctg: (.*)$", text, re.M)
    return text, args, ({"ctg": json.loads(m.group(1))} if m else {})


def _cycles_made_by(call, full: bool = False) -> int:
    """The objects in reference cycles that call() makes and leaves
    unreachable. With the collector off during the call, everything the call
    allocates stays in the youngest generation, so collecting that generation
    alone, before and after, finds every cycle of the call's own objects (a
    full collection of a test worker's heap takes about a second; this,
    milliseconds). It misses a cycle through an object older than the call
    (an older object the call lets go of, linked to a new one: the older
    generation's reference keeps the new one as a root): `full` collects the
    whole heap instead, as a few tests below do."""
    if full:
        gc.collect()
    else:
        gc.collect(0)
    gc.disable()
    try:
        call()
        return gc.collect() if full else gc.collect(0)
    finally:
        gc.enable()


def test_a_cycle_made_by_the_call_is_found():
    """The check above sees a cycle of the call's own objects, also one that
    holds older objects, and none where the call makes none; a cycle through
    an older object only with `full`."""
    old = [object() for _ in range(3)]
    holder = [{"old": []}]  # (a container, tracked: in an older generation after this)
    gc.collect()

    def cycle():
        a = {"old": old}
        a["self"] = a

    def no_cycle():
        return [{"old": old} for _ in range(100)]

    def through_older():
        was = holder.pop()
        new = {"payload": [0.0] * 10, "old": was}
        was["new"] = new
        holder.append({"old": []})  # (for the next call)

    assert _cycles_made_by(cycle) > 0
    assert _cycles_made_by(no_cycle) == 0
    assert _cycles_made_by(through_older, full=True) > 0
    gc.collect()  # (the young check misses it, as its doc says)
    assert _cycles_made_by(no_cycle, full=True) == 0


# (the formalisation's LACM, spec, runs on the interpreter only)
RUNS = [(evm, backend) for evm in ("array", "map", "parallel") for backend in ("compiled", "interp")]
RUNS.append(("spec", "interp"))


@pytest.mark.parametrize("evm,backend", RUNS)
@pytest.mark.parametrize("name", EXAMPLES)
def test_a_gradient_call_leaves_no_cycles(name, evm, backend, forking):
    text, args, kw = _example(name)
    grad = chad.grad(text, evm=evm, backend=backend)
    grad(*args, **kw)  # compiled, caches filled
    assert _cycles_made_by(lambda: grad(*args, **kw)) == 0


@pytest.mark.parametrize("evm", ["array", "parallel"])
@pytest.mark.parametrize("name", ["two_branches.chad", "sumsq.chad", "lse.chad", "kmeans.chad",
                                  "gmm.chad", "lstm.chad"])
def test_a_vjp_leaves_no_cycles(name, evm, forking):
    text, args, kw = _example(name)
    vjp = chad.vjp(text, evm=evm)
    ctg = kw.get("ctg", 1.0)
    vjp(*args)[1](ctg)

    def call():
        _value, back = vjp(*args)
        back(ctg)

    assert _cycles_made_by(call) == 0


@pytest.mark.parametrize("name,evm,backend", [
    ("two_branches.chad", "parallel", "compiled"), ("two_branches.chad", "parallel", "interp"),
    ("kmeans.chad", "array", "compiled"), ("lstm.chad", "map", "compiled"),
])
def test_no_cycles_through_older_objects_either(name, evm, backend, forking):
    """A few gradients (the fork paths, whose recursion made the cycles; a
    nested loop's; the map runtime's) checked against the whole heap."""
    text, args, kw = _example(name)
    grad = chad.grad(text, evm=evm, backend=backend)
    grad(*args, **kw)
    assert _cycles_made_by(lambda: grad(*args, **kw), full=True) == 0


def test_the_parallel_runtimes_fork_here(forking):
    """The checks above run the fork paths (which made the cycles)."""
    text, args, _kw = _example("two_branches.chad")
    parallel_support.stats.reset()
    chad.grad(text, evm="parallel")(*args)
    assert parallel_support.stats.decided > 0
    machine = api_core.make_evm("parallel")
    assert isinstance(machine, ParallelEVM) and machine.grain == 1
