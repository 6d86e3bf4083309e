"""TH2 from TH1 (chad/proofs/obligations.py::th2_from_th1_obligation) on the numbers
the code gives (chad/costmodel/overhead.py), the constants' one source
(chad/proofs/statements.py), and the observations' obligation.

The obligation is proved with the code's overhead and the statements' constants,
and refuted as soon as any constant of TH2 is one smaller or any piece of the
overhead one larger: the bound is tight, so a change of a cost in the evaluator
(run, app, snd, var, the zeros) shows here, as the monkeypatched evaluators below
check."""

from __future__ import annotations

import math
import pathlib

import attrs
import pytest

from chad import tables
from chad.costmodel import measure as measure_mod
from chad.costmodel.fit import smallest_c
from chad.costmodel.overhead import (
    FORMERS, OverheadError, WrapperOverhead, former, fragment_types, wrapper_overhead,
)
from chad.proofs import statements
from chad.proofs.obligations import (
    observations_obligation, prove, solve_exists, th2_from_th1_obligation,
)
from chad.proofs.statements import TH1, TH1_C, TH2, TH2_C, TH2_C1, TH2_C2
from chad.terms import App, LPairZero, LUnit, Prim, RunEVM, Snd, Unit, Var

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def overhead() -> WrapperOverhead:
    return wrapper_overhead()


# ----------------------------------------------------------------- the constants


def test_the_constants_have_one_source():
    assert (TH1_C, TH2_C, TH2_C1, TH2_C2) == (34, 34, 5, 4)  # the corrected Agda text's
    assert TH1.constants == {"c": TH1_C}
    assert TH2.constants == {"c": TH2_C, "c1": TH2_C1, "c2": TH2_C2}
    assert (measure_mod.C_PRIMAL, measure_mod.C_CONST, measure_mod.C_PARAMS) == \
        (TH2_C, TH2_C1, TH2_C2)
    k = measure_mod.Constants()
    assert (k.c, k.c1, k.c2) == (TH2_C, TH2_C1, TH2_C2) and measure_mod.PROVED == k
    assert measure_mod.th2_bound(10, 3, 2) == TH2_C1 + TH2_C * 10 + 3 + TH2_C2 * 2
    fit = smallest_c([(1, 1, 1, 1)])
    assert (fit.c1, fit.c2) == (TH2_C1, TH2_C2)
    # the statements' texts are written with them
    assert f"<= + {TH1_C} * cost env t" in TH1.formal
    assert f"<= + {TH2_C1} + + {TH2_C} * cost env t" in TH2.formal
    assert f"+ {TH2_C2} * + length Γ" in TH2.formal
    assert f"<= {TH1_C} P" in statements.TH2_FROM_TH1.formal


# ----------------------------------------------------------------- the computed overhead


def test_overhead_is_what_docs_cost_model_says(overhead):
    """docs/cost-model.md quotes the computed numbers verbatim."""
    doc = (ROOT / "docs" / "cost-model.md").read_text()
    assert str(overhead) in doc, str(overhead)


def test_overhead_pieces_are_consistent(overhead):
    assert set(overhead.zero_cell) == set(FORMERS) == set(overhead.zero_potential)
    assert overhead.zero_cell_min >= 1 and overhead.zero_potential_min >= 1
    # TH2's c' and c'' are exactly what the corollary needs: the wrapper and the
    # zero environment's constant parts, and per parameter the pair, the dearest
    # zero, its potential (TH1 subtracts φ'(denvin)) and the wrapper's share
    assert TH2_C1 == overhead.wrapper_const + overhead.zero_env_const
    assert TH2_C2 == (overhead.wrapper_per_param + overhead.zero_env_per_param
                      + overhead.zero_cell_max + overhead.zero_potential_max)
    assert {former(t) for t in fragment_types(1)} == set(FORMERS)


def test_overhead_error_when_the_zero_is_not_a_function_of_the_former(monkeypatch):
    """A zero whose cost depends on the components is reported, not averaged."""
    from chad.transform import common
    from chad.types import Prod

    real = common.zerot

    def zerot(t):
        if isinstance(t, Prod) and isinstance(t.left, Prod):
            return Prim("LZERO", LUnit())  # 2 steps instead of lpairzero's 1
        return real(t)

    monkeypatch.setattr(common, "zerot", zerot)
    with pytest.raises(OverheadError, match="not a function of the type former"):
        wrapper_overhead(contexts=[()])


