"""The task-parallel EVM (Efficient CHAD (Smeding & Vákár), §8): the array EVM of §5, but `then a b` and
`sequence` may run their independent actions concurrently on a thread pool.

This is safe because the monad is an *accumulation* monad: actions only ever
`add` (commutatively, associatively) into cells, and never read them. The only
reads are `scope`'s final read of its own cell, after every task that could add
to it has been joined. So the order in which concurrent branches add does not
matter (up to floating-point rounding), and the abstract cost of a run does not
depend on the interleaving either (see docs/runtimes.md).

Representation
--------------
* A cell is a box: a one-element list `[value]`, so that two views can share it.
* A *view* (`_Ctx`) maps levels to boxes in two parts: `lower`, a list of
  boxes for the levels < `base`, which is never resized once shared (it may be
  longer than `base`; the extra entries are dead), and `own`, the view's private
  stack of boxes for levels >= base, where its `scope`s push and pop.
* A fork keeps the forking thread's view for one side and gives the other side
  (the pool task) a new view with the same `lower` list and `base` and an empty
  `own` stack, after first *flattening* the forking view (lower := lower[:base]
  + own, base += len(own), own := []) if its own stack is not empty. Both sides then share the boxes of every level that
  exists at the fork, and each pushes its scope cells on its own private stack,
  so sibling scopes never collide. A fork costs O(1) when no scope was pushed
  since the view's last fork, otherwise one O(|cells|) copy of references.
  A `scope` that pops below a flattened view's base just lowers the base.
* `add` updates a box under a lock striped by level (`level % stripes`): the
  same box always has the same level, so all updates of one box are serialised
  and none is lost; boxes at other levels mostly use other locks.
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

Pool threads are created up front with a 512 MiB stack (as chad/deep.py does),
because actions may recurse deeply, and each runs `thread_init` once if one is
given (by default they are marked for chad.deep.run_deep).
"""

from __future__ import annotations

import bisect
import math
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

from chad.deep import RECURSION_LIMIT, STACK_BYTES, mark_deep_thread
from chad.linear import plusv as default_plus

from .array_evm import check_level, out_of_range
from .protocol import Continuation, EVMBase, Plus

DEFAULT_WORKERS = 8
DEFAULT_GRAIN = 64
DEFAULT_STRIPES = 64


class PAction:
    """An action of the parallel EVM: fn(ctx) -> (result, cost), and a static weight."""

    __slots__ = ("fn", "weight")

    def __init__(self, fn: Callable, weight: int):
        self.fn = fn
        self.weight = weight

    def __repr__(self) -> str:
        return f"<PAction weight={self.weight}>"


class _Ctx:
    """One task's view of the cells and its own work count (used by one thread
    at a time: the task's, or the forking thread's for the inline side)."""

    __slots__ = ("lower", "base", "own", "work")

    def __init__(self, lower: list, base: int):
        self.lower = lower  # boxes of levels < base; never resized
        self.base = base
        self.own: list = []  # boxes of levels >= base
        self.work = 0

    def flatten(self) -> None:
        """Move the private boxes into a new lower list, so it can be shared."""
        own = self.own
        if own:
            self.lower = self.lower[:self.base] + own
            self.work += self.base + len(own)
            self.base += len(own)
            self.own = []

    def boxes(self) -> list:
        return self.lower[:self.base] + self.own


_SHARED_POOLS: dict[tuple, ThreadPoolExecutor] = {}
_SHARED_LOCK = threading.Lock()


