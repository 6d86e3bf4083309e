"""The compiled backend (chad/compile/): generated source, deep programs, errors,
the cache, the API's backends and the command line. Values and gradients on
generated programs: tests/test_compiled_differential.py."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import threading

import pytest

import chad
from chad import api, tables
from chad.cli import main
from chad.compile import backend
from chad.compile.codegen import CompileError
from chad.terms import Def, Let, Param, Prim, Program, Var
from chad.types import R
from tests.fd import assert_gradient_matches_fd
from tests.oracle_agda import canon

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "basic.chad")

HOSTILE = ["__import__", "_E", "entry1", "v5", "cells7", "exec", "os", "_partial",
           "None_", "__builtins__", "x'", "p6", "_padd", "sys"]


def _hostile_program() -> str:
    names = HOSTILE
    lines = [f"def f({', '.join(n + ' : R' for n in names[:3])}) : R ="]
    prev = names[0]
    for n in names[3:]:
        lines.append(f"  let {n} = {prev} * {names[1]} + sin {names[2]} in")
        prev = n
    lines.append(f"  {prev} * {prev}")
    return "\n".join(lines) + "\n"


def _words(source: str) -> set[str]:
    code = "\n".join(line for line in source.splitlines() if not line.startswith("#"))
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_']*", code))


def test_hostile_identifiers_never_reach_the_generated_source():
    text = _hostile_program()
    prog = chad.load(text)
    d = prog.find(None)
    for what in ("grad", "vjp", "primal"):
        if what == "grad":
            source = backend.gradient_module(prog, d).source
        elif what == "vjp":
            source = "".join(m.source for m in backend.vjp_modules(prog, d))
        else:
            source = backend.primal_module(prog, d).source
        words = _words(source)
        # generated names are stem + number; no program name may appear as a word
        assert not ({"os", "sys", "exec", "__import__", "__builtins__", "None_"} & words)
        assert "x'" not in source
        for name in HOSTILE:
            if name in words:  # only possible for a generated-looking name: must be ours
                assert re.fullmatch(r"_?[a-z]+[0-9]+|_E|_partial|_padd", name), name
    args = (0.3, 0.7, -0.2)
    assert chad.grad(text)(*args) == chad.grad(text, backend="interp")(*args)


def test_names_that_are_not_identifiers_in_a_program_built_in_python():
    evil = "x); __import__('os').system('echo pwned'); (y"
    body = Let("a b\n", Prim("MUL", _pair(Var(evil), Var(evil))), Var("a b\n"))
    prog = api.load(Program((Def("f", (Param(evil, R),), R, body),)))
    source = backend.gradient_module(prog, prog.find(None)).source
    assert "pwned" not in source and "a b" not in source
    assert chad.grad(prog)(1.5) == chad.grad(prog, backend="interp")(1.5) == (2.25, (3.0,))


def _pair(a, b):
    from chad.terms import Pair
    return Pair(a, b)


@pytest.mark.parametrize("make, value, dx", [
    ("nested_lets", 2.0 + 0.5 * 9999, 1.0),  # x1 = x + 0.5, ..., the gradient 1
    ("long_sum", 20000.0, 10000.0),          # x + x + ... (10,000 terms) at x = 2
])
def test_deep_programs_compile_and_run_with_the_default_limit_and_no_thread(make, value, dx):
    """10,000 nested lets, and a sum of 10,000 terms: parsed, checked,
    transformed, simplified, compiled and run (grad and vjp) on this thread
    with Python's default recursion limit, no thread ever started (in a fresh
    interpreter, Thread.start recording every call); the value and gradient
    are the closed forms (tests/test_deep.py compares the interpreter's on
    these programs)."""
    script = f"""
