"""The command line as a good citizen (docs/language.md, "Command line"): inputs found by
fuzzing that used to end in "internal error ... please report this" or worse, echoed
control characters, `--version` and the help of every option.

What is tested:
  3. numbers out of range in --args / --ctg are usage errors (exit 2) naming the place
  6. control characters in echoed source lines and file names are escaped
  7. `chad --version`, and a help text for every option of every subcommand
"""

from __future__ import annotations

import argparse
import importlib.metadata
import pathlib
import subprocess
import sys

import pytest

from chad.cli import build_parser, main
from chad.errors import ParseError
from chad.terms import Loc

ROOT = pathlib.Path(__file__).resolve().parent.parent
BIG = str(10 ** 400)  # an integer far beyond float range (no float can hold it)
ESC = "\x1b[31m"  # a terminal escape sequence: red text


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def usage_error(code, out, err, *needles):
    """exit 2, nothing on stdout, a clean message (never an internal error)."""
    assert code == 2, err
    assert out == ""
    assert "internal error" not in err and "Traceback" not in err
    for n in needles:
        assert n in err, (n, err)


# ----------------------------------------------------------------- 3. numbers out of range


def test_integer_beyond_float_range_for_an_R_argument(tmp_path, capsys):
    f = write(tmp_path, "r.chad", "def f(x : R) : R = x * 2.0\n")
    usage_error(*run_cli(capsys, "run", f, "--args", f"[{BIG}]"), "usage error", "args[0]",
                "too large")
    usage_error(*run_cli(capsys, "grad", f, "--args", f"[-{BIG}]"), "args[0]", "too large")


def test_integer_beyond_float_range_for_a_cotangent(tmp_path, capsys):
    f = write(tmp_path, "r.chad", "def f(x : R) : R * R = (x, x)\n")
    for cmd in ("grad", "cost"):
        usage_error(*run_cli(capsys, cmd, f, "--args", "[1.0]", "--ctg", f"[1.0, {BIG}]"),
                    "ctg[1]", "too large")


def test_integer_beyond_float_range_inside_arrays(tmp_path, capsys):
    f = write(tmp_path, "a.chad", "def f(a : Array R) : Array R = a\n")
    usage_error(*run_cli(capsys, "run", f, "--args", f"[[1.0, {BIG}]]"), "args[0][1]",
                "too large")
    usage_error(*run_cli(capsys, "grad", f, "--args", "[[1.0, 2.0]]", "--ctg", f"[{BIG}, 1]"),
                "ctg[0]", "too large")


def test_array_Z_elements_must_fit_64_bits(tmp_path, capsys):
    f = write(tmp_path, "z.chad", "def f(a : Array Z) : Z = a ! 0 + a ! 1\n")
    usage_error(*run_cli(capsys, "run", f, "--args", f"[[1, {2 ** 70}]]"), "args[0][1]",
                "64-bit")
    usage_error(*run_cli(capsys, "run", f, "--args", f"[[{-2 ** 63 - 1}, 0]]"), "args[0][0]")
    # the extremes of int64 are fine, and a plain Z is unbounded
    code, out, _ = run_cli(capsys, "run", f, "--args", f"[[{2 ** 63 - 1}, {-2 ** 63}]]")
    assert code == 0 and out.strip() == "-1"
    g = write(tmp_path, "g.chad", "def g(n : Z) : Z = n * n\n")
    code, out, _ = run_cli(capsys, "run", g, "--args", f"[{2 ** 70}]")
    assert code == 0 and int(out) == 2 ** 140


def test_array_Z_element_computed_beyond_64_bits_is_a_runtime_error(tmp_path, capsys):
    f = write(tmp_path, "z.chad", "def f(n : Z) : Array Z = build 2 (\\i -> n * n)\n")
    usage_error(*run_cli(capsys, "run", f, "--args", f"[{2 ** 40}]"), "runtime error",
                "64-bit")


def test_integers_longer_than_python_converts(tmp_path, capsys):
    """Python refuses int <-> str beyond 4300 digits: a clean error both ways."""
    f = write(tmp_path, "z.chad", "def f(n : Z) : Z = n\n")
    usage_error(*run_cli(capsys, "run", f, "--args", "[" + "9" * 5000 + "]"), "args[0]",
                "5000 digits")
    g = write(tmp_path, "g.chad", "def g(n : Z) : Z = n * n * n * n * n * n * n * n * n * n\n")
    usage_error(*run_cli(capsys, "run", g, "--args", "[" + "9" * 1000 + "]"), "runtime error",
                "digits")


