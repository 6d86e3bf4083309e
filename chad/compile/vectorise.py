"""Vectorisation of array code: the body of a `build` or `map` batched over its
loop, in the style of JAX's `vmap` (Frostig, Johnson & Leary, *Compiling
machine learning programs via high-level tracing*; the batching rules of
Bradbury et al.'s JAX), lowered to numpy.

Inside a vectorised region every value is either *unbatched* (it does not
depend on a loop variable of the region: ordinary generated code computes it
once, a Python scalar that numpy broadcasts) or *batched* (a `BVal`: a numpy
array of rank D, D the region's loop nesting, axis k the loop at depth k). The
rules:

* the loop variable `i` is `arange(n)` on its axis; `a ! i` with `a` unbatched
  is `a[:n]` on i's axis (after the evaluator's bounds check); `a ! j` with j a
  batched integer is a gather (fancy indexing, bounds checked); `m ! i ! j` of
  an array of arrays the rectangular block as one 2-D array;
* a primitive with a `batched` template (chad/primitives.py) is that numpy
  ufunc expression over its operands;
* a nested `build m (\\j -> ...)` or `map` (m unbatched) opens the next axis;
  `sum` of it reduces that axis (np.sum); a nested build as the region's result
  is a 2-D block, returned as the tuple of its rows;
* a `let` binds batched or unbatched values alike;
* a comparison is a numpy bool array; `not`, `&&`, `||` np.logical_*; integer
  `+`, `*`, negation exact (`_viadd`, ...: int64 where it cannot wrap, else
  Python ints); `if c then a else b` with numeric branches that cannot fail
  (`safe`) is np.where (both branches computed).

Anything else makes the body *not batchable* (`NotBatchable`), and the node is
compiled as before: its evaluation rule runs a per-element loop over the
compiled body. Extension nodes declare their batching rule beside their other
rules (`register_node(batch=...)`, chad/arrays/lower.py for the array nodes).

A derivative's build nested in a build is a region of rank 2 whose pairs and
lambdas are values (`Batcher.closures`, chad/arrays/nested.py).

In a derivative, CHAD's forward pass of a map or build yields one
backpropagator per element; where the body batches, `back_function` makes ONE
function running their action for all elements at once (`execute_batched`:
lets, `>>`, adds of reals), which the reverse pass (`sequenceScoped`) runs on
arrays of cells (chad/compile/vector_support.py, docs/compiler.md). A body
ending in a case of such pairs (an `if` in a map) is batched by
chad/compile/switch.py: its branches' actions run under masks.

Errors and the order of evaluation: the evaluator evaluates a build's body n
times, so an unbatched sub-term it would evaluate at every element is computed
once here; such a sub-term must not fail where the loop would not run it (a
build of size 0): only sub-terms that cannot fail (`safe`) stay unbatched in a
body, anything else is not batchable. A batched operation fails exactly when one
of its elements would (indices are checked as the evaluator checks them); numpy's
floating-point warnings are silenced, the values being IEEE's as the evaluator's.
"""

from __future__ import annotations

import re
from contextlib import contextmanager

from chad import tables
from chad.primitives import PRIMITIVES
from chad.terms import (
    AddEVM, Ann, App, BindEVM, Case, Fst, Lam, Let, LFst, LPair, LSnd, LUnit, Pair, Prim, PureEVM,
    ScopeEVM, Snd, ThenEVM, Unit, Var, children, free_vars,
)
from chad.types import Int, Real

from . import clamps
from .failing import TOTAL, safe  # vectorised regions hoist only what cannot fail
from .vector_support import row_length

# comparisons (on R and on Z): a batched Bool, a numpy bool array (True: inl,
# the language's true)
_COMPARE = {"LT": "<", "LE": "<=", "GT": ">", "GE": ">=", "EQ": "==", "NE": "!="}
_COMPARE.update({"I" + k: v for k, v in list(_COMPARE.items())})
_LOGIC = {"NOT": "_np.logical_not({0})", "AND": "_np.logical_and({0}, {1})",
          "OR": "_np.logical_or({0}, {1})"}
# integer arithmetic: exact (vector_support.viadd: int64 where it cannot wrap)
_INTS = {"IADD": "_viadd({0}, {1})", "IMUL": "_vimul({0}, {1})", "INEG": "_vineg({0})"}
# (chad/compile/failing.py lists them among the primitives that cannot fail)
assert frozenset(_COMPARE) | frozenset(_LOGIC) <= TOTAL


class NotBatchable(Exception):
    """The term cannot be vectorised (the message says why, for `chad compile`)."""


class TooShallow(NotBatchable):
    """A loop deeper than the region's rank (vectorise_loop tries once more
    with a rank one higher)."""


class BVal:
    """A batched value of a vectorised region.

    kind "num":  expr is a rank-D numpy array of numbers (elem "R" or "Z"), dims
                 the loop axes it depends on; fresh says it was computed here
                 (not a view of an input).
    kind "idx":  the loop variable of the build at `axis` (materialised on use).
    kind "rows": `src ! i` of an array of arrays src, i the loop at `axis`: only
                 indexed again by another loop variable (inner: None, or the
                 columns a gather picked).
    kind "elem": `src ! i` of a target term without a type (a nested forward
                 pass): a row or a number, as it is used (a number: src checked
                 to be an Array R at run time).
    kind "tuple", "lam", "pairs", "backs", "bfill", "barr", "bagcell": the
                 values of a nested loop's forward and reverse passes
                 (chad/arrays/nested.py).
    kind "arr":  an array built in the region along the loop at `axis` (size
                 `size`), its elements `inner` (a BVal or an unbatched atom).
    kind "pair": the result of `scope` in a batched action: inner is (the
                 elements' final cells, a "num" BVal; None, the action's result
                 not being read)."""

    __slots__ = ("kind", "expr", "dims", "axis", "elem", "fresh", "src", "size", "inner")

    def __init__(self, kind, expr=None, dims=frozenset(), axis=None, elem="R", fresh=False,
                 src=None, size=None, inner=None):
        self.kind = kind
        self.expr = expr
        self.dims = frozenset(dims)
        self.axis = axis
        self.elem = elem
        self.fresh = fresh
        self.src = src
        self.size = size
        self.inner = inner


