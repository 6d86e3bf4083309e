"""The library API: `import chad` then `chad.grad(...)`, `chad.vjp(...)`,
`chad.primal(...)`, `chad.cost(...)`, `chad.run(...)`.

`grad`, `vjp` and `primal` run compiled code by default (`backend="compiled"`,
chad/compile/): generated Python, compiled once per (program, def, transform,
runtime) and cached. `backend="interp"` runs the counting evaluator, the
reference (chad/costmodel/evaluate.py); `run` and `cost` always do, since they
report steps. Both backends give the same values and gradients. A run-time
error of compiled code is reported as the interpreter reports it (with the
program's location): the call is replayed on the interpreter to find it.

Programs may be given as text (parsed and type checked here) or as a parsed
`Program`. Arguments are Python values or their JSON form (numbers, lists for
pairs and arrays, {"inl": v} for sums). Gradients come back dense, as Python
values: floats, tuples for pairs, `Inj` for sums, numpy arrays for Array R.
"""

from __future__ import annotations

from typing import Any, Sequence

from attrs import frozen

from chad.costmodel.evaluate import Evaluator
from chad.costmodel.lacm import SpecLACM
from chad.costmodel.measure import (  # noqa: F401  (the TH2 numbers, re-exported here)
    C_CONST, C_PARAMS, C_PRIMAL, UNSET, CostReport, measure, th2_bound,
)
from chad.runtime.registry import make_evm as _make_runtime

from . import features
from .checker import check_program
from .compile import backend as compiled
from .compile import convert
from .cotangents import ctg_from_json, densify
from .deep import run_deep
from .errors import ChadError, UsageError
from .parser import parse_program
from .terms import Def, Program
from .transform.registry import get_transform
from .types import Real, Type, is_first_order
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


@frozen
class VJPResult:
    value: Any
    primal_steps_forward: int  # steps of the forward (primal) pass of the derivative


BACKENDS = ("compiled", "interp")


def _backend(backend: str | None, evm: str = "array") -> str:
    """The backend to use: as given, or by default compiled, except with the spec
    EVM (the formalisation's LACM, a model for the counting evaluator only)."""
    if backend is None:
        return "interp" if evm == "spec" else "compiled"
    if backend not in BACKENDS:
        raise UsageError(f"unknown backend {backend!r} (choose from {', '.join(BACKENDS)})")
    return backend


def vjp(program: str | Program, fn: str | None = None, evm: str = "array",
        transform: str = "efficient", backend: str | None = None, simplify: bool = True):
    """`vjp(prog)(*args)` gives (value, backprop); backprop(ctg) gives the dense
    gradient, one cotangent per parameter. ctg may be sparse (None = zero).
    backend: "compiled" (the default, except with evm="spec") or "interp"."""
    backend = _backend(backend, evm)
    prog = load(program)
    d = prog.find(fn)
    spec = get_transform(transform)
    _check_first_order(d)
    if backend == "compiled":
        return _compiled_vjp(prog, d, spec, evm, simplify)
    forward = run_deep(spec.forward_term, d)

    def at(*args):
        env = decode_args(d, args)
        ev = Evaluator(_defs(prog), make_evm(evm))
        (value, bp), _cf = run_deep(ev.eval, forward, dict(env))

        def backprop(ctg=UNSET):
            ct = _decode_ctg(d, ctg, value)
            cells, _steps = run_deep(spec.backward, ev, bp, ct, d)
            return tuple(densify(p.ty, env[p.name], c) for p, c in zip(d.params, cells))

        return value, backprop

    return at


def grad(program: str | Program, fn: str | None = None, evm: str = "array",
         transform: str = "efficient", backend: str | None = None, simplify: bool = True):
    """`grad(prog)(*args, ctg=None)` gives (value, gradients).
    backend: "compiled" (the default, except with evm="spec") or "interp"."""
    backend = _backend(backend, evm)
    prog = load(program)
    d = prog.find(fn)
    if backend == "compiled" and convert.value_independent(d.result):
        _check_first_order(d)
        return _compiled_grad(prog, d, get_transform(transform), evm, simplify)
    f = vjp(prog, fn, evm, transform, backend, simplify)

    def at(*args, ctg=UNSET):
        value, backprop = f(*args)
        return value, backprop(ctg)

    return at


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
    entry, decode = module.entry, _decoder(d)

    def at(*args):
        vals = decode(args)
        try:
            return _call(entry, *vals)
        except Exception as e:  # without a location: replayed on the reference
            _replay(e, f"{d.name}", lambda: run(prog, args, d.name))

    return at


