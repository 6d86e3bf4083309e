"""One rewriting pass over a target term: inlining, beta-reduction, projections of
known pairs, dead code, the monad laws and zero propagation.

The rules follow the simplifier of the Haskell CHAD implementation (Vákár and
Smeding, `TargetLanguage.Simplify`: beta-reduction, let-of-let flattening,
let-of-pair splitting, inlining of variables used once, projections and case of
known constructors) with the inlining discipline of GHC's simplifier ("Secrets
of the Glasgow Haskell Compiler inliner", Peyton Jones & Marlow): the pass
visits each node once, deciding at each binder, from the occurrence analysis
made before the pass (chad/simplify/occurrences.py), whether to

  drop it        no use, and the right-hand side cannot fail (predicates.py);
  split it       `let r = pair a b` where r is projected: `let r1 = a in
                 let r2 = b in ...`, r being the pair (r1, r2) from then on, so
                 `fst r` is r1;
  inline it      used once, not under a lambda or loop body unless the
                 right-hand side is cheap (an atom or a lambda), and the
                 right-hand side cannot fail: it is simplified where it is used
                 (GHC's pre-inline-unconditionally), so it is simplified once;
                 a right-hand side that may fail only at a use in head
                 position (evaluated first); a small value (an atom, a pair of
                 atoms, a projection of a variable, a small lambda) is
                 substituted at every use;
  keep it.

Applications are resolved before their operands are simplified: the function
position is looked through used-once variables, known pairs and lets, and an
application of a lambda becomes a let (beta). Lets float out of the position
evaluated first (`fst (let x = a in b)` -> `let x = a in fst b`), so a let chain
comes out as one chain. The EVM laws of Efficient CHAD (Smeding & Vákár, §5:
the environment vector monad is a state monad over the cotangent cells):

  bind (pure v) (\\x -> m)      -> let x = v in m
  bind m (\\_ -> n)             -> m >> n          (n cannot fail)
  pure v >> m                  -> m               (v cannot fail)
  m >> pure ()                 -> m               (m returns ())
  add x 0                      -> pure ()

and the sparse zeros: `lfst`/`lsnd`/`lcastl`/`lcastr` of a zero give the zero
of the node's `zero` field (what the evaluator returns), of a known pair or
injection its component; `LADD` with a literal zero is the other operand.

Every binder name is unique (chad/simplify/names.py), so substitutions are
global: one dictionary, never a capture. Lambdas' capture lists are recomputed
after the pass (chad/simplify/captures.py). Node classes not listed here are
rebuilt around their simplified children; a closure node other than Lam is a
closed scope, simplified with no substitution carried in.
"""

from __future__ import annotations

import attrs

from chad.terms import (
    AddEVM, App, BindEVM, Build, Case, Fst, Index, Inl, Inr, Lam, LCastL, LCastR,
    Length, Let, LFst, LInl, LInr, LPair, LSnd, Pair, Prim, PureEVM, RunEVM,
    ScopeEVM, Snd, Term, ThenEVM, Unit, Var, alpha_equal, children, free_vars, map_children,
    rebuild, shape,
)

from chad.linear import L_UN
from chad.transform.common import D2
from chad.types import Prod

from .names import Fresh, is_opaque
from .occurrences import Info, dead_info, unknown_info
from .predicates import (
    DONE, SPLIT, STRICT, SUSP, TOTAL_PRIMS, FailureOracle, Simplified, is_atom, is_cheap,
    is_none_zero, is_small_lambda, is_small_value, is_var_path, is_zero, returns_none, zero_term,
)

# Substitution entries (predicates.py): a used-once right-hand side to simplify
# at its use (SUSP; STRICT when it may fail: its use is in head position), a
# small value to put at every use (DONE), the pair of the two variables a split
# pair variable stands for (SPLIT).
_ONCE_KINDS = (SUSP, STRICT)
_ALIAS_KINDS = (DONE, SPLIT)

