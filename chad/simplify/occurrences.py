"""Occurrence analysis: how each bound variable is used, computed once per round.

The rewriting pass (chad/simplify/rewrite.py) decides at each binder, before
it looks at the binder's scope, whether to drop it (no use), to inline its
right-hand side at its one use, or to split a let-bound pair into its two
components. It needs, per binder:

  * the number of uses, by *projection path*: `fst (snd r)` is a use of r
    along the path (snd, fst). When `let r = pair a b` is split into
    `let r1 = a in let r2 = b`, the uses of r1 are the uses of r along paths
    starting with fst (minus that fst) plus the uses of r as a whole, so the
    split components' counts are known without another traversal (the
    simplifier of the Haskell CHAD implementation by Vákár and Smeding counts
    uses through linear projections the same way);
  * whether a use is *under a lambda* relative to the binder: inside a lambda
    body, a loop body (build, map, fold) or a sub-term of a node class the
    simplifier does not know, all of which may run many times (or never);
  * whether a use is *in head position*: evaluated, every time the binder's
    scope is, before anything else in that scope that may fail (the
    evaluation order of chad/costmodel/evaluate.py: a let's right-hand side
    before its body, a pair's left before its right, `a >> b` evaluates b
    first, ...). A right-hand side that may fail can still be inlined at such
    a use: it then fails at the same point of the evaluation;
  * whether the variable is *pinned*: read by a node other than a variable or
    a lambda (a closure node's captures, an extension's reads), so that it
    must keep its name and its binding.

This is GHC's occurrence analyser in miniature ("Secrets of the Glasgow Haskell
Compiler inliner", Peyton Jones & Marlow, §4). A lambda's `captures` do not
count as uses: the pass recomputes them from the body (chad/simplify/captures.py).
The same traversal collects every name in the term (for fresh names), the free
variables, and whether some name is bound twice (then the driver renames first,
chad/simplify/names.py). Let chains and the children of nodes without binders
are walked with an explicit stack (`visit`); lambdas and binders recurse.
"""

from __future__ import annotations

from chad.terms import (
    AddEVM, Ann, App, BindEVM, Build, Case, Fold, Fst, Index, Inl, Inr, Lam, LCastL,
    LCastR, Length, Let, LFst, LInl, LInr, LPair, LPairZero, LSnd, LSumZero, LUnit,
    MapA, Pair, Prim, PureEVM, RunEVM, ScopeEVM, Snd, ThenEVM, Unit, Var, shape,
)

from .predicates import node_may_fail

MAX_PATH = 8  # longer projection paths count as uses of the whole

# Core node classes whose sub-terms are each evaluated at most once per
# evaluation of the node (a case evaluates one branch).
ONCE = frozenset({
    Let, Prim, Unit, Pair, Fst, Snd, Inl, Inr, Case, App, Ann, Index, Length,
    PureEVM, BindEVM, ThenEVM, RunEVM, AddEVM, ScopeEVM, LUnit, LPair, LFst, LSnd,
    LPairZero, LInl, LInr, LCastL, LCastR, LSumZero,
})
# Core loops: the body (a binder's scope) runs once per element.
LOOPS = {Build: "body", MapA: "body", Fold: "body"}


NONE = 1 << 62  # a head position for no binder


class Info:
    """The uses of one bound variable: by projection path, and in total."""

    __slots__ = ("paths", "pinned", "depth", "pos", "count", "under", "head", "has_proj")

    def __init__(self, depth: int, pos: int = 0) -> None:
        # projection path -> [count, some use under a lambda, every use in head position]
        self.paths: dict[tuple, list] = {}
        self.pinned = False
        self.depth = depth  # lambda depth of the binder
        self.pos = pos      # number of binders around it
        self.count = 0      # uses
        self.under = False  # some use under a lambda
        self.head = True    # every use in head position
        self.has_proj = False  # some use is projected

    def add(self, path: tuple, n: int, under: bool, head: bool) -> None:
        rec = self.paths.get(path)
        if rec is None:
            self.paths[path] = [n, under, head]
        else:
            rec[0] += n
            if under:
                rec[1] = True
            if not head:
                rec[2] = False
        self.count += n
        if under:
            self.under = True
        if not head:
            self.head = False
        if path:
            self.has_proj = True

    def component(self, side: int, head_ok: bool = True) -> "Info":
        """The uses of the component `side` (0: fst, 1: snd) of a pair bound to
        this variable, once the pair is split: the uses along paths starting
        with that projection, and the uses of the whole pair. `head_ok`: whether
        a head position of the pair's variable is still one for the component
        (not if something that may fail now comes between)."""
        out = Info(self.depth, self.pos)
        for path, (n, under, head) in self.paths.items():
            if not path:
                out.add((), n, under, head and head_ok)
            elif path[0] == side:
                out.add(path[1:], n, under, head and head_ok)
        return out

    def __repr__(self) -> str:
        return f"Info({self.paths}, pinned={self.pinned})"


