"""The four laws of the formalisation's LACM module (Efficient CHAD (Smeding & Vákár), appendix B,
spec.LACM: run-pure, run-bind, run-add, run-scope) as hypothesis properties,
checked against every EVM implementation of chad/runtime/registry.py, plus agreement
of all implementations with a transliteration of the Agda definitions on random
action trees.

Action trees are data (`("pure", x)`, `("add", level, v)`, `("then", a, b)`,
`("bind", m, ccall, body)`, `("scope", init, m)`, `("seq", [..])`) built into
each EVM's own action representation by `build`. Cells have random linear
"shapes" (R, (), pairs, sums with a side) and receive sparse cotangents of
their shape: floats, None, nested tuples, values.Inj.

The laws are checked with *exact* values (integer-valued floats, one fixed
injection side per sum position), on which every order of the adds agrees, and
the sequential EVMs also with arbitrary floats and mixed sides; the parallel
EVM's bit-identity with the array EVM on arbitrary values is
tests/test_parallel_determinism.py's (docs/runtimes.md, "Determinism").

The rest of the Protocol is checked on every implementation, the project's
literal LACM (chad/costmodel/lacm.py, "spec") included: `sequence` is the `then`
chain (result of the last action, same cells, same cost; `pure None` when
empty) and agrees with the one default of chad/runtime/protocol.py (`EVMBase`);
`reset_work` zeroes `work`; `start`/`close` leave the EVM usable. The cells'
monoid is a parameter of the runtimes (default: chad.linear.plusv).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chad.linear import plusv
from chad.values import Inj
from chad.costmodel.lacm import SpecLACM
from chad.runtime import EVM, EVM_NAMES, EVMBase, make_evm

SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# One instance per implementation; the parallel one forks at every `then`
# (grain=1) so the tests exercise concurrency, not just the sequential path.
EVMS = {name: make_evm(name, **({"grain": 1} if name == "parallel" else {})) for name in EVM_NAMES}
SEQUENTIAL = [n for n in EVM_NAMES if n != "parallel"]
EVMS["parallel"].start()  # spawn the pool up front
# Every implementation of the Protocol: the runtimes and the formalisation's oracle.
IMPLS = {**EVMS, "spec": SpecLACM()}


each_evm = pytest.mark.parametrize("evm_name", EVM_NAMES)
each_impl = pytest.mark.parametrize("evm_name", list(IMPLS))


# ---------------------------------------------------------------------------
# generators

shapes = st.recursive(
    st.sampled_from(["R", "U"]),
    lambda inner: st.one_of(st.tuples(st.just("P"), inner, inner),
                            st.tuples(st.just("S"), st.integers(0, 1), inner)),
    max_leaves=4,
)


def values_of(shape, exact: bool):
    """Sparse cotangents of a shape. exact: integer-valued floats, fixed sides."""
    if shape == "R":
        if exact:
            return st.integers(-64, 64).map(float)
        return st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
    if shape == "U":
        return st.none()
    if shape[0] == "P":
        return st.one_of(st.none(), st.tuples(values_of(shape[1], exact), values_of(shape[2], exact)))
    _, side, inner = shape
    sides = st.just(side) if exact else st.integers(0, 1)
    return st.one_of(st.none(), st.builds(Inj, sides, values_of(inner, exact)))


results = st.one_of(st.none(), st.integers(-5, 5), st.text(max_size=3))


@st.composite
def envs(draw, exact: bool, min_size: int = 0):
    cell_shapes = draw(st.lists(shapes, min_size=min_size, max_size=5))
    env = [draw(values_of(s, exact)) for s in cell_shapes]
    return cell_shapes, env


@st.composite
def trees(draw, cell_shapes: list, exact: bool, depth: int = 4):
    kinds = ["pure"] + (["add", "add", "add"] if cell_shapes else [])
    if depth > 0:
        kinds += ["then", "then", "bind", "scope", "seq"]
    kind = draw(st.sampled_from(kinds))
    sub = lambda shapes_=cell_shapes: trees(shapes_, exact, depth - 1)  # noqa: E731
    if kind == "pure":
        return ("pure", draw(results))
    if kind == "add":
        level = draw(st.integers(0, len(cell_shapes) - 1))
        return ("add", level, draw(values_of(cell_shapes[level], exact)))
    if kind == "then":
        return ("then", draw(sub()), draw(sub()))
    if kind == "bind":
        return ("bind", draw(sub()), draw(st.integers(0, 5)), draw(sub()))
    if kind == "scope":
        shape = draw(shapes)
        init = draw(values_of(shape, exact))
        return ("scope", init, draw(sub(cell_shapes + [shape])))
    return ("seq", draw(st.lists(sub(), max_size=4)))


@st.composite
def programs(draw, exact: bool, min_cells: int = 0):
    """(tree, env) with the tree's levels valid for env."""
    cell_shapes, env = draw(envs(exact, min_cells))
    return draw(trees(cell_shapes, exact)), env, cell_shapes