def elem_kind(ty) -> str | None:
    """"R" or "Z" for a number type, else None."""
    if isinstance(ty, Real):
        return "R"
    if isinstance(ty, Int):
        return "Z"
    return None


def _literal_kind(t) -> str | None:
    """"R" or "Z" for a literal (a target term's case may carry no type)."""
    op = t.op if type(t) is Prim else None
    return "Z" if op == "ILIT" else "R" if op == "LIT" else None


def nesting(t) -> int:
    """The deepest nesting of array loops (build, map) in t, counting t itself;
    by the classes that have a batching rule and open a loop."""
    best = 0
    stack = [(t, 0)]
    while stack:
        node, depth = stack.pop()
        if type(node) in LOOP_NODES:
            depth += 1
            best = max(best, depth)
        stack.extend((c, depth) for c in children(node))
    return best


# node classes that open a loop axis (filled by the arrays extension: Build, MapA)
LOOP_NODES: set[type] = set()


class Batcher:
    """One vectorised region: the generator `gen` (chad/compile/codegen.py) whose
    function the statements go into, the region's rank, the sizes of the loops
    open (an atom each), the batched variables."""

    def __init__(self, gen, rank: int) -> None:
        self.gen = gen
        self.rank = rank
        self.sizes: list[str] = []
        self.deepest = 0  # the most loops open at once so far
        self.bound: dict[str, BVal] = {}
        self._index: dict[int, str] = {}
        self._cse: dict[str, str] = {}  # a batched primitive's expression -> its atom
        # in a batched backpropagator: the forward region's values it may read
        # (its expression in this function's names -> the forward atom), and
        # those it does read, as extra parameters (forward atom -> parameter)
        self.outer: dict[str, str] = {}
        self.outer_used: dict[str, str] = {}
        self.captured: dict[str, str] = {}  # forward atom -> parameter, captured anyway
        self.pending: list = []  # functions generated for the region (back_function)
        self.masked: list = []  # levels added to in a branch of a case (execute_batched)
        # atoms assumed to be Array R (untyped target terms), or None: none may be
        self.assume: list | None = None
        # a forward pass nested loops deep (chad/arrays/nested.py): pairs and
        # lambdas are values ("tuple", "lam"), and a case on an unbatched Bool
        # runs its right branch, guarded (the region falls back to the
        # per-element code when the guard fails: `guarded`)
        self.closures = False
        self.guarded = False
        # unbatched sub-terms need not be `safe` (a nested forward pass runs
        # its per-element code instead on any error: chad/arrays/nested.py)
        self.tolerant = False

    def outer_param(self, expr: str) -> str:
        """The parameter holding the forward region's value of expr."""
        atom = self.outer[expr]
        if atom in self.captured:  # already a parameter
            return self.captured[atom]
        param = self.outer_used.get(atom)
        if param is None:
            param = self.outer_used[atom] = self.gen.fresh("c")
        return param

    # ------------------------------------------------------------ loops
    def open_loop(self, size: str) -> int:
        """A new innermost loop of `size` elements: its axis."""
        axis = len(self.sizes)
        if axis >= self.rank:
            raise TooShallow("loops nested deeper than the region's rank")
        self.sizes.append(size)
        self.deepest = max(self.deepest, len(self.sizes))
        return axis

    def close_loop(self) -> None:
        axis = len(self.sizes) - 1
        self.sizes.pop()
        self._index.pop(axis, None)

    def bind(self, name: str, v):
        """Bind a term variable to a batched value or an unbatched atom; returns
        what to pass to `unbind`."""
        old_b = self.bound.pop(name, None)
        if isinstance(v, BVal):
            self.bound[name] = v
            old_g = self.gen.env.pop(name, None)
        else:
            old_g = self.gen.env.get(name)
            self.gen.env[name] = v
        return name, old_b, old_g

    def unbind(self, saved) -> None:
        name, old_b, old_g = saved
        self.bound.pop(name, None)
        self.gen.env.pop(name, None)
        if old_b is not None:
            self.bound[name] = old_b
        if old_g is not None:
            self.gen.env[name] = old_g

    # ------------------------------------------------------------ values
    def is_batched(self, t) -> bool:
        return any(x in self.bound for x in free_vars(t))

    def value(self, t):
        """t's value in the region: a BVal, or an atom when t is unbatched."""
        if not self.is_batched(t):
            if not (self.tolerant or safe(t)):
                raise NotBatchable(f"{type(t).__name__} outside the loop might fail")
            return self.gen.atom(self.gen.value(t))
        cls = type(t)
        if cls is Var:
            return self.bound[t.name]
        if cls is Ann:
            return self.value(t.expr)
        if cls is Let:
            saved = self.bind(t.name, self.value(t.rhs))
            try:
                return self.value(t.body)
            finally:
                self.unbind(saved)
        if cls is Prim:
            return self._prim(t)
        if cls is Case:
            return self._case(t)
        if (self.closures and cls is Pair) or cls is LPair:  # (a linear pair: always)
            parts = (self.value(t.left), self.value(t.right))
            return BVal("tuple", dims=self.dims(*parts), inner=parts)
        if cls is LFst or cls is LSnd:  # of a batched linear pair (never the sparse zero)
            v = self.value(t.expr)
            if isinstance(v, BVal) and v.kind == "tuple":
                return v.inner[0 if cls is LFst else 1]
            raise NotBatchable(f"no batching rule for {cls.__name__}")
        if self.closures and cls is Lam:
            return self._closure(t)
        if cls is Fst or cls is Snd:
            v = self.value(t.expr)
            if isinstance(v, BVal) and v.kind == "tuple":
                return v.inner[0 if cls is Fst else 1]
            if isinstance(v, BVal) and v.kind == "pair":
                part = v.inner[0 if cls is Fst else 1]
                if part is None:
                    raise NotBatchable("the result of a scoped action")
                return part
            raise NotBatchable(f"no batching rule for {cls.__name__}")
        rule = tables.BATCH.get(cls)
        if rule is None:
            raise NotBatchable(f"no batching rule for {cls.__name__}")
        return rule(self, t)

    def numbers(self, v) -> str:
        """An operand of a numpy expression: a batched number array or an
        unbatched atom."""
        if not isinstance(v, BVal):
            return v
        if v.kind == "idx":
            return self.index(v.axis)
        if v.kind == "num":
            return v.expr
        if v.kind == "elem":  # an untyped `a ! i` read as a number: a must be an Array R
            # (read once per region, as a primitive's expression: a nested
            # forward pass reads it for the body and again for what its
            # backpropagators capture)
            expr = f"_vtake_numbers({v.src}, {v.size}, {v.axis!r}, {self.rank!r}{v.inner or ''})"
            hit = self._cse.get(expr)
            if hit is None:
                hit = self._cse[expr] = self.gen.atom(expr)
            return hit
        raise NotBatchable(f"an array ({v.kind}) where a number is expected")

    def live(self) -> str:
        """`, live` for a read in a region of nested loops: the number of
        elements of the loops open (0: nothing is read; vector_support.vtake)."""
        if len(self.sizes) < 2:
            return ""
        return ", " + self.gen.atom(" * ".join(self.sizes))

    def row_length(self, a: BVal) -> str:
        """The common length of the rows of a "rows" value `m ! i` (ragged rows
        fail the region's guard, which this makes the region need)."""
        self.guarded = True
        return self.gen.atom(f"{self.gen.const(row_length, 'B')}({a.src}, {self.sizes[a.axis]})")

    def row_array(self, a: BVal) -> BVal:
        """A "rows" value `m ! i` as the array of its elements: a new loop over
        the rows' common length, each element read by it."""
        n = self.sizes[a.axis]
        m = self.row_length(a)
        axis = self.open_loop(m)
        try:
            x = self.gen.atom(f"_vtake2({a.src}, {n}, {a.axis!r}, {m}, {axis!r}, "
                              f"{self.rank!r}{self.live()})")
        finally:
            self.close_loop()
        return BVal("arr", dims=a.dims, axis=axis, elem=a.elem, size=m,
                    inner=BVal("num", x, {a.axis, axis}, elem=a.elem))

    def index(self, axis: int) -> str:
        """The loop variable at `axis` as a rank-D Array Z (made once per loop)."""
        name = self._index.get(axis)
        if name is None:
            # (a loop inside others: its size need not be valid where they have
            # no element, as the evaluator never runs it then: vector_support.loop_size)
            live = f", {self.gen.atom(' * '.join(self.sizes[:axis]))}" if axis else ""
            name = self.gen.atom(f"_vindex({self.sizes[axis]}, {axis!r}, {self.rank!r}{live})")
            self._index[axis] = name
        return name

    def dims(self, *vals) -> frozenset:
        out: frozenset = frozenset()
        for v in vals:
            if isinstance(v, BVal):
                out |= v.dims
        return out

    def bools(self, v) -> str:
        """An operand of a numpy boolean expression: a batched Bool, or an
        unbatched Bool value (true: its side is 0, inl)."""
        if isinstance(v, BVal):
            if v.kind == "num" and v.elem == "B":
                return v.expr
            raise NotBatchable(f"a {v.kind} where a Bool is expected")
        return f"({v}.side == 0)"

    def _closure(self, t: Lam):
        """A lambda as a value: its term and what its free variables are bound
        to here (batched values or atoms)."""
        env = {}
        for x in free_vars(t):
            v = self.bound.get(x)
            if v is None:
                v = self.gen.env.get(x)
            if v is None:
                raise NotBatchable("a lambda reading a variable not bound here")
            env[x] = v
        return BVal("lam", dims=self.dims(*env.values()), src=t, inner=env)

    def _unswitched(self, t: Case):
        """A case on an unbatched Bool in a nested forward pass: the same branch
        for every element. The right one (CHAD of build: the non-empty array)
        is batched; a guard falls back to the per-element code when the
        scrutinee is not inr at run time (nothing has been changed then)."""
        c = self.value(t.scrut)
        self.gen.emit(f"if {c}.side != 1: raise _VFallback")
        self.guarded = True
        saved = self.bind(t.rname, self.gen.atom(f"{c}.value"))
        try:
            return self.value(t.rbody)
        finally:
            self.unbind(saved)

    def _case(self, t: Case):
        """`if c then a else b` (a case on a Bool whose branches do not read
        their binders) as np.where(c, a, b): both branches are computed for
        every element, so both must be unable to fail (`safe`: no index, no
        division on Z); the result a number."""
        if self.closures and not self.is_batched(t.scrut):
            return self._unswitched(t)
        return self._where_case(t)

    def _where_case(self, t: Case):
        """_case's np.where of both branches (see there); a clamp of an
        integer, one vclamp (chad/compile/clamps.py)."""
        clamp = clamps.match(t)
        if clamp is not None:
            v = self._clamp(clamp)
            if v is not None:
                return v
        if t.lname in free_vars(t.lbody) or t.rname in free_vars(t.rbody):
            raise NotBatchable("a case reading what it matched")
        if not (safe(t.lbody) and safe(t.rbody)):
            raise NotBatchable("a branch of a case that might fail")
        c = self.bools(self.value(t.scrut))
        saved = [self.bind(t.lname, "()")]
        try:
            a = self.value(t.lbody)
        finally:
            self.unbind(saved.pop())
        saved = [self.bind(t.rname, "()")]
        try:
            b = self.value(t.rbody)
        finally:
            self.unbind(saved.pop())
        if isinstance(a, BVal) and isinstance(b, BVal) and a.kind == b.kind == "tuple":
            return self._where_pairs(c, a, b, self._dims_of(t.scrut))
        kinds = [v.elem for v in (a, b) if isinstance(v, BVal)]
        for v in (a, b):
            if isinstance(v, BVal) and v.kind not in ("num", "idx"):
                raise NotBatchable("a case whose result is not a number")
        elem = kinds[0] if kinds else (elem_kind(getattr(t, "ty", None))
                                       or _literal_kind(t.lbody) or _literal_kind(t.rbody))
        if elem not in ("R", "Z"):
            raise NotBatchable("a case whose result is not a number")
        where = "_vselect" if elem == "R" else "_vwhere"  # Z: exact beyond int64
        expr = self.gen.atom(f"{where}({c}, {self.numbers(a)}, {self.numbers(b)})")
        return BVal("num", expr, self.dims(a, b) | self._dims_of(t.scrut), elem=elem,
                    fresh=True)

    def _clamp(self, c: clamps.Clamp):
        """A clamp of a batched integer between unbatched bounds, or None (the
        general rule then)."""
        if not self.is_batched(c.x) or self.is_batched(c.lo) or self.is_batched(c.hi):
            return None
        x = self.value(c.x)
        if not (isinstance(x, BVal) and (x.kind == "idx" or (x.kind == "num" and x.elem == "Z"))):
            return None
        lo, hi = self.value(c.lo), self.value(c.hi)
        flags = f"{c.below_first!r}, {c.below_strict!r}, {c.above_strict!r}"
        expr = self.gen.atom(f"_vclamp({self.numbers(x)}, {lo}, {hi}, {flags})")
        return BVal("num", expr, x.dims, elem="Z", fresh=True)

    def _where_pairs(self, c: str, a: BVal, b: BVal, dims: frozenset) -> BVal:
        """A case of two linear pairs of reals (a derivative of max or min:
        `case c of lpair 0 d | lpair d 0`): the pair of np.where of the
        components."""
        parts = []
        for x, y in zip(a.inner, b.inner):
            if isinstance(x, BVal) and isinstance(y, BVal) and x.kind == y.kind == "tuple":
                parts.append(self._where_pairs(c, x, y, dims))
                continue
            for v in (x, y):
                if isinstance(v, BVal) and not (v.kind == "num" and v.elem == "R"):
                    raise NotBatchable("a case of pairs whose components are not reals")
                if not isinstance(v, (BVal, str)):
                    raise NotBatchable("a case of pairs whose components are not reals")
            expr = self.gen.atom(f"_vselect({c}, {self.numbers(x)}, {self.numbers(y)})")
            parts.append(BVal("num", expr, self.dims(x, y) | dims, elem="R", fresh=True))
        return BVal("tuple", dims=self.dims(*parts), inner=tuple(parts))

    def _dims_of(self, t) -> frozenset:
        out: frozenset = frozenset()
        for x in free_vars(t):
            v = self.bound.get(x)
            if v is not None:
                out |= v.dims
        return out

    def _prim(self, t: Prim):
        op = t.op
        if op in _COMPARE or op in _LOGIC or op in _INTS:
            return self._discrete(t)
        if op == "SUM":
            # (the elements of the loops around the sum, counted first: the
            # summed products' statement then comes right before the sum's,
            # which registers._sum_products makes one)
            live = f", {self.gen.atom(' * '.join(self.sizes))}" if self.sizes else ""
            a = self.value(t.arg)
            if isinstance(a, BVal) and a.kind == "rows" and a.inner is None:
                a = self.row_array(a)
            if not (isinstance(a, BVal) and a.kind == "arr"):
                raise NotBatchable("sum of an array not built in the loop")
            x = self.numbers(a.inner) if isinstance(a.inner, BVal) else a.inner
            expr = self.gen.atom(f"_vsum({x}, {a.size}, {a.axis!r}, {self.rank!r}{live})")
            return BVal("num", expr, a.dims, fresh=True)
        p = PRIMITIVES.get(op)
        template = None if p is None else p.batched
        if template is None:
            raise NotBatchable(f"primitive {op} has no batched form")
        if "{1}" in template:
            if type(t.arg) is not Pair:
                raise NotBatchable(f"{op} of a pair value")
            a = self.value(t.arg.left)
            b = self.value(t.arg.right)
            expr = template.format(self.numbers(a), self.numbers(b))
            dims = self.dims(a, b)
        else:
            a = self.value(t.arg)
            expr = template.format(self.numbers(a))
            dims = self.dims(a)
        # a conversion may hand back its operand itself: not a fresh array
        # the same numpy expression of the same operands computed once per region
        # (the derivative of tanh reads tanh x twice); a value served twice is not
        # fresh, and an add that takes a value over forgets it (execute_batched)
        hit = self._cse.get(expr)
        if hit is None and expr in self.outer:  # computed by the forward pass
            hit = self._cse[expr] = self.outer_param(expr)
        if hit is not None:
            return BVal("num", hit, dims, fresh=False, elem=_res_elem(p))
        atom = self._cse[expr] = self.gen.atom(expr)
        elem = _res_elem(p)
        if elem == "R" and len(dims) >= FUSE_AXES and atom != expr:  # (fused arithmetic)
            self.gen.real_arrays.add(atom)
        # a conversion may hand back its operand itself: not a fresh array
        return BVal("num", atom, dims,
                    fresh=not template.startswith("_np.asarray"), elem=elem)

    def _discrete(self, t: Prim):
        """Comparisons (a batched Bool), not / and / or on Bools (both operands
        evaluated, as the evaluator's) and exact integer arithmetic."""
        op = t.op
        binary = op not in ("NOT", "INEG")
        if binary:
            if type(t.arg) is not Pair:
                raise NotBatchable(f"{op} of a pair value")
            vals = [self.value(t.arg.left), self.value(t.arg.right)]
        else:
            vals = [self.value(t.arg)]
        if op in _LOGIC:
            expr, elem = _LOGIC[op].format(*(self.bools(v) for v in vals)), "B"
        else:
            for v in vals:
                if isinstance(v, BVal) and v.kind == "num" and v.elem == "B":
                    raise NotBatchable(f"{op} of a Bool")
            ops = [self.numbers(v) for v in vals]
            if op in _COMPARE:
                expr, elem = f"({ops[0]} {_COMPARE[op]} {ops[1]})", "B"
            else:
                expr, elem = _INTS[op].format(*ops), "Z"
        return BVal("num", self.gen.atom(expr), self.dims(*vals), fresh=True, elem=elem)


