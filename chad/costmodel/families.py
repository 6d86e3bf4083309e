"""Program families indexed by n: measured step counts, exact fits as functions
of n, and z3's verdict on "some (c, c') bound the family for all n".

    op_fst           x : R * (R * ... * R)  (n + 1 reals)  ⊢  fst x + fst x + ... + fst x
                     (n occurrences; Efficient CHAD (Smeding & Vákár), §4, `op(fst x, ..., fst x)`: naive
                     CHAD builds a dense zero of the n-tuple per occurrence)
    t_magic          x1 ... xn : R ⊢ a complete binary tree of + over x1 .. xn
                     (n a power of two; Efficient CHAD (Smeding & Vákár), appendix A: merging environment
                     cotangents at each + costs |Γ| naively)
    nested_lambdas   x_n : R ⊢ t_n = (\\x_{n-1} -> (... (\\x_1 -> x_1) x_2 ...) x_{n-1}) x_n
                     (Efficient CHAD (Smeding & Vákár), §9: naive higher-order CHAD is 2^n)     [needs chad.functions]
    build_index      a : Array R (length n) ⊢ build n (\\i -> a ! i)
                     (Efficient CHAD (Smeding & Vákár), §7: one-hot array cotangents)           [needs chad.arrays]
    iter_chain       x, w : R ⊢ iter n (\\s -> s * w + 1.0) x: n dependent steps, each
                     storing its backpropagator; the reverse pass threads the
                     state's cotangent (the recipe of `map`, §7)                    [needs chad.loops]
    scan_chain       a : Array R (length n) ⊢ sum (scan (\\p -> fst p * 0.5 + snd p) 0.0 a):
                     n dependent steps; the reverse pass adds each element's
                     cotangent to the state's and collects a's cotangent      [needs chad.loops]

    fam = FAMILIES["t_magic"]
    result = study(fam, "naive")          # measure, fit, decide
    result.verdict.status                 # "refuted"
    print(result.render())

`study` measures the family at its training sizes and held-back sizes, fits
primal steps, gradient steps, size(ctg) and |Γ| exactly (chad.costmodel.fit.fit_exact,
verified on the held-back sizes) and asks z3 (chad.costmodel.fit.decide_family).
"""

from __future__ import annotations

from typing import Any, Callable

from attrs import frozen

from chad.terms import (
    App, Build, Def, Fst, Index, Iter, Lam, MapA, Param, Pair, Prim, Program, Scan, Snd, Unit,
    Var,
)
from chad.printer import print_program
from chad.types import UNIT, ArrayT, Fun, Prod, R, Z

from .fit import ClosedForm, FitError, Verdict, decide_family, fit_exact
from .measure import C_PRIMAL, PROVED, Constants, Measurement, measure


@frozen
class Instance:
    """One member of a family: a program and the arguments to measure it on."""

    n: int
    program: Program
    args: list
    ctg: Any

    def source(self) -> str:
        return print_program(self.program)


@frozen
class Family:
    name: str
    description: str
    make: Callable[[int], Instance]
    sizes: tuple[int, ...]  # training sizes
    heldout: tuple[int, ...]  # held-back sizes, used only to verify the fits
    transforms: tuple[str, ...]  # transforms that apply, efficient first
    requires: str | None = None  # the extension it exercises: "arrays" / "functions" / "loops"
    reference: str = ""


# ----------------------------------------------------------------- the families


def _add(a, b):
    return Prim("ADD", Pair(a, b, ty=Prod(R, R)), ty=R)


def _reals(k: int):
    """The right-nested k-tuple type R * (R * ... * R) and a value of it."""
    ty, val = R, 1.0
    for _ in range(k - 1):
        ty, val = Prod(R, ty), (1.0, val)
    return ty, val


def op_fst(n: int) -> Instance:
    """x : R * R^n ⊢ fst x + ... + fst x (n occurrences)."""
    tau, tv = _reals(n)
    xty = Prod(R, tau)
    x = Var("x", ty=xty)
    body = Fst(x, ty=R)
    for _ in range(n - 1):
        body = _add(body, Fst(x, ty=R))
    d = Def("f", (Param("x", xty),), R, body)
    return Instance(n, Program((d,)), [[1.0, _json(tv)]], 1.0)


def _json(v):
    return [_json(v[0]), _json(v[1])] if isinstance(v, tuple) else v


