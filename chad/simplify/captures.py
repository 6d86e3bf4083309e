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

One loop with an explicit stack (`_Tidy.go`): no recursion.
"""

from __future__ import annotations

import attrs

from chad.terms import Lam, ThenEVM, Var, note_field, shape

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
        """t tidied. One loop with an explicit stack of frames (a lambda, a `>>`
        chain, a node's fields), so that no spine of a deep term needs a deep
        Python stack."""
        frames: list = []
        while True:
            # ---- descend into t until its result r is known
            cls = type(t)
            if cls is Var:
                self.use(t.name)
                r = t
            elif cls is Lam:
                self.lams.append({})
                frames.append(_LamFrame(t, self.bind((t.name,), len(self.lams))))
                t = t.body
                continue
            elif cls is ThenEVM:
                frame = _SeqFrame(t, _leaves(t))
                frames.append(frame)
                t = frame.leaves[0]
                continue
            else:
                sh = shape(t)
                for f in sh.reads:
                    v = getattr(t, f)
                    if v is None:
                        continue
                    for name in ((v,) if type(v) is str else v):
                        self.use(name)
                if not sh.children:
                    r = t
                else:
                    frame = _NodeFrame(t, sh)
                    nxt = self._next(frame)
                    if nxt is None:
                        r = t
                    else:
                        frames.append(frame)
                        t = nxt
                        continue
            # ---- hand r to the frames waiting for it
            while frames:
                frame = frames[-1]
                ft = type(frame)
                if ft is _NodeFrame:
                    frame.take(r)
                    nxt = self._next(frame)
                    if nxt is not None:
                        t = nxt
                        break
                    frames.pop()
                    r = attrs.evolve(frame.t, **frame.changes) if frame.changes else frame.t
                elif ft is _LamFrame:
                    frames.pop()
                    r = self._lam_done(frame.t, r, frame.saved)
                else:
                    frame.new.append(r)
                    if len(frame.new) < len(frame.leaves):
                        t = frame.leaves[len(frame.new)]
                        break
                    frames.pop()
                    r = self._sequence(frame.t, frame.leaves, frame.new)
            else:
                return r

    def _next(self, frame):
        """The next child a node's frame has to tidy (binding the names bound in
        its field first), or None when every field is done."""
        t = frame.t
        while True:
            if frame.items is not None and frame.ci < len(frame.kids):
                c = frame.kids[frame.ci]
                return c
            if frame.field is not None:  # the field is done
                self._end_field(frame)
            if frame.fi >= len(frame.fields):
                return None
            f = frame.fields[frame.fi]
            frame.fi += 1
            v = getattr(t, f)
            if v is None:
                continue
            names = []
            for bf in frame.binds.get(f, ()):
                bv = getattr(t, bf)
                names.extend((bv,) if type(bv) is str else (bv or ()))
            if frame.opaque:
                frame.saved_lams, self.lams = self.lams, []
                frame.saved = self.bind(names, 0)
            else:
                frame.saved = self.bind(names, len(self.lams))
            frame.field, frame.value = f, v
            frame.kids = v if type(v) is tuple else (v,)
            frame.items, frame.ci = [], 0

    def _end_field(self, frame) -> None:
        note_field(frame.changes, frame.field, frame.value, frame.items)
        self.unbind(frame.saved)
        if frame.opaque:
            self.lams = frame.saved_lams
        frame.field = frame.items = None

    def _lam_done(self, t: Lam, body, saved):
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

    def _sequence(self, t: ThenEVM, leaves, new):
        """The `>>` chain t, its leaves tidied to `new`, nested to the right."""
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


def _leaves(t: ThenEVM) -> list:
    """The actions of a `>>` chain, in order (however it is nested)."""
    leaves = []
    stack = [t]
    while stack:
        u = stack.pop()
        if type(u) is ThenEVM:
            stack.append(u.second)
            stack.append(u.first)
        else:
            leaves.append(u)
    return leaves


class _LamFrame:
    __slots__ = ("t", "saved")

    def __init__(self, t, saved) -> None:
        self.t, self.saved = t, saved


class _SeqFrame:
    __slots__ = ("t", "leaves", "new")

    def __init__(self, t, leaves) -> None:
        self.t, self.leaves, self.new = t, leaves, []


class _NodeFrame:
    """A node's fields being tidied: the current field (its value, its kids and
    the tidied ones so far), the bindings made for it, the changed fields."""

    __slots__ = ("t", "fields", "binds", "opaque", "fi", "field", "value", "kids", "items",
                 "ci", "saved", "saved_lams", "changes")

    def __init__(self, t, sh) -> None:
        self.t, self.fields, self.binds, self.opaque = t, sh.children, dict(sh.binds), sh.closure
        self.fi, self.field, self.value, self.kids, self.items, self.ci = 0, None, None, (), None, 0
        self.saved, self.saved_lams, self.changes = None, None, {}

    def take(self, r) -> None:
        self.items.append(r)
        self.ci += 1


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
