"""JSON on the command line: every `--json` output parses as strict JSON, and one
policy for non-finite numbers and for numbers out of range, the same for input and
output (the docstring of chad/values.py; docs/language.md, "Values and cotangents as JSON").

What is tested:
  4. `chad show --json` emits JSON; every subcommand's --json output parses
  5. non-finite reals are the strings "inf", "-inf", "nan" everywhere; a number
     beyond float range is an error, in --args / --ctg as for a literal in a program
"""

from __future__ import annotations

import json
import math
import pathlib

import pytest

import chad.values
from chad.cli import main
from chad.deep import run_deep
from chad.demo import header
from chad.errors import UsageError
from chad.types import ArrayT, Real
from chad.values import value_from_json

EX = pathlib.Path(__file__).resolve().parent.parent / "examples"
EXAMPLES = sorted(EX.glob("*.chad"))


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def strict(text: str):
    """Parse as RFC 8259 JSON: NaN / Infinity / -Infinity are not JSON."""
    def refuse(name):
        raise AssertionError(f"{name} in JSON output: {text[:200]}")

    return json.loads(text, parse_constant=refuse)


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


# ----------------------------------------------------------------- 4. --json everywhere


def test_there_are_examples():
    assert len(EXAMPLES) >= 19


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_show_json_of_every_example(path, capsys):
    code, out, err = run_cli(capsys, "show", str(path), "--json")
    assert code == 0, err
    j = strict(out)
    text = header(path.read_text(), "fn")
    assert j["def"] == (text or j["def"]) and isinstance(j["def"], str)
    assert j["transform"] == "efficient"
    assert isinstance(j["program"], str) and j["program"]
    assert j["term"]["node"]  # the structured tree of the same term
    # the text is what `chad show` prints after its comment lines
    code, plain, _ = run_cli(capsys, "show", str(path))
    assert j["program"] == "\n".join(line for line in plain.splitlines()
                                     if not line.startswith("#"))


def test_show_json_tree(tmp_path, capsys):
    f = write(tmp_path, "m.chad", "def f(x : R, y : R) : R = x * y\n")
    code, out, _ = run_cli(capsys, "show", f, "--json", "--transform", "naive")
    j = strict(out)
    assert code == 0 and j["transform"] == "naive" and j["def"] == "f"
    assert j["params"] == [{"name": "x", "type": "R"}, {"name": "y", "type": "R"}]
    assert j["result"] == "R"
    nodes = set()

    def walk(t):
        if isinstance(t, dict):
            if "node" in t:
                nodes.add(t["node"])
            for v in t.values():
                walk(v)
        elif isinstance(t, list):
            for v in t:
                walk(v)

    walk(j["term"])
    assert {"Let", "Lam", "Var", "Prim", "Pair"} <= nodes


def test_show_json_of_a_deep_program(tmp_path, capsys):
    body = "".join(f"let x{i} = x{i - 1} * 1.5 in " if i else "let x0 = x in "
                   for i in range(3000)) + "x2999"
    f = write(tmp_path, "deep.chad", f"def f(x : R) : R = {body}\n")
    code, out, err = run_cli(capsys, "show", f, "--json")
    assert code == 0, err
    # the tree is as deep as the program: read it on a big stack too
    assert run_deep(strict, out)["def"] == "f"


def _example_argv(path: pathlib.Path, command: str) -> list[str] | None:
    text = path.read_text()
    argv = [command, str(path), "--json", "--args", header(text, "args") or "[]"]
    if header(text, "fn"):
        argv += ["--fn", header(text, "fn")]
    if command != "run" and header(text, "ctg"):
        argv += ["--ctg", header(text, "ctg")]
    return argv


@pytest.mark.parametrize("command", ["run", "grad", "cost"])
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_json_of_every_example(path, command, capsys):
    code, out, err = run_cli(capsys, *_example_argv(path, command))
    if code == 2 and "cannot differentiate" in err:  # a higher-order def: run only
        assert command != "run"
        return
    assert code in (0, 1), err
    j = strict(out)
    assert {"run": "value", "grad": "gradient", "cost": "gradient_steps"}[command] in j


def test_check_json_parses(capsys):
    code, out, err = run_cli(capsys, "check", "--programs", "3", "--max-depth", "2", "--json")
    assert code == 0, err
    j = strict(out)
    assert j["holds"] is True and j["results"]


def test_check_family_json_parses(capsys):
    code, out, err = run_cli(capsys, "check", "--family", "op_fst", "--json")
    assert code in (0, 1), err
    assert strict(out)["family"] == "op_fst"


# ----------------------------------------------------------------- 5. non-finite numbers


@pytest.fixture
def ident(tmp_path):
    return write(tmp_path, "id.chad", "def f(x : R) : R = x\n")