def _res_elem(p) -> str:
    """The element kind of a batched primitive's result ("R" unless it is Z)."""
    return "Z" if isinstance(p.res, Int) else "R"


def vectorise_loop(gen, t, make) -> str | None:
    """The code of the array node t (a build or map) vectorised, or None (nothing
    emitted) when its body is not batchable. `make(batcher)` runs the node's
    rule at depth 0 and returns its "arr" BVal. Records the choice as a comment
    in the generated code."""
    label = _LABELS.get(type(t).__name__, type(t).__name__.lower())
    block = gen.block
    mark, indent, pmark = len(block.lines), gen.indent, len(gen.proj_log)
    env = dict(gen.env)
    rank = max(1, nesting(t))
    while True:
        b = Batcher(gen, rank)
        gen.emit("with _quiet():")
        gen.indent += 1
        try:
            arr = make(b)
            out = materialise(b, arr, t)
        except TooShallow as why:
            if rank > nesting(t):
                abandon(gen, block, mark, indent, pmark, env, label, why)
                return None
            # a loop the syntax does not show (a sum of a row: Batcher.row_array)
            undo(gen, block, mark, indent, pmark, env)
            rank += 1
            continue
        except NotBatchable as why:
            abandon(gen, block, mark, indent, pmark, env, label, why)
            return None
        break
    gen.indent = indent
    if b.guarded or b.deepest >= 3:
        # (three loops deep, a temporary of the region may be as large as all
        # the loops' elements together: on a MemoryError, or any error, the
        # per-element code runs instead, one outer element's loops at a time)
        why = "rows of one length" if b.guarded else "loops three deep"
        _guard(gen, block, mark, pmark, t, out, f"{label}: vectorised (guarded: {why})")
    else:
        block.lines.insert(mark, "    " * indent + f"# {label}: vectorised")
    gen.blocks.extend(b.pending)
    return out


