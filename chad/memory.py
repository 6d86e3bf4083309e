"""Keeping freed memory for the next call: the C allocator's thresholds.

Vectorised code (chad/compile/vectorise.py) makes and frees arrays of n reals
at every call. glibc's malloc serves blocks above its mmap threshold (128 KiB
to start with) by mapping fresh pages and gives the top of its heap back to the
system above its trim threshold; either way the next call touches new pages,
and on machines where a page fault is slow (virtual machines, sandboxes) the
faults cost more than the arithmetic: on the development machine, 12 arrays of
10^5 reals made and freed together took 25 times as long as with the memory
kept (docs/compiler.md, "Memory"). XLA, which JAX uses, and PyTorch's CUDA path
keep freed blocks in their own caching allocators; numpy leaves it to malloc.

`keep_freed_memory()` sets glibc's mmap threshold to 32 MiB (its upper limit:
arrays of up to 4 million reals come from the heap) and its trim threshold to
256 MiB (up to that much freed memory stays with the process for the next
call), and lets threads share the one heap (M_ARENA_MAX 1): a thread of its own
would get an arena of its own, whose freed blocks go back to the system by
rules of their own, and the parallel runtime's threads (docs/runtimes.md) then
fault their arrays' pages in afresh at every call (the two-branch benchmark's
parallel gradient at n = 10^6: a median of 66 ms against 28 ms with one arena,
its fastest call 27 ms either way; benchmarks/bench_parallel.py). It is called
once, when the first function is compiled or chad first starts a thread of its
own (chad/deep.py: the interpreter's deep-recursion thread, the parallel
runtimes' pools), whichever comes first: glibc gives a new thread an arena
that an earlier thread left behind whatever the limit, so the limit must be
set before chad's first thread. It affects the whole process, numpy's other
users included; threads the program started before keep their arenas. The environment variable
CHAD_MALLOC=system leaves malloc as it is. Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 256 << 20

_done: list[bool | None] = [None]
_lock = threading.Lock()


def keep_freed_memory() -> bool:
    """Set the thresholds (once per process); True when they were set."""
    with _lock:
        if _done[0] is None:
            _done[0] = _set()
        return _done[0]


def _set() -> bool:
    if os.environ.get("CHAD_MALLOC", "").strip().lower() == "system":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
        if not hasattr(libc, "gnu_get_libc_version"):
            return False
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    ok = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    ok = mallopt(M_ARENA_MAX, 1) == 1 and ok
    return mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 and ok
