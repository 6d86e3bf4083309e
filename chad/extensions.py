"""Loads the extension packages, which register their rules in the extension
tables (costmodel.evaluate.RULES, chad.transform.efficient.RULES,
chad.transform.common.D2_EXTENSIONS, chad.cotangents.*, ...).

Imported at the bottom of the modules that own those tables, so that any use of
the evaluator or the transformation sees every rule.
"""

import chad.arrays  # noqa: F401
import chad.functions  # noqa: F401