def _guard(gen, block, mark: int, pmark: int, t, out: str, comment: str) -> None:
    """Make the region emitted after `mark` (whose result is `out`) a guarded
    one, headed by `comment`: on a failed guard (the rows a loop reads are
    ragged) or any error, t runs by its evaluation rule instead, element by
    element, the loops in its body batched as they would be alone (each
    element's layers, as before the loops were batched together), and gives
    the result, or the evaluator's error. Projections the region recorded are
    forgotten (it may not have run to its end)."""
    region = block.lines[mark:]
    del block.lines[mark:]
    _forget_projections(gen, pmark)
    # t's own loop per element, the loops in its body batched where they can
    # be (the fallback's own choices unexplained: `chad compile` shows the
    # region's)
    gen.rule_only.add(id(t))
    explain, gen.explain = gen.explain, False
    try:
        lazy = gen.local_def([], t, "f")
    finally:
        gen.rule_only.discard(id(t))
        gen.explain = explain
    pad = "    " * gen.indent
    block.lines.append(f"{pad}# {comment}")
    block.lines.append(f"{pad}try:")
    block.lines.extend("    " + line for line in region)
    gen.emit("except Exception:")  # a guard, or an error the per-element code reports
    gen.emit("    _vfell()")
    gen.emit(f"    {out} = {lazy}()")


