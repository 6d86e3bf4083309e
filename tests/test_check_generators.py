"""The program generators of chad/costmodel/generators.py (docs/complexity-checker.md, "Generated programs"):
well-typed programs over the whole language, matching arguments, sparse
cotangents, printing that round-trips through the parser, shrinking to small
programs."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from chad.checker import check_program
from chad.cotangents import ctg_from_json
from chad.parser import parse_program
from chad.terms import App, Build, Lam, Prim
from chad.types import ArrayT, Prod, R
from chad.values import Inj, value_from_json
from chad.costmodel.generators import (
    GenCase, annotate_injections, chains, ctg_to_json, language_programs,
    print_surface, programs, sparse_ctgs, tuple_types, type_size, types, values_of,
)

SETTINGS = settings(max_examples=80, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck), phases=[Phase.generate])


def _nodes(t, cls) -> int:
    """Occurrences of node class cls in a term."""
    import attrs

    n = isinstance(t, cls)
    for f in attrs.fields(type(t)):
        v = getattr(t, f.name)
        if hasattr(v, "__attrs_attrs__") and hasattr(v, "ty"):
            n += _nodes(v, cls)
        elif isinstance(v, tuple):
            n += sum(_nodes(x, cls) for x in v if hasattr(x, "ty"))
    return n


@SETTINGS
@given(language_programs(max_depth=5, max_params=4))
def test_generated_programs_type_check_and_round_trip(case: GenCase):
    """The printed program parses and type checks back to the generated one."""
    checked = check_program(annotate_injections(case.program))
    assert checked.defs == case.program.defs
    reparsed = check_program(parse_program(case.source()))
    assert reparsed.defs == case.program.defs


@SETTINGS
@given(language_programs(max_depth=4))
def test_arguments_and_cotangents_match_the_types(case: GenCase):
    d = case.defn
    for i, (p, a) in enumerate(zip(d.params, case.args)):
        value_from_json(p.ty, a, f"args[{i}]")
        value_from_json(p.ty, case.args_json()[i], f"args[{i}]")  # the JSON form too
    ctg_from_json(d.result, case.ctg, "ctg", case.value)
    ctg_from_json(d.result, case.ctg_json(), "ctg", case.value)


def test_sparse_zero_cotangents_are_generated():
    """Pairs and sums sometimes get the sparse zero (None), sometimes a value."""
    seen = set()

    @settings(max_examples=60, database=None, deadline=None, phases=[Phase.generate])
    @given(sparse_ctgs(Prod(R, R), (1.0, 2.0)))
    def run(ct):
        seen.add(ct is None)

    run()
    assert seen == {True, False}


def test_printing_without_the_project_printer_is_surface_syntax():
    """print_surface (the fallback printer) also parses back."""
    case = find(programs(max_depth=3), lambda c: _nodes(c.defn.body, Prim) >= 3,
                settings=settings(database=None, deadline=None, max_examples=500))
    assert check_program(parse_program(print_surface(case.program))).defs == case.program.defs


def test_shrinking_gives_small_readable_programs():
    """hypothesis.find shrinks a program with a large primal cost to a short one."""
    from chad.api import cost

    def big(c):
        return cost(c.program, list(c.args), c.ctg).primal_steps >= 6

    case = find(programs(max_depth=4), big,
                settings=settings(database=None, deadline=None, max_examples=500, derandomize=True))
    assert len(case.source()) < 300, case.source()
    assert len(case.defn.params) <= 2
    assert cost(case.program, list(case.args), case.ctg).primal_steps <= 10


def test_tuple_types_shrink_to_the_fewest_components():
    t = find(tuple_types(48), lambda t: type_size(t) >= 21,
             settings=settings(database=None, deadline=None, max_examples=300))
    assert type_size(t) == 21  # 11 components: 11 leaves + 10 pairs
    assert str(t).count("R") == 11


def test_values_of_large_types_come_from_one_seed():
    """A large type's value is a function of one drawn integer: the same seed
    gives the same value, the value shrinks to seed 0's (1.0 everywhere), and
    the smallest value other than that is seed 1's."""
    from chad.costmodel.generators import _pseudo_value

    t = find(tuple_types(48), lambda t: type_size(t) > 40,
             settings=settings(database=None, deadline=None, max_examples=300))
    for s in (0, 1, 7, 2**20):
        v = _pseudo_value(t, s)
        value_from_json(t, v)
        assert _pseudo_value(t, s) == v  # deterministic in the seed
    assert _pseudo_value(t, 1) != _pseudo_value(t, 7)  # ... and the seed matters
    smallest = find(values_of(t), lambda v: True, settings=settings(database=None, deadline=None))
    assert smallest == _pseudo_value(t, 0)
    assert all(x is None or x == 1.0 for x in _leaves(smallest))  # 1.0 (and 1) everywhere
    other = find(values_of(t), lambda v: v != smallest, settings=settings(database=None, deadline=None))
    assert other == _pseudo_value(t, 1)


