r"""Forward-mode CHAD of `iter` and `scan` (the loops extension), in the
interleaved form of chad/transform/forward.py (Vákár & Smeding, *CHAD:
Combinatory Homomorphic Automatic Differentiation*, §7.4). The paper has no
loop; as a loop is its body composed with itself, the rule runs the body's
forward derivative on the pair (state, tangent), step after step:

    F(iter n (s. t) x)  = let rn = F(n) in let rx = F(x) in
                          iter (fst rn) (q. let s = fst q in let d$s = snd q in F(t)) rx
    F(scan (p. t) x a)  = let rx = F(x) in let ra = F(a) in
                          let a1 = fst ra in let a2 = snd ra in
                          unzip (scan (q. let p = ⟨fst (fst q), fst (snd q)⟩ in
                                          let d$p = ⟨snd (fst q), snd (snd q)⟩ in F(t))
                                      rx (build (length a1) (j. ⟨a1 ! j, a2 ! j⟩)))

Each costs a constant times the source loop (docs/forward-mode.md).
"""

from __future__ import annotations

from chad.arrays.forward import elem_of, zipped
from chad.arrays.nodes import Unzip
from chad.terms import Fst, Iter, Let, Pair, Scan, Snd, Term, Var
from chad.transform.forward import Forward


def forward_iter(fwd: Forward, t: Iter) -> Term:
    rn, rx, q = fwd.fresh("r"), fwd.fresh("r"), fwd.fresh("q")
    body = fwd.bind(t.name, q, fwd(t.body))
    return Let(rn, fwd(t.count), Let(rx, fwd(t.init), Iter(
        Fst(Var(rn)), q, body, Var(rx), loc=t.loc)))


def forward_scan(fwd: Forward, t: Scan) -> Term:
    rx, ra, a1, a2, q = (fwd.fresh(s) for s in ("r", "r", "a", "da", "q"))
    body = Let(t.name, Pair(Fst(Fst(Var(q))), Fst(Snd(Var(q)))),
               Let(fwd.tangent(t.name), Pair(Snd(Fst(Var(q))), Snd(Snd(Var(q)))),
                   fwd(t.body)))
    scan = Scan(q, body, Var(rx), zipped(fwd, a1, a2, t.loc), loc=t.loc)
    return Let(rx, fwd(t.init), Let(ra, fwd(t.arr), Let(a1, Fst(Var(ra)), Let(
        a2, Snd(Var(ra)), Unzip(scan, elem_of(t))))))
