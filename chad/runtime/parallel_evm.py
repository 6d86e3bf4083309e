"""The task-parallel EVM (Efficient CHAD (Smeding & Vákár), §8): the array EVM of §5, but `then a b` and
`sequence` may run their independent actions concurrently on a thread pool.

This is safe because the monad is an *accumulation* monad: actions only ever
`add` into cells, and never read them. The only reads are `scope`'s final read
of its own cell, after every task that could add to it has been joined.

Determinism: the result is the sequential one, bit for bit
--------------------------------------------------------------
Floating-point addition is not associative, so adding into shared cells in
thread-completion order would make the last bits of a gradient vary from run to
run. Instead, a forked task never touches a cell that existed when it was
forked: it appends each such `add` to its own *log* (level, value), and the
forking thread replays the log, in order, at the join — after its own side,
which comes first in program order. Every cell therefore receives exactly the
`plusv` calls of the sequential (array) runtime, with the same arguments in the
same order: the final cells, the results of every `scope` and the abstract
cost (each `plusv`'s steps are counted when it is replayed) are identical to
the array runtime's, independently of the scheduling. No locks are needed.

Representation
--------------
* A *view* (`_Ctx`) is one task's state: `base`, the number of cells that
  existed when the task was forked (0 for the root), `cells`, the values of the
  levels >= base (a stack, where the task's `scope`s push and pop, as in the
  array runtime), and `log`, its adds to levels < base in program order.
* A fork runs one side inline on the forking view and gives the other side
  (the pool task) a new view with base = all the levels of the forking view,
  no cells and an empty log. At the join the forking thread applies the task's
  log to its own view: an entry for a level the view owns is added to its
  cell, any other is appended to the view's own log (to be replayed at the next
  join up). A fork costs O(1); a logged add costs O(1) per join it passes.
* `work` counts what the array runtime counts, so it does not depend on the
  scheduling either: one per add (when it reaches its cell), one per scope,
  |env| per run. `forks` counts the forks whose pool side ran on a pool thread
  (it depends on the scheduling); `forks_submitted` the forks decided (it does not).
* An action is a `PAction(fn, weight)`; `fn(ctx) -> (result, cost)`. The static
  `weight` (number of constructors, with a bind counted as heavy because its
  continuation is unknown) decides whether a `then` forks: only if both sides
  weigh at least `grain` (the paper: parallelism can cost more than it gains).

Deadlock freedom with nested forks: a fork submits one side to the pool and runs
the other inline; afterwards, if the submitted future has not started it is
cancelled and run inline, otherwise the thread waits for it. A thread therefore
only ever waits for a task that is already running on another thread and was
forked deeper in the same tree, so waits cannot form a cycle and no task waits
for a free worker.

Pool threads are created up front with a big stack (chad.deep.STACK_BYTES, set
and restored under chad.deep's lock), because actions may recurse deeply, and
each runs `thread_init` once if one is given (by default they are marked for
chad.deep.run_deep). A pool task raises the recursion limit only while it
runs (chad.deep.deep_recursion_limit), so the process's limit is the caller's
again when nothing runs.
"""

from __future__ import annotations

import bisect
import math
import threading
from functools import partial
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

from chad import deep
from chad.deep import deep_recursion_limit, mark_deep_thread, thread_stack_size
from chad.linear import plusv as default_plus

from .array_evm import check_level, out_of_range
from .protocol import Continuation, EVMBase, Plus

DEFAULT_WORKERS = 8
DEFAULT_GRAIN = 64
DEFAULT_STRIPES = 64  # accepted for compatibility; adds no longer take locks


class PAction:
    """An action of the parallel EVM: fn(ctx) -> (result, cost), and a static weight."""

    __slots__ = ("fn", "weight")

    def __init__(self, fn: Callable, weight: int):
        self.fn = fn
        self.weight = weight

    def __repr__(self) -> str:
        return f"<PAction weight={self.weight}>"


class _Sequence:
    """A `sequence` action run: the chunks of `acts` split by weight (prefix:
    the running sums of the weights), forking while both halves weigh at least
    `grain`. An object, not closures calling themselves: a closure that refers
    to itself is a reference cycle, and the actions with the values they hold
    would live until the cyclic GC ran."""

    __slots__ = ("acts", "prefix", "grain", "fork", "depth")

    def __init__(self, acts: list, prefix: list, grain: int, fork: Callable, depth: int):
        self.acts, self.prefix, self.grain, self.fork, self.depth = acts, prefix, grain, fork, depth

    def __call__(self, ctx):
        return self.go(ctx, 0, len(self.acts), self.depth)

    def seq(self, ctx, lo: int, hi: int):
        total = 2 * (hi - lo - 1)
        r = None
        acts = self.acts
        for i in range(lo, hi):
            r, c = acts[i](ctx)
            total += c
        return r, total

    def go(self, ctx, lo: int, hi: int, depth: int):
        prefix = self.prefix
        if hi - lo >= 2 and depth > 0:
            half = (prefix[lo] + prefix[hi]) / 2
            mid = bisect.bisect_left(prefix, half, lo + 1, hi)
            mid = min(max(mid, lo + 1), hi - 1)
            grain = self.grain
            if prefix[mid] - prefix[lo] >= grain and prefix[hi] - prefix[mid] >= grain:
                _, ca, rb, cb = self.fork(ctx, partial(self.go, lo=lo, hi=mid, depth=depth - 1),
                                          partial(self.go, lo=mid, hi=hi, depth=depth - 1))
                return rb, ca + cb + 2
        return self.seq(ctx, lo, hi)


