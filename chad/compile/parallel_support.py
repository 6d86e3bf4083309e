"""What compiled code of the parallel runtime calls at run time: fork points
that run independent heavy parts of a gradient on two threads.

With `evm="parallel"` the compiler generates the array runtime's inlined,
vectorised code (cells in a Python list, build and map bodies as numpy code),
and at the fork points chad/compile/parallel_codegen.py chooses it calls

    pvals(fns, sizes)         independent heavy `let`s of a pure value (the
                              forward pass): the list of fns[i]() in order
    pseq(cells, fns, sizes)   a `>>` chain of actions (the backward pass): runs
                              fns[0](cells), fns[1](cells), ... in program order,
                              returns the last one's result

Each splits its list in two halves of about equal size and forks (runs the
second half on a pool thread, the first on this one) only when both halves are
*heavy*: `sizes[i]` is `psize` of the values the part reads (the number of
elements of the arrays among them), and a half is heavy when its sizes add up
to at least `GRAIN` elements. numpy releases the GIL in its loops, so two
halves whose work is large array operations really run at the same time; a
fork of small work would cost more (a thread handoff) than it gains.

Determinism: the accumulation monad's actions only ever *add* to cells (the
only read of a cell is `scope`'s final read of its own cell), so the forked half
of a `>>` chain runs on a `ForkCells`: a list whose cells below `fork_base` (the
ones that existed at the fork) read as the zero (None) and whose writes to them
are *logged* instead: `cells[l] = padd(v, cells[l])` becomes padd(v, None) = v,
logged as "padd v into l". A vectorised reverse pass's contributions to a
shared cell (chad/compile/vector_support.py, `Pass.flush`) are logged with
their own function (`defer`). At the join the forking thread replays the log, in
order, onto its own cells, after its own half (first in program order): every
cell receives exactly the array runtime's additions with the same arguments in
the same order, so gradients are bit-identical to the array runtime's
(docs/runtimes.md). The forked half's own `scope` cells (levels >= fork_base)
are ordinary list cells. A replay onto a ForkCells (a fork inside a fork) logs
the entries of cells it does not own again, for its own join.

Errors: a fork waits for (or cancels, if not started) its pool half before it
raises the inline half's exception; the pool half's exception is raised at the
join. Parts are pure (values) or only add to cells, so the exception raised is
the one the sequential code raises first in program order.

The pool is made as the parallel EVM's pools are (chad/runtime/parallel_evm.py:
big stacks), with WORKERS threads; a thread only waits for a task already
running, or runs a task that has not started itself, so nested forks cannot
deadlock, whatever the number of threads. `stats` counts forks, for
tests and benchmarks.
"""

from __future__ import annotations

import bisect
import functools
import os
import threading

import numpy as np

from chad.deep import deep_recursion_limit
from chad.runtime.parallel_evm import ParallelEVM

from .known import MatrixRows
from .support import padd
from .vector_support import VecBack, VecPairs

GRAIN = 1 << 15     # elements: a half lighter than this never forks
MAX_DEPTH = 3       # nested splits of one list (at most 2**MAX_DEPTH pieces)
# pool threads: one fewer than the cores (the forking thread runs a half
# itself). Few threads, used again and again, also keep the memory numpy
# allocates in each thread's malloc arena warm: a half on one of many cold
# threads pays page faults for fresh memory every time.
WORKERS = max(1, (os.cpu_count() or 2) - 1)


class Stats:
    """Fork counters (per process): `decided`, forks whose pool half was
    submitted; `pooled`, those whose pool half really ran on a pool thread;
    `threads`, the idents of the threads that ran pool halves."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.decided = 0
        self.pooled = 0
        self.threads: set[int] = set()


stats = Stats()


class grain:
    """`with grain(n):` forks halves of at least n elements (tests: 1 forks
    every heavy part); restores the previous grain afterwards."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __enter__(self):
        global GRAIN
        self.old, GRAIN = GRAIN, self.n
        return self

    def __exit__(self, *exc) -> None:
        global GRAIN
        GRAIN = self.old


_pool_box: list = []
_pool_lock = threading.Lock()


def _pool():
    if _pool_box:
        return _pool_box[0]
    with _pool_lock:
        if not _pool_box:
            _pool_box.append(ParallelEVM(max_workers=WORKERS)._pool())
        return _pool_box[0]


# ------------------------------------------------------------------ sizes

def psize(*values) -> int:
    """About how many array elements the values hold: numpy arrays' sizes, the
    lengths of vectorised backpropagators, ints (a build's size), looking into
    tuples and partial applications (closures) a bounded number of steps."""
    total = 0
    stack = list(values)
    budget = 256
    while stack and budget:
        budget -= 1
        x = stack.pop()
        t = type(x)
        if t is np.ndarray:
            total += x.size
        elif t is tuple or t is list or t is MatrixRows:
            stack.extend(x[:16])
        elif t is int:
            if x > 0:
                total += x
        elif t is VecBack:
            total += x.n
        elif t is VecPairs:
            total += x.back.n
        elif t is functools.partial:
            stack.extend(x.args)
    return total


# ------------------------------------------------------------------ the cells of a forked half

