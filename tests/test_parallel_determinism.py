"""The parallel runtime is deterministic (docs/runtimes.md, "Determinism"): a forked task logs its adds to the cells that existed at the
fork, and the forking thread replays the log at the join, after its own side —
so every cell receives the `plusv` calls of the sequential runtime in program
order, whatever order the threads finish in.

What is promised (docs/runtimes.md, "Determinism"): the parallel runtime's
results, final cells and step counts are *bit-identical to the array runtime's*
(hence also from run to run), for any values — floats that round, injections of
mismatched sides included.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import chad
from chad.values import Inj
from chad.costmodel.measure import measure
from chad.runtime import ArrayEVM, ParallelEVM

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _bits(gradient) -> tuple:
    """A gradient (floats, numpy arrays, tuples) as exact bit patterns."""
    out = []
    for g in gradient:
        if isinstance(g, np.ndarray):
            out.append(g.tobytes())
        elif isinstance(g, float):
            out.append(g.hex())
        else:
            out.append(repr(g))
    return tuple(out)


def test_a_3000_element_map_gives_bit_identical_gradients_every_run():
    prog = chad.load((EXAMPLES / "map_closure.chad").read_text())
    xs = [((i * 37) % 101) / 25.0 - 2.0 for i in range(3000)]
    g = chad.grad(prog, evm="parallel")
    runs = {(v.hex(), _bits(grads)) for v, grads in (g(0.5, xs) for _ in range(20))}
    assert len(runs) == 1
    # ... and bit-identical to the array runtime's per-element code (its
    # vectorised code computes tanh with numpy's, not the math module's:
    # docs/compiler.md, "Vectorisation")
    from chad.compile import backend

    with backend.vectorising(False):
        v, grads = chad.grad(prog, evm="array")(0.5, xs)
    assert runs == {(v.hex(), _bits(grads))}
    # the runtime really forked, and the step count is the array runtime's
    machine = ParallelEVM()
    par, arr = measure(prog, [0.5, xs], evm=machine), measure(prog, [0.5, xs], evm="array")
    assert machine.forks_submitted > 0
    # one map: 813109 before its forward pass and dense cotangents were fused
    # (unzipMap, scatterBag: 6 steps less per map, docs/arrays.md)
    assert par.gradient_steps == arr.gradient_steps == 813103
    assert chad.cost(prog, [0.5, xs], evm="parallel") == chad.cost(prog, [0.5, xs])


# ---------------------------------------------------------------------------
# order-sensitive sums, with the threads made to finish in random orders

BIG = 2.0 ** 53  # BIG + 1.0 rounds back to BIG: the result depends on the order


def _jitter(evm, rng: random.Random):
    """An action that sleeps a random moment on the thread that runs it (via bind's
    continuation), so sibling branches finish in a different order every time."""
    def k(_):
        time.sleep(rng.random() * 0.002)
        return evm.pure(None), 0

    return evm.bind(evm.pure(None), k)


def _order_sensitive(evm, rng):
    """8 branches of order-sensitive adds into shared cells (0, 1: reals; 2: a pair
    with a sum of either side inside, where plusv of mismatched sides gives
    nothing), each branch also pushing a scope of its own."""
    branches = []
    for b in range(8):
        vals = [BIG, 1.0, -BIG, 0.1, 1e-17, 3.0] if b % 2 else [1.0, 0.1, -BIG, BIG, 0.3]
        items = [_jitter(evm, rng)]
        for i, v in enumerate(vals * 12):
            items.append(evm.add(i % 2, v * (b + 1)))
        items.append(evm.add(2, (0.1 * b, Inj(b % 2, 1.0 / (b + 1)))))
        body = evm.sequence(items + [evm.add(3, 0.1 * b), evm.add(0, 0.7)])
        branches.append(evm.then(evm.scope(0.25, body), _jitter(evm, rng)))
    return evm.sequence(branches)


@pytest.mark.parametrize("workers", [2, 8])
def test_order_sensitive_sums_do_not_depend_on_thread_timing(workers):
    env = [0.0, 0.5, None]
    arr = ArrayEVM()
    expected = arr.run(_order_sensitive(arr, random.Random(0)), env)
    evm = ParallelEVM(max_workers=workers, grain=4)
    seen = set()
    for seed in range(20):
        evm.reset_work()
        got = evm.run(_order_sensitive(evm, random.Random(seed)), env)
        assert repr(got) == repr(expected)  # repr: exact for floats, tells -0.0 from 0.0
        assert evm.work == arr.work  # the work count does not depend on the timing either
        seen.add(evm.forks > 0)
    assert True in seen  # the branches did run concurrently
    evm.close()


# ---------------------------------------------------------------------------
# random action trees: the parallel runtime is the array runtime, exactly

# Random action trees with arbitrary floats and mixed sum sides: the law tests'
# generator (exact=False) and builder.
from tests.test_evm_laws import build, programs  # noqa: E402


PARALLEL = {w: ParallelEVM(max_workers=w, grain=1) for w in (1, 2, 8)}
ARRAY = ArrayEVM()


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs(exact=False, min_cells=1))
def test_parallel_equals_array_on_random_trees_with_any_values(prog):
    tree, env, _ = prog
    expected = ARRAY.run(build(ARRAY, tree), env)
    for evm in PARALLEL.values():
        got = evm.run(build(evm, tree), env)
        assert got == expected and repr(got) == repr(expected)

