"""The complexity experiments of issue 6: `python -m experiments` (see
experiments/__main__.py and docs/complexity-checker.md)."""