class ParallelEVM(EVMBase):
    """EVM over a shared stack of locked cells with task-parallel then/sequence.
    `plus`: the cells' monoid (default: chad.linear.plusv); `thread_init`:
    run once on each pool thread (default: mark it as a big-stack thread for
    chad.deep.run_deep, which then runs inline)."""

    name = "parallel"

    def __init__(self, max_workers: int = DEFAULT_WORKERS, grain: int = DEFAULT_GRAIN,
                 stripes: int = DEFAULT_STRIPES, stack_bytes: int = STACK_BYTES,
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
        self.stack_bytes = stack_bytes
        self.plus = plus if plus is not None else default_plus
        self.thread_init = thread_init
        self._locks = [threading.Lock() for _ in range(stripes)]
        self._nstripes = stripes
        self._executor: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._work_lock = threading.Lock()
        self._seq_depth = math.ceil(math.log2(max_workers)) + 1
        self.work = 0
        self.forks = 0  # forks that actually ran a side on another pool thread

    def reset_work(self) -> None:
        with self._work_lock:
            self.work = 0
            self.forks = 0

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
        if sys.getrecursionlimit() < RECURSION_LIMIT:
            sys.setrecursionlimit(RECURSION_LIMIT)
        n = self.max_workers
        ex = ThreadPoolExecutor(max_workers=n, thread_name_prefix="chad-evm",
                                initializer=self.thread_init)
        # ThreadPoolExecutor starts its threads lazily inside submit(). Start all
        # of them now, while the big stack size is in force: n tasks that wait
        # for each other at a barrier force n distinct threads.
        barrier = threading.Barrier(n)
        old = threading.stack_size()
        threading.stack_size(self.stack_bytes)
        try:
            futs = [ex.submit(barrier.wait, 60) for _ in range(n)]
        finally:
            threading.stack_size(old)
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
        """Run fa(ctx) here and fb concurrently in a private view; both joined.
        Returns (ra, ca, rb, cb)."""
        ctx.flatten()
        sub = _Ctx(ctx.lower, ctx.base)  # shares every box that exists now

        def task():
            rb, cb = fb(sub)
            return rb, cb, sub.work

        fut = self._pool().submit(task)
        try:
            ra, ca = fa(ctx)
        except BaseException:
            if not fut.cancel():
                fut.exception()  # wait: no task may touch the cells after we return
            raise
        if fut.cancel():  # not started: run it here, sequentially after fa
            rb, cb = fb(ctx)
        else:
            rb, cb, w = fut.result()
            ctx.work += w
            with self._work_lock:
                self.forks += 1
        return ra, ca, rb, cb

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
        lock = self._locks[level % self._nstripes]
        acquire, release = lock.acquire, lock.release

        def fn(ctx):
            i = level - ctx.base
            try:
                box = ctx.own[i] if i >= 0 else ctx.lower[level]
            except IndexError:
                raise out_of_range(level, ctx.base + len(ctx.own)) from None
            acquire()  # read-modify-write of a possibly shared box
            try:
                new, c = plusv(value, box[0])
                box[0] = new
            finally:
                release()
            ctx.work += 1
            return None, 1 + c

        return PAction(fn, 1)

    def scope(self, init: Any, m: PAction) -> PAction:
        mf = m.fn

        def fn(ctx):
            ctx.own.append([init])
            try:
                r, c = mf(ctx)
            finally:
                if ctx.own:  # (a fork inside m may have flattened the view)
                    box = ctx.own.pop()
                else:
                    ctx.base -= 1
                    box = ctx.lower[ctx.base]
            ctx.work += 1
            return (box[0], r), 1 + c

        return PAction(fn, 1 + m.weight)

    def sequence(self, actions: Sequence[PAction]) -> PAction:
        """The `then` chain of the actions, possibly run concurrently: result of
        the last, cost sum + 2 (n - 1) (pure None, cost 1, if empty). Splits the
        list in halves of about equal weight, forking while both halves weigh
        >= grain, to a depth of about log2(max_workers) + 1 (so at most
        ~2 * max_workers chunks); each chunk runs sequentially (its elements may
        fork internally)."""
        acts = [a.fn for a in actions]
        n = len(acts)
        if n == 0:
            return self.pure(None)
        weights = [a.weight for a in actions]
        prefix = [0]
        for w in weights:
            prefix.append(prefix[-1] + w)
        grain = self.grain
        fork = self._fork

        def seq(ctx, lo, hi):
            total = 2 * (hi - lo - 1)
            r = None
            for i in range(lo, hi):
                r, c = acts[i](ctx)
                total += c
            return r, total

        def go(ctx, lo, hi, depth):
            if hi - lo >= 2 and depth > 0:
                half = (prefix[lo] + prefix[hi]) / 2
                mid = bisect.bisect_left(prefix, half, lo + 1, hi)
                mid = min(max(mid, lo + 1), hi - 1)
                if prefix[mid] - prefix[lo] >= grain and prefix[hi] - prefix[mid] >= grain:
                    _, ca, rb, cb = fork(ctx, lambda c: go(c, lo, mid, depth - 1),
                                         lambda c: go(c, mid, hi, depth - 1))
                    return rb, ca + cb + 2
            return seq(ctx, lo, hi)

        depth0 = self._seq_depth

        def fn(ctx):
            return go(ctx, 0, n, depth0)

        return PAction(fn, 1 + prefix[n])

    # running --------------------------------------------------------------------
    def run(self, m: PAction, env: list) -> tuple[Any, list, int]:
        boxes = [[v] for v in env]
        ctx = _Ctx(boxes, len(boxes))
        r, c = m.fn(ctx)
        out = [box[0] for box in ctx.boxes()]
        with self._work_lock:
            self.work += ctx.work + 2 * len(env)
        return r, out, 1 + len(env) + c

    def __repr__(self) -> str:
        return f"ParallelEVM(max_workers={self.max_workers}, grain={self.grain})"
