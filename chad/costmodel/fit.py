"""Fitting the criterion's constants with z3, and exact closed forms of step counts.

Two kinds of fit:

1. From observations (primal P, gradient G, size(ctg) S, |Γ| n) of generated
   programs, z3's optimiser finds the smallest integer constants covering every
   observation,  G <= c' + c*P + S + c''*n :
     `smallest_c(obs)`   the smallest c with c' = 5, c'' = 4 fixed (TH2's, from
                         chad/proofs/statements.py; the formula is
                         chad/proofs/obligations.py::observations_obligation);
     `joint_fit(obs)`    (c, c', c'') jointly minimised, lexicographically
                         (c first, then c', then c''; or by their sum).
   These are lower bounds on what a proof can claim: the proved constant 34 must
   be at least the fitted c (otherwise an observation violates TH2).

2. For a program family indexed by n, `fit_exact(ns, ys)` finds the step count
   exactly as a function of n: a polynomial (degree <= 3) or c*2^n (+ n*2^n and a
   polynomial), by an exact rational least-squares solve over the training n,
   accepted only when it reproduces every training and every held-back n exactly.
   `decide_family` then asks z3 whether some (c, c') bound the family for all n
   (chad/proofs/obligations.py states the formula).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Sequence

from attrs import frozen

from chad.proofs.statements import TH2_C1, TH2_C2

# ----------------------------------------------------------------- observations -> constants


@frozen
class ConstantFit:
    """Smallest constants covering the observations (z3 Optimize)."""

    c: int
    c1: int
    c2: int
    objective: str  # "c with c', c'' fixed", "minimal c + c' + c''", "lexicographic ..."
    observations: int
    tight: tuple[int, int, int, int] | None = None  # the observation closest to the bound

    def as_json(self) -> dict:
        return {"c": self.c, "c1": self.c1, "c2": self.c2, "objective": self.objective,
                "observations": self.observations,
                "tight": None if self.tight is None else
                dict(zip(["primal_steps", "gradient_steps", "ctg_size", "params"], self.tight))}


def _rows(observations) -> list[tuple[int, int, int, int]]:
    rows = []
    for o in observations:
        if hasattr(o, "as_row"):
            rows.append(tuple(o.as_row()))
        else:
            rows.append(tuple(int(x) for x in o[:4]))
    return rows


def _reduce(rows):
    """Only the hardest observation per (P, n) matters: G - S <= c*P + c' + c''*n."""
    best: dict[tuple[int, int], tuple[int, int, int, int]] = {}
    for r in rows:
        p, g, s, n = r
        key = (p, n)
        if key not in best or g - s > best[key][1] - best[key][2]:
            best[key] = r
    return list(best.values())


def smallest_c(observations, c1: int = TH2_C1, c2: int = TH2_C2) -> ConstantFit:
    """The smallest integer c >= 0 with G <= c1 + c*P + S + c2*n for every observation:
    the witness of chad/proofs/obligations.py::observations_obligation, minimised
    by z3's Optimize."""
    import z3

    from chad.proofs.obligations import observations_obligation

    rows = _reduce(_rows(observations))
    ob = observations_obligation(rows, c1, c2)
    (c,) = ob.variables
    opt = z3.Optimize()
    opt.add(ob.formula)
    opt.minimize(c)
    if opt.check() != z3.sat:  # pragma: no cover - always satisfiable (P >= 1)
        raise RuntimeError("z3 found no constant covering the observations")
    cv = opt.model()[c].as_long()
    tight = max(rows, key=lambda r: (r[1] - c1 - r[2] - c2 * r[3]) / max(1, r[0]), default=None)
    return ConstantFit(cv, c1, c2, "c with c', c'' fixed", len(_rows(observations)), tight)


def joint_fit(observations, objective: str = "sum") -> ConstantFit:
    """(c, c', c'') >= 0 jointly minimised over the observations.

    objective="sum" (default): minimise c + c' + c'' (the bound at primal = |Γ| = 1),
    then, among those, c first (lexicographic tie-break).
    objective="lexicographic": c, then c', then c''. Beware: with |Γ| >= 1 and
    primal >= 1 everywhere, c = 0 is always feasible (c' or c'' absorb
    everything), so this order mostly reports how large c' and c'' must then be."""
    import z3

    rows = _reduce(_rows(observations))
    opt = z3.Optimize()
    c, c1, c2 = z3.Ints("c c1 c2")
    opt.add(c >= 0, c1 >= 0, c2 >= 0)
    for p, g, s, n in rows:
        opt.add(g <= c1 + c * p + s + c2 * n)
    if objective == "sum":
        opt.set(priority="lex")
        opt.minimize(c + c1 + c2)
        opt.minimize(c)
        label = "minimal c + c' + c''"
    else:
        opt.set(priority="lex")
        opt.minimize(c)
        opt.minimize(c1)
        opt.minimize(c2)
        label = "lexicographic (c, c', c'')"
    if opt.check() != z3.sat:  # pragma: no cover
        raise RuntimeError("z3 found no constants covering the observations")
    m = opt.model()
    vals = tuple(m.eval(v, model_completion=True).as_long() for v in (c, c1, c2))
    tight = min(rows, key=lambda r: vals[1] + vals[0] * r[0] + r[2] + vals[2] * r[3] - r[1],
                default=None)
    return ConstantFit(*vals, label, len(_rows(observations)), tight)


