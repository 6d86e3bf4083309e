"""Linear scaling of array gradients where tape-based frameworks go quadratic
(docs/arrays.md): the gradient's step count at n = 2000 divided by that at n = 1000 lies
in [1.8, 2.2], on every runtime.

gradient_steps is TH2's left-hand side, as `chad cost` reports it: the measurement
of chad/costmodel/measure.py, prepared once per n (arguments, primal run, gradient
term) and run once per runtime.
"""

from __future__ import annotations

import pytest

import chad
from benchmarks.scaling_programs import PROGRAMS  # shared with make bench
from chad.costmodel.measure import prepare

RUNTIMES = ("map", "array", "parallel")


def gradient_steps(src: str, args, ctg, runtimes=RUNTIMES) -> dict[str, int]:
    """{runtime: gradient steps}."""
    prepared = prepare(chad.load(src), args, ctg)
    return {name: prepared.measure(name).gradient_steps for name in runtimes}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_runtime_agrees_with_chad_cost_within_the_bound(name):
    src, make = PROGRAMS[name]
    args, ctg = make(20)
    steps = gradient_steps(src, args, ctg)
    r = chad.cost(src, args, ctg)
    assert set(steps.values()) == {r.gradient_steps} and r.holds


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_gradient_steps_scale_linearly(name):
    src, make = PROGRAMS[name]
    small = gradient_steps(src, *make(1000))
    big = gradient_steps(src, *make(2000))
    for rt in RUNTIMES:
        ratio = big[rt] / small[rt]
        assert 1.8 <= ratio <= 2.2, (name, rt, small[rt], big[rt], ratio)
    # the abstract costs do not depend on the runtime
    assert len(set(small.values())) == 1 and len(set(big.values())) == 1
