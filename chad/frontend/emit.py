"""Chad text with a position map back to the Python source.

The translator builds the chad program as a tree of fragments, each tagged with
the Python position it comes from. `render` turns the tree into text and
remembers, for every character, the innermost fragment's Python position.
After the text is parsed, `relocate` replaces every term's chad position with
that Python position, so the type checker's errors (and runtime errors, which
carry the term's position) name the Python file, line and column.
"""

from __future__ import annotations

import attrs

from chad.deep import run_deep
from chad.terms import Def, Loc, Param, Program, children, rebuild


class Frag:
    """Text pieces (str or Frag) from one Python position (or None: inherit)."""

    __slots__ = ("parts", "loc")

    def __init__(self, parts, loc: Loc | None = None):
        self.parts = parts
        self.loc = loc


def frag(loc: Loc | None, *parts) -> Frag:
    return Frag(list(parts), loc)


def join(sep: str, items) -> list:
    out: list = []
    for i, x in enumerate(items):
        if i:
            out.append(sep)
        out.append(x)
    return out


class Rendered:
    """The text of a fragment tree and the Python position of each character."""

    def __init__(self, root: Frag, default: Loc):
        self.chunks: list[str] = []
        self.owner: list[Loc] = []
        self._walk(root, root.loc or default)
        self.text = "".join(self.chunks)
        starts, n = [], 0
        for line in self.text.split("\n"):
            starts.append(n)
            n += len(line) + 1
        self.line_starts = starts

    def _walk(self, f: Frag, loc: Loc) -> None:
        stack = [(f, loc)]
        while stack:
            item, at = stack.pop()
            if isinstance(item, str):
                self.chunks.append(item)
                self.owner.extend([at] * len(item))
                continue
            here = item.loc or at
            for p in reversed(item.parts):
                stack.append((p, here))

    def python_loc(self, loc: Loc | None) -> Loc | None:
        if loc is None or not 1 <= loc.line <= len(self.line_starts):
            return None
        i = self.line_starts[loc.line - 1] + loc.col - 1
        return self.owner[i] if 0 <= i < len(self.owner) else None


def relocate(program: Program, rendered: Rendered) -> Program:
    """The program with every chad position replaced by its Python position."""
    memo: dict[int, object] = {}

    def term(t):
        key = id(t)
        if key in memo:
            return memo[key]
        new = rebuild(t, [term(c) for c in children(t)])
        loc = rendered.python_loc(t.loc)
        if loc is not None:
            new = attrs.evolve(new, loc=loc)
        memo[key] = new
        return new

    defs = []
    for d in program.defs:
        params = tuple(Param(p.name, p.ty, rendered.python_loc(p.loc)) for p in d.params)
        body = run_deep(term, d.body)
        defs.append(Def(d.name, params, d.result, body, rendered.python_loc(d.loc)))
    return Program(tuple(defs), None, program.file)