# ----------------------------------------------------------------- exact closed forms


class FitError(ValueError):
    """No model of the family fits the measured step counts exactly."""


def _pow2(n):
    return Fraction(2) ** n


BASIS = {
    "1": lambda n: Fraction(1),
    "n": lambda n: Fraction(n),
    "n^2": lambda n: Fraction(n) ** 2,
    "n^3": lambda n: Fraction(n) ** 3,
    "2^n": lambda n: _pow2(n),
    "n*2^n": lambda n: Fraction(n) * _pow2(n),
}
EXPONENTIAL = {"2^n", "n*2^n"}

# Models in order of preference: fewest basis functions first, polynomials before
# exponentials of the same size.
MODELS: tuple[tuple[str, ...], ...] = (
    ("1",),
    ("n", "1"),
    ("n^2", "n", "1"),
    ("2^n", "1"),
    ("2^n", "n", "1"),
    ("n^3", "n^2", "n", "1"),
    ("2^n", "n^2", "n", "1"),
    ("n*2^n", "2^n", "n", "1"),
    ("n*2^n", "2^n", "n^2", "n", "1"),
)


@frozen
class ClosedForm:
    """sum of coefficient * basis(n), coefficients exact rationals."""

    terms: tuple[tuple[str, Fraction], ...]

    def __call__(self, n) -> Fraction:
        return sum((coef * BASIS[b](n) for b, coef in self.terms), Fraction(0))

    @property
    def exponential(self) -> bool:
        return any(b in EXPONENTIAL and coef != 0 for b, coef in self.terms)

    def coef(self, basis: str) -> Fraction:
        return dict(self.terms).get(basis, Fraction(0))

    @property
    def poly_degree(self) -> int:
        degs = {"1": 0, "n": 1, "n^2": 2, "n^3": 3}
        return max((degs[b] for b, c in self.terms if b in degs and c != 0), default=0)

    def __str__(self) -> str:
        parts = []
        for b, coef in self.terms:
            if coef == 0:
                continue
            mag = abs(coef)
            cs = str(mag) if mag.denominator == 1 else f"({mag})"
            if b == "1":
                t = cs
            elif mag == 1:
                t = b
            else:
                t = f"{cs}*{b}"
            parts.append(("-" if coef < 0 else "+", t))
        if not parts:
            return "0"
        s = ("-" if parts[0][0] == "-" else "") + parts[0][1]
        for sign, t in parts[1:]:
            s += f" {sign} {t}"
        return s

    def z3(self, n, pow2=None):
        """A z3 term of this form in the real variable n (2^n -> `pow2`, required
        when the form is exponential)."""
        import z3

        out = z3.RealVal(0)
        for b, coef in self.terms:
            if coef == 0:
                continue
            k = z3.RealVal(f"{coef.numerator}/{coef.denominator}")
            if b == "1":
                out = out + k
            elif b == "n":
                out = out + k * n
            elif b == "n^2":
                out = out + k * n * n
            elif b == "n^3":
                out = out + k * n * n * n
            elif b == "2^n":
                out = out + k * pow2
            elif b == "n*2^n":
                out = out + k * n * pow2
        return z3.simplify(out)

    def as_json(self) -> dict:
        return {"formula": str(self),
                "terms": {b: str(c) for b, c in self.terms if c != 0}}


def _solve_exact(A: list[list[Fraction]], y: list[Fraction]) -> list[Fraction] | None:
    """Exact least squares: solve (A^T A) x = A^T y by Gauss-Jordan elimination."""
    k = len(A[0])
    M = [[sum(A[r][i] * A[r][j] for r in range(len(A))) for j in range(k)]
         + [sum(A[r][i] * y[r] for r in range(len(A)))] for i in range(k)]
    for col in range(k):
        piv = next((r for r in range(col, k) if M[r][col] != 0), None)
        if piv is None:
            return None
        M[col], M[piv] = M[piv], M[col]
        pv = M[col][col]
        M[col] = [v / pv for v in M[col]]
        for r in range(k):
            if r != col and M[r][col] != 0:
                f = M[r][col]
                M[r] = [a - f * b for a, b in zip(M[r], M[col])]
    return [M[i][k] for i in range(k)]


def fit_exact(ns: Sequence[int], ys: Sequence[int], heldout_ns: Sequence[int] = (),
              heldout_ys: Sequence[int] = (), models=MODELS) -> ClosedForm:
    """The first model (fewest terms) reproducing every training and held-back
    point exactly. A model needs at least one more training point than it has
    coefficients, so a fit is never a mere interpolation of the training points."""
    pts = list(zip(ns, ys))
    held = list(zip(heldout_ns, heldout_ys))
    for model in models:
        if len(pts) < len(model) + 1:
            continue
        A = [[BASIS[b](n) for b in model] for n, _ in pts]
        x = _solve_exact(A, [Fraction(y) for _, y in pts])
        if x is None:
            continue
        form = ClosedForm(tuple(zip(model, x)))
        if all(form(n) == y for n, y in pts) and all(form(n) == y for n, y in held):
            return form
    raise FitError(f"no model fits exactly: n = {list(ns)}, y = {list(ys)}")


