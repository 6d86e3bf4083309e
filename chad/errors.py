"""User-facing errors. Every error a user can cause is a `ChadError`.

The command line prints `str(err)` on stderr and exits 2 (1 for a violated bound).
An error with a location renders as

    file:line:col: error: one-line message
        the source line
            ^
"""

from __future__ import annotations


class ChadError(Exception):
    """Base class: bad input, never a bug. `loc` is a terms.Loc or None."""

    kind = "error"

    def __init__(self, message: str, loc=None, source: str | None = None):
        super().__init__(message)
        self.message = message
        self.loc = loc
        self.source = source

    def with_source(self, source: str | None) -> "ChadError":
        if self.source is None:
            self.source = source
        return self

    def __str__(self) -> str:
        if self.loc is None:
            return f"{self.kind}: {self.message}"
        head = f"{self.loc}: {self.kind}: {self.message}"
        if self.source is None:
            return head
        lines = self.source.splitlines()
        if not 1 <= self.loc.line <= len(lines):
            return head
        text = lines[self.loc.line - 1].expandtabs(1)
        caret = " " * (max(self.loc.col, 1) - 1) + "^"
        return f"{head}\n    {text}\n    {caret}"


class ParseError(ChadError):
    kind = "parse error"


class TypeCheckError(ChadError):
    kind = "type error"


class EvalError(ChadError):
    """A runtime error of the program: index out of range, fold of [], log of -1."""

    kind = "runtime error"


class UsageError(ChadError):
    """Bad command-line usage or bad JSON arguments / cotangents."""

    kind = "usage error"
