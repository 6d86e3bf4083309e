"""Nested loops in a derivative: CHAD's forward pass of a build whose body has a
build of its own (a matrix-vector product, a layer of a network), batched over
both loops, and its backpropagators run as ONE batched function over the outer
elements, whose inner reverse pass is batched over both loops too (docs/
compiler.md, "Nested loops"; Efficient CHAD (Smeding & Vákár), §8: the build
rule's forward pass, unzip and sequenceScoped, one level inside another).

The forward pass is a vectorised region of rank 2 (chad/compile/vectorise.py)
in which pairs and lambdas are values: the inner build's (y, backpropagator)
pairs become its ys (an n x m array) and its backpropagator term with what it
captures; CHAD's `case length = 0` around the inner build runs its right
branch, guarded. The region computes values only, so on any error or a failed
guard the per-element code runs instead (it raises the evaluator's error, if
there is one).

The outer elements' backpropagator runs once for all of them (`Exec`): lets,
`>>`, applications of the captured lambdas, `scope` (a real or a bag cell per
outer element), adds (reals, and bags of rows: chad/arrays/nested_support.py),
and the inner loop's `sequenceScoped`, whose elements' cells are n x m arrays.
Every addition is the evaluator's, in its order: a real cell of an element pair
is added to elementwise; bags are kept as they are added and built per element
with the evaluator's `plusv`; a cell shared by the outer elements gets their
adds one after the other. The levels an inner loop adds to are checked to be
its own cells when the pass starts (`Nested.ready`); if they are not, the
per-element closures run, before anything changed.

Over a row built in the body (docs/compiler.md, "Folds, maps and calls over a
row built in the body"): a fold by max or min's tree (`untree`:
chad/arrays/folds.py), an inlined call's `run` (its cells per outer element:
`run_evm`; per element pair in the inner loop: `inner_run_evm`, one-hot adds
kept as `PairOnes`), a let of a pair in the inner body (`inner_pair_scope`),
and a case on a Bool the loops do not change (np.where: `_unswitched`).
"""

from __future__ import annotations

import re

from chad.compile.vectorise import (
    BVal, Batcher, NotBatchable, _real_literal, abandon, bind_forward_lets, captures_read,
    function_block, nesting, per_element_code, quiet_body,
)
from chad.linear import LR
from chad.compile.vector_support import Pass, loop_size
from chad.terms import (
    AddEVM, Ann, App, BindEVM, Lam, Let, LPairZero, LUnit, Pair, Prim, PureEVM, RunEVM, ScopeEVM,
    ThenEVM, Unit,
)

from .nested_support import (
    LoopAdds, Nested, PairOnes, RowBags, bag_cells, final2, flat, inner_adds, rows_of, vadd_in,
    vadd_scaled, vaddpair, vbagadd,
)
from .folds import vuntree2
from .nodes import BEmptyT, SequenceScoped, UnTree

_LOCAL = re.compile(r"[a-z]+[0-9]+")
# products of two reals: x * y, and CHAD's linear real scaled by a primal one
# (chad/primitives.py: both numpy's `*` batched)
_PRODUCTS = ("MUL", "LSCALE")


