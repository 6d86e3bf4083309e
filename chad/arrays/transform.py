"""Efficient CHAD of the array forms: Efficient CHAD (Smeding & Vákár), Fig. 9 (build, index, fold), Fig. 10
(Tree, unTree), footnote 23 (length), §8.1 (BArray and gather), plus map and sum.

The text of Efficient CHAD we worked from was extracted from a PDF; where Fig. 9 came out garbled we
reconstruct it as follows (and say so at the rule):
  * fold: "do ⟨⟩, ⟨d1, d2⟩) ← scope (f d')" has lost a parenthesis and has its
    components swapped: `scope` returns (final cell, result), and the cell is the
    cotangent of p : τ × τ, so the pattern is `(⟨d1, d2⟩, ⟨⟩) ← scope 0 (f d')`;
    d1, d2 are lfst/lsnd of that (sparse) pair.
  * build: `scope_{D[Γ]₂, 1}` is the scope of the Z-typed binder i, whose cell is
    of type 1 (its init is `lunit`); `zipWith ... a2 d2` pairs the element
    backpropagators with the scattered element cotangents.
The rules are written in the style of chad/transform/efficient.py: the same
let / pair / closure shapes, every closure listing its captured variables.

    D[Array τ]₁ = Array D[τ]₁        D[Array τ]₂ = Bag (Z × D[τ]₂)

  chad (t ! s) = let r1 = chad t in let r2 = chad s in
      pair (fst r1 ! fst r2) (lamwith [r1, r2] \\d -> app (snd r1) (BOne (fst r2) d))
  (for a discrete element type, whose cotangent is (), the closure is
   lamwith [] \\d -> pure () : adding BOne ⟨i, ()⟩ would add nothing)

  chad (length t) = let r = chad t in pair (length (fst r)) (lamwith [] \\d -> pure ())

  chad (build s (i. t)) = let rn = chad s in let n = fst rn in
      [if n == 0 then pair [] (lamwith [] \\d -> pure ()) else]   (with gather reads)
      [let ix_e = build n (i. e) in]*          (one per distinct gather index e, §8.1)
      [let g_k = gather a_k ix_k in]*         (one per gather read a_k ! e_k)
      let a = build n (i. [let x_k = g_k ! i in]* chad_{Γ,i,x_1..x_m} t') in
      let u = unzip a in
      pair (fst u) (lamwith [u, ix_1..ix_m] \\d ->
          sequenceScoped [lunit, 0_τ1 .. 0_τm] (snd u)
                         (scatter (zeros (length (fst u))) (collect d))
          [>>= lamwith [ix..] \\res -> add a_1 (BArray ix_1 res_1) >> ... ])

  chad (map (x. t) s) = let rs = chad s in let u = unzipMap (x. chad_{Γ,x} t) (fst rs) in
      pair (fst u) (lamwith [u, rs] \\d ->
          bind (sequenceScoped [0_τ] keep 0 (snd u) (scatterBag (fst u) d))
               (lamwith [rs] \\dx -> app (snd rs) (BArray (fst dx))))
  where unzipMap (x. b) a is `let m = map (x. b) a in unzip m` and scatterBag a d
  is `scatter (zeros (length a)) (collect d)`, each one fused node charging the
  same work (docs/cost-model.md, "Against their expansions": 3 steps fewer each).

  chad (fold (p. t) s) = let rs = chad s in let tr = foldTree (p. chad_{Γ,p} t) (fst rs) in
      pair (getA tr) (lamwith [tr, rs] \\d ->
          bind (unTree d tr) (lamwith [rs] \\lf -> app (snd rs) (BArray lf)))

  chad (prim SUM s): the prim rule of efficient.py with dprim' SUM p d = BFill p d.

Gathers (§8.1). In `build n (i. t)`, an occurrence `a ! e` is a *gather read*
when `a` is a variable bound outside the build, `e` mentions no variable bound
inside t (other than i), the element type has a non-trivial cotangent, and the
occurrence is evaluated exactly once per element (not under a case branch, a
lambda, or the body of a nested build/fold/map/iter/scan). Then the index array
`build n (i. e)` and the gathered array are computed in the primal pass, the
occurrence is replaced by a fresh variable x bound to `g ! i`, and x's cotangent
is accumulated densely in a per-element `scope` cell; the reverse pass ends with
ONE `add a (BArray ix dx)`, so a is later scattered once instead of receiving n
BOne singletons. The primal value and the primal's errors are unchanged (the
occurrence was evaluated for every i anyway). An empty build evaluates no read,
so with gather reads the derivative tests n == 0 first and then builds none of
that machinery (its cost per read would not be paid by the primal).
"""

