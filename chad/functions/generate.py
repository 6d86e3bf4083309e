"""Random well-typed higher-order programs (source text), for tests and for
measuring the TH2-form bound on programs with functions.

The programs use lambdas capturing active (parameter-dependent) variables,
functions chosen by a case (`if`) and then applied, functions in pairs, curried
functions, functions returned by defs and passed to defs, defs called several
times, and (with arrays) `map` / `build` / `fold` with closures. Every lambda is
annotated, so the checker needs no inference beyond the local one.
"""

from __future__ import annotations

import random

PRELUDE = """\
def twice(f : R -> R, x : R) : R = f (f x)
def scaler(a : R) : R -> R = \\(y : R) -> a * y
def both(p : (R -> R) * (R -> R), x : R) : R = (fst p) ((snd p) x)
def poly(x : R, y : R) : R = x * y + sin x
"""

ARRAY_PRELUDE = """\
def asum(xs : Array R) : R = sum xs
def mapf(f : R -> R, xs : Array R) : Array R = map f xs
"""

F = "R -> R"


class _HigherOrderSourceGen:
    """Generates the source text of one random higher-order program (expressions
    of type R, R -> R and Array R), from a seeded random.Random."""

    def __init__(self, rng: random.Random, arrays: bool):
        self.rng = rng
        self.arrays = arrays
        self.n = 0

    def fresh(self, stem: str) -> str:
        self.n += 1
        return f"{stem}{self.n}"

    def vars_of(self, env, ty):
        return [v for v, t in env if t == ty]

    # expressions of type R
    def real(self, env, depth: int) -> str:
        r = self.rng
        vs = self.vars_of(env, "R")
        if depth <= 0 or r.random() < 0.15:
            if vs and r.random() < 0.85:
                return r.choice(vs)
            return f"{r.choice([0.5, 1.5, 2.0, 0.25])}"
        k = r.randrange(12 if self.arrays else 10)
        d = depth - 1
        if k == 0:
            return f"({self.real(env, d)} + {self.real(env, d)})"
        if k == 1:
            return f"({self.real(env, d)} * {self.real(env, d)})"
        if k == 2:
            return f"{r.choice(['sin', 'tanh', 'cos'])} ({self.real(env, d)})"
        if k == 3:  # let of a function, then used
            f = self.fresh("f")
            return f"(let {f} = {self.fun(env, d)} in {self.real(env + [(f, F)], d)})"
        if k == 4:  # application
            return f"({self.fun_atom(env, d)} {self.atom_real(env, d)})"
        if k == 5:  # a function chosen by a case, then applied
            g = self.fresh("g")
            return (f"(let {g} = if {self.real(env, d)} < {self.real(env, d)} then "
                    f"{self.fun(env, d)} else {self.fun(env, d)} in "
                    f"{g} ({self.real(env, d)}) + {g} ({self.real(env, d)}))")
        if k == 6:  # defs taking functions
            return r.choice([
                f"twice({self.fun(env, d)}, {self.real(env, d)})",
                f"both(({self.fun(env, d)}, {self.fun(env, d)}), {self.real(env, d)})",
                f"poly({self.real(env, d)}, {self.real(env, d)})",
            ])
        if k == 7:  # functions in a pair
            p = self.fresh("p")
            return (f"(let {p} = ({self.fun(env, d)}, {self.real(env, d)}) in "
                    f"(fst {p}) (snd {p}))")
        if k == 8:  # let of a real (an active variable for closures below)
            x = self.fresh("v")
            return f"(let {x} = {self.real(env, d)} in {self.real(env + [(x, 'R')], d)})"
        if k == 9:  # curried function
            c = self.fresh("c")
            y, z = self.fresh("y"), self.fresh("z")
            body = self.real(env + [(y, "R"), (z, "R")], d)
            return (f"(let {c} = \\({y} : R) -> \\({z} : R) -> {body} in "
                    f"{c} ({self.real(env, d)}) ({self.real(env, d)}))")
        if k == 10:  # map with a closure
            return f"sum (map {self.fun(env, d)} {self.array(env, d)})"
        # fold with a closure capturing a real, over a built array
        q = self.fresh("q")
        w = self.real(env, d)
        return (f"fold (\\({q} : R * R) -> fst {q} + snd {q} * tanh ({w})) "
                f"(build 3 (\\i{self.n} -> {self.real(env, d)}))")

    def atom_real(self, env, depth):
        return f"({self.real(env, depth)})"

    def array(self, env, depth):
        arrs = self.vars_of(env, "Array R")
        r = self.rng
        if arrs and r.random() < 0.6:
            return r.choice(arrs)
        if arrs and r.random() < 0.5:
            return f"mapf({self.fun(env, depth - 1)}, {r.choice(arrs)})"
        i = self.fresh("i")
        return f"(build 3 (\\{i} -> {self.real(env + [(i, 'Z')], depth - 1)} * toreal {i}))"

    # expressions of type R -> R
    def fun(self, env, depth: int) -> str:
        r = self.rng
        fs = self.vars_of(env, F)
        if depth <= 0 or r.random() < 0.2:
            if fs and r.random() < 0.7:
                return r.choice(fs)
            y = self.fresh("y")
            return f"(\\({y} : R) -> {self.real(env + [(y, 'R')], max(depth - 1, 0))})"
        k = r.randrange(6)
        d = depth - 1
        if k <= 1:
            y = self.fresh("y")
            return f"(\\({y} : R) -> {self.real(env + [(y, 'R')], d)})"
        if k == 2:
            return f"(if {self.real(env, d)} < {self.real(env, d)} then {self.fun(env, d)} else {self.fun(env, d)})"
        if k == 3:
            return f"scaler({self.real(env, d)})"
        if k == 4:  # composition: a closure capturing two functions
            f1, f2, y = self.fresh("f"), self.fresh("f"), self.fresh("y")
            return (f"(let {f1} = {self.fun(env, d)} in let {f2} = {self.fun(env, d)} in "
                    f"\\({y} : R) -> {f1} ({f2} {y}))")
        p = self.fresh("p")
        return f"(let {p} = ({self.fun(env, d)}, {self.fun(env, d)}) in snd {p})"

    def fun_atom(self, env, depth):
        return f"({self.fun(env, depth)})"


def generate(seed: int, depth: int = 4, arrays: bool = False) -> tuple[str, list]:
    """(program text, arguments) of a random higher-order program whose last def
    `main` has first-order parameters (reals, and an Array R with arrays=True)
    and a real result."""
    rng = random.Random(seed)
    g = _HigherOrderSourceGen(rng, arrays)
    env = [("a", "R"), ("b", "R")]
    params = "a : R, b : R"
    args: list = [round(rng.uniform(-1.5, 1.5), 3), round(rng.uniform(-1.5, 1.5), 3)]
    if arrays:
        env.append(("xs", "Array R"))
        params += ", xs : Array R"
        args.append([round(rng.uniform(-1.5, 1.5), 3) for _ in range(rng.randrange(1, 5))])
    body = g.real(env, depth)
    text = PRELUDE + (ARRAY_PRELUDE if arrays else "") + f"def main({params}) : R =\n  {body}\n"
    return text, args