# ---------------------------------------------------------------------------
# building actions, and the reference semantics (spec.LACM transliterated)


def continuation(evm: EVM, body, ccall: int):
    """k x = (body >> pure ("k", x), ccall): uses x, so passing it is tested."""
    return lambda x: (evm.then(body, evm.pure(("k", x))), ccall)


def build(evm: EVM, t):
    kind = t[0]
    if kind == "pure":
        return evm.pure(t[1])
    if kind == "add":
        return evm.add(t[1], t[2])
    if kind == "then":
        return evm.then(build(evm, t[1]), build(evm, t[2]))
    if kind == "bind":
        return evm.bind(build(evm, t[1]), continuation(evm, build(evm, t[3]), t[2]))
    if kind == "scope":
        return evm.scope(t[1], build(evm, t[2]))
    if kind == "seq":
        return evm.sequence([build(evm, s) for s in t[1]])
    raise AssertionError(t)


def ref(t, env: list):
    """The LACM definitions: (result, env', cost), purely functionally."""
    kind = t[0]
    if kind == "pure":
        return t[1], env, 1
    if kind == "add":
        level, v = t[1], t[2]
        new, c = plusv(v, env[level])
        return None, env[:level] + [new] + env[level + 1:], 1 + c
    if kind == "then":  # bind a (\_ -> (b, 0)) with the continuation's body a variable
        _, e1, ca = ref(t[1], env)
        y, e2, cb = ref(t[2], e1)
        return y, e2, 1 + ca + 1 + cb
    if kind == "bind":
        x, e1, c1 = ref(t[1], env)
        ccall = t[2]
        y, e2, c2 = ref(("then", t[3], ("pure", ("k", x))), e1)
        return y, e2, 1 + c1 + ccall + c2
    if kind == "scope":
        r, e1, c = ref(t[2], env + [t[1]])
        return (e1[-1], r), e1[:-1], 1 + c
    if kind == "seq":  # the then chain: result of the last, pure None if empty
        if not t[1]:
            return None, env, 1
        total = 2 * (len(t[1]) - 1)
        r = None
        for s in t[1]:
            r, env, c = ref(s, env)
            total += c
        return r, env, total
    raise AssertionError(t)


def run_ref(t, env: list):
    r, e, c = ref(t, list(env))
    return r, e, 1 + len(env) + c


def exact_for(name: str) -> st.SearchStrategy[bool]:
    return st.just(True) if name == "parallel" else st.booleans()


# ---------------------------------------------------------------------------
# the four laws


@each_impl
def test_protocol(evm_name):
    evm = IMPLS[evm_name]
    assert isinstance(evm, EVM)
    assert isinstance(evm, EVMBase)  # the one default of sequence, reset_work, start, close
    assert evm.name == evm_name
    assert isinstance(evm.work, int)


@each_evm
@SETTINGS
@given(data=st.data())
def test_run_pure(evm_name, data):
    evm = EVMS[evm_name]
    _, env = data.draw(envs(data.draw(exact_for(evm_name))))
    x = data.draw(results)
    before = list(env)
    r, env2, c = evm.run(evm.pure(x), env)
    assert (r, env2, c) == (x, env, 1 + len(env) + 1)
    assert env == before  # run does not mutate its argument


