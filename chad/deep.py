"""Run deeply recursive work (10,000 nested lets) without hitting Python's limits.

The counting evaluator (and the printer, the cost model, ...) recurse over terms:
their entry points run the work in a thread with a large C stack and a high
recursion limit (`run_deep`). The compiler's passes (parsing, checking, the
transformations, the simplifier, the code generator) walk the spines of deep
programs with loops instead, and run on the caller's thread, falling back to
`run_deep` only for a program nested some other way (`run_shallow`, below).

A library runs inside someone else's process, so the process-wide settings this
needs are changed only while they are needed and restored before returning:

* the recursion limit (process-wide in CPython) is raised to RECURSION_LIMIT only
  while at least one deep computation runs (a counter under a lock); when the
  last one ends, the caller's limit is restored (unless someone changed it in
  the meantime: then theirs is kept). A host program that recurses deeply after
  a call therefore still gets RecursionError, not a segmentation fault;
* `threading.stack_size()` is set and restored under a lock around each thread
  start (`thread_stack_size`), so concurrent calls cannot leave it changed;
* the cyclic garbage collector is paused while deep work runs (a counter too)
  and re-enabled afterwards if it was enabled;
* the big-stack threads are affordable under an address-space limit
  (`RLIMIT_AS`): STACK_BYTES is 256 MiB, not 512 MiB, and at most
  MAX_DEEP_THREADS of them exist at a time (further callers wait for one to
  finish). The documented deep programs (10,000 nested lets or a sum of
  10,000 terms through parse, check, print, grad and cost; tests/test_deep.py)
  need more than 8 MiB and run in 16 MiB, the parser's deepest nesting
  (MAX_DEPTH = 20,000 parentheses, through check and grad on every runtime) in
  32 MiB; the gradient of 100,000 nested lets needs more than 64 MiB and runs in
  128 MiB (benchmarks/bench_memory.py measures it), so 256 MiB keeps a margin.

A thread outside deep work must not rely on a limit raised for others: it drops
back when their work ends. `reliable_recursion_limit()` is the limit it can rely on.

`run_shallow(fn, ...)` tries fn on the calling thread first and uses run_deep
only if that raises RecursionError: for the passes that walk the spines of deep
programs with loops (parsing, checking, the transformation, the simplifier and
the code generator, docs/compiler.md "Deep programs").
"""

from __future__ import annotations

import contextlib
import gc
import sys
import threading
from typing import Callable, Iterator, TypeVar

from chad.memory import keep_freed_memory

T = TypeVar("T")

STACK_BYTES = 256 * 1024 * 1024
RECURSION_LIMIT = 1_000_000
# Big-stack threads started by run_deep that may exist at once (reserved address
# space: MAX_DEEP_THREADS * STACK_BYTES = 2 GiB); more callers wait for a slot.
MAX_DEEP_THREADS = 8

_local = threading.local()
_slots = threading.BoundedSemaphore(MAX_DEEP_THREADS)


def mark_deep_thread() -> None:
    """Mark the current thread as a big-stack one (e.g. a runtime's pool
    thread): run_deep then runs inline in it."""
    _local.deep = True


def in_deep_work() -> bool:
    """Whether the calling thread is a big-stack one (run_deep's, or marked)."""
    return getattr(_local, "deep", False)


def run_shallow(fn: Callable[..., T], *args) -> T:
    """fn(*args) on the calling thread, with its recursion limit; if that raises
    RecursionError, fn(*args) again with run_deep. For passes that walk the
    spines of deep programs (a chain of 10,000 lets, a sum of 10,000 terms)
    with loops, so that only a program nested some other way (20,000
    parentheses) needs the big-stack thread. fn must have no effect that a
    second call would see (the passes build new terms). The first attempt runs
    only when the calling thread's limit is its own: while other threads' deep
    work holds the raised limit, a recursion on this thread's stack could
    exceed what the stack holds, so fn goes to run_deep at once. The cyclic
    garbage collector is paused during the attempt, as run_deep does."""
    if getattr(_local, "deep", False) or sys.getrecursionlimit() != reliable_recursion_limit():
        return run_deep(fn, *args)
    _pause_gc()
    try:
        return fn(*args)
    except RecursionError:
        pass
    finally:
        _resume_gc()
    return run_deep(fn, *args)


