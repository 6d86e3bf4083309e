"""The complexity statements of Efficient CHAD (Smeding & Vákár), as Python data, and
how this project checks each of them.

Every `Statement` has the paper's formulation (`formal`, transcribed; the Agda
text of appendix B where there is one, with the constant corrected from 31 to
34, see docs/references.md (efficient-chad-agda)), an informal reading, and `checked_by`:
what in this repository tests, measures or proves it. Nothing here is a proof of
the theorems themselves (the Agda development is that); the project checks them
empirically on generated programs and decides the family statements with z3.
"""

from __future__ import annotations

from attrs import frozen


@frozen
class Statement:
    name: str
    source: str
    informal: str
    formal: str
    checked_by: str


CRITERION = Statement(
    name="criterion",
    source="Efficient CHAD (Smeding & Vákár), §3, Eq. (1)",
    informal="Reverse AD computes a gradient in a constant factor of the cost of the "
             "function, uniformly over programs and inputs.",
    formal="exists c, c' > 0. forall (x : σ ⊢ t : R). forall x : σ. forall d : R.\n"
           "  cost(snd D_Γ[t] d; x = x, d = d) <= c' + c * cost(t; x = x)",
    checked_by="chad check (chad/costmodel/criterion.py) in its TH2 form, below",
)

CRITERION_GENERAL = Statement(
    name="criterion, general contexts and types",
    source="Efficient CHAD (Smeding & Vákár), §4, Eq. (4)",
    informal="The same for every typing context and result type (the shape needed for "
             "an inductive proof).",
    formal="exists c, c' > 0. forall (x1 : σ1, ..., xn : σn ⊢ t : τ). forall x1 .. xn.\n"
           "  forall d : D[τ]2.\n"
           "  cost(snd D_Γ[t] d; x1 = x1, ..., xn = xn, d = d) <= c' + c * cost(t; x1 .. xn)",
    checked_by="the generated programs have arbitrary parameter and result types",
)

TH1 = Statement(
    name="TH1",
    source="Efficient CHAD (Smeding & Vákár), §3 Eq. (2), appendix B TH1-STATEMENT (constant corrected to 34)",
    informal="With potential: the cost of the derivative, minus the potential of the "
             "incoming cotangents, plus that of the outgoing environment cotangent, minus "
             "|Γ|, is at most 34 times the cost of the program.",
    formal="TH1-STATEMENT =\n"
           "  {Γ : Env Pr} {τ : Typ Pr} -> (env : Val Pr Γ) -> (ctg : Rep (D2τ τ))\n"
           "  -> (denvin : LETup (map D2τ' Γ)) -> (t : Term Pr Γ τ)\n"
           "  -> let (_primal , bp) , crun = eval (primalVal env) (chad t)\n"
           "         envf , ccall = bp ctg\n"
           "         tt , denvout , cmonad = LACM.run envf denvin\n"
           "     in crun + ccall + cmonad - φ (D2τ' τ) ctg - φ' (map D2τ' Γ) denvin\n"
           "        + φ' (map D2τ' Γ) denvout - + length Γ <= + 34 * cost env t",
    checked_by="tests/test_efficient.py::test_th1_holds_with_potential (generated programs, "
               "arbitrary sparse denvin)",
)

TH2 = Statement(
    name="TH2",
    source="Efficient CHAD (Smeding & Vákár), §6 Eq. (3), appendix B TH2-STATEMENT (constant corrected to 34)",
    informal="Running the derivative from a zero environment cotangent costs at most "
             "5 + 34 * cost(t) + size(ctg) + 4 * |Γ|.",
    formal="TH2-STATEMENT =\n"
           "  {Γ : Env Pr} {τ : Typ Pr} -> (env : Val Pr Γ) -> (ctg : Rep (D2τ τ))\n"
           "  -> (t : Term Pr Γ τ)\n"
           "  -> cost (push ctg (primalVal env))\n"
           "          (runevm (app (snd' (sink (WSkip WEnd) (chad t))) (var Z))\n"
           "                  (zero-env-term Γ))\n"
           "     <= + 5 + + 34 * cost env t + + size (D2τ' τ) ctg + + 4 * + length Γ",
    checked_by="`chad cost` (holds), `chad check` on generated programs (no violation for "
               "the efficient transform; z3 fits the smallest c covering the observations), "
               "tests/test_check.py",
)