_LABELS = {"MapA": "map"}


def abandon(gen, block, mark: int, indent: int, pmark: int, env: dict, label: str,
            why: NotBatchable) -> None:
    """Undo a batching attempt (`undo`) and say in a comment why the node runs
    as a per-element loop."""
    undo(gen, block, mark, indent, pmark, env)
    if gen.explain:
        gen.emit(f"# {label}: per-element loop ({_comment(str(why))})")


def undo(gen, block, mark: int, indent: int, pmark: int, env: dict) -> None:
    """Undo a batching attempt: drop the lines it emitted after `mark` and the
    projections it recorded after `pmark`, restore the indentation and the
    environment."""
    del block.lines[mark:]
    gen.indent = indent
    _forget_projections(gen, pmark)
    gen.env.clear()
    gen.env.update(env)


def _forget_projections(gen, pmark: int) -> None:
    """Forget the projections recorded after `pmark` (code that may not run)."""
    for key in gen.proj_log[pmark:]:
        gen.proj.pop(key, None)
    del gen.proj_log[pmark:]


def _comment(text: str) -> str:
    """A reason as comment text: only letters, digits, spaces and a few signs (no
    name of the program can reach it, but nothing is spliced unfiltered)."""
    return "".join(c for c in text if c.isalnum() or c in " ,()-.'") or "not batchable"


def materialise(b: Batcher, arr, t) -> str:
    """The value representation of the region's result (an "arr" BVal on axis
    0): an Array R / Array Z as a 1-D array, an array of such arrays as a tuple
    of rows (a rectangular block)."""
    if not (isinstance(arr, BVal) and arr.kind == "arr" and arr.axis == 0):
        raise NotBatchable("the result is not an array built by the loop")
    inner = arr.inner
    if isinstance(inner, BVal) and inner.kind == "arr":
        if isinstance(inner.inner, BVal) and inner.inner.kind == "arr":
            raise NotBatchable("arrays nested three deep")
        dtype = "_f64" if inner.elem == "R" else "_i64"
        x = b.numbers(inner.inner) if isinstance(inner.inner, BVal) else inner.inner
        return b.gen.atom(f"_vrows({x}, {arr.size}, {inner.size}, {b.rank!r}, {dtype})")
    dtype = "_f64" if arr.elem == "R" else "_i64"
    fresh = isinstance(inner, BVal) and inner.fresh
    x = b.numbers(inner) if isinstance(inner, BVal) else inner
    private = getattr(b.gen, "private", False)
    return b.gen.atom(f"_vout({x}, {arr.size}, {b.rank!r}, {dtype}, {fresh!r}, {private!r})")


