"""Chad names for Python identifiers: never a user string spliced unchecked.

A Python identifier keeps its spelling in the chad text when it is a valid chad
name (ASCII letters, digits and `_`) that is not a chad keyword (`sin`, `let`,
`sum`, ...) nor a def name of the program. Otherwise it gets a name that no
Python identifier can have, because it contains a prime: `sin'k` for the keyword
`sin` (`k` for keyword), `u'u3` for a non-ASCII identifier. Names the
translator invents (loop states, tuple temporaries) are `t'N`, and a local of a
lambda, nested def or comprehension is `x'N` (one counter N for both), also
primed. So the mapping is injective,
a generated name never captures a user's, and every chad name is checked
against the lexer's name pattern before it is emitted.
"""

from __future__ import annotations

import re

from chad.lexer import KEYWORDS

_ASCII_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_CHAD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_']*\Z")


class Names:
    """The chad names of one program's Python identifiers and temporaries."""

    def __init__(self, reserved: frozenset[str] = frozenset()):
        self.reserved = set(reserved)  # def names: a local never takes one
        self._unicode: dict[str, str] = {}
        self._temps = 0

    def local(self, ident: str) -> str:
        """The chad name of the Python identifier `ident`."""
        if _ASCII_NAME.match(ident):
            if ident in KEYWORDS or ident in self.reserved:
                return checked(ident + "'k")
            return ident
        if ident not in self._unicode:
            self._unicode[ident] = f"u'u{len(self._unicode) + 1}"
        return self._unicode[ident]

    def fresh(self, base: str) -> str:
        """A fresh variant of the chad name base: base'N (one counter for all)."""
        self._temps += 1
        return checked(f"{base}'{self._temps}")

    def temp(self) -> str:
        """A fresh name no Python identifier can have."""
        return self.fresh("t")


def def_name(ident: str, taken: set[str]) -> str:
    """A def name for the Python function `ident`, distinct from `taken`."""
    plain = _ASCII_NAME.match(ident) and ident not in KEYWORDS
    base = ident if _ASCII_NAME.match(ident) else "f"
    name, k = (ident if plain else base + "'d"), 1
    while name in taken:
        k += 1
        name = f"{base}'d{k}"
    return checked(name)


def checked(name: str) -> str:
    """name, after checking it is a chad name (an internal invariant)."""
    if not _CHAD_NAME.match(name) or name in KEYWORDS:
        raise AssertionError(f"not a chad name: {name!r}")
    return name
