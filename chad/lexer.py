"""The lexer of the source language (docs/language.md): text -> list of tokens.

Tokens are names, keywords, integer and real literals, and the symbols

    ( ) [ ] , : = -> \\ { } | + - * / ** ! < <= > >= == != && ||

Whitespace separates tokens; `#` starts a comment that runs to the end of the
line. Line breaks are exactly those of `str.splitlines` (\\n, \\r\\n, \\r, \\v, \\f,
\\x1c-\\x1e, \\x85, \\u2028, \\u2029), so that the line numbers of errors match the
source line that `ChadError` shows under the message. Columns count characters
(a tab is one column), 1-based.

Every problem is a `ParseError` with the position of the offending character:
an unknown character, a garbled number (`1.`, `1e`, `3x`, `1.2.3`), a real
literal too large for a float.
"""

from __future__ import annotations

import math
import re

from .errors import ParseError
from .terms import Loc

# Keywords: none of these is a name. Type names (R, Z, Bool, Array) are NOT
# keywords: they are names with a meaning only where a type is expected.
PREFIX1 = {  # one-argument prefix forms -> Prim op (None: a node of its own)
    "fst": None, "snd": None, "inl": None, "inr": None, "length": None,
    "sign": "SIGN", "toreal": "TOREAL", "exp": "EXP", "log": "LOG", "sin": "SIN",
    "cos": "COS", "tanh": "TANH", "sqrt": "SQRT", "sum": "SUM", "floor": "FLOOR",
    "abs": "ABS", "atan": "ATAN", "log1p": "LOG1P", "not": "NOT",
}
PREFIX2 = ("build", "fold", "map", "iter", "scan")
CALL2 = {"max": "MAX", "min": "MIN", "div": "IDIV", "mod": "IMOD"}  # built-in f(a, b) -> Prim op
KEYWORDS = frozenset({
    "def", "let", "in", "case", "of", "if", "then", "else", "true", "false",
    *PREFIX1, *PREFIX2, *CALL2,
})
SYMBOLS = ("->", "<=", ">=", "==", "!=", "**", "&&", "||", "(", ")", "[", "]", ",", ":", "=", "\\", "{", "}", "|",
           "+", "-", "*", "/", "!", "<", ">")

NAME, INT, REAL, KW, SYM, EOF = "name", "int", "real", "keyword", "symbol", "end"

_NL_CHARS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
_NAME_FULL_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_']*\Z")
# The maximal run of characters that belong to a number token (a sign only right
# after an exponent letter), checked afterwards against the real grammar.
_NUMRUN_RE = re.compile(r"[0-9](?:[A-Za-z0-9_'.]|(?<=[eE])[+-])*")
_INT_RE = re.compile(r"[0-9]+\Z")
_REAL_RE = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?\Z")

# Two-character sequences that are never valid, with a hint.
_BAD_PAIRS = {
    "=>": "'=>' is not an operator; did you mean '->'?",
    ":=": "':=' is not an operator; bind a name with `let x = e in ...`",
}
_HINTS = {
    "\u03bb": "write a lambda as \\x -> e",
    "'": "a name cannot start with a quote",
    '"': "the language has no strings",
    ";": "there are no statements; chain bindings with `let x = e in ...`",
    "%": "there is no '%' operator; the remainder is mod(i, j)",
    "^": "there is no '^' operator; the power is x ** y",
    "&": "the conjunction is '&&'",
    ".": "there is no '.' operator; use fst / snd for pairs and a ! i for arrays",
}


class Token:
    __slots__ = ("kind", "text", "line", "col", "loc")

    def __init__(self, kind: str, text: str, line: int, col: int):
        self.kind, self.text, self.line, self.col = kind, text, line, col
        self.loc = None  # the parser's Loc, made on first use

    def __repr__(self) -> str:
        return f"Token({self.kind}, {self.text!r}, {self.line}:{self.col})"

    def describe(self) -> str:
        """How an error message refers to this token."""
        if self.kind == EOF:
            return "end of input"
        text = self.text if len(self.text) <= 24 else self.text[:21] + "..."
        return f"'{text}'"


def is_name(s: str) -> bool:
    """True when s can be written as a variable name (valid and not a keyword)."""
    return isinstance(s, str) and bool(_NAME_FULL_RE.match(s)) and s not in KEYWORDS


