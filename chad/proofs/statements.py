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

from attrs import field, frozen

# The constants of TH1 and TH2 (the corrected formalisation, appendix B), written
# here once. TH1: ... <= TH1_C * cost(t); TH2: ... <= TH2_C1 + TH2_C * cost(t) +
# size(ctg) + TH2_C2 * |Γ|. chad/costmodel/measure.py (C_PRIMAL, C_CONST,
# C_PARAMS, the bound of `chad cost`), the fits' defaults (chad/costmodel/fit.py)
# and the obligations (chad/proofs/obligations.py) take them from here.
TH1_C = 34
TH2_C, TH2_C1, TH2_C2 = 34, 5, 4
# The smallest constant with which `chad prove` proves the inductive step of every
# rule (RULE_STEP below): the formalisation's rules need TH1_C, the project's
# primitives DIV, POW and POWI more (their transposed derivatives cost more than
# the formalisation's lemma-prim allows; docs/proofs.md). tests/test_prove.py
# checks that every rule holds with it and some rule fails with one less.
PROOF_C = 59
# The slack every term leaves (TH1 strengthened to `... <= c * cost(t) - b`,
# docs/proofs.md, "The loops"): the loop rules' per-element overhead is not in
# the primal cost (a source map or fold charges nothing per element beyond its
# body), so their step holds only when every element's derivative leaves b steps
# of slack: map needs b >= 25, fold b >= 29 (its reverse pass costs 29 steps per
# combine). A leaf needs c >= 7 + b (var), so b = 29 makes var need 36 (with
# b = 26, var and map's non-empty path would both need 33, the constant of the
# nested maps family, `chad check --family nested_maps`; fold forbids it). b = 0
# is the formalisation's TH1 (its lemmas are compared at b = 0);
# tests/test_prove.py and tests/test_prove_arrays.py check these numbers.
PROOF_B = 29
# The invariant for function values (FUN_STEP below, chad/proofs/function_rules.py):
# calling a closure's derivative and its backpropagator costs at most c times the
# primal call, less b, plus FUN_K (the closure wrapper's steps beyond its body's
# derivative: the `let`, the pair, the `run` from zero cells); for a def of n
# parameters DEF_K0 + DEF_K1 * n. ENV_ENTRY_W is the extra potential of each entry
# of an environment bag (φ* of a bag; docs/proofs.md, "Functions"). tests/test_prove.py
# checks that each K is the smallest with which its rule holds.
FUN_K = 22
DEF_K0, DEF_K1 = 13, 5
ENV_ENTRY_W = 2


@frozen
class Statement:
    name: str
    source: str
    informal: str
    formal: str
    checked_by: str
    # the statement's numeric constants by name (TH1: c; TH2: c, c1 = c', c2 = c'')
    constants: dict = field(factory=dict, eq=False)


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
             f"|Γ|, is at most {TH1_C} times the cost of the program.",
    formal="TH1-STATEMENT =\n"
           "  {Γ : Env Pr} {τ : Typ Pr} -> (env : Val Pr Γ) -> (ctg : Rep (D2τ τ))\n"
           "  -> (denvin : LETup (map D2τ' Γ)) -> (t : Term Pr Γ τ)\n"
           "  -> let (_primal , bp) , crun = eval (primalVal env) (chad t)\n"
           "         envf , ccall = bp ctg\n"
           "         tt , denvout , cmonad = LACM.run envf denvin\n"
           "     in crun + ccall + cmonad - φ (D2τ' τ) ctg - φ' (map D2τ' Γ) denvin\n"
           f"        + φ' (map D2τ' Γ) denvout - + length Γ <= + {TH1_C} * cost env t",
    checked_by="tests/test_efficient.py::test_th1_holds_with_potential (generated programs, "
               "arbitrary sparse denvin)",
    constants={"c": TH1_C},
)

