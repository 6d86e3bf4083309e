"""The z3 obligations of the complexity checker.

Each obligation is a closed first-order formula over (nonlinear) real or integer
arithmetic, built from measured or fitted quantities, together with the variables
z3 should report a witness for:

  family_obligation     exists c, c' >= 0. forall n >= n0.
                          G(n) <= c*P(n) + c' + S(n) + c''*Γ(n)
                        for closed forms P, G, S, Γ of a program family
                        (statement FAMILY_BOUNDED in chad/proofs/statements.py);
  observations_obligation
                        exists c >= 0. for every observation (P, G, S, n):
                          G <= c' + c*P + S + c''*n
                        (the finite instance of TH2 on measured programs;
                        chad/costmodel/fit.py::smallest_c minimises its c);
  th2_from_th1_obligation
                        the step from TH1 to TH2 of the formalisation, as
                        arithmetic over the pieces of the cost, with the
                        wrapper's overhead computed from the counting evaluator
                        (chad/costmodel/overhead.py; see its doc).

The constants (TH1's c; TH2's c, c', c'') default to chad/proofs/statements.py's.

`solve_exists` checks an obligation and, when it holds, returns the smallest
integer witness (c first, then c'), found by bisection with further z3 calls.
"""

from __future__ import annotations

from math import factorial
from typing import Any, Callable

from attrs import frozen

from chad.proofs.statements import TH1_C, TH2_C, TH2_C1, TH2_C2


@frozen
class Obligation:
    """A formula `exists vars. body` with the variables to report."""

    name: str
    formula: Any  # z3 BoolRef: the body (vars free)
    variables: tuple  # z3 Int or Real constants; integer witnesses, minimised in order
    sexpr: str
    monotone: bool = True  # increasing any variable keeps the body true

    def __str__(self) -> str:
        return f"{self.name}: exists {', '.join(map(str, self.variables))}. {self.sexpr}"


class Z3Form:
    """A function of n given as a z3 term builder and a text (used for the
    binomial lower bounds, whose degree exceeds ClosedForm's)."""

    def __init__(self, build: Callable, text: str, exponential: bool = False):
        self._build = build
        self.text = text
        self.exponential = exponential

    def z3(self, n, pow2=None):
        return self._build(n)

    def __str__(self) -> str:
        return self.text


def _binom(n, j: int):
    """C(n, j) as the polynomial n (n-1) ... (n-j+1) / j! (a z3 term in n)."""
    import z3

    t = z3.RealVal(1)
    for i in range(j):
        t = t * (n - i)
    return t / factorial(j)


def binomial_lower_bound(form, k: int) -> Z3Form:
    """`form` with 2^n replaced by sum_{j<=k} C(n, j) <= 2^n (every integer n >= 0;
    the binomial theorem). Valid as a lower bound when the 2^n terms of `form`
    have non-negative coefficients."""
    import z3

    def build(n):
        low = sum((_binom(n, j) for j in range(k + 1)), z3.RealVal(0))
        return form.z3(n, low)

    return Z3Form(build, f"{form} with 2^n >= sum_(j<={k}) C(n,j)")


def family_obligation(primal, gradient, ctg_size, params, n0: int = 1, c2: int = TH2_C2,
                      pow2: str | None = None) -> Obligation:
    """exists c, c' >= 0. forall n >= n0 (real). G(n) <= c*P(n) + c' + S(n) + c2*Γ(n).

    pow2="abstract": 2^n is a second universally quantified real m >= n + 1
    (a superset of its graph), for bounding families with exponential terms."""
    import z3

    n = z3.Real("n")
    c, c1 = z3.Reals("c c1")
    qvars = [n]
    hyp = n >= n0
    m = None
    if pow2 == "abstract":
        m = z3.Real("m")
        qvars.append(m)
        hyp = z3.And(hyp, m >= n + 1)
    rhs = (c * primal.z3(n, m) + c1 + ctg_size.z3(n, m)
           + c2 * params.z3(n, m))
    body = z3.And(c >= 0, c1 >= 0,
                  z3.ForAll(qvars, z3.Implies(hyp, gradient.z3(n, m) <= rhs)))
    text = (f"forall n >= {n0}: [{gradient}] <= c*[{primal}] + c' + [{ctg_size}] "
            f"+ {c2}*[{params}]")
    return Obligation("family bounded", body, (c, c1), text + "\n" + body.sexpr())


def observations_obligation(rows, c1: int = TH2_C1, c2: int = TH2_C2) -> Obligation:
    """exists c >= 0. /\\_(P, G, S, n) G <= c1 + c*P + S + c2*n."""
    import z3

    c = z3.Int("c")
    body = z3.And(c >= 0, *[g <= c1 + c * p + s + c2 * n for p, g, s, n in rows])
    return Obligation("observations covered", body, (c,),
                      f"{len(rows)} observations: G <= {c1} + c*P + S + {c2}*n")


