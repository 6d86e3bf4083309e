"""chad: Efficient CHAD reverse-mode AD for a small typed functional language.

Pipeline (one module per layer): parser -> checker -> transform -> evaluate.
The public API (grad, vjp, cost, parse, check, run) is re-exported from api.py.
"""