def run_deep(fn: Callable[..., T], *args, **kwargs) -> T:
    """Call fn(*args, **kwargs) in a big-stack thread; re-raise its exception."""
    if getattr(_local, "deep", False):
        with deep_recursion_limit():
            return fn(*args, **kwargs)
    result: list = []
    error: list = []

    def target():
        _local.deep = True
        try:
            with deep_recursion_limit():
                result.append(fn(*args, **kwargs))
        except BaseException as exc:  # re-raised in the caller's thread
            error.append(exc)
        finally:
            _slots.release()

    _slots.acquire()
    # The cyclic GC rescans every live object each time it runs; with the many
    # small terms and closures of a deep evaluation that made it 2.5x slower. Terms
    # and values are acyclic, so reference counting frees them; the collector is
    # paused for the duration of the call (it is process-wide, hence the counter).
    _pause_gc()
    try:
        try:
            with thread_stack_size(STACK_BYTES):
                thread = threading.Thread(target=target, name="chad-deep")
                thread.start()
        except BaseException:
            _slots.release()  # the thread did not start: it will not release it
            raise
        thread.join()
    finally:
        _resume_gc()
    if error:
        raise error[0]
    return result[0]


# the thread stack size --------------------------------------------------------
_stack_lock = threading.Lock()


@contextlib.contextmanager
def thread_stack_size(nbytes: int) -> Iterator[None]:
    """threading.stack_size(nbytes) for the threads started in the block, and
    the caller's value again afterwards. Serialised by a lock, so concurrent
    users cannot restore each other's value (keep the block short: start the
    threads and leave)."""
    keep_freed_memory()  # before chad's first thread: one malloc arena (chad/memory.py)
    with _stack_lock:
        old = threading.stack_size(nbytes)
        try:
            yield
        finally:
            threading.stack_size(old)


# the recursion limit ----------------------------------------------------------
_limit_lock = threading.Lock()
_limit_users = 0
_limit_saved: int | None = None  # the caller's limit while ours is in force


@contextlib.contextmanager
def deep_recursion_limit() -> Iterator[None]:
    """The recursion limit is at least RECURSION_LIMIT inside the block. The first
    of overlapping blocks (in any threads) raises it, the last one to end
    restores the value found by the first. Use it only on big-stack threads:
    the limit is process-wide, and a deep recursion on a small stack crashes."""
    _enter_limit()
    try:
        yield
    finally:
        _exit_limit()


def reliable_recursion_limit() -> int:
    """The recursion limit the calling thread can rely on until it returns: the
    current one inside deep work (which holds the raised limit), else the
    caller's own (a limit raised for other threads' deep work drops back when
    that work ends, possibly while this thread is deeper than the old limit).
    Use this, not sys.getrecursionlimit(), to decide whether some recursion fits
    in the calling thread."""
    if getattr(_local, "limit_holds", 0):
        return sys.getrecursionlimit()
    with _limit_lock:
        return _limit_saved if _limit_saved is not None else sys.getrecursionlimit()


def _enter_limit() -> None:
    global _limit_users, _limit_saved
    _local.limit_holds = getattr(_local, "limit_holds", 0) + 1
    with _limit_lock:
        if _limit_users == 0:
            current = sys.getrecursionlimit()
            if current < RECURSION_LIMIT:
                sys.setrecursionlimit(RECURSION_LIMIT)
                _limit_saved = current
        _limit_users += 1


def _exit_limit() -> None:
    global _limit_users, _limit_saved
    _local.limit_holds -= 1
    with _limit_lock:
        _limit_users -= 1
        if _limit_users == 0 and _limit_saved is not None:
            saved, _limit_saved = _limit_saved, None
            # If someone set another limit meanwhile, theirs stays.
            if sys.getrecursionlimit() == RECURSION_LIMIT:
                sys.setrecursionlimit(saved)


# the garbage collector ----------------------------------------------------------
_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = True


def _pause_gc() -> None:
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1


def _resume_gc() -> None:
    global _gc_pauses
    with _gc_lock:
        _gc_pauses -= 1
        if _gc_pauses == 0 and _gc_was_enabled:
            gc.enable()


def deep(fn: Callable[..., T]) -> Callable[..., T]:
    """Decorator form of run_deep."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return run_deep(fn, *args, **kwargs)

    return wrapper