from __future__ import annotations

import attrs

from chad.linear import L_UN
from chad.primitives import branch, ilit, prim
from chad.terms import (
    AddEVM, App, ArrayLit, BindEVM, Build, Case, Fold, Fst, Index, Iter, Lam, Length, Let,
    LPairZero, LUnit, MapA, Pair, Prim, PureEVM, Scan, Snd, Term, ThenEVM, Unit, Var, binders_of,
    rebuild,
)
from chad.terms import free_vars as _free_vars
from chad.transform.common import D2, zerot
from chad.transform.efficient import Chad
from chad.types import ArrayT, Prod, Z

from .nodes import (
    BArrayT, BOneT, Collect, FoldTree, Gather, GetA, Scatter, ScatterBag, SequenceScoped,
    UnTree, Unzip, UnzipMap, Zeros,
)

def chad_index(self: Chad, t: Index) -> Term:
    r1, r2, d = self.fresh("r"), self.fresh("r"), self.fresh("d")
    primal = Index(Fst(Var(r1)), Fst(Var(r2)), loc=t.loc)
    if D2(t.ty) == L_UN:
        back = Lam(d, None, PureEVM(Unit()), ())
    else:
        back = Lam(d, None, App(Snd(Var(r1)), _bone(Fst(Var(r2)), Var(d))), (r1, r2))
    return Let(r1, self(t.arr), Let(r2, self(t.idx), Pair(primal, back)))


def _bone(i: Term, d: Term) -> Term:
    return BOneT(i, d)


def chad_array_lit(self: Chad, t: ArrayLit) -> Term:
    """chad [e1, ..., en] = let r1 = chad e1 in ... let rn = chad en in
        pair [fst r1, ..., fst rn] (lamwith [r1..rn] \\d ->
          let ds = scatter (zeros n) (collect d) in
          app (snd r1) (ds ! 0) >> ... >> app (snd rn) (ds ! (n - 1)))
    (the backpropagator is `pure ()` when n = 0 or the elements' cotangent is ())."""
    rs = [self.fresh("r") for _ in t.elems]
    d, ds = self.fresh("d"), self.fresh("ds")
    primal = ArrayLit(tuple(Fst(Var(r)) for r in rs), loc=t.loc)
    lt = D2(t.ty.elem)
    if not rs or lt == L_UN:
        back = Lam(d, None, PureEVM(Unit()), ())
    else:
        def elem(k: int) -> Term:
            return App(Snd(Var(rs[k])), Index(Var(ds), Prim("ILIT", Unit(), k)))
        chain = elem(len(rs) - 1)
        for k in range(len(rs) - 2, -1, -1):
            chain = ThenEVM(elem(k), chain)
        dense = Scatter(Zeros(Prim("ILIT", Unit(), len(rs)), lt), Collect(Var(d), lt), lt)
        back = Lam(d, None, Let(ds, dense, chain), tuple(rs))
    out: Term = Pair(primal, back)
    for r, e in reversed(list(zip(rs, t.elems))):
        out = Let(r, self(e), out)
    return out


def chad_length(self: Chad, t: Length) -> Term:
    r, d = self.fresh("r"), self.fresh("d")
    return Let(r, self(t.expr), Pair(Length(Fst(Var(r))), Lam(d, None, PureEVM(Unit()), ())))


