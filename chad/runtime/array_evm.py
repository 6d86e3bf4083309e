"""The mutable-array EVM (Efficient CHAD (Smeding & Vákár), §5, Fig. 8, Table 2): the state is one Python
list used as a stack of cells, so `add` (the paper's `one`), `scope`'s push and
pop are O(1) (amortised for push), plus the cost of `plusv`.

An action is a closure `act(cells) -> (result, cost)` that mutates `cells`
in place; `run` copies the environment into a fresh list, so the caller's list
is never modified. Costs are the formalisation's abstract costs (see
chad/runtime/protocol.py), identical to the other implementations.

`work` counts cells touched: one per `add`, one per `scope` (push + pop of the
same cell), and |env| per `run` (copying the environment in).

Deep action trees recurse in Python; run them on a thread with a big stack
(chad.deep.run_deep).
"""

from __future__ import annotations

from typing import Any, Sequence

from chad.linear import plusv as default_plus

from .protocol import Action, Continuation, EVMBase, Plus


def check_level(level) -> int:
    if isinstance(level, bool) or not isinstance(level, int) or level < 0:
        raise ValueError(f"add: level must be a non-negative int, got {level!r}")
    return level


def out_of_range(level: int, ncells: int) -> IndexError:
    return IndexError(f"add: level {level} out of range for {ncells} cells")


class ArrayEVM(EVMBase):
    """EVM over a mutable Python list (a stack of cells, level 0 at the bottom).
    `plus`: the cells' monoid (default: chad.linear.plusv)."""

    name = "array"

    def __init__(self, plus: Plus | None = None) -> None:
        self.plus = plus if plus is not None else default_plus
        self.work = 0

    # building actions ---------------------------------------------------------
    def pure(self, x: Any) -> Action:
        def act(cells):
            return x, 1

        return act

    def bind(self, m: Action, k: Continuation) -> Action:
        def act(cells):
            x, c1 = m(cells)
            m2, ccall = k(x)
            y, c2 = m2(cells)
            return y, 1 + c1 + ccall + c2

        return act

    def then(self, a: Action, b: Action) -> Action:
        def act(cells):
            _, ca = a(cells)
            y, cb = b(cells)
            return y, 2 + ca + cb

        return act

    def add(self, level: int, value: Any) -> Action:
        check_level(level)
        plusv = self.plus

        def act(cells):
            try:
                new, c = plusv(value, cells[level])
            except IndexError:
                raise out_of_range(level, len(cells)) from None
            cells[level] = new
            self.work += 1
            return None, 1 + c

        return act

    def scope(self, init: Any, m: Action) -> Action:
        def act(cells):
            cells.append(init)
            r, c = m(cells)
            out = cells.pop()
            self.work += 1
            return (out, r), 1 + c

        return act

    def sequence(self, actions: Sequence[Action]) -> Action:
        """The `then` chain of the actions, as a loop: result of the last,
        cost sum + 2 (n - 1) (pure None, cost 1, if empty)."""
        acts = tuple(actions)
        if not acts:
            return self.pure(None)
        extra = 2 * (len(acts) - 1)

        def act(cells):
            total = extra
            r = None
            for a in acts:
                r, c = a(cells)
                total += c
            return r, total

        return act

    # running --------------------------------------------------------------------
    def run(self, m: Action, env: list) -> tuple[Any, list, int]:
        cells = list(env)
        self.work += len(cells)
        r, c = m(cells)
        return r, cells, 1 + len(env) + c

    def __repr__(self) -> str:
        return "ArrayEVM()"