TH2 = Statement(
    name="TH2",
    source="Efficient CHAD (Smeding & Vákár), §6 Eq. (3), appendix B TH2-STATEMENT (constant corrected to 34)",
    informal="Running the derivative from a zero environment cotangent costs at most "
             f"{TH2_C1} + {TH2_C} * cost(t) + size(ctg) + {TH2_C2} * |Γ|.",
    formal="TH2-STATEMENT =\n"
           "  {Γ : Env Pr} {τ : Typ Pr} -> (env : Val Pr Γ) -> (ctg : Rep (D2τ τ))\n"
           "  -> (t : Term Pr Γ τ)\n"
           "  -> cost (push ctg (primalVal env))\n"
           "          (runevm (app (snd' (sink (WSkip WEnd) (chad t))) (var Z))\n"
           "                  (zero-env-term Γ))\n"
           f"     <= + {TH2_C1} + + {TH2_C} * cost env t + + size (D2τ' τ) ctg "
           f"+ + {TH2_C2} * + length Γ",
    checked_by="`chad cost` (holds), `chad check` on generated programs (no violation for "
               "the efficient transform; z3 fits the smallest c covering the observations), "
               "tests/test_check.py",
    constants={"c": TH2_C, "c1": TH2_C1, "c2": TH2_C2},
)

TH2_FROM_TH1 = Statement(
    name="TH2 from TH1",
    source="Efficient CHAD (Smeding & Vákár), §6 (the corollary: env0 = zeros, φ bounded by size)",
    informal="TH2 follows from TH1 by arithmetic, given how TH2's left side decomposes into "
             "TH1's three costs plus the zero environment and the wrapper's few steps, as "
             "the counting evaluator computes them.",
    formal=f"crun + ccall + cmonad - size(ctg) - φ'(denvin) + φ'(denvout) - n <= {TH1_C} P,\n"
           "φ'(denvout) >= n, φ0_min n <= φ'(denvin) <= φ0_max n,\n"
           "Z = Z0 + Σ_i (p + z_i), z_min <= z_i <= z_max\n"
           f"  ==> crun + ccall + cmonad + K + k n + Z <= {TH2_C1} + {TH2_C} P + size(ctg) "
           f"+ {TH2_C2} n\n"
           "with K, k (the wrapper runevm/app/snd/var), Z0, p, z_i (zero-env-term) and φ0 "
           "(the zeros' potential) computed by chad/costmodel/overhead.py::wrapper_overhead "
           "(their values: docs/cost-model.md, \"TH2 from TH1\")",
    checked_by="chad/proofs/obligations.py::th2_from_th1_obligation on the numbers of "
               "chad/costmodel/overhead.py::wrapper_overhead, proved by z3 "
               "(tests/test_obligations.py, which also refutes it with any of TH2's constants "
               "one smaller or any overhead one larger, and checks the decomposition exactly "
               "on generated programs)",
)

RULE_STEP = Statement(
    name="rule step",
    source="Efficient CHAD (Smeding & Vákár), appendix B, lemmas.agda (lemma-var, lemma-let, "
           "lemma-prim, ...): the inductive step of TH1, one linear inequality per rule",
    informal="For each CHAD rule, with the sub-terms' costs and potentials abstract and TH1 "
             "(strengthened by the slack b) assumed for each sub-term, the rule's term "
             "satisfies TH1's inequality with the same constants c and b; a loop's n "
             "elements enter through their sums (TH1 summed: c * ΣP_k - n * b). With b = 0 "
             "it is the formalisation's lemma per rule.",
    formal="hyps(LACM: pure 1, bind 1 + c1 + ccall + c2, add 1 + cplus, scope 1 + c, "
           "run 1 + |Γ| + c;\n"
           "      plusv: cplus - φ(x) - φ(y) + φ(x + y) <= 0; zero: czero <= 2, φ(zero) = 1;\n"
           "      the sub-terms' types range over the formalisation's cotangent types)\n"
           "  ∧ ∀k. crun_k + ccall_k + cmonad_k - φ(ctg_k) - φ'(in_k) + φ'(out_k) - |Γ_k| "
           "<= c * P_k - b\n"
           "  ==> crun + ccall + cmonad - φ(ctg) - φ'(denvin) + φ'(denvout) - |Γ| <= c * P - b",
    checked_by="chad/proofs/rules.py (obligations derived from the transform's code by "
               "chad/proofs/symbolic.py), chad/proofs/prover.py (z3), `chad prove`; "
               "tests/test_prove.py, tests/test_prove_formalisation.py",
    constants={"c": PROOF_C, "b": PROOF_B, "th1": TH1_C},
)

