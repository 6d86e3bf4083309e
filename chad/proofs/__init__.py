"""Theorem statements of Efficient CHAD (Smeding & Vákár) as data (statements.py) and the z3
obligations of the complexity checker (obligations.py). See chad/proofs/README.md."""

from .statements import STATEMENTS, Statement  # noqa: F401
