"""The complexity experiments of docs/complexity-checker.md: `python -m experiments` (see
experiments/__main__.py and docs/complexity-checker.md)."""
