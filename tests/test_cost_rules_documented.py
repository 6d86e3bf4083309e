"""The cost rules of docs/cost-model.md that the formalisation does not cover,
tested as written.

For each rule a small program is built at several sizes, the documented formula
is computed here by hand from the documented rules (the sub-terms' costs follow
the formalisation's rules: a variable 1, a literal 2 = `prim (LIT c) unit`, a
pair 1 + both, ...), and compared with the evaluator's step count, read through
the public API only (`chad.run`, `chad.cost`).

Where the docs give a gradient-side rule (the target-only nodes of the array
derivatives: BOne, BFill, BArray, collect, zeros, scatter, unzip, unzipMap,
scatterBag, foldTree, unTree, sequenceScoped; DCall and the fused closures; the
families nested_maps and t_n; the dot product's figures), the gradient step count (TH2's left side)
is derived from those rules and the derivative terms the docs describe (and
`chad show` prints), and compared as well. Each derivation is written out in
the comments.
"""

from __future__ import annotations

import os

import pytest

import chad

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")

SIZES = [1, 2, 3, 5, 8]


def run(text, args):
    return chad.run(text, args)


def steps(text, args):
    return chad.run(text, args)[1]


def grad_steps(text, args, ctg):
    rep = chad.cost(text, args, ctg)
    return rep.primal_steps, rep.gradient_steps


def chain(names):
    """`n1 + n2 + ... + nk` (left associative), and its cost 1 + 3 (k - 1): each `+`
    is prim ADD (pair l r): 1 + (1 + c(l) + c(r))."""
    return " + ".join(names), 1 + 3 * (len(names) - 1)


# ======================================================================== source rules
# ------------------------------------------------------------------------ def calls
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_def_call_costs_one_plus_arguments_plus_body(k):
    """`g(e1, ..., en)`: 1 + Σ c(ei) + c(body of g)."""
    params = ", ".join(f"y{i} : R" for i in range(k))
    body, c_body = chain([f"y{i}" for i in range(k)])
    # arguments of different costs: x (1), 2.0 (2), x * x (4), sin x (2), ...
    pool = [("x", 1), ("2.0", 2), ("x * x", 4), ("sin x", 2), ("(x, x) : R * R", 3)]
    args = [pool[i % 4] for i in range(k)]
    text = (f"def g({params}) : R = {body}\n"
            f"def f(x : R) : R = g({', '.join(a for a, _ in args)})\n")
    assert steps(text, [1.5]) == 1 + sum(c for _, c in args) + c_body


@pytest.mark.parametrize("n", [1, 2, 3])
def test_def_calls_nest_and_each_call_pays_its_body(n):
    """A def called n times costs n calls: h(x) = x * x (4), g(x) = h(x) + h(x),
    f calls g n times in a sum."""
    c_h = 1 + 1 + 4          # h(x): 1 + c(x) + c(x * x)
    c_g_body = 1 + 1 + 2 * c_h  # h(y) + h(y)
    c_g = 1 + 1 + c_g_body   # g(x)
    calls = " + ".join(["g(x)"] * n)
    text = ("def h(y : R) : R = y * y\n"
            "def g(y : R) : R = h(y) + h(y)\n"
            f"def f(x : R) : R = {calls}\n")
    assert steps(text, [1.5]) == n * c_g + 2 * (n - 1)


# ------------------------------------------------------------------------ ascription
@pytest.mark.parametrize("text,cost", [
    ("def f(x : R, y : R) : R = (x * y : R)", 4),
    ("def f(x : R, y : R) : R = ((x : R) * (y : R) : R)", 4),
    ("def f(x : R, y : R) : R * R = ((x, y) : R * R)", 3),
    ("def f(x : R, y : R) : R + R = (inl (x : R) : R + R)", 2),
    ("def f(x : R, y : R) : R = (((x : R) : R) : R)", 1),
])
def test_ascription_is_free(text, cost):
    assert steps(text, [1.5, 2.0]) == cost


