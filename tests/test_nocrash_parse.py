"""Any input either parses or raises ParseError: mutated valid programs, random text
and random bytes. What parses also prints and re-parses to the same program."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from chad import parser as parser_mod
from chad.deep import run_deep
from chad.errors import ParseError
from chad.lexer import KEYWORDS, SYMBOLS, tokenize
from chad.parser import MAX_DEPTH, parse_program
from chad.printer import print_program
from tests.strategies_syntax import surface_programs

run_deep(lambda: None)  # raise the recursion limit now, not inside a hypothesis test

SEEDS = [
    "def f(x : R) : R = x * x + sin x - 1.5e-3\n",
    ("# pairs, lets, comparisons\n"
     "def g(p : R * R, n : Z) : Bool =\n"
     "  let (a, b) = p in\n"
     "  let c = a / b in\n"
     "  if c <= toreal n then true else a == b\n"),
    ("def sq(x : R) : R = x * x\n"
     "def h(a : Array R, k : R) : R =\n"
     "  sum (map (\\x -> sq(x) * k) a) + fold (\\p -> fst p + snd p) a\n"
     "  + (build (length a) (\\(i : Z) -> toreal i) ! 0 : R) + sum (map exp' a)\n"),
    ("def s(v : R + (), f : R -> R) : R =\n"
     "  case v of { inl x -> f (-x) | inr u -> tanh (sqrt (log (cos 2.0))) }\n"
     "  + (\\y -> y) 1.0 + exp (snd (1, 2.0))\n"),
    ("def u(x : R) : R + Z = inl x\n"
     "def w(m : Array (Array Z), b : Bool) : () = let q = sign (toreal (m ! 0 ! 1)) in ()\n"),
]
STRUCTURE = {"(", ",", "=", "in", "then", "else", "->", "of", "{", "|", "}", ":", "\\", "+",
             "*", "<", "!", "let", "if", "case", "build", "fold", "map", "fst", "def"}
VOCAB = sorted(KEYWORDS) + list(SYMBOLS) + [
    "x", "p_1", "g", "sq", "R", "Z", "Array", "Bool", "()", "0", "1.0", "1e5", "2.5e-300",
    "#", "\n", "$", "λ", "1.", ".5", "1e", "3x", "'", "\x00", "\ud800", "\r\n", "(((", ")))"]


def check_input(text) -> None:
    """The property: ParseError (not internal) or a program that round-trips."""
    try:
        p = parse_program(text, "m.chad")
    except ParseError as e:
        assert not getattr(e, "internal", False), e.message
        rendered = str(e)  # renders without failing
        rendered.encode("utf-8")
        if e.loc is not None:
            assert e.loc.line >= 1 and e.loc.col >= 1 and e.loc.file == "m.chad"
        return
    printed = print_program(p)
    again = parse_program(printed, "m.chad")
    same = (again == p) if len(printed) < 2000 else run_deep(lambda: again == p)
    assert same, printed


def token_texts(src: str) -> list[str]:
    return [t.text for t in tokenize(src)[:-1]]


@st.composite
def mutated_programs(draw):
    """A valid program (a seed, or a generated one, printed), then a few edits of
    its tokens, of its characters or of its bytes."""
    if draw(st.booleans()):
        src = draw(st.sampled_from(SEEDS))
    else:
        src = print_program(draw(surface_programs(max_defs=2)))
    kind = draw(st.sampled_from(["tokens", "tokens", "chars", "bytes"]))
    if kind == "tokens":
        toks = token_texts(src)
        for _ in range(draw(st.integers(1, 4))):
            op = draw(st.sampled_from(["cut", "cut", "delete1", "delete", "insert", "swap",
                                       "replace", "duplicate"]))
            i = draw(st.integers(0, max(len(toks) - 1, 0)))
            j = draw(st.integers(i, min(i + 5, len(toks))))
            if op == "cut":  # delete 1-3 tokens right after a structural token
                marks = [k for k, t in enumerate(toks) if t in STRUCTURE]
                if marks:
                    k = marks[draw(st.integers(0, len(marks) - 1))] + 1
                    del toks[k:k + draw(st.integers(1, 3))]
            elif op == "delete1":
                del toks[i:i + 1]
            elif op == "delete":
                del toks[i:j]
            elif op == "insert":
                toks.insert(i, draw(st.sampled_from(VOCAB)))
            elif op == "replace" and toks:
                toks[i] = draw(st.sampled_from(VOCAB))
            elif op == "swap" and j < len(toks):
                toks[i], toks[j] = toks[j], toks[i]
            elif op == "duplicate":
                toks[i:i] = toks[i:j]
        return " ".join(toks)
    if kind == "chars":
        text = src
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(text)))
            op = draw(st.sampled_from(["insert", "delete", "truncate"]))
            if op == "insert":
                text = text[:i] + draw(st.text(min_size=1, max_size=3)) + text[i:]
            elif op == "delete":
                text = text[:i] + text[i + draw(st.integers(1, 8)):]
            else:
                text = text[:i]
        return text
    data = bytearray(src.encode("utf-8"))
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(data)))
        data[i:i] = draw(st.binary(min_size=1, max_size=3))
    return bytes(data)


SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def test_seeds_parse_and_roundtrip():
    for src in SEEDS:
        p = parse_program(src)
        assert p.defs
        check_input(src)


@SETTINGS
@given(mutated_programs())
def test_mutated_programs_do_not_crash(text):
    check_input(text)


EDIT_TOKENS = [")", ",", "in", "x"]


def single_edits(src: str):
    """Every truncation, every deletion of one token and every replacement and
    insertion of one token from EDIT_TOKENS: near misses of a valid program."""
    toks = token_texts(src)
    for i in range(len(toks) + 1):
        yield toks[:i]
        if i < len(toks):
            yield toks[:i] + toks[i + 1:]
        for t in EDIT_TOKENS:
            yield toks[:i] + [t] + toks[i:]
            if i < len(toks):
                yield toks[:i] + [t] + toks[i + 1:]


def test_systematic_edits_do_not_crash():
    for src in SEEDS[2:4]:  # the two richest seeds
        for toks in single_edits(src):
            check_input(" ".join(toks))


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.text(), st.binary(), st.text(alphabet="()\\->=+*:!,{}|#x1.e ")))
def test_random_input_does_not_crash(text):
    check_input(text)


@pytest.mark.parametrize("text", [
    "def f() : R = " + "(" * 2_000, ")" * 10, "def f() : R = " + "-" * 2_000 + "x",
    "def f(x : " + "(" * 2_000 + "R", "def f(x : R) : R = " + "fst " * 2_000 + "x",
    "def f() : R = " + "9" * 5000, "def f() : R = 1e999", "\ud800", "def", "def f",
    "def f(", "def f()", "def f() :", "def f() : R", "def f() : R =", "\r\n\r",
])
def test_edge_inputs(text):
    check_input(text)


@pytest.mark.long
def test_nesting_at_the_limit_is_a_parse_error_not_a_recursion_error():
    # the most frames per level: a parenthesis in the right operand of *, +, <
    text = "def f(a : R) : R = " + "a < a + a * (" * (MAX_DEPTH + 1) + "a"
    with pytest.raises(ParseError, match="nested too deeply"):
        parse_program(text)


def test_the_property_catches_a_parser_crash(monkeypatch):
    """Inject an IndexError into the parser (on the token '*'): the property must fail."""
    original = parser_mod._Parser.advance

    def broken(self):
        if self.tok.text == "*":
            [][0]
        return original(self)

    monkeypatch.setattr(parser_mod._Parser, "advance", broken)
    with pytest.raises(AssertionError, match="internal error in the parser"):
        check_input("def f(a : R) : R = a * a")

    @settings(max_examples=1000, database=None, deadline=None, phases=[Phase.generate],
              derandomize=True, suppress_health_check=list(HealthCheck))
    @given(mutated_programs())
    def prop(text):
        check_input(text)

    with pytest.raises(AssertionError, match="internal error in the parser"):
        prop()


def test_systematic_edits_catch_a_parser_crash(monkeypatch):
    """A bug on a rarer path: an IndexError on a pair with a missing component."""
    original = parser_mod._Parser.expr

    def broken(self):
        if self.tok.text == ")" and self.toks[self.i - 1].text == ",":
            [][0]
        return original(self)

    monkeypatch.setattr(parser_mod._Parser, "expr", broken)
    with pytest.raises(AssertionError, match="internal error in the parser"):
        test_systematic_edits_do_not_crash()
