"""What compiled code calls at run time: the mutable-array EVM without step
counting, the cells' monoid, and the bridge that runs a node's evaluation rule on
compiled sub-terms.

The EVM is Efficient CHAD (Smeding & Vákár), §5, Fig. 8 (the mutable-array
implementation), with the same semantics as chad/runtime/array_evm.py but
without costs: an action is a function `act(cells) -> result` that mutates the
list of cells. Compiled code performs the core EVM operations inline (chad/
compile/codegen.py); `FastArrayEVM` builds actions for the rules that build them
through the EVM interface (extension nodes run through the bridge, actions
stored in values). With the map or the parallel runtime, compiled code calls
the runtime's own EVM interface instead (costs computed there and ignored).
"""

from __future__ import annotations

from typing import Any, Sequence

from chad.linear import plusv
from chad.runtime.array_evm import check_level, out_of_range


def padd(new, cell):
    """plusv(new, cell)'s value (chad/linear.py), with the common cases first:
    reals, and pairs (componentwise, as plusv), without plusv's step counts."""
    if cell is None:
        return new
    if new is None:
        return cell
    t = type(new)
    if t is float:
        return new + cell
    if t is tuple:
        return (padd(new[0], cell[0]), padd(new[1], cell[1]))
    return plusv(new, cell)[0]


def add_cell(cells: list, level: int, value) -> None:
    """`add level value` on a list of cells (the inline form checks the level)."""
    try:
        cells[level] = padd(value, cells[level])
    except IndexError:
        raise out_of_range(level, len(cells)) from None


def kwrap(f, x):
    """A compiled continuation as the EVM interface's: x -> (action, ccall)."""
    return f(x), 0


class FastArrayEVM:
    """The mutable-array EVM with actions `act(cells) -> result` (no costs).

    Implements the EVM interface of chad/runtime/protocol.py that evaluation
    rules use (pure, bind with a continuation returning (action, ccall), then,
    add, scope, sequence, run); `run` returns cost 0."""

    name = "array"
    work = 0

    def pure(self, x: Any):
        def act(cells):
            return x

        return act

    def bind(self, m, k):
        def act(cells):
            m2 = k(m(cells))[0]
            return m2(cells)

        return act

    def then(self, a, b):
        def act(cells):
            a(cells)
            return b(cells)

        return act

    def add(self, level: int, value: Any):
        check_level(level)

        def act(cells):
            add_cell(cells, level, value)

        return act

    def scope(self, init: Any, m):
        def act(cells):
            cells.append(init)
            r = m(cells)
            return cells.pop(), r

        return act

    def sequence(self, actions: Sequence):
        acts = tuple(actions)

        def act(cells):
            r = None
            for a in acts:
                r = a(cells)
            return r

        return act

    def run(self, m, env: list):
        cells = list(env)
        return m(cells), cells, 0

    def reset_work(self) -> None:
        pass

    def start(self):
        return self

    def close(self) -> None:
        pass


class Bridge:
    """The evaluator an evaluation rule sees when compiled code runs it: its
    sub-terms are already values (`values`, by the sub-term's identity), a
    sub-term under binders is a Python function of them, function values are
    Python callables; step counts are 0 (compiled code counts nothing)."""

    __slots__ = ("values", "evm")

    def __init__(self, values: dict, evm) -> None:
        self.values = values
        self.evm = evm

    def eval(self, t, env):
        return self.values[id(t)], 0

    def bind(self, env, name, value, body):
        return self.values[id(body)](value), 0

    def apply(self, fn, arg):
        return fn(arg), 0


def run_rule(rule, node, ids: tuple, evm, *kids):
    """The value of `node` by its evaluation rule, its sub-terms given."""
    value, _steps = rule(Bridge(dict(zip(ids, kids)), evm), node, {})
    return value
