"""The instrumented evaluator: values and step counts of source and target terms.

On the formalisation's fragment (var let prim unit pair fst snd inl inr case lam
app, the EVM operations and the sparse linear operations) every rule is the
formalisation's `eval` (Efficient CHAD (Smeding & Vákár), appendix B, `spec.agda`), at its corrected
version: `lfst`/`lsnd` of a zero cost 1 + (argument) + (the zero), as
`lcastl`/`lcastr` do. The rules for the other constructs (def calls, arrays,
primitives beyond the formalisation) are in docs/cost-model.md.

Monadic values are actions of an EVM implementation (chad/runtime/); their costs are
the formalisation's LACM costs, reported by the implementation when `run` runs.

Environments are one mutable dict per function body, with save/restore around
binders; a closure copies only its captured variables, so each closure call has a
private dict (safe when the parallel runtime calls closures from several threads).
The rules live in the table chad.tables.EVAL: the core rules below register
themselves there; extensions (arrays, closure conversion) and naive CHAD's dense
environments register theirs through chad/extend.py (`register_node(eval=...)`).

Memory: the counting path keeps every residual of the forward pass (closures,
pairs) alive until the backward pass has run, so their size per element or per
let is the peak (benchmarks/bench_memory.py, tests/test_memory.py). A closure is
two slots, its lambda node and the captured values (no dict: the names are the
node's); a lambda capturing nothing that is evaluated again (in a build, map or
fold body, a called function) gives the same closure object; a bind's
continuation is a two-slot object, not a Python closure; a chain of lets in body
position is one loop, not three Python frames per let. None of this changes a
value or a step count.
"""

from __future__ import annotations

from typing import Any

from chad import tables
from chad.deep import run_deep
from chad.errors import EvalError
from chad.linear import zerov
from chad.primitives import PRIMITIVES
from chad.terms import (
    AddEVM, Ann, App, BindEVM, Call, Case, Def, Fst, Inl, Inr, Lam, LCastL, LCastR,
    Let, LFst, LInl, LInr, LPair, LPairZero, LSnd, LSumZero, LUnit, Pair, Prim,
    PureEVM, RunEVM, ScopeEVM, Snd, ThenEVM, Unit, Var,
)
from chad.values import Inj, cells_to_env_tuple, env_tuple_to_cells

_MISSING = object()
RULES = tables.EVAL  # node class -> rule(evaluator, node, env) -> (value, steps)
CLOSED_CACHE = 256  # closures of lambdas capturing nothing kept per Evaluator


def rule(*classes):
    """Register the evaluation rule of the core node classes below."""

    def register(fn):
        for cls in classes:
            tables.put(tables.EVAL, cls, fn, "an evaluation rule")
        return fn

    return register


class Closure:
    """A function value: `code`, the lambda node (its parameter `name`, its `body`
    and, for a `Lam`, the captured names `captures`), and `values`, the captured
    values in the order of `code.captures`: () when it captures nothing, the value
    itself when it captures one variable, a tuple when it captures several. Never
    mutated; equality is identity. (No dict per closure: a captured dict cost 184
    bytes of the 240 a closure took, and a chain of lets or a build builds one
    closure per let or per element for every sub-term.)"""

    __slots__ = ("code", "values")

    def __init__(self, code, values=()):
        self.code = code
        self.values = values

    @property
    def param(self) -> str:
        return self.code.name

    @property
    def body(self):
        return self.code.body

    @property
    def names(self) -> tuple:
        """The captured variables' names."""
        code = self.code
        return tuple(code.captures) if type(code) is Lam else ()

    @property
    def captured(self) -> dict:
        """The captured variables as a dict (built on demand)."""
        names = self.names
        if len(names) == 1:
            return {names[0]: self.values}
        return dict(zip(names, self.values))

    def __repr__(self) -> str:
        return f"<closure \\{self.param}>"


class Continuation:
    """The continuation of a `bind`, x -> (action, ccall) = apply fn x, as a
    two-slot object (48 bytes; the lambda it replaces, with its default and the
    cell of the evaluator, took about 320, kept alive until the action has run)."""

    __slots__ = ("ev", "fn")

    def __init__(self, ev, fn):
        self.ev = ev
        self.fn = fn

    def __call__(self, x):
        return self.ev.apply(self.fn, x)


