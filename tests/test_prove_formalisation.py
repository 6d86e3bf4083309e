"""The per-rule constants of `chad prove` on the formalisation's fragment agree
with the formalisation's own lemmas (Efficient CHAD (Smeding & Vákár), appendix B;
the Agda development efficient-chad-agda, `lemmas.agda`).

tests/data/efficient_chad_agda_lemmas.txt holds the type signatures of the
lemmas, quoted from the formalisation. Each is parsed into z3 (hypotheses and
goal, integers), every literal 34 (TH1's constant) replaced by a variable C, and
the smallest C for which z3 proves the lemma is compared with the smallest
constant chad/proofs/prover.py finds for the corresponding rule of the project.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import z3

import chad.features  # noqa: F401  (registers the extensions)
from chad.proofs.prover import min_constant
from chad.proofs.rules import core_rules, obligations
from chad.proofs.statements import TH1_C

LEMMAS = Path(__file__).parent / "data" / "efficient_chad_agda_lemmas.txt"

_TOKEN = re.compile(r"\s*(\(|\)|≤|≡|->|\+|-|\*|:|[^\s()]+)")


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        out.append(m.group(1))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, toks, C):
        self.toks, self.i, self.C = toks, 0, C

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, expect=None):
        t = self.toks[self.i]
        if expect is not None and t != expect:
            raise ValueError(f"expected {expect}, got {t} at {self.i}")
        self.i += 1
        return t

    def expr(self):
        e = self.prod()
        while self.peek() == "+":
            self.take()
            e = e + self.prod()
        return e

    def prod(self):
        e = self.unary()
        while self.peek() == "*":
            self.take()
            e = e * self.unary()
        return e

    def unary(self):
        t = self.take()
        if t == "+":
            return self.unary()
        if t == "-":
            return -self.unary()
        if t == "(":
            e = self.expr()
            self.take(")")
            return e
        if t.isdigit():
            return self.C if int(t) == TH1_C else z3.IntVal(int(t))
        return z3.Int(t)

    def relation(self):
        a = self.expr()
        op = self.take()
        b = self.expr()
        return a <= b if op == "≤" else a == b


def parse_lemma(line: str, C):
    """(name, hypotheses, goal) of one lemma signature, 34 read as C."""
    name, _, sig = line.strip().partition(" : ")
    p = _Parser(_tokens(sig), C)
    hyps = []
    while p.peek() == "(":
        p.take("(")
        p.take()          # the binder's name
        p.take(":")
        if p.peek() in ("ℤ", "_"):
            p.take()
        else:
            hyps.append(p.relation())
        p.take(")")
    p.take("->")
    return name, hyps, p.relation()


def formalisation_constant(line: str) -> int:
    """The smallest C for which the lemma (with 34 replaced by C) is valid."""

    def valid(c: int) -> bool:
        _, hyps, goal = parse_lemma(line, z3.IntVal(c))
        s = z3.Solver()
        s.add(*hyps, z3.Not(goal))
        return s.check() == z3.unsat

    assert valid(TH1_C)  # the formalisation's lemma as stated
    lo, hi = -1, TH1_C  # valid(hi); not valid(lo) (or lo = -1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if valid(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _lemmas() -> dict[str, str]:
    return {ln.split(" : ")[0].strip(): ln for ln in LEMMAS.read_text().splitlines() if ln.strip()}


# formalisation lemma -> (project rule, the label of the path it covers)
CORRESPONDENCE = {
    "lemma-var": ("var", ""),
    "lemma-unit": ("unit", ""),
    "lemma-let": ("let", ""),
    "lemma-prim": ("prim", ""),
    "lemma-fst": ("fst", ""),
    "lemma-snd": ("snd", ""),
    "lemma-pair-nothing": ("pair", "zero"),
    "lemma-pair-just": ("pair", "pair"),
    "lemma-inl-nothing": ("inl", "zero"),
    "lemma-inl-inj1": ("inl", "inl"),
    "lemma-inl-inj2": ("inl", "inr"),
    "lemma-case-1": ("case", "e1 is inl"),
}


@pytest.fixture(scope="module")
def project_constants() -> dict:
    out = {}
    wanted = {rule for rule, _ in CORRESPONDENCE.values()}
    for spec in core_rules():
        if spec.name not in wanted:
            continue
        for ob in obligations(spec):
            out[(spec.name, ob.label)] = min_constant(ob)
    return out


def test_the_parser_reads_every_lemma_and_each_holds_at_34():
    lemmas = _lemmas()
    assert set(CORRESPONDENCE) <= set(lemmas)
    for name in CORRESPONDENCE:
        assert formalisation_constant(lemmas[name]) <= TH1_C


def test_a_lemma_with_a_weakened_hypothesis_needs_more():
    """The parser reads hypotheses: dropping lemma-prim's lem3 bound to 13
    lowers the constant by one, raising it to 15 raises it."""
    line = _lemmas()["lemma-prim"]
    base = formalisation_constant(line)
    assert formalisation_constant(line.replace("≤ + 14)", "≤ + 13)")) == base - 1
    assert formalisation_constant(line.replace("≤ + 14)", "≤ + 15)")) == base + 1


@pytest.mark.parametrize("lemma", sorted(CORRESPONDENCE))
def test_rule_constant_agrees_with_the_formalisation(lemma, project_constants):
    rule, label = CORRESPONDENCE[lemma]
    assert project_constants[(rule, label)] == formalisation_constant(_lemmas()[lemma])