# ------------------------------------------------------------------ the compiled backend

def _decoder(d: Def):
    """args -> the parameters' values (decode_args', with fast paths)."""
    fast = convert.arguments(d.params)

    def slow(args):
        env = decode_args(d, args)
        return [env[p.name] for p in d.params]

    def decode(args):
        return fast(args, slow)

    return decode


def _decode_ctg(d: Def, ctg, value):
    ctg = _default_ctg(d, ctg)
    if ctg is UNSET:
        raise UsageError(f"a cotangent is required for a result of type {d.result}")
    return ctg_from_json(d.result, ctg, "ctg", value)


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


def _replay(error: Exception, label: str, reference) -> None:
    """Compiled code failed: a ChadError with a location is the error to report;
    any other exception is replayed on the interpreter, whose error (with the
    program's location) is the one to report. If the interpreter succeeds, the
    compiler is wrong: say so, never fall back to the interpreter's answer."""
    if isinstance(error, ChadError) and error.loc is not None:
        raise error
    reference()
    raise compiled.CompileError(
        f"the compiled code of {label} failed ({type(error).__name__}: {error}) "
        "where the interpreter does not; please report this") from error


def _compiled_grad(prog: Program, d: Def, spec, evm: str, simplify: bool):
    """The one-term gradient, for results whose cotangent decodes without the
    value (R, Z, (), and pairs of them)."""
    module = compiled.gradient_module(prog, d, spec.name, evm, simplify)
    entry, decode, dense = module.entry, _decoder(d), convert.gradients(d.params)
    cells_of, ctg_of = spec.cells_of, convert.cotangent(d.result)
    real = isinstance(d.result, Real)

    def at(*args, ctg=UNSET):
        vals = decode(args)
        if ctg is UNSET:
            if not real:
                raise UsageError(f"a cotangent is required for a result of type {d.result}")
            ct = 1.0
        else:
            ct = ctg_of(ctg)
        try:
            value, back = _call(entry, *vals, ct)
        except Exception as e:  # without a location: replayed on the reference
            _replay(e, f"the gradient of {d.name}",
                    lambda: grad(prog, d.name, evm, spec.name, "interp")(*args, ctg=ct))
        return value, dense(vals, cells_of(back))

    return at


def _compiled_vjp(prog: Program, d: Def, spec, evm: str, simplify: bool):
    forward, backward = compiled.vjp_modules(prog, d, spec.name, evm, simplify)
    fwd, bwd, decode = forward.entry, backward.entry, _decoder(d)
    dense = convert.gradients(d.params)
    cells_of = spec.cells_of

    def at(*args):
        vals = decode(args)
        try:
            pair = _call(fwd, *vals)
        except Exception as e:  # without a location: replayed on the reference
            _replay(e, f"the forward pass of {d.name}",
                    lambda: vjp(prog, d.name, evm, spec.name, "interp")(*args))
        value = pair[0]

        def backprop(ctg=UNSET):
            ct = _decode_ctg(d, ctg, value)
            try:
                back = _call(bwd, pair, ct)
            except Exception as e:  # without a location: replayed on the reference
                _replay(e, f"the backward pass of {d.name}",
                        lambda: vjp(prog, d.name, evm, spec.name, "interp")(*args)[1](ct))
            return dense(vals, cells_of(back))

        return value, backprop

    return at


def cost(program: str | Program, args: Sequence[Any], ctg: Any = UNSET, fn: str | None = None,
         transform: str = "efficient", evm: str = "array") -> CostReport:
    """Primal steps, gradient steps (TH2's left side) and the TH2 bound: the
    measurement of chad/costmodel/measure.py, on the arguments checked here."""
    prog = load(program)
    d = prog.find(fn)
    _check_first_order(d)
    return measure(prog, decode_args(d, args), ctg, transform, evm, fn).report()


def _default_ctg(d: Def, ctg):
    """The default cotangent: 1.0 for a result of type R."""
    if ctg is UNSET and isinstance(d.result, Real):
        return 1.0
    return ctg


def _check_first_order(d: Def) -> None:
    for p in d.params:
        if not is_first_order(p.ty):
            raise UsageError(f"cannot differentiate {d.name}: parameter {p.name} has a function type {p.ty}")
    if not is_first_order(d.result):
        raise UsageError(f"cannot differentiate {d.name}: its result type {d.result} is a function type")