@each_evm
@SETTINGS
@given(data=st.data())
def test_run_bind(evm_name, data):
    evm = EVMS[evm_name]
    exact = data.draw(exact_for(evm_name))
    m1_tree, env, cell_shapes = data.draw(programs(exact))
    body_tree = data.draw(trees(cell_shapes, exact, 3))
    ccall = data.draw(st.integers(0, 7))
    body = build(evm, body_tree)
    k = continuation(evm, body, ccall)

    r, env_, c = evm.run(evm.bind(build(evm, m1_tree), k), env)
    r1, env1, c1 = evm.run(build(evm, m1_tree), env)
    m2, ccall_ = k(r1)
    r2, env2, c2 = evm.run(m2, env1)
    assert ccall_ == ccall
    assert env_ == env2
    assert r == r2
    assert c == c1 + ccall + c2 - len(env)


@each_evm
@SETTINGS
@given(data=st.data())
def test_run_add(evm_name, data):
    evm = EVMS[evm_name]
    exact = data.draw(exact_for(evm_name))
    cell_shapes, env = data.draw(envs(exact, min_size=1))
    level = data.draw(st.integers(0, len(env) - 1))
    v = data.draw(values_of(cell_shapes[level], exact))
    r, env_, c = evm.run(evm.add(level, v), env)
    new, cplus = plusv(v, env[level])
    assert r is None
    assert env_ == env[:level] + [new] + env[level + 1:]
    assert c == 2 + cplus + len(env)


@each_evm
@SETTINGS
@given(data=st.data())
def test_run_scope(evm_name, data):
    """run (scope v m) env vs run m (env, v): same result, out value and env.
    Costs: c1 = 1 + |Γ| + (1 + c(m)) and c2 = 1 + (|Γ| + 1) + c(m), so c1 == c2."""
    evm = EVMS[evm_name]
    exact = data.draw(exact_for(evm_name))
    cell_shapes, env = data.draw(envs(exact))
    shape = data.draw(shapes)
    inval = data.draw(values_of(shape, exact))
    m_tree = data.draw(trees(cell_shapes + [shape], exact))

    (out1, x1), env1, c1 = evm.run(evm.scope(inval, build(evm, m_tree)), env)
    x2, env2_full, c2 = evm.run(build(evm, m_tree), env + [inval])
    assert x1 == x2
    assert out1 == env2_full[-1]
    assert env1 == env2_full[:-1]
    assert c1 == c2


# ---------------------------------------------------------------------------
# agreement with the definitions, and between implementations


@each_evm
@SETTINGS
@given(data=st.data())
def test_matches_reference(evm_name, data):
    evm = EVMS[evm_name]
    t, env, _ = data.draw(programs(data.draw(exact_for(evm_name))))
    before = list(env)
    assert evm.run(build(evm, t), env) == run_ref(t, env)
    assert env == before


@SETTINGS
@given(prog=programs(exact=True))
def test_all_implementations_agree(prog):
    t, env, _ = prog
    outs = {name: evm.run(build(evm, t), env) for name, evm in EVMS.items()}
    first = outs[EVM_NAMES[0]]
    for name, out in outs.items():
        assert out == first, name


@SETTINGS
@given(prog=programs(exact=False))
def test_sequential_implementations_agree_on_any_floats(prog):
    t, env, _ = prog
    outs = [EVMS[name].run(build(EVMS[name], t), env) for name in SEQUENTIAL]
    assert all(o == outs[0] for o in outs)


# ---------------------------------------------------------------------------
# sequence, work, lifecycle: the rest of the Protocol, on every implementation


def then_chain(evm, acts):
    """((a1 >> a2) >> a3) >> ...: left-nested `then`s."""
    chain = acts[0]
    for a in acts[1:]:
        chain = evm.then(chain, a)
    return chain