FUN_STEP = Statement(
    name="function step",
    source="Efficient CHAD (Smeding & Vákár), §9 and appendix C (closure conversion); an "
           "invariant of this project (the formalisation has no functions)",
    informal="For a function value (a closure, or a def), calling its derivative on an "
             "argument and then the backpropagator it returns on a cotangent costs at most "
             "c times the primal call, less b, plus a constant K, after the potentials: "
             "the cotangent's is paid in, the returned cotangents' (the argument's and "
             "the closure environment's, or the parameters') paid out.",
    formal="Cfwd + Cbwd - φ(d) + φ(dx) + φ*(denv) - FUN_K <= c * P_call - b   (closures)\n"
           "Cfwd + Cbwd - φ(d) + Σ_i φ(dy_i) - (DEF_K0 + DEF_K1 * n) <= c * P_body - b   "
           "(defs of n parameters)\n"
           "φ*(bag of E entries) = (2 + ENV_ENTRY_W) * E + 1 + Σ φ*(d_i), "
           "φ*(lpacked v) = 1 + φ*(v), φ* = φ elsewhere",
    checked_by="chad/proofs/function_rules.py: the rule `lam closure` proves it for a closure "
               "from TH1 of its body, `def` for a def's derivative from TH1 of its body; `app` "
               "and `def call` assume it (`chad prove`, tests/test_prove.py)",
    constants={"closure": FUN_K, "def": DEF_K0, "def per parameter": DEF_K1,
               "entry": ENV_ENTRY_W},
)

FAMILY_BOUNDED = Statement(
    name="family bounded",
    source="Efficient CHAD (Smeding & Vákár), §3 (Eq. (1) restricted to one family t_n)",
    informal="For a family of programs t_n with exact step-count formulas P(n) (program), "
             "G(n) (gradient), S(n) (size of the cotangent) and Γ(n) (parameters), some "
             "constants bound the gradient for every n.",
    formal=f"exists c, c' >= 0. forall n >= n0.  G(n) <= c * P(n) + c' + S(n) + {TH2_C2} * Γ(n)",
    checked_by="chad/costmodel/fit.py::decide_family (z3 over nonlinear real arithmetic), "
               "`chad check --family NAME`: sat with the smallest witness for the efficient "
               "transform, unsat for the naive ones",
)

OBSERVATIONS_COVERED = Statement(
    name="observations covered",
    source="TH2, instantiated on the measured programs",
    informal="The smallest c that makes every observed (P, G, S, n) satisfy the bound with "
             f"c' = {TH2_C1}, c'' = {TH2_C2}; TH2 says it is at most {TH2_C}.",
    formal=f"min {{ c >= 0 | for every observation: G <= {TH2_C1} + c * P + S + {TH2_C2} n }}",
    checked_by="chad/proofs/obligations.py::observations_obligation (the formula), its c "
               "minimised by chad/costmodel/fit.py::smallest_c (z3 Optimize), reported by "
               "`chad check`",
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
    CRITERION, CRITERION_GENERAL, TH1, TH2, TH2_FROM_TH1, RULE_STEP, FUN_STEP, FAMILY_BOUNDED,
    OBSERVATIONS_COVERED, ZEROS_CONSTANT, UNION_NOT_EFFICIENT, NAIVE_HO_EXPONENTIAL,
]}

__all__ = ["Statement", "STATEMENTS"] + [k for k in list(globals()) if k.isupper()]
