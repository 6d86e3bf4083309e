"""Kill the mutants of the EVM implementations (chad/runtime/array_evm.py, map_evm.py,
parallel_evm.py, protocol.py) and of the formalisation's LACM (chad/costmodel/lacm.py) that
the golden corpus, the oracle and the documented-rule tests let survive (`make mutate`,
docs/mutation-report.md).

Each action of the EVM Protocol is run on hand-made cells and checked against the abstract
costs of chad/runtime/protocol.py (those of spec/LACM.agda in the appendix of Efficient
CHAD, Smeding & Vákár): run 1 + |env| + c, pure 1, bind 1 + c(m) + ccall + c(k x),
then 2 + c(a) + c(b), add 1 + (steps of plusv), scope 1 + c(m) with result (final cell,
result), sequence sum + 2 (n - 1) or pure None. Every implementation must give the same
result, cells and cost; the runtimes must reject bad levels; the cells' monoid is the
constructor's `plus`; the array runtime's `work` is its documented count (one per add, one
per scope, |env| per run).
"""

from __future__ import annotations

import pytest

from chad.costmodel.lacm import SpecLACM
from chad.runtime import ArrayEVM, EVMBase, make_evm

IMPLS = ["array", "map", "parallel", "spec"]
RUNTIMES = ["array", "map", "parallel"]


def make(name, **kw):
    if name == "spec":
        return SpecLACM()
    if name == "parallel":
        kw.setdefault("grain", 1)  # fork at every then
    return make_evm(name, **kw)


@pytest.fixture(params=IMPLS)
def evm(request):
    e = make(request.param)
    yield e
    e.close()


ENV = [1.0, (2.0, 3.0)]


def test_pure_costs_one(evm):
    assert evm.run(evm.pure(7), ENV) == (7, ENV, 1 + 2 + 1)


def test_add_real_and_pair(evm):
    assert evm.run(evm.add(0, 5.0), ENV) == (None, [6.0, (2.0, 3.0)], 1 + 2 + (1 + 1))
    # plusv of two pairs: 1 + 1 (reals) + 1 (nothing on one side)
    assert evm.run(evm.add(1, (1.0, None)), ENV) == (None, [1.0, (3.0, 3.0)], 1 + 2 + (1 + 3))


def test_add_into_a_nothing_cell(evm):
    assert evm.run(evm.add(1, 4.0), [0.5, None]) == (None, [0.5, 4.0], 1 + 2 + 2)


def test_then_costs_two_plus_its_parts(evm):
    r = evm.run(evm.then(evm.add(0, 1.0), evm.pure("x")), ENV)
    assert r == ("x", [2.0, (2.0, 3.0)], 1 + 2 + (2 + 2 + 1))
    r = evm.run(evm.then(evm.add(1, (0.5, 0.5)), evm.add(0, 2.0)), ENV)
    assert r == (None, [3.0, (2.5, 3.5)], 1 + 2 + (2 + 4 + 2))


def test_bind_passes_the_result_and_counts_ccall(evm):
    seen = []

    def k(x):
        seen.append(x)
        return evm.add(0, x), 4

    r = evm.run(evm.bind(evm.pure(3.0), k), ENV)
    assert seen == [3.0]
    assert r == (None, [4.0, (2.0, 3.0)], 1 + 2 + (1 + 1 + 4 + 2))
    # the second action runs on the cells the first left
    r = evm.run(evm.bind(evm.add(0, 1.0), lambda _x: (evm.add(0, 2.0), 0)), ENV)
    assert r == (None, [4.0, (2.0, 3.0)], 1 + 2 + (1 + 2 + 0 + 2))


def test_scope_returns_its_cell_and_pops_it(evm):
    r = evm.run(evm.scope(10.0, evm.add(2, 5.0)), ENV)
    assert r == ((15.0, None), ENV, 1 + 2 + (1 + 2))
    inner = evm.scope(1.0, evm.then(evm.add(2, 1.0), evm.add(3, 2.0)))
    r = evm.run(evm.scope(0.0, inner), ENV)
    assert r == ((1.0, (3.0, None)), ENV, 1 + 2 + (1 + 1 + (2 + 2 + 2)))
    # a scope whose action also adds to an outer cell, and returns a value
    m = evm.then(evm.add(0, 1.0), evm.then(evm.add(2, 2.0), evm.pure("r")))
    r = evm.run(evm.scope(None, m), ENV)
    assert r == ((2.0, "r"), [2.0, (2.0, 3.0)], 1 + 2 + (1 + (2 + 2 + (2 + 2 + 1))))


def test_scope_in_an_empty_environment(evm):
    assert evm.run(evm.scope(1.0, evm.add(0, 2.0)), []) == ((3.0, None), [], 1 + 0 + (1 + 2))