# ----------------------------------------------------------------- reverse passes
#
# A vectorised map's forward pass (`unzipMap (x. lets in (y, \d -> m)) a`, CHAD of
# map: Efficient CHAD (Smeding & Vákár), §8) yields n backpropagators; batched,
# they are ONE function running the action m for all n elements at once
# (vector_support.VecBack), which `sequenceScoped` runs on the array of the
# elements' cotangents with one array per scoped cell.


def execute_batched(b: Batcher, t, cells: str, base: str, mask: str | None = None) -> None:
    """Emit the action t run by every element of the region (rank 1): its adds
    as `_vadd` on the list `cells` (levels from `base` on per element). Only
    lets, `>>`, adds of reals, `pure`, the scope of a let (`scope r m >>= k`,
    r a real) and a scope of unit are batched. With `mask` (the name of a bool
    array: a branch of a case, chad/compile/switch.py) only the elements where
    it holds run t: its adds are `_vaddm` (the others add nothing), and what
    it computes must be unable to fail (`safe`), as every element computes it."""
    cls = type(t)
    if mask is not None and cls in (Let, AddEVM) and not safe(t.rhs if cls is Let else t.val):
        raise NotBatchable("a branch's action that might fail")
    if cls is ThenEVM:
        execute_batched(b, t.first, cells, base, mask)
        execute_batched(b, t.second, cells, base, mask)
    elif cls is Let:
        saved = b.bind(t.name, b.value(t.rhs))
        try:
            execute_batched(b, t.body, cells, base, mask)
        finally:
            b.unbind(saved)
    elif cls is Ann:
        execute_batched(b, t.expr, cells, base, mask)
    elif cls is ScopeEVM and type(t.init) is LUnit:
        # `scope () m` whose result is not read (CHAD's case: the cell of what
        # a branch matched, of unit type): a cell that nothing adds a real to
        b.gen.emit(f"{cells}.append(None)")
        execute_batched(b, t.m, cells, base, mask)
        b.gen.emit(f"{cells}.pop()")
    elif cls is BindEVM and type(t.m) is ScopeEVM and type(t.k) is Lam:
        # `scope init m >>= \p -> k`: CHAD's let (the let-bound variable's
        # cotangent cell): one per-element cell, an array of n reals from init
        # (as the evaluator's cell starts at init), popped after m; p's first
        # component the array of its final values
        if not _real_literal(t.m.init):
            raise NotBatchable("a scope whose cell is not a real")
        init = b.gen.atom(b.gen.value(t.m.init))
        n = b.sizes[0]
        b.gen.emit(f"{cells}.append(_np.full({n}, {init}, dtype=_f64))")
        execute_batched(b, t.m.m, cells, base, mask)
        final = b.gen.fresh("v")
        b.gen.emit(f"{final} = {cells}.pop()")
        saved = b.bind(t.k.name, BVal("pair", dims={0}, inner=(
            BVal("num", final, {0}, elem="R"), None)))
        try:
            execute_batched(b, t.k.body, cells, base, mask)
        finally:
            b.unbind(saved)
    elif cls is AddEVM:
        if not isinstance(t.level, int) or isinstance(t.level, bool) or t.level < 0:
            raise NotBatchable("an add at a level that is not a natural number")
        if mask is None and type(t.val) is Prim and t.val.op in _NEGATIONS:
            x = b.value(t.val.arg)
            if isinstance(x, BVal) and x.kind == "num" and x.elem == "R":
                # an add of -x: negated where it is added (vadd's neg), no pass
                # of its own for a shared cell's running sum
                b.gen.emit(f"_vadd({cells}, {t.level!r}, {base}, {b.numbers(x)}, "
                           f"{b.sizes[0]}, False, True)")
                return
        v = _added(b, t.val)
        if mask is not None:  # a branch's add: only where the mask holds
            b.masked.append(t.level)
            b.gen.emit(f"_vaddm({cells}, {t.level!r}, {base}, {b.numbers(v)}, {b.sizes[0]}, "
                       f"{mask})")
            return
        # a value computed for this add alone (a primitive's fresh array, not a
        # let-bound name that another add may read) may become the cell's array
        adopt = type(t.val) is Prim and isinstance(v, BVal) and v.fresh
        if adopt:  # the cell takes the array over: no later expression may reuse it
            for key in [k for k, a in b._cse.items() if a == v.expr]:
                del b._cse[key]
        extra = ", True" if adopt else ""
        b.gen.emit(f"_vadd({cells}, {t.level!r}, {base}, {b.numbers(v)}, {b.sizes[0]}{extra})")
    elif cls is App:  # a captured backpropagator (a let-bound forward pass: switch.py)
        f = b.value(t.fn)
        if not (isinstance(f, BVal) and f.kind == "back"):
            raise NotBatchable("an application of a function that is not a backpropagator")
        if mask is not None and not safe(t.arg):
            raise NotBatchable("a branch's action that might fail")
        run_back(b, f.inner, b.value(t.arg), cells, base, mask)
    elif cls is PureEVM:
        if b.is_batched(t.expr) or not safe(t.expr):
            raise NotBatchable("a batched result of an action")
    else:
        raise NotBatchable(f"no batched execution of {cls.__name__}")


# the batched reals whose arithmetic is fused (chad/compile/fusion.py): those
# of at least this many loops, blocks of a nested loop (a single loop's rows:
# measured no faster, docs/compiler.md "Fused arithmetic")
FUSE_AXES = 2

# the negations of a real (numpy's `-x` batched), whose adds vadd negates itself
_NEGATIONS = ("NEG", "LNEG")


def _added(b: Batcher, term):
    """The value of an add in a batched action: a batched real, or a literal."""
    v = b.value(term)
    if isinstance(v, BVal) and not (v.kind == "num" and v.elem == "R"):
        raise NotBatchable("an add of a value that is not a real")
    if not isinstance(v, BVal) and not _real_literal(term):
        raise NotBatchable("an add of an unbatched value")
    return v


