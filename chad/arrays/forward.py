r"""Forward-mode CHAD of the array forms (Vákár & Smeding, *CHAD: Combinatory
Homomorphic Automatic Differentiation*, its array operations (the appendix's
`map`), in the interleaved form of chad/transform/forward.py): the tangent of an
array is the array of its elements' tangents, D(Array τ)₂ = Array D(τ)₂, of the
primal's length. Every rule evaluates the source form once, on pairs (primal,
tangent), and splits the result with `unzip` (chad/arrays/nodes.py), so it costs
a constant times the source form (docs/forward-mode.md):

    F(build n (i. t))   = let rn = F(n) in
                          unzip (build (fst rn) (i. let d$i = () in F(t)))
    F(a ! i)            = let ra = F(a) in let ri = F(i) in let j = fst ri in
                          ⟨fst ra ! j, snd ra ! j⟩
    F(length a)         = let ra = F(a) in ⟨length (fst ra), ()⟩
    F([e1, ..., en])    = let r1 = F(e1) in ... let rn = F(en) in
                          ⟨[fst r1, ..., fst rn], [snd r1, ..., snd rn]⟩
    F(map (x. t) a)     = let ra = F(a) in let a1 = fst ra in let a2 = snd ra in
                          unzip (build (length a1) (j. let x = a1 ! j in
                                                       let d$x = a2 ! j in F(t)))
    F(fold (p. t) a)    = let ra = F(a) in let a1 = fst ra in let a2 = snd ra in
                          fold (q. let p = ⟨fst (fst q), fst (snd q)⟩ in
                                   let d$p = ⟨snd (fst q), snd (snd q)⟩ in F(t))
                               (build (length a1) (j. ⟨a1 ! j, a2 ! j⟩))
    F(sum a)            the primitive rule, with SUM's tangent: sum of the tangents

fold combines the pairs (value, tangent) in fold's one order (a balanced tree),
so the primal value is bit for bit the source fold's; the combination of pairs is
associative when t is (it is the derivative of the same composite).
"""

from __future__ import annotations

from chad.terms import (
    ArrayLit, Build, Fold, Fst, Index, Length, Let, MapA, Pair, Snd, Term, Unit, Var,
)
from chad.transform.forward import Forward

from chad.types import ArrayT

from .nodes import Unzip


def elem_of(t: Term):
    """The element type of an array term (it fixes the primal array's
    representation), or None for a target term without a type (a forward
    derivative transformed again: the array is then a tuple)."""
    return t.ty.elem if isinstance(t.ty, ArrayT) else None


def forward_unzip(fwd: Forward, t: Unzip) -> Term:
    """F(unzip a) = let r = F(a) in ⟨unzip (fst r), unzip (snd r)⟩: the tangent of
    an array of pairs is an array of pairs (a forward derivative transformed
    again, for second derivatives)."""
    r = fwd.fresh("r")
    return Let(r, fwd(t.arr), Pair(Unzip(Fst(Var(r)), t.elem, loc=t.loc),
                                   Unzip(Snd(Var(r)), None, loc=t.loc)))


def forward_build(fwd: Forward, t: Build) -> Term:
    rn = fwd.fresh("r")
    body = Let(fwd.tangent(t.name), Unit(), fwd(t.body))
    return Let(rn, fwd(t.size), Unzip(Build(Fst(Var(rn)), t.name, body, loc=t.loc),
                                      elem_of(t)))


def forward_index(fwd: Forward, t: Index) -> Term:
    ra, ri, j = fwd.fresh("r"), fwd.fresh("r"), fwd.fresh("j")
    return Let(ra, fwd(t.arr), Let(ri, fwd(t.idx), Let(j, Fst(Var(ri)), Pair(
        Index(Fst(Var(ra)), Var(j), loc=t.loc), Index(Snd(Var(ra)), Var(j), loc=t.loc)))))


def forward_length(fwd: Forward, t: Length) -> Term:
    ra = fwd.fresh("r")
    return Let(ra, fwd(t.expr), Pair(Length(Fst(Var(ra))), Unit()))


def forward_array_lit(fwd: Forward, t: ArrayLit) -> Term:
    rs = [fwd.fresh("r") for _ in t.elems]
    out: Term = Pair(ArrayLit(tuple(Fst(Var(r)) for r in rs), loc=t.loc, ty=t.ty),
                     ArrayLit(tuple(Snd(Var(r)) for r in rs), loc=t.loc))
    for r, e in reversed(list(zip(rs, t.elems))):
        out = Let(r, fwd(e), out)
    return out


def _split(fwd: Forward, arr: Term, body) -> Term:
    """let ra = F(arr) in let a1 = fst ra in let a2 = snd ra in body(a1, a2)."""
    ra, a1, a2 = fwd.fresh("r"), fwd.fresh("a"), fwd.fresh("da")
    return Let(ra, fwd(arr), Let(a1, Fst(Var(ra)), Let(a2, Snd(Var(ra)), body(a1, a2))))


def forward_map(fwd: Forward, t: MapA) -> Term:
    j = fwd.fresh("j")
    fbody = fwd(t.body)

    def body(a1, a2):
        elem = Let(t.name, Index(Var(a1), Var(j)),
                   Let(fwd.tangent(t.name), Index(Var(a2), Var(j)), fbody))
        return Unzip(Build(Length(Var(a1)), j, elem, loc=t.loc), elem_of(t))

    return _split(fwd, t.arr, body)


def zipped(fwd: Forward, a1: str, a2: str, loc=None) -> Term:
    """build (length a1) (j. ⟨a1 ! j, a2 ! j⟩): the array of (primal, tangent)."""
    j = fwd.fresh("j")
    return Build(Length(Var(a1)), j, Pair(Index(Var(a1), Var(j)), Index(Var(a2), Var(j))),
                 loc=loc)


def forward_fold(fwd: Forward, t: Fold) -> Term:
    q = fwd.fresh("q")
    fbody = Let(t.name, Pair(Fst(Fst(Var(q))), Fst(Snd(Var(q)))),
                Let(fwd.tangent(t.name), Pair(Snd(Fst(Var(q))), Snd(Snd(Var(q)))),
                    fwd(t.body)))
    return _split(fwd, t.arr, lambda a1, a2: Fold(q, fbody, zipped(fwd, a1, a2, t.loc),
                                                  loc=t.loc))