# ----------------------------------------------------------------- (a) proved


def test_th2_follows_from_th1_with_the_codes_numbers(overhead):
    assert prove(*th2_from_th1_obligation(overhead)) == "proved"
    assert prove(*th2_from_th1_obligation()) == "proved"  # computes the overhead itself


def test_the_corollary_carries_th1s_constant_to_th2s_c(overhead):
    """TH1's constant and TH2's c are separate: TH2's c must be at least TH1's."""
    assert prove(*th2_from_th1_obligation(overhead, th1_c=33, c=33)) == "proved"
    assert prove(*th2_from_th1_obligation(overhead, th1_c=TH1_C + 1)).startswith("refuted")
    assert prove(*th2_from_th1_obligation(overhead, th1_c=TH1_C - 1)) == "proved"


# ----------------------------------------------------------------- (b) tight


@pytest.mark.parametrize("change", [
    {"c": TH2_C - 1}, {"c1": TH2_C1 - 1}, {"c2": TH2_C2 - 1},
])
def test_refuted_with_a_smaller_th2_constant(overhead, change):
    res = prove(*th2_from_th1_obligation(overhead, **change))
    assert res.startswith("refuted"), res


def _plus_one_zero_cell(o, which):
    cells = dict(o.zero_cell)
    for f in which:
        cells[f] += 1
    return attrs.evolve(o, zero_cell=cells)


@pytest.mark.parametrize("bump", [
    lambda o: attrs.evolve(o, wrapper_const=o.wrapper_const + 1),
    lambda o: attrs.evolve(o, wrapper_per_param=o.wrapper_per_param + 1),
    lambda o: attrs.evolve(o, zero_env_const=o.zero_env_const + 1),
    lambda o: attrs.evolve(o, zero_env_per_param=o.zero_env_per_param + 1),
    lambda o: _plus_one_zero_cell(o, FORMERS),  # every zero one step dearer
    lambda o: _plus_one_zero_cell(o, [max(o.zero_cell, key=o.zero_cell.get)]),  # the dearest
    lambda o: attrs.evolve(o, zero_potential={f: v + 1 for f, v in o.zero_potential.items()}),
], ids=["wrapper_const", "wrapper_per_param", "zero_env_const", "zero_env_per_param",
        "every_zero_cell", "dearest_zero_cell", "zero_potential"])
def test_refuted_with_one_more_step_of_overhead(overhead, bump):
    res = prove(*th2_from_th1_obligation(bump(overhead)))
    assert res.startswith("refuted"), res


def test_a_cheaper_zero_changes_nothing(overhead):
    """Only the dearest zero bounds c'': the cheapest's cost is not needed."""
    cheap = min(overhead.zero_cell, key=overhead.zero_cell.get)
    cells = dict(overhead.zero_cell)
    cells[cheap] = 1
    assert prove(*th2_from_th1_obligation(attrs.evolve(overhead, zero_cell=cells))) == "proved"


# ----------------------------------------------------------------- (c) a cost of the code


def _one_more_step(node_class):
    real = tables.EVAL[node_class]

    def rule(ev, t, env):
        v, c = real(ev, t, env)
        return v, c + 1

    return rule


@pytest.mark.parametrize("node_class, field", [
    (RunEVM, "wrapper_const"), (App, "wrapper_const"), (Snd, "wrapper_const"),
    (Var, "wrapper_const"), (Unit, "zero_env_const"), (Prim, "zero_cell"),
    (LUnit, "zero_cell"),
])
def test_a_dearer_evaluator_rule_changes_the_overhead_and_refutes(monkeypatch, overhead,
                                                                  node_class, field):
    """One more step for run, app, snd, var (the wrapper), unit (the end of the zero
    environment) or a zero (prim LZERO, lunit) in the evaluator: the computed
    overhead grows and the obligation no longer holds with TH2's constants."""
    monkeypatch.setitem(tables.EVAL, node_class, _one_more_step(node_class))
    changed = wrapper_overhead()
    assert getattr(changed, field) != getattr(overhead, field)
    res = prove(*th2_from_th1_obligation(changed))
    assert res.startswith("refuted"), (changed, res)