class Evaluator:
    """Evaluates terms against `defs` (for Call) with the EVM `evm` (for run)."""

    def __init__(self, defs: dict[str, Def] | None = None, evm=None):
        self.defs = defs or {}
        self.evm = evm
        # id(lambda node) -> its closure, for the lambdas capturing nothing (the
        # closure holds the node, so the id is not reused while cached). At most
        # CLOSED_CACHE entries: a build body's few lambdas stay cached, a chain of
        # n lets, whose lambdas are each evaluated once, does not grow it.
        self._closed: dict[int, Closure] = {}

    # ------------------------------------------------------------ helpers
    def bind(self, env: dict, name: str, value, body) -> tuple[Any, int]:
        """Evaluate body with name bound to value (restoring the old binding)."""
        old = env.get(name, _MISSING)
        env[name] = value
        try:
            return self.eval(body, env)
        finally:
            if old is _MISSING:
                del env[name]
            else:
                env[name] = old

    def closed(self, t) -> Closure:
        """The closure of the lambda node t (a Lam or ClosedLam) capturing
        nothing: one object per node while it stays in the cache."""
        closed = self._closed
        c = closed.get(id(t))
        if c is None:
            c = Closure(t)
            if len(closed) >= CLOSED_CACHE:
                closed.clear()
            closed[id(t)] = c
        return c

    def apply(self, fn, arg) -> tuple[Any, int]:
        """Call a function value; returns (result, cost of evaluating the body)."""
        if type(fn) is Closure:
            code = fn.code
            env = {}
            if type(code) is Lam:
                names = code.captures
                if len(names) == 1:
                    env[names[0]] = fn.values
                elif names:
                    env.update(zip(names, fn.values))
            env[code.name] = arg
            return self.eval(code.body, env)
        if callable(fn):  # built-in function values used by extensions
            return fn(arg)
        raise EvalError(f"applying a value that is not a function: {fn!r}")

    # ------------------------------------------------------------ dispatch
    def eval(self, t, env: dict) -> tuple[Any, int]:
        """(value, steps) of t: one rule per node class, in RULES."""
        try:
            fn = RULES[type(t)]
        except KeyError:
            raise EvalError(f"internal: no evaluation rule for {type(t).__name__}") from None
        return fn(self, t, env)

    def _cast(self, e, zero, side: int, env):
        v, c = self.eval(e, env)
        if isinstance(v, Inj) and v.side == side:
            return v.value, 1 + c
        z, cz = zerov(zero)  # nothing, or the other side (formalisation: zero)
        return z, 1 + c + cz

    def _call(self, t, name, args, env):
        """A def call: 1 + the arguments + the body (a closed function's app)."""
        d = self.defs.get(name)
        if d is None:
            raise EvalError(f"call of an unknown def {name!r}", t.loc)
        cost = 1
        inner = {}
        for p, a in zip(d.params, args):
            v, c = self.eval(a, env)
            inner[p.name] = v
            cost += c
        r, cb = self.eval(d.body, inner)
        return r, cost + cb


def evaluate(term, env: dict | None = None, defs=None, evm=None) -> tuple[Any, int]:
    """Evaluate a term in a big-stack thread: (value, steps)."""
    return run_deep(Evaluator(defs, evm).eval, term, dict(env or {}))


# ------------------------------------------------------------------ core rules
# The formalisation's `eval`, one function per term former.


@rule(Var)
def _var(ev, t, env):
    try:
        return env[t.name], 1
    except KeyError:
        raise EvalError(f"unbound variable {t.name!r}", t.loc) from None


@rule(Let)
def _let(ev, t, env):
    # let x1 = e1 in let x2 = e2 in ... body, as one loop: each let costs
    # 1 + c(e_i), the body c(body), as nested ev.bind calls would; the bindings
    # are restored innermost first, also on an exception. One Python frame for
    # the chain instead of three per let (a chain of n lets is n deep).
    names: list = []
    olds: list = []
    cost = 0
    try:
        while True:
            v, c1 = ev.eval(t.rhs, env)
            cost += 1 + c1
            name = t.name
            names.append(name)
            olds.append(env.get(name, _MISSING))
            env[name] = v
            t = t.body
            if type(t) is not Let:
                break
        r, c2 = ev.eval(t, env)
        return r, cost + c2
    finally:
        for i in range(len(names) - 1, -1, -1):
            old = olds[i]
            if old is _MISSING:
                del env[names[i]]
            else:
                env[names[i]] = old


@rule(Prim)
def _prim(ev, t, env):
    v, c = ev.eval(t.arg, env)
    op = t.op
    if op == "LIT" or op == "ILIT":
        return t.const, 1 + c
    prim = PRIMITIVES.get(op)
    if prim is None or prim.evaluate is None:
        raise EvalError(f"internal: no evaluation for primitive {op}", t.loc)
    try:
        r = prim.evaluate(v)
    except EvalError as e:
        if e.loc is None:
            e.loc = t.loc
        raise
    except (OverflowError, ZeroDivisionError, ValueError) as e:
        raise EvalError(f"{op.lower()} of {v!r}: {e}", t.loc) from None
    extra = prim.extra_cost
    return r, 1 + c + (extra(v) if extra is not None else 0)


