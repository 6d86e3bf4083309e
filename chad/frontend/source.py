"""Reading a Python function's source: the `ast` of its `def` from the whole
file (so line and column numbers are the file's own), and Python positions as
chad `Loc`s.

`inspect` gives the file and the first line of the function; the file is parsed
once (cached by name and contents) and the `def` found by its line. A function
whose source is not in a file (defined at the interactive prompt or by `exec`)
cannot be translated: the error says to put it in a file.
"""

from __future__ import annotations

import ast
import inspect
import linecache

from attrs import frozen

from chad.terms import Loc

from .errors import UnsupportedError


@frozen
class SourceFile:
    """A parsed Python file: its name, text and lines."""

    name: str
    text: str
    lines: tuple[str, ...]
    tree: ast.Module

    def loc(self, node: ast.AST) -> Loc:
        """The 1-based line and column (in characters) of an ast node."""
        line = getattr(node, "lineno", 1)
        offset = getattr(node, "col_offset", 0)
        text = self.lines[line - 1] if 1 <= line <= len(self.lines) else ""
        # ast columns are UTF-8 byte offsets; Loc columns count characters
        col = len(text.encode("utf-8")[:offset].decode("utf-8", "replace"))
        return Loc(self.name, line, col + 1)


_FILES: dict[tuple[str, str], SourceFile] = {}


def _read(name: str) -> SourceFile | None:
    lines = linecache.getlines(name)
    if not lines:
        return None
    text = "".join(lines)
    key = (name, text)
    if key not in _FILES:
        try:
            tree = ast.parse(text, filename=name)
        except SyntaxError:
            return None
        _FILES[key] = SourceFile(name, text, tuple(text.splitlines()), tree)
    return _FILES[key]


def function_source(fn) -> tuple[SourceFile, ast.FunctionDef]:
    """The file and the `def` node of the Python function fn."""
    code = getattr(fn, "__code__", None)
    if code is None or not inspect.isfunction(fn):
        raise UnsupportedError(f"chad.function takes a Python function defined with def, "
                               f"not {type(fn).__name__}")
    if fn.__name__ == "<lambda>":
        raise UnsupportedError("chad.function takes a function defined with def and annotated "
                               "parameters, not a lambda: write def f(x: float) -> float: ...",
                               _code_loc(code))
    name = code.co_filename
    src = _read(name)
    if src is None:
        raise UnsupportedError(f"the source of {fn.__qualname__} is not available (defined at "
                               "the prompt or by exec?): put it in a file and import it",
                               _code_loc(code))
    first = code.co_firstlineno
    for node in ast.walk(src.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == fn.__name__:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if start == first:
                if isinstance(node, ast.AsyncFunctionDef):
                    raise UnsupportedError("async functions are not supported: write a plain def",
                                           src.loc(node))
                return src, node
    raise UnsupportedError(f"the source of {fn.__qualname__} was not found in {name} "
                           "(was the file changed after it was imported?)", _code_loc(code))


def _code_loc(code) -> Loc:
    return Loc(code.co_filename, code.co_firstlineno, 1)