def test_a_dearer_pair_zero_still_below_the_dearest_zero(monkeypatch, overhead):
    """lpairzero one step dearer: z(pair) grows to the cost of R's zero, which
    already bounds c'', so TH2 still follows (the obligation uses the dearest
    zero, not each)."""
    monkeypatch.setitem(tables.EVAL, LPairZero, _one_more_step(LPairZero))
    changed = wrapper_overhead()
    assert changed.zero_cell["pair"] == overhead.zero_cell["pair"] + 1
    assert changed.zero_cell_max == overhead.zero_cell_max
    assert prove(*th2_from_th1_obligation(changed)) == "proved"


def test_lacm_run_is_th1s_cmonad_not_the_wrappers(monkeypatch, overhead):
    """The formalisation's LACM.run (1 + |Γ| + the action) is TH1's cmonad: a
    dearer LACM.run leaves the wrapper's overhead as it is (TH1 itself then
    decides, tests/test_efficient.py)."""
    from chad.costmodel.lacm import SpecLACM

    real = SpecLACM.run

    def run(self, m, env):
        r, e, c = real(self, m, env)
        return r, e, c + 1

    monkeypatch.setattr(SpecLACM, "run", run)
    assert wrapper_overhead() == overhead


# ----------------------------------------------------------------- (d) measured


def test_th2_left_side_decomposes_as_computed(overhead):
    """On generated programs, TH2's left side (as `chad cost` measures it, with its
    default EVM) = crun + ccall + cmonad (TH1's pieces, with the formalisation's
    LACM) + the computed wrapper overhead + the computed zero environment,
    exactly; the zero environment's measured cost is the computed Z(Γ)."""
    from hypothesis import HealthCheck, Phase, given, settings

    from chad.api import make_evm
    from chad.costmodel.evaluate import Evaluator, env_tuple_to_cells
    from chad.costmodel.generators import programs
    from chad.costmodel.measure import measure
    from chad.transform.common import zero_env_term
    from chad.transform.efficient import chad_def

    seen_params = set()

    @settings(max_examples=60, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(programs(max_depth=4))
    def run(case):
        d = case.defn
        types = [p.ty for p in d.params]
        env = {p.name: a for p, a in zip(d.params, case.args)}
        total = measure(case.program, case.args, case.ctg).gradient_steps
        evm = make_evm("spec")
        ev = Evaluator(evm=evm)
        (_, bp), crun = ev.eval(chad_def(d), dict(env))
        action, ccall = ev.apply(bp, case.ctg)
        zero, zc = Evaluator().eval(zero_env_term(types), {})
        _, _, cmonad = evm.run(action, env_tuple_to_cells(zero))
        assert zc == overhead.zero_env(types)
        assert total == overhead.lhs(crun, ccall, cmonad, types)
        assert total == crun + ccall + cmonad + overhead.wrapper(len(types)) + zc
        seen_params.add(len(types))

    run()
    assert len(seen_params) >= 2  # several context lengths were measured


# ----------------------------------------------------------------- observations


ROWS = [(1, 30, 1, 1), (5, 120, 3, 2), (10, 190, 1, 1), (3, 110, 2, 4), (40, 700, 9, 3)]


def test_observations_obligation_is_what_smallest_c_minimises():
    brute = max(0, max(math.ceil((g - TH2_C1 - s - TH2_C2 * n) / p) for p, g, s, n in ROWS))
    ob = observations_obligation(ROWS)
    assert solve_exists(ob) == ("sat", (brute,))
    assert smallest_c(ROWS).c == brute
    assert f"G <= {TH2_C1} + c*P + S + {TH2_C2}*n" in str(ob)
    # an observation with no primal steps above c' + S + c''*n: no c covers it
    assert solve_exists(observations_obligation([(0, 10, 1, 1)])) == ("sat", (0,))
    assert solve_exists(observations_obligation([(0, 11, 1, 1)])) == ("unsat", None)
