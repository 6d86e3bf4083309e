"""After each rewriting pass: every lambda's capture list recomputed, and every
chain of `>>` nested to the right.

Captures. The evaluator copies only a lambda's `captures` into its closure
(the formalisation's `lamwith`, Efficient CHAD by Smeding & Vákár, appendix B),
so after variables have been substituted or inlined into a lambda's body its
list must be exactly the body's free variables other than the parameter. One
traversal computes all of them: a use of x inside nested lambdas is added to
each enclosing lambda inside x's scope, innermost first, stopping at the first
that has it already (the ones around it have it too), so the work is the size
of the term plus the size of the lists. A closure node other than Lam (the
functions extension's closures) is a closed scope: its reads count as uses
outside, its body's uses do not reach the lambdas around it. A lambda without
a capture list (None: not a target term) keeps None.

Sequencing. `(a >> b) >> c` and `a >> (b >> c)` run a, b, c in that order and
build c, b, a in that order (ThenEVM evaluates its second action first, see
chad/costmodel/evaluate.py), so they mean the same: a chain is rebuilt as
`a >> (b >> (c >> ...))`, which prints as the straight line of a hand-written
backward pass.

Recursive: run it on a big-stack thread.
"""

from __future__ import annotations

import attrs

from chad.terms import Lam, ThenEVM, Var, shape

_MISSING = object()


class _Tidy:
    def __init__(self) -> None:
        self.level: dict[str, int] = {}  # bound name -> number of lambdas around its binder
        self.lams: list[dict] = []       # captures being collected, outermost first
        self.renested = False            # some `>>` chain was not nested to the right

    def use(self, name: str) -> None:
        lvl = self.level.get(name, 0)
        lams = self.lams
        i = len(lams) - 1
        while i >= lvl:
            caps = lams[i]
            if name in caps:
                break
            caps[name] = None
            i -= 1

    def bind(self, names, lvl: int) -> list:
        saved = []
        for n in names:
            saved.append((n, self.level.get(n, _MISSING)))
            self.level[n] = lvl
        return saved

    def unbind(self, saved) -> None:
        for n, old in reversed(saved):
            if old is _MISSING:
                del self.level[n]
            else:
                self.level[n] = old

    def go(self, t):
        cls = type(t)
        if cls is Var:
            self.use(t.name)
            return t
        if cls is Lam:
            self.lams.append({})
            saved = self.bind((t.name,), len(self.lams))
            body = self.go(t.body)
            self.unbind(saved)
            caps = self.lams.pop()
            caps.pop(t.name, None)
            captures = t.captures
            if captures is not None:
                new = tuple(caps)
                # keep the old order when the set is the same
                captures = captures if set(captures) == set(new) and \
                    len(captures) == len(new) else new
            if body is t.body and captures == t.captures:
                return t
            return attrs.evolve(t, body=body, captures=captures)
        if cls is ThenEVM:
            return self.sequence(t)
        sh = shape(t)
        for f in sh.reads:
            v = getattr(t, f)
            if v is None:
                continue
            for name in ((v,) if type(v) is str else v):
                self.use(name)
        if not sh.children:
            return t
        opaque = sh.closure
        binds = dict(sh.binds)
        changes = {}
        for f in sh.children:
            v = getattr(t, f)
            if v is None:
                continue
            names = []
            for bf in binds.get(f, ()):
                bv = getattr(t, bf)
                names.extend((bv,) if type(bv) is str else (bv or ()))
            if opaque:
                saved_lams, self.lams = self.lams, []
                saved = self.bind(names, 0)
            else:
                saved = self.bind(names, len(self.lams))
            if type(v) is tuple:
                nv = tuple(self.go(c) for c in v)
                if any(a is not b for a, b in zip(nv, v)):
                    changes[f] = nv
            else:
                nv = self.go(v)
                if nv is not v:
                    changes[f] = nv
            self.unbind(saved)
            if opaque:
                self.lams = saved_lams
        return attrs.evolve(t, **changes) if changes else t

    def sequence(self, t: ThenEVM):
        leaves = []
        stack = [t]
        while stack:
            u = stack.pop()
            if type(u) is ThenEVM:
                stack.append(u.second)
                stack.append(u.first)
            else:
                leaves.append(u)
        new = [self.go(u) for u in leaves]
        # rebuild right-nested, reusing the old nodes where they fit
        out = new[-1]
        spine = t
        olds = []
        while type(spine) is ThenEVM:
            olds.append(spine)
            spine = spine.second
        right_nested = len(olds) == len(leaves) - 1
        if not right_nested:
            self.renested = True
        for i in range(len(new) - 2, -1, -1):
            old = olds[i] if right_nested else None
            if old is not None and old.first is new[i] and old.second is out:
                out = old
            else:
                out = ThenEVM(new[i], out)
        return out


def tidy(term):
    """term with its lambdas' capture lists recomputed and its `>>` chains nested
    to the right (see the module docstring)."""
    return _Tidy().go(term)


def tidy_renested(term):
    """(tidy(term), whether some `>>` chain had to be nested anew). When it had
    not, the two terms differ at most in capture lists, which no rewrite reads:
    a term the rewriting pass leaves unchanged stays so once tidied."""
    t = _Tidy()
    out = t.go(term)
    return out, t.renested