def _reverse_pass(u: str, d: str, elem_ty, inits, keep, keep_elem) -> Term:
    """sequenceScoped inits (snd u) (scatter (zeros (length (fst u))) (collect d))."""
    lt = D2(elem_ty)
    ctgs = Scatter(Zeros(Length(Fst(Var(u))), lt), Collect(Var(d), lt), lt)
    return SequenceScoped(Snd(Var(u)), ctgs, tuple(inits), tuple(keep), tuple(keep_elem))


def _proj(res: str, k: int) -> Term:
    t: Term = Var(res)
    for _ in range(k):
        t = Snd(t)
    return Fst(t)


def chad_build(self: Chad, t: Build) -> Term:
    rn, n, a, u, d = (self.fresh(s) for s in ("r", "n", "a", "u", "d"))
    elem_ty = t.ty.elem
    body, gathers = extract_gathers(t.body, t.name, self.fresh)
    tokens = [self.ctx.push(t.name, Z)]
    for g in gathers:
        tokens.append(self.ctx.push(g.var, g.ty))
    try:
        cbody = self(body)
    finally:
        for tok in reversed(tokens):
            self.ctx.pop(tok)
    ix_of: dict = {}  # one index array per distinct index expression
    for g in gathers:
        if g.index not in ix_of:
            ix_of[g.index] = self.fresh("ix")
    ixs = [ix_of[g.index] for g in gathers]
    distinct_ixs = tuple(ix_of.values())
    gs = [self.fresh("g") for _ in gathers]
    inner = cbody
    for g, gname in reversed(list(zip(gathers, gs))):
        inner = Let(g.var, Index(Var(gname), Var(t.name)), inner)
    inits = [LUnit()] + [zerot(g.ty) for g in gathers]
    keep = list(range(1, 1 + len(gathers)))
    seq = _reverse_pass(u, d, elem_ty, inits, keep, [D2(g.ty) for g in gathers])
    if gathers:
        res = self.fresh("res")
        adds = [AddEVM(self.ctx.level(g.arr), g.arr, BArrayT(_proj(res, k), Var(ix)))
                for k, (g, ix) in enumerate(zip(gathers, ixs))]
        chain = adds[-1]
        for add in reversed(adds[:-1]):
            chain = ThenEVM(add, chain)
        back_body = BindEVM(seq, Lam(res, None, chain, distinct_ixs))
    else:
        back_body = seq
    back = Lam(d, None, back_body, (u,) + distinct_ixs)
    term: Term = Let(a, Build(Var(n), t.name, inner, loc=t.loc),
                     Let(u, Unzip(Var(a), elem_ty), Pair(Fst(Var(u)), back)))
    for g, ix, gname in reversed(list(zip(gathers, ixs, gs))):
        term = Let(gname, Gather(Var(g.arr), Var(ix), loc=g.loc), term)
    for e, ix in reversed(list(ix_of.items())):
        term = Let(ix, Build(Var(n), t.name, e, ty=ArrayT(Z), loc=t.loc), term)
    if gathers:
        # an empty build evaluates no read: its derivative skips the gather
        # machinery (index arrays, gathers, cells, adds: a constant per read)
        empty = Pair(ArrayLit((), ty=ArrayT(elem_ty), loc=t.loc),
                     Lam(self.fresh("d"), None, PureEVM(Unit()), ()))
        term = branch(prim("IEQ", Var(n), ilit(0)), empty, term)
    return Let(rn, self(t.size), Let(n, Fst(Var(rn)), term))


