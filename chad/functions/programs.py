"""Higher-order programs for experiments and tests: the t_n of Efficient CHAD (Smeding & Vákár), §9, as
typed terms and as source text, and measurements of their gradients.

    x_n : R ⊢ t_n := (λx_{n-1}. (··· λx_2. (λx_1. x_1) x_2 ···) x_{n-1}) x_n : R

that is s_1 = x_1 and s_k = (λx_{k-1}. s_{k-1}) x_k, t_n = s_n: n - 1 nested
applications of a lambda to a variable (semantically the identity; O(n) to run).
"""

from __future__ import annotations

from typing import Any

from chad.terms import App, Def, Lam, Param, Program, Var
from chad.types import Fun, R


def t_n_def(n: int, name: str = "t") -> Def:
    """t_n as a checked def `t(x_n : R) : R` (built directly, every node typed)."""
    if n < 1:
        raise ValueError("t_n needs n >= 1")
    body = Var("x1", ty=R)
    for k in range(2, n + 1):
        lam = Lam(f"x{k - 1}", R, body, (), ty=Fun(R, R))
        body = App(lam, Var(f"x{k}", ty=R), ty=R)
    return Def(name, (Param(f"x{n}", R),), R, body)


def t_n_source(n: int, name: str = "t") -> str:
    """t_n in the surface syntax of docs/language.md."""
    s = "x1"
    for k in range(2, n + 1):
        s = f"(\\x{k - 1} -> {s}) x{k}"
    return f"def {name}(x{n} : R) : R = {s}\n"


def t_n_program(n: int) -> Program:
    return Program((t_n_def(n),))


def gradient(program: Program, args: list, ctg: Any = 1.0, transform: str = "efficient",
             evm: str = "array", fn: str | None = None) -> tuple[Any, list, int, int]:
    """(value, sparse cell per parameter, gradient steps, primal steps) of a checked
    program with the named transform ("efficient", "naive-ho", or any registered).

    gradient steps = forward + backward = TH2's left-hand side."""
    from chad.api import _defs, decode_args, make_evm
    from chad.deep import run_deep
    from costmodel.evaluate import Evaluator

    d = program.find(fn)
    spec = get_spec(transform)
    env = decode_args(d, args)
    defs = _defs(program)
    _v, primal = run_deep(Evaluator(defs).eval, d.body, dict(env))
    forward = run_deep(spec.forward_term, d)
    ev = Evaluator(defs, make_evm(evm))
    (value, bp), cf = run_deep(ev.eval, forward, dict(env))
    cells, cb = run_deep(spec.backward, ev, bp, ctg, d)
    return value, cells, cf + cb, primal


def get_spec(transform: str):
    if transform == "naive-ho":
        from .naive_ho import SPEC

        return SPEC
    from chad.transform.registry import get_transform

    return get_transform(transform)


def t_n_table(ns, transforms=("naive-ho", "efficient")) -> list[tuple]:
    """Rows (n, primal steps, gradient steps per transform) for t_n at x_n = 1.5."""
    rows = []
    for n in ns:
        prog = t_n_program(n)
        row: list = [n]
        for tr in transforms:
            _v, _cells, steps, primal = gradient(prog, [1.5], 1.0, tr)
            if len(row) == 1:
                row.append(primal)
            row.append(steps)
        rows.append(tuple(row))
    return rows