# ------------------------------------------------------------------------ primitives
# Every primitive beyond the formalisation: 1 + c(argument) (the argument of a
# binary one is a pair: 1 + both); an integer literal is `prim (ILIT k) unit`: 2.
PRIMS = [
    ("x / y", "R", 1 + 3), ("exp x", "R", 2), ("log y", "R", 2), ("sin x", "R", 2),
    ("cos x", "R", 2), ("tanh x", "R", 2), ("sqrt y", "R", 2), ("toreal n", "R", 2),
    ("sin (x * y)", "R", 1 + 4), ("exp (x / y)", "R", 1 + 4), ("sqrt (y * y)", "R", 1 + 4),
    ("toreal (n + n)", "R", 1 + 4), ("3", "Z", 2), ("n + 3", "Z", 1 + 1 + 1 + 2),
    ("-3", "Z", 1 + 2),
    ("x < y", "Bool", 4), ("x <= y", "Bool", 4), ("x > y", "Bool", 4),
    ("x >= y", "Bool", 4), ("x == y", "Bool", 4), ("n < 3", "Bool", 1 + 1 + 1 + 2),
    ("n <= n", "Bool", 4), ("n > n", "Bool", 4), ("n >= 3", "Bool", 5), ("n == n", "Bool", 4),
    ("sin x < cos y", "Bool", 1 + 1 + 2 + 2),
    ("if x < y then 1.0 else 2.0", "R", 1 + 4 + 2),  # case: 1 + scrutinee + branch
]


@pytest.mark.parametrize("expr,ty,cost", PRIMS)
def test_extra_primitive_costs_one_plus_argument(expr, ty, cost):
    text = f"def f(x : R, y : R, n : Z) : {ty} = {expr}"
    assert steps(text, [0.5, 2.0, 3]) == cost


def test_worked_number_x_times_y_plus_sin_x():
    """docs: `x * y + sin x` at (2, 3): 6.909297426825682 in 8 steps."""
    value, n = run("def f(x : R, y : R) : R = x * y + sin x", [2.0, 3.0])
    assert n == 8 and value == 6.909297426825682


# ------------------------------------------------------------------------ functions
@pytest.mark.parametrize("k", [0, 1, 2, 3, 4])
def test_lambda_costs_one_plus_captures_and_application_the_body(k):
    """`let h = \\(y : R) -> y + x1 + ... + xk in h 2.0`:
    let 1 + lambda (1 + k) + app (1 + c(h) 1 + c(2.0) 2 + c(body) (1 + 3k))."""
    params = ", ".join(["z : R"] + [f"x{i} : R" for i in range(k)])
    body, c_body = chain(["y"] + [f"x{i}" for i in range(k)])
    text = f"def f({params}) : R = let h = \\(y : R) -> {body} in h 2.0"
    assert steps(text, [1.0] * (k + 1)) == 1 + (1 + k) + (1 + 1 + 2 + c_body)


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_lambda_not_applied_costs_only_its_closure(k):
    """A lambda capturing x0..x(k-1) twice each (captures are the distinct free
    variables): 1 + k; the body is not evaluated."""
    params = ", ".join(["z : R"] + [f"x{i} : R" for i in range(k)])
    body, _ = chain(["y"] + [f"x{i}" for i in range(k)] * 2)
    text = f"def f({params}) : R = let h = \\(y : R) -> {body} in z"
    assert steps(text, [1.0] * (k + 1)) == 1 + (1 + k) + 1


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_immediate_application(depth):
    """`(\\(y : R) -> y * y) e`: 1 + c(f) (a closed lambda: 1) + c(e) + c(body) (4);
    nested: e is the previous application."""
    text, c = "x", 1
    for _ in range(depth):
        text, c = f"(\\(y : R) -> y * y) ({text})", 1 + 1 + c + 4
    assert steps(f"def f(x : R) : R = {text}", [1.1]) == c


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_t_n_primal_and_gradient(n):
    """docs/functions.md: t_n (n - 1 nested applications of a closed lambda) takes
    3n - 2 primal steps and, efficient, 313 + 74 (n - 5) gradient steps (the table
    for n = 5..20; n = 2 (91) is derived by hand in test_closure_application_gradient)."""
    s = "x1"
    for k in range(2, n + 1):
        s = f"(\\(x{k - 1} : R) -> {s}) x{k}"
    text = f"def t(x{n} : R) : R = {s}"
    assert grad_steps(text, [1.5], 1.0) == (3 * n - 2, 313 + 74 * (n - 5))


# ------------------------------------------------------------------------ arrays
def arr(n):
    return [0.5 * (i + 1) for i in range(n)]


