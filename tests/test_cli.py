"""The command line contract (docs/language.md): outputs, exit codes, errors on stderr."""

from __future__ import annotations

import json
import pathlib

import pytest

from chad.cli import main

EX = pathlib.Path(__file__).resolve().parent.parent / "examples"


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_run_prints_value_and_steps(capsys):
    code, out, err = run_cli(capsys, "run", str(EX / "basic.chad"), "--args", "[2.0, 3.0]", "--json")
    assert code == 0 and err == ""
    assert json.loads(out) == {"value": 6.909297426825682, "steps": 8}


def test_grad_of_the_running_example(capsys):
    code, out, _ = run_cli(capsys, "grad", str(EX / "basic.chad"), "--args", "[2.0, 3.0]", "--json")
    assert code == 0
    assert json.loads(out) == {"value": 6.909297426825682, "gradient": [2.5838531634528574, 2.0]}
    code, out, _ = run_cli(capsys, "grad", str(EX / "basic.chad"), "--args", "[2.0, 3.0]")
    assert out.splitlines() == ["value: 6.909297426825682", "gradient: [2.5838531634528574, 2.0]"]


@pytest.mark.parametrize("evm", ["map", "array", "parallel"])
@pytest.mark.parametrize("transform", ["efficient", "naive"])
def test_cost_of_x_times_y(capsys, evm, transform):
    code, out, _ = run_cli(capsys, "cost", str(EX / "mul.chad"), "--args", "[2.0, 3.0]",
                           "--json", "--evm", evm, "--transform", transform)
    r = json.loads(out)
    assert r["primal_steps"] == 4 and r["params"] == 2 and r["ctg_size"] == 1
    assert r["bound"] == 5 + 34 * 4 + 1 + 4 * 2
    if transform == "efficient":
        assert r["gradient_steps"] == 84 and r["holds"] and code == 0


def test_show_prints_the_derivative(capsys):
    code, out, _ = run_cli(capsys, "show", str(EX / "mul.chad"))
    assert code == 0
    header = out.splitlines()[0]
    body = "\n".join(line for line in out.splitlines() if not line.startswith("#"))
    assert header == "# efficient CHAD of f(x : R, y : R) : R"
    assert "add x@0" in body and "add y@1" in body
    # only a let opens a scope (for the let-bound variable's cell): x * y has none
    assert "scope" not in body


def test_show_opens_a_scope_for_a_let(capsys, tmp_path):
    f = tmp_path / "let.chad"
    f.write_text("def f(x : R) : R = let y = x * x in y * x\n")
    code, out, _ = run_cli(capsys, "show", str(f))
    body = "\n".join(line for line in out.splitlines() if not line.startswith("#"))
    assert code == 0 and body.count("scope") == 1 and "add y@1" in body


def test_sparse_null_cotangent_on_input(tmp_path, capsys):
    f = tmp_path / "p.chad"
    f.write_text("def f(x : R, y : R) : R * R = (x * y, y)\n")
    code, out, _ = run_cli(capsys, "grad", str(f), "--args", "[2.0, 3.0]", "--ctg", "null", "--json")
    assert code == 0 and json.loads(out)["gradient"] == [0.0, 0.0]
    code, out, _ = run_cli(capsys, "grad", str(f), "--args", "[2.0, 3.0]", "--ctg", "[1.0, 0.0]",
                           "--json")
    assert json.loads(out)["gradient"] == [3.0, 2.0]


BAD = [
    ("run", "{missing}", "--args", "[1.0]"),                       # no such file
    ("run", "{basic}", "--args", "[2.0]"),                          # wrong arity
    ("run", "{basic}", "--args", "[2.0, [3.0]]"),                   # wrong shape
    ("run", "{basic}", "--args", "not json"),                       # bad JSON
    ("run", "{basic}", "--args", "[2.0, 3.0]", "--fn", "nope"),     # unknown def
    ("grad", "{basic}", "--args", "[2.0, 3.0]", "--ctg", "[1.0]"),  # ctg of wrong shape
    ("grad", "{basic}", "--args", "[2.0, 3.0]", "--evm", "gpu"),   # bad choice
    ("frobnicate",),                                                # unknown command
    ("run", "{badsyntax}", "--args", "[1.0]"),                     # parse error
    ("run", "{badtype}", "--args", "[1.0]"),                       # type error
    ("run", "{divzero}", "--args", "[1]"),                          # runtime error
]


@pytest.mark.parametrize("argv", BAD)
def test_bad_input_exits_2_with_message_on_stderr_only(argv, tmp_path, capsys):
    files = {
        "missing": str(tmp_path / "missing.chad"),
        "basic": str(EX / "basic.chad"),
        "badsyntax": _write(tmp_path, "s.chad", "def f(x : R) : R = let y = in x\n"),
        "badtype": _write(tmp_path, "t.chad", "def f(x : R) : R = fst x\n"),
        "divzero": _write(tmp_path, "l.chad", "def f(n : Z) : Z = div(n, n - 1)\n"),
    }
    code, out, err = run_cli(capsys, *[a.format(**files) for a in argv])
    assert code == 2
    assert out == ""
    assert err.strip() and "Traceback" not in err


def test_errors_name_line_and_column_with_a_caret(tmp_path, capsys):
    f = _write(tmp_path, "t.chad", "def f(x : R) : R =\n  x + fst x\n")
    code, out, err = run_cli(capsys, "run", f, "--args", "[1.0]")
    assert code == 2 and f"{f}:2:" in err and "^" in err


def test_cotangent_path_in_error(tmp_path, capsys):
    f = _write(tmp_path, "p.chad", "def f(x : R) : (R + R) * R = (inl x, x)\n")
    code, _, err = run_cli(capsys, "grad", f, "--args", "[1.0]", "--ctg", '[{"inr": 1.0}, 1.0]')
    assert code == 2 and "ctg[0].inr" in err


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)