# The child evaluated first: a let there floats out (same evaluation order).
FIRST = {
    Prim: "arg", Pair: "left", LPair: "left", Fst: "expr", Snd: "expr", LFst: "expr",
    LSnd: "expr", Inl: "expr", Inr: "expr", LInl: "expr", LInr: "expr", LCastL: "expr",
    LCastR: "expr", PureEVM: "expr", AddEVM: "val", RunEVM: "m", BindEVM: "m",
    ScopeEVM: "init", Case: "scrut", App: "fn", ThenEVM: "second", Length: "expr",
    Index: "arr", Build: "size",
}
FIRST_PROJ = (Fst, LFst)
PROJ = (Fst, Snd, LFst, LSnd)
PAIRS = (Pair, LPair)


def _first_type(ty):
    """The type of a pair type's first component (None if not known)."""
    return ty.left if isinstance(ty, Prod) else None
# total one-child constructors and projections (a Simplified too: its .term is
# not .expr, so it is not here)
_WRAPPERS = frozenset({Fst, Snd, LFst, LSnd, Inl, Inr, LInl, LInr, LCastL, LCastR,
                       PureEVM})
LEFT_INJ = (Inl, LInl)
RIGHT_INJ = (Inr, LInr)


class _Tail:
    """A handler's answer: t simplifies as `term` does."""

    __slots__ = ("term",)

    def __init__(self, term) -> None:
        self.term = term


class _Need:
    """A handler's answer: t simplifies as `finish(pass, simplified term, *args)`."""

    __slots__ = ("term", "finish", "args")

    def __init__(self, term, finish, *args) -> None:
        self.term = term
        self.finish = finish
        self.args = args


