"""Deep programs (docs/parser.md, "Deep programs"): 10,000 nested lets and a
sum of 10,000 terms go through every layer without a RecursionError."""

from __future__ import annotations

import json

import pytest

import chad
from chad.cli import main
from chad.deep import run_deep
from chad.printer import print_program

N = 10_000


def nested_lets(n: int) -> str:
    lines = ["def f(x : R) : R ="]
    lines.append("  let x0 = x in")
    lines += [f"  let x{i} = x{i - 1} * 1.0 + 0.5 in" for i in range(1, n)]
    lines.append(f"  x{n - 1}")
    return "\n".join(lines) + "\n"


def long_sum(n: int) -> str:
    return "def f(x : R) : R = " + " + ".join(["x"] * n) + "\n"


@pytest.mark.parametrize("make", [nested_lets, long_sum])
def test_parse_check_print_evaluate(make):
    text = make(N)
    prog = chad.load(text)
    printed = print_program(prog)
    # Term equality recurses through C (attrs __eq__ on tuples): compare deep terms
    # in the big-stack thread, as every layer of chad does.
    assert run_deep(lambda: chad.load(printed).defs[0].body == prog.defs[0].body)
    value, steps = chad.run(prog, [2.0])
    expected = 2.0 + 0.5 * (N - 1) if make is nested_lets else 2.0 * N
    assert value == pytest.approx(expected) and steps > N


@pytest.mark.parametrize("make", [nested_lets, long_sum])
def test_gradient_and_cost_of_deep_programs(make):
    prog = chad.load(make(N))
    # the interpreter's deep path; the compiled one: tests/test_compiled.py
    _, (dx,) = chad.grad(prog, backend="interp")(2.0)
    assert dx == pytest.approx(1.0 if make is nested_lets else float(N))
    report = chad.cost(prog, [2.0])
    assert report.holds


def test_cli_on_a_deep_program(tmp_path, capsys):
    f = tmp_path / "deep.chad"
    f.write_text(nested_lets(N))
    # the interpreter's path (the compiled one of the same program: the test
    # above and tests/test_compiled.py; compiling it again here would only add time)
    assert main(["grad", str(f), "--args", "[2.0]", "--json", "--backend", "interp"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["gradient"] == [pytest.approx(1.0)]


@pytest.mark.long
def test_gradient_of_100000_nested_lets_in_a_subprocess():
    """The gradient of 10^5 nested lets fits the big-stack threads (chad/deep.py);
    run apart, so a stack overflow (a segmentation fault) fails the test."""
    import subprocess
    import sys

    code = ("import chad\n"
            "n = 100_000\n"
            "lines = ['def f(x : R) : R ='] + "
            "[f'  let x{i} = {\"x\" if i == 0 else f\"x{i-1}\"} * 1.0001 in' for i in range(n)]"
            " + [f'  x{n-1}']\n"
            "v, (g,) = chad.grad('\\n'.join(lines), backend='interp')(1.0)\n"
            "assert abs(g - 1.0001 ** n) < 1e-6 * g, g\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (r.returncode, r.stderr[-1000:])


def test_the_compiler_gives_what_its_recursive_passes_gave():
    """The passes that loop over the spines of deep programs make exactly what
    their recursive versions made: the fingerprints of the simplified gradient
    term and of every generated module (primal, grad on three transforms, vjp
    on two runtimes, jvp) of 90 programs (the examples, 300 nested lets, a sum
    of 300 terms, generated programs of every family), recorded by the
    recursive versions in tests/golden/compiled_identity.json (the programs
    with builds regenerated since, by these passes, when the gather shortcut's
    derivative gained its test of an empty build: a deliberate change)."""
    import sys

    from tests.golden.compiled_identity import FILE, fingerprints

    with open(FILE) as fh:
        data = json.load(fh)
    assert len(data["programs"]) >= 80
    limit = sys.getrecursionlimit()
    differ = [(name, what) for name, text in data["programs"].items()
              for what, fp in fingerprints(text).items()
              if data["fingerprints"][name].get(what) != fp]
    assert sys.getrecursionlimit() == limit
    assert not differ, differ[:10]