# ----------------------------------------------------------------- family verdicts


@frozen
class Verdict:
    """z3's answer to "exists (c, c') bounding the family for all n >= n0"."""

    status: str  # "bounded" (sat), "refuted" (unsat) or "unknown"
    z3_result: str  # "sat", "unsat", "unknown"
    witness: tuple[int, int] | None  # the smallest (c, c') found (c first), when bounded
    formula: str  # the statement given to z3 (SMT-LIB)
    method: str  # how exponentials were handled, if at all
    c2: int = TH2_C2

    def as_json(self) -> dict:
        return {"status": self.status, "z3": self.z3_result,
                "witness": None if self.witness is None else
                {"c": self.witness[0], "c1": self.witness[1], "c2": self.c2},
                "method": self.method, "formula": self.formula}

    def __str__(self) -> str:
        if self.status == "bounded":
            c, c1 = self.witness
            return (f"bounded (z3: sat), witness c = {c}, c' = {c1} (c'' = {self.c2}): "
                    f"gradient(n) <= {c1} + {c}*primal(n) + size(ctg)(n) + {self.c2}*|params|(n) "
                    f"for every n, of the fitted formulas")
        if self.status == "refuted":
            return (f"refuted (z3: unsat): no constants c, c' bound gradient(n) by "
                    f"c' + c*primal(n) + size(ctg)(n) + {self.c2}*|params|(n) for all n, "
                    f"of the fitted formulas")
        return f"unknown (z3: {self.z3_result})"


def decide_family(primal: ClosedForm, gradient: ClosedForm, ctg_size: ClosedForm,
                  params: ClosedForm, n0: int = 1, c2: int = TH2_C2,
                  timeout_ms: int = 20000) -> Verdict:
    """Decide  exists c, c' >= 0. forall n >= n0. G(n) <= c*P(n) + c' + S(n) + c''*Γ(n).

    n ranges over the reals >= n0 (nonlinear real arithmetic, where z3 decides
    quantified formulas). This is sound for the integer family in both
    directions: `sat` over the reals gives constants valid at every integer n;
    `unsat` means that for every (c, c') the polynomial G - bound is unbounded
    above on [n0, oo) (c' is free), so it tends to +oo and fails at every large
    integer n as well.

    Exponential terms (2^n, n*2^n) in G: the refutation replaces 2^n by the
    polynomial lower bound sum_{j<=k} C(n, j) (binomial theorem, valid at every
    integer n >= 0), k one more than the degree of the bound side; bounding
    treats 2^n as an unknown m >= n + 1 (a superset of the graph of 2^n, so `sat`
    stays sound)."""
    from chad.proofs.obligations import binomial_lower_bound, family_obligation, solve_exists

    exp_bound = any(f.exponential for f in (primal, ctg_size, params))
    if not gradient.exponential and not exp_bound:
        ob = family_obligation(primal, gradient, ctg_size, params, n0, c2)
        res, witness = solve_exists(ob, timeout_ms)
        return _verdict(res, witness, ob, "polynomial, n real >= n0", c2)
    # Exponential: first try to bound with 2^n abstracted, then to refute with the
    # binomial lower bound (only valid when 2^n appears positively in G alone).
    ob = family_obligation(primal, gradient, ctg_size, params, n0, c2, pow2="abstract")
    res, witness = solve_exists(ob, timeout_ms)
    if res == "sat":
        return _verdict(res, witness, ob, "2^n abstracted as m >= n + 1", c2)
    if exp_bound or any(gradient.coef(b) < 0 for b in EXPONENTIAL):
        return Verdict("unknown", res, None, ob.sexpr, "exponential on both sides", c2)
    k = max(primal.poly_degree, ctg_size.poly_degree, params.poly_degree) + 2
    lower = binomial_lower_bound(gradient, k)
    ob = family_obligation(primal, lower, ctg_size, params, max(n0, 0), c2)
    res, witness = solve_exists(ob, timeout_ms)
    method = f"2^n >= sum_(j<={k}) C(n, j) (binomial lower bound, integer n >= 0)"
    if res == "sat":  # the lower bound is bounded: no conclusion
        return Verdict("unknown", "sat (lower bound only)", None, ob.sexpr, method, c2)
    return _verdict(res, None, ob, method, c2)


def _verdict(res: str, witness, ob, method: str, c2: int) -> Verdict:
    status = {"sat": "bounded", "unsat": "refuted"}.get(res, "unknown")
    return Verdict(status, res, witness if res == "sat" else None, ob.sexpr, method, c2)


__all__ = ["ConstantFit", "smallest_c", "joint_fit", "ClosedForm", "FitError", "fit_exact",
           "MODELS", "BASIS", "Verdict", "decide_family"]
