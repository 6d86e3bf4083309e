"""Generated array programs (docs/arrays.md): gradients against central finite
differences, all EVMs agree, and the TH2-form bound 5 + 34*primal + size(ctg) + 4|Γ|.

The generator writes surface programs over the parameters

    a, b : Array R (length N)      x : R        k : Z (0 <= k < N)
    p : Array Z (a permutation of 0..N-1)       ps : Array (R * R) (length N)
    m : Array (Array R) (N rows of length K)

with nested arrays (let-bound matrices, rows read by map), arrays of pairs
(parameters and let-bound builds of pairs, folds over pairs), index expressions
computed from integers (`i`, `length a - 1 - i`, `p ! i`, `k`, literals, reads
under branches), folds with non-trivial combine functions (products, maximum,
pairwise combines) and def calls.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import chad
from chad.api import cost
from tests.fd import fd_gradient, get

EVMS = ["spec", "map", "array", "parallel"]

PARAMS = ("a : Array R, b : Array R, x : R, k : Z, p : Array Z, "
          "ps : Array (R * R), m : Array (Array R)")
PRELUDE = "def sq(y : R) : R = y * y\n"


class _ArraySourceGen:
    """Generates the source text of one array program over PARAMS: a counter for
    fresh names and hypothesis' draw."""

    def __init__(self, draw, n: int, k: int):
        self.draw = draw
        self.n = n
        self.k = k
        self.count = 0

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def pick(self, xs):
        return self.draw(st.sampled_from(list(xs)))

    # index expressions valid in [0, N) / [0, K)
    def index(self, sc) -> str:
        opts = [str(self.draw(st.integers(0, self.n - 1))), "k", "p ! k"]
        for i in sc["idx"]:
            opts += [i, f"(length a - 1 - {i})", f"p ! {i}", f"p ! (length b - 1 - {i})"]
        return self.pick(opts)

    def inner_index(self, sc) -> str:
        return self.pick([str(self.draw(st.integers(0, self.k - 1)))] + sc["jdx"])

    def leaf(self, sc) -> str:
        opts = ["x", "1.5", "toreal (length a)"] + sc["real"]
        opts += [f"{v} ! {{I}}" for v in sc["arr"]]
        opts += [f"fst ({v} ! {{I}})" for v in sc["pairs"]] + [f"snd ({v} ! {{I}})" for v in sc["pairs"]]
        opts += [f"{v} ! {{I}} ! {{J}}" for v in sc["mat"]]
        opts += [f"{r} ! {{J}}" for r in sc["rows"]]
        s = self.pick(opts)
        while "{I}" in s or "{J}" in s:
            s = s.replace("{I}", "(" + self.index(sc) + ")", 1).replace(
                "{J}", "(" + self.inner_index(sc) + ")", 1)
        return s

    def real(self, sc, depth: int) -> str:
        if depth <= 0 or self.draw(st.integers(0, 5)) == 0:
            return self.leaf(sc)
        d = depth - 1
        kind = self.draw(st.integers(0, 15))
        if kind <= 2:
            op = self.pick(["+", "*", "-"])
            return f"({self.real(sc, d)} {op} {self.real(sc, d)})"
        if kind == 3:
            return f"{self.pick(['sin', 'tanh', 'cos'])} ({self.real(sc, d)})"
        if kind == 4:
            return f"sq({self.real(sc, d)})"
        if kind == 5:  # sum of a build over computed indices
            i = self.fresh("i")
            return f"sum (build (length a) (\\{i} -> {self.real(self.add(sc, 'idx', i), d)}))"
        if kind == 6:  # sum of a map over an array
            y = self.fresh("y")
            arr = self.pick(["a", "b"] + sc["arr"])
            return f"sum (map (\\{y} -> {self.real(self.add(sc, 'real', y), d)}) {arr})"
        if kind == 7:  # fold with a non-trivial combine
            q = self.fresh("q")
            comb = self.pick([f"fst {q} + snd {q}", f"fst {q} * snd {q}",
                              f"(if fst {q} > snd {q} then fst {q} else snd {q})",
                              f"fst {q} * snd {q} + sin (fst {q})",
                              f"tanh (fst {q}) + snd {q} * x"])
            i = self.fresh("i")
            arr = self.pick([f"(build (length a) (\\{i} -> {self.real(self.add(sc, 'idx', i), d)}))",
                             "a"] + sc["arr"])
            return f"fold (\\{q} -> {comb}) {arr}"
        if kind == 8:  # fold over an array of pairs, combining pairwise
            q = self.fresh("q")
            arr = self.pick(["ps"] + sc["pairs"])
            proj = self.pick(["fst", "snd"])
            return (f"{proj} (fold (\\{q} -> (fst (fst {q}) + fst (snd {q}), "
                    f"snd (fst {q}) * snd (snd {q}))) {arr})")
        if kind == 9:  # a let-bound array read later
            v, i = self.fresh("v"), self.fresh("i")
            rhs = self.real(self.add(sc, "idx", i), d)
            return f"(let {v} = build (length a) (\\{i} -> {rhs}) in {self.real(self.add(sc, 'arr', v), d)})"
        if kind == 10:  # a let-bound array of pairs
            v, i = self.fresh("w"), self.fresh("i")
            sc2 = self.add(sc, "idx", i)
            return (f"(let {v} = build (length a) (\\{i} -> ({self.real(sc2, d)}, {self.real(sc2, d)})) "
                    f"in {self.real(self.add(sc, 'pairs', v), d)})")
        if kind == 11:  # a let-bound nested array (matrix)
            v, i, j = self.fresh("mm"), self.fresh("i"), self.fresh("j")
            sc2 = self.add(self.add(sc, "idx", i), "jdx", j)
            return (f"(let {v} = build (length a) (\\{i} -> build {self.k} (\\{j} -> {self.real(sc2, d)})) "
                    f"in {self.real(self.add(sc, 'mat', v), d)})")
        if kind == 12:  # rows of a matrix through map
            r = self.fresh("r")
            mat = self.pick(["m"] + sc["mat"])
            return f"sum (map (\\{r} -> {self.real(self.add(sc, 'rows', r), d)}) {mat})"
        if kind == 13:  # reads under branches: the BOne path
            return f"(if {self.real(sc, d)} > 0.0 then {self.real(sc, d)} else {self.real(sc, d)})"
        if kind == 14:
            v = self.fresh("s")
            return f"(let {v} = {self.real(sc, d)} in {self.real(self.add(sc, 'real', v), d)})"
        return f"sum ({self.pick(['a', 'b'] + sc['arr'])})"

    @staticmethod
    def add(sc, key, name):
        sc2 = dict(sc)
        sc2[key] = sc[key] + [name]
        return sc2


