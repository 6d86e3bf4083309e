"""The library API of forward mode: `jvp`, `jacfwd`, `hessian` and `jvp_cost`
(docs/forward-mode.md), next to the reverse-mode API of chad/api.py and with its
conventions: a program is source text or a parsed `Program`, `fn` names the def
(None: the last), arguments are Python values or their JSON form (floats, numpy
arrays, tuples or lists for pairs, `Inj` or {"inl": v} for sums), results are
Python values (floats, numpy arrays for Array R, tuples, `Inj`).

    jvp(program, fn, primals, tangents)     (value, tangent of the value)
    jacfwd(program, fn, argnums=0)(*args)   the Jacobian, one jvp per input
                                            direction, as a numpy array
    jvp_cost(program, fn, primals, tangents)
                                            ForwardCost: the primal's and the
                                            jvp's steps on the counting evaluator
    hessian(program, fn, argnums=0)(*args)  second derivatives, forward over
                                            forward (one run per pair of
                                            input directions)

The derivative is CHAD's forward transformation (chad/transform/forward.py); it
runs compiled by default (backend="compiled": simplified and compiled once per
program and def by chad/compile/, then cached) or on the counting evaluator
(backend="interp"); `jvp_cost` always counts on the evaluator. The tangent of an argument with no real in it (Z, Bool,
Array Z, ...) is None; see chad/tangents.py for the shapes of tangents.
The Hessian is forward over forward: forward over reverse is not provided, as
the reverse derivative's terms (the EVM, cotangent bags) have no forward rules
(docs/forward-mode.md).
"""

from __future__ import annotations

import threading
from typing import Any, Sequence

import numpy as np
from attrs import frozen

from . import features
from .costmodel.evaluate import Evaluator
from .deep import run_deep
from .compile import backend as compiled
from .errors import ChadError, UsageError
from .checker import check_program
from .parser import parse_program
from .tangents import tangent_from_user, tangent_to_user, zero_tangent
from .terms import Def, Program
from .transform.forward import forward_def, tangent_name, tangent_names
from .types import ArrayT, Real, Type, is_first_order
from .values import value_from_json

features.load()  # the composition root: every transform and extension

BACKENDS = ("compiled", "interp")


def _load(program: str | Program) -> Program:
    if isinstance(program, str):
        return check_program(parse_program(program))
    if all(d.body.ty is not None for d in program.defs):
        return program
    return check_program(program)


def _check_first_order(d: Def) -> None:
    for p in d.params:
        if not is_first_order(p.ty):
            raise UsageError(f"cannot differentiate {d.name}: parameter {p.name} has a "
                             f"function type {p.ty}")
    if not is_first_order(d.result):
        raise UsageError(f"cannot differentiate {d.name}: its result type {d.result} is a "
                         f"function type")


def _backend(backend: str | None) -> str:
    if backend is None:
        return "compiled"
    if backend not in BACKENDS:
        raise UsageError(f"unknown backend {backend!r} for forward mode (choose from "
                         f"{', '.join(BACKENDS)})")
    return backend


_TERMS: dict[tuple[int, int], tuple[Def, Any]] = {}
_LOCK = threading.Lock()


def forward_term(d: Def, order: int = 1):
    """F(body) of the def (chad/transform/forward.py; order 2: F(F(body))),
    cached per def."""
    hit = _TERMS.get((id(d), order))
    if hit is not None and hit[0] is d:
        return hit[1]
    term = run_deep(forward_def, d, order)
    with _LOCK:
        _TERMS[(id(d), order)] = (d, term)
    return term


def _sequence(x, what: str, d: Def) -> list:
    if not isinstance(x, (list, tuple)):
        raise UsageError(f"{what}: expected a list of {len(d.params)} value(s) for {d.name}, "
                         f"got {type(x).__name__}")
    if len(x) != len(d.params):
        raise UsageError(f"{what}: {d.name} takes {len(d.params)} argument(s) "
                         f"({', '.join(f'{p.name} : {p.ty}' for p in d.params)}), got {len(x)}")
    return list(x)


def _environment(d: Def, primals, tangents, names=("primals", "tangents")) -> dict:
    """The forward derivative's environment: each parameter and its tangent.
    Errors name the offending part as names[0][i] or names[1][i]."""
    env = {}
    pn, tn = names
    for i, (p, a) in enumerate(zip(d.params, _sequence(primals, pn, d))):
        env[p.name] = value_from_json(p.ty, a, f"{pn}[{i}]")
    for i, (p, t) in enumerate(zip(d.params, _sequence(tangents, tn, d))):
        env[tangent_name(p.name)] = tangent_from_user(p.ty, env[p.name], t, f"{tn}[{i}]")
    return env


