"""Theorem statements of Efficient CHAD (Smeding & Vákár) as data (statements.py), the z3
obligations of the complexity checker (obligations.py), and the per-rule proofs of TH1's
inductive step behind `chad prove` (symbolic.py, rules.py, prover.py; docs/proofs.md).
See chad/proofs/README.md."""

from .statements import STATEMENTS, Statement  # noqa: F401