EMPTY_SCOPE = {"idx": [], "jdx": [], "real": [], "arr": [], "pairs": [], "mat": [], "rows": []}


@st.composite
def array_programs(draw, max_depth: int = 3):
    """(source text, args, ctg) of a generated array program."""
    n = draw(st.integers(1, 4))
    k = draw(st.integers(1, 3))
    g = _ArraySourceGen(draw, n, k)
    floats = st.floats(-2.0, 2.0, allow_nan=False).map(lambda v: round(v, 3))
    a = draw(st.lists(floats, min_size=n, max_size=n))
    b = draw(st.lists(floats, min_size=n, max_size=n))
    x = draw(floats)
    kk = draw(st.integers(0, n - 1))
    perm = draw(st.permutations(list(range(n))))
    ps = [[draw(floats), draw(floats)] for _ in range(n)]
    m = [draw(st.lists(floats, min_size=k, max_size=k)) for _ in range(n)]
    args = [a, b, x, kk, list(perm), ps, m]
    if draw(st.booleans()):
        body = g.real(EMPTY_SCOPE, max_depth)
        src = f"{PRELUDE}def f({PARAMS}) : R =\n  {body}\n"
        ctg = 1.0
    else:
        i = g.fresh("i")
        body = g.real(g.add(EMPTY_SCOPE, "idx", i), max_depth)
        src = f"{PRELUDE}def f({PARAMS}) : Array R =\n  build (length a) (\\{i} -> {body})\n"
        ctg = draw(st.lists(floats, min_size=n, max_size=n))
    return src, args, ctg


SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])


def _finite(v) -> bool:
    return bool(np.all(np.isfinite(np.asarray(v, dtype=float))))


