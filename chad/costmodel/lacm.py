"""The formalisation's LACM, literally (Efficient CHAD (Smeding & Vákár), appendix B, `spec/LACM.agda`).

This is the *statement* of the monad: a pure state-passing function
`env -> (result, env', cost)` with the costs of the Agda module. It is the oracle
the runtimes (chad/runtime/) are compared against, and it satisfies the EVM Protocol so
the evaluator can run on it directly (name "spec"). The Agda module has no
`sequence`: it gets the Protocol's default (chad.runtime.protocol.EVMBase), the
balanced tree of `then`. `work` counts the cells copied (every action rebuilds
the tuple of cells), i.e. O(|Γ|) per add and scope.
"""

from __future__ import annotations

from chad.linear import plusv
from chad.runtime.protocol import EVMBase


class SpecLACM(EVMBase):
    """Actions are functions from a tuple of cells to (result, cells, cost)."""

    name = "spec"

    def __init__(self):
        self.work = 0

    def pure(self, x):
        return lambda e: (x, e, 1)

    def bind(self, m, k):
        def act(e):
            x, e1, c1 = m(e)
            m2, ccall = k(x)
            y, e2, c2 = m2(e1)
            return y, e2, 1 + c1 + ccall + c2

        return act

    def then(self, a, b):
        # thenevm a b = let x = b in bind a (\_ -> x): the continuation's body is
        # one variable, so ccall = 1.
        return self.bind(a, lambda _x: (b, 1))

    def add(self, level, value):
        def act(e):
            z, cz = plusv(value, e[level])
            self.work += len(e)
            return None, e[:level] + (z,) + e[level + 1:], 1 + cz

        return act

    def scope(self, init, m):
        def act(e):
            self.work += len(e) + 1
            r, e2, c = m(e + (init,))
            self.work += len(e2) - 1
            return (e2[-1], r), e2[:-1], 1 + c

        return act

    def run(self, m, env):
        self.work += len(env)
        r, e, c = m(tuple(env))
        return r, list(e), 1 + len(env) + c
