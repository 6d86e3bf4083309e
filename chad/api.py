"""The library API: `import chad` then `chad.grad(...)`, `chad.vjp(...)`,
`chad.cost(...)`, `chad.run(...)`.

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
from .cotangents import ctg_from_json, densify
from .deep import run_deep
from .errors import UsageError
from .parser import parse_program
from .terms import Def, Program
from .transform.registry import get_transform
from .types import Real, is_first_order
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


def vjp(program: str | Program, fn: str | None = None, evm: str = "array",
        transform: str = "efficient"):
    """`vjp(prog)(*args)` gives (value, backprop); backprop(ctg) gives the dense
    gradient, one cotangent per parameter. ctg may be sparse (None = zero)."""
    prog = load(program)
    d = prog.find(fn)
    spec = get_transform(transform)
    _check_first_order(d)
    forward = run_deep(spec.forward_term, d)

    def at(*args):
        env = decode_args(d, args)
        ev = Evaluator(_defs(prog), make_evm(evm))
        (value, bp), _cf = run_deep(ev.eval, forward, dict(env))

        def backprop(ctg=UNSET):
            ctg = _default_ctg(d, ctg)
            if ctg is UNSET:
                raise UsageError(f"a cotangent is required for a result of type {d.result}")
            ct = ctg_from_json(d.result, ctg, "ctg", value)
            cells, _steps = run_deep(spec.backward, ev, bp, ct, d)
            return tuple(densify(p.ty, env[p.name], c) for p, c in zip(d.params, cells))

        return value, backprop

    return at


def grad(program: str | Program, fn: str | None = None, evm: str = "array",
         transform: str = "efficient"):
    """`grad(prog)(*args, ctg=None)` gives (value, gradients)."""
    f = vjp(program, fn, evm, transform)

    def at(*args, ctg=UNSET):
        value, backprop = f(*args)
        return value, backprop(ctg)

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