import sys, threading
sys.path.insert(0, {ROOT!r})
assert sys.getrecursionlimit() == 1000, sys.getrecursionlimit()
import chad
from tests.test_deep import {make}
started = []
real_start = threading.Thread.start
threading.Thread.start = lambda self: started.append(self.name) or real_start(self)
threads = threading.active_count()
text = {make}(10000)
value, (dx,) = chad.grad(text)(2.0)
v2, backprop = chad.vjp(text)(2.0)
(dx2,) = backprop(1.5)
assert not started, started
assert threading.active_count() == threads
assert sys.getrecursionlimit() == 1000
print(repr(value), repr(dx), repr(v2), repr(dx2))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=1200, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    got, got_dx, v2, dx2 = (float(w) for w in out.stdout.split())
    assert got == pytest.approx(value, rel=1e-12) and got_dx == pytest.approx(dx, rel=1e-12)
    assert v2 == got and dx2 == 1.5 * got_dx


def test_a_program_nested_another_way_compiles_on_a_big_stack_thread(monkeypatch):
    """Nested parentheses (not a spine the passes loop over): the passes run out
    of this thread's stack and run again on a big-stack thread (run_shallow);
    the result is the interpreter's."""
    n = 3000
    text = "def f(x : R) : R = " + "sin (" * n + "x" + ")" * n + "\n"
    backend.clear_cache()
    started = []
    real_start = threading.Thread.start

    def start(self):
        started.append(self.name)
        return real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    got = chad.grad(text)(0.5)
    monkeypatch.undo()
    assert "chad-deep" in started
    assert got == chad.grad(text, backend="interp")(0.5)


@pytest.mark.parametrize("evm", ["map", "parallel"])
def test_deep_action_trees_of_the_interface_runtimes_run_on_a_big_stack(evm):
    """The map and parallel runtimes run their action trees recursively: a
    compiled call that exceeds this thread's recursion limit runs again, the same
    compiled code, on a big-stack thread (never on the interpreter)."""
    from tests.test_deep import nested_lets

    text = nested_lets(3000)
    value, (dx,) = chad.grad(text, evm=evm)(2.0)
    assert (value, dx) == (2.0 + 0.5 * 2999, 1.0)


def test_a_runtime_error_is_the_interpreters_with_its_location():
    text = "def f(x : R, n : Z) : R =\n  let z = x * toreal (div(1, n)) in\n  z * z\n"
    for backend_name in ("compiled", "interp"):
        with pytest.raises(chad.EvalError) as e:
            chad.grad(text, backend=backend_name)(1.0, 0)
        assert e.value.loc is not None and e.value.loc.line == 2
    ix = "def f(a : Array R) : R = a ! 3\n"
    with pytest.raises(chad.EvalError, match="index 3 out of range"):
        chad.grad(ix)([1.0, 2.0])


def test_an_internal_compiler_failure_is_reported_never_a_fallback(monkeypatch, capsys):
    from chad.terms import Index

    def broken(gen, t):
        raise CompileError("lowering exploded", t.loc)

    monkeypatch.setitem(tables.COMPILE, Index, broken)
    backend.clear_cache()
    path = os.path.join(ROOT, "examples", "dot.chad")
    code = main(["grad", path, "--args", "[[1.0, 2.0], [3.0, 4.0]]"])
    err = capsys.readouterr().err
    assert code == 2
    assert "internal compiler error" in err and "lowering exploded" in err
    assert "Traceback" not in err and "dot.chad:" in err
    backend.clear_cache()


def test_a_wrong_compiled_result_is_an_error_not_the_interpreters_answer(monkeypatch):
    """If compiled code fails where the interpreter succeeds, the call fails."""
    text = "def f(x : R) : R = sin x * x\n"
    prog = chad.load(text)
    module = backend.gradient_module(prog, prog.find(None))

    def boom(*args):
        raise ZeroDivisionError("injected")

    monkeypatch.setattr(module, "entry", boom)
    monkeypatch.setitem(backend._cache, next(k for k, v in backend._cache.items()
                                             if v is module), module)
    with pytest.raises(CompileError, match="where the interpreter does not"):
        chad.grad(text)(1.0)
    backend.clear_cache()