@pytest.mark.parametrize("n", [0] + SIZES)
def test_build(n):
    """`build s (i. t)`: 1 + c(s) + Σᵢ c(t[i/i])."""
    assert steps("def f(x : R, n : Z) : Array R = build n (\\i -> x)", [1.0, n]) == 2 + n
    # a body whose cost depends on i: if i < 2 then x else x * x
    #   = case (i < 2) of ..: 1 + (1 + (1 + 1 + 2)) + (1 for x | 4 for x * x)
    per = [1 + 5 + (1 if i < 2 else 4) for i in range(n)]
    text = "def f(x : R, n : Z) : Array R = build n (\\i -> if i < 2 then x else x * x)"
    assert steps(text, [1.0, n]) == 2 + sum(per)
    # a computed size: build (n + 1) ..: 1 + c(n + 1) (5) + (n + 1) * c(toreal i) (2)
    text = "def f(x : R, n : Z) : Array R = build (n + 1) (\\i -> toreal i)"
    assert steps(text, [1.0, n]) == 1 + 5 + 2 * (n + 1)


@pytest.mark.parametrize("n", SIZES)
def test_index(n):
    """`t ! s`: 1 + c(t) + c(s)."""
    assert steps("def f(a : Array R, i : Z) : R = a ! i", [arr(n), n - 1]) == 3
    assert steps("def f(a : Array R, i : Z) : R = a ! (i + 0)", [arr(n), n - 1]) == 1 + 1 + 5
    # indexing a built array: 1 + c(build) (2 + n) + c(i)
    text = "def f(x : R, n : Z) : R = (build n (\\i -> x)) ! (n + -1)"
    assert steps(text, [1.0, n]) == 1 + (2 + n) + (1 + 1 + 1 + (1 + 2))


@pytest.mark.parametrize("n", [0] + SIZES)
def test_length(n):
    """`length t`: 1 + c(t)."""
    assert steps("def f(a : Array R) : Z = length a", [arr(n)]) == 2
    assert steps("def f(x : R, n : Z) : Z = length (build n (\\i -> x))", [1.0, n]) == 1 + 2 + n


@pytest.mark.parametrize("n", [0] + SIZES)
def test_map(n):
    """`map (x. t) s`: 1 + c(s) + Σ over the elements of c(t)."""
    assert steps("def f(a : Array R) : Array R = map (\\y -> y * y) a", [arr(n)]) == 2 + 4 * n
    # the body's cost depends on the element: if y < 1.0 then y else sin y
    per = [1 + (1 + (1 + 1 + 2)) + (1 if v < 1.0 else 2) for v in arr(n)]
    text = "def f(a : Array R) : Array R = map (\\y -> if y < 1.0 then y else sin y) a"
    assert steps(text, [arr(n)]) == 2 + sum(per)


@pytest.mark.parametrize("n", SIZES)
def test_sum(n):
    """`sum s` (prim SUM): 1 + c(s) + n."""
    assert steps("def f(a : Array R) : R = sum a", [arr(n)]) == 1 + 1 + n
    assert steps("def f(x : R, n : Z) : R = sum (build n (\\i -> x))", [1.0, n]) == 1 + (2 + n) + n


@pytest.mark.parametrize("n", SIZES)
def test_fold(n):
    """`fold (p. t) s`: 1 + c(s) + Σ over the n - 1 combines of c(t)."""
    # fst p + snd p: 1 + (1 + (1 + 1) + (1 + 1)) = 6
    assert steps("def f(a : Array R) : R = fold (\\p -> fst p + snd p) a", [arr(n)]) == 2 + 6 * (n - 1)
    # let (l, r) = p in l * r: let p' = p in let l = fst p' in let r = snd p' in l * r
    #   = 1 + 1 + (1 + 2 + (1 + 2 + 4)) = 12
    text = "def f(a : Array R) : R = fold (\\p -> let (l, r) = p in l * r) a"
    assert steps(text, [arr(n)]) == 2 + 12 * (n - 1)


def balanced(xs, combine):
    """The documented reduction order: split at (lo + hi) // 2, combine (left, right)."""
    def go(lo, hi):
        if hi - lo == 1:
            return xs[lo]
        mid = (lo + hi) // 2
        return combine(go(lo, mid), go(mid, hi))
    return go(0, len(xs))


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 7, 11])
def test_fold_reduces_in_the_documented_balanced_order(n):
    xs = [float(i * i + 1) for i in range(n)]
    value, _ = run("def f(a : Array R) : R = fold (\\p -> fst p - 2.0 * snd p) a", [xs])
    assert value == balanced(xs, lambda a, b: a - 2.0 * b)