def _check_gradient(src, args, ctg):
    prog = chad.load(src)
    d = prog.find(None)
    value, _ = chad.run(prog, args)
    assume(_finite(value) and np.max(np.abs(np.asarray(value, dtype=float))) < 1e6)
    decoded = chad.api.decode_args(d, args)
    vals = [decoded[p.name] for p in d.params]
    dense_ctg = np.asarray(ctg, dtype=float) if isinstance(ctg, list) else ctg

    def f(a2):
        return chad.run(prog, list(a2))[0]

    fd = fd_gradient(f, d.params, vals, dense_ctg, d.result)
    assume(fd is not None)
    fd2 = fd_gradient(f, d.params, vals, dense_ctg, d.result, h=1e-4)
    assume(fd2 is not None and all(abs(fd[q] - fd2[q]) < 1e-3 * (1 + abs(fd[q])) for q in fd))
    grads = {}
    for evm in EVMS:
        v, g = chad.grad(prog, evm=evm)(*args, ctg=ctg)
        np.testing.assert_allclose(np.asarray(v, dtype=float), np.asarray(value, dtype=float),
                                   rtol=1e-12, atol=1e-12)
        grads[evm] = g
    for (i, path), expected in fd.items():
        got = get(grads["array"][i], path)
        assert abs(got - expected) <= 1e-4 * (1 + abs(expected)), (src, i, path, got, expected)
    for evm in EVMS:  # all EVMs agree (up to the order of floating-point additions)
        for (i, path) in fd:
            assert abs(get(grads[evm][i], path) - get(grads["array"][i], path)) <= 1e-9 * (
                1 + abs(get(grads["array"][i], path))), (src, evm)
    return prog


@SETTINGS
@given(array_programs())
def test_generated_gradients_match_finite_differences(case):
    src, args, ctg = case
    _check_gradient(src, args, ctg)


def th2_excess(src, args, ctg, evm="array"):
    """(report, the smallest c with gradient <= 5 + c*primal + size(ctg) + 4|Γ|)."""
    r = cost(src, args, ctg, evm=evm)
    c_needed = (r.gradient_steps - 5 - r.ctg_size - 4 * r.params) / r.primal_steps
    return r, c_needed


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(array_programs(max_depth=3))
def test_generated_th2_bound(case):
    src, args, ctg = case
    try:
        r, c = th2_excess(src, args, ctg)
    except chad.EvalError:
        assume(False)
    assert r.holds, (src, args, r, c)


# A few fixed programs that stress the per-element constants (tiny bodies).
TIGHT = [
    ("def f(a : Array R, x : R) : Array R = build (length a) (\\i -> x)", [[1.0, 2.0, 3.0], 2.0],
     [1.0, 1.0, 1.0]),
    ("def f(a : Array R) : Array R = build (length a) (\\i -> a ! i)", [[1.0, 2.0, 3.0]],
     [1.0, 1.0, 1.0]),
    ("def f(a : Array R) : Array R = map (\\y -> y) a", [[1.0, 2.0, 3.0]], [1.0, 1.0, 1.0]),
    ("def f(a : Array R) : R = fold (\\q -> fst q) a", [[1.0, 2.0, 3.0, 4.0]], 1.0),
    ("def f(a : Array R) : R = fold (\\q -> snd q) a", [[1.0, 2.0, 3.0, 4.0]], 1.0),
    ("def f(a : Array R) : R = sum a", [[1.0, 2.0, 3.0]], 1.0),
    ("def f(a : Array R) : Z = length a", [[1.0, 2.0, 3.0]], None),
    ("def f(n : Z) : Array Z = build n (\\i -> i)", [50], None),
    ("def f(a : Array R, n : Z) : Array R = build n (\\i -> a ! 0)", [[1.0], 50], [1.0] * 50),
    ("def f(a : Array (Array R)) : Array (Array R) = map (\\r -> r) a",
     [[[1.0, 2.0], [3.0, 4.0]]], [[1.0, 1.0], [1.0, 1.0]]),
    ("def f(a : Array (R * R)) : Array R = build (length a) (\\i -> fst (a ! i))",
     [[[1.0, 2.0], [3.0, 4.0]]], [1.0, 1.0]),
]


@pytest.mark.parametrize("src,args,ctg", TIGHT)
def test_th2_on_tight_programs(src, args, ctg):
    r, c = th2_excess(src, args, ctg)
    assert r.holds, (src, r, c)