def _run(prog: Program, d: Def, env: dict, order: int = 1):
    """((value, tangent), steps) of the forward derivative on the counting evaluator."""
    defs = {x.name: x for x in prog.defs}
    return run_deep(Evaluator(defs).eval, forward_term(d, order), env)


def _runner(prog: Program, d: Def, backend: str, simplify: bool = True, order: int = 1):
    """env -> (value, tangent) on the backend: the counting evaluator, or the
    generated Python of chad/compile/ (compiled once per program and def, cached;
    a run-time error is replayed on the evaluator, which reports it with its
    location, as chad/api.py does)."""
    if backend == "interp":
        return lambda env: _run(prog, d, env, order)[0]
    module = compiled.jvp_module(prog, d, simplify, order)
    entry = module.entry
    names = tangent_names([p.name for p in d.params], order)

    def run(env):
        args = [env[n] for n in names]
        try:
            try:
                return entry(*args)
            except RecursionError:
                return run_deep(entry, *args)
        except Exception as e:
            if isinstance(e, ChadError) and e.loc is not None:
                raise
            _run(prog, d, env, order)  # raises the located error, if the program has one
            raise compiled.CompileError(
                f"the compiled jvp of {d.name} failed ({type(e).__name__}: {e}) where the "
                "interpreter does not; please report this") from e

    return run


def _prepare(program, fn):
    prog = _load(program)
    d = prog.find(fn)
    _check_first_order(d)
    return prog, d


def jvp(program: str | Program, fn: str | None, primals: Sequence, tangents: Sequence, *,
        backend: str | None = None, simplify: bool = True):
    """(value, tangent): the def's value at `primals` and its derivative applied
    to `tangents` (one per parameter; None for a parameter with no real in it).
    backend: "compiled" (default) or "interp" (the counting evaluator); both give
    the same results."""
    return run_jvp(program, fn, primals, tangents, backend, simplify)


def run_jvp(program: str | Program, fn: str | None, primals: Sequence, tangents: Sequence,
            backend: str | None = None, simplify: bool = True,
            names: tuple[str, str] = ("primals", "tangents")):
    """jvp, with the names its errors give the primals and the tangents (the
    command line's are "args" and "tangents")."""
    backend = _backend(backend)
    prog, d = _prepare(program, fn)
    env = _environment(d, primals, tangents, names)
    value, tangent = _runner(prog, d, backend, simplify)(env)
    return value, tangent_to_user(d.result, value, tangent)


@frozen
class ForwardCost:
    """The numbers of `chad check --mode forward`: the primal's steps and those of
    its forward derivative (the jvp, primal included) on the same arguments."""

    primal_steps: int
    jvp_steps: int
    params: int

    @property
    def ratio(self) -> float:
        return self.jvp_steps / max(1, self.primal_steps)


def jvp_cost(program: str | Program, fn: str | None, primals: Sequence,
             tangents: Sequence) -> ForwardCost:
    """Steps of the primal and of the jvp on the counting evaluator."""
    prog, d = _prepare(program, fn)
    env = _environment(d, primals, tangents)
    defs = {x.name: x for x in prog.defs}
    primal_env = {p.name: env[p.name] for p in d.params}
    _v, primal_steps = run_deep(Evaluator(defs).eval, d.body, primal_env)
    _r, steps = _run(prog, d, env)
    return ForwardCost(primal_steps, steps, len(d.params))


# ----------------------------------------------------------------- Jacobians


def _flat_shape(ty: Type, value, what: str) -> tuple[int, ...]:
    """() for R, (n,) for Array R; anything else is not supported by jacfwd."""
    if isinstance(ty, Real):
        return ()
    if isinstance(ty, ArrayT) and isinstance(ty.elem, Real):
        return (len(value),)
    raise UsageError(f"jacfwd: {what} has type {ty}; jacfwd supports R and Array R "
                     f"(use jvp for other types)")


