"""Any input either parses or raises ParseError: mutated valid programs, random text
and random bytes. What parses also prints and re-parses to the same program."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from chad import parser as parser_mod
from chad.deep import run_deep
from chad.errors import ParseError
from chad.lexer import KEYWORDS, SYMBOLS, tokenize
from chad.parser import parse_program
from chad.printer import print_program

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
    assert run_deep(lambda: again == p), printed


def token_texts(src: str) -> list[str]:
    return [t.text for t in tokenize(src)[:-1]]


@st.composite
def mutated_programs(draw):
    src = draw(st.sampled_from(SEEDS))
    kind = draw(st.sampled_from(["tokens", "chars", "bytes"]))
    if kind == "tokens":
        toks = token_texts(src)
        for _ in range(draw(st.integers(1, 4))):
            op = draw(st.sampled_from(["delete", "insert", "swap", "replace", "duplicate"]))
            i = draw(st.integers(0, max(len(toks) - 1, 0)))
            j = draw(st.integers(i, min(i + 5, len(toks))))
            if op == "delete":
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


SETTINGS = settings(max_examples=200, deadline=None,
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


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.text(), st.binary(), st.text(alphabet="()\\->=+*:!,{}|#x1.e ")))
def test_random_input_does_not_crash(text):
    check_input(text)


@pytest.mark.parametrize("text", [
    "def f() : R = " + "(" * 25_000, ")" * 10, "def f() : R = " + "-" * 25_000 + "x",
    "def f(x : " + "(" * 25_000 + "R", "def f(x : R) : R = " + "fst " * 25_000 + "x",
    "def f() : R = " + "9" * 5000, "def f() : R = 1e999", "\ud800", "def", "def f",
    "def f(", "def f()", "def f() :", "def f() : R", "def f() : R =", "\r\n\r",
])
def test_edge_inputs(text):
    check_input(text)


def test_the_property_catches_a_parser_crash(monkeypatch):
    """Inject an IndexError into the parser (on the token '!'): the property must fail."""
    original = parser_mod._Parser.advance

    def broken(self):
        if self.tok.text == "!":
            [][0]
        return original(self)

    monkeypatch.setattr(parser_mod._Parser, "advance", broken)
    with pytest.raises(AssertionError, match="internal error in the parser"):
        check_input("def f(a : Array R) : R = a ! 0")

    def fails(text):
        try:
            check_input(text)
        except AssertionError:
            return True
        return False

    bad = find(mutated_programs(), fails,
               settings=settings(max_examples=500, database=None, deadline=None))
    assert fails(bad)
