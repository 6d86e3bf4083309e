"""Run deeply recursive work (10,000 nested lets) without hitting Python's limits.

Parsing, checking, transforming and evaluating all recurse over terms. Rather than
rewrite each of them as an explicit-stack loop, every entry point runs its work in
a thread with a large C stack and a high recursion limit.
"""

from __future__ import annotations

import gc
import sys
import threading
from typing import Callable, TypeVar

T = TypeVar("T")

STACK_BYTES = 512 * 1024 * 1024
RECURSION_LIMIT = 1_000_000

_local = threading.local()


def mark_deep_thread() -> None:
    """Mark the current thread as a big-stack one (e.g. a runtime's pool
    thread): run_deep then runs inline in it."""
    _local.deep = True


def run_deep(fn: Callable[..., T], *args, **kwargs) -> T:
    """Call fn(*args, **kwargs) in a big-stack thread; re-raise its exception."""
    if getattr(_local, "deep", False):
        return fn(*args, **kwargs)
    result: list = []
    error: list = []

    def target():
        _local.deep = True
        try:
            result.append(fn(*args, **kwargs))
        except BaseException as exc:  # re-raised in the caller's thread
            error.append(exc)

    old_size = threading.stack_size()
    threading.stack_size(STACK_BYTES)
    # The cyclic GC rescans every live object each time it runs; with the many
    # small terms and closures of a deep evaluation that made it 2.5x slower. Terms
    # and values are acyclic, so reference counting frees them; the collector is
    # paused for the duration of the call (it is process-wide, hence the counter).
    _pause_gc()
    try:
        if sys.getrecursionlimit() < RECURSION_LIMIT:
            sys.setrecursionlimit(RECURSION_LIMIT)
        thread = threading.Thread(target=target, name="chad-deep")
        thread.start()
    finally:
        threading.stack_size(old_size)
    try:
        thread.join()
    finally:
        _resume_gc()
    if error:
        raise error[0]
    return result[0]


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