@rule(Unit, LUnit, LPairZero, LSumZero)
def _unit(ev, t, env):
    return None, 1


@rule(Pair, LPair)
def _pair(ev, t, env):
    va, ca = ev.eval(t.left, env)
    vb, cb = ev.eval(t.right, env)
    return (va, vb), 1 + ca + cb


@rule(Fst)
def _fst(ev, t, env):
    v, c = ev.eval(t.expr, env)
    return v[0], 1 + c


@rule(Snd)
def _snd(ev, t, env):
    v, c = ev.eval(t.expr, env)
    return v[1], 1 + c


@rule(Inl, LInl)
def _inl(ev, t, env):
    v, c = ev.eval(t.expr, env)
    return Inj(0, v), 1 + c


@rule(Inr, LInr)
def _inr(ev, t, env):
    v, c = ev.eval(t.expr, env)
    return Inj(1, v), 1 + c


@rule(Case)
def _case(ev, t, env):
    v, c = ev.eval(t.scrut, env)
    if v.side == 0:
        r, cb = ev.bind(env, t.lname, v.value, t.lbody)
    else:
        r, cb = ev.bind(env, t.rname, v.value, t.rbody)
    return r, 1 + c + cb


@rule(Lam)
def _lam(ev, t, env):
    caps = t.captures
    if caps is None:
        raise EvalError("internal: lambda without a capture list", t.loc)
    k = len(caps)
    if k == 1:
        return Closure(t, env[caps[0]]), 2
    if k:
        return Closure(t, tuple([env[x] for x in caps])), 1 + k
    return ev.closed(t), 1


@rule(App)
def _app(ev, t, env):
    f, cf = ev.eval(t.fn, env)
    x, cx = ev.eval(t.arg, env)
    y, cy = ev.apply(f, x)
    return y, 1 + cf + cx + cy


@rule(Call)
def _call(ev, t, env):
    return ev._call(t, t.name, t.args, env)


@rule(Ann)
def _ann(ev, t, env):
    return ev.eval(t.expr, env)


# ------------------------------------------------------------------ EVM operations


@rule(PureEVM)
def _pure(ev, t, env):
    v, c = ev.eval(t.expr, env)
    return ev.evm.pure(v), 1 + c


@rule(BindEVM)
def _bindevm(ev, t, env):
    mv, c1 = ev.eval(t.m, env)
    kv, c2 = ev.eval(t.k, env)
    return ev.evm.bind(mv, Continuation(ev, kv)), 1 + c1 + c2


@rule(ThenEVM)
def _then(ev, t, env):
    # = let x = b in bind a (lamwith [x] (\_ -> x)): let 1 + cb + (bind 1 + ca + (lam 1 + 1))
    vb, cb = ev.eval(t.second, env)
    va, ca = ev.eval(t.first, env)
    return ev.evm.then(va, vb), 4 + ca + cb


@rule(RunEVM)
def _run(ev, t, env):
    mv, c1 = ev.eval(t.m, env)
    dv, c2 = ev.eval(t.env, env)
    x, cells, crun = ev.evm.run(mv, env_tuple_to_cells(dv))
    return (x, cells_to_env_tuple(cells)), 1 + c1 + c2 + crun


@rule(AddEVM)
def _add(ev, t, env):
    v, c = ev.eval(t.val, env)
    return ev.evm.add(t.level, v), 1 + c


@rule(ScopeEVM)
def _scope(ev, t, env):
    iv, c1 = ev.eval(t.init, env)
    mv, c2 = ev.eval(t.m, env)
    return ev.evm.scope(iv, mv), 1 + c1 + c2


# ------------------------------------------------------------------ sparse linear operations


@rule(LFst)
def _lfst(ev, t, env):
    v, c = ev.eval(t.expr, env)
    if v is None:  # corrected formalisation: 1 + argument + zero
        z, cz = zerov(t.zero)
        return z, 1 + c + cz
    return v[0], 1 + c


@rule(LSnd)
def _lsnd(ev, t, env):
    v, c = ev.eval(t.expr, env)
    if v is None:
        z, cz = zerov(t.zero)
        return z, 1 + c + cz
    return v[1], 1 + c


@rule(LCastL)
def _lcastl(ev, t, env):
    return ev._cast(t.expr, t.zero, 0, env)


@rule(LCastR)
def _lcastr(ev, t, env):
    return ev._cast(t.expr, t.zero, 1, env)