def jacfwd(program: str | Program, fn: str | None = None, argnums: int | Sequence[int] = 0, *,
           backend: str | None = None, simplify: bool = True):
    """`jacfwd(program, fn, argnums)(*args)`: the Jacobian of the def's result
    with respect to the argument(s) `argnums`, by one jvp per input direction.

    For a result of type R or Array R (shape () or (m,)) and an argument of type
    R or Array R (shape () or (n,)) the Jacobian is a numpy array of shape
    result shape + argument shape, as in JAX: a 0-d array for R -> R. With a tuple
    `argnums`, a tuple of such arrays. Other types (pairs, sums, nested arrays)
    are a UsageError; use jvp for them."""
    backend = _backend(backend)
    prog, d = _prepare(program, fn)
    run = _runner(prog, d, backend, simplify)
    many = not isinstance(argnums, int)
    nums = tuple(argnums) if many else (argnums,)
    for k in nums:
        if not isinstance(k, int) or not 0 <= k < len(d.params):
            raise UsageError(f"jacfwd: argnums {argnums!r} out of range: {d.name} has "
                             f"{len(d.params)} parameter(s)")

    def at(*args):
        values = {p.name: value_from_json(p.ty, a, f"args[{i}]")
                  for i, (p, a) in enumerate(zip(d.params, _sequence(list(args), "args", d)))}
        zeros = {tangent_name(p.name): zero_tangent(p.ty, values[p.name]) for p in d.params}
        out = []
        for k in nums:
            p = d.params[k]
            in_shape = _flat_shape(p.ty, values[p.name], f"argument {k} ({p.name})")
            columns = []
            value = None
            for j in range(int(np.prod(in_shape, dtype=int))):
                env = dict(values)
                env.update(zeros)
                if in_shape:
                    t = np.zeros(in_shape)
                    t[j] = 1.0
                else:
                    t = 1.0
                env[tangent_name(p.name)] = t
                value, tangent = run(env)
                columns.append(np.asarray(tangent, dtype=np.float64))
            if value is None:  # an empty array argument: no direction to run
                value, _s = run_deep(Evaluator({x.name: x for x in prog.defs}).eval, d.body,
                                     dict(values))
            out_shape = _flat_shape(d.result, value, "the result")
            if columns:
                jac = np.stack(columns, axis=-1).reshape(out_shape + in_shape)
            else:
                jac = np.zeros(out_shape + in_shape)
            out.append(jac)
        return tuple(out) if many else out[0]

    return at


def hessian(program: str | Program, fn: str | None = None, argnums: int = 0, *,
            backend: str | None = None, simplify: bool = True):
    """`hessian(program, fn, argnums)(*args)`: the matrix of second derivatives of
    a def with a result of type R with respect to its argument `argnums`, of type
    R or Array R (shape () or (n,)): a numpy array of shape argument shape +
    argument shape. Forward over forward: the forward derivative of the forward
    derivative (chad/transform/forward.py, order 2), one run per pair of input
    directions (n² runs, each a constant times the program); forward over reverse
    is not available (docs/forward-mode.md)."""
    backend = _backend(backend)
    prog, d = _prepare(program, fn)
    if not isinstance(d.result, Real):
        raise UsageError(f"hessian: the result of {d.name} has type {d.result}; hessian "
                         f"supports a result of type R")
    if not isinstance(argnums, int) or not 0 <= argnums < len(d.params):
        raise UsageError(f"hessian: argnums {argnums!r} out of range: {d.name} has "
                         f"{len(d.params)} parameter(s)")
    run = _runner(prog, d, backend, simplify, order=2)
    p = d.params[argnums]

    def at(*args):
        values = {q.name: value_from_json(q.ty, a, f"args[{i}]")
                  for i, (q, a) in enumerate(zip(d.params, _sequence(list(args), "args", d)))}
        shape = _flat_shape(p.ty, values[p.name], f"argument {argnums} ({p.name})")
        n = int(np.prod(shape, dtype=int))
        # every tangent zero: x, dd$x, d$x, dd$d$x for each parameter
        base = {}
        for q in d.params:
            z = zero_tangent(q.ty, values[q.name])
            for name in tangent_names([q.name], 2):
                base[name] = values[q.name] if name == q.name else z
        h = np.zeros((n, n))

        def unit(k):
            if not shape:
                return 1.0
            e = np.zeros(shape)
            e[k] = 1.0
            return e

        for i in range(n):
            for j in range(n):
                env = dict(base)
                env[tangent_name(p.name, 1)] = unit(i)
                env[tangent_name(p.name, 2)] = unit(j)
                (_vt, (_dv, ddt)) = run(env)
                h[i, j] = ddt
        return h.reshape(shape + shape)

    return at
