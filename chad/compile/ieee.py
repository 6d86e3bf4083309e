"""IEEE arithmetic on numpy arrays without numpy's warnings.

The language's reals are IEEE doubles: inf + -inf is NaN, 1/0 is inf, with no
error (docs/language.md). numpy computes the same values but warns;
`np.errstate(all="ignore")` silences it, at about 1.7 µs per use (numpy 2.x,
this machine), which vectorised code (chad/compile/vectorise.py) pays several
times per call. `quiet()` is the same context at about a third of that: it sets
numpy's context variable of floating-point error handling to the "ignore"
state made once (numpy 2's own mechanism, thread- and re-entry-safe as
errstate); with a numpy without that variable it is np.errstate itself.
"""

from __future__ import annotations

import numpy as np

try:
    from numpy._core._ufunc_config import _extobj_contextvar as _VAR
    from numpy._core.umath import _make_extobj

    _IGNORE = _make_extobj(all="ignore")
except (ImportError, AttributeError, TypeError):  # numpy 1.x: its own errstate
    _VAR = None


class _Quiet:
    __slots__ = ("_token",)

    def __enter__(self):
        self._token = _VAR.set(_IGNORE)
        return self

    def __exit__(self, *exc) -> None:
        _VAR.reset(self._token)


def quiet():
    """A context in which numpy's floating-point errors are ignored (new each use)."""
    if _VAR is None:
        return np.errstate(all="ignore")
    return _Quiet()