@each_impl
@pytest.mark.parametrize("n", [0, 1, 2, 7])
def test_sequence_of_adds_is_the_then_chain(evm_name, n):
    evm = IMPLS[evm_name]
    acts = [evm.add(i % 2, float(i)) for i in range(n)]
    env = [0.0, 0.0]
    out = evm.run(evm.sequence(acts), env)
    r, env2, c = out
    assert r is None
    assert env2 == [float(sum(range(0, n, 2))), float(sum(range(1, n, 2)))]
    if n == 0:  # sequence [] = pure None
        assert out == evm.run(evm.pure(None), env) == (None, env, 1 + 2 + 1)
    else:  # the same result, cells and cost as the then chain, and as the default
        assert c == 1 + 2 + 2 * n + 2 * (n - 1)  # each add costs 1 + plusv 1
        assert evm.run(then_chain(evm, acts), env) == out
        assert evm.run(EVMBase.sequence(evm, acts), env) == out


@each_impl
@SETTINGS
@given(data=st.data())
def test_sequence_is_the_then_chain(evm_name, data):
    """On random action lists (with results): sequence = left chain of then =
    the default balanced tree of then (EVMBase.sequence), on result, cells and cost."""
    evm = IMPLS[evm_name]
    exact = data.draw(exact_for(evm_name))
    cell_shapes, env = data.draw(envs(exact))
    items = data.draw(st.lists(trees(cell_shapes, exact, 2), max_size=6))
    acts = [build(evm, t) for t in items]
    out = evm.run(evm.sequence(acts), env)
    assert out == run_ref(("seq", items), env)
    assert out == evm.run(EVMBase.sequence(evm, acts), env)
    if acts:
        assert out == evm.run(then_chain(evm, acts), env)
    else:
        assert out == evm.run(evm.pure(None), env)


@each_impl
def test_reset_work_zeroes_the_counter(evm_name):
    evm = IMPLS[evm_name]
    prog = evm.sequence([evm.add(0, 1.0), evm.scope(0.0, evm.add(1, 2.0)), evm.add(0, 3.0)])
    evm.reset_work()
    assert evm.work == 0
    assert evm.run(prog, [0.0])[1] == [4.0]
    assert isinstance(evm.work, int) and evm.work > 0  # the adds and the scope did work
    first = evm.work
    evm.run(prog, [0.0])
    assert evm.work == 2 * first  # the count accumulates until reset
    evm.reset_work()
    assert evm.work == 0


@each_impl
def test_start_and_close_leave_the_evm_usable(evm_name):
    evm = IMPLS[evm_name]
    prog = evm.then(evm.add(0, 1.0), evm.add(0, 2.0))
    assert evm.start() is evm
    assert evm.run(prog, [0.0])[1] == [3.0]
    evm.close()
    assert evm.run(prog, [0.0])[1] == [3.0]  # a run after close acquires resources again
    with evm as same:
        assert same is evm
    evm.start()  # leave the shared instance as the other tests expect it


@SETTINGS
@given(prog=programs(exact=True))
def test_agrees_with_the_project_oracle(prog):
    """The project's literal LACM (chad/costmodel/lacm.py; its `sequence` is the
    Protocol's default) agrees with the definitions and with every runtime, on
    every tree, sequences included."""
    t, env, _ = prog
    spec = IMPLS["spec"]
    expected = spec.run(build(spec, t), env)
    assert expected == run_ref(t, env)
    for name, evm in EVMS.items():
        assert evm.run(build(evm, t), env) == expected, name


@each_evm
def test_the_cells_monoid_is_passed_in(evm_name):
    def plus(new, cell):  # a non-commutative monoid shows the order of the arguments
        return f"{cell}+{new}", 5

    evm = make_evm(evm_name, plus=plus)
    out = evm.run(evm.sequence([evm.add(0, "a"), evm.scope("s", evm.add(1, "b")), evm.add(0, "c")]),
                  ["z"])
    # run 1 + |env|, two thens 2 + 2, adds 1 + 5 each, scope 1
    assert out == (None, ["z+a+c"], 1 + 1 + 4 + 6 + (1 + 6) + 6)
    evm.close()
