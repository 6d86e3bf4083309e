"""The reuse of locals in generated functions (chad/compile/registers.py): the
rewritten code computes the same thing, dead pure assignments go, and a long
chain runs in a handful of locals."""

from __future__ import annotations

import random
import re

import pytest

import chad
from chad.api import load
from chad.compile import backend
from chad.compile.registers import reuse_locals

_NAME = re.compile(r"(?<![\w.])[a-z]+[0-9]+\b")


class _Side:
    """A stand-in for a sum value: generated code tests `x.side == 0`."""

    def __init__(self, x: float) -> None:
        self.side = 0 if x > 0 else 1
        self.value = x


def run(lines: list[str], *args):
    ns = {"_S": _Side}
    exec("\n".join(lines) + "\n", ns)
    return ns["f1"](*args)


def assigned(lines: list[str]) -> set[str]:
    return {m.group(1) for m in (re.match(r"\s*([a-z]+[0-9]+) = ", x) for x in lines) if m}


def test_straight_line_reuses_a_dead_local():
    lines = ["def f1(a2, a3):",
             "    v4 = (a2 * a3)",
             "    v5 = (v4 + 1.0)",
             "    v6 = (v5 * v5)",
             "    return v6"]
    out = reuse_locals(lines)
    assert run(out, 2.0, 3.0) == run(lines, 2.0, 3.0) == 49.0
    # a2 and a3 die at v4's line, v4 at v5's, v5 at v6's: one name is enough
    assert len(assigned(out)) == 1, out


def test_dead_tuples_are_dropped_in_cascade_but_not_a_failing_rhs():
    lines = ["def f1(a2):",
             "    v3 = (a2, None)",
             "    v4 = (0.0, v3)",          # dead, and so then is v3
             "    v5 = (1.0 / a2)",         # dead but may fail: kept
             "    v6 = _partial(f9, a2)",   # dead, cannot fail
             "    return a2"]
    out = reuse_locals(lines)
    text = "\n".join(out)
    assert "(a2, None)" not in text and "(0.0," not in text and "_partial" not in text
    assert "1.0 / a2" in text
    with pytest.raises(ZeroDivisionError):
        run(out, 0.0)


def test_reassigned_locals_and_branch_results_are_left_alone():
    lines = ["def f1(a2, a3):",
             "    g4 = 0.0",
             "    v5 = (a2 * 2.0)",
             "    g4 = v5 + g4",
             "    v6 = _S(a3)",
             "    if v6.side == 0:",
             "        v8 = (v5 + 1.0)",
             "        v7 = v8",
             "    else:",
             "        v9 = (a2 - 1.0)",
             "        v7 = v9",
             "    g4 = v7 + g4",
             "    v10 = (v5 * v7)",
             "    return (g4, v10)"]
    out = reuse_locals(lines)
    for a, b in ((1.0, 2.0), (1.5, -2.0)):
        assert run(out, a, b) == run(lines, a, b)
    text = "\n".join(out)
    assert text.count("g4 = ") == 3 and text.count("v7 = ") == 2


def test_a_local_read_in_a_branch_lives_until_the_branch():
    lines = ["def f1(a2):",
             "    v3 = (a2 + 1.0)",
             "    v4 = _S(a2)",
             "    v5 = (a2 * 3.0)",          # must not take v3's name: v3 is read below
             "    if v4.side == 0:",
             "        v6 = (v3 + v5)",
             "        v7 = v6",
             "    else:",
             "        v7 = v5",
             "    return v7"]
    out = reuse_locals(lines)
    for a in (2.0, -2.0):
        assert run(out, a) == run(lines, a)


def test_a_pattern_assignment_pins_its_names():
    lines = ["def f1(a2):",
             "    (p3, (p4, _)) = a2",
             "    v5 = (p3 + p4)",
             "    return v5"]
    out = reuse_locals(lines)
    assert out[1] == lines[1]
    assert run(out, (1.0, (2.0, None))) == 3.0


def _random_function(rng: random.Random) -> list[str]:
    """A function in the generator's dialect: arithmetic, tuples (some dead), cells
    added to repeatedly, nested if/else with a result assigned in both branches."""
    count = [3]
    lines = ["def f1(a1, a2, a3):"]
    cells = ["g100", "g101"]
    lines += [f"    {g} = 0.0" for g in cells]

    def fresh() -> str:
        count[0] += 1
        return f"v{count[0]}"

    def block(scope: list[str], depth: int, indent: int) -> str:
        pad = "    " * indent
        for _ in range(rng.randint(2, 12)):
            r = rng.random()
            x = fresh()
            if r < 0.45:
                a, b = rng.choice(scope), rng.choice(scope)
                op = rng.choice(["+", "*", "-"])
                lines.append(f"{pad}{x} = ({a} {op} {b})")
                scope.append(x)
            elif r < 0.55:
                lines.append(f"{pad}{x} = ({rng.choice(scope)} * 0.5)")
                scope.append(x)
            elif r < 0.65:
                lines.append(f"{pad}{x} = ({rng.choice(scope)}, {rng.choice(scope + ['None'])})")
            elif r < 0.75:
                g = rng.choice(cells)
                lines.append(f"{pad}{g} = {rng.choice(scope)} + {g}")
            elif depth < 3:
                s = fresh()
                lines.append(f"{pad}{s} = _S({rng.choice(scope)})")
                lines.append(f"{pad}if {s}.side == 0:")
                r0 = block(list(scope), depth + 1, indent + 1)
                lines.append(f"{pad}    {x} = {r0}")
                lines.append(f"{pad}else:")
                r1 = block(list(scope), depth + 1, indent + 1)
                lines.append(f"{pad}    {x} = {r1}")
                scope.append(x)
        return rng.choice(scope)

    r = block(["a1", "a2", "a3"], 0, 1)
    lines.append(f"    return ({r}, {cells[0]}, {cells[1]})")
    return lines


