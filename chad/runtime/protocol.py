"""The EVM interface: the environment vector monad (Efficient CHAD (Smeding & Vákár), §4.2, §5, Table 2)
behind one small Protocol, as the formalisation's abstract `LACM` module.

An EVM implementation builds *actions* (its own representation) with `pure`,
`bind`, `then`, `add` (the paper's `one`), `scope` and `sequence`, and executes
them with `run`. The state is a stack of cells, one per variable of the typing
context, addressed by *level* (the first parameter is level 0); `scope` pushes
one cell for the duration of an action.

Every implementation reports the formalisation's abstract cost (spec/LACM.agda),
which must not depend on the implementation:

    run m env        cost 1 + |env| + c(m)
    pure x           c = 1
    bind m k         c = 1 + c(m) + ccall + c(k x)   (k x returns (action, ccall))
    then a b         c = 1 + c(a) + 1 + c(b)         (= bind a (\\_ -> b); the
                                                      continuation's body is one var)
    add level v      c = 1 + cost of plusv v cell     (traversal not costed)
    scope init m     c = 1 + c(m); result (final cell value, result of m)
    sequence [a1..an]  = a1 `then` ... `then` an, bracketed any way: result of an,
                     c = c(a1) + ... + c(an) + 2 (n - 1); pure None (c = 1) if n = 0

The four laws of the formalisation (run-pure, run-bind, run-add, run-scope), and
`sequence` = the `then` chain, are tested against every implementation in
tests/test_evm_laws.py.

Each implementation also counts its own real work in `work` (tree nodes visited,
cells touched), so the persistent map's log factor shows next to the abstract
cost; `reset_work()` sets it back to 0. `start()` and `close()` are the
lifecycle: acquire resources early (a thread pool) and release them; both are
no-ops unless an implementation has resources.

`EVMBase` holds the one default implementation of `sequence` (a balanced tree of
`then`), `work`/`reset_work`, `start`/`close` and `with`; a runtime inherits it
unless it has a better one (the array and map EVMs run the list in a loop, the
parallel EVM splits it across threads), which must agree with the default on
result, cells and cost.

The cells' monoid (`Plus`, the formalisation's `plusv`) is a constructor
parameter of every implementation (default: chad.linear.plusv).
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence, runtime_checkable

Action = Any
# A continuation for bind: x -> (next action, cost of computing it).
Continuation = Callable[[Any], tuple[Action, int]]
# The cells' monoid: plus(new, cell) -> (new + cell, steps), the formalisation's plusv.
Plus = Callable[[Any, Any], tuple[Any, int]]


@runtime_checkable
class EVM(Protocol):
    name: str
    work: int  # the implementation's own count of real work since creation/reset

    def pure(self, x: Any) -> Action: ...

    def bind(self, m: Action, k: Continuation) -> Action: ...

    def then(self, a: Action, b: Action) -> Action: ...

    def add(self, level: int, value: Any) -> Action: ...

    def scope(self, init: Any, m: Action) -> Action: ...

    def sequence(self, actions: Sequence[Action]) -> Action:
        """The actions in order: the `then` chain of them (result of the last,
        cost sum + 2 (n - 1)); `pure None` if there are none."""
        ...

    def run(self, m: Action, env: list) -> tuple[Any, list, int]:
        """Run m from the cells env (level order); (result, final cells, cost)."""
        ...

    def reset_work(self) -> None:
        """Set `work` back to 0."""
        ...

    def start(self) -> "EVM":
        """Acquire the implementation's resources now (else: when first needed)."""
        ...

    def close(self) -> None:
        """Release the implementation's resources (a later run acquires them again)."""
        ...


class EVMBase:
    """The default implementations of the EVM Protocol's derived operations.

    Subclasses provide `name`, `pure`, `bind`, `then`, `add`, `scope` and `run`,
    and count into `work`."""

    name: str = "?"
    work: int = 0

    def sequence(self, actions: Sequence[Action]) -> Action:
        """A balanced tree of `then`: result of the last action, cost
        sum + 2 (n - 1) (each of the n - 1 `then`s costs 2); `pure None`
        (cost 1) if empty. Depth O(log n), so long lists do not recurse deeply."""
        acts = list(actions)
        if not acts:
            return self.pure(None)
        return _then_tree(self.then, acts, 0, len(acts))

    def reset_work(self) -> None:
        self.work = 0

    def start(self):
        return self

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _then_tree(then, acts: list, lo: int, hi: int):
    """`then` over acts[lo:hi] as a balanced tree (a module function: a closure
    calling itself is a reference cycle, keeping the actions alive until the
    cyclic GC runs)."""
    if hi - lo == 1:
        return acts[lo]
    mid = (lo + hi) // 2
    return then(_then_tree(then, acts, lo, mid), _then_tree(then, acts, mid, hi))
