"""The compiled backend against the interpreter (the reference), on generated
programs: the same values and gradients, on all three runtimes.

Programs come from the checker's generators (chad/costmodel/generators.py):
first-order programs, array programs, programs with functions and def calls, and
chain-shaped programs of every kind; 2000 and more in all (the counts below).
For each program the interpreter's value and gradient (array runtime) are the
reference; the compiled vjp on the three runtimes, and the compiled one-term
gradient where the result is R, must give them bit for bit (floats compared by
their hex form, NaN equal to NaN): the compiled code performs the same
operations in the same order, so no tolerance is needed. The one exception: a
program whose lambdas the compiled path inlines (chad/compile/source.py
`rewritten`), where the cotangents a closure's body gives its captured
variables are added to them directly instead of through the closure's
cotangent, another association of the same additions: there the floats agree
within 1e-12 (of the larger magnitude, at least 1), non-finite ones exactly.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings

import chad
from chad.costmodel import generators as G
from chad.compile.source import rewritten
from chad.types import Real
from tests.oracle_agda import canon

RUNTIMES = ("array", "map", "parallel")

# generated code must compile without CPython's warnings (e.g. `None[0]`, which
# its compiler flags as a likely mistake)
pytestmark = pytest.mark.filterwarnings("error::SyntaxWarning")

# (name, strategy, number of programs): 2000 and more in all
FAMILIES = [
    ("first-order", lambda: G.programs(max_depth=5, max_params=3), 600),
    ("arrays", lambda: G.programs(max_depth=4, max_params=3, arrays=True), 450),
    ("functions", lambda: G.programs(max_depth=4, max_params=3, functions=True), 450),
    ("language", lambda: G.language_programs(max_depth=4), 300),
    ("chains", lambda: G.chains(10, arrays=True, functions=True), 250),
]
COUNTED: dict[str, int] = {}


def _reference(prog, args, ctg):
    value, backprop = chad.vjp(prog, backend="interp")(*args)
    return canon(value), canon(list(backprop(ctg)))


def _compiled(prog, args, ctg, evm):
    value, backprop = chad.vjp(prog, evm=evm)(*args)
    return canon(value), canon(list(backprop(ctg)))


def close(a, b) -> bool:
    """a and b (canon's form: floats as hex strings) equal, floats within 1e-12
    of the larger magnitude (at least 1); NaN and the infinities exactly."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if a == b:
        return True
    if not isinstance(a, str):
        return False
    try:
        x, y = float.fromhex(a), float.fromhex(b)
    except ValueError:
        return False
    if not (math.isfinite(x) and math.isfinite(y)):
        return False
    return abs(x - y) <= 1e-12 * max(1.0, abs(x), abs(y))


def check_case(case) -> None:
    prog = case.program
    ref = _reference(prog, case.args, case.ctg)
    same = close if rewritten(prog) else (lambda a, b: a == b)
    for evm in RUNTIMES:
        got = _compiled(prog, case.args, case.ctg, evm)
        assert same(got, ref), f"compiled vjp on {evm} differs:\n{case.source()}\n{got}\n{ref}"
    if isinstance(case.defn.result, Real):
        value, grads = chad.grad(prog)(*case.args, ctg=case.ctg)
        assert same((canon(value), canon(list(grads))), ref), \
            f"compiled grad differs:\n{case.source()}"


def _family_test(name, strategy, n):
    @settings(max_examples=n, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy())
    def test(case):
        COUNTED[name] = COUNTED.get(name, 0) + 1
        check_case(case)

    return test


@pytest.mark.parametrize("name,strategy,n", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_compiled_agrees_with_the_interpreter(name, strategy, n):
    COUNTED[name] = 0
    _family_test(name, strategy, n)()
    # hypothesis may stop early when a strategy has few distinct programs
    assert COUNTED[name] >= n // 2, f"only {COUNTED[name]} {name} programs were tried"


def test_the_families_add_up_to_2000_programs():
    assert sum(n for _name, _s, n in FAMILIES) >= 2000