def chad_map(self: Chad, t: MapA) -> Term:
    rs, u, d, dx = (self.fresh(s) for s in ("r", "u", "d", "dx"))
    x_ty = t.arr.ty.elem
    elem_ty = t.ty.elem
    tok = self.ctx.push(t.name, x_ty)
    try:
        cbody = self(t.body)
    finally:
        self.ctx.pop(tok)
    # the reverse pass of build (_reverse_pass) with its dense cotangents fused:
    # scatterBag (fst u) d = scatter (zeros (length (fst u))) (collect d)
    ctgs = ScatterBag(Fst(Var(u)), Var(d), D2(elem_ty))
    seq = SequenceScoped(Snd(Var(u)), ctgs, (zerot(x_ty),), (0,), (D2(x_ty),))
    back = Lam(d, None, BindEVM(seq, Lam(dx, None, App(Snd(Var(rs)), BArrayT(Fst(Var(dx)))),
                                         (rs,))), (u, rs))
    return Let(rs, self(t.arr), Let(u, UnzipMap(t.name, cbody, Fst(Var(rs)), elem_ty, loc=t.loc),
                                    Pair(Fst(Var(u)), back)))


def chad_fold(self: Chad, t: Fold) -> Term:
    # Fig. 9, reconstructed (see the module docstring): the reverse pass runs
    # unTree over the recorded reduction tree; scope's result is (cell, ()).
    rs, tr, d, lf = (self.fresh(s) for s in ("r", "tree", "d", "lf"))
    el = t.ty
    tok = self.ctx.push(t.name, Prod(el, el))
    try:
        cbody = self(t.body)
    finally:
        self.ctx.pop(tok)
    back = Lam(d, None, BindEVM(
        UnTree(Var(d), Var(tr), LPairZero(), D2(el)),
        Lam(lf, None, App(Snd(Var(rs)), BArrayT(Var(lf))), (rs,))), (tr, rs))
    return Let(rs, self(t.arr), Let(tr, FoldTree(t.name, cbody, Fst(Var(rs)), loc=t.loc),
                                    Pair(GetA(Var(tr)), back)))


# ----------------------------------------------------------------- gather extraction


@attrs.frozen
class GatherRead:
    var: str      # the fresh variable standing for the occurrence
    arr: str      # the array variable read
    index: Term   # the index expression (source term; free vars: i and outer ones)
    ty: object    # the element type
    loc: object = attrs.field(default=None, eq=False)  # the occurrence's location


def free_vars(t: Term) -> set[str]:
    """Free variables of a term (the one traversal of chad/terms.py)."""
    return set(_free_vars(t))


def extract_gathers(body: Term, i_name: str, fresh) -> tuple[Term, list[GatherRead]]:
    """Replace the gather reads of a build body (see the module docstring) by
    fresh variables; returns the new body and the reads, in order."""
    found: dict = {}
    order: list[GatherRead] = []

    def walk(t: Term, inner: frozenset) -> Term:
        ev = attrs.evolve
        match t:
            case Index(Var(a), idx) if (a not in inner and a != i_name
                                        and D2(t.ty) != L_UN
                                        and not (free_vars(idx) & inner)):
                key = (a, idx)
                g = found.get(key)
                if g is None:
                    g = GatherRead(fresh("x"), a, idx, t.ty, t.loc)
                    found[key] = g
                    order.append(g)
                return Var(g.var, loc=t.loc, ty=t.ty)
            # Only the parts evaluated exactly once per element are searched:
            # not a lambda's body, a case's branches, or a nested loop's body
            # (an iter's or a scan's too: run any number of times, 0 included,
            # a read hoisted out of it could fail where the program does not)
            case Lam():
                return t
            case Case():
                return ev(t, scrut=walk(t.scrut, inner))
            case Build():
                return ev(t, size=walk(t.size, inner))
            case Fold() | MapA():
                return ev(t, arr=walk(t.arr, inner))
            case Iter():
                return ev(t, count=walk(t.count, inner), init=walk(t.init, inner))
            case Scan():
                return ev(t, init=walk(t.init, inner), arr=walk(t.arr, inner))
        return rebuild(t, [walk(c, inner | set(names)) for c, names in binders_of(t)])

    new = walk(body, frozenset())
    return new, order
