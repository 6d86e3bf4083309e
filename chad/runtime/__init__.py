"""EVM runtimes: the environment vector monad of Efficient CHAD (Efficient CHAD (Smeding & Vákár), §4.2,
§5, §8) behind the `EVM` Protocol of chad/runtime/protocol.py.

    make_evm("map")       persistent AVL tree map, O(log |Γ|) per add/scope
    make_evm("array")     mutable list as a stack of cells, O(1) per add/scope
    make_evm("parallel")  the array design with task-parallel then/sequence

chad/runtime/ imports no compiler module: only the value layer of chad/ (the
cotangents' monoid `chad.linear.plusv`, the big-stack helper `chad.deep`,
`chad.errors`). The monoid is also a constructor parameter (`plus=`).
"""

from .array_evm import ArrayEVM
from .map_evm import MapEVM
from .parallel_evm import ParallelEVM
from .persistent_map import PersistentMap
from .protocol import EVM, Action, Continuation, EVMBase, Plus
from .registry import EVM_NAMES, UnknownRuntimeError, make_evm

__all__ = [
    "EVM", "EVMBase", "Action", "Continuation", "Plus", "EVM_NAMES", "make_evm",
    "UnknownRuntimeError", "ArrayEVM", "MapEVM", "ParallelEVM", "PersistentMap",
]