# ======================================================================== gradient side
# TH2's left side: cost of `run (app (snd (CHAD t)) ctg) (zero-env Γ)`:
#   run m env: 1 + c(m) + c(env) + (1 + |Γ| + c(run of the action))
#   c(m) = app: 1 + c(snd (CHAD t)) (1 + c(CHAD t)) + c(ctg) (1) + c(backpropagator body)
# zero-env Γ = pair (zero τ1) (pair ... unit): zero of R = prim LZERO lunit (2), of Z
# and () = lunit (1), of an array = BEmpty (1), pairs and sums 1.
# A variable's derivative `(x, \[] d -> add x d)` costs 3; running an `add` 1 + plusv.


def test_worked_number_x_times_y():
    rep = chad.cost("def f(x : R, y : R) : R = x * y", [2.0, 3.0], 1.0)
    assert (rep.primal_steps, rep.gradient_steps, rep.bound) == (4, 84, 5 + 34 * 4 + 1 + 4 * 2)


@pytest.mark.parametrize("n", SIZES)
def test_sum_gradient(n):
    """CHAD t = let r1 = (a, \\[] d -> add a d) in (SUM (fst r1), \\[r1] d -> snd r1
    (let a3 = fst r1 in let c4 = d in BFill a3 c4)):
      CHAD t: let 1 + 3 + pair (1 + SUM (1 + 2 + n) + lam 2) = 10 + n; snd: 11 + n
      backpropagator body: app 1 + snd r1 2 + (let 1 + 2 + let (1 + 1 + BFill (1 + 1 + 1 + n)))
                           + add (1 + 1) = 13 + n
      m: 1 + (11 + n) + 1 + (13 + n); env: pair BEmpty unit = 3
      run of the action: add a (BFill ..) into BEmpty: 1 + plusv 1 = 2
      total 1 + (26 + 2n) + 3 + (1 + 1 + 2) = 34 + 2n"""
    assert grad_steps("def f(a : Array R) : R = sum a", [arr(n)], 1.0) == (2 + n, 34 + 2 * n)


@pytest.mark.parametrize("n", SIZES)
def test_index_gradient(n):
    """Fig. 9: let r1 = (a, ..) in let r2 = (k, ..) in (fst r1 ! fst r2,
    \\[r1, r2] d -> snd r1 (BOne (fst r2) d)):
      CHAD t: 1 + 3 + (1 + 3 + pair (1 + index (1 + 2 + 2) + lam 3)) = 17; snd 18
      body: app 1 + 2 + BOne (1 + 2 + 1) + add 2 = 9; m = 1 + 18 + 1 + 9 = 29
      env: pair BEmpty (pair lunit unit) = 5; action: add BOne into BEmpty: 2
      total 1 + 29 + 5 + (1 + 2 + 2) = 40, whatever n and k"""
    for k in {0, n - 1}:
        assert grad_steps("def f(a : Array R, k : Z) : R = a ! k", [arr(n), k], 1.0) == (3, 40)


@pytest.mark.parametrize("n", SIZES)
def test_length_gradient(n):
    """footnote 23: let r1 = (a, ..) in (length (fst r1), \\[] d -> pure ()):
      CHAD t: 1 + 3 + (1 + 3 + 1) = 9; m = 1 + 10 + 1 + pure (2) = 14; env 3; action 1
      total 1 + 14 + 3 + (1 + 1 + 1) = 21"""
    assert grad_steps("def f(a : Array R) : Z = length a", [arr(n)], None) == (2, 21)


