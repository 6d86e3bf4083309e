"""The persistent-map EVM (Efficient CHAD (Smeding & Vákár), §4.2): the state monad over an immutable
balanced tree map (chad/runtime/persistent_map.py) keyed by level.

An action is a pure function `act(map) -> (result, map', cost)`: the map is
threaded through functionally and never mutated, so every intermediate state
stays valid (the paper's `EMap`). `add` is one O(log |Γ|) path copy; `scope`
inserts the new cell at level |cells| (the map's size) and deletes it again,
both O(log |Γ|). `run` builds a balanced map from the environment list in O(|Γ|)
and reads it back in order.

Costs are the formalisation's abstract costs (chad/runtime/protocol.py), the same as
for the array EVM: the logarithmic factor of this implementation shows only in
`work`, which counts tree nodes visited and created.
"""

from __future__ import annotations

from typing import Any, Sequence

from .array_evm import check_level, out_of_range
from chad.linear import plusv as default_plus

from .persistent_map import PersistentMap
from .protocol import Action, Continuation, EVMBase, Plus


class MapEVM(EVMBase):
    """EVM over a persistent AVL map {level: cell}.
    `plus`: the cells' monoid (default: chad.linear.plusv)."""

    name = "map"

    def __init__(self, plus: Plus | None = None) -> None:
        self.plus = plus if plus is not None else default_plus
        self._counter = [0]  # shared with every map this EVM creates

    @property
    def work(self) -> int:
        return self._counter[0]

    @work.setter
    def work(self, value: int) -> None:
        self._counter[0] = value

    # building actions ---------------------------------------------------------
    def pure(self, x: Any) -> Action:
        def act(env):
            return x, env, 1

        return act

    def bind(self, m: Action, k: Continuation) -> Action:
        def act(env):
            x, env1, c1 = m(env)
            m2, ccall = k(x)
            y, env2, c2 = m2(env1)
            return y, env2, 1 + c1 + ccall + c2

        return act

    def then(self, a: Action, b: Action) -> Action:
        def act(env):
            _, env1, ca = a(env)
            y, env2, cb = b(env1)
            return y, env2, 2 + ca + cb

        return act

    def add(self, level: int, value: Any) -> Action:
        check_level(level)
        plusv = self.plus

        def act(env):
            cost = []

            def f(cell):
                new, c = plusv(value, cell)
                cost.append(c)
                return new

            try:
                env2 = env.update(level, f)
            except KeyError:
                raise out_of_range(level, len(env)) from None
            return None, env2, 1 + cost[0]

        return act

    def scope(self, init: Any, m: Action) -> Action:
        def act(env):
            level = len(env)
            r, env1, c = m(env.set(level, init))
            out = env1.get(level)
            return (out, r), env1.delete(level), 1 + c

        return act

    def sequence(self, actions: Sequence[Action]) -> Action:
        """The `then` chain of the actions, as a loop: result of the last,
        cost sum + 2 (n - 1) (pure None, cost 1, if empty)."""
        acts = tuple(actions)
        if not acts:
            return self.pure(None)
        extra = 2 * (len(acts) - 1)

        def act(env):
            total = extra
            r = None
            for a in acts:
                r, env, c = a(env)
                total += c
            return r, env, total

        return act

    # running --------------------------------------------------------------------
    def run(self, m: Action, env: list) -> tuple[Any, list, int]:
        tree = PersistentMap.from_list(list(env), self._counter)
        r, tree2, c = m(tree)
        return r, tree2.values(), 1 + len(env) + c

    def __repr__(self) -> str:
        return "MapEVM()"