def t_magic(n: int) -> Instance:
    """x1 .. xn : R ⊢ the complete binary tree of + over x1 .. x_(2^r), 2^r <= n."""
    r = max(0, n.bit_length() - 1)
    leaves = [Var(f"x{i + 1}", ty=R) for i in range(2 ** r)]
    while len(leaves) > 1:
        leaves = [_add(leaves[i], leaves[i + 1]) for i in range(0, len(leaves), 2)]
    params = tuple(Param(f"x{i + 1}", R) for i in range(n))
    d = Def("f", params, R, leaves[0])
    return Instance(n, Program((d,)), [1.0] * n, 1.0)


def nested_lambdas(n: int) -> Instance:
    """t_n of Efficient CHAD (Smeding & Vákár), §9: s_1 = x1, s_k = (\\x_(k-1) -> s_(k-1)) x_k, t_n = s_n."""
    body = Var("x1", ty=R)
    for k in range(2, n + 1):
        lam = Lam(f"x{k - 1}", R, body, (), ty=Fun(R, R))
        body = App(lam, Var(f"x{k}", ty=R), ty=R)
    d = Def("t", (Param(f"x{n}", R),), R, body)
    return Instance(n, Program((d,)), [1.0], 1.0)


def build_index(n: int) -> Instance:
    """a : Array R ⊢ build n (\\i -> a ! i), a of length n."""
    aty = ArrayT(R)
    body = Build(Prim("ILIT", Unit(ty=UNIT), n, ty=Z), "i",
                 Index(Var("a", ty=aty), Var("i", ty=Z), ty=R), ty=aty)
    d = Def("f", (Param("a", aty),), aty, body)
    return Instance(n, Program((d,)), [[1.0] * n], [1.0] * n)


def nested_maps(n: int) -> Instance:
    r"""a : Array R (one element) ⊢ map (\z -> z) (... (map (\z -> z) a)), n maps."""
    aty = ArrayT(R)
    body = Var("a", ty=aty)
    for k in range(n):
        body = MapA(f"z{k + 1}", Var(f"z{k + 1}", ty=R), body, ty=aty)
    d = Def("f", (Param("a", aty),), aty, body)
    return Instance(n, Program((d,)), [[1.0]], [1.0])


def iter_chain(n: int) -> Instance:
    r"""x, w : R ⊢ iter n (\s -> s * w + 1.0) x: n steps, each depending on the last."""
    s, w = Var("s", ty=R), Var("w", ty=R)
    step = _add(Prim("MUL", Pair(s, w, ty=Prod(R, R)), ty=R),
                Prim("LIT", Unit(ty=UNIT), 1.0, ty=R))
    body = Iter(Prim("ILIT", Unit(ty=UNIT), n, ty=Z), "s", step, Var("x", ty=R), ty=R)
    d = Def("f", (Param("x", R), Param("w", R)), R, body)
    return Instance(n, Program((d,)), [0.5, 0.5], 1.0)


def scan_chain(n: int) -> Instance:
    r"""a : Array R ⊢ sum (scan (\p -> fst p * 0.5 + snd p) 0.0 a), a of length n."""
    aty, pty = ArrayT(R), Prod(R, R)
    p = Var("p", ty=pty)
    step = _add(Prim("MUL", Pair(Fst(p, ty=R), Prim("LIT", Unit(ty=UNIT), 0.5, ty=R),
                                 ty=pty), ty=R), Snd(p, ty=R))
    scan = Scan("p", step, Prim("LIT", Unit(ty=UNIT), 0.0, ty=R), Var("a", ty=aty), ty=aty)
    d = Def("f", (Param("a", aty),), R, Prim("SUM", scan, ty=R))
    return Instance(n, Program((d,)), [[0.5] * n], 1.0)


