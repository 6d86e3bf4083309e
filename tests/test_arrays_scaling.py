"""Linear scaling of array gradients where tape-based frameworks go quadratic
(docs/arrays.md): the gradient's step count at n = 2000 divided by that at n = 1000 lies
in [1.8, 2.2], on every runtime.

gradient_steps = steps of the forward pass + steps of the backward pass (TH2's
left-hand side, as `chad cost` reports it; checked equal at a small n). The
forward pass builds no EVM action, so it is run once per n and the backward pass
once per runtime.
"""

from __future__ import annotations

import pytest

import chad
from chad.api import _defs, decode_args
from chad.cotangents import ctg_from_json
from chad.deep import run_deep
from chad.transform.efficient import SPEC
from costmodel.evaluate import Evaluator

RUNTIMES = ("map", "array", "parallel")

from benchmarks.scaling_programs import PROGRAMS  # shared with make bench


def gradient_steps(src: str, args, ctg, runtimes=RUNTIMES) -> dict[str, int]:
    """{runtime: forward steps + backward steps}."""
    prog = chad.load(src)
    d = prog.find(None)
    env = decode_args(d, args)
    forward = run_deep(SPEC.forward_term, d)
    (value, bp), cf = run_deep(Evaluator(_defs(prog)).eval, forward, dict(env))
    ct = ctg_from_json(d.result, ctg, "ctg", value)
    out = {}
    for name in runtimes:
        ev = Evaluator(_defs(prog), chad.make_evm(name))
        _cells, cb = run_deep(SPEC.backward, ev, bp, ct, d)
        out[name] = cf + cb
    return out


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_split_equals_the_th2_term(name):
    src, make = PROGRAMS[name]
    args, ctg = make(20)
    steps = gradient_steps(src, args, ctg, ("array",))["array"]
    r = chad.cost(src, args, ctg)
    assert steps == r.gradient_steps and r.holds


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
