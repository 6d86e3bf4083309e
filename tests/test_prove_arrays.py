"""`chad prove` for the gather shortcut, fold and array literals of any length
(docs/proofs.md): the gather and fold rules' symbolic costs against the
counting evaluator (fold's also with the other core nodes in
tests/test_prove.py), the literal's generalisation over its length against the
per-length obligations, the slack fold needs, the gather reads an empty build
does not pay for, the CLI, and mutated rules failing exactly where they were
mutated."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
import z3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chad.arrays.transform as array_transform
import chad.features  # noqa: F401  (registers the extensions)
from chad.api import make_evm
from chad.costmodel.evaluate import Evaluator
from chad.costmodel.generators import ctg_to_json, sparse_ctgs
from chad.cotangents import ctg_from_json
from chad.proofs import symbolic
from chad.proofs.cli import prove_rules
from chad.proofs.gather_rules import SubRead
from chad.proofs.literal_rules import GEN_CHECK, SymbolRoles, literal, literal_obligations
from chad.proofs.rules import Instance, evaluate_instance, rule_table, transform
from chad.proofs.statements import PROOF_B, PROOF_C
from chad.proofs.symbolic import Concrete, Sub
from chad.terms import (
    ArrayLit, Build, Fold, Fst, Index, Let, Pair, Prim, Snd, Unit, Var, children,
)
from chad.transform.common import Context
from chad.transform.efficient import Chad
from chad.types import ArrayT, Prod, R, Z

from tests.prove_support import (
    DenseZero, _dense_zero_rule, assert_matches_concrete,
)

chad.features.load()

# ------------------------------------------------------------------ gather: symbolic = concrete

AR = ArrayT(R)
CTX = (("a", AR), ("b", AR), ("y", R))


def _mul(l, r):
    return Prim("MUL", Pair(l, r, ty=Prod(R, R)), ty=R)


# C[x]: a body with one occurrence of the read x (the gather shortcut's shape);
# C[x1, x2] with one occurrence of each of two reads, x1's first (the
# placeholder lists the reads in their order in C, the order of the adds)
BODIES = {
    "x": lambda x: x,
    "x * y": lambda x: _mul(x, Var("y", ty=R)),
    "let z = x in z * z": lambda x: Let("z", x, _mul(Var("z", ty=R), Var("z", ty=R)), ty=R),
    "(y, sin x)": lambda x: Pair(Var("y", ty=R), Prim("SIN", x, ty=R), ty=Prod(R, R)),
}
BODIES2 = {
    "x1 * x2": lambda x1, x2: _mul(x1, x2),
    "(x1 + y, sin x2)": lambda x1, x2: Pair(
        Prim("ADD", Pair(x1, Var("y", ty=R), ty=Prod(R, R)), ty=R), Prim("SIN", x2, ty=R),
        ty=Prod(R, R)),
}
# the index expressions (a has 4 elements, the builds at most 3)
INDICES = {
    "i": lambda: Var("i", ty=Z),
    "2": lambda: Prim("ILIT", Unit(), 2, ty=Z),
    "i + 1": lambda: Prim("IADD", Pair(Var("i", ty=Z), Prim("ILIT", Unit(), 1, ty=Z),
                                       ty=Prod(Z, Z)), ty=Z),
}


def _read_vars(target) -> list:
    """The variables chad_build binds to the gathered elements (`x = g ! i`), in order."""
    out = []

    def walk(t):
        if isinstance(t, Let) and isinstance(t.rhs, Index) and isinstance(t.rhs.idx, Var) \
                and t.rhs.idx.name == "i":
            out.append(t.name)
        for c in children(t):
            walk(c)

    walk(target)
    return out


def _sparse(ty, ct, primal):
    return ctg_from_json(ty, ctg_to_json(ty, ct), primal=primal)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(["a", "ab", "aa"]), st.data(), st.sampled_from(sorted(INDICES)),
       st.integers(0, 3), st.lists(st.floats(-2, 2), min_size=4, max_size=4),
       st.lists(st.floats(-2, 2), min_size=4, max_size=4), st.floats(-2, 2))
def test_gather_symbolic_costs_are_the_concrete_counts(reads, data, index, n, a, b, y):
    """build n (i. C[a ! e]) (and with two reads: a ! e and b ! e, or a ! e and
    a ! e'): the gather rule's obligation, backed by the real C and indices,
    gives exactly the counting evaluator's numbers for the real derivative
    (which takes the gather shortcut), and every hypothesis holds."""
    other = "2" if index != "2" else "i"
    idx = [INDICES[index] if j == 0 or x != reads[0] else INDICES[other]
           for j, x in enumerate(reads)]
    if len(reads) == 1:
        C = BODIES[data.draw(st.sampled_from(sorted(BODIES)))]
    else:
        C = BODIES2[data.draw(st.sampled_from(sorted(BODIES2)))]
    real_reads = [Index(Var(x, ty=AR), e(), ty=R) for x, e in zip(reads, idx)]
    res_ty = C(*real_reads).ty
    size = Prim("ILIT", Unit(), n, ty=Z)
    t = Build(size, "i", C(*real_reads), ty=ArrayT(res_ty))
    env = {"a": np.array(a), "b": np.array(b), "y": y}
    ks = [3 if j == 0 or x != reads[0] else 4 for j, x in enumerate(reads)]
    sub_reads = tuple(Index(Var(x, ty=AR), Sub(k, Z), ty=R) for x, k in zip(reads, ks))
    inst0 = Instance(Build(Sub(1, Z), "i", SubRead(2, sub_reads, res_ty), ty=t.ty), CTX)
    xs = _read_vars(transform(inst0)[0])
    assert len(xs) == len(reads)
    inst = Instance(Build(Sub(1, Z), "i", SubRead(2, sub_reads, res_ty, tuple(xs)), ty=t.ty),
                    CTX)
    sources = {1: size, 2: C(*(Var(x, ty=R) for x in xs))}
    for k, e in zip(ks, idx):
        sources[k] = e()
    _check_concrete(t, inst, sources, env, CTX, data)


def _check_concrete(t, inst, sources, env, ctx, data):
    """The rule's obligation for the placeholder instance `inst`, backed by the
    real sub-terms `sources`, against the counting evaluator on the real term t
    (with drawn cotangents): the same numbers, every hypothesis true."""
    value, primal_cost = Evaluator().eval(t, dict(env))
    ctg = _sparse(t.ty, data.draw(sparse_ctgs(t.ty, value)), value)
    denvin = [_sparse(ty, data.draw(sparse_ctgs(ty, env[name])), env[name]) for name, ty in ctx]
    evm = make_evm("spec")
    ev = Evaluator(evm=evm)
    context = Context()
    for name, ty in ctx:
        context.push(name, ty)
    (_, bp), crun = ev.eval(Chad(context)(t), dict(env))
    action, ccall = ev.apply(bp, ctg)
    _, denvout, cmonad = evm.run(action, list(denvin))

    derivs: dict = {}
    target, subs = transform(inst, Chad, sources, derivs)
    backing = Concrete(Evaluator(evm=make_evm("spec")), sources, derivs)
    se, ob = evaluate_instance(inst, "concrete", concrete=backing, ctg=ctg, denvin=denvin,
                               env=env, target=target, subs=subs)
    assert_matches_concrete(se, ob, primal_cost=primal_cost, crun=crun, ccall=ccall,
                            cmonad=cmonad, ctg=ctg, denvin=denvin, denvout=denvout)


# ------------------------------------------------------------------ fold: symbolic = concrete

P2 = Prod(R, R)


def _p(i):
    return (Fst if i == 0 else Snd)(Var("p", ty=P2), ty=R)


# combines: one that ignores p (its pair cell stays the sparse zero: the zeros'
# split), one that reads one component, and ones that read both
COMBINES = {
    "1.0": lambda: Prim("LIT", Unit(), 1.0, ty=R),
    "fst p": lambda: _p(0),
    "fst p + snd p": lambda: Prim("ADD", Pair(_p(0), _p(1), ty=P2), ty=R),
    "fst p * snd p * y": lambda: _mul(_mul(_p(0), _p(1)), Var("y", ty=R)),
}


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(sorted(COMBINES)), st.lists(st.floats(-2, 2), min_size=1, max_size=6),
       st.floats(-2, 2), st.data())
def test_fold_symbolic_costs_are_the_concrete_counts(combine, a, y, data):
    """fold (p. t) a over 1 to 6 elements, the combine t from a list that covers
    the zero cells (t ignores p), one component and both: the fold rule's
    obligation, backed by the real t and a, gives the counting evaluator's
    numbers, and every hypothesis holds (the cells' telescoping included)."""
    body, arr = COMBINES[combine](), Var("a", ty=AR)
    t = Fold("p", body, arr, ty=R)
    ctx = (("a", AR), ("y", R))
    inst = Instance(Fold("p", Sub(2, R), Sub(1, AR), ty=R), ctx)
    _check_concrete(t, inst, {1: arr, 2: body}, {"a": np.array(a), "y": y}, ctx, data)


# ------------------------------------------------------------------ the literal's generalisation


@pytest.mark.parametrize("m", range(1, GEN_CHECK + 3))
def test_the_literal_for_n_elements_implies_each_length(m):
    """The generalised obligation at n = m, its sums instantiated with the sums
    of the per-length obligation's symbols, has the same goal (lhs and P) and
    hypotheses implied by the per-length ones, for the checked lengths and two
    beyond them."""
    _, agg = literal_obligations(lambda inst: evaluate_instance(inst, "array literal")[1])
    assert agg.error is None, agg.error
    _, ob = evaluate_instance(literal(m), "array literal")
    names = SymbolRoles(ob, m, 2)
    subst = {"n": z3.IntVal(m)}
    for name, (fam, _i) in names.family.items():
        key = "sum_" + fam
        subst[key] = subst.get(key, 0) + z3.Int(name)
    for name, canon in names.shared.items():
        subst[canon.replace("#", "_")] = z3.Int(name)

    def inst(e):
        pairs = [(z3.Int(k), v if isinstance(v, z3.ExprRef) else z3.IntVal(v))
                 for k, v in subst.items()]
        return z3.substitute(e if isinstance(e, z3.ExprRef) else z3.IntVal(e), *pairs)

    def same(a, b):
        s = z3.Solver()
        s.add(inst(a) != b)
        return s.check() == z3.unsat

    assert same(agg.lhs, ob.lhs) and same(agg.P, ob.P)
    (sl, sp, mult), = agg.sub_hyps
    assert same(sl, sum(l for l, _, _ in ob.sub_hyps)) and same(sp, sum(p for _, p, _ in
                                                                          ob.sub_hyps))
    assert same(mult, sum(k for _, _, k in ob.sub_hyps))
    s = z3.Solver()
    s.add(*ob.hyps)
    s.add(z3.Not(z3.And(*[inst(h) for h in agg.hyps])))
    assert s.check() == z3.unsat


def test_the_literal_is_proved_for_every_length_at_b_29_not_at_b_0():
    spec = next(s for s in rule_table() if s.name == "array literal")
    (r,) = prove_rules([spec], PROOF_C, want_min=True, b=PROOF_B)
    assert r["proved"] and r["paths_min"]["n >= 1 elements"] is not None
    (r0,) = prove_rules([spec], 1000, b=0)
    assert not r0["proved"] and r0["path"] == "n >= 1 elements"


# ------------------------------------------------------------------ mutations


def _five(chad, rule, t):
    return Let(chad.fresh("five"), Fst(Pair(Unit(), Unit())), rule(chad, t))


class FoldFiveMore(Chad):
    def __call__(self, t):
        if isinstance(t, Fold):
            return _five(self, array_transform.chad_fold, t)
        return super().__call__(t)


class GatherFiveMore(Chad):
    def __call__(self, t):
        if isinstance(t, Build) and array_transform.extract_gathers(t.body, t.name,
                                                                    lambda s: s)[1]:
            return _five(self, array_transform.chad_build, t)
        return super().__call__(t)


class LiteralFiveMore(Chad):
    def __call__(self, t):
        if isinstance(t, ArrayLit):
            return _five(self, array_transform.chad_array_lit, t)
        return super().__call__(t)


@contextmanager
def _dense_zerot():
    """chad/arrays/transform.py's zerot giving dense zeros (DenseZero)."""
    old = array_transform.zerot
    array_transform.zerot = lambda ty: DenseZero(ty)
    try:
        yield
    finally:
        array_transform.zerot = old


class GatherDense(Chad):
    """The gather shortcut with a dense zero as the initial value of the read's
    cell (chad_build's inits use zerot only for the gathered elements)."""

    def __call__(self, t):
        if isinstance(t, Build):
            with _dense_zerot():
                return array_transform.chad_build(self, t)
        return super().__call__(t)


class FoldDense(Chad):
    """fold with a dense zero as the initial value of the combine's pair cell."""

    def __call__(self, t):
        if isinstance(t, Fold):
            from chad.arrays.nodes import UnTree

            out = array_transform.chad_fold(self, t)

            def swap(u):
                if isinstance(u, UnTree):
                    return UnTree(u.ctg, u.tree, DenseZero(None), u.elem)
                from chad.terms import rebuild
                return rebuild(u, [swap(c) for c in children(u)])

            return swap(out)
        return super().__call__(t)


ARRAY_RULES = ("array literal", "build", "map", "iter", "scan", "fold", "gather", "index",
               "length")


def _failing(chad_class, c):
    specs = [s for s in rule_table() if s.name in ARRAY_RULES]
    return {r["rule"] for r in prove_rules(specs, c, chad_class=chad_class, b=PROOF_B)
            if not r["proved"]}


@pytest.fixture(scope="module")
def mins():
    specs = [s for s in rule_table() if s.name in ARRAY_RULES]
    return {r["rule"]: r["min"] for r in prove_rules(specs, PROOF_C, want_min=True, b=PROOF_B)}


@pytest.mark.parametrize("cls,rule", [(FoldFiveMore, "fold"), (GatherFiveMore, "gather"),
                                      (LiteralFiveMore, "array literal")])
def test_five_more_steps_fail_exactly_that_rule(cls, rule, mins):
    """At the constant the rule needs, 5 more steps in it fail it and no other
    array rule (the other rules hold there or were already failing)."""
    c = mins[rule]
    before = _failing(Chad, c)
    assert rule not in before
    assert _failing(cls, c) - before == {rule}


@pytest.mark.parametrize("cls,rule", [(FoldDense, "fold"), (GatherDense, "gather")])
def test_a_dense_zero_fails_exactly_that_rule(cls, rule, monkeypatch):
    """A dense zero where the rule has a sparse one fails the rule at every
    constant (it is paid once and credited to every element) and no other."""
    monkeypatch.setitem(symbolic.EXTRA_RULES, DenseZero, _dense_zero_rule)
    assert _failing(cls, 1000) == {rule}


def test_fold_needs_a_slack_of_29_per_term():
    """fold's reverse pass costs 29 steps per combine beyond the combine's own
    derivative (with a leaf each: foldTree's 4 + 1, unTree's node 6 + 9, a leaf's
    3 + 1, a sparse zero cell's two zeros 4 and their potential 2, of which the
    cell's own potential pays 1), which a source fold does not charge: with
    b = 28 no constant proves it, with b = 29 c = 35 does (c + b = 64 on its
    n >= 2 path). So PROOF_B is 29."""
    spec = next(s for s in rule_table() if s.name == "fold")
    (r,) = prove_rules([spec], 1000, b=28)
    assert not r["proved"] and r["path"] == "n >= 2"
    (r,) = prove_rules([spec], PROOF_C, want_min=True, b=29)
    assert r["proved"] and r["paths_min"]["n >= 2"] == 35
    assert PROOF_B == 29


def test_gather_reads_on_an_empty_build_cost_a_constant():
    """An empty build evaluates none of its gather reads, so its derivative tests
    n == 0 first and builds no index array, gather, cell or `add`: at n = 0 the
    gradient costs the same for 1 to 16 reads, within TH2's bound (it used to
    grow by about 25 steps per read and break the bound from 4 reads on), and
    the gather rule's empty path needs the same constant for one read and two.
    At n >= 1 each read costs a constant more per element, paid by the primal's
    read. Gradients at n = 0, 1, 5, interpreted and compiled, against the
    gradient worked out by hand (2·a_j per read of a_j)."""
    import chad as api

    def src(reads):
        body = " + ".join(f"a ! (i + {k}) * a ! (i + {k})" for k in range(reads))
        return f"def f(a : Array R, n : Z) : R = sum (build n (\\i -> {body}))"

    empty = [api.cost(src(r), [[1.0, 2.0], 0]) for r in (1, 2, 8, 16)]
    assert len({rep.gradient_steps for rep in empty}) == 1
    assert all(rep.primal_steps == 3 and rep.gradient_steps <= rep.bound for rep in empty)
    for reads in (1, 3):
        xs = [0.5 + 0.25 * k for k in range(8)]
        for n in (0, 1, 5):
            _v, (g, _gn) = api.grad(src(reads), backend="interp")(xs, n)
            want = [0.0] * len(xs)
            for i in range(n):
                for k in range(reads):
                    want[i + k] += 2 * xs[i + k]
            assert np.allclose(np.asarray(g), want, rtol=0, atol=1e-12), (reads, n, g)
            _v2, (g2, _) = api.grad(src(reads), backend="compiled")(xs, n)
            assert np.allclose(np.asarray(g2), want, rtol=0, atol=1e-12), (reads, n, g2)
    spec = next(s for s in rule_table() if s.name == "gather")
    (r,) = prove_rules([spec], PROOF_C, want_min=True, b=PROOF_B)
    empties = {k: v for k, v in r["paths_min"].items() if k.endswith("n = 0")}
    assert len(empties) == 3 and len(set(empties.values())) == 1
    assert r["proved"] and r["min"] <= 34


def test_cli_rule_min_and_smt_for_the_new_rules(tmp_path, capsys):
    """`--rule`, `--min` and `--smt` on fold, the gather shortcut and the array
    literal: one proved line each, and each SMT-LIB file is unsat for z3."""
    from chad.cli import main

    assert main(["prove", "--rule", "fold,gather,array literal", "--min",
                 "--smt", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    for rule, need in (("fold", 35), ("gather", 22), ("array literal", 36)):
        line = next(ln for ln in out if ln.startswith(rule + " "))
        assert f"proved at c = {PROOF_C}" in line and f"needs c >= {need}," in line
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["array_literal_0.smt2", "array_literal_1.smt2", "fold_0.smt2",
                     "fold_1.smt2"] + [f"gather_{k}.smt2" for k in range(6)]
    for f in files:
        s = z3.Solver()
        s.from_string((tmp_path / f).read_text())
        assert s.check() == z3.unsat, f