FAMILIES: dict[str, Family] = {
    f.name: f for f in [
        Family("op_fst", "x : R * R^n ⊢ fst x + ... + fst x (n times)", op_fst,
               (2, 3, 4, 5, 6, 8, 12, 16), (24, 32), ("efficient", "naive"),
               reference="Efficient CHAD (Smeding & Vákár), §4 (Table 1: zeros must be constant-time)"),
        Family("t_magic", "x1..xn : R ⊢ complete binary +-tree over x1..xn (n = 2^r)",
               t_magic, (2, 4, 8, 16, 32), (64, 128), ("efficient", "naive"),
               reference="Efficient CHAD (Smeding & Vákár), appendix A (why union is not efficient)"),
        Family("nested_lambdas", "x_n : R ⊢ t_n, n - 1 nested (\\x -> ...) x applications",
               nested_lambdas, (1, 2, 3, 4, 5, 6, 7, 8), (10, 12),
               ("efficient", "naive-ho"), requires="functions",
               reference="Efficient CHAD (Smeding & Vákár), §9 (naive higher-order CHAD is O(2^n))"),
        Family("build_index", "a : Array R (length n) ⊢ build n (\\i -> a ! i)", build_index,
               (1, 2, 3, 4, 6, 8), (16, 32), ("efficient",), requires="arrays",
               reference="Efficient CHAD (Smeding & Vákár), §7 (one-hot array cotangents, Bag)"),
        Family("nested_maps", "a : Array R (1 element) ⊢ map (\\z -> z) (... a), n maps",
               nested_maps, (1, 2, 3, 4, 5, 6, 8), (12, 16), ("efficient",), requires="arrays",
               reference="found by `chad check --shape chains`: the per-map constant"),
        Family("iter_chain", "x, w : R ⊢ iter n (\\s -> s * w + 1.0) x", iter_chain,
               (10, 20, 50, 100, 200, 500, 1000), (2000, 10000), ("efficient",),
               requires="loops",
               reference="the loops extension: iter's derivative is linear in n (docs/cost-model.md)"),
        Family("scan_chain",
               "a : Array R (length n) ⊢ sum (scan (\\p -> fst p * 0.5 + snd p) 0.0 a)",
               scan_chain, (10, 20, 50, 100, 200, 500, 1000), (2000,), ("efficient",),
               requires="loops",
               reference="the loops extension: scan's derivative is linear in n (docs/cost-model.md)"),
    ]
}


# ----------------------------------------------------------------- measuring and fitting


@frozen
class FamilyFit:
    primal: ClosedForm
    gradient: ClosedForm
    ctg_size: ClosedForm
    params: ClosedForm

    def as_json(self) -> dict:
        return {k: getattr(self, k).as_json() for k in
                ("primal", "gradient", "ctg_size", "params")}


