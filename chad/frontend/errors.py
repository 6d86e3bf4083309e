"""Errors of the Python front end: a construct outside the supported subset of
Python, reported at the Python file, line and column with what to write instead.

Every error here is a `ChadError` (chad/errors.py), rendered with the Python
source line and a caret under the offending column.
"""

from __future__ import annotations

from chad.errors import ChadError


class UnsupportedError(ChadError):
    """Python that the front end does not translate (or translates to an
    ill-typed program): the message says what is unsupported and what to write."""

    kind = "unsupported Python"


class FrontendTypeError(ChadError):
    """A type mismatch found while translating (e.g. adding a bool to a float)."""

    kind = "type error"
