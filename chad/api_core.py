"""The core of the library API: loading (parse and type check), running on the
counting evaluator, and the compiled primal, with the replay of a compiled
failure on the evaluator. chad/api.py re-exports all of it and adds the
derivatives; the Python front end (chad/frontend/) calls only this layer.
"""

from __future__ import annotations

from typing import Any, Sequence

from chad.costmodel.evaluate import Evaluator
from chad.costmodel.lacm import SpecLACM
from chad.runtime.registry import make_evm as _make_runtime

from . import features
from .checker import check_program
from .compile import backend as compiled
from .compile import convert
from .deep import run_deep
from .errors import ChadError, UsageError
from .parser import parse_program
from .terms import Def, Program
from .types import holds_array
from .values import value_from_json

features.load()  # the composition root: every transform and extension

def load(program: str | Program, file: str = "<input>") -> Program:
    """Parse (if text) and type check a program."""
    if isinstance(program, str):
        program = parse_program(program, file)
    if _is_checked(program):
        return program
    return check_program(program)


def _is_checked(program: Program) -> bool:
    return all(d.body.ty is not None for d in program.defs)


def make_evm(name: str):
    """An EVM implementation by name: map, array, parallel (or spec, the oracle)."""
    if name == "spec":
        return SpecLACM()
    return _make_runtime(name)


def _defs(program: Program) -> dict[str, Def]:
    return {d.name: d for d in program.defs}


def decode_args(d: Def, args: Sequence[Any]) -> dict[str, Any]:
    """Check arity and decode each argument against its parameter's type."""
    if not isinstance(args, (list, tuple)):
        raise UsageError(f"args: expected a list of {len(d.params)} argument(s) for {d.name}")
    if len(args) != len(d.params):
        raise UsageError(f"args: {d.name} takes {len(d.params)} argument(s) "
                         f"({', '.join(f'{p.name} : {p.ty}' for p in d.params)}), got {len(args)}")
    return {p.name: value_from_json(p.ty, a, f"args[{i}]")
            for i, (p, a) in enumerate(zip(d.params, args))}


def run(program: str | Program, args: Sequence[Any], fn: str | None = None) -> tuple[Any, int]:
    """Evaluate def `fn` (default: the last) on args: (value, steps)."""
    prog = load(program)
    d = prog.find(fn)
    env = decode_args(d, args)
    return run_deep(Evaluator(_defs(prog)).eval, d.body, env)

BACKENDS = ("compiled", "interp")


def _backend(backend: str | None, evm: str = "array") -> str:
    """The backend to use: as given, or by default compiled, except with the spec
    EVM (the formalisation's LACM, a model for the counting evaluator only)."""
    if backend is None:
        return "interp" if evm == "spec" else "compiled"
    if backend not in BACKENDS:
        raise UsageError(f"unknown backend {backend!r} (choose from {', '.join(BACKENDS)})")
    return backend

def primal(program: str | Program, fn: str | None = None, backend: str | None = None,
           simplify: bool = True):
    """`primal(prog)(*args)` gives the value of def `fn` (default: the last)."""
    backend = _backend(backend)
    prog = load(program)
    d = prog.find(fn)
    if backend == "interp":
        defs = _defs(prog)

        def interp(*args):
            env = decode_args(d, args)
            return run_deep(Evaluator(defs).eval, d.body, env)[0]

        return interp
    module = compiled.primal_module(prog, d, simplify)
    entry, decode = module.entry, _decoder(d, copy=holds_array(d.result))
    located = not compiled.rewrites(prog, True, "efficient", simplify)

    def at(*args):
        vals = decode(args)
        try:
            return _call(entry, *vals)
        except Exception as e:  # without a location: replayed on the reference
            _replay(e, f"{d.name}", lambda: run(prog, args, d.name), located)

    return at

def compiled_primal(program: str | Program, fn: str | None = None, simplify: bool = True):
    """The compiled primal's entry function itself: the def's parameters' values
    (as `primal` decodes them) -> its value, with no conversion or error replay."""
    prog = load(program)
    return compiled.primal_module(prog, prog.find(fn), simplify).entry


def _decoder(d: Def, copy: bool = True):
    """args -> the parameters' values (decode_args', with fast paths); with
    `copy` False, float64 arrays are used as given (convert.arguments): only for
    a call that returns no array and keeps nothing (a gradient, not a vjp)."""
    fast = convert.arguments(d.params, copy)

    def slow(args):
        env = decode_args(d, args)
        return [env[p.name] for p in d.params]

    def decode(args):
        return fast(args, slow)

    return decode

def _call(fn, *args):
    """fn(*args) on this thread; if it recurses too deeply for it (an action
    tree of the map or parallel runtime is run recursively, as is a program the
    simplifier could not flatten), the same compiled call again on a big-stack
    thread (chad/deep.py). Compiled functions have no effects outside their
    result, so the retry is the same computation."""
    try:
        return fn(*args)
    except RecursionError:
        return run_deep(fn, *args)


def _replay(error: Exception, label: str, reference, located: bool = True) -> None:
    """Compiled code failed: a ChadError with a location is the error to report
    (`located`: unless the code is of a rewritten program, whose first failing
    read may not be the interpreter's); any other exception is replayed on the
    interpreter, whose error (with the program's location) is the one to
    report. If the interpreter succeeds, the compiler is wrong: say so, never
    fall back to the interpreter's answer."""
    if located and isinstance(error, ChadError) and error.loc is not None:
        raise error
    reference()
    raise compiled.CompileError(
        f"the compiled code of {label} failed ({type(error).__name__}: {error}) "
        "where the interpreter does not; please report this") from error