class ForkCells(list):
    """The cells as a forked half sees them: levels < fork_base read as None
    (the zero) and a write to one is logged (level, value, fn), to be applied
    as cells[level] = fn(value, cells[level]) at the join (fn = padd for an
    add); levels >= fork_base are the half's own, an ordinary list."""

    __slots__ = ("fork_base", "log")

    def __init__(self, base: int) -> None:
        super().__init__([None] * base)
        self.fork_base = base
        self.log: list = []

    def __setitem__(self, i, v) -> None:
        if type(i) is int and 0 <= i < self.fork_base:
            self.log.append((i, v, padd))
        else:
            list.__setitem__(self, i, v)

    def defer(self, level: int, value, fn) -> None:
        """Log cells[level] = fn(value, cells[level]) for the join."""
        self.log.append((level, value, fn))


def replay(cells: list, log: list) -> None:
    """Apply a joined half's log to `cells`, in order (entries of cells a
    ForkCells does not own go on to its own log)."""
    if type(cells) is ForkCells:
        base, up = cells.fork_base, cells.log
        for entry in log:
            level, v, fn = entry
            if level < base:
                up.append(entry)
            else:
                list.__setitem__(cells, level, fn(v, cells[level]))
        return
    for level, v, fn in log:
        cells[level] = fn(v, cells[level])


# ------------------------------------------------------------------ forks

def _fork(run_a, run_b, make_view):
    """run_a(None) here and run_b(view) on a pool thread, view = make_view();
    returns (ra, rb, view or None when b ran here instead, on None)."""
    view = make_view()

    def task():
        with deep_recursion_limit():
            r = run_b(view)
        with stats.lock:
            stats.threads.add(threading.get_ident())
        return r

    fut = _pool().submit(task)
    with stats.lock:
        stats.decided += 1
    try:
        ra = run_a(None)
    except BaseException:
        if not fut.cancel():
            fut.exception()  # wait: nothing of this fork runs after we raise
        raise
    if fut.cancel():  # not started: run it here, in program order after a
        return ra, run_b(None), None
    rb = fut.result()
    with stats.lock:
        stats.pooled += 1
    return ra, rb, view


def _split(prefix: list, lo: int, hi: int):
    """The index splitting [lo, hi) into halves of about equal size, if both
    are heavy; else None."""
    if hi - lo < 2:
        return None
    half = (prefix[lo] + prefix[hi]) / 2
    mid = bisect.bisect_left(prefix, half, lo + 1, hi)
    mid = min(max(mid, lo + 1), hi - 1)
    g = GRAIN
    if prefix[mid] - prefix[lo] >= g and prefix[hi] - prefix[mid] >= g:
        return mid
    return None


def _prefix(sizes) -> list:
    prefix = [0]
    for s in sizes:
        prefix.append(prefix[-1] + s)
    return prefix


def pvals(fns, sizes) -> list:
    """[f() for f in fns], the heavy halves on two threads (pure values)."""
    return _vals(fns, _prefix(sizes), 0, len(fns), MAX_DEPTH)


# (module functions, not closures calling themselves: such a closure is a
# reference cycle, which would keep a call's arrays alive until the cyclic GC
# ran: hundreds of MB at n = 4 * 10^6, and fresh pages for the next call)

def _vals(fns, prefix: list, lo: int, hi: int, depth: int) -> list:
    mid = _split(prefix, lo, hi) if depth else None
    if mid is None:
        return [fns[i]() for i in range(lo, hi)]
    ra, rb, _ = _fork(functools.partial(_vals_half, fns, prefix, lo, mid, depth - 1),
                      functools.partial(_vals_half, fns, prefix, mid, hi, depth - 1), _no_view)
    return ra + rb


def _vals_half(fns, prefix: list, lo: int, hi: int, depth: int, _view) -> list:
    return _vals(fns, prefix, lo, hi, depth)


def _no_view():
    return None


def pseq(cells: list, fns, sizes):
    """fns[0](cells) >> fns[1](cells) >> ...: the last one's result, the heavy
    halves on two threads (the second on a ForkCells, replayed at the join)."""
    return _seq(cells, fns, _prefix(sizes), 0, len(fns), MAX_DEPTH)


def _seq(cs: list, fns, prefix: list, lo: int, hi: int, depth: int):
    mid = _split(prefix, lo, hi) if depth else None
    if mid is None:
        r = None
        for i in range(lo, hi):
            r = fns[i](cs)
        return r
    _, rb, view = _fork(functools.partial(_seq_half, cs, fns, prefix, lo, mid, depth - 1),
                        functools.partial(_seq_half, cs, fns, prefix, mid, hi, depth - 1),
                        functools.partial(ForkCells, len(cs)))
    if view is not None:
        replay(cs, view.log)
    return rb


def _seq_half(cs: list, fns, prefix: list, lo: int, hi: int, depth: int, view):
    """A half on its own cells: view (a ForkCells), or cs itself (None: run
    here, in program order)."""
    return _seq(cs if view is None else view, fns, prefix, lo, hi, depth)


HELPERS = {"_psize": psize, "_pvals": pvals, "_pseq": pseq}