@pytest.mark.parametrize("n", SIZES)
def test_build_gradient(n):
    """let r1 = (n, ..) in let n2 = fst r1 in let a3 = build n2 (\\i -> (x, \\[] d -> add x d))
    in let u4 = unzip a3 in (fst u4, \\[u4] d5 -> sequenceScoped [lunit] (snd u4)
    (scatter (zeros (length (fst u4))) (collect d5))):
      CHAD t: (1 + 3) + (1 + 2) + (1 + 2 + 3n) + (1 + unzip (1 + 1 + n)) + pair (1 + 2 + 2)
              = 18 + 4n; snd 19 + 4n
      collect d5 (a BArray of n): 1 + 1 + 1 constructor + n entries = 3 + n (BEmpty: 3)
      zeros (length (fst u4)): 1 + 3 + n; scatter: 1 + (4 + n) + (3 + n) + n pairs = 8 + 3n
      sequenceScoped: 1 + c(fs) 2 + c(ds) + c(lunit) 1 + 4n = 12 + 7n
      m = 1 + (19 + 4n) + 1 + (12 + 7n) = 33 + 11n; env: pair (LZERO 2) (pair lunit unit) = 6
      run, per element: 1 + 1 + ccall(k) (3 + 2 (add x d) + 2 (one scope))
                        + the run of k (1 scope + add (1 + 1)) = 12; sequence 2 (n - 1)
      total 1 + (33 + 11n) + 6 + (1 + 2 + 14n - 2) = 41 + 25n; with a zero ctg 41 + 23n"""
    text = "def f(x : R, n : Z) : Array R = build n (\\i -> x)"
    assert grad_steps(text, [1.5, n], [1.0] * n) == (2 + n, 41 + 25 * n)
    assert grad_steps(text, [1.5, n], None) == (2 + n, 41 + 23 * n)


@pytest.mark.parametrize("n", SIZES)
def test_map_gradient(n):
    """let r1 = (a, ..) in let u2 = unzipMap (\\y -> (y, \\[] d -> add y d)) (fst r1) in
    (fst u2, \\[u2, r1] d3 -> bind (sequenceScoped [lzero] keep (snd u2)
    (scatterBag (fst u2) d3)) (\\[r1] dx -> snd r1 (BArray (fst dx)))):
      CHAD t: (1 + 3) + (1 + unzipMap (1 + 2 + 3n + n)) + pair (1 + 2 + 3) = 14 + 4n;
              snd 15 + 4n
      scatterBag (fst u2) d3 (a BArray of n): 1 + 2 + 1 + n zeros + collect (1 + n)
              + scatter n pairs = 5 + 3n
      sequenceScoped: 1 + 2 + (5 + 3n) + lzero 2 + 4n + 2 (cells kept) = 12 + 7n
      body: bind 1 + (12 + 7n) + lam 2; m = 1 + (15 + 4n) + 1 + (15 + 7n) = 32 + 11n
      run of the sequence, per element: 1 + 1 + ccall(k) (3 + 2 + 2 + 2 kept)
        + run (1 scope + add 2 + 1 bind + (1 + 1) store + 1 pure) = 18;
        sequence 2 (n - 1); final bind 1 + (1 + n) + 1 = 21n + 1
      bind: 1 + (21n + 1) + ccall (1 + 2 + BArray (1 + 2) + add 2 = 8) + add run 2
      total 1 + (32 + 11n) + 3 + (1 + 1 + 21n + 12) = 50 + 32n
    (the rule with `let m = map .. in let u = unzip m` and `scatter (zeros (length
    (fst u))) (collect d)` written out costs 56 + 32n: 3 + 3 more)."""
    text = "def f(a : Array R) : Array R = map (\\y -> y) a"
    assert grad_steps(text, [arr(n)], [1.0] * n) == (2 + n, 50 + 32 * n)


@pytest.mark.parametrize("k", [1, 2, 3, 4, 8, 16])
def test_nested_maps_family(k):
    """docs/arrays.md: k identity maps over a one-element array: 2k + 1 primal steps,
    66k + 16 gradient steps (test_map_gradient at n = 1 is 82 = 66 + 16); the bound
    5 + 34 (2k + 1) + 2 + 4 = 68k + 45 holds for every k."""
    s = "a"
    for _ in range(k):
        s = f"map (\\z -> z) ({s})"
    rep = chad.cost(f"def f(a : Array R) : Array R = {s}", [[1.0]], [1.0])
    assert (rep.primal_steps, rep.gradient_steps) == (2 * k + 1, 66 * k + 16)
    assert rep.bound == 68 * k + 45
    assert rep.holds