def _leaves(v):
    if isinstance(v, tuple):
        for x in v:
            yield from _leaves(x)
    elif isinstance(v, Inj):
        yield from _leaves(v.value)
    else:
        yield v


def test_ctg_to_json_keeps_sparsity():
    assert ctg_to_json(Prod(R, R), None) is None
    assert ctg_to_json(Prod(R, R), (1.0, None)) == [1.0, 0.0]
    assert ctg_to_json(ArrayT(R), None) is None


def test_deterministic_given_the_seed():
    from hypothesis import seed

    def collect(s):
        out = []

        @seed(s)
        @settings(max_examples=15, database=None, deadline=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(language_programs(max_depth=4))
        def run(case):
            out.append(case.source())

        run()
        return out

    assert collect(5) == collect(5)


def test_array_forms_are_generated():
    case = find(programs(max_depth=4, arrays=True), lambda c: _nodes(c.defn.body, Build) >= 1,
                settings=settings(database=None, deadline=None, max_examples=500))
    assert "build" in case.source()


def test_function_forms_are_generated():
    case = find(programs(max_depth=4, functions=True),
                lambda c: _nodes(c.defn.body, App) >= 1 and _nodes(c.defn.body, Lam) >= 1,
                settings=settings(database=None, deadline=None, max_examples=500))
    assert "\\" in case.source()
    checked = check_program(annotate_injections(case.program))
    assert checked.defs == case.program.defs  # captures filled in as the checker does


def test_types_strategy_is_first_order():
    from chad.types import is_first_order

    t = find(types(3, arrays=True), lambda t: type_size(t) >= 5,
             settings=settings(database=None, deadline=None))
    assert is_first_order(t)
    _ = st  # the module is part of the public API used with hypothesis strategies


@SETTINGS
@given(chains(12, arrays=True, functions=True))
def test_chains_type_check_and_round_trip(case: GenCase):
    assert check_program(annotate_injections(case.program)).defs == case.program.defs
    assert check_program(parse_program(case.source())).defs == case.program.defs
    ctg_from_json(case.defn.result, case.ctg_json(), "ctg", case.value)


@pytest.mark.parametrize("src", [
    "def f(x : R) : R + R = (inl (let y = x in 1.0) : R + R)\n",
    "def f(x : R) : R = (let y = x in y) + 1.0\n",
    "def f(x : R) : R + R = (inr (let y = x in y * 2.0) : R + R)\n",
    "def f(x : R) : R * R = ((let y = x in y), (let z = x in z))\n",
])
def test_print_surface_keeps_a_let_to_its_operand(src):
    """A let inside an operand (an injection, a sum, a pair) is printed in
    parentheses: its body would otherwise take what follows (`inl let y = x in
    1.0 : R + R` ascribes 1.0; found by the random test above in CI)."""
    prog = check_program(parse_program(src))
    assert check_program(parse_program(print_surface(prog))).defs == prog.defs