def test_deeply_nested_json_is_an_error_not_a_crash(tmp_path):
    """65,000 '[' (about the most one argument can hold) used to overflow the C stack
    (the recursion limit is raised for the deep work): a segmentation fault. Run in a
    subprocess so that a crash cannot take pytest with it."""
    f = write(tmp_path, "r.chad", "def f(x : R) : R = x\n")
    deep = "[" * 65000 + "]" * 65000
    for opt in (["--args", deep], ["--args", "[1.0]", "--ctg", deep],
                ["--args", "[" * 65000]):
        p = subprocess.run([sys.executable, "-m", "chad.cli", "grad", f, *opt],
                           capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert p.returncode == 2, (p.returncode, p.stderr[-300:])
        assert p.stdout == "" and "internal error" not in p.stderr


def test_check_plot_to_an_unwritable_path_is_a_usage_error(tmp_path, capsys):
    target = tmp_path / "no" / "such" / "dir" / "p.png"
    code, out, err = run_cli(capsys, "check", "--programs", "1", "--max-depth", "1",
                             "--plot", str(target))
    usage_error(code, out, err, "--plot")
    assert "chad check" not in err  # refused before any program was generated


# ----------------------------------------------------------------- 6. control characters


def test_escape_control_keeps_text_and_escapes_controls():
    from chad.errors import escape_control

    assert escape_control("plain, ünïcödé, λ") == "plain, ünïcödé, λ"
    assert escape_control("a\x1b[31mb") == "a\\x1b[31mb"
    assert escape_control("\x9b2J\x07\x7f") == "\\x9b2J\\x07\\x7f"  # C1 CSI, BEL, DEL
    assert escape_control("a\u202eb") == "a\\u202eb"  # a bidi override
    assert escape_control("a\nb", keep="\n") == "a\nb"
    assert escape_control("a\nb") == "a\\nb"


def test_parse_error_on_an_escape_in_the_source(tmp_path, capsys):
    f = write(tmp_path, "e.chad", f"def f(x : R) : R = x {ESC}+ 1.0\n")
    code, out, err = run_cli(capsys, "run", f, "--args", "[1.0]")
    usage_error(code, out, err, "parse error")
    assert "\x1b" not in err
    src, caret = err.splitlines()[1:3]
    assert "\\x1b[31m+ 1.0" in src
    assert caret.index("^") == src.index("\\x1b")  # the caret stays under the character


def test_escape_in_a_comment_of_an_echoed_line(tmp_path, capsys):
    f = write(tmp_path, "e.chad", f"def f(x : R) : R = fst x  # {ESC}\x07 red\x9b2J\n")
    code, out, err = run_cli(capsys, "run", f, "--args", "[1.0]")
    usage_error(code, out, err, "type error", "\\x1b[31m\\x07 red\\x9b2J")
    assert not any(c in err for c in "\x1b\x07\x9b")


def test_escape_in_a_file_name(tmp_path, capsys):
    f = write(tmp_path, f"m{ESC}.chad", "def f(x : R) : R = fst x\n")
    code, out, err = run_cli(capsys, "run", f, "--args", "[1.0]")
    usage_error(code, out, err, "type error", "m\\x1b[31m.chad:1:")
    assert "\x1b" not in err
    missing = str(tmp_path / f"q{ESC}.chad")
    code, out, err = run_cli(capsys, "run", missing, "--args", "[1.0]")
    usage_error(code, out, err, "cannot read", "q\\x1b[31m.chad")
    assert "\x1b" not in err


def test_escape_in_other_echoed_arguments(tmp_path, capsys):
    f = write(tmp_path, "r.chad", "def f(x : R) : R = x\n")
    for argv in (["run", f, "--args", "[1.0]", "--fn", ESC],          # unknown def
                 ["run", f, "--args", "[1.0]", f"--x{ESC}"],           # argparse
                 ["run", f, "--args", f'["{ESC}"]'],                   # (JSON escapes it)
                 ["run", f, "--args", f"[1.0{ESC}]"]):                 # bad JSON
        code, out, err = run_cli(capsys, *argv)
        usage_error(code, out, err)
        assert "\x1b" not in err, argv


def test_chad_error_str_escapes_for_library_users():
    e = ParseError("bad", Loc(f"f{ESC}.chad", 1, 3), f"ab{ESC}cd\n")
    text = str(e)
    assert "\x1b" not in text and text.startswith("f\\x1b[31m.chad:1:3: parse error: bad")


# ----------------------------------------------------------------- 7. --version and --help


def test_version_from_the_package_metadata(capsys):
    code, out, err = run_cli(capsys, "--version")
    assert code == 0 and err == ""
    assert out.strip() == f"chad {importlib.metadata.version('chad')}"


def test_version_from_the_installed_command():
    p = subprocess.run([sys.executable, "-m", "chad.cli", "--version"], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0 and p.stdout.startswith("chad ")


def _subparsers():
    p = build_parser()
    (sub,) = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    return p, sub.choices


def _undocumented(parser) -> list[str]:
    return [a.option_strings[0] if a.option_strings else a.dest for a in parser._actions
            if not a.help or a.help == argparse.SUPPRESS]


def test_every_top_level_option_and_command_has_help():
    p, commands = _subparsers()
    assert _undocumented(p) == []
    (sub,) = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    helped = {a.dest for a in sub._choices_actions if a.help}
    assert helped == set(commands)


@pytest.mark.parametrize("command", ["run", "grad", "show", "cost"])
def test_every_option_has_help(command):
    _, commands = _subparsers()
    assert _undocumented(commands[command]) == []
    assert commands[command].description  # `chad X --help` says what X does


def test_every_option_of_check_has_help():
    _, commands = _subparsers()
    assert _undocumented(commands["check"]) == []