def fold_gradient(n):
    """`fold (\\p -> fst p + snd p) a`, from the rules of foldTree and unTree.
    The combine's derivative (in context p) costs c(t) = 39 to evaluate:
      each projection `let r = (p, ..) in (fst (fst r), \\[r] d -> ..)` 10, their pair
      21, `let r9 = .. in ((fst (fst r9), fst (snd r9)), lam)` 1 + 21 + 10 = 32,
      `let r5 = .. in (ADD (fst r5), lam)` 1 + 32 + 6 = 39.
    foldTree: 1 + c(s) 2 + n leaves + (n - 1) (4 + 39); CHAD t: (1 + 3) + (1 + foldTree
    + pair (1 + getA 2 + lam 3)) = 14 + n + 43 (n - 1).
    The combine's backpropagator on d': app 1 + 2 + (let .. lpair c c: 8) + then (4 + 2 x
    (app 1 + 3 + lfst 2 + (app 1 + 2 + lpair (1 + 1 + lzero 2) + add 2))) = 45; its
    action runs in 1 + (1 + 1) + 1 + (1 + 3) = 8 (the second add meets the first's pair).
    Constructing a Node's action: 6 + 45; a Leaf's 2. Running a Node: 1 + 1 + 8 +
    (5 + construction of both children) + 2 + both children; a Leaf 1; a final bind
    1 + (1 + n) + 1. unTree evaluates in 1 + 1 + 1 + 1 (lpairzero) + 2 + the root."""
    def construct(lo, hi):
        return 2 if hi - lo == 1 else 6 + 45

    def run_(lo, hi):
        if hi - lo == 1:
            return 1
        mid = (lo + hi) // 2
        return (1 + 1 + 8 + (5 + construct(lo, mid) + construct(mid, hi)) + 2
                + run_(lo, mid) + run_(mid, hi))

    snd_chad = 1 + 14 + n + 43 * (n - 1)
    body = 1 + (6 + construct(0, n)) + 2          # bind (unTree ..) (\[r1] lf -> ..)
    m = 1 + snd_chad + 1 + body
    k_call = 1 + 2 + (1 + 1) + 2                  # snd r1 (BArray lf): then add
    action = 1 + (run_(0, n) + 1 + (1 + n) + 1) + k_call + 2
    return 1 + m + 3 + (1 + 1 + action)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 13])
def test_fold_gradient(n):
    text = "def f(a : Array R) : R = fold (\\p -> fst p + snd p) a"
    assert grad_steps(text, [arr(n)], 1.0) == (2 + 6 * (n - 1), fold_gradient(n))


@pytest.mark.parametrize("n", [1, 2, 3, 10, 50])
def test_dot_product_figures(n):
    """docs/arrays.md: examples/dot.chad at n = 10^5 takes 900,004 primal and
    11,600,116 gradient steps ("9 per element", "about 116 per element"): 9n + 4 and
    116n + 116, checked at small n."""
    with open(os.path.join(EXAMPLES, "dot.chad")) as f:
        text = f.read()
    a = [float(i) for i in range(n)]
    b = [float(2 * i + 1) for i in range(n)]
    assert grad_steps(text, [a, b], 1.0) == (9 * n + 4, 116 * n + 116)


def test_def_call_gradient():
    """DCall: `g$D(y) = let r = D[y] in (fst r, \\d -> snd (run (snd r d) (zero-env [R])))`,
    called for `g(x)`: let r2 = (x, ..) in let c3 = g$D(fst r2) in (fst c3, \\[c3, r2] d ->
    let g5 = snd c3 d in snd r2 (fst g5)):
      g$D's body: 1 + 3 + pair (1 + 2 + 2) = 9; DCall: 1 + fst r2 (2) + 9 = 12
      CHAD t: 1 + 3 + (1 + 12 + pair (1 + 2 + 3)) = 23; snd 24
      g's backpropagator: snd (run (app (snd r) d) (pair (LZERO) unit)):
        1 + (1 + 6 + 4 + (1 + 1 + add 2)) = 16; snd c3 d: 1 + 2 + 1 + 16 = 20
      body: let 1 + 20 + app (1 + 2 + 2 + add 2) = 28; m = 1 + 24 + 1 + 28 = 54
      total 1 + 54 + env 4 + (1 + 1 + add 2) = 63"""
    text = "def g(y : R) : R = y\ndef f(x : R) : R = g(x)"
    assert grad_steps(text, [1.5], 1.0) == (3, 63)


