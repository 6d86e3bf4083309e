"""z3 fitting (chad/costmodel/fit.py, chad/proofs/obligations.py): smallest constants over
observations, exact closed forms, family verdicts (TH2 from TH1: tests/test_obligations.py)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from chad.costmodel.criterion import Measurement
from chad.costmodel.fit import (
    ClosedForm, FitError, decide_family, fit_exact, joint_fit, smallest_c,
)

ROWS = [(1, 30, 1, 1), (5, 120, 3, 2), (10, 190, 1, 1), (3, 110, 2, 4), (40, 700, 9, 3)]


def _brute_c(rows, c1=5, c2=4):
    return max(0, max(math.ceil((g - c1 - s - c2 * n) / p) for p, g, s, n in rows))


def test_smallest_c_matches_brute_force():
    fit = smallest_c([Measurement(*r) for r in ROWS])
    assert fit.c == _brute_c(ROWS) and (fit.c1, fit.c2) == (5, 4)
    assert fit.observations == len(ROWS)
    # c - 1 no longer covers every observation
    assert any(g > 5 + (fit.c - 1) * p + s + 4 * n for p, g, s, n in ROWS)


def test_smallest_c_with_other_fixed_constants_and_plain_rows():
    assert smallest_c(ROWS, c1=0, c2=0).c == _brute_c(ROWS, 0, 0)


def test_joint_fit_covers_every_observation_and_is_minimal():
    fit = joint_fit(ROWS)
    assert all(g <= fit.c1 + fit.c * p + s + fit.c2 * n for p, g, s, n in ROWS)
    best = min(c + c1 + c2 for c in range(0, 40) for c1 in range(0, 40) for c2 in range(0, 40)
               if all(g <= c1 + c * p + s + c2 * n for p, g, s, n in ROWS))
    assert fit.c + fit.c1 + fit.c2 == best
    lex = joint_fit(ROWS, "lexicographic")
    assert lex.c == 0  # c' and c'' can absorb everything when primal, |Γ| >= 1


def test_fit_exact_polynomials():
    ns = [1, 2, 3, 4, 5, 6]
    f = fit_exact(ns, [4 * n * n + 57 * n - 38 for n in ns], [10], [4 * 100 + 570 - 38])
    assert str(f) == "4*n^2 + 57*n - 38"
    assert f(20) == 4 * 400 + 57 * 20 - 38
    assert fit_exact([1, 2, 3], [7, 7, 7]).terms == (("1", Fraction(7)),)
    half = fit_exact([1, 2, 3, 4], [Fraction(3 * n, 2) + 1 for n in [1, 2, 3, 4]])
    assert str(half) == "(3/2)*n + 1"


def test_fit_exact_exponential():
    ns = list(range(1, 9))
    ys = [Fraction(5, 2) * n * 2 ** n + Fraction(87, 2) * 2 ** n - 75 for n in ns]
    f = fit_exact(ns, ys, [10, 12], [Fraction(5, 2) * n * 2 ** n + Fraction(87, 2) * 2 ** n - 75
                                     for n in (10, 12)])
    assert f.exponential and str(f) == "(5/2)*n*2^n + (87/2)*2^n - 75"


def test_fit_exact_rejects_what_the_held_back_points_contradict():
    ns = [1, 2, 3, 4]
    with pytest.raises(FitError):
        # linear on the training points, not at the held-back one
        fit_exact(ns, [2 * n + 1 for n in ns], [8], [100])
    with pytest.raises(FitError):
        fit_exact([1, 2, 3, 4, 5], [1, 10, 3, 70, 2])  # no model of the list


def test_a_fit_needs_more_points_than_coefficients():
    with pytest.raises(FitError):
        fit_exact([1, 2], [3, 7])  # a line through two points is not a fit


def _cf(**terms) -> ClosedForm:
    names = {"one": "1", "n": "n", "n2": "n^2", "p2": "2^n", "np2": "n*2^n"}
    return ClosedForm(tuple((names[k], Fraction(v)) for k, v in terms.items()))


def test_decide_bounded_with_the_smallest_witness():
    v = decide_family(_cf(n=3, one=-2), _cf(n=59, one=-42), _cf(one=1), _cf(n=1), n0=2)
    assert v.status == "bounded" and v.z3_result == "sat"
    c, c1 = v.witness
    assert (c, c1) == (19, 0)
    # c = 18 fails for every c': 59n - 42 > 18(3n - 2) + c' + 1 + 4n once n > c' + 7
    n, c_prime = 10**6, 10**5
    assert 59 * n - 42 > 18 * (3 * n - 2) + c_prime + 1 + 4 * n


def test_decide_refuted_quadratic():
    v = decide_family(_cf(n=3, one=-2), _cf(n2=4, n=42, one=-36), _cf(one=1), _cf(n=1), n0=2)
    assert v.status == "refuted" and v.z3_result == "unsat" and v.witness is None


def test_decide_refuted_exponential_by_binomial_lower_bound():
    v = decide_family(_cf(n=3, one=-2), _cf(np2=Fraction(5, 2), p2=Fraction(87, 2), one=-75),
                      _cf(one=1), _cf(one=1), n0=1)
    assert v.status == "refuted"
    assert "binomial" in v.method


def test_decide_bounded_exponential_on_both_sides():
    v = decide_family(_cf(p2=1), _cf(p2=3, one=5), _cf(one=1), _cf(one=1), n0=1)
    assert v.status == "bounded"
