"""`--args @FILE` and `--ctg @FILE` (`@-`: standard input) on every command that
takes them: the same results as the JSON given inline, errors that name the file
and the JSON path, exit code 2 for a file that cannot be read."""

from __future__ import annotations

import io
import json
import os

import pytest

from chad.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASIC = os.path.join(ROOT, "examples", "basic.chad")
DOT = os.path.join(ROOT, "examples", "dot.chad")


def _run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("command", ["run", "grad", "cost"])
def test_args_from_a_file_equal_args_inline(tmp_path, capsys, command):
    f = tmp_path / "args.json"
    f.write_text("[2.0, 3.0]")
    inline = _run(capsys, command, BASIC, "--args", "[2.0, 3.0]", "--json")
    from_file = _run(capsys, command, BASIC, "--args", f"@{f}", "--json")
    assert inline[0] == from_file[0] == 0
    assert json.loads(inline[1]) == json.loads(from_file[1])


def test_ctg_from_a_file_and_args_from_standard_input(tmp_path, capsys, monkeypatch):
    pairs = "def f(x : R, y : R) : R * R = (x * y, sin x)\n"
    prog = tmp_path / "p.chad"
    prog.write_text(pairs)
    ctg = tmp_path / "ctg.json"
    ctg.write_text("[1.0, 0.5]")
    monkeypatch.setattr("sys.stdin", io.StringIO("[2.0, 3.0]"))
    code, out, _ = _run(capsys, "grad", str(prog), "--args", "@-", "--ctg", f"@{ctg}", "--json")
    assert code == 0
    inline = _run(capsys, "grad", str(prog), "--args", "[2.0, 3.0]", "--ctg", "[1.0, 0.5]",
                  "--json")
    assert json.loads(out) == json.loads(inline[1])


def test_a_large_argument_file(tmp_path, capsys):
    """The case that fails inline: 10^4 weights exceed the argument list limit."""
    n = 10_000
    f = tmp_path / "big.json"
    f.write_text(json.dumps([[1.0] * n, [0.5] * n]))
    code, out, _ = _run(capsys, "grad", DOT, "--args", f"@{f}", "--json")
    assert code == 0
    result = json.loads(out)
    assert result["value"] == pytest.approx(0.5 * n)
    assert result["gradient"][0] == [0.5] * n


def test_errors_name_the_file_and_the_json_path(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('[[1.0, "a"], [2.0, 3.0]]')
    code, out, err = _run(capsys, "grad", DOT, "--args", f"@{bad}")
    assert code == 2 and out == ""
    assert str(bad) in err and "args[0][1]" in err
    broken = tmp_path / "broken.json"
    broken.write_text("[2.0, ")
    code, _, err = _run(capsys, "run", BASIC, "--args", f"@{broken}")
    assert code == 2 and str(broken) in err and "not valid JSON" in err
    code, _, err = _run(capsys, "grad", BASIC, "--args", "[2.0, 3.0]", "--ctg",
                        f"@{tmp_path / 'missing.json'}")
    assert code == 2 and "missing.json" in err and "cannot read" in err
    code, _, err = _run(capsys, "grad", BASIC, "--args", "@")
    assert code == 2 and "@FILE" in err
    # an error about inline JSON names no file
    code, _, err = _run(capsys, "grad", DOT, "--args", '[[1.0, "a"], [2.0, 3.0]]')
    assert code == 2 and "bad.json" not in err and "args[0][1]" in err