def _real_literal(t) -> bool:
    return type(t) is Prim and t.op in ("LIT", "LZERO")


def back_function(b: Batcher, lam: Lam) -> tuple[str, list[str]]:
    """The batched function of the backpropagator lam (\\d -> action) under the
    region of b (rank 1): a new top-level function of its captured values, d,
    the cells, base and n; returns its name and the atoms it captures. Its lines
    are added to the module only by `commit` (after the whole node batched)."""
    name, atoms, _masked = back_function_tree(b, ("lam", lam, capture(b, lam)))
    return name, atoms


def capture(b: Batcher, lam: Lam) -> list:
    """What the free variables of the backpropagator lam are bound to here:
    (name, batched number or atom) each."""
    caps: list[tuple[str, object]] = []
    for x in free_vars(lam):
        if x in b.bound:
            v = b.bound[x]
            if not _capturable(v):
                raise NotBatchable("a backpropagator capturing a loop index or an array")
            caps.append((x, v))
        elif x in b.gen.env:
            caps.append((x, b.gen.env[x]))
        else:
            raise NotBatchable(f"unbound {type(lam).__name__}")
    return caps


def _capturable(v) -> bool:
    """A batched value a backpropagator may capture: numbers, and pairs of
    numbers and backpropagators (chad/compile/switch.py: a let-bound forward
    pass of a case)."""
    if not isinstance(v, BVal):
        return True
    if v.kind == "num":
        return True
    if v.kind == "tuple":
        return all(_capturable(p) for p in v.inner)
    return v.kind == "back"


def _atoms_of(v, out: dict, fresh) -> None:
    """Every forward atom a captured value or a tree of backpropagators holds
    (a parameter name for each, in `out`)."""
    if isinstance(v, tuple) and v and v[0] in ("lam", "case"):
        if v[0] == "case":
            _atoms_of(v[1], out, fresh)
            _atoms_of(v[2], out, fresh)
            _atoms_of(v[3], out, fresh)
        else:
            for _x, c in v[2]:
                _atoms_of(c, out, fresh)
        return
    if isinstance(v, BVal):
        if v.kind == "num":
            v = v.expr
        elif v.kind == "tuple":
            for p in v.inner:
                _atoms_of(p, out, fresh)
            return
        else:  # "back"
            _atoms_of(v.inner, out, fresh)
            return
    if v not in out:
        out[v] = fresh()


def _in_params(v, of_atom: dict):
    """A captured value or tree in the batched function's parameters."""
    if isinstance(v, tuple) and v and v[0] in ("lam", "case"):
        if v[0] == "case":
            return ("case", _in_params(v[1], of_atom), _in_params(v[2], of_atom),
                    _in_params(v[3], of_atom))
        return ("lam", v[1], [(x, _in_params(c, of_atom)) for x, c in v[2]])
    if isinstance(v, BVal):
        if v.kind == "num":
            return BVal("num", of_atom[v.expr], {0}, elem=v.elem)
        if v.kind == "tuple":
            return BVal("tuple", dims={0}, inner=tuple(_in_params(p, of_atom) for p in v.inner))
        return BVal("back", dims={0}, inner=_in_params(v.inner, of_atom))
    return of_atom[v]


def run_back(b: Batcher, tree, arg, cells: str, base: str, mask: str | None) -> None:
    """Emit a tree of backpropagators (in the batched function's parameters)
    applied to arg: a leaf's action with its captures and its parameter bound;
    a case's branches under their masks (the mask and-ed with c, and with not
    c)."""
    gen = b.gen
    if tree[0] == "case" and _merged(b, tree, arg, cells, base, mask):
        return
    if tree[0] == "case":
        c = b.numbers(tree[1])
        run_back(b, tree[2], arg, cells, base, c if mask is None else gen.atom(f"({mask} & {c})"))
        run_back(b, tree[3], arg, cells, base,
                 gen.atom(f"~{c}" if mask is None else f"({mask} & ~{c})"))
        return
    with _leaf_bound(b, tree, arg) as lam:
        execute_batched(b, lam.body, cells, base, mask)


@contextmanager
def _leaf_bound(b: Batcher, leaf, arg):
    """A backpropagator's captures and its parameter (arg) bound in b; yields
    its lambda."""
    _kind, lam, caps = leaf
    saved = [b.bind(x, v) for x, v in caps]
    saved.append(b.bind(lam.name, arg))
    try:
        yield lam
    finally:
        for s in reversed(saved):
            b.unbind(s)


def _adds_of(t) -> list | None:
    """The adds (level, value) of an action made of `>>`, adds, `pure` and
    scopes of unit only (whose cells nothing adds a real to), in order; else
    None."""
    out: list = []
    stack = [t]
    while stack:
        t = stack.pop()
        cls = type(t)
        if cls is ThenEVM:
            stack.extend((t.second, t.first))
        elif cls is Ann:
            stack.append(t.expr)
        elif cls is ScopeEVM and type(t.init) is LUnit:
            stack.append(t.m)
        elif cls is AddEVM and isinstance(t.level, int) and not isinstance(t.level, bool) \
                and t.level >= 0 and safe(t.val):
            out.append((t.level, t.val))
        elif cls is PureEVM and type(t.expr) in (Unit, LUnit):
            continue
        else:
            return None
    return out