class Pass:
    """One pass; `changes` counts the rewrites that fired."""

    def __init__(self, infos: dict[str, Info], fresh: Fresh, aliases=frozenset()) -> None:
        self.infos = infos
        self.aliases = aliases
        self.fresh = fresh
        self.sub: dict[str, tuple[int, object]] = {}
        self.may_fail = FailureOracle(self.sub)
        self.changes = 0

    # ------------------------------------------------------------ dispatch
    def go(self, t):
        """The simplified t. A handler returns the simplified term, or
        `_Tail(u)`: the simplified u is t's, or `_Need(u, finish, *args)`: t's is
        `finish(self, the simplified u, *args)` (again a term, a _Tail or a
        _Need). The handlers on the spines of a deep program (let chains, the
        first operand of nested primitives and pairs, a bind's action, a scope's,
        the second action of `>>`) hand their sub-term back this way, and go
        simplifies it in the same loop: the depth of those spines needs no
        Python stack (the order of every step is that of a recursive pass)."""
        waiting: list = []  # the _Need records waiting for a simplified sub-term
        while True:
            cls = type(t)
            plan = _PLANS.get(cls)
            if plan is None:
                plan = _PLANS[cls] = _plan(cls)
            f, h = plan
            if f is not None:
                child = getattr(t, f)
                if type(child) is Let:  # float the let out of the first position
                    self.changes += 1
                    t = Let(child.name, child.rhs, attrs.evolve(t, **{f: child.body}))
                    continue
            r = h(self, t)
            while True:
                rt = type(r)
                if rt is _Tail:
                    t = r.term
                    break
                if rt is _Need:
                    waiting.append(r)
                    t = r.term
                    break
                if not waiting:
                    return r
                need = waiting.pop()
                r = need.finish(self, r, *need.args)

    def leaf(self, t):
        return t

    def unwrap(self, t: Simplified):
        return t.term

    def pair(self, t):
        return _Need(t.left, Pass._pair, t)

    def _pair(self, a, t):
        b = self.go(t.right)
        if a is t.left and b is t.right:
            return t
        return type(t)(a, b, loc=t.loc, ty=t.ty)  # attrs.evolve, without its field walk

    def generic(self, t):
        if is_opaque(t):  # a closed scope: no substitution reaches inside
            saved = self.sub
            self.sub = self.may_fail.pending = {}
            try:
                return map_children(t, self.go)
            finally:
                self.sub = self.may_fail.pending = saved
        kids = children(t)
        if not kids:
            return t
        return _Need(kids[0], Pass._generic, t, kids, [])

    def _generic(self, new, t, kids, done):
        """map_children(t, self.go), one child at a time."""
        done.append(new)
        if len(done) < len(kids):
            return _Need(kids[len(done)], Pass._generic, t, kids, done)
        return rebuild(t, done)

    # ------------------------------------------------------------ variables
    def var(self, t: Var):
        e = self.sub.get(t.name)
        if e is None:
            return t
        self.changes += 1
        if e[0] in _ONCE_KINDS:
            del self.sub[t.name]
            return _Tail(e[1])
        return _Tail(self.copy(e[1]))

    def resolve(self, t):
        """t with its head made explicit without simplifying its sub-terms: a
        used-once variable replaced by its right-hand side, a projection of a
        known pair by the component, an application of a lambda by a let, a
        let floated out. t itself when nothing applies. A loop: the projections
        and applications whose head is being resolved wait on a list."""
        waiting: list = []
        while True:
            cls = type(t)
            if cls is Var:
                e = self.sub.get(t.name)
                if e is not None:
                    self.changes += 1
                    if e[0] in _ONCE_KINDS:
                        del self.sub[t.name]
                        t = e[1]
                    else:
                        t = self.copy(e[1])
                    continue
            elif cls in PROJ:
                comp = self.component(t)
                if comp is not None:  # fst r, r a split pair (r1, r2): r1
                    self.changes += 1
                    t = comp
                    continue
                waiting.append(t)
                t = t.expr
                continue
            elif cls is App:
                waiting.append(t)
                t = t.fn
                continue
            r = t
            while waiting:
                w = waiting.pop()
                r = self._resolved_app(w, r) if type(w) is App else self._resolved_proj(w, r)
                if type(r) is _Tail:
                    t = r.term
                    break
            else:
                return r

    def _resolved_proj(self, t, inner):
        """resolve(t), t a projection whose expression resolves to inner."""
        cls = type(t)
        ci = type(inner)
        if ci is Let:
            self.changes += 1
            return Let(inner.name, inner.rhs, attrs.evolve(t, expr=inner.body))
        if ci in PAIRS:
            keep, drop = ((inner.left, inner.right) if cls in FIRST_PROJ
                          else (inner.right, inner.left))
            if not self.may_fail(drop):
                self.changes += 1
                return _Tail(keep)
            if cls not in FIRST_PROJ:  # snd (pair a b) = let w = a in b
                self.changes += 1
                return Let(self.unused("w"), inner.left, inner.right)
        elif ci is Case:  # fst (case s of ...) = case s of ... fst ...
            self.changes += 1
            return self.into_branches(inner, lambda b: attrs.evolve(t, expr=b))
        elif ci is not Simplified and cls in (LFst, LSnd) and is_none_zero(inner):
            z = zero_term(t.zero)
            if z is not None:
                self.changes += 1
                return z
        return t if inner is t.expr else attrs.evolve(t, expr=inner)

    def _resolved_app(self, t: App, fn):
        """resolve(t), t an application whose function resolves to fn."""
        cf = type(fn)
        if cf is Lam:  # beta
            self.changes += 1
            return Let(fn.name, t.arg, fn.body)
        if cf is Let:
            self.changes += 1
            return Let(fn.name, fn.rhs, App(fn.body, t.arg))
        if cf is Case and self.duplicable(t.arg):  # (case s of ...) a = case s of ... a
            self.changes += 1
            return self.into_branches(fn, lambda b: App(b, t.arg))
        return t if fn is t.fn else attrs.evolve(t, fn=fn)

    # ------------------------------------------------------------ let
    def let(self, t: Let):
        sub, infos, may_fail = self.sub, self.infos, self.may_fail
        out: list = []    # (name, simplified rhs, the original Let or None)
        pending: list = []  # bindings to do before the rest of the chain, last first
        cur = t
        while True:
            if pending:
                x, rhs, orig = pending.pop()
            elif type(cur) is Let:
                x, rhs, orig = cur.name, cur.rhs, cur
                cur = cur.body
            else:
                break
            crhs = type(rhs)
            if crhs is Let:  # let x = (let y = a in b) in c  ->  let y = a in let x = b in c
                self.changes += 1
                pending.append((x, rhs.body, None))
                pending.append((rhs.name, rhs.rhs, None))
                continue
            info = infos.get(x)
            if info is None:
                info = unknown_info()
            pinned = info.pinned
            n = info.count
            if not pinned:
                if n == 0:  # dead: drop it, or keep only what may fail
                    if x in self.aliases or not may_fail(rhs):
                        # (an alias's rhs is a projection of a variable: it cannot
                        # fail, the variable's rhs, if pending, fails at its own use)
                        self.changes += 1
                        continue
                    core = self.failing_core(rhs)
                    if core is not rhs:
                        self.changes += 1
                        orig = None
                    out.append((x, self.go(core), orig))
                    continue
                inner = rhs.term if crhs is Simplified else rhs
                ci = type(inner)
                if ci is Var:  # let x = y: x is another name for y
                    e = sub.get(inner.name)
                    if e is None or e[0] in _ALIAS_KINDS:
                        sub[x] = (DONE, inner) if e is None else e
                        self.changes += 1
                        continue
                    if n == 1 and (not info.under or is_cheap(e[1])) \
                            and (e[0] == SUSP or info.head):
                        del sub[inner.name]  # hand the used-once rhs over to x
                        sub[x] = e
                        self.changes += 1
                        continue
                    # y's used-once rhs is simplified here, x keeps it
                elif ci in PAIRS and info.has_proj:
                    self._split(x, info, ci, inner.left, inner.right, crhs is Simplified,
                                pending)
                    continue
                elif n == 1 and (is_cheap(inner) or (not info.under and not may_fail(rhs))):
                    sub[x] = (SUSP, rhs)  # simplified at its one use
                    self.changes += 1
                    continue
                elif n == 1 and info.head:
                    sub[x] = (STRICT, rhs)  # may fail, at the same point of the evaluation
                    self.changes += 1
                    continue
            rhs2 = self.go(rhs)
            while type(rhs2) is Let:  # lets the simplification left in front
                out.append((rhs2.name, rhs2.rhs, None))
                rhs2 = rhs2.body
                self.changes += 1
                orig = None
            if not pinned:
                if is_small_value(rhs2) or is_small_lambda(rhs2):
                    sub[x] = (DONE, rhs2)
                    self.changes += 1
                    continue
                c2 = type(rhs2)
                if c2 in PAIRS and info.has_proj:
                    self._split(x, info, c2, rhs2.left, rhs2.right, True, pending)
                    continue
                if n == 1 and (is_cheap(rhs2) or (not info.under and not may_fail(rhs2))):
                    sub[x] = (SUSP, Simplified(rhs2))
                    self.changes += 1
                    continue
                if n == 1 and info.head:
                    sub[x] = (STRICT, Simplified(rhs2))
                    self.changes += 1
                    continue
            out.append((x, rhs2, orig))
        return _Need(cur, Pass._let_body, out)

    def _let_body(self, final, out):
        """The let chain `out` (name, simplified rhs, the original Let or None)
        around its simplified body."""
        for x, r, orig in reversed(out):
            if orig is not None and orig.rhs is r and orig.body is final:
                final = orig
            else:
                final = Let(x, r, final)
        return final

    def component(self, t):
        """For a projection path out of a split pair variable (fst r, snd (fst r),
        ... with r split), the variable of that component; else None. Only the
        component is used: the analysis counted this use for it alone, so the
        other component (which may stand for a right-hand side that may fail,
        evaluated at its own use) is no use to keep."""
        e = t.expr
        if type(e) is Var:
            entry = self.sub.get(e.name)
            while entry is not None and entry[0] == DONE and type(entry[1]) is Var:
                entry = self.sub.get(entry[1].name)
            if entry is None or entry[0] != SPLIT:
                return None
            pair = entry[1]
        elif type(e) in PROJ:
            pair = self.component(e)
            if pair is None:
                return None
            entry = self.sub.get(pair.name)
            while entry is not None and entry[0] == DONE and type(entry[1]) is Var:
                entry = self.sub.get(entry[1].name)
            if entry is None or entry[0] != SPLIT:
                return None
            pair = entry[1]
        else:
            return None
        return pair.left if type(t) in FIRST_PROJ else pair.right

    def duplicable(self, t) -> bool:
        """An atom that may be put in two places: not a variable standing for a
        used-once right-hand side (nor a split pair: its components' uses are
        counted)."""
        return is_atom(t) and (type(t) is not Var or self.sub.get(t.name) is None)

    def copy(self, t):
        """A small value to put at one more use: a small lambda gets a fresh
        parameter (every binder stays unique), whose uses are counted anew (the
        body is simplified already: the analysis' count may be out of date)."""
        if type(t) is not Lam:
            return t
        p = self.fresh(t.name)
        info = self.infos[p] = Info(0)
        old, new = t.name, Var(p)

        def rename(u, path):
            cls = type(u)
            if cls is Var:
                if u.name != old:
                    return u
                info.add(path, 1, False, False)
                return new
            if cls in PROJ:
                side = 0 if cls in FIRST_PROJ else 1
                return map_children(u, lambda c: rename(c, (side,) + path))
            return map_children(u, lambda c: rename(c, ()))

        return attrs.evolve(t, name=p, body=rename(t.body, ()))

    def unused(self, stem: str) -> str:
        """A fresh binder with no use."""
        name = self.fresh(stem)
        self.infos[name] = dead_info()
        return name

    def into_branches(self, c: Case, wrap):
        return attrs.evolve(c, lbody=wrap(c.lbody), rbody=wrap(c.rbody))

    def failing_core(self, t):
        """The part of t (whose value is not used) that may fail: a component of a
        pair whose other component cannot fail, the argument of a total
        constructor or primitive."""
        while True:
            cls = type(t)
            if is_var_path(t):
                return t  # the use of a variable's component counted by the analysis
            if cls in PAIRS:
                if not self.may_fail(t.left):
                    t = t.right
                elif not self.may_fail(t.right):
                    t = t.left
                else:
                    return t
            elif cls in _WRAPPERS:
                t = t.expr
            elif cls is Prim and t.op in TOTAL_PRIMS:
                t = t.arg
            else:
                return t

    def _split(self, x, info, cls, left, right, simplified, pending):
        """let x = pair left right in ... -> let x1 = left in let x2 = right in ...,
        x standing for (x1, x2): the two bindings go on `pending`."""
        a, b = self.fresh(x), self.fresh(x)
        first = info.component(0)
        if first.count == 1 and first.head and self.may_fail(right):
            # x1's use comes after x2's binding: no longer in head position
            first = info.component(0, head_ok=False)
        self.infos[a] = first
        self.infos[b] = info.component(1)
        if simplified:
            left, right = Simplified(left), Simplified(right)
        self.sub[x] = (SPLIT, cls(Var(a), Var(b)))
        self.changes += 1
        pending.append((b, right, None))
        pending.append((a, left, None))

    # ------------------------------------------------------------ functions
    def app(self, t: App):
        r = self.resolve(t)
        if r is not t:
            return _Tail(r)
        fn = self.go(t.fn)
        arg = self.go(t.arg)
        if type(fn) is Lam:  # became a lambda: beta (its body is simplified already)
            self.changes += 1
            return Let(fn.name, arg, fn.body)
        return t if fn is t.fn and arg is t.arg else attrs.evolve(t, fn=fn, arg=arg)

    def lam(self, t: Lam):
        return _Need(t.body, Pass._lam, t)

    def _lam(self, body, t: Lam):
        return t if body is t.body else attrs.evolve(t, body=body)


    # ------------------------------------------------------------ pairs and sums
    def proj(self, t):
        r = self.resolve(t)
        if r is not t:
            return _Tail(r)
        e = self.go(t.expr)
        ce = type(e)
        if ce in PAIRS:
            keep, drop = (e.left, e.right) if type(t) in FIRST_PROJ else (e.right, e.left)
            if not self.may_fail(drop):
                self.changes += 1
                return keep
            if type(t) not in FIRST_PROJ:
                self.changes += 1
                return Let(self.unused("w"), e.left, e.right)
        elif type(t) in (LFst, LSnd) and is_none_zero(e):
            z = zero_term(t.zero)
            if z is not None:
                self.changes += 1
                return z
        return t if e is t.expr else attrs.evolve(t, expr=e)

    def cast(self, t):
        """lcastl / lcastr: the injected value of its side, else the zero."""
        e = self.go(t.expr)
        ce = type(e)
        mine, other = (LEFT_INJ, RIGHT_INJ) if type(t) is LCastL else (RIGHT_INJ, LEFT_INJ)
        if ce in mine:
            self.changes += 1
            return e.expr
        if (ce in other and not self.may_fail(e.expr)) or is_none_zero(e):
            z = zero_term(t.zero)
            if z is not None:
                self.changes += 1
                return z
        return t if e is t.expr else attrs.evolve(t, expr=e)

    def case(self, t: Case):
        s = self.resolve(t.scrut)
        cs = type(s)
        if cs in LEFT_INJ:
            self.changes += 1
            return _Tail(Let(t.lname, s.expr, t.lbody))
        if cs in RIGHT_INJ:
            self.changes += 1
            return _Tail(Let(t.rname, s.expr, t.rbody))
        if cs is Let:
            self.changes += 1
            return _Tail(Let(s.name, s.rhs, attrs.evolve(t, scrut=s.body)))
        s = self.go(s)
        cs = type(s)
        if cs in LEFT_INJ:
            self.changes += 1
            return _Tail(Let(t.lname, Simplified(s.expr), t.lbody))
        if cs in RIGHT_INJ:
            self.changes += 1
            return _Tail(Let(t.rname, Simplified(s.expr), t.rbody))
        lb = self.go(t.lbody)
        rb = self.go(t.rbody)
        shared = self.shared_second(t, s, lb, rb)
        if shared is not None:
            return shared
        if s is t.scrut and lb is t.lbody and rb is t.rbody:
            return t
        return attrs.evolve(t, scrut=s, lbody=lb, rbody=rb)

    def shared_second(self, t: Case, s, lb, rb):
        """case s of {inl x -> (a, b) | inr y -> (a', b')} with b and b' the
        same term up to bound names and reading neither x nor y (an integer
        `if`'s CHAD: its backpropagators add nothing) is (case s of {inl x ->
        a | inr y -> a'}, b): the same evaluations in the same order, and the
        case's value a number the vectoriser batches (chad/compile/
        vectorise.py). Returns that pair, or None (s, lb and rb: the
        simplified scrutinee and branches)."""
        if type(lb) is not Pair or type(rb) is not Pair:
            return None
        b = lb.right
        if not alpha_equal(b, rb.right, ignore_captures=True):  # (recomputed after the pass)
            return None
        if t.lname in free_vars(b) or t.rname in free_vars(rb.right):
            return None
        self.changes += 1
        case = attrs.evolve(t, scrut=s, lbody=lb.left, rbody=rb.left, ty=_first_type(t.ty))
        return Pair(case, b, loc=lb.loc, ty=t.ty)

    # ------------------------------------------------------------ primitives
    def prim(self, t: Prim):
        return _Need(t.arg, Pass._prim, t)

    def _prim(self, arg, t: Prim):
        if t.op == "LADD" and type(arg) in PAIRS:
            # 0 + d = d (the sign of a zero d may differ: docs/simplifier.md)
            if is_zero(arg.left):
                self.changes += 1
                return arg.right
            if is_zero(arg.right):
                self.changes += 1
                return arg.left
        if arg is t.arg:
            return t
        return Prim(t.op, arg, t.const, loc=t.loc, ty=t.ty)  # attrs.evolve, faster

    # ------------------------------------------------------------ the EVM
    def bind(self, t: BindEVM):
        m = self.resolve(t.m)
        if type(m) is Let:
            self.changes += 1
            return _Tail(Let(m.name, m.rhs, BindEVM(m.body, t.k)))
        k = t.k
        if type(m) is PureEVM:
            k = self.resolve(k)
            if type(k) is Lam:  # bind (pure v) (\x -> n) = let x = v in n
                self.changes += 1
                return _Tail(Let(k.name, m.expr, k.body))
        return _Need(m, Pass._bind, t, k)

    def _bind(self, m2, t: BindEVM, k):
        k2 = self.go(k)
        if type(k2) is Lam:
            if type(m2) is PureEVM:
                self.changes += 1
                return Let(k2.name, m2.expr, k2.body)
            info = self.infos.get(k2.name)
            if info is not None and not info.pinned and info.count == 0 \
                    and not self.may_fail(k2.body):
                self.changes += 1
                return self.then_of(m2, k2.body)
        if m2 is t.m and k2 is t.k:
            return t
        return attrs.evolve(t, m=m2, k=k2)

    def then(self, t: ThenEVM):
        a = self.resolve(t.first)
        if type(a) is Let and (not self.may_fail(a.rhs) or not self.may_fail(t.second)):
            # a >> b evaluates b first: the let may move before b if one of them
            # cannot fail
            self.changes += 1
            return _Tail(Let(a.name, a.rhs, ThenEVM(a.body, t.second)))
        return _Need(t.second, Pass._then, t, a)

    def _then(self, b, t: ThenEVM, a):
        return _Need(a, Pass._then_done, t, b)

    def _then_done(self, a, t: ThenEVM, b):
        r = self.then_of(a, b)
        if type(r) is ThenEVM and r.first is t.first and r.second is t.second:
            return t
        return r

    def then_of(self, a, b):
        if type(a) is PureEVM and not self.may_fail(a.expr):
            self.changes += 1
            return b
        if type(b) is PureEVM and (type(b.expr) is Unit or is_none_zero(b.expr)) \
                and returns_none(a):
            self.changes += 1
            return a
        return ThenEVM(a, b)

    def add(self, t: AddEVM):
        return _Need(t.val, Pass._add, t)

    def _add(self, v, t: AddEVM):
        if is_zero(v):  # adding a zero changes no cell
            self.changes += 1
            return PureEVM(Unit())
        if t.ty is not None and _unit_cotangent(t.ty) and not self.may_fail(v):
            # the cell of an integer (or unit) variable: its cotangents are
            # unit, every add a no-op (`toreal (if c then i else 0)`: one
            # branch's backpropagator adds to i's cell, the other's does not;
            # with this both are `pure ()`, and the case's second components
            # the same)
            self.changes += 1
            return PureEVM(Unit())
        return t if v is t.val else attrs.evolve(t, val=v)