def describe_char(c: str) -> str:
    """A character for an error message; escapes anything that is not plain ASCII."""
    code = f"U+{ord(c):04X}"
    if " " < c < "\x7f":
        return f"'{c}'"
    if c.isprintable() and not ("\ud800" <= c <= "\udfff"):
        return f"'{c}' ({code})"
    return f"{ascii(c)} ({code})"


def error_source(text: str) -> str:
    """The source an error shows: lone surrogates (not encodable) become '?'."""
    return re.sub("[\ud800-\udfff]", "?", text)


_MASTER_RE = re.compile(
    r"[ \t]*(?:(?P<end>\Z)"
    r"|(?P<nl>\r\n|[" + _NL_CHARS + r"])"
    r"|(?P<com>#[^" + _NL_CHARS + r"]*)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_']*)"
    r"|(?P<num>[0-9](?:[A-Za-z0-9_'.]|(?<=[eE])[+-])*)"
    r"|(?P<bad>=>|:=)"
    r"|(?P<sym>" + "|".join(re.escape(s) for s in SYMBOLS) + "))")


def tokenize(text: str, file: str = "<input>") -> list[Token]:
    """The tokens of `text`, ending with one EOF token."""
    toks: list[Token] = []
    append = toks.append
    match = _MASTER_RE.match
    keywords = KEYWORDS
    i, n = 0, len(text)
    line, line_start = 1, 0

    def fail(message: str, at: int):
        raise ParseError(message, Loc(file, line, at - line_start + 1), error_source(text))

    while i < n:
        m = match(text, i)
        if m is None:
            while text[i] in " \t":
                i += 1
            c = text[i]
            if c == "." and i + 1 < n and "0" <= text[i + 1] <= "9":
                fail("a real literal needs a digit before the '.': write 0" + _NUMRUN_RE.match(
                    "0" + text[i:i + 20]).group()[1:], i)
            hint = _HINTS.get(c)
            fail(f"unknown character {describe_char(c)}" + (f"; {hint}" if hint else ""), i)
        kind = m.lastgroup
        j = m.end()
        if kind == "name":
            word = m.group(kind)
            append(Token(KW if word in keywords else NAME, word, line,
                         m.start(kind) - line_start + 1))
        elif kind == "sym":
            append(Token(SYM, m.group(kind), line, m.start(kind) - line_start + 1))
        elif kind == "nl":
            line, line_start = line + 1, j
        elif kind == "num":
            at = m.start(kind)
            append(Token(*_number(m.group(kind), lambda msg: fail(msg, at)), line,
                         at - line_start + 1))
        elif kind == "bad":
            fail(_BAD_PAIRS[m.group(kind)], m.start(kind))
        i = j
    if toks:
        last = toks[-1]
        append(Token(EOF, "", last.line, last.col + len(last.text)))
    else:
        append(Token(EOF, "", 1, 1))
    return toks


def _number(run: str, fail) -> tuple[str, str]:
    """Classify a number-like run of characters as (INT | REAL, text), or fail."""
    if _INT_RE.match(run):
        return INT, run
    if _REAL_RE.match(run):
        value = float(run)
        if math.isinf(value):
            # the same range rule as for numbers in JSON (chad/values.py)
            fail(f"the real literal {_short(run)} is too large for a float "
                 "(the largest is about 1.8e308); a program has no literal for an infinity")
        return REAL, run
    # Find the longest valid prefix to explain what went wrong.
    m = re.match(r"[0-9]+", run)
    rest = run[m.end():]
    if rest.startswith(".") and not rest[1:2].isdigit():
        fail(f"garbled number {_short(run)}: a real literal needs digits after the '.' "
             f"(write {m.group()}.0)")
    frac = re.match(r"[0-9]+(?:\.[0-9]+)?", run)
    rest = run[frac.end():]
    if rest[:1] in ("e", "E"):
        e = re.match(r"[eE][+-]?[0-9]+", rest)
        if e is None:
            fail(f"garbled number {_short(run)}: the exponent needs digits, e.g. 1e-3")
        rest = rest[e.end():]
    if rest.startswith("."):
        fail(f"garbled number {_short(run)}: a number has at most one '.'")
    fail(f"garbled number {_short(run)}: a name cannot start with a digit; "
         "put a space between a number and a name")


def _short(s: str) -> str:
    return f"'{s}'" if len(s) <= 24 else f"'{s[:21]}...'"