@pytest.mark.parametrize("s", ["inf", "-inf", "nan"])
def test_non_finite_strings_in_and_out(ident, s, capsys):
    code, out, err = run_cli(capsys, "run", ident, "--args", f'["{s}"]', "--json")
    assert code == 0, err
    assert strict(out)["value"] == s
    code, out, err = run_cli(capsys, "grad", ident, "--args", f'["{s}"]', "--ctg", f'"{s}"',
                             "--json")
    assert code == 0, err
    assert strict(out) == {"value": s, "gradient": [s]}
    code, out, err = run_cli(capsys, "run", ident, "--args", f'["{s}"]')
    assert code == 0 and strict(out) == s


def test_non_finite_results_are_written_as_strings(tmp_path, capsys):
    f = write(tmp_path, "e.chad",
              "def f(x : R) : R * (R * R) = (exp x, (log 0.0, exp x - exp x))\n")
    code, out, err = run_cli(capsys, "run", f, "--args", "[1000.0]", "--json")
    assert code == 0, err
    assert strict(out)["value"] == ["inf", ["-inf", "nan"]]
    g = write(tmp_path, "g.chad", "def g(x : R) : R = exp x\n")
    code, out, err = run_cli(capsys, "grad", g, "--args", "[1000.0]")
    assert code == 0 and out.splitlines() == ['value: "inf"', 'gradient: ["inf"]']


def test_output_is_accepted_back_as_input(tmp_path, capsys):
    f = write(tmp_path, "a.chad", "def f(a : Array R) : Array R = map (\\x -> exp x) a\n")
    code, out, _ = run_cli(capsys, "run", f, "--args", '[[1000.0, 0.0, "nan"]]')
    assert code == 0 and strict(out) == ["inf", 1.0, "nan"]
    code, out2, err = run_cli(capsys, "run", f, "--args", f"[{out.strip()}]")
    assert code == 0, err
    code, out, err = run_cli(capsys, "grad", f, "--args", f"[{out.strip()}]",
                             "--ctg", out.strip(), "--json")
    assert code == 0, err
    strict(out)


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity"])
def test_bare_non_finite_constants_are_not_json(ident, bad, capsys):
    code, out, err = run_cli(capsys, "run", ident, "--args", f"[{bad}]")
    assert code == 2 and out == ""
    assert "--args" in err and '"inf"' in err
    code, out, err = run_cli(capsys, "grad", ident, "--args", "[1.0]", "--ctg", bad)
    assert code == 2 and "--ctg" in err


@pytest.mark.parametrize("bad", ['"Infinity"', '"NaN"', '"INF"', '"1.0"'])
def test_other_strings_are_not_numbers_and_the_message_says_which_are(ident, bad, capsys):
    code, out, err = run_cli(capsys, "run", ident, "--args", f"[{bad}]")
    assert code == 2 and "args[0]" in err and '"inf", "-inf" or "nan"' in err


def test_number_out_of_float_range_same_rule_as_a_literal(tmp_path, ident, capsys):
    code, out, err = run_cli(capsys, "run", ident, "--args", "[1e400]")
    assert code == 2 and out == ""
    assert "args[0]" in err and "1e400" in err and "too large" in err and "1.8e308" in err
    code, out, err = run_cli(capsys, "run", ident, "--args", "[-1e400]")
    assert code == 2 and "args[0]" in err and "-1e400" in err
    code, out, err = run_cli(capsys, "grad", ident, "--args", "[1.0]", "--ctg", "1e400")
    assert code == 2 and "ctg" in err and "too large" in err
    # the same number as a literal in a program: also an error naming the place
    f = write(tmp_path, "l.chad", "def f(x : R) : R = x * 1e400\n")
    code, out, err = run_cli(capsys, "run", f, "--args", "[1.0]")
    assert code == 2 and f"{f}:1:24:" in err and "too large" in err and "1.8e308" in err


def test_underflow_rounds_to_zero_in_both_places(tmp_path, ident, capsys):
    code, out, _ = run_cli(capsys, "run", ident, "--args", "[1e-400]")
    assert code == 0 and strict(out) == 0.0
    f = write(tmp_path, "l.chad", "def f(x : R) : R = x + 1e-400\n")
    code, out, _ = run_cli(capsys, "run", f, "--args", "[0.0]")
    assert code == 0 and strict(out) == 0.0


def test_z_rejects_non_finite_strings(tmp_path, capsys):
    f = write(tmp_path, "z.chad", "def f(n : Z) : Z = n\n")
    code, _, err = run_cli(capsys, "run", f, "--args", '["inf"]')
    assert code == 2 and "args[0]" in err and "integer" in err


def test_library_accepts_the_same_strings():
    assert value_from_json(Real(), "inf") == math.inf
    assert value_from_json(Real(), "-inf") == -math.inf
    assert math.isnan(value_from_json(Real(), "nan"))
    assert value_from_json(Real(), math.inf) == math.inf  # a Python float is a value
    a = value_from_json(ArrayT(Real()), ["inf", 1, 2.5])
    assert list(a) == [math.inf, 1.0, 2.5]
    with pytest.raises(UsageError, match="too large"):
        value_from_json(Real(), 10 ** 400)


def test_the_policy_is_the_docstring_of_values():
    doc = chad.values.__doc__
    for s in ('"inf"', '"-inf"', '"nan"', "1.8e308"):
        assert s in doc
