"""The one traversal of chad/terms.py (children, rebuild, binders, free
variables) on every node class, source and target, against a brute-force
definition written here independently of the `@node` declarations."""

from __future__ import annotations

import random
import sys

import attrs
import pytest

from chad import terms as T
from chad.arrays import nodes as A
from chad.functions import forward as FF
from chad.functions import terms as F
from chad.loops import nodes as L
from chad.proofs import gather_rules as G
from chad.proofs import symbolic as S
from chad.transform import naive_terms as N

# class -> (term fields, {term field: binder fields}, fields read by name).
# Written from the meaning of each node (docs/cost-model.md, the node docstrings).
SPEC = {
    T.Var: ((), {}, ("name",)),
    T.Let: (("rhs", "body"), {"body": ("name",)}, ()),
    T.Prim: (("arg",), {}, ()),
    T.Unit: ((), {}, ()),
    T.Pair: (("left", "right"), {}, ()),
    T.Fst: (("expr",), {}, ()), T.Snd: (("expr",), {}, ()),
    T.Inl: (("expr",), {}, ()), T.Inr: (("expr",), {}, ()),
    T.Case: (("scrut", "lbody", "rbody"), {"lbody": ("lname",), "rbody": ("rname",)}, ()),
    T.Lam: (("body",), {"body": ("name",)}, ("captures",)),
    T.App: (("fn", "arg"), {}, ()),
    T.Call: (("args",), {}, ()),
    T.Ann: (("expr",), {}, ()),
    T.Build: (("size", "body"), {"body": ("name",)}, ()),
    T.Index: (("arr", "idx"), {}, ()),
    T.Fold: (("body", "arr"), {"body": ("name",)}, ()),
    T.Length: (("expr",), {}, ()),
    T.ArrayLit: (("elems",), {}, ()),
    T.MapA: (("body", "arr"), {"body": ("name",)}, ()),
    T.Iter: (("count", "body", "init"), {"body": ("name",)}, ()),
    T.Scan: (("body", "init", "arr"), {"body": ("name",)}, ()),
    T.PureEVM: (("expr",), {}, ()),
    T.BindEVM: (("m", "k"), {}, ()),
    T.ThenEVM: (("first", "second"), {}, ()),
    T.RunEVM: (("m", "env"), {}, ()),
    T.AddEVM: (("val",), {}, ()),  # its `name` is for printing: the cell is `level`
    T.ScopeEVM: (("init", "m"), {}, ()),
    T.LUnit: ((), {}, ()), T.LPair: (("left", "right"), {}, ()),
    T.LFst: (("expr",), {}, ()), T.LSnd: (("expr",), {}, ()), T.LPairZero: ((), {}, ()),
    T.LInl: (("expr",), {}, ()), T.LInr: (("expr",), {}, ()),
    T.LCastL: (("expr",), {}, ()), T.LCastR: (("expr",), {}, ()), T.LSumZero: ((), {}, ()),
    A.BEmptyT: ((), {}, ()), A.BOneT: (("idx", "val"), {}, ()),
    A.BArrayT: (("vals", "idx"), {}, ()), A.BFillT: (("arr", "val"), {}, ()),
    A.Collect: (("bag",), {}, ()), A.Zeros: (("size",), {}, ()),
    A.Scatter: (("dense", "pairs"), {}, ()), A.Unzip: (("arr",), {}, ()),
    A.Gather: (("arr", "idx"), {}, ()),
    A.UnzipMap: (("body", "arr"), {"body": ("name",)}, ()),
    A.ScatterBag: (("arr", "bag"), {}, ()),
    A.SequenceScoped: (("fns", "ctgs", "inits"), {}, ()),
    A.FoldTree: (("body", "arr"), {"body": ("name",)}, ()),
    A.GetA: (("tree",), {}, ()), A.UnTree: (("ctg", "tree", "init"), {}, ()),
    F.Pack: (("expr",), {}, ()),
    F.Unpack: (("scrut", "body"), {"body": ("name",)}, ()),
    F.ClosedLam: (("body",), {"body": ("name",)}, ()),
    F.ClosedApp: (("fn", "arg"), {}, ()),
    F.MkClosure: (("body",), {"body": ("name", "captures")}, ("captures",)),
    F.CApp: (("fn", "arg"), {}, ()),
    F.LCastPack: (("expr",), {}, ()), F.LPackAs: (("primal", "expr"), {}, ()),
    F.LFunZero: ((), {}, ()), F.LTagZero: ((), {}, ()),
    F.DCall: (("args",), {}, ()), FF.FCall: (("args",), {}, ()), F.EnvOneT: (("expr",), {}, ()),
    F.EnvScatter: (("expr",), {}, ()),
    F.LogOneT: (("arg", "ctg"), {}, ()),
    F.LogFold: (("log", "body"), {"body": ("name",)}, ()),
    L.IterFwd: (("count", "body", "init"), {"body": ("name",)}, ()),
    L.IterBack: (("bps", "ctg", "init"), {}, ()),
    L.ScanFwd: (("body", "init", "arr"), {"body": ("name",)}, ()),
    L.ScanBack: (("bps", "ctg", "init"), {}, ()),
    N.DZero: ((), {}, ()), N.DCast: (("expr",), {}, ()), N.DDensify: (("expr",), {}, ()),
    N.EVZero: ((), {}, ()), N.EVOneHot: (("val",), {}, ()),
    N.EVPlus: (("left", "right"), {}, ()), N.EVSplit: (("expr",), {}, ()),
    # the placeholders of the per-rule cost proofs (chad/proofs/symbolic.py)
    S.AbsZero: ((), {}, ()), S.Sub: ((), {}, ()), S.SubChad: ((), {}, ()),
    S.AbsDPrim: (("p", "d"), {}, ()), G.SubRead: (("reads",), {}, ()),
}
# term fields holding a tuple of terms, and those that may be None
TUPLES = {(T.Call, "args"), (F.DCall, "args"), (FF.FCall, "args"), (A.SequenceScoped, "inits"),
          (G.SubRead, "reads")}