def test_closure_application_gradient():
    """The fused closure (cost 1 + k, as the source lambda) and CApp (as `app`), for
    `(\\(y : R) -> y) x` (t_2):
      r1 = (MkClosure [] (1), \\[] d -> pure ()) = 3; r2 = (x, ..) = 3
      CApp (fst r1) (fst r2): 1 + 2 + 2 + body (let r6 = (y, ..) in (fst r6, lam)) 9 = 14
      CHAD t: (1 + 3) + (1 + 3) + (1 + 14 + pair (1 + 2 + 4)) = 30; snd 31
      snd c3 d: 1 + 2 + 1 + snd (run (app (snd r6) d) (lzero, (ltagzero, ())))
                = 1 + 2 + 1 + (1 + (1 + 6 + 6 + (1 + 2 + add 2))) = 23
      then (4 + (app 1 + 2 + lpackas (1 + 2 + 3) + pure 2) + (app 1 + 2 + 2 + add 2)) = 22
      body: let 1 + 23 + 22 = 46; m = 1 + 31 + 1 + 46 = 79
      run: then 1 + pure 1 + 1 + add 2 = 5; total 1 + 79 + 4 + (1 + 1 + 5) = 91"""
    assert grad_steps("def f(x : R) : R = (\\(y : R) -> y) x", [1.5], 1.0) == (4, 91)


def test_capturing_closure_gradient():
    """`(\\(y : R) -> z) x`: the fused closure capturing z, its environment bag
    (envone), the closure's backpropagator envscatter (lcast d) [z] and lpackas:
      r1 = (MkClosure [z] (1 + 1), \\[] d -> envscatter ..) = 4; r2 = (x, ..) = 3
      CApp: 1 + 2 + 2 + body (let r6 = (z, \\[] d -> add env (envone 0 d)) in
            (fst r6, lam)) 9 = 14; CHAD t: (1 + 4) + (1 + 3) + (1 + 14 + 7) = 31; snd 32
      snd c3 d: 1 + 2 + 1 + snd (run (app (snd r6) d) (lzero, (ltagzero, ()))), where the
        app is 1 + 2 + 1 + add (1 + envone (1 + 1)) = 7, the env 1 + 2 + (1 + 1 + 1) = 6,
        the run of `add env (EnvOne ..)` into ltagzero 1 + plusv 1 = 2:
        1 + (1 + 7 + 6 + (1 + 2 + 2)) = 20, so 24
      then: 4 + (app 1 + 2 + lpackas (1 + 2 + 3) + envscatter (1 + lcast (1 + 1) + 1 entry))
              + (app 1 + 2 + 2 + add 2) = 4 + 13 + 7 = 24
      body: let 1 + 24 + 24 = 49; m = 1 + 32 + 1 + 49 = 83; env (x, z): 1 + 2 + (1 + 2 + 1)
      run: then 1 + (add z: 2) + 1 + (add x: 2) = 6; total 1 + 83 + 7 + (1 + 2 + 6) = 100"""
    assert grad_steps("def f(x : R, z : R) : R = (\\(y : R) -> z) x", [1.5, 2.0], 1.0) == (5, 100)


@pytest.mark.parametrize("n", SIZES)
def test_size_of_array_cotangents(n):
    """size: 1 for BEmpty, 1 + Σ size(dₖ) for BArray (1 + n for reals); the bound is
    5 + 34 primal + size(ctg) + 4 |Γ|."""
    text = "def f(a : Array R) : Array R = a"
    assert chad.cost(text, [arr(n)], [1.0] * n).ctg_size == 1 + n
    assert chad.cost(text, [arr(n)], None).ctg_size == 1
    text = "def f(a : Array (R * R)) : Array (R * R) = a"
    pairs = [[1.0, 2.0]] * n
    ctg = [[1.0, 2.0] if i % 2 else None for i in range(n)]
    rep = chad.cost(text, [pairs], ctg)
    assert rep.ctg_size == 1 + sum(3 if i % 2 else 1 for i in range(n))
    assert rep.bound == 5 + 34 * rep.primal_steps + rep.ctg_size + 4 * 1


def test_bag_plus_gradient():
    """Two reads of one array: two BOne cotangents, the second added with plusv =
    BPlus (1). `a ! k + a ! k`:
      each index derivative: 1 + 3 + (1 + 3 + pair (1 + 5 + 3)) = 17; their pair 35
      let r5 = .. in ((fst (fst r5), fst (snd r5)), lam): 1 + 35 + (1 + 7 + 2) = 46
      CHAD t: let r1 = .. in (ADD (fst r1), lam): 1 + 46 + 6 = 53; snd 54
      body: app 1 + 2 + (let .. lpair c c: 8) + then (4 + 2 x (app 1 + 3 + lfst 2 +
            (app 1 + 2 + BOne 4 + add 2))) = 1 + 2 + 8 + 34 = 45; m = 1 + 54 + 1 + 45
      env: pair BEmpty (pair lunit unit) = 5
      run: then 1 + (add into BEmpty 1 + 1) + 1 + (add BOne to BOne: 1 + BPlus 1) = 6
      total 1 + 101 + 5 + (1 + 2 + 6) = 116; the gradient collects both: 2.0 at k."""
    text = "def f(a : Array R, k : Z) : R = a ! k + a ! k"
    assert grad_steps(text, [[1.0, 2.0, 3.0], 1], 1.0) == (8, 116)
    _value, (da, dk) = chad.grad(text)([1.0, 2.0, 3.0], 1)
    assert list(da) == [0.0, 2.0, 0.0] and dk is None


