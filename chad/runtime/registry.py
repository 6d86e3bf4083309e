"""Choose an EVM implementation by name: `make_evm("map" | "array" | "parallel")`."""

from __future__ import annotations

from chad.errors import UsageError

from .array_evm import ArrayEVM
from .map_evm import MapEVM
from .parallel_evm import ParallelEVM
from .protocol import EVM

EVM_NAMES: tuple[str, ...] = ("map", "array", "parallel")

_FACTORIES = {"map": MapEVM, "array": ArrayEVM, "parallel": ParallelEVM}


class UnknownRuntimeError(UsageError, ValueError):
    """An unknown EVM name: a user error (UsageError) and a ValueError."""


def make_evm(name: str, **options) -> EVM:
    """A fresh EVM of the named implementation. Options go to the constructor:
    every one takes plus= (the cells' monoid, default chad.linear.plusv); "parallel" also
    max_workers=8, grain=64, stripes=64, stack_bytes, thread_init."""
    factory = _FACTORIES.get(name) if isinstance(name, str) else None
    if factory is None:
        raise UnknownRuntimeError(
            f"unknown runtime {name!r}; choose one of: {', '.join(EVM_NAMES)}")
    try:
        return factory(**options)
    except TypeError as exc:
        raise UsageError(f"bad options for runtime {name!r}: {exc}") from None
