"""The composition root: which transforms and extensions make up chad.

The core (terms, checker, transforms, evaluator, runtimes) never imports an
extension; it reads the tables of chad/tables.py. `load()` fills them, once per
process, by calling the `register()` of each transform and extension listed
here. The library API (chad/api.py) and the command line (chad/cli.py) call it
before any work; code that uses the layers directly (an evaluator, a transform)
calls `chad.features.load()` first.

To add a feature: write its package with a `register()` that uses chad/extend.py,
and add it to FEATURES below (docs/extending.md).
"""

from __future__ import annotations

import threading

from chad import arrays, functions, loops
from chad.transform import efficient, naive

# In order: the transforms first, then the extensions (which may add transforms).
FEATURES = (efficient, naive, arrays, functions, loops)

_lock = threading.Lock()
_loaded = False


def load() -> None:
    """Register every transform and extension (idempotent, thread-safe)."""
    global _loaded
    if _loaded:
        return
    with _lock:
        if _loaded:
            return
        for feature in FEATURES:
            feature.register()
        _loaded = True