def forward_pairs_nested(gen, t, n: str) -> str | None:
    """`build n (i. lets in (y, \\d -> m))` whose lets hold a loop: a VecPairs
    of the ys and ONE batched backpropagator (or None: the per-element code)."""
    rank = 1 + nesting(t.body)
    if rank != 2:
        gen.emit("# build: per-element loop (loops nested three deep in a derivative)")
        return None
    lazy = per_element_code(gen, t)
    block = gen.block
    mark, indent, pmark = len(block.lines), gen.indent, len(gen.proj_log)
    env = dict(gen.env)
    result = gen.fresh("v")
    b = Batcher(gen, rank)
    b.closures = b.tolerant = True
    try:
        gen.indent += 2
        b.open_loop(n)
        saved = [b.bind(t.name, BVal("idx", axis=0, dims={0}, elem="Z"))]
        lets, body = bind_forward_lets(b, t.body)
        saved.extend(lets)
        y = b.value(body.left)
        if not (isinstance(y, BVal) and y.kind == "num" and y.elem == "R" and y.dims <= {0}):
            raise NotBatchable("the values are not reals of the outer loop")
        fn, caps, info = back_function_nested(b, body.right)
        for s in reversed(saved):
            b.unbind(s)
        fresh = y.fresh and not gen.escapes  # (a vjp's value: a copy, as lower.py's)
        ys = gen.atom(f"_vout({b.numbers(y)}, {n}, {rank!r}, _f64, {fresh!r})")
        tup = "(" + "".join(f"{c}, " for c in caps) + ")"
        info = gen.const(info, "K")
        gen.emit(f"{result} = _VecPairs({ys}, _VecBack({fn}, {n}, {tup}, {lazy}, True, {info}))")
        pad = "    " * indent
        block.lines[mark:mark] = [f"{pad}# build: vectorised (forward pass, nested loops)",
                                  f"{pad}try:",
                                  f"{pad}    with _quiet():"]
        gen.indent = indent
        gen.emit("except Exception:")  # a guard, or an error the per-element code reports
        gen.emit("    _vfell()")
        gen.emit(f"    {result} = {lazy}()")
    except NotBatchable as why:
        abandon(gen, block, mark, indent, pmark, env, "build", why)
        return None
    gen.blocks.extend(b.pending)
    return result


# ----------------------------------------------------------------- the reverse pass


def _atoms(v, out: list) -> None:
    """The generated names a batched value holds (in a stable order)."""
    if isinstance(v, str):
        if _LOCAL.fullmatch(v) and v not in out:
            out.append(v)
        return
    if v is None or not isinstance(v, BVal):
        return
    for a in (v.expr, v.src if isinstance(v.src, str) else None, v.size):
        if isinstance(a, str):
            _atoms(a, out)
    inner = v.inner
    if v.kind == "lam":
        for x in sorted(inner):
            _atoms(inner[x], out)
    elif isinstance(inner, tuple):
        for part in inner:
            _atoms(part, out)
    else:
        _atoms(inner, out)


def _settled(b: Batcher, v):
    """v with every untyped `a ! i` it holds read as numbers, here in the
    forward pass (whose guard checks a is an Array R)."""
    if not isinstance(v, BVal):
        return v
    if v.kind == "elem":
        return BVal("num", b.numbers(v), v.dims, elem="R")
    inner = v.inner
    if v.kind == "lam":
        inner = {x: _settled(b, a) for x, a in inner.items()}
    elif isinstance(inner, tuple):
        inner = tuple(_settled(b, p) for p in inner)
    elif isinstance(inner, BVal):
        inner = _settled(b, inner)
    else:
        return v
    return BVal(v.kind, expr=v.expr, dims=v.dims, axis=v.axis, elem=v.elem, fresh=v.fresh,
                src=v.src, size=v.size, inner=inner)


def _renamed(v, names: dict):
    """v with its generated names replaced (the batched function's parameters)."""
    if isinstance(v, str):
        return names.get(v, v)
    if not isinstance(v, BVal):
        return v
    inner = v.inner
    if v.kind == "lam":
        inner = {x: _renamed(a, names) for x, a in inner.items()}
    elif isinstance(inner, tuple):
        inner = tuple(_renamed(p, names) for p in inner)
    else:
        inner = _renamed(inner, names)
    src = _renamed(v.src, names) if isinstance(v.src, str) else v.src
    return BVal(v.kind, expr=_renamed(v.expr, names), dims=v.dims, axis=v.axis, elem=v.elem,
                fresh=False, src=src, size=_renamed(v.size, names), inner=inner)


