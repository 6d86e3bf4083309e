"""`chad jvp` (chad/cli.py, docs/language.md "Command line"; docs/forward-mode.md):
the value and tangent of a def, JSON in and out, usage errors with exit 2, and
--strict on a non-finite result."""

from __future__ import annotations

import json

import pytest

from chad.cli import main


# ----------------------------------------------------------------- chad jvp


PROGRAM = "def f(x : R, n : Z, a : Array R) : R * Array R = (x ** n, map (\\y -> y * x) a)\n"


@pytest.fixture
def prog_file(tmp_path):
    path = tmp_path / "f.chad"
    path.write_text(PROGRAM)
    return str(path)


def test_chad_jvp(prog_file, tmp_path, capsys):
    assert main(["jvp", prog_file, "--args", "[2.0, 3, [1.0, 2.0]]",
                 "--tangents", "[1.0, null, [0.0, 1.0]]", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # d(x ** 3) = 3 x^2 dx = 12; d(y * x) = dy * x + y * dx: [0*2 + 1*1, 1*2 + 2*1]
    assert out == {"value": [8.0, [2.0, 4.0]], "tangent": [12.0, [1.0, 4.0]]}
    tfile = tmp_path / "t.json"
    tfile.write_text("[1.0, null, [0.0, 1.0]]")
    assert main(["jvp", prog_file, "--args", "[2.0, 3, [1.0, 2.0]]", "--tangents",
                 f"@{tfile}", "--backend", "interp"]) == 0
    assert capsys.readouterr().out.splitlines() == ["value: [8.0, [2.0, 4.0]]",
                                                     "tangent: [12.0, [1.0, 4.0]]"]


@pytest.mark.parametrize("tangents,message", [
    ("[1.0, 1, [0.0, 1.0]]", "tangents[1]: the tangent of a value of type Z"),
    ("[1.0, null, [0.0]]", "tangents[2]: expected 2 tangent(s)"),
    ('[1.0, null, [0.0, "x"]]', "tangents[2][1]: expected a real tangent"),
    ("{}", "--tangents: expected a JSON list"),
    ("[1.0, null]", "tangents: f takes 3 argument(s)"),
    ("[1.0, null, [0.0, 1.0]", "--tangents"),
])
def test_chad_jvp_bad_tangents(prog_file, tangents, message, capsys):
    assert main(["jvp", prog_file, "--args", "[2.0, 3, [1.0, 2.0]]",
                 "--tangents", tangents]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and message in captured.err and "Traceback" not in captured.err


def test_chad_jvp_strict_on_non_finite(prog_file, capsys):
    assert main(["jvp", prog_file, "--args", "[0.0, -1, [1.0, 2.0]]",
                 "--tangents", "[1.0, null, [0.0, 1.0]]", "--strict"]) == 1
    assert "the tangent of f is not finite" in capsys.readouterr().err
