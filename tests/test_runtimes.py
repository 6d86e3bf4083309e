"""The EVM runtimes beyond the laws: the persistent tree map (persistence, AVL
invariants, O(log n) height), the parallel EVM under contention (no update
lost, nested forks never deadlock, sibling scopes never collide, errors
propagate), the work counters (log n per add for the map, O(1) for the array),
and the registry. No test asserts wall time (see `python -m benchmarks`).
"""

from __future__ import annotations

import math
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chad.errors import ChadError, UsageError
from chad.values import Inj
from chad.runtime import (EVM, EVM_NAMES, ArrayEVM, MapEVM, ParallelEVM, PersistentMap,
                     UnknownRuntimeError, make_evm)

# ---------------------------------------------------------------------------
# the persistent map


def test_old_versions_are_untouched():
    m0 = PersistentMap.from_list([10.0, 11.0, 12.0, 13.0])
    snap0 = m0.to_dict()
    m1 = m0.set(4, 14.0)
    m2 = m1.update(2, lambda v: v + 100)
    m3 = m2.delete(0)
    m4 = m3.set(1, "x")
    assert m0.to_dict() == snap0
    assert m1.to_dict() == {0: 10.0, 1: 11.0, 2: 12.0, 3: 13.0, 4: 14.0}
    assert m2.to_dict() == {0: 10.0, 1: 11.0, 2: 112.0, 3: 13.0, 4: 14.0}
    assert m3.to_dict() == {1: 11.0, 2: 112.0, 3: 13.0, 4: 14.0}
    assert m4.to_dict() == {1: "x", 2: 112.0, 3: 13.0, 4: 14.0}
    assert (len(m0), len(m1), len(m2), len(m3), len(m4)) == (4, 5, 5, 4, 4)
    for m in (m0, m1, m2, m3, m4):
        m.check()
    with pytest.raises(KeyError):
        m3.get(0)
    with pytest.raises(KeyError):
        m3.update(0, lambda v: v)
    with pytest.raises(KeyError):
        m3.delete(0)
    assert m3.get(0, None) is None and 0 not in m3 and 1 in m3


ops = st.lists(st.tuples(st.sampled_from(["set", "update", "delete"]),
                         st.integers(0, 40), st.integers(-9, 9)), max_size=80)


@settings(max_examples=200, deadline=None)
@given(ops=ops)
def test_persistent_map_matches_dict_model_and_keeps_every_version(ops):
    versions = [(PersistentMap(), {})]
    for op, key, val in ops:
        m, d = versions[-1]
        if op == "set":
            m2, d2 = m.set(key, val), {**d, key: val}
        elif key in d:
            if op == "update":
                m2, d2 = m.update(key, lambda v: v * 2 + val), {**d, key: d[key] * 2 + val}
            else:
                m2, d2 = m.delete(key), {k: v for k, v in d.items() if k != key}
        else:
            continue
        versions.append((m2, d2))
    for m, d in versions:  # every old version still holds exactly its contents
        m.check()
        assert m.to_dict() == d
        assert m.keys() == sorted(d)
        assert len(m) == len(d)


@pytest.mark.parametrize("n", [1, 2, 10, 1000, 20000])
def test_height_is_logarithmic(n):
    m = PersistentMap()
    for i in range(n):  # sequential inserts: the worst case for an unbalanced tree
        m = m.set(i, i)
    m.check()
    assert m.height <= 1.4405 * math.log2(n + 2)
    built = PersistentMap.from_list(list(range(n)))
    built.check()
    assert built.height == math.ceil(math.log2(n + 1))
    assert built.values() == list(range(n))
    for i in range(0, n, 2):
        m = m.delete(i)
    m.check()
    assert m.keys() == list(range(1, n, 2))


# ---------------------------------------------------------------------------
# work counters


def _add_work(evm, n, level, value=1.0):
    env = [0.0] * n
    evm.reset_work()
    evm.run(evm.pure(None), env)
    base = evm.work
    evm.reset_work()
    evm.run(evm.add(level, value), env)
    return evm.work - base