def back_function_nested(b: Batcher, lam: Lam):
    """The batched function of the outer elements' backpropagator lam: a new
    top-level function of the values it captures, d, the cells, the pass and
    n; returns its name, the atoms it captures and its inner loops (Nested)."""
    gen = b.gen
    env = {x: _settled(b, v) for x, v in b._closure(lam).inner.items()}
    atoms: list = []
    for x in sorted(env):
        _atoms(env[x], atoms)
    names = {a: gen.fresh("c") for a in atoms}
    name = gen.fresh("vb")
    d, cells, run, n = gen.fresh("p"), gen.fresh("cells"), gen.fresh("p"), gen.fresh("p")
    ex = Exec(gen, b.rank, cells, run, n)
    header = f"def {name}({', '.join(list(names.values()) + [d, cells, run, n])}):"
    with function_block(gen, header) as block:
        for x, v in env.items():
            v = _renamed(v, names)
            if isinstance(v, BVal):
                ex.bound[x] = v
            else:
                gen.env[x] = v

        def body() -> None:
            # (d: the outer elements' cotangents, an array: VecBack.run keeps a
            # nested pass's; its method, without np.reshape's dispatch)
            col = gen.atom(f"{d}.reshape(({n},{' 1,' * (b.rank - 1)}))")
            ex.bound[lam.name] = BVal("num", col, {0}, elem="R")
            gen.emit(f"{gen.const(bag_cells, 'B')}({cells}, {run}.base)")
            ex.run(lam.body)

        quiet_body(gen, body)
    atoms = captures_read(block, [(a, names[a]) for a in atoms], [d, cells, run, n])
    b.pending.append(block)
    b.pending.extend(ex.pending)
    return name, atoms, Nested(tuple(ex.loops), unit_result=not ex.pure_values)


def _run_cells(env) -> list:
    """The initial cells of `run m env`: the terms of the tuple env."""
    cells = []
    while type(env) is Pair:
        cells.append(env.left)
        env = env.right
    if type(env) not in (LUnit, Unit):
        raise NotBatchable("a run whose cells are not a tuple")
    return cells