TH2_FROM_TH1 = Statement(
    name="TH2 from TH1",
    source="Efficient CHAD (Smeding & Vákár), §6 (the corollary: env0 = zeros, φ bounded by size)",
    informal="TH2 follows from TH1 by arithmetic, given how TH2's left side decomposes into "
             "TH1's three costs plus the zero environment and a few steps.",
    formal="crun + ccall + cmonad - size(ctg) - n + φ'(denvout) - n <= 34 P,\n"
           "φ'(denvout) >= n, Z = 1 + sum_i (1 + z_i), 1 <= z_i <= 2\n"
           "  ==> crun + ccall + cmonad + Z + 4 <= 5 + 34 P + size(ctg) + 4 n",
    checked_by="chad/proofs/obligations.py::th2_from_th1_obligation, proved by z3 "
               "(tests/test_check.py, which also measures the decomposition)",
)

FAMILY_BOUNDED = Statement(
    name="family bounded",
    source="Efficient CHAD (Smeding & Vákár), §3 (Eq. (1) restricted to one family t_n)",
    informal="For a family of programs t_n with exact step-count formulas P(n) (program), "
             "G(n) (gradient), S(n) (size of the cotangent) and Γ(n) (parameters), some "
             "constants bound the gradient for every n.",
    formal="exists c, c' >= 0. forall n >= n0.  G(n) <= c * P(n) + c' + S(n) + 4 * Γ(n)",
    checked_by="chad/costmodel/fit.py::decide_family (z3 over nonlinear real arithmetic), "
               "`chad check --family NAME`: sat with the smallest witness for the efficient "
               "transform, unsat for the naive ones",
)

OBSERVATIONS_COVERED = Statement(
    name="observations covered",
    source="TH2, instantiated on the measured programs",
    informal="The smallest c that makes every observed (P, G, S, n) satisfy the bound with "
             "c' = 5, c'' = 4; TH2 says it is at most 34.",
    formal="min { c >= 0 | for every observation: G <= 5 + c * P + S + 4 n }",
    checked_by="chad/costmodel/fit.py::smallest_c (z3 Optimize), reported by `chad check`",
)

ZEROS_CONSTANT = Statement(
    name="zeros must be constant-time",
    source="Efficient CHAD (Smeding & Vákár), §4, Table 1 and the op(fst x, ..., fst x) example",
    informal="With dense zeros, x : R * τ ⊢ op(fst x, ..., fst x) has a gradient cost that "
             "grows with the size of τ times the number of occurrences, while the program "
             "costs O(n).",
    formal="not (exists c, c'. forall n. G_naive(op_fst_n) <= c * P(op_fst_n) + c')",
    checked_by="family op_fst: naive refuted, efficient bounded",
)

UNION_NOT_EFFICIENT = Statement(
    name="union is not efficient",
    source="Efficient CHAD (Smeding & Vákár), appendix A (t_magic)",
    informal="Merging environment cotangents at every + of a balanced tree over x1..xn costs "
             "O(n log n) even with a magical union, O(n^2) with dense environments; the "
             "program is O(n).",
    formal="not (exists c, c'. forall r. G_naive(t_magic_(2^r)) <= c * P + c' + 4 * 2^r)",
    checked_by="family t_magic: naive refuted, efficient bounded; experiments (b) shows the "
               "persistent map's log factor in its own work counts",
)

NAIVE_HO_EXPONENTIAL = Statement(
    name="naive higher-order CHAD is exponential",
    source="Efficient CHAD (Smeding & Vákár), §9 (t_n, nested lambdas)",
    informal="t_n runs in O(n); its naive CHAD backpropagator runs the innermost body's "
             "derivative 2^n times.",
    formal="G_naive-ho(t_n) = Θ(2^n) (fitted exactly: a*n*2^n + b*2^n + c), P(t_n) = O(n)",
    checked_by="family nested_lambdas: naive-ho refuted (binomial lower bound of 2^n), "
               "efficient (closure conversion) bounded",
)

STATEMENTS: dict[str, Statement] = {s.name: s for s in [
    CRITERION, CRITERION_GENERAL, TH1, TH2, TH2_FROM_TH1, FAMILY_BOUNDED, OBSERVATIONS_COVERED,
    ZEROS_CONSTANT, UNION_NOT_EFFICIENT, NAIVE_HO_EXPONENTIAL,
]}

__all__ = ["Statement", "STATEMENTS"] + [k for k in list(globals()) if k.isupper()]
