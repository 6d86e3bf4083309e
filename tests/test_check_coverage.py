"""What `chad check`'s programs reach (chad/costmodel/coverage.py, the rich
generators of chad/costmodel/generators.py, `chad check --stats`;
docs/complexity-checker.md)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, Phase, given, seed, settings

from chad.api import load
from chad.cli import main
from chad.costmodel.coverage import FEATURES, LARGE, SHARED, coverage, features_of, trace
from chad.costmodel.criterion import check_strategy
from chad.costmodel.generators import CHAIN_BUDGET, chains
from chad.costmodel.measure import run_primal


def _features(text: str, args):
    prog = load(text)
    return features_of(prog, trace(prog, args))


def test_each_feature_is_recognised_and_exercised():
    text = """
def g(y : R) : R = y * 2.0

def f(x : R, a : Array R, k : Z) : R =
  let s = x + x + x + x + x + x + x + x + x + x in
  let h = \\(y : R) -> sin y in
  let b = map (\\z -> h z) (map (\\z -> z * x) a) in
  let c = build 12 (\\i -> toreal (floor x * i + length a)) in
  let m = fold (\\p -> fst p * snd p + fst p) c in
  let q = case sign x of { inl t -> (case t of { inl u -> 1.0 | inr v -> 2.0 }) | inr w -> 0.5 } in
  let r = (inl x : R + R) in
  let e = case r of { inl v -> v | inr w -> w } in
  let l = [x, 2.0] ! 1 in
  let w = max(x, 0.25) ** 2.0 + iter 3 (\\st -> st * 0.5 + x) x
          + sum (scan (\\p -> fst p * 0.5 + snd p) x a) in
  if x < 2.0 && not (k < 0) then g(s) + sum b + m + q + e + l + w + fold (\\p -> fst p + snd p) a else 0.0
"""
    contained, exercised = _features(text, [0.5, [1.0, 2.0, 3.0], 2])
    names = {f.name for f in FEATURES}
    assert contained == exercised == names


def test_contained_is_not_exercised():
    """A call in the branch not taken, a general fold over one element, a short
    array, a variable read once: contained (or not) but not exercised."""
    text = """
def g(y : R) : R = y * 2.0

def f(x : R) : R =
  if x < 0.0 then g(x) else fold (\\p -> fst p * snd p + 1.0) (build 1 (\\i -> x))
"""
    contained, exercised = _features(text, [0.5])
    assert {"helper def called", "fold, general body", "build", "large array"} <= contained
    assert not {"helper def called", "fold, general body", "large array",
                "deep sharing"} & exercised
    assert "build" in exercised and "fold" in exercised
    # the simple fold bodies are not general ones
    c2, _ = _features("def f(a : Array R) : R = fold (\\p -> fst p + snd p) a", [[1.0, 2.0]])
    assert "fold" in c2 and "fold, general body" not in c2


def test_sharing_and_size_thresholds():
    reads = " + ".join(["x"] * SHARED)
    _, ex = _features(f"def f(x : R) : R = {reads}", [1.0])
    assert "deep sharing" in ex
    fewer = " + ".join(["x"] * (SHARED - 1))
    c, _ = _features(f"def f(x : R) : R = {fewer}", [1.0])
    assert "deep sharing" not in c
    _, ex = _features(f"def f(x : R) : R = sum (build {LARGE} (\\i -> x))", [1.0])
    assert "large array" in ex
    _, ex = _features(f"def f(x : R) : R = sum (build {LARGE - 1} (\\i -> x))", [1.0])
    assert "large array" not in ex


def test_the_default_run_exercises_every_feature_in_a_tenth_of_its_programs(capsys):
    """`chad check --stats` (200 programs, mixed shape, seed 0): every feature
    exercised at run time in at least 10% of the programs, and the bound holds."""
    assert main(["check", "--stats", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)["results"][0]
    cov = res["coverage"]
    assert cov["programs"] == res["programs"] == 200
    rows = {r["feature"]: r for r in cov["features"]}
    assert set(rows) == {f.name for f in FEATURES}
    low = {k: r["exercised"] for k, r in rows.items() if r["exercised"] < 20}
    assert not low, low
    assert all(r["exercised"] <= r["contained"] for r in rows.values())


def test_stats_table_in_the_text_output(capsys):
    assert main(["check", "--stats", "--programs", "12", "--seed", "5"]) == 0
    out = capsys.readouterr().out
    assert "coverage of the 12 program(s) generated" in out
    for f in FEATURES:
        assert f"    {f.name} " in out


def test_coverage_counts_programs():
    cases = []

    @seed(3)
    @settings(max_examples=30, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(check_strategy(5, arrays=True, functions=True, shape="random"))
    def collect(case):
        cases.append(case)

    collect()
    cov = coverage(cases)
    assert cov.programs == len(cases) == 30
    for f, c, e in cov.rows():
        assert 0 <= e <= c <= 30
        direct = sum(f.name in features_of(x.program, trace(x.program, x.args))[1] for x in cases)
        assert direct == e, f.name


def test_rich_programs_stay_cheap_to_measure():
    """Arrays of up to a hundred elements, but loops nested within the element
    budget: no program of a default-sized run takes more than 10^5 primal steps."""
    steps = []

    @seed(11)
    @settings(max_examples=120, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(check_strategy(5, arrays=True, functions=True, shape="mixed"))
    def collect(case):
        steps.append(run_primal(case.program, case.args)[1])

    collect()
    assert max(steps) < 10**5, sorted(steps)[-5:]


def test_chains_add_no_build_layer_past_the_budget():
    lengths = []

    @seed(4)
    @settings(max_examples=150, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(chains(16, arrays=True))
    def collect(case):
        lengths.append(len(case.args[1]))
        assert run_primal(case.program, case.args)[1] < 60 * CHAIN_BUDGET

    collect()
    assert max(lengths) >= 10  # large arrays are generated
