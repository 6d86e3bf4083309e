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
per scope, |env| per run). For the parallel runtime also its settings, the static weights and
the forks they decide (`forks_submitted`), and its join: a forked side's adds are replayed in
the sequential order, whichever thread ran it.
"""

from __future__ import annotations

import threading
import time

import pytest

from chad import deep
from chad.costmodel.lacm import SpecLACM
from chad.deep import mark_deep_thread
from chad.linear import plusv
from chad.runtime import ArrayEVM, EVMBase, make_evm
from chad.runtime.parallel_evm import PAction, ParallelEVM

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


# ---------------------------------------------------------------------------------------
# The parallel runtime (chad/runtime/parallel_evm.py): its settings, the static weights that
# decide the forks, the number of forks decided (`forks_submitted`, independent of the
# scheduling), and the join: a forked side's adds to existing cells are replayed after the
# other side's, so every cell gets the array runtime's plusv calls in the same order. Where
# the scheduling matters, actions made by hand (PAction) wait for each other so that a forked
# side certainly runs on a pool thread, or a pool of one blocked worker makes it run inline.


def test_parallel_settings_are_checked_and_kept():
    for key in ("max_workers", "grain", "stripes"):
        for bad in (0, -1, 1.0, "2", None):
            with pytest.raises(ValueError):
                ParallelEVM(**{key: bad})
        assert ParallelEVM(**{key: 1}) is not None
    e = ParallelEVM(max_workers=3, grain=5, stripes=2)
    assert (e.max_workers, e.grain, e.stack_bytes) == (3, 5, deep.STACK_BYTES)
    assert (e.plus, e.thread_init) == (plusv, mark_deep_thread)
    assert (e.work, e.forks, e.forks_submitted) == (0, 0, 0)
    assert ParallelEVM(stack_bytes=1 << 24).stack_bytes == 1 << 24
    d = ParallelEVM()
    assert (d.max_workers, d.grain) == (8, 64)


def test_parallel_weights():
    e = ParallelEVM(grain=7)
    a, p = e.add(0, 1.0), e.pure(2)
    assert (a.weight, p.weight) == (1, 1)
    assert e.then(a, p).weight == 3
    assert e.scope(0.0, e.then(a, a)).weight == 4
    assert e.bind(a, lambda x: (p, 0)).weight == 1 + 1 + 7  # the continuation counts as grain
    assert e.sequence([a, e.then(a, a), p]).weight == 1 + 1 + 3 + 1
    assert e.sequence([]).weight == 1


def test_then_forks_when_both_sides_weigh_at_least_grain():
    for grain, forks in ((1, 3), (3, 1), (4, 0)):
        e = ParallelEVM(max_workers=2, grain=grain)
        two = e.then(e.add(0, 1.0), e.add(1, 2.0))  # weight 3
        m = e.then(two, e.then(e.add(1, 3.0), e.add(0, 4.0)))
        assert e.run(m, [0.0, 0.0]) == (None, [5.0, 5.0], 1 + 2 + (2 + 6 + 6))
        assert e.forks_submitted == forks
        assert e.work == 2 + 4  # |env| + the four adds, each once, forked or not
        e.reset_work()
        assert (e.work, e.forks, e.forks_submitted) == (0, 0, 0)


@pytest.mark.parametrize("workers,n,forks", [
    (1, 8, 1), (2, 8, 3), (3, 8, 7), (4, 8, 7), (4, 16, 7), (5, 16, 15), (8, 16, 15),
])
def test_sequence_forks_to_a_depth_of_log2_workers_plus_one(workers, n, forks):
    e = ParallelEVM(max_workers=workers, grain=1)
    acts = [e.add(i % 2, float(i + 1)) for i in range(n)]
    r, cells, cost = e.run(e.sequence(acts), [0.0, 0.0])
    assert (r, cost) == (None, 1 + 2 + (2 * n + 2 * (n - 1)))
    assert cells == [float(sum(range(1, n + 1, 2))), float(sum(range(2, n + 1, 2)))]
    assert e.forks_submitted == forks
    assert e.work == 2 + n


@pytest.mark.parametrize("grain,forks", [(1, 3), (2, 1), (3, 0)])
def test_sequence_forks_while_both_halves_weigh_at_least_grain(grain, forks):
    e = ParallelEVM(max_workers=8, grain=grain)
    acts = [e.add(0, 1.0), e.add(1, 1.0), e.add(0, 2.0), e.add(1, 2.0)]
    assert e.run(e.sequence(acts), [0.0, 0.0]) == (None, [3.0, 3.0], 1 + 2 + (8 + 6))
    assert e.forks_submitted == forks


# Weights (by hand) and grains where the split point of a sequence decides the forks: the
# split is the first point where the left part weighs at least half of the range (but both
# parts non-empty), and a range forks only if both parts weigh at least grain.
SPLITS = [
    ([10, 1, 1, 1], 3, 1),  # split after the first (10 | 3): fork; 1 1 | 1: too light
    ([1, 1, 10], 2, 1),  # the last weighs more than half: split before it (2 | 10)
    ([10, 1], 3, 0),  # one part too light: no fork
    ([3, 1, 1, 3], 3, 1),  # 3 1 | 1 3: fork; then 3 | 1 and 1 | 3: too light
    ([1, 2, 1, 2, 1], 2, 1),
    ([5, 5, 1, 5], 3, 2),
]


@pytest.mark.parametrize("weights,grain,forks", SPLITS)
def test_sequence_splits_in_halves_of_about_equal_weight(weights, grain, forks):
    e = ParallelEVM(max_workers=8, grain=grain)
    acts = [PAction(e.add(i % 2, float(i + 1)).fn, w) for i, w in enumerate(weights)]
    n = len(weights)
    r, cells, cost = e.run(e.sequence(acts), [0.0, 0.0])
    assert (r, cost) == (None, 1 + 2 + (2 * n + 2 * (n - 1)))
    assert cells == [float(sum(range(1, n + 1, 2))), float(sum(range(2, n + 1, 2)))]
    assert e.forks_submitted == forks


def _recording_plus(calls):
    def plus(new, cell):
        calls.append((new, cell))
        return new + cell, 1
    return plus


def _waits_for(event):
    def fn(ctx):
        assert event.wait(10)
        return None, 1
    return fn


def _sets(event, result=None):
    def fn(ctx):
        event.set()
        return result, 1
    return fn


def test_a_side_run_on_the_pool_is_replayed_after_the_inline_side():
    calls = []
    started = threading.Event()
    e = ParallelEVM(max_workers=2, grain=50, plus=_recording_plus(calls))
    # a waits until b has started, so b runs on a pool thread and adds first in time
    a = e.then(PAction(_waits_for(started), 100), e.add(0, 1.0))
    # b's scope is a cell of its own view: added to at once, counted in b's work
    b = e.then(e.add(0, 2.0), e.then(e.scope(3.0, e.add(2, 4.0)),
                                     e.then(e.add(1, 5.0), PAction(_sets(started, "b"), 100))))
    r = e.run(e.then(a, b), [10.0, 20.0])
    assert r == ("b", [13.0, 25.0], 1 + 2 + (2 + (2 + 1 + 2) + (2 + 2 + (2 + 3 + (2 + 2 + 1)))))
    # the array runtime's order for the cells that existed at the fork
    assert calls == [(4.0, 3.0), (1.0, 10.0), (2.0, 11.0), (5.0, 20.0)]
    assert (e.forks, e.forks_submitted, e.work) == (1, 1, 2 + 4 + 1)  # |env|, adds, the scope


def test_a_nested_fork_passes_its_log_up_to_the_owner_of_the_cells():
    calls = []
    s1, s2 = threading.Event(), threading.Event()
    e = ParallelEVM(max_workers=2, grain=50, plus=_recording_plus(calls))

    def b_first(ctx):  # on pool thread 1: let a go on, wait for the nested pool side
        s1.set()
        assert s2.wait(10)
        return None, 1

    a = e.then(PAction(_waits_for(s1), 100), e.add(0, 1.0))
    b1 = e.then(PAction(b_first, 100), e.add(0, 2.0))
    b2 = e.then(e.add(0, 3.0), e.then(e.add(1, 4.0), PAction(_sets(s2), 100)))
    r, cells, cost = e.run(e.then(a, e.then(b1, b2)), [10.0, 20.0])
    assert (r, cells) == (None, [16.0, 24.0])
    assert cost == 1 + 2 + (2 + 5 + (2 + 5 + (2 + 2 + (2 + 2 + 1))))
    assert calls == [(1.0, 10.0), (2.0, 11.0), (3.0, 13.0), (4.0, 20.0)]
    assert (e.forks, e.forks_submitted, e.work) == (2, 2, 2 + 4)


def _private_pool_of_one():
    """A ParallelEVM with a pool of its own (a new thread_init: a new pool) whose only
    worker is kept busy until the returned event is set."""
    e = ParallelEVM(max_workers=1, grain=1, thread_init=lambda: None)
    gate = threading.Event()
    blocker = e.start()._pool().submit(gate.wait, 10)
    return e, gate, blocker


def test_a_side_that_has_not_started_runs_inline_after_the_other():
    e, gate, blocker = _private_pool_of_one()
    try:
        m = e.then(e.add(0, 1.0), e.scope(0.0, e.add(1, 2.0)))
        assert e.run(m, [1.0, 2.0]) == ((0.0, None), [2.0, 4.0], 1 + 2 + (2 + 2 + (1 + 2)))
        assert (e.forks_submitted, e.forks, e.work) == (1, 0, 2 + 2 + 1)
    finally:
        gate.set()
        blocker.result()


def test_an_error_in_the_inline_side_cancels_a_side_not_started():
    calls = []
    e, gate, blocker = _private_pool_of_one()
    e.plus = _recording_plus(calls)
    try:
        with pytest.raises(IndexError):
            e.run(e.then(e.add(3, 1.0), e.add(0, 2.0)), [1.0])
        assert calls == []
    finally:
        gate.set()
        blocker.result()


def test_an_error_in_the_inline_side_waits_for_the_running_side():
    started, done = threading.Event(), threading.Event()

    def slow(ctx):
        started.set()
        time.sleep(0.2)
        done.set()
        return None, 1

    def fail(ctx):
        assert started.wait(10)
        raise RuntimeError("inline side")

    e = ParallelEVM(max_workers=2, grain=1)
    with pytest.raises(RuntimeError, match="inline side"):
        e.run(e.then(PAction(fail, 1), PAction(slow, 1)), [])
    assert done.is_set()  # no task of the run is still running when run returns


def test_the_pool_starts_every_thread_once_and_is_shared():
    names = []

    def init():
        names.append(threading.current_thread().name)

    e = ParallelEVM(max_workers=3, thread_init=init)
    assert e.start() is e
    assert len(names) == len(set(names)) == 3  # all three threads, started up front
    assert all(n.startswith("chad-evm") for n in names)
    ex = e._pool()
    assert ParallelEVM(max_workers=3, thread_init=init)._pool() is ex  # same settings
    e.close()
    assert e._executor is None
    assert e._pool() is ex  # attaches again
    assert len(names) == 3
