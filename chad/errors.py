"""User-facing errors. Every error a user can cause is a `ChadError`.

The command line prints `str(err)` on stderr and exits 2 (1 for a violated bound).
An error with a location renders as

    file:line:col: error: one-line message
        the source line
            ^

The file name and the source line are shown with their control characters
escaped (`escape_control`): an error message never carries a terminal escape
sequence, a bell or a bidi override to the user's terminal.
"""

from __future__ import annotations

import unicodedata

# Unicode categories that are escaped: Cc (C0 and C1 controls, DEL), Cf (format:
# bidi overrides, zero-width characters), Cs (lone surrogates), Zl and Zp (line
# and paragraph separators), Cn (unassigned).
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp", "Cn"})
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def escape_control(text: str, keep: str = "") -> str:
    """text with every control, format or separator character (except those in
    `keep`) written as a Python escape: \\t, \\x1b, \\u202e, \\U000e0001."""
    if text.isprintable() and not keep:
        return text  # the common case: nothing to escape
    out = []
    for c in text:
        if c in keep or unicodedata.category(c) not in _ESCAPED_CATEGORIES:
            out.append(c)
        else:
            n = ord(c)
            out.append(_SHORT.get(c) or (f"\\x{n:02x}" if n < 0x100 else
                                         f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"))
    return "".join(out)


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
        message = escape_control(self.message, keep="\n")
        if self.loc is None:
            return f"{self.kind}: {message}"
        head = f"{escape_control(str(self.loc))}: {self.kind}: {message}"
        if self.source is None:
            return head
        lines = self.source.splitlines()
        if not 1 <= self.loc.line <= len(lines):
            return head
        line = lines[self.loc.line - 1].expandtabs(1)
        col = max(self.loc.col, 1) - 1
        # the caret under the same character once the line is escaped
        caret = " " * len(escape_control(line[:col])) + "^"
        return f"{head}\n    {escape_control(line)}\n    {caret}"


class ParseError(ChadError):
    kind = "parse error"


class TypeCheckError(ChadError):
    kind = "type error"


class EvalError(ChadError):
    """A runtime error of the program: index out of range, fold of [], div(1, 0)."""

    kind = "runtime error"


class UsageError(ChadError):
    """Bad command-line usage or bad JSON arguments / cotangents."""

    kind = "usage error"