def unknown_info() -> Info:
    """The conservative answer for a binder the analysis did not see."""
    info = Info(0)
    info.add((), 2, True, False)
    info.pinned = True
    return info


def dead_info() -> Info:
    return Info(0)


class Occurrences:
    """The result: `infos` (binder name -> Info), `names` (every name in the
    term), `free` (free variables), `dup` (some name is bound twice, or bound
    and free), `aliases` (the names x of `let x = y` or `let x = fst y`, whose
    uses are counted as uses of y: the pass must substitute them away)."""

    def __init__(self) -> None:
        self.infos: dict[str, Info] = {}
        self.names: set[str] = set()
        self.free: set[str] = set()
        self.dup = False
        self.aliases: set[str] = set()  # let-bound names whose uses count for another's
        self._scope: set[str] = set()
        self._pos = 0  # binders around the current position

    # ------------------------------------------------------------ binders and uses
    def _bind(self, name: str, depth: int) -> Info:
        if name in self.infos or name in self.free:
            self.dup = True
        info = self.infos[name] = Info(depth, self._pos)
        self._pos += 1
        self._scope.add(name)
        self.names.add(name)
        return info

    def _unbind(self, name: str) -> None:
        self._pos -= 1
        self._scope.discard(name)

    def _use(self, name: str, path: tuple, depth: int, hd: int, pin: bool = False) -> None:
        self.names.add(name)
        if name in self._scope:
            info = self.infos[name]
            info.add(path, 1, depth > info.depth or pin, info.pos >= hd and not pin)
            if pin:
                info.pinned = True
        else:
            if name in self.infos:
                self.dup = True
            self.free.add(name)

    def _alias(self, rhs, depth: int, hd: int):
        """For `let x = y` or `let x = fst (snd y)` (y bound): (y's Info, the
        projection path, under a lambda, in head position). The rewriting pass
        substitutes such an x away, so x's uses are y's uses along that path
        (added when x's scope ends) and the right-hand side itself is not one."""
        path: tuple = ()
        while True:
            cls = type(rhs)
            if cls is Fst or cls is LFst:
                path = (0,) + path
            elif cls is Snd or cls is LSnd:
                path = (1,) + path
            else:
                break
            if len(path) > MAX_PATH:
                return None
            rhs = rhs.expr
        if cls is not Var or rhs.name not in self._scope:
            return None
        info = self.infos[rhs.name]
        self.names.add(rhs.name)
        return info, path, depth > info.depth, info.pos >= hd

    # ------------------------------------------------------------ traversal
    def visit(self, t, path: tuple = (), depth: int = 0, hd: int = NONE) -> bool:
        """Record the uses in t; `hd`: the binders at positions >= hd are in head
        position at t. Returns whether t may fail (predicates.may_fail).

        The spines a deep program gives (a let chain, a let whose right-hand side
        is a let, the first operand of nested primitives and pairs, the action of
        nested binds and scopes: every child of a node without binders) are walked
        here with an explicit stack of frames, so their depth needs no Python
        stack; a lambda, `>>` and a node with binders recurse."""
        frames: list = []  # [_LET or _SIMPLE, ...] frames waiting for a child's result
        while True:
            # ---- descend into t (with path, depth, hd) until a result r is known
            cls = type(t)
            if cls is Var:
                self._use(t.name, path, depth, hd)
                r = False
            elif cls is Fst or cls is LFst:
                t, path = t.expr, ((0,) + path if len(path) < MAX_PATH else ())
                continue
            elif cls is Snd or cls is LSnd:
                t, path = t.expr, ((1,) + path if len(path) < MAX_PATH else ())
                continue
            elif cls is Let:
                frame = [_LET, t, depth, hd, [], [], False]  # t, depth, hd, bound, aliases, fails
                nxt = self._let_step(frame)
                if nxt is None:
                    r = self._let_done(frame)
                else:
                    frames.append(frame)
                    t, path, hd = nxt, (), frame[3]
                    continue
            else:
                plan = _PLANS.get(cls)
                if plan is None:
                    plan = _PLANS[cls] = _plan(cls)
                if plan[5]:  # simple: a known class without binders or reads
                    kids = [v for v in map(t.__getattribute__, plan[0]) if v is not None]
                    if not kids:
                        r = node_may_fail(t, False)
                    else:
                        # [_SIMPLE, t, depth, hd, its children, the next one, some fails]
                        frames.append([_SIMPLE, t, depth, hd, kids, 1, False])
                        t, path = kids[0], ()
                        continue
                else:
                    r = self._visit_other(t, depth, hd, cls, plan)
            # ---- hand r to the waiting frames, until one has a child to visit
            while frames:
                frame = frames[-1]
                if frame[0] is _SIMPLE:
                    if r:
                        frame[6] = True
                    i = frame[5]
                    if i < len(frame[4]):
                        frame[5] = i + 1
                        t, path, depth = frame[4][i], (), frame[2]
                        hd = NONE if frame[6] else frame[3]
                        break
                    frames.pop()
                    r = node_may_fail(frame[1], frame[6])
                else:
                    nxt = self._let_step(frame, r)
                    if nxt is not None:
                        t, path, depth, hd = nxt, (), frame[2], frame[3]
                        break
                    frames.pop()
                    r = self._let_done(frame)
            else:
                return r

    def _let_step(self, frame, r=None):
        """Advance a let chain's frame [_LET, t, depth, hd, bound, aliases, fails]
        given the result r of the sub-term it visited last (None: nothing yet):
        the next sub-term to visit (a right-hand side, or the chain's body), or
        None when the chain is done."""
        _, t, depth, hd, bound, aliases, _fails = frame
        if r is not None:
            if type(t) is not Let:  # the body's result: the chain is done
                if r:
                    frame[6] = True
                return None
            info = self._bind(t.name, depth)  # t's rhs visited (it is no alias)
            bound.append(t.name)
            if r:
                frame[6] = True
                hd = info.pos  # only x (and what is bound after it) is in head position
            elif hd == NONE:
                hd = info.pos
            t = t.body
        while type(t) is Let:
            alias = self._alias(t.rhs, depth, hd)
            if alias is None:
                frame[1], frame[3] = t, hd
                return t.rhs
            info = self._bind(t.name, depth)
            bound.append(t.name)
            aliases.append((t.name, info, alias))
            if hd == NONE:
                hd = info.pos
            t = t.body
        frame[1], frame[3] = t, hd
        return t

    def _let_done(self, frame) -> bool:
        _, _t, _depth, _hd, bound, aliases, fails = frame
        for name, info, (target, prefix, under, head) in reversed(aliases):
            if info.pinned:  # the let stays: its rhs is the one use
                target.add(prefix, 1, under, head)
                continue
            self.aliases.add(name)
            for path, (n, u, h) in info.paths.items():
                path = prefix + path
                target.add(path if len(path) <= MAX_PATH else (), n, u or under, h and head)
        for name in reversed(bound):
            self._unbind(name)
        return fails

    def _visit_other(self, t, depth: int, hd: int, cls, plan) -> bool:
        """visit for a lambda, `>>`, and a node with binders or reads."""
        if cls is Lam:
            self._bind(t.name, depth + 1)
            self.visit(t.body, (), depth + 1, NONE)
            self._unbind(t.name)
            return False
        if cls is ThenEVM:  # evaluates its second action first
            f2 = self.visit(t.second, (), depth, hd)
            f1 = self.visit(t.first, (), depth, NONE if f2 else hd)
            return f1 or f2
        fields, binds, reads, known, loop, simple = plan
        if not fields and not reads:
            return node_may_fail(t, False)
        for f in reads:
            v = getattr(t, f)
            if v is None:
                continue
            for name in ((v,) if type(v) is str else v):
                self._use(name, (), depth, hd, pin=True)
        fails = False
        for f in fields:
            v = getattr(t, f)
            if v is None:
                continue
            d = depth if (known or (loop is not None and f != loop)) else depth + 1
            # in evaluation order (field order), one sub-term each, unconditionally:
            # the core classes but case branches, loops and unknown classes
            bfs = binds.get(f)
            h = hd if (known and not fails and bfs is None) else NONE
            names = []
            if bfs is not None:
                for bf in bfs:
                    bv = getattr(t, bf)
                    names.extend((bv,) if type(bv) is str else (bv or ()))
                for name in names:
                    self._bind(name, d)
            if type(v) is tuple:
                for c in v:
                    if self.visit(c, (), d, h):
                        fails = True
            elif self.visit(v, (), d, h):
                fails = True
            for name in names:
                self._unbind(name)
        return node_may_fail(t, fails)


_LET, _SIMPLE = "let", "simple"


_PLANS: dict = {}


def _plan(cls):
    """How visit walks a node class: (child fields, child field -> binder fields
    (a closure's captures rebound in its body left out: those are the outer
    names), the fields read, known to evaluate each child at most once, the loop
    body field or None, simple: known, no binders and no reads)."""
    sh = shape(cls)
    binds = {}
    for f, bfs in sh.binds:
        own = tuple(bf for bf in bfs if not (sh.closure and bf in sh.reads))
        binds[f] = own
    known = cls in ONCE
    simple = known and not binds and not sh.reads  # (no ONCE class has a tuple child)
    return sh.children, binds, sh.reads, known, LOOPS.get(cls), simple


def analyse(term) -> Occurrences:
    """The occurrence analysis of term."""
    occ = Occurrences()
    occ.visit(term)
    return occ