def solve_exists(ob: Obligation, timeout_ms: int = 20000) -> tuple[str, tuple | None]:
    """("sat", smallest witness) / ("unsat", None) / ("unknown", None).

    The witness is minimised variable by variable (the first one first) by
    bisection, each step one z3 call with the variable fixed; this needs the body
    to be monotone in each variable (true of every obligation here: primal steps
    and the constants are non-negative)."""
    import z3

    def check(extra) -> tuple[Any, Any]:
        s = z3.Solver()
        s.set(timeout=timeout_ms)
        s.add(ob.formula, *extra)
        r = s.check()
        return r, (s.model() if r == z3.sat else None)

    r, model = check([])
    if r == z3.unsat:
        return "unsat", None
    if r != z3.sat:
        return "unknown", None
    fixed: list = []
    witness = []
    for v in ob.variables:
        hi = _ceil(model.eval(v, model_completion=True))
        lo = 0
        while lo < hi:  # smallest value of v that keeps the formula satisfiable
            mid = (lo + hi) // 2
            r2, m2 = check(fixed + [v == mid])
            if r2 == z3.sat:
                hi = mid
                model = m2
            else:
                lo = mid + 1
        fixed.append(v == hi)
        witness.append(hi)
        r3, m3 = check(fixed)
        if r3 == z3.sat:
            model = m3
    return "sat", tuple(witness)


def _ceil(val) -> int:
    """The smallest integer >= a z3 numeral (integer or rational)."""
    import math

    from fractions import Fraction

    if hasattr(val, "as_long") and val.is_int():
        return val.as_long()
    f = Fraction(val.as_fraction()) if hasattr(val, "as_fraction") else Fraction(str(val))
    return math.ceil(f)


def th2_from_th1_obligation(overhead=None, *, th1_c: int = TH1_C, c: int = TH2_C,
                            c1: int = TH2_C1, c2: int = TH2_C2):
    """TH2 from TH1, as arithmetic (Efficient CHAD (Smeding & Vákár), §6: "we
    initialise env0 with zeros ... and bound φ by size").

    `overhead` is a chad.costmodel.overhead.WrapperOverhead: how TH2's left side
    decomposes into TH1's three costs plus the rest, as the counting evaluator
    computes it (default: `wrapper_overhead()`, computed now). The constants are
    TH1's (th1_c) and TH2's (c, c1 = c', c2 = c''), by default those of
    chad/proofs/statements.py; each is used on its own side only.

    Unknowns (integers): the three costs of TH1 crun, ccall, cmonad; the primal
    cost P >= 1; n = |Γ|; φ(ctg) = size(ctg) >= 1; φ'(denvout) >= n (φ >= 1 on
    every cell); φ'(denvin) of the zero environment, between n and n times the
    smallest and largest potential of a zero cell; zs = Σ_i z_i, the zeros'
    costs, between n times the cheapest and the dearest zero cell.
    Hypothesis TH1:  crun + ccall + cmonad - size - φ'(denvin) + φ'(denvout) - n
                     <= th1_c * P.
    TH2's left side: crun + ccall + cmonad + K + k*n + Z,  Z = Z0 + p*n + zs
                     (K, k, Z0, p and the z_i from `overhead`).
    Claim:           left side <= c1 + c*P + size + c2*n.

    Returns (hypotheses, claim): `prove` checks that hypotheses => claim holds
    for all values of the unknowns."""
    import z3

    if overhead is None:
        from chad.costmodel.overhead import wrapper_overhead

        overhead = wrapper_overhead()
    o = overhead
    crun, ccall, cmonad, P, n, size, phiin, phiout, zs = z3.Ints(
        "crun ccall cmonad P n size phiin phiout zs")
    hyps = [P >= 1, n >= 0, size >= 1, crun >= 0, ccall >= 0, cmonad >= 0,
            phiout >= n,
            phiin >= o.zero_potential_min * n, phiin <= o.zero_potential_max * n,
            zs >= o.zero_cell_min * n, zs <= o.zero_cell_max * n,
            crun + ccall + cmonad - size - phiin + phiout - n <= th1_c * P]
    Z = o.zero_env_const + o.zero_env_per_param * n + zs
    lhs = crun + ccall + cmonad + o.wrapper_const + o.wrapper_per_param * n + Z
    claim = lhs <= c1 + c * P + size + c2 * n
    return z3.And(*hyps), claim


def prove(hyps, claim, timeout_ms: int = 10000) -> str:
    """'proved' when hyps => claim is valid, 'refuted' (with a countermodel in the
    string) when not, 'unknown' otherwise."""
    import z3

    s = z3.Solver()
    s.set(timeout=timeout_ms)
    s.add(hyps, z3.Not(claim))
    r = s.check()
    if r == z3.unsat:
        return "proved"
    if r == z3.sat:
        return f"refuted: {s.model()}"
    return "unknown"


__all__ = ["Obligation", "Z3Form", "binomial_lower_bound", "family_obligation",
           "observations_obligation", "solve_exists", "th2_from_th1_obligation", "prove"]