def test_random_functions_compute_the_same_with_fewer_locals():
    rng = random.Random(7)
    before = after = 0
    for _ in range(400):
        lines = _random_function(rng)
        out = reuse_locals(lines)
        for args in ((0.5, -1.25, 2.0), (-0.75, 1.5, -0.125)):
            assert repr(run(out, *args)) == repr(run(lines, *args)), "\n".join(lines)
        before += len(assigned(lines))
        after += len(assigned(out))
    assert after < 0.6 * before, (before, after)


def test_a_compiled_chain_runs_in_a_few_locals():
    n = 200
    text = "def chain(x0 : R, y : R) : R =\n" + "".join(
        f"  let x{k + 1} = x{k} + 0.01 * (y + 0.5 * sin x{k}) in\n" for k in range(n)) + f"  x{n}\n"
    prog = load(text)
    backend.clear_cache()
    primal = backend.primal_module(prog, prog.defs[0])
    names = set(_NAME.findall(primal.source.split("def entry", 1)[1]))
    assert len(names) <= 6, sorted(names)
    grad = backend.gradient_module(prog, prog.defs[0])
    names = set(_NAME.findall(grad.source.split("def entry", 1)[1]))
    # a let's cell receives two adds in a row: held in ordinary locals (codegen's
    # LocalCells), only y's cell, added to by every let, keeps its own local
    cells = {x for x in names if x.startswith("g")}
    assert len(cells) == 1, sorted(cells)
    # the backward pass reads each x(k) again (cos x(k)): those n stay alive; the
    # 10n other intermediate values share a few names
    assert len(names) < n + 10, len(names)
    x0, y = 0.4, 1.7
    assert primal.entry(x0, y) == chad.primal(text, "chain", backend="interp")(x0, y)
    value, cells = grad.entry(x0, y, 1.0)
    assert value == primal.entry(x0, y)
    ref = chad.grad(text, "chain", backend="interp")(x0, y)[1]
    assert (cells[1][0], cells[1][1][0]) == ref


def test_a_value_read_once_by_the_next_statement_is_folded_into_it():
    lines = ["def f1(a2, a3):",
             "    v4 = _sin(a2)",
             "    v5 = (0.5 * v4)",
             "    v6 = (a3 + v5)",
             "    return v6"]
    ns = {"_sin": __import__("math").sin}
    out = reuse_locals(lines)
    assert len(out) == 2 and out[1] == "    return (a3 + (0.5 * _sin(a2)))", out
    exec("\n".join(out) + "\n", ns)
    assert ns["f1"](0.3, 2.0) == 2.0 + 0.5 * __import__("math").sin(0.3)


def test_folding_keeps_the_order_of_calls_and_subscripts():
    """A value may move into the next statement only past loads of locals: not
    past a call or a subscript evaluated before it there, nor into a
    conditional expression, nor into a statement of another list."""
    log: list = []

    def f(tag, v):
        log.append(tag)
        return v

    lines = ["def f1(a2, a3):",
             "    v4 = _f(1, a2)",
             "    v5 = (_f(2, a3) + v4)",        # the call to v4's left: not folded
             "    v6 = _f(3, a2)",
             "    v7 = (a3, a2)[0] * v6",        # a subscript to its left: not folded
             "    v8 = _f(4, a3)",
             "    v9 = (a2 if a3 > 0 else v8)",  # conditional: not folded
             "    v10 = _f(5, a2)",
             "    if a3 > 0:",
             "        v11 = (v10 + 1.0)",        # another list: not folded
             "    else:",
             "        v11 = 0.0",
             "    v12 = _f(6, a3)",
             "    v13 = (v12 + _f(7, a2))",      # the call to its right: folded
             "    return (v5, v7, v9, v11, v13)"]
    out = reuse_locals(lines)
    text = "\n".join(out)
    for tag in (1, 3, 4, 5):
        assert re.search(rf"^    [a-z]+[0-9]+ = _f\({tag}, ", text, re.M), text
    assert "(_f(6, a3) + _f(7, a2))" in text
    results = []
    for code in (lines, out):
        log.clear()
        ns = {"_f": f}
        exec("\n".join(code) + "\n", ns)
        results.append((ns["f1"](2.0, 3.0), list(log)))
    assert results[0] == results[1]
    assert results[0][1] == [1, 2, 3, 4, 5, 6, 7]


def test_folds_nest_boundedly():
    n = 300
    lines = ["def f1(a2):", "    v3 = (a2 + 1.0)"]
    lines += [f"    v{k + 1} = (v{k} + 1.0)" for k in range(3, n)]
    lines.append(f"    return v{n}")
    out = reuse_locals(lines)
    assert len(out) < n // 5  # folded ...
    assert max(line.count("(") for line in out) <= 13  # ... a few levels deep
    assert run(out, 0.5) == run(lines, 0.5) == 0.5 + (n - 2)