class _Ctx:
    """One task's view of the cells and its own work count (used by one thread
    at a time: the task's, or the forking thread's for the inline side)."""

    __slots__ = ("base", "cells", "log", "work")

    def __init__(self, base: int, cells: list):
        self.base = base    # the levels < base belong to the forking task
        self.cells = cells  # values of the levels >= base
        self.log: list = []  # (level, value) for the adds to levels < base, in order
        self.work = 0


_SHARED_POOLS: dict[tuple, ThreadPoolExecutor] = {}
_SHARED_LOCK = threading.Lock()


class ParallelEVM(EVMBase):
    """EVM over a stack of cells with task-parallel then/sequence, deterministic:
    results, cells and costs are the array runtime's (see the module docstring).
    `plus`: the cells' monoid (default: chad.linear.plusv); `thread_init`:
    run once on each pool thread (default: mark it as a big-stack thread for
    chad.deep.run_deep, which then runs inline); `stack_bytes`: the pool
    threads' stack size (default chad.deep.STACK_BYTES); `stripes`: accepted
    and checked for compatibility, unused (adds take no locks)."""

    name = "parallel"

    def __init__(self, max_workers: int = DEFAULT_WORKERS, grain: int = DEFAULT_GRAIN,
                 stripes: int = DEFAULT_STRIPES, stack_bytes: int | None = None,
                 plus: Plus | None = None,
                 thread_init: Callable[[], None] | None = mark_deep_thread):
        if not isinstance(max_workers, int) or max_workers < 1:
            raise ValueError(f"max_workers must be a positive int, got {max_workers!r}")
        if not isinstance(grain, int) or grain < 1:
            raise ValueError(f"grain must be a positive int, got {grain!r}")
        if not isinstance(stripes, int) or stripes < 1:
            raise ValueError(f"stripes must be a positive int, got {stripes!r}")
        self.max_workers = max_workers
        self.grain = grain
        self.stack_bytes = stack_bytes if stack_bytes is not None else deep.STACK_BYTES
        self.plus = plus if plus is not None else default_plus
        self.thread_init = thread_init
        self._executor: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._work_lock = threading.Lock()
        self._seq_depth = math.ceil(math.log2(max_workers)) + 1
        self.work = 0
        self.forks = 0  # forks that actually ran a side on another pool thread
        self.forks_submitted = 0  # forks decided (a side submitted): independent of timing

    def reset_work(self) -> None:
        with self._work_lock:
            self.work = 0
            self.forks = 0
            self.forks_submitted = 0

    # the pool ---------------------------------------------------------------
    def _pool(self) -> ThreadPoolExecutor:
        ex = self._executor
        if ex is not None:
            return ex
        with self._pool_lock:
            if self._executor is None:
                self._executor = self._make_pool()
            return self._executor

    def _make_pool(self) -> ThreadPoolExecutor:
        """The pool for (max_workers, stack_bytes, thread_init), shared by every
        ParallelEVM with those settings: the API makes one EVM per gradient, and
        a pool per EVM would leave max_workers idle threads behind for each of them."""
        key = (self.max_workers, self.stack_bytes, self.thread_init)
        with _SHARED_LOCK:
            ex = _SHARED_POOLS.get(key)
            if ex is None:
                ex = _SHARED_POOLS[key] = self._new_pool()
            return ex

    def _new_pool(self) -> ThreadPoolExecutor:
        n = self.max_workers
        ex = ThreadPoolExecutor(max_workers=n, thread_name_prefix="chad-evm",
                                initializer=self.thread_init)
        # ThreadPoolExecutor starts its threads lazily inside submit(). Start all
        # of them now, while the big stack size is in force: n tasks that wait
        # for each other at a barrier force n distinct threads.
        barrier = threading.Barrier(n)
        with thread_stack_size(self.stack_bytes):
            futs = [ex.submit(barrier.wait, 60) for _ in range(n)]
        for f in futs:
            f.result()
        return ex

    def start(self) -> "ParallelEVM":
        """Create the pool now (it is otherwise created at the first fork)."""
        self._pool()
        return self

    def close(self) -> None:
        """Detach from the pool (a later run attaches again). The pool itself is
        shared (see _make_pool) and its threads end with the interpreter."""
        with self._pool_lock:
            self._executor = None

    def _fork(self, ctx: _Ctx, fa: Callable, fb: Callable):
        """Run fa(ctx) here and fb concurrently in a private view, then replay
        fb's adds to ctx's levels after fa's: the sequential order. Returns
        (ra, ca, rb, cb)."""
        sub = _Ctx(ctx.base + len(ctx.cells), [])

        def task():
            with deep_recursion_limit():  # a pool thread has a big stack
                return fb(sub)

        fut = self._pool().submit(task)
        with self._work_lock:
            self.forks_submitted += 1
        try:
            ra, ca = fa(ctx)
        except BaseException:
            if not fut.cancel():
                fut.exception()  # wait: no task may run after we return
            raise
        if fut.cancel():  # not started: run it here, sequentially after fa
            rb, cb = fb(ctx)
        else:
            rb, cb = fut.result()
            cb += self._replay(ctx, sub.log)
            ctx.work += sub.work
            with self._work_lock:
                self.forks += 1
        return ra, ca, rb, cb

    def _replay(self, ctx: _Ctx, log: list) -> int:
        """Apply a joined task's logged adds to ctx, in order; their plusv steps."""
        plusv = self.plus
        base, cells, up = ctx.base, ctx.cells, ctx.log
        steps = applied = 0
        for entry in log:
            i = entry[0] - base
            if i >= 0:
                cells[i], c = plusv(entry[1], cells[i])
                steps += c
                applied += 1
            else:
                up.append(entry)
        ctx.work += applied  # an add counts once, when it reaches its cell
        return steps

    # building actions ---------------------------------------------------------
    def pure(self, x: Any) -> PAction:
        return PAction(lambda ctx: (x, 1), 1)

    def bind(self, m: PAction, k: Continuation) -> PAction:
        mf = m.fn

        def fn(ctx):
            x, c1 = mf(ctx)
            m2, ccall = k(x)
            y, c2 = m2.fn(ctx)
            return y, 1 + c1 + ccall + c2

        return PAction(fn, 1 + m.weight + self.grain)  # the continuation may be big

    def then(self, a: PAction, b: PAction) -> PAction:
        af, bf = a.fn, b.fn
        if min(a.weight, b.weight) >= self.grain:
            fork = self._fork

            def fn(ctx):
                _, ca, y, cb = fork(ctx, af, bf)
                return y, 2 + ca + cb
        else:
            def fn(ctx):
                _, ca = af(ctx)
                y, cb = bf(ctx)
                return y, 2 + ca + cb

        return PAction(fn, 1 + a.weight + b.weight)

    def add(self, level: int, value: Any) -> PAction:
        check_level(level)
        plusv = self.plus
        entry = (level, value)

        def fn(ctx):
            i = level - ctx.base
            if i < 0:  # a cell of the task that forked this one: replayed at the join
                ctx.log.append(entry)
                return None, 1  # + the plusv steps (and the work), counted when replayed
            cells = ctx.cells
            if i >= len(cells):
                raise out_of_range(level, ctx.base + len(cells))
            cells[i], c = plusv(value, cells[i])
            ctx.work += 1
            return None, 1 + c

        return PAction(fn, 1)

    def scope(self, init: Any, m: PAction) -> PAction:
        mf = m.fn

        def fn(ctx):
            cells = ctx.cells
            cells.append(init)
            try:
                r, c = mf(ctx)
            finally:
                out = cells.pop()
            ctx.work += 1
            return (out, r), 1 + c

        return PAction(fn, 1 + m.weight)

    def sequence(self, actions: Sequence[PAction]) -> PAction:
        """The `then` chain of the actions, possibly run concurrently: result of
        the last, cost sum + 2 (n - 1) (pure None, cost 1, if empty). Splits the
        list in halves of about equal weight, forking while both halves weigh
        >= grain, to a depth of about log2(max_workers) + 1 (so at most
        ~2 * max_workers chunks); each chunk runs sequentially (its elements may
        fork internally)."""
        actions = list(actions)  # (read twice: any sequence, a generator too)
        acts = [a.fn for a in actions]
        n = len(acts)
        if n == 0:
            return self.pure(None)
        prefix = [0]
        for a in actions:
            prefix.append(prefix[-1] + a.weight)
        return PAction(_Sequence(acts, prefix, self.grain, self._fork, self._seq_depth),
                       1 + prefix[n])

    # running --------------------------------------------------------------------
    def run(self, m: PAction, env: list) -> tuple[Any, list, int]:
        ctx = _Ctx(0, list(env))  # the root view owns every cell: it logs nothing
        r, c = m.fn(ctx)
        with self._work_lock:
            self.work += ctx.work + len(env)
        return r, ctx.cells, 1 + len(env) + c

    def __repr__(self) -> str:
        return f"ParallelEVM(max_workers={self.max_workers}, grain={self.grain})"