def test_map_work_per_add_grows_like_log_n():
    evm = MapEVM()
    per_n = {}
    for n in (16, 256, 4096, 65536):
        works = [_add_work(evm, n, level) for level in (0, n // 3, n // 2, n - 1)]
        per_n[n] = max(works)
        # an add visits and copies one root-to-node path: 2 * depth <= 2 * height
        assert 2 <= per_n[n] <= 2 * math.ceil(math.log2(n + 1))
    assert per_n[16] < per_n[256] < per_n[4096] < per_n[65536]
    # logarithmic, not linear: 4096x more cells cost at most a few times more work
    assert per_n[65536] <= 5 * per_n[16]


@pytest.mark.parametrize("cls", [ArrayEVM, lambda: ParallelEVM(grain=1)])
def test_array_work_per_add_is_constant(cls):
    evm = cls()
    for n in (1, 16, 4096, 65536):
        for level in (0, n // 2, n - 1):
            assert _add_work(evm, n, level) == 1
    evm.reset_work()
    assert evm.work == 0


def test_map_scope_work_is_logarithmic():
    evm = MapEVM()
    for n in (16, 65536):
        evm.reset_work()
        evm.run(evm.pure(None), [0.0] * n)
        base = evm.work
        evm.reset_work()
        evm.run(evm.scope(0.0, evm.add(n, 1.0)), [0.0] * n)
        assert evm.work - base <= 12 * math.log2(n + 2)


# ---------------------------------------------------------------------------
# the parallel EVM


def _thread_probe(evm, seen: set):
    """An action that records the thread it runs on (via bind's continuation)."""
    def k(_):
        seen.add(threading.get_ident())
        return evm.pure(None), 0

    return evm.bind(evm.pure(None), k)


def test_parallel_loses_no_update_under_8_threads():
    evm = ParallelEVM(max_workers=8, grain=16)
    ncells, per_branch, nbranch = 4, 20_000, 8
    seen: set = set()
    adds = [evm.add(level, 1.0) for level in range(ncells)]
    pair_add = evm.add(ncells, (1.0, Inj(1, 2.0)))
    branches = []
    for b in range(nbranch):
        items = [adds[i % ncells] for i in range(per_branch)] + [pair_add, _thread_probe(evm, seen)]
        branches.append(evm.sequence(items))
    env = [0.0] * ncells + [None]
    r, out, cost = evm.run(evm.sequence(branches), env)
    expected = float(per_branch * nbranch // ncells)
    assert out[:ncells] == [expected] * ncells  # exact: integer-valued floats
    assert out[ncells] == (float(nbranch), Inj(1, 2.0 * nbranch))
    assert r is None
    assert evm.forks > 0
    assert len(seen) >= 2  # the branches really ran on more than one thread
    # the cost is the sequential one
    seq = ArrayEVM()
    seq_branches = [seq.sequence([seq.add(i % ncells, 1.0) for i in range(per_branch)]
                                 + [seq.add(ncells, (1.0, Inj(1, 2.0))), seq.pure(None)])
                    for _ in range(nbranch)]
    _, out2, cost2 = seq.run(seq.sequence(seq_branches), env)
    assert out2 == out
    # the probe is bind(pure, k) with ccall 0: cost 1 + 1 + 0 + 1 = 3 vs pure's 1
    assert cost == cost2 + 2 * nbranch
    evm.close()


def _tree(evm, depth, level):
    if depth == 0:
        return evm.add(level, 1.0)
    return evm.then(_tree(evm, depth - 1, level), _tree(evm, depth - 1, level))


@pytest.mark.parametrize("workers", [1, 2, 8])
def test_nested_forks_do_not_deadlock(workers):
    evm = ParallelEVM(max_workers=workers, grain=1)
    depth = 10  # 1023 forks, far more than there are workers
    done = []

    def go():
        done.append(evm.run(_tree(evm, depth, 0), [0.0]))

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(timeout=120)
    assert not t.is_alive(), "parallel EVM deadlocked"
    _, out, cost = done[0]
    assert out == [float(2 ** depth)]
    arr = ArrayEVM()
    assert arr.run(_tree(arr, depth, 0), [0.0]) == done[0]
    evm.close()


def test_sibling_scopes_do_not_collide():
    """Both branches push a cell at the same level; each sees only its own adds,
    while adds below the fork go to the shared cell."""
    evm = ParallelEVM(max_workers=4, grain=1)

    def branch(tag: float):
        body = evm.sequence([evm.then(evm.add(1, tag), evm.add(0, 1.0)) for _ in range(300)])
        return evm.scope(0.0, body)

    for _ in range(5):
        prog = evm.then(branch(2.0), branch(3.0))
        both = evm.sequence([branch(float(t)) for t in (1, 2, 3, 4)])
        (out, _), env, _ = evm.run(prog, [0.0])
        assert out == 900.0 and env == [600.0]
        _, env, _ = evm.run(both, [0.0])
        assert env == [1200.0]

    # results of scopes inside concurrently run branches, read back via bind
    got = []
    a, b = branch(5.0), branch(7.0)
    prog = evm.then(evm.bind(a, lambda r: (got.append(r[0]) or evm.pure(None), 0)),
                    evm.bind(b, lambda r: (got.append(r[0]) or evm.pure(None), 0)))
    _, env, _ = evm.run(prog, [0.0])
    assert sorted(got) == [1500.0, 2100.0] and env == [600.0]
    evm.close()


def test_parallel_errors_propagate_and_the_evm_stays_usable():
    evm = ParallelEVM(max_workers=2, grain=1)
    good = evm.sequence([evm.add(0, 1.0)] * 50)
    for bad_first in (True, False):
        bad = evm.then(evm.add(0, 1.0), evm.add(5, 1.0))
        prog = evm.then(bad, good) if bad_first else evm.then(good, bad)
        with pytest.raises(IndexError, match="level 5"):
            evm.run(prog, [0.0])
    assert evm.run(evm.then(good, good), [0.0])[1] == [100.0]
    evm.close()
    assert evm.run(evm.then(good, good), [0.0])[1] == [100.0]  # a new pool after close
    evm.close()


def test_parallel_default_grain_stays_sequential_for_small_actions():
    evm = make_evm("parallel")
    small = evm.then(evm.add(0, 1.0), evm.add(0, 2.0))
    assert evm.run(small, [0.0])[1] == [3.0]
    assert evm.forks_submitted == 0 and evm.forks == 0


# ---------------------------------------------------------------------------
# registry and argument checks


def test_registry():
    assert EVM_NAMES == ("map", "array", "parallel")
    for name in EVM_NAMES:
        evm = make_evm(name)
        assert isinstance(evm, EVM) and evm.name == name
        assert hasattr(evm, "sequence") and hasattr(evm, "reset_work")
    for bad in ("", "Array", "gpu", None):
        with pytest.raises(UnknownRuntimeError, match="map, array, parallel"):
            make_evm(bad)
    with pytest.raises(ValueError):
        make_evm("nope")
    with pytest.raises(UsageError):
        make_evm("nope")
    with pytest.raises(ChadError):
        make_evm("array", max_workers=3)
    assert make_evm("parallel", max_workers=3, grain=5).max_workers == 3


@pytest.mark.parametrize("name", EVM_NAMES)
def test_bad_levels(name):
    evm = make_evm(name)
    for bad in (-1, 1.0, "0", True):
        with pytest.raises(ValueError):
            evm.add(bad, 1.0)
    with pytest.raises(IndexError, match="level 3 out of range for 2 cells"):
        evm.run(evm.add(3, 1.0), [0.0, 0.0])


@pytest.mark.parametrize("name", EVM_NAMES)
def test_actions_are_reusable_values(name):
    evm = make_evm(name)
    a = evm.scope(None, evm.then(evm.add(1, (1.0, None)), evm.add(0, 2.0)))
    first = evm.run(a, [0.0])
    # run: 1 + |env| + scope (1 + then (2 + add 2 + add 2))
    assert first == (((1.0, None), None), [2.0], 1 + 1 + 1 + 2 + 2 + 2)
    assert evm.run(a, [0.0]) == first
    assert evm.run(evm.then(a, a), [1.0])[1] == [5.0]