class Exec(Batcher):
    """The outer elements' backpropagator, run for all of them (module doc):
    axis 0 the outer loop, axis 1 an inner loop's elements."""

    def __init__(self, gen, rank: int, cells: str, run: str, n: str) -> None:
        super().__init__(gen, rank)
        self.closures = True
        self.sizes.append(n)
        self.cells, self.run_, self.n = cells, run, n
        self.scopes = 0       # scopes of the outer element open here
        self.inner = None     # in an inner loop: its first cell, shape, adds (Exec.loop)
        self.inner_run = None  # in a run in an inner loop: its cells (Exec.inner_run_evm)
        self.loops: list = []  # its inner loops' adds (LoopAdds)
        self.pure_values = False

    def index(self, axis: int) -> str:
        if axis >= len(self.sizes):
            raise NotBatchable("an inner loop's index in its backpropagator")
        return super().index(axis)

    def _unswitched(self, t):
        """A case on an unbatched Bool (`max(w, 0.0)` of a captured w) in the
        reverse pass, where no guard can fall back: np.where of its branches,
        as in any region (both computed: they must be unable to fail)."""
        return self._where_case(t)

    def value(self, t):
        if type(t) is RunEVM and self.is_batched(t):
            return self.inner_run_evm(t) if self.inner is not None else self.run_evm(t)
        return super().value(t)

    def inner_run_evm(self, t: RunEVM) -> BVal:
        """`run m env` in an inner loop (a call of a def with array
        parameters: kmeans' `sqdist(ps, i, zs, c)`): every element pair's
        cells, a bag cell (PairOnes: the one-hot adds made to it) or a unit
        cell (an integer parameter's, never added to); m may only make
        one-hot adds (BOne) to the bag cells."""
        gen = self.gen
        if self.inner_run is not None:
            raise NotBatchable("a run in a run")
        kinds, made = [], []
        for it in _run_cells(t.env):
            if type(it) is BEmptyT:
                kinds.append("bag")
                made.append(f"{gen.const(PairOnes, 'B')}()")
            elif type(it) is LUnit:
                kinds.append("unit")
                made.append("None")
            elif _real_literal(it):  # a real parameter's cell: its adds' sum
                kinds.append("real")
                made.append(gen.atom(gen.value(it)))
            else:
                raise NotBatchable("a run in an inner loop whose cells are not bags or reals")
        cells = gen.fresh("cells")
        gen.emit(f"{cells} = [{', '.join(made)}]")
        saved = (self.inner_run, self.pure_values)
        self.inner_run, self.pure_values = {"cells": cells, "kinds": kinds}, False
        try:
            self.run(t.m)
            if self.pure_values:
                raise NotBatchable("a run whose action returns a value")
        finally:
            self.inner_run, self.pure_values = saved
        finals: object = "None"
        for j in reversed(range(len(kinds))):
            x = gen.atom(f"{cells}[{j!r}]")
            if kinds[j] == "bag":
                cell = BVal("ones", expr=x, dims={0, 1})
            elif kinds[j] == "real":  # (an array of the pairs' sums, or the initial real)
                cell = BVal("num", gen.atom(f"_np.broadcast_to({x}, {self.inner['shape']})"),
                            {0, 1}, elem="R")
            else:
                cell = "None"
            finals = BVal("tuple", dims={0, 1}, inner=(cell, finals))
        return BVal("tuple", dims={0, 1}, inner=("None", finals))

    def add_in_run(self, level: int, v) -> None:
        """An add in a run in an inner loop: a one-hot bag to a bag cell."""
        run = self.inner_run
        kind = run["kinds"][level] if level < len(run["kinds"]) else None
        if kind == "real":  # plusv(v, cell): v + cell, every pair's
            if isinstance(v, BVal) and not (v.kind == "num" and v.elem == "R"):
                raise NotBatchable("an add in a run of a value that is not a real")
            x = self.numbers(v) if isinstance(v, BVal) else v
            self.gen.emit(f"{run['cells']}[{level!r}] = ({x} + {run['cells']}[{level!r}])")
            return
        if kind != "bag":
            raise NotBatchable("an add in a run to a cell other than a bag or a real")
        if not (isinstance(v, BVal) and v.kind == "bone"):
            raise NotBatchable("an add in a run of a bag other than a one-hot one")
        self.gen.emit(f"{run['cells']}[{level!r}].add({v.inner}, {v.expr}, {self.inner['shape']})")

    def run_evm(self, t: RunEVM) -> BVal:
        """`run m env` by every outer element (an inlined call's reverse pass:
        the callee's parameters' cells, as gmm's log-sum-exp of a row): m run
        on cells of the run's own (a list of them, every level an outer
        element's cell: a bag cell, or a real per element); its value the pair
        of the action's result (unit) and the cells' final values."""
        gen = self.gen
        if self.inner is not None:
            raise NotBatchable("a run in an inner loop")
        inits = _run_cells(t.env)
        vals = []
        for it in inits:
            if type(it) is BEmptyT:
                vals.append(f"{gen.const(RowBags, 'B')}()")
            elif _real_literal(it):
                vals.append(f"_np.full({self.n}, {gen.atom(gen.value(it))}, dtype=_f64)")
            else:
                raise NotBatchable("a run whose cells are neither bags nor reals")
        cells, run = gen.fresh("cells"), gen.fresh("p")
        gen.emit(f"{cells} = [{', '.join(vals)}]")
        gen.emit(f"{run} = {gen.const(Pass, 'B')}(0)")  # every level an element's own
        saved = (self.cells, self.run_, self.scopes, self.loops, self.pure_values)
        self.cells, self.run_, self.scopes, self.loops, self.pure_values = cells, run, 0, [], False
        try:
            self.run(t.m)
            if self.pure_values:
                raise NotBatchable("a run whose action returns a value")
            # its inner loops add to the run's cells and their own only
            if not Nested(tuple(self.loops)).ready(len(inits)):
                raise NotBatchable("an inner loop of a run adding to a cell outside it")
        finally:
            self.cells, self.run_, self.scopes, self.loops, self.pure_values = saved
        finals: object = "None"
        for j in reversed(range(len(inits))):
            x = gen.atom(f"{cells}[{j!r}]")
            cell = BVal("bagcell", expr=x) if type(inits[j]) is BEmptyT else \
                BVal("num", gen.atom(f"_np.reshape({x}, ({self.n},) + (1,) * {self.rank - 1!r})"),
                     {0}, elem="R")
            finals = BVal("tuple", dims={0}, inner=(cell, finals))
        return BVal("tuple", dims={0}, inner=("None", finals))

    def then(self, k: Lam, value) -> None:
        """k's body run with its parameter bound to value (the continuation of
        a bind)."""
        saved = self.bind(k.name, value)
        try:
            self.run(k.body)
        finally:
            self.unbind(saved)

    def run(self, t) -> None:
        cls = type(t)
        if self.inner_run is not None and cls in (BindEVM, SequenceScoped, ScopeEVM):
            raise NotBatchable("a scope or a loop in a run in an inner loop")
        if cls is ThenEVM:
            self.run(t.first)
            self.run(t.second)
        elif cls is Let:
            saved = self.bind(t.name, self.value(t.rhs))
            try:
                self.run(t.body)
            finally:
                self.unbind(saved)
        elif cls is Ann:
            self.run(t.expr)
        elif cls is PureEVM:
            if self.is_batched(t.expr):
                raise NotBatchable("a batched result of an action")
            if type(t.expr) not in (Unit, LUnit):
                self.pure_values = True  # a result other than unit (Nested.unit_result)
        elif cls is AddEVM:
            if not isinstance(t.level, int) or isinstance(t.level, bool) or t.level < 0:
                raise NotBatchable("an add at a level that is not a natural number")
            self.add(t.level, t.val)
        elif cls is App:
            self.apply(self.value(t.fn), self.value(t.arg))
        elif cls is BindEVM and type(t.k) is Lam and type(t.m) is ScopeEVM:
            self.scope(t.m, t.k)
        elif cls is BindEVM and type(t.k) is Lam and type(t.m) is SequenceScoped:
            self.loop(t.m, t.k)
        elif cls is SequenceScoped:  # the last action: its result is the action's
            if t.keep:
                self.pure_values = True  # a result other than unit (Nested.unit_result)
            self.loop(t, None)
        elif cls is BindEVM and type(t.k) is Lam and type(t.m) is UnTree:
            self.untree(t.m, t.k)
        else:
            raise NotBatchable(f"no batched execution of {cls.__name__}")

    def apply(self, f, arg) -> None:
        """A captured lambda applied: its body run with its parameter bound."""
        if not (isinstance(f, BVal) and f.kind == "lam"):
            raise NotBatchable("an application of a function that is not a captured lambda")
        lam = f.src
        saved = [self.bind(x, v) for x, v in f.inner.items()]
        saved.append(self.bind(lam.name, arg))
        try:
            self.run(lam.body)
        finally:
            for s in reversed(saved):
                self.unbind(s)

    def add(self, level: int, term) -> None:
        gen = self.gen
        if self.inner is not None and self.inner_run is None and self._add_scaled(level, term):
            return
        v = self.value(term)
        if v == "None":  # the sparse zero (a unit cell's final value): plusv(None, c) is c
            return
        if self.inner_run is not None:
            self.add_in_run(level, v)
            return
        if self.inner is not None and isinstance(v, BVal) and v.kind == "ones":
            # an element pair's run's bag cell, to a cell that is not the inner
            # loop's own (checked when the pass starts: Nested.ready)
            self.inner["record"].bags.append(level)
            gen.emit(f"{self.inner['buf']}.setdefault({level!r}, []).append({v.expr})")
            return
        if self.inner is not None:
            first, shape, levels, buf = (self.inner[k] for k in ("first", "shape", "levels", "buf"))
            if isinstance(v, BVal) and v.kind == "tuple" and len(v.inner) == 2:
                self.add_pair(level, v)
                return
            if isinstance(v, BVal) and not (v.kind == "num" and v.elem == "R"):
                raise NotBatchable("an add of a value that is not a real in an inner loop")
            if not isinstance(v, BVal) and not _real_literal(term):
                raise NotBatchable("an add of an unbatched value")
            levels.append(level)
            x = self.numbers(v) if isinstance(v, BVal) else v
            # a primitive's fresh array, computed for this add alone (as
            # vectorise.execute_batched's): the cells may keep it
            adopt = type(term) is Prim and isinstance(v, BVal) and v.fresh and x == v.expr
            if adopt:  # no later expression may reuse it
                for key in [k for k, a in self._cse.items() if a == v.expr]:
                    del self._cse[key]
            gen.emit(f"{gen.const(vadd_in, 'B')}({self.cells}, {level!r}, {first}, {buf}, {x}, "
                     f"{shape}{', True' if adopt else ''})")
            return
        if isinstance(v, BVal) and v.kind in ("barr", "bagcell"):
            item = (f"('rows', {gen.const(rows_of, 'B')}({v.expr}, {self.n}), {v.inner})"
                    if v.kind == "barr" else f"('cell', {v.expr}, None)")
            gen.emit(f"{gen.const(vbagadd, 'B')}({self.cells}, {level!r}, {self.run_}, "
                     f"{self.n}, {item})")
            return
        if isinstance(v, BVal):
            if not (v.kind == "num" and v.elem == "R" and v.dims <= {0}):
                raise NotBatchable("an add of a value that is not a real of the outer loop")
            x = gen.atom(f"{gen.const(flat, 'B')}({v.expr}, {self.n})")
        elif _real_literal(term):
            x = v
        else:
            raise NotBatchable("an add of an unbatched value")
        gen.emit(f"_vadd({self.cells}, {level!r}, {self.run_}, {x}, {self.n})")

    def _add_scaled(self, level: int, term) -> bool:
        """An inner loop's add of `x * y` (MUL or LSCALE), x a real of the outer loop only and
        y one of both loops (the cotangent of `v ! j` in `m ! i ! j * v ! j`:
        d times the matrix) or of the inner loop (the cotangent of `m ! i ! j`
        there: d times v, an outer product): the product is not computed here but by
        nested_support.vadd_scaled, which may keep it as its factors
        (chad/compile/scaled.py). False (nothing emitted) for any other add."""
        if not (type(term) is Prim and term.op in _PRODUCTS and type(term.arg) is Pair):
            return False
        args = [self.value(term.arg.left), self.value(term.arg.right)]
        outer = [a for a in args if isinstance(a, BVal) and a.kind == "num" and a.elem == "R"
                 and a.dims == {0}]
        both = [a for a in args if isinstance(a, BVal) and a.kind == "num" and a.elem == "R"
                and a.dims in ({0, 1}, {1})]
        if len(outer) != 1 or len(both) != 1:
            return False
        gen = self.gen
        first, shape, levels, buf = (self.inner[k] for k in ("first", "shape", "levels", "buf"))
        levels.append(level)
        gen.emit(f"{gen.const(vadd_scaled, 'B')}({self.cells}, {level!r}, {first}, {buf}, "
                 f"{self.numbers(outer[0])}, {self.numbers(both[0])}, {shape})")
        return True

    def scope(self, m: ScopeEVM, k: Lam) -> None:
        """`scope init m >>= \\p -> k`: a cell per outer element (a bag of rows,
        or a real), popped after m; p's first component its final cells."""
        gen = self.gen
        if self.inner is not None:
            self.inner_scope(m, k)
            return
        if type(m.init) is BEmptyT:
            gen.emit(f"{self.cells}.append({gen.const(RowBags, 'B')}())")
        elif _real_literal(m.init):
            init = gen.atom(gen.value(m.init))
            gen.emit(f"{self.cells}.append(_np.full({self.n}, {init}, dtype=_f64))")
        else:
            raise NotBatchable("a scope whose cell is neither a real nor a bag")
        self.scopes += 1
        try:
            self.run(m.m)
        finally:
            self.scopes -= 1
        final = gen.fresh("v")
        gen.emit(f"{final} = {self.cells}.pop()")
        if type(m.init) is BEmptyT:
            fv = BVal("bagcell", expr=final)
        else:
            fv = BVal("num", gen.atom(f"_np.reshape({final}, ({self.n},) + (1,) * "
                                      f"{self.rank - 1!r})"), {0}, elem="R")
        self.then(k, BVal("pair", dims={0}, inner=(fv, None)))

    def untree(self, m: UnTree, k: Lam) -> None:
        """`unTree init d tree >>= \\lf -> k`, tree a fold by max (min) of every
        outer element (chad/arrays/folds.py): lf the leaf cotangents, an n x m
        array (d at each element's winning leaf); nothing is added."""
        if self.inner is not None or not isinstance(m.elem, LR) or type(m.init) is not LPairZero:
            raise NotBatchable("an unTree other than of a fold of reals")
        tree = self.value(m.tree)
        if not (isinstance(tree, BVal) and tree.kind == "tree" and tree.axis == 1):
            raise NotBatchable("an unTree of a tree not built in the loop")
        d = self.value(m.ctg)
        if isinstance(d, BVal) and not (d.kind == "num" and d.elem == "R" and d.dims <= {0}):
            raise NotBatchable("an unTree of a cotangent that is not a real of the outer loop")
        if not isinstance(d, BVal) and not _real_literal(m.ctg):
            raise NotBatchable("an unTree of an unbatched cotangent")
        gen = self.gen
        x = self.numbers(d) if isinstance(d, BVal) else d
        leaves = gen.atom(f"{gen.const(vuntree2, 'B')}({x}, {tree.inner}, {tree.size}, 1)")
        self.then(k, BVal("num", leaves, {0, 1}, elem="R", size=tree.size))

    def inner_scope(self, m: ScopeEVM, k: Lam) -> None:
        """CHAD's let in an inner loop's backpropagator (`scope r m >>= \\p ->
        k`, r a real): a cell per element pair, from r (vadd2 makes the n x m
        array at the first add), popped after m; p's first component its final
        cells."""
        gen, inner = self.gen, self.inner
        if type(m.init) is LPairZero:
            self.inner_pair_scope(m, k)
            return
        if not _real_literal(m.init):
            raise NotBatchable("a scope in an inner loop whose cell is not a real")
        init = gen.atom(gen.value(m.init))
        gen.emit(f"{self.cells}.append({init})")
        inner["open"] += 1
        record = inner["record"]  # the cells the loop may add to: its own and these
        record.cells = max(record.cells, inner["k0"] + inner["open"])
        try:
            self.run(m.m)
        finally:
            inner["open"] -= 1
        final = gen.fresh("v")
        gen.emit(f"{final} = {self.cells}.pop()")
        fv = BVal("num", gen.atom(f"{gen.const(final2, 'B')}({final}, {init}, {inner['shape']})"),
                  {0, 1}, elem="R")
        self.then(k, BVal("pair", dims={0, 1}, inner=(fv, None)))

    def inner_pair_scope(self, m: ScopeEVM, k: Lam) -> None:
        """CHAD's let of a pair of reals in an inner loop's backpropagator
        (`let (s0, s1) = (e0, e1)`: `scope lpairzero m >>= \\p -> k`): a cell
        per element pair holding two n x m arrays (`vaddpair`: the
        evaluator's componentwise adds); it must be added to in m (its final
        value then a pair of reals, never the sparse zero), and only by adds
        of pairs at its own level (checked when the pass starts: Nested)."""
        gen, inner = self.gen, self.inner
        gen.emit(f"{self.cells}.append(None)")
        pos = inner["k0"] + inner["open"]
        inner["open"] += 1
        record = inner["record"]
        record.cells = max(record.cells, inner["k0"] + inner["open"])
        inner["pairs"].append([pos, 0])  # (its position among the loop's cells, adds)
        try:
            self.run(m.m)
        finally:
            inner["open"] -= 1
            _pos, adds = inner["pairs"].pop()
        if not adds:
            raise NotBatchable("a pair scope in an inner loop never added to")
        final = gen.fresh("v")
        gen.emit(f"{final} = {self.cells}.pop()")
        parts = tuple(BVal("num", gen.atom(f"{final}[{j!r}]"), {0, 1}, elem="R") for j in (0, 1))
        fv = BVal("tuple", dims={0, 1}, inner=parts)
        self.then(k, BVal("pair", dims={0, 1}, inner=(fv, None)))

    def add_pair(self, level: int, v: BVal) -> None:
        """An add of a pair of reals in an inner loop: to the innermost open
        pair scope (recorded, checked when the pass starts: Nested.ready)."""
        gen, inner = self.gen, self.inner
        if not inner["pairs"]:
            raise NotBatchable("an add of a pair outside a pair scope of the inner loop")
        parts = []
        for x in v.inner:
            if isinstance(x, BVal) and not (x.kind == "num" and x.elem == "R"):
                raise NotBatchable("an add of a pair whose components are not reals")
            parts.append(self.numbers(x) if isinstance(x, BVal) else x)
        top = inner["pairs"][-1]
        top[1] += 1
        inner["record"].pairs.append((top[0], level))
        gen.emit(f"{gen.const(vaddpair, 'B')}({self.cells}, {level!r}, {parts[0]}, {parts[1]}, "
                 f"{inner['shape']})")

    def loop(self, m: SequenceScoped, k: Lam | None) -> None:
        """`sequenceScoped inits keep fns ctgs >>= \\res -> k` (k None: no
        continuation), fns an inner build's backpropagators: their bodies run
        on all element pairs at once, each scope a cell per pair (an n x m
        array); res the kept ones."""
        gen = self.gen
        if self.inner is not None or self.rank != 2:
            raise NotBatchable("loops nested three deep")
        fns = self.value(m.fns)
        if not (isinstance(fns, BVal) and fns.kind == "backs" and fns.axis == 1):
            raise NotBatchable("a reverse pass of backpropagators not built in the loop")
        ctgs = self.value(m.ctgs)
        if isinstance(ctgs, BVal) and not (ctgs.kind == "num" and ctgs.elem == "R"):
            raise NotBatchable("cotangents that are not reals")
        inits = []
        for it in m.inits:
            if type(it) is LUnit:
                inits.append("None")
            elif _real_literal(it):
                inits.append(gen.atom(gen.value(it)))
            else:
                raise NotBatchable("an inner scope whose cell is not a real")
        first = gen.atom(f"len({self.cells})")
        # (a negative inner size where no outer element runs the loop: none)
        shape = gen.atom(f"({self.n}, {gen.const(loop_size, 'B')}({fns.size}, {self.n}))")
        gen.emit(f"{self.cells}.extend(({''.join(i + ', ' for i in inits)}))")
        record = LoopAdds(self.scopes, len(inits))
        self.loops.append(record)
        buf = gen.atom("{}", "b")  # its adds to cells not its own (nested_support.vadd_in)
        self.inner = {"first": first, "shape": shape, "levels": record.levels, "buf": buf,
                      "record": record, "k0": len(inits), "open": 0, "pairs": []}
        self.sizes.append(fns.size)  # the inner loop's index (a captured j), axis 1
        try:
            self.apply(fns.inner, ctgs)
        finally:
            self.inner = None
            self.close_loop()
        gen.emit(f"{gen.const(inner_adds, 'B')}({self.cells}, {self.run_}, {buf}, {shape})")
        fin = gen.fresh("v")
        gen.emit(f"{fin} = {self.cells}[{first}:]")
        gen.emit(f"del {self.cells}[{first}:]")
        if k is None:
            return
        kept = []
        for j in m.keep:
            x = gen.atom(f"{gen.const(final2, 'B')}({fin}[{j!r}], {inits[j]}, {shape})")
            kept.append(BVal("num", x, {0, 1}, elem="R", size=fns.size))
        res = "None"
        for x in reversed(kept):
            res = BVal("tuple", dims={0, 1}, inner=(x, res))
        self.then(k, res)

