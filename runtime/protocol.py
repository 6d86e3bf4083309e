"""The EVM interface: the environment vector monad (seed 000 §4.2, §5, Table 2)
behind one small Protocol, as the formalisation's abstract `LACM` module.

An EVM implementation builds *actions* (its own representation) with `pure`,
`bind`, `then`, `add` (the paper's `one`) and `scope`, and executes them with
`run`. The state is a stack of cells, one per variable of the typing context,
addressed by *level* (the first parameter is level 0); `scope` pushes one cell
for the duration of an action.

Every implementation reports the formalisation's abstract cost (spec/LACM.agda),
which must not depend on the implementation:

    run m env        cost 1 + |env| + c(m)
    pure x           c = 1
    bind m k         c = 1 + c(m) + ccall + c(k x)   (k x returns (action, ccall))
    then a b         c = 1 + c(a) + 1 + c(b)         (= bind a (\\_ -> b); the
                                                      continuation's body is one var)
    add level v      c = 1 + cost of plusv v cell     (traversal not costed)
    scope init m     c = 1 + c(m); result (final cell value, result of m)

The four laws of the formalisation (run-pure, run-bind, run-add, run-scope) are
tested once against every implementation in tests/test_evm_laws.py.
Each implementation also counts its own real work in `work` (tree nodes visited,
cells touched), so the persistent map's log factor shows next to the abstract cost.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, runtime_checkable

Action = Any
# A continuation for bind: x -> (next action, cost of computing it).
Continuation = Callable[[Any], tuple[Action, int]]


@runtime_checkable
class EVM(Protocol):
    name: str
    work: int  # the implementation's own count of real work since creation/reset

    def pure(self, x: Any) -> Action: ...

    def bind(self, m: Action, k: Continuation) -> Action: ...

    def then(self, a: Action, b: Action) -> Action: ...

    def add(self, level: int, value: Any) -> Action: ...

    def scope(self, init: Any, m: Action) -> Action: ...

    def run(self, m: Action, env: list) -> tuple[Any, list, int]:
        """Run m from the cells env (level order); (result, final cells, cost)."""
        ...