def test_sequence_is_the_then_chain(evm):
    assert evm.run(evm.sequence([]), ENV) == (None, ENV, 1 + 2 + 1)
    assert evm.run(evm.sequence([evm.pure(5)]), ENV) == (5, ENV, 1 + 2 + 1)
    acts = [evm.add(0, 1.0), evm.add(1, (1.0, 1.0)), evm.add(0, 2.0), evm.pure("last")]
    assert evm.run(evm.sequence(acts), ENV) == (
        "last", [4.0, (3.0, 4.0)], 1 + 2 + (2 + 4 + 2 + 1 + 2 * 3))
    assert evm.run(evm.sequence((evm.pure(1), evm.pure(2))), ENV) == (2, ENV, 1 + 2 + 4)


def test_the_default_sequence_is_the_then_chain():
    # EVMBase.sequence (a balanced tree of then), used by the formalisation's LACM
    spec = SpecLACM()
    assert spec.sequence.__func__ is EVMBase.sequence
    for n in range(0, 9):
        acts = [spec.add(i % 2, float(i + 1)) for i in range(n)] + [spec.pure(n)]
        r, cells, cost = spec.run(spec.sequence(acts), [0.0, 0.0])
        odd = sum(float(i + 1) for i in range(n) if i % 2)
        even = sum(float(i + 1) for i in range(n) if not i % 2)
        assert (r, cells, cost) == (n, [even, odd], 1 + 2 + (2 * n + 1) + 2 * n)
    r, cells, cost = spec.run(EVMBase.sequence(spec, []), [0.0])
    assert (r, cells, cost) == (None, [0.0], 1 + 1 + 1)


def test_base_lifecycle():
    spec = SpecLACM()
    assert spec.start() is spec
    with spec as s:
        assert s is spec
        spec.run(spec.add(0, 1.0), [0.0])
    spec.close()
    assert spec.work > 0
    spec.reset_work()
    assert spec.work == 0


def test_run_does_not_modify_the_callers_list(evm):
    env = [1.0, 2.0]
    r = evm.run(evm.then(evm.add(0, 1.0), evm.add(1, 1.0)), env)
    assert r == (None, [2.0, 3.0], 1 + 2 + 6)
    assert env == [1.0, 2.0]
    assert isinstance(r[1], list)


@pytest.mark.parametrize("name", RUNTIMES)
def test_the_cells_monoid_is_the_constructors_plus(name):
    calls = []

    def times(new, cell):
        calls.append((new, cell))
        return new * cell, 7

    e = make(name, plus=times)
    r = e.run(e.then(e.add(0, 3.0), e.add(1, 5.0)), [2.0, 4.0])
    e.close()
    assert r == (None, [6.0, 20.0], 1 + 2 + (2 + 8 + 8))
    assert calls == [(3.0, 2.0), (5.0, 4.0)]


@pytest.mark.parametrize("name", RUNTIMES)
def test_the_default_monoid_is_plusv(name):
    e = make(name, plus=None)
    assert e.run(e.add(0, (1.0, None)), [(1.0, 2.0)]) == (None, [(2.0, 2.0)], 1 + 1 + 4)
    e.close()


@pytest.mark.parametrize("name", RUNTIMES)
@pytest.mark.parametrize("level", [-1, True, False, 1.0, "0", None])
def test_add_rejects_a_level_that_is_not_a_natural_number(name, level):
    e = make(name)
    with pytest.raises(ValueError):
        e.add(level, 1.0)
    e.close()


@pytest.mark.parametrize("name", RUNTIMES)
def test_add_accepts_level_zero(name):
    e = make(name)
    assert e.run(e.add(0, 1.0), [1.0]) == (None, [2.0], 1 + 1 + 2)
    e.close()


@pytest.mark.parametrize("name", RUNTIMES)
def test_add_out_of_range_is_an_index_error(name):
    e = make(name)
    with pytest.raises(IndexError):
        e.run(e.add(2, 1.0), [1.0, 2.0])
    e.close()


def test_array_work_counts_adds_scopes_and_run_cells():
    e = ArrayEVM()
    m = e.then(e.add(0, 1.0), e.scope(0.0, e.then(e.add(2, 1.0), e.add(1, 1.0))))
    e.run(m, [0.0, 0.0])
    assert e.work == 2 + 3 + 1  # |env| + three adds + one scope
    e.run(e.sequence([e.add(0, 1.0), e.add(0, 1.0)]), [0.0, 0.0, 0.0])
    assert e.work == 6 + 3 + 2
    e.reset_work()
    assert e.work == 0


def test_work_starts_at_zero_and_accumulates(evm):
    # chad/runtime/protocol.py: `work` is the count of real work since creation or reset;
    # it is deterministic (the parallel runtime counts what the array runtime counts), so
    # the same run twice counts twice as much.
    assert evm.work == 0
    m = evm.scope(0.0, evm.then(evm.add(0, 1.0), evm.add(2, 1.0)))
    evm.run(m, [0.0, 0.0])
    first = evm.work
    assert first > 0
    evm.run(m, [0.0, 0.0])
    assert evm.work == 2 * first
    evm.reset_work()
    assert evm.work == 0