def test_compilation_is_cached_per_program_def_transform_and_runtime():
    backend.clear_cache()
    text = "def f(x : R) : R = x * x\ndef g(x : R) : R = sin x\n"
    chad.grad(text)(1.0)
    n = len(backend._cache)
    chad.grad(text)(2.0)
    chad.grad(chad.load(text))(2.0)  # the same source text: the same entry
    assert len(backend._cache) == n == 1
    chad.grad(text, fn="f")(2.0)
    chad.grad(text, evm="map")(2.0)
    chad.grad(text, transform="naive")(2.0)
    assert len(backend._cache) == 4
    backend.clear_cache()
    assert not backend._cache


@pytest.mark.parametrize("evm", ["array", "map", "parallel"])
@pytest.mark.parametrize("transform", ["efficient", "naive", "naive-ho"])
def test_backends_agree_on_the_examples(evm, transform):
    for name in ("basic.chad", "calls.chad", "pairs.chad", "sums.chad", "dot.chad",
                 "higher_order.chad", "softmax_xent.chad", "compose.chad"):
        text = open(os.path.join(ROOT, "examples", name)).read()
        args = json.loads(re.search(r"# args: (.*)", text).group(1))
        m = re.search(r"# ctg: (.*)", text)
        kw = {"ctg": json.loads(m.group(1))} if m else {}
        try:
            ref = chad.grad(text, evm=evm, transform=transform, backend="interp")(*args, **kw)
        except chad.ChadError:  # the transform does not cover this program
            with pytest.raises(chad.ChadError):
                chad.grad(text, evm=evm, transform=transform)(*args, **kw)
            continue
        got = chad.grad(text, evm=evm, transform=transform)(*args, **kw)
        assert repr(got) == repr(ref), name
        unsimplified = chad.grad(text, evm=evm, transform=transform, simplify=False)
        assert repr(unsimplified(*args, **kw)) == repr(ref), name


def test_primal_backends_agree():
    text = open(os.path.join(ROOT, "examples", "softmax_xent.chad")).read()
    args = json.loads(re.search(r"# args: (.*)", text).group(1))
    assert repr(chad.primal(text)(*args)) == repr(chad.primal(text, backend="interp")(*args))
    assert chad.primal(text)(*args) == chad.run(text, args)[0]


def test_unknown_backend_and_spec_runtime_are_usage_errors():
    with pytest.raises(chad.UsageError, match="unknown backend"):
        chad.grad("def f(x : R) : R = x\n", backend="jit")
    with pytest.raises(chad.UsageError, match="spec EVM"):
        chad.grad("def f(x : R) : R = x\n", evm="spec", backend="compiled")(1.0)
    for b in ("interp", None):  # the default with spec: the interpreter
        assert chad.grad("def f(x : R) : R = x\n", evm="spec", backend=b)(1.0) == (1.0, (1.0,))