@frozen
class FamilyResult:
    family: Family
    transform: str
    evm: str
    points: tuple[Measurement, ...]  # training sizes then held-back sizes, in order
    ns: tuple[int, ...]
    fit: FamilyFit | None
    verdict: Verdict | None
    error: str | None = None
    constants: Constants = PROVED

    @property
    def status(self) -> str:
        return self.verdict.status if self.verdict is not None else "error"

    @property
    def within(self) -> bool:
        """Bounded with the given c: z3's smallest witness c is at most constants.c
        (the witness is minimal and the statement monotone in c, so c = 34 admits
        some c' exactly when the smallest c is <= 34)."""
        return self.status == "bounded" and self.verdict.witness[0] <= self.constants.c

    def holds_at(self) -> list[bool]:
        return [o.holds(self.constants) for o in self.points]

    def render(self) -> str:
        f = self.family
        lines = [f"family {f.name} ({f.description}); {f.reference}",
                 f"transform {self.transform}, evm {self.evm}",
                 f"  {'n':>5} {'primal':>8} {'gradient':>10} {'size(ctg)':>9} {'|params|':>8} "
                 f"{'bound':>8}  holds"]
        held = set(f.heldout)
        for n, o in zip(self.ns, self.points):
            mark = "  (held back)" if n in held else ""
            lines.append(f"  {n:>5} {o.primal_steps:>8} {o.gradient_steps:>10} "
                         f"{o.ctg_size:>9} {o.params:>8} {o.bound(self.constants):>8}  "
                         f"{'yes' if o.holds(self.constants) else 'NO'}{mark}")
        if self.fit is not None:
            lines.append("exact fits (verified on the held-back n):")
            lines.append(f"  primal(n)    = {self.fit.primal}")
            lines.append(f"  gradient(n)  = {self.fit.gradient}")
            lines.append(f"  size(ctg)(n) = {self.fit.ctg_size}")
            lines.append(f"  |params|(n)  = {self.fit.params}")
        if self.error is not None:
            lines.append(f"error: {self.error}")
        if self.verdict is not None:
            lines.append(f"z3: exists c, c' >= 0. forall n >= {min(self.ns)}: gradient(n) <= "
                         f"c*primal(n) + c' + size(ctg)(n) + {self.verdict.c2}*|params|(n) ?")
            lines.append(f"  {self.verdict}")
            if self.status == "bounded" and not self.within:
                lines.append(f"  but not with c = {self.constants.c}: the smallest c is "
                             f"{self.verdict.witness[0]}, so gradient(n) > {self.constants.c}"
                             f"*primal(n) + c' + ... for every c' once n is large enough")
            if self.verdict.method:
                lines.append(f"  (method: {self.verdict.method})")
            lines.append(f"  what this verdict is: {self.scope}")
        return "\n".join(lines)

    @property
    def scope(self) -> str:
        """What the verdict covers: z3 decides the bound for every n of the fitted
        closed forms, which are exact on the training sizes and checked at the
        held-back ones only; a family in the formalisation's first-order language,
        under the efficient transform, is covered for every n by its proof."""
        train = [n for n in self.ns if n not in set(self.family.heldout)]
        text = (f"exact fits on n = {', '.join(map(str, train))}, checked at the held-back "
                f"n = {', '.join(map(str, self.family.heldout))}; z3 decides the bound for "
                f"every n of the fitted formulas, which is an extrapolation past "
                f"n = {max(self.ns)}, not a proof")
        if self.proved:
            text += ("; proved for every n: the family is first-order, and the Agda "
                     f"formalisation of Efficient CHAD proves c = {C_PRIMAL} for the efficient "
                     "transform of every first-order program")
        return text

    @property
    def proved(self) -> bool:
        """Covered by a proof: the formalisation's theorem (efficient transform,
        first-order language, TH2's c = 34) when the verdict is within it."""
        return (self.family.requires is None and self.transform == "efficient"
                and self.within and self.constants.c >= C_PRIMAL)

    def as_json(self) -> dict:
        return {
            "family": self.family.name, "description": self.family.description,
            "transform": self.transform, "evm": self.evm,
            "points": [dict(n=n, primal_steps=o.primal_steps, gradient_steps=o.gradient_steps,
                            ctg_size=o.ctg_size, params=o.params,
                            heldout=n in self.family.heldout)
                       for n, o in zip(self.ns, self.points)],
            "fit": None if self.fit is None else self.fit.as_json(),
            "verdict": None if self.verdict is None else self.verdict.as_json(),
            "status": self.status, "error": self.error,
            "within_constants": self.within,
            "scope": self.scope if self.verdict is not None else None,
            "proved": self.proved,
            "constants": {"c": self.constants.c, "c1": self.constants.c1,
                          "c2": self.constants.c2},
        }


def measure_family(family: Family, transform: str, evm: str = "array",
                   ns=None) -> list[Measurement]:
    ns = tuple(ns) if ns is not None else family.sizes + family.heldout
    out = []
    for n in ns:
        inst = family.make(n)
        out.append(measure(inst.program, inst.args, inst.ctg, transform, evm))
    return out


def fit_family(ns, points: list[Measurement], heldout: tuple[int, ...]) -> FamilyFit:
    train = [(n, o) for n, o in zip(ns, points) if n not in heldout]
    held = [(n, o) for n, o in zip(ns, points) if n in heldout]

    def one(attr):
        return fit_exact([n for n, _ in train], [getattr(o, attr) for _, o in train],
                         [n for n, _ in held], [getattr(o, attr) for _, o in held])

    return FamilyFit(one("primal_steps"), one("gradient_steps"), one("ctg_size"),
                     one("params"))


def study(family: Family | str, transform: str = "efficient", evm: str = "array",
          constants: Constants = PROVED) -> FamilyResult:
    """Measure, fit exactly, and let z3 decide whether the family is bounded."""
    if isinstance(family, str):
        family = FAMILIES[family]
    ns = family.sizes + family.heldout
    points = measure_family(family, transform, evm, ns)
    try:
        fit = fit_family(ns, points, family.heldout)
    except FitError as e:
        return FamilyResult(family, transform, evm, tuple(points), ns, None, None, str(e),
                            constants)
    verdict = decide_family(fit.primal, fit.gradient, fit.ctg_size, fit.params,
                            n0=min(ns), c2=constants.c2)
    return FamilyResult(family, transform, evm, tuple(points), ns, fit, verdict, None,
                        constants)


__all__ = ["Family", "Instance", "FAMILIES", "FamilyFit", "FamilyResult", "study",
           "measure_family", "fit_family", "op_fst", "t_magic", "nested_lambdas",
           "build_index", "nested_maps", "iter_chain", "scan_chain"]