def _merged(b: Batcher, tree, arg, cells: str, base: str, mask: str | None) -> bool:
    """A case of two backpropagators whose actions are adds only, the same
    number of them to each cell (an if/else adding to the same cells): every
    element makes the same adds, each of its own branch's value, so they are
    the adds of np.where(c, left's value, right's value), in the branches'
    order per cell, for every element (under the enclosing mask, if any). The
    evaluator's additions, in its order, without masked adds. False (nothing
    emitted) for any other case."""
    left, right = tree[2], tree[3]
    if left[0] != "lam" or right[0] != "lam":
        return False
    adds = [_adds_of(left[1].body), _adds_of(right[1].body)]
    if adds[0] is None or adds[1] is None or not adds[0]:
        return False
    levels = [[lv for lv, _ in a] for a in adds]
    if sorted(levels[0]) != sorted(levels[1]):
        return False
    values = []
    for leaf, branch in zip((left, right), adds):
        with _leaf_bound(b, leaf, arg):
            values.append([_added(b, term) for _lv, term in branch])
    gen = b.gen
    c = b.numbers(tree[1])
    right_at: dict = {}  # right's adds to each cell, in order
    for k, lv in enumerate(levels[1]):
        right_at.setdefault(lv, []).append(k)
    for k, lv in enumerate(levels[0]):
        j = right_at[lv].pop(0)
        v = gen.atom(f"_vselect({c}, {b.numbers(values[0][k])}, {b.numbers(values[1][j])})")
        if mask is None:
            gen.emit(f"_vadd({cells}, {lv!r}, {base}, {v}, {b.sizes[0]}, True)")
        else:
            b.masked.append(lv)
            gen.emit(f"_vaddm({cells}, {lv!r}, {base}, {v}, {b.sizes[0]}, {mask})")
    return True


def back_function_tree(b: Batcher, tree) -> tuple[str, list[str], tuple]:
    """back_function of a tree of backpropagators: ("lam", lam, capture(b,
    lam)), or ("case", c, left, right), c a batched Bool: the elements where c
    holds run left's action, the others right's (chad/compile/switch.py).
    Returns the function's name, the atoms it captures and the levels it adds
    to in a branch (vector_support.VecBack's `masked`)."""
    gen = b.gen
    name = gen.fresh("vb")
    # one parameter per distinct captured value (two names bound to one atom,
    # as the region's shared expressions make them, are one parameter)
    of_atom: dict[str, str] = {}
    _atoms_of(tree, of_atom, lambda: gen.fresh("c"))
    params = list(of_atom.values())
    d, cells, base, n = gen.fresh("p"), gen.fresh("cells"), gen.fresh("p"), gen.fresh("p")
    inner = Batcher(gen, 1)
    inner.sizes.append(n)
    with function_block(gen, f"def {name}({', '.join(params + [d, cells, base, n])}):") \
            as block:
        inner.outer = _in_terms_of(b._cse, of_atom)
        inner.captured = of_atom
        local = _in_params(tree, of_atom)
        quiet_body(gen, lambda: run_back(inner, local, BVal("num", d, {0}, elem="R"), cells,
                                         base, None))
    # forward values it reads (tanh x of tanh's derivative) are parameters too
    atoms = captures_read(block, list(of_atom.items()) + list(inner.outer_used.items()),
                          [d, cells, base, n])
    b.pending.append(block)
    return name, atoms, tuple(sorted(set(inner.masked)))


def captures_read(block, captured: list, rest: list) -> list:
    """The atoms of the captured (atom, parameter) pairs that the body of the
    batched backpropagator `block` reads, in order; its `def` line rewritten to
    take their parameters, then `rest`. A value the body never reads (w * x
    where the derivative reads tanh (w * x); an inner loop's block of
    products) is not captured: the forward pass would keep it alive until the
    reverse pass."""
    read = set(_NAME.findall("\n".join(block.lines[1:])))
    kept = [(a, p) for a, p in captured if p in read]
    head = block.lines[0]
    block.lines[0] = f"{head[:head.index('(')]}({', '.join([p for _a, p in kept] + rest)}):"
    return [a for a, _p in kept]


@contextmanager
def function_block(gen, header: str):
    """Generate a new top-level function (its `def` line `header`): the
    generator's function, indentation, environment and cells are its own
    inside the block and given back after; yields the function's Block, whose
    lines are added to the module by whoever commits the region."""
    saved = (gen.block, gen.indent, dict(gen.env), gen.cells, gen.pairs, gen.proj, gen.proj_log)
    block = type(gen.block)()  # a new function's lines (codegen's Block; no import of it)
    gen.block, gen.indent = block, 0
    gen.emit(header)
    gen.indent = 1
    gen.env.clear()
    gen.cells, gen.pairs, gen.proj, gen.proj_log = None, {}, {}, []
    try:
        yield block
    finally:
        (gen.block, gen.indent, env, gen.cells, gen.pairs, gen.proj, gen.proj_log) = saved
        gen.env.clear()
        gen.env.update(env)


def per_element_code(gen, t) -> str:
    """A function of no arguments computing the array node t element by element
    (its evaluation rule over its compiled body, nothing vectorised): what a
    vectorised forward pass falls back to."""
    old = gen.vectorise
    gen.vectorise = False
    try:
        return gen.local_def([], t, "f")
    finally:
        gen.vectorise = old


def quiet_body(gen, emit_body) -> None:
    """A batched function's body: emit_body() inside `with _quiet():` (numpy's
    warnings off), then `return None`."""
    gen.emit("with _quiet():")
    gen.indent = 2
    emit_body()
    gen.emit("pass")
    gen.indent = 1
    gen.emit("return None")


def bind_forward_lets(b: Batcher, body) -> tuple[list, Pair]:
    """The lets of a CHAD forward-pass body bound in b (what to unbind, in
    order) and the pair (y, \\d -> m) they end in."""
    saved = []
    while type(body) is Let:
        saved.append(b.bind(body.name, b.value(body.rhs)))
        body = body.body
    if type(body) is not Pair or type(body.right) is not Lam:
        raise NotBatchable("the body is not a pair of a value and a backpropagator")
    return saved, body


_NAME = re.compile(r"\b[a-z]+[0-9]+\b")


def _in_terms_of(table: dict, of_atom: dict) -> dict:
    """The forward region's expressions (its CSE table) whose operands are all
    captured by the backpropagator, rewritten in the backpropagator's parameter
    names: expression -> the forward atom holding its value."""
    out = {}
    for expr, atom in table.items():
        names = set(_NAME.findall(expr))
        if names and names <= of_atom.keys():
            out[_NAME.sub(lambda m: of_atom[m.group(0)], expr)] = atom
    return out