def _unit_cotangent(ty) -> bool:
    """ty's cotangent is unit (D2: an integer's, unit's): an add to such a
    variable's cell (AddEVM.ty, set by CHAD's var rule) changes nothing."""
    try:
        return D2(ty) == L_UN
    except NotImplementedError:
        return False


_HANDLERS = {
    Var: Pass.var, Let: Pass.let, App: Pass.app, Lam: Pass.lam,
    Fst: Pass.proj, Snd: Pass.proj, LFst: Pass.proj, LSnd: Pass.proj,
    LCastL: Pass.cast, LCastR: Pass.cast, Case: Pass.case, Prim: Pass.prim,
    BindEVM: Pass.bind, ThenEVM: Pass.then, AddEVM: Pass.add, Pair: Pass.pair,
    LPair: Pass.pair,
}


_PLANS: dict = {}


def _plan(cls):
    """(the first-evaluated child field or None, the handler) of a node class."""
    h = _HANDLERS.get(cls)
    if h is None:
        if cls is Simplified:
            return None, Pass.unwrap
        h = Pass.generic if shape(cls).children else Pass.leaf
    return FIRST.get(cls), h


def run_pass(term: Term, infos: dict[str, Info], fresh: Fresh,
             aliases=frozenset()) -> tuple[Term, int]:
    """One pass with the occurrence analysis' infos and aliases: (the rewritten
    term, the number of rewrites). The spines of a deep program are walked by
    Pass.go's loop; other sub-terms recurse."""
    p = Pass(infos, fresh, aliases)
    out = p.go(term)
    return out, p.changes


__all__ = ["run_pass", "Pass", "dead_info"]