OPTIONAL = {(A.BArrayT, "idx")}
NAMES = ("x", "y", "z")


def all_node_classes() -> set[type]:
    """Every node class defined by the project's modules (attrs replaces each
    class by a slotted copy; the discarded originals are left out)."""
    out, stack = set(), [T.Term]
    while stack:
        cls = stack.pop()
        for sub in cls.__subclasses__():
            module = sys.modules.get(sub.__module__)
            if getattr(module, sub.__qualname__, None) is sub and \
                    not sub.__module__.startswith("test"):
                out.add(sub)
            stack.append(sub)
    return out


def _names(v) -> tuple[str, ...]:
    return () if v is None else (v,) if isinstance(v, str) else tuple(v)


def fv(t) -> set[str]:
    """Brute force: the set of free variables, recursively, from SPEC."""
    kids, binds, reads = SPEC[type(t)]
    out = {n for f in reads for n in _names(getattr(t, f))}
    for f in kids:
        bound = {n for b in binds.get(f, ()) for n in _names(getattr(t, b))}
        v = getattr(t, f)
        for c in (() if v is None else v if isinstance(v, tuple) else (v,)):
            out |= fv(c) - bound
    return out


def kids_of(t) -> list:
    out = []
    for f in SPEC[type(t)][0]:
        v = getattr(t, f)
        out.extend(() if v is None else v if isinstance(v, tuple) else (v,))
    return out


def random_term(rng: random.Random, depth: int, classes: list[type]):
    cls = rng.choice(classes) if depth > 0 else rng.choice([T.Var, T.Unit, T.LUnit])
    kids, binds, reads = SPEC[cls]
    binder_fields = {b for bs in binds.values() for b in bs}
    values = {}
    for a in attrs.fields(cls):
        if a.name in ("loc", "ty"):
            if a.default is attrs.NOTHING:  # a placeholder's required type
                values[a.name] = None
            continue
        if a.name in kids:
            if (cls, a.name) in TUPLES:
                values[a.name] = tuple(random_term(rng, depth - 1, classes)
                                       for _ in range(rng.randint(0, 3)))
            elif (cls, a.name) in OPTIONAL and rng.random() < 0.3:
                values[a.name] = None
            else:
                values[a.name] = random_term(rng, depth - 1, classes)
        elif a.name in reads or a.name in binder_fields:
            if a.name == "captures":
                values[a.name] = None if (cls is T.Lam and rng.random() < 0.4) else \
                    tuple(rng.sample(NAMES, rng.randint(0, 3)))
            else:
                values[a.name] = rng.choice(NAMES)
        else:
            values[a.name] = 0 if a.name in ("level", "index", "side") else None
    return cls(**values)


def test_every_node_class_is_specified_and_declared():
    missing = sorted(c.__name__ for c in all_node_classes() if c not in SPEC)
    assert not missing, f"node classes without a brute-force spec: {missing}"
    for cls in SPEC:
        T.shape(cls)  # raises for a class without @node


@pytest.mark.parametrize("seed", range(40))
def test_free_vars_children_rebuild_against_brute_force(seed):
    rng = random.Random(seed)
    classes = sorted(SPEC, key=lambda c: c.__name__)
    for _ in range(50):
        t = random_term(rng, 4, classes)
        got = T.free_vars(t)
        assert len(set(got)) == len(got)
        assert set(got) == fv(t), t
        kids = T.children(t)
        assert kids == kids_of(t)
        assert T.rebuild(t, kids) is t
        assert [c for c, _ in T.binders_of(t)] == kids
        swapped = T.rebuild(t, [T.Var("w")] * len(kids))
        assert T.children(swapped) == [T.Var("w")] * len(kids)
        assert type(swapped) is type(t)
        assert list(T.subterms(t))[0] is t


def test_every_class_is_reached_by_the_generator():
    rng = random.Random(0)
    classes = sorted(SPEC, key=lambda c: c.__name__)
    seen = set()
    for _ in range(2000):
        seen.update(type(u) for u in T.subterms(random_term(rng, 3, classes)))
    assert seen == set(SPEC)


def test_the_two_cases_the_old_walks_got_wrong():
    assert T.free_vars(F.Unpack(T.Var("c"), "z", T.Var("z"))) == ("c",)
    assert T.free_vars(A.FoldTree("p", T.Var("p"), T.Var("a"))) == ("a",)


def test_order_of_first_occurrence_and_trusted_captures():
    t = T.Let("a", T.Var("b"), T.Pair(T.Var("c"), T.Pair(T.Var("a"), T.Var("b"))))
    assert T.free_vars(t) == ("b", "c")
    lam = T.Lam("x", None, T.Pair(T.Var("x"), T.Var("q")), ("k",))
    assert T.free_vars(lam) == ("k", "q")  # what it reads, and its body's (ill-formed here)
    assert T.free_vars(lam, trust_captures=True) == ("k",)


def test_deep_terms_do_not_recurse():
    t = T.Var("v")
    for i in range(50_000):
        t = T.Let(f"x{i}", T.Var("v") if i % 2 else T.Unit(), T.Pair(T.Var(f"x{i}"), t))
    assert T.free_vars(t) == ("v",)
    assert sum(1 for _ in T.subterms(t)) == 200_001


def test_node_declaration_checks_field_names():
    with pytest.raises(TypeError, match="no field"):
        @T.node("nope")
        @attrs.frozen
        class Bad(T.Term):
            expr: T.Term
