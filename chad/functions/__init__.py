"""Functions: lambdas, application and def calls (seed 000 §9, appendix C).
Importing this package registers their rules."""
