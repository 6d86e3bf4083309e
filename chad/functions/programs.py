"""Higher-order programs for experiments and tests: the t_n of Efficient CHAD (Smeding & Vákár), §9, as
typed terms and as source text (chad.costmodel.measure measures their gradients).

    x_n : R ⊢ t_n := (λx_{n-1}. (··· λx_2. (λx_1. x_1) x_2 ···) x_{n-1}) x_n : R

that is s_1 = x_1 and s_k = (λx_{k-1}. s_{k-1}) x_k, t_n = s_n: n - 1 nested
applications of a lambda to a variable (semantically the identity; O(n) to run).
"""

from __future__ import annotations

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