def test_cli_compile_prints_source_that_compiles(capsys):
    for what in ("grad", "vjp", "primal"):
        assert main(["compile", EXAMPLE, "--what", what]) == 0
        source = capsys.readouterr().out
        compile(source, "<test>", "exec")
        assert "def entry" in source
    assert main(["compile", EXAMPLE, "--json", "--no-simplify", "--evm", "map"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["simplified"] is False and "_E.run(" in out["source"]
    assert main(["compile", EXAMPLE, "--evm", "spec"]) == 2
    assert "spec" in capsys.readouterr().err


def test_cli_grad_backends_and_show_simplify(capsys):
    outs = []
    for b in ("compiled", "interp"):
        assert main(["grad", EXAMPLE, "--args", "[2.0, 3.0]", "--backend", b, "--json"]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert outs[0] == outs[1]
    assert main(["show", EXAMPLE, "--simplify"]) == 0
    simplified = capsys.readouterr().out
    assert main(["show", EXAMPLE]) == 0
    plain = capsys.readouterr().out
    assert "simplified" in simplified and len(simplified) < len(plain)
    assert main(["grad", EXAMPLE, "--args", "[2.0, 3.0]", "--backend", "jit"]) == 2


def test_straight_line_gradient_is_straight_line_code():
    """x * y + sin x: no function is defined or called in the gradient's code
    but math.sin/cos; the cotangents are accumulated in locals."""
    prog = chad.load(open(EXAMPLE).read())
    source = backend.gradient_module(prog, prog.find(None)).source
    body = [line.strip() for line in source.splitlines()[3:] if line.strip()]
    assert sum(line.startswith("def ") for line in body) == 1
    assert "_partial" not in source and "cells" not in source
    assert len(body) <= 20


@pytest.mark.parametrize("name", ["basic.chad", "calls.chad", "compose.chad", "prims.chad",
                                  "softmax_xent.chad", "stencil.chad", "map_closure.chad"])
def test_compiled_gradient_agrees_with_finite_differences_of_the_compiled_primal(name):
    text = open(os.path.join(ROOT, "examples", name)).read()
    args = json.loads(re.search(r"# args: (.*)", text).group(1))
    prog = chad.load(text)
    args = list(api.decode_args(prog.find(None), args).values())
    assert_gradient_matches_fd(chad, prog, args, rel=1e-4)


SIGNED_ZEROS = [
    # a cell whose adds are all -0.0: the interpreter's cell sums from 0.0
    ("def f(x : R, y : R) : R = x * y", [(1.5, -0.0), (-0.0, -0.0), (0.0, 2.0)]),
    # two adds to x's cell, a let's cell with one and with two adds
    ("def f(x : R, y : R) : R = let z = x * y in z * y + x * y",
     [(1.5, -0.0), (-0.0, -0.0), (-0.0, 0.0), (2.0, 3.0)]),
    ("def f(x : R, y : R) : R = let z = x * y in let w = z * 0.0 in w * y + z",
     [(1.5, -0.0), (-0.0, -0.0), (-2.0, 0.0), (2.0, -3.0)]),
]


@pytest.mark.parametrize("text, points", SIGNED_ZEROS)
def test_cells_held_in_locals_keep_the_sign_of_a_zero(text, points):
    """The compiled code skips the `+ 0.0` of a cell's first add (codegen's
    LocalCells); gradients must still equal the interpreter's bit for bit,
    -0.0 and 0.0 told apart."""
    backend.clear_cache()
    for args in points:
        for ctg in (1.0, -1.0, -0.0):
            ref = chad.grad(text, backend="interp")(*args, ctg=ctg)
            got = chad.grad(text)(*args, ctg=ctg)
            assert [x.hex() for x in got[1]] == [x.hex() for x in ref[1]], (args, ctg)
            assert got[0].hex() == ref[0].hex()


FAST_MATH_PROGRAMS = [
    "def f(x : R, y : R) : R = sin x * cos y + x",
    # inside functions the generated code defines (a map's body, a def)
    "def f(x : R, y : R) : R = sum (map (\\(a : R) -> sin (a * y)) (build 3 (\\i -> x)))",
    "def g(a : R) : R = cos a * a\n\ndef f(x : R, y : R) : R = g(x) + g(y)",
]
SPECIAL = [math.inf, -math.inf, math.nan, 0.5, -0.0]


@pytest.mark.parametrize("text", FAST_MATH_PROGRAMS)
def test_sine_and_cosine_of_an_infinity_are_nan_compiled(text):
    """Gradients and primals call math.sin/cos directly and rerun with the
    table's versions when those raise (backend.with_fast_math): the same values
    as the interpreter's on infinities and NaN too."""
    backend.clear_cache()
    grad, primal = chad.grad(text), chad.primal(text)
    ref_grad = chad.grad(text, backend="interp")
    ref_primal = chad.primal(text, backend="interp")
    for x in SPECIAL:
        for y in (0.25, math.inf):
            assert canon(grad(x, y)) == canon(ref_grad(x, y)), (x, y)
            assert canon(primal(x, y)) == canon(ref_primal(x, y)), (x, y)