@pytest.mark.parametrize("n", SIZES)
def test_gather_gradient(n):
    """docs/arrays.md, gathers: `build (length a) (\\i -> a ! i)` reads a ! i once per
    element: ix = build n (i. i), g = gather a ix (1 + 1 + 1 + n), the body reads g ! i
    into a per-element cell (sequenceScoped [lunit, lzero] keep), and ONE
    `add a (BArray ix dx)` at the end; first the test of an empty build, `case
    (n == 0)`: case 1 + IEQ (1 + pair (1 + n 1 + 0 (ILIT 1 + unit 1))) = 6:
      CHAD t: (1 + (1 + 3 + 5)) + (1 + 2) + 6 + (1 + 2 + n) + (1 + 3 + n)
              + (1 + 2 + n (let 1 + g ! i 3 + pair 3)) + (1 + 2 + n) + pair 6 = 38 + 10n
      sequenceScoped: 1 + 2 + scatter (8 + 3n) + inits (1 + 2) + 4n + 2 = 16 + 7n;
      its bind 1 + .. + lam 2; m = 1 + (39 + 10n) + 1 + (19 + 7n) = 60 + 17n
      per element: 1 + 1 + ccall (3 + add 2 + 2 x 2 scopes + 2 kept) + run (2 scopes +
      add 2 + bind 1 + store 2 + pure 1) = 21; sequence 2 (n - 1); final bind 3 + n
      bind: 1 + (24n + 1) + ccall (add 1 + BArray (1 + 2 + 1)) + add run 2 = 24n + 9
      total 1 + (60 + 17n) + 3 + (1 + 1 + 24n + 9) = 75 + 41n"""
    text = "def f(a : Array R) : Array R = build (length a) (\\i -> a ! i)"
    assert grad_steps(text, [arr(n)], [1.0] * n) == (3 + 3 * n, 75 + 41 * n)


def test_gather_gradient_of_an_empty_build():
    """The same build at n = 0: the test of an empty build (6, above) takes the
    branch `pair [] (\\d -> pure ())` (pair 1 + [] 1 + lam 1 = 3), whatever the
    number of gather reads:
      CHAD t: (1 + (1 + 3 + 5)) + (1 + 2) + 6 + 3 = 22
      m = app 1 + (snd 1 + 22) + ctg 1 + pure (1 + unit 1) = 27
      total 1 + 27 + 3 + (1 + 1 + pure 1) = 34"""
    one = "def f(a : Array R) : Array R = build (length a) (\\i -> a ! i)"
    three = ("def f(a : Array R) : Array R = "
             "build (length a) (\\i -> a ! i + a ! (i + 1) * a ! (i + 2))")
    assert grad_steps(one, [[]], []) == (3, 34)
    assert grad_steps(three, [[]], []) == (3, 34)


def test_let_bound_closure_gradient():
    """`let h = \\(y : R) -> y in h x`: the let's scope cell for h starts at lfunzero
    (1) and receives h's packed cotangent (plusv into the zero: 1):
      CHAD t: (1 + 3) + (1 + 2) + (1 + 30 + 6) = 44, where the application's derivative
        is 1 + 3 + (1 + 3 + (1 + CApp 14 + pair 7)) = 30; snd 45
      body: bind 1 + scope (1 + lfunzero 1 + app (1 + 2 + 1 + (let 1 + 23 + then 22)))
            + lam 2 = 55; m = 1 + 45 + 1 + 55 = 102; env 4
      run: bind 1 + scope (1 + then (1 + 2 + 1 + 2)) + ccall (1 + 2 + 2 + pure 2)
           + pure 1 = 16; total 1 + 102 + 4 + (1 + 1 + 16) = 125"""
    text = "def f(x : R) : R = let h = \\(y : R) -> y in h x"
    assert grad_steps(text, [1.5], 1.0) == (6, 125)
