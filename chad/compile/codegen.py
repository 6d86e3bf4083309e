"""The code generator: target terms (source terms too) to Python source.

One pass over the term, emitting Python statements in A-normal form: every
sub-term's value goes into a fresh local (or stays an atom: a local or a
number), so the generated expressions are shallow however deep the term is, and
a chain of lets is straight-line code. Every Python name in the output is
generated here (`v12`, `f3`, `k7`): no name or string from the program is ever
spliced into the source; numbers go in through `repr` (finite ones; others,
and every other object, are constants of the module's namespace).

Values are those of the counting evaluator (chad/costmodel/evaluate.py): tuples
for pairs, `Inj` for sums, None for the sparse zeros, numpy arrays for arrays;
a function value is a Python function of one argument.

The EVM (Efficient CHAD (Smeding & Vákár), §4.2, §5): with the mutable-array
runtime ("inline" mode) a monadic term is compiled twice over: as a *value* it
is an action `act(cells) -> result`; in *execution* position (the body of an
action, the first argument of `bind`, the monad of `run`) it becomes statements
acting on the list `cells` directly: `add` is `cells[level] = padd(v, cells[level])`,
`scope` is a push and a pop, `bind m (\\x -> k)` is m's statements then k's.
With any other runtime ("interface" mode) actions are built with the runtime's
own EVM methods and `run` runs them.

Nodes of extensions say how they are compiled (`register_node(compiled=...)`):
"eval" runs the node's evaluation rule on the compiled sub-terms (chad/compile/
support.py `run_rule`), or a function lowering the node with this generator.
An array node with a vectorised lowering (`register_node(vectorise=...)`,
chad/compile/vectorise.py) is tried first, as numpy code.

The generator recurses over the term, but for the spines of deep programs,
which are loops: a let chain in body position, the left operands of pairs and
binary primitives (`value`), the `bind (scope ...)` spine of a backward pass and
`>>` chains (`execute`). The compiler runs it on the caller's thread (on a
big-stack thread only if that raises RecursionError; docs/compiler.md, "Deep
programs"). The code it generates does not recurse on the term's depth.
"""

from __future__ import annotations

import functools
import math
import operator
import re

from chad import tables
from chad.errors import ChadError
from chad.linear import zerov
from chad.primitives import PRIMITIVES, _cos, _sin
from chad.terms import (
    AddEVM, Ann, App, BindEVM, Call, Case, Fst, Inl, Inr, Lam, LCastL, LCastR, Let, LFst,
    LInl, LInr, LPair, LPairZero, LSnd, LSumZero, LUnit, Pair, Prim, PureEVM, RunEVM,
    ScopeEVM, Snd, ThenEVM, Unit, Var, binders_of, children, free_vars,
)
from chad.values import FALSE, TRUE, Inj, cells_to_env_tuple, env_tuple_to_cells

from . import parallel_codegen, parallel_support, support, vector_support
from . import kernels
from .registers import reuse_locals

# an atom that is a literal (`atom`: None, a number, a negative one in parentheses)
_LITERAL = re.compile(r"None$|[0-9(]")

_ATOM = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*|-?[0-9][0-9.e+-]*)$")
_EVM_NODES = (PureEVM, BindEVM, ThenEVM, AddEVM, ScopeEVM)


class CompileError(ChadError):
    """An internal failure of the compiler, with the program's location."""

    kind = "internal compiler error"


_LIST = object()  # Gen.execute: a scope whose cell is pushed on a list


class _NeedList(Exception):
    """Raised while generating a run with its cells in locals when some action
    needs the list (an action value run on the cells): the run is generated again
    with the list."""


class LocalCells:
    """The cells of a run held in Python locals, one per level (a scope adds one):
    when every action of the run is executed inline, no list is needed. `real`
    says the cell holds an R cotangent (its zero is 0.0), so `add` is `+`.

    A cell starting at 0.0 or None is not assigned until a second `add`: its
    value is an atom (`held`), 0.0 or None at first, then the first value added
    (`plusv(v, None)` is v; `v + 0.0` is v but for the sign of a zero, see
    `read`). Branches see every cell in its local (`settle`)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.real: list[bool] = []
        self.reals: set[str] = set()    # the names of the real cells
        self.held: dict[str, str] = {}  # cell -> the atom it holds, not yet in its local
        # real cells whose first add skipped the `+ 0.0` of a value that may be
        # -0.0: read as `g + 0.0`, which gives the sum from 0.0 exactly (x + -0.0
        # is x for every x, so only a sum of -0.0s differs, and it becomes 0.0)
        self.unsigned: set[str] = set()
        # atoms known not to be -0.0 (v + 0.0 is v): real cells' values as read
        # (a sum from 0.0 is never -0.0)
        self.exact: set[str] = {"0.0"}

    def push(self, gen: "Gen", init: str) -> str:
        """A new cell (the next level) holding the atom init: its local."""
        name = gen.fresh("g")
        if init in ("0.0", "None"):
            self.held[name] = init
        else:
            gen.emit(f"{name} = {init}")
        self.names.append(name)
        self.real.append(init == "0.0")
        if init == "0.0":
            self.reals.add(name)
        return name

    def add(self, gen: "Gen", level: int, v: str) -> None:
        """cells[level] += v (v an atom)."""
        g = self.names[level]
        held = self.held.get(g)
        real = self.real[level]
        if held is None:
            gen.emit(f"{g} = {v} + {g}" if real else f"{g} = _padd({v}, {g})")
        elif held == ("0.0" if real else "None"):  # the first add: g holds v
            self.held[g] = v
            if real and v not in self.exact:
                self.unsigned.add(g)
        else:
            del self.held[g]
            gen.emit(f"{g} = {v} + {held}" if real else f"{g} = _padd({v}, {held})")

    def read(self, gen: "Gen", g: str) -> str:
        """The value of cell g: an atom not assigned again (read once its scope,
        or the run, has ended)."""
        held = self.held.get(g, g)
        if g in self.unsigned:
            held = gen.atom(f"({held} + 0.0)")
        if g in self.reals:
            self.exact.add(held)
        return held

    def settle(self, gen: "Gen") -> None:
        """Every cell's value in its local (before a branch: both sides add to
        the same locals)."""
        for g in self.names:
            held = self.held.pop(g, None)
            if held is not None:
                gen.emit(f"{g} = {held}")

    def pop(self) -> None:
        self.names.pop()
        self.real.pop()


# Module-level helpers a function binds as locals, by default arguments, when
# its code calls them (a local is read faster than a global: the 1000-let
# chain's gradient took 13% less time)
LOCAL_HELPERS = ("_sin", "_cos", "_abs")


class Block:
    """The lines of one top-level function, and the LOCAL_HELPERS they call."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.helpers: set[str] = set()

    def finished(self) -> list[str]:
        """The lines, the helpers bound in the `def` line."""
        if not self.helpers:
            return self.lines
        head = self.lines[0]
        assert head.startswith("def ") and head.endswith("):")
        extra = ", ".join(f"{h}={h}" for h in LOCAL_HELPERS if h in self.helpers)
        sep = "" if head.endswith("():") else ", "
        return [f"{head[:-2]}{sep}{extra}):"] + self.lines[1:]


class Gen:
    """One generated module.

    `functions` gives the Python function of a def (key, term, parameter names)
    for Call and DCall; `inline` selects the EVM mode (see the module doc);
    `fork` (inline mode only: the parallel runtime) runs independent heavy
    lets and `>>` chains on two threads (chad/compile/parallel_codegen.py)."""

    def __init__(self, inline: bool, prepare=None, vectorise: bool = True,
                 fork: bool = False) -> None:
        self.inline = inline
        self.fork = fork and inline
        # a derivative's module (gradient, vjp): the index arrays it builds
        # never reach the caller, so the recorded identity may be used as is
        self.private = False
        # a vjp's forward pass: its value reaches the caller before its
        # backpropagator runs, so no array of it may be one the
        # backpropagator reads (chad/arrays/lower.py, forward passes)
        self.escapes = False
        self.heavy_memo: dict = {}   # parallel_codegen.heavy, by sub-term id
        # the locals holding a batched real's array (vectorise.Batcher): their
        # arithmetic is fused when the functions are finished (fusion.py)
        self.real_arrays: set[str] = set()
        self.then_seen: set = set()  # `>>` nodes parallel_codegen has looked at
        self.vectorise = vectorise  # array nodes as numpy code where batchable
        self.rule_only: set[int] = set()  # ids of array nodes compiled by their rule here
        self.explain = True  # say why an array node runs element by element (a comment)
        self.prepare = prepare or (lambda t: t)
        self.ns: dict = {
            "_math": math, "_sin": _sin, "_cos": _cos, "_abs": abs, "_TRUE": TRUE,
            "_FALSE": FALSE, "_Inj": Inj, "_padd": support.padd, "_zerov": zerov,
            "_e2c": env_tuple_to_cells, "_c2e": cells_to_env_tuple,
            "_run_rule": support.run_rule, "_partial": functools.partial,
            "_kwrap": support.kwrap, **vector_support.HELPERS,
        }
        if self.fork:
            self.ns.update(parallel_support.HELPERS)
        self._consts: dict[int, str] = {}
        self._count = 0
        self.blocks: list[Block] = []
        self.block: Block | None = None
        self.indent = 0
        self.env: dict[str, str] = {}
        self.cells: str | None = None  # the cells' local in execution position
        self.functions: dict = {}       # key -> generated name (defs, derived defs)
        self.defs: dict = {}            # def name -> Def
        self.pairs: dict[str, tuple[str, str]] = {}  # local -> its known components
        self.proj: dict[tuple[str, int], str] = {}    # (local, 0 or 1) -> its projection
        self.proj_log: list = []                      # keys of proj, in order added
        self.last_loc = None  # the last location seen: where an internal error is reported

    # ------------------------------------------------------------ names and lines
    def fresh(self, stem: str = "v") -> str:
        self._count += 1
        return f"{stem}{self._count}"

    def const(self, obj, stem: str = "K") -> str:
        """A module-level name bound to obj (no source text of obj is emitted)."""
        name = self._consts.get(id(obj))
        if name is None:
            name = self.fresh("_" + stem)
            self.ns[name] = obj
            self._consts[id(obj)] = name
            self.ns.setdefault("_keep", []).append(obj)  # ids stay valid
        return name

    def literal(self, v) -> str:
        if isinstance(v, bool) or v is None:
            return self.const(v)
        if type(v) is int:
            return repr(v) if v >= 0 else f"({v!r})"
        if type(v) is float and math.isfinite(v):
            return repr(v) if not math.copysign(1.0, v) < 0 else f"({v!r})"
        return self.const(v)

    def emit(self, line: str) -> None:
        self.block.lines.append("    " * self.indent + line)

    def atom(self, expr: str, stem: str = "v") -> str:
        if _ATOM.match(expr) or expr == "None" or (expr.startswith("(-") and expr.endswith(")")
                                                   and _ATOM.match(expr[1:-1])):
            return expr
        name = self.fresh(stem)
        self.emit(f"{name} = {expr}")
        return name

    def source(self) -> str:
        """The module's source: each function with its dead pure assignments
        dropped and its locals reused (registers.py)."""
        reals = self.real_arrays if kernels.native() else frozenset()
        return "\n\n".join("\n".join(reuse_locals(b.finished(), reals))
                             for b in self.blocks) + "\n"

    # ------------------------------------------------------------ functions
    def function(self, params: list[str], body, stem: str = "f", prepared: bool = False) -> str:
        """A top-level function of the given term variables whose result is body's
        value (body simplified first unless `prepared`); returns its name."""
        saved = (self.block, self.indent, self.env, self.cells, self.pairs, self.proj,
                 self.proj_log)
        name = self.fresh(stem)
        self.block = Block()
        self.blocks.append(self.block)
        self.indent = 0
        args = [self.fresh("a") for _ in params]
        self.env = dict(zip(params, args))
        self.cells = None
        self.pairs, self.proj, self.proj_log = {}, {}, []
        self.emit(f"def {name}({', '.join(args)}):")
        self.indent = 1
        try:
            r = self.value(body if prepared else self.prepare(body))
            self.emit(f"return {r}")
        finally:
            (self.block, self.indent, self.env, self.cells, self.pairs, self.proj,
             self.proj_log) = saved
        return name

    def local_def(self, params: list[str], body, stem: str = "f", execute: bool = False,
                  closed: bool = False, setup=None) -> str:
        """A function value of the term variables `params` whose result is body's
        value (with `execute`: an action, a function of the cells running body).

        Lambda-lifted: the function is top-level, its free variables are extra
        leading parameters, and the value is `_partial(function, captured...)`
        (CPython compiles nested functions in time quadratic in the enclosing
        function's size; top-level ones in linear time). With `closed`, body sees
        only `params` (a closed function); `setup(gen, args)` may emit the first
        lines and bind more variables."""
        free = [] if closed else [x for x in free_vars(body) if x not in params]
        captured: list[str] = []
        inner_env: dict[str, str] = {}
        for x in free:
            try:
                atom = self.env[x]
            except KeyError:
                raise CompileError(f"unbound variable {x!r}", getattr(body, "loc", None)) from None
            if atom.startswith("_") or not atom[:1].isalpha():  # a constant or a literal
                inner_env[x] = atom
            else:
                if atom not in captured:
                    captured.append(atom)
        saved = (self.block, self.indent, self.env, self.cells, self.pairs, self.proj,
                 self.proj_log)
        name = self.fresh(stem)
        self.block = Block()
        self.blocks.append(self.block)
        caps = {atom: self.fresh("c") for atom in captured}
        args = [self.fresh("p") for _ in params]
        cells = [self.fresh("cells")] if execute else []
        self.indent = 0
        self.emit(f"def {name}({', '.join(list(caps.values()) + args + cells)}):")
        self.indent = 1
        self.env = {x: (caps.get(a, a)) for x, a in ((x, self.env[x]) for x in free)}
        self.env.update(zip(params, args))
        self.cells = cells[0] if execute else None
        self.pairs, self.proj, self.proj_log = {}, {}, []
        try:
            if setup is not None:
                setup(self, args)
            r = self.execute(body) if execute else self.value(body)
            self.emit(f"return {r}")
        finally:
            (self.block, self.indent, self.env, self.cells, self.pairs, self.proj,
             self.proj_log) = saved
        if not captured:
            return name
        return self.atom(f"_partial({name}, {', '.join(captured)})", "f")

    # ------------------------------------------------------------ binders
    def _bind(self, name: str, expr: str):
        old = self.env.get(name)
        self.env[name] = self.atom(expr)
        return old

    def _unbind(self, name: str, old) -> None:
        if old is None:
            del self.env[name]
        else:
            self.env[name] = old

    def _let_chain(self, t, body_fn):
        names, olds = [], []
        try:
            while type(t) is Let:
                group = parallel_codegen.let_group(self, t) if self.fork else None
                if group is not None:  # independent heavy lets: on two threads
                    def bind(name, v):
                        olds.append(self._bind(name, v))
                        names.append(name)

                    parallel_codegen.emit_lets(self, group, bind)
                    t = group[-1].body
                    continue
                v = self.value(t.rhs)
                olds.append(self._bind(t.name, v))
                names.append(t.name)
                t = t.body
            return body_fn(t)
        finally:
            for name, old in zip(reversed(names), reversed(olds)):
                self._unbind(name, old)

    def _beta(self, t: App, body_fn) -> str:
        """(\\x -> body) arg as let x = arg in body."""
        x = self.value(t.arg)
        old = self._bind(t.fn.name, x)
        try:
            return body_fn(t.fn.body)
        finally:
            self._unbind(t.fn.name, old)

    def _case(self, t: Case, body_fn) -> str:
        if type(self.cells) is LocalCells:
            self.cells.settle(self)  # a cell may be added to in one branch only
        s = self.atom(self.value(t.scrut))  # read twice: .side and .value
        result = self.fresh("v")
        self.emit(f"if {s}.side == 0:")
        for side, name, body in ((0, t.lname, t.lbody), (1, t.rname, t.rbody)):
            if side == 1:
                self.emit("else:")
            self.indent += 1
            mark = len(self.proj_log)
            old = self._bind(name, f"{s}.value")
            try:
                r = body_fn(body)
                self.emit(f"{result} = {r}")
            finally:
                self._unbind(name, old)
                self.indent -= 1
                for key in self.proj_log[mark:]:
                    self.proj.pop(key, None)
                del self.proj_log[mark:]
        return result

    # ------------------------------------------------------------ values
    def value(self, t) -> str:
        """Emit the statements computing t; return an expression of its value
        (an atom, or a shallow expression over atoms).

        The left spine of nested pairs and binary primitives (a sum of 10,000
        terms, a chain of lets inlined into one expression) is walked by a loop:
        each node waits on `spine` for the atom of its first operand, then its
        second operand is computed (recursively: that side is shallow), in the
        order of the recursive definition."""
        spine: list = []  # (node, its template, or None for a pair)
        while True:
            if t.loc is not None:
                self.last_loc = t.loc
            cls = type(t)
            if cls is Pair or cls is LPair:
                spine.append((t, None))
                t = t.left
                continue
            if cls is Prim and t.op != "LIT" and t.op != "ILIT":
                template = self._template(t)
                if template is not None and "{1}" in template and type(t.arg) is Pair:
                    spine.append((t, template))
                    t = t.arg.left
                    continue
                r = self._prim_value(t, template)
            else:
                r = self._value(t, cls)
            break
        while spine:
            node, template = spine.pop()
            a = self.atom(r)
            if template is None:
                b = self.atom(self.value(node.right))
                r = self._pair(a, b)
            else:
                b = self.atom(self.value(node.arg.right))
                r = template.format(a, b)
        return r

    def _value(self, t, cls) -> str:
        """value(t) for a node that is not on a left spine."""
        if cls is Var:
            try:
                return self.env[t.name]
            except KeyError:
                raise CompileError(f"unbound variable {t.name!r}", t.loc) from None
        if cls is Let:
            return self._let_chain(t, self.value)
        if cls is Prim:  # a literal (value() handles the others)
            return self._prim(t)
        if cls in (Unit, LUnit, LPairZero, LSumZero):
            return "None"
        if cls is Fst or cls is Snd:
            x = self.atom(self.value(t.expr))
            return self._project(x, 0 if cls is Fst else 1)
        if cls in (Inl, Inr, LInl, LInr):
            x = self.atom(self.value(t.expr))
            return f"_Inj({0 if cls in (Inl, LInl) else 1}, {x})"
        if cls is Case:
            return self._case(t, self.value)
        if cls is Lam:
            return self.local_def([t.name], t.body)
        if cls is App:
            if type(t.fn) is Lam:
                return self._beta(t, self.value)
            f = self.atom(self.value(t.fn))
            x = self.atom(self.value(t.arg))
            return f"{f}({x})"
        if cls is Call:
            return self._call(t)
        if cls is Ann:
            return self.value(t.expr)
        if cls is LFst or cls is LSnd:
            x = self.atom(self.value(t.expr))
            i = 0 if cls is LFst else 1
            known = self.pairs.get(x)
            if known is not None:
                return known[i]
            key = (x, "l", i, t.zero)
            name = self.proj.get(key)
            if name is None:
                z = self.const(t.zero, "L")
                name = self.fresh("v")
                if x == "None":  # a known zero (a cell never added to): no `None[i]`
                    self.emit(f"{name} = _zerov({z})[0]")
                else:
                    self.emit(f"{name} = {x}[{i}] if {x} is not None else _zerov({z})[0]")
                self.proj[key] = name
                self.proj_log.append(key)
            return name
        if cls is LCastL or cls is LCastR:
            x = self.atom(self.value(t.expr))
            z = self.const(t.zero, "L")
            side = 0 if cls is LCastL else 1
            return (f"({x}.value if isinstance({x}, _Inj) and {x}.side == {side} "
                    f"else _zerov({z})[0])")
        if cls in _EVM_NODES:
            return self._action(t)
        if cls is RunEVM:
            return self._run(t)
        return self._extension(t)

    def _pair(self, a: str, b: str) -> str:
        """A local holding the pair (a, b), remembered: a and b are atoms not
        assigned again (generated locals are assigned once, except the cells of a
        run held in locals, which are paired only once their scope has ended)."""
        name = self.fresh("v")
        self.emit(f"{name} = ({a}, {b})")
        self.pairs[name] = (a, b)
        return name

    def _project(self, x: str, i: int) -> str:
        """x[i], folded when x is a known pair, computed once per x and i in a
        straight-line region (the cache is undone at the end of a branch)."""
        known = self.pairs.get(x)
        if known is not None:
            return known[i]
        key = (x, i)
        name = self.proj.get(key)
        if name is None:
            name = self.fresh("v")
            if _LITERAL.match(x):
                # a literal (a zero's None, a real) projected in a branch that
                # never runs (a case on a known injection): operator.getitem
                # fails as `x[i]` would, without the compiler's SyntaxWarning
                self.emit(f"{name} = {self.const(operator.getitem, 'B')}({x}, {i})")
            else:
                self.emit(f"{name} = {x}[{i}]")
            self.proj[key] = name
            self.proj_log.append(key)
        return name

    def _prim(self, t: Prim) -> str:
        op = t.op
        if op == "LIT" or op == "ILIT":
            return self.literal(t.const)
        return self._prim_value(t, self._template(t))

    def _template(self, t: Prim):
        """The inline template of t's primitive (None: it is called), its helper
        bound as a local of the function."""
        prim = PRIMITIVES.get(t.op)
        if prim is None or prim.evaluate is None:
            raise CompileError(f"no evaluation for primitive {t.op}", t.loc)
        template = prim.inline
        if template is not None:
            helper = template.split("(", 1)[0]
            if helper in LOCAL_HELPERS:
                self.block.helpers.add(helper)
        return template

    def _prim_value(self, t: Prim, template) -> str:
        binary = template is not None and "{1}" in template
        if template is not None:
            if binary and type(t.arg) is Pair:
                a = self.atom(self.value(t.arg.left))
                b = self.atom(self.value(t.arg.right))
                return template.format(a, b)
            x = self.atom(self.value(t.arg))
            if binary:
                return template.format(f"{x}[0]", f"{x}[1]")
            return template.format(x)
        fn = self.const(PRIMITIVES[t.op].evaluate, "P")
        return f"{fn}({self.atom(self.value(t.arg))})"

    def _call(self, t: Call) -> str:
        d = self.defs.get(t.name)
        if d is None:
            raise CompileError(f"call of an unknown def {t.name!r}", t.loc)
        key = ("def", t.name)
        fn = self.functions.get(key)
        if fn is None:
            fn = self.function([p.name for p in d.params], d.body, "d")
            self.functions[key] = fn
        args = [self.atom(self.value(a)) for a in t.args]
        return f"{fn}({', '.join(args)})"

    def _run(self, t: RunEVM) -> str:
        env = self.atom(self.value(t.env))
        if not self.inline:
            m = self.atom(self.value(t.m))
            out = self.fresh("v")
            self.emit(f"{out} = _E.run({m}, _e2c({env}))")
            return f"({out}[0], _c2e({out}[1]))"
        parts = self._known_tuple(env)
        if parts is not None:
            mark, indent, pmark = len(self.block.lines), self.indent, len(self.proj_log)
            try:
                return self._run_in_locals(t, parts)
            except _NeedList:  # forget the lines (and the projections) of the attempt
                del self.block.lines[mark:]
                self.indent = indent
                for key in self.proj_log[pmark:]:
                    self.proj.pop(key, None)
                del self.proj_log[pmark:]
        cells = self.fresh("cells")
        self.emit(f"{cells} = _e2c({env})")
        r = self._execute_on(cells, t.m)
        return f"({r}, _c2e({cells}))"

    def _execute_on(self, cells, m) -> str:
        """Execute the action m on `cells` (a list's name or LocalCells): its result."""
        saved = self.cells
        self.cells = cells
        try:
            return self.atom(self.execute(m))
        finally:
            self.cells = saved

    def _known_tuple(self, x: str):
        """The components of the nested tuple (c0, (c1, ... None)) held in x, if
        this generator built it; else None."""
        parts = []
        while x != "None":
            pair = self.pairs.get(x)
            if pair is None:
                return None
            parts.append(pair[0])
            x = pair[1]
        return parts

    def _run_in_locals(self, t: RunEVM, parts: list[str]) -> str:
        cells = LocalCells()
        for part in parts:
            cells.push(self, part)
        r = self._execute_on(cells, t.m)
        out = "None"
        for name in reversed(cells.names):
            out = self.atom(f"({cells.read(self, name)}, {out})")
        return f"({r}, {out})"

    def _action(self, t) -> str:
        """A monadic term as a value: an action."""
        if self.inline:
            return self.local_def([], t, "m", execute=True)
        cls = type(t)
        if cls is PureEVM:
            return f"_E.pure({self.atom(self.value(t.expr))})"
        if cls is BindEVM:
            m = self.atom(self.value(t.m))
            k = self.atom(self.value(t.k))
            return f"_E.bind({m}, _partial(_kwrap, {k}))"
        if cls is ThenEVM:
            b = self.atom(self.value(t.second))
            a = self.atom(self.value(t.first))
            return f"_E.then({a}, {b})"
        if cls is AddEVM:
            return f"_E.add({t.level!r}, {self.atom(self.value(t.val))})"
        if cls is ScopeEVM:
            i = self.atom(self.value(t.init))
            m = self.atom(self.value(t.m))
            return f"_E.scope({i}, {m})"
        raise CompileError(f"not a monadic node: {cls.__name__}", t.loc)

    # ------------------------------------------------------------ execution (inline mode)
    def execute(self, t) -> str:
        """Emit the statements running the action t on the cells `self.cells`;
        return an expression of its result.

        The spine of a backward pass, `bind (scope 0 (bind (scope 0 ...)) k) k'`
        (a bind's or scope's action is the first thing it runs), and the second
        actions of a `>>` chain are walked by a loop: a bind or scope waits on
        `pending` for the result of its action, then finishes as the recursive
        definition would."""
        pending: list = []  # (bind or scope node, the cell pushed or _LIST, cells)
        try:
            while True:
                cls = type(t)
                cells = self.cells
                if cls is BindEVM:
                    pending.append((t, None, cells))
                    t = t.m
                    continue
                if cls is ScopeEVM:
                    i = self.atom(self.value(t.init))
                    if type(cells) is LocalCells:
                        pending.append((t, cells.push(self, i), cells))
                    else:
                        self.emit(f"{cells}.append({i})")
                        pending.append((t, _LIST, cells))
                    t = t.m
                    continue
                if cls is ThenEVM:
                    if self.fork and id(t) not in self.then_seen:
                        segments = parallel_codegen.then_chain(self, t)
                        if segments is not None:  # heavy actions: on two threads
                            if type(cells) is LocalCells:
                                raise _NeedList  # a forked half adds to a list
                            r = parallel_codegen.emit_seq(self, segments, cells)
                            break
                    first = self.execute(t.first)
                    if not _ATOM.match(first) and first != "None":
                        self.emit(first)
                    t = t.second
                    continue
                r = self._execute(t, cls, cells)
                break
            while pending:
                node, g, cells = pending[-1]
                if g is None:  # a bind
                    pending.pop()
                    r = self._bind_rest(node, r, cells)
                elif g is _LIST:
                    pending.pop()
                    r = self.atom(r)
                    out = self.fresh("v")
                    self.emit(f"{out} = {cells}.pop()")
                    r = self._pair(out, r)
                else:
                    try:
                        r = self.atom(r)
                        g = cells.read(self, g)  # not assigned again: its scope has ended
                    finally:
                        cells.pop()
                        pending.pop()
                    r = self._pair(g, r)
            return r
        except BaseException:
            for _node, g, cells in reversed(pending):  # the cells of the scopes left
                if g is not None and g is not _LIST:
                    cells.pop()
            raise

    def _bind_rest(self, t: BindEVM, x: str, cells) -> str:
        """The rest of `bind m k` once m has run with result x."""
        k = t.k
        if type(k) is Lam:
            old = self._bind(k.name, x)
            try:
                return self.execute(k.body)
            finally:
                self._unbind(k.name, old)
        if type(cells) is LocalCells:
            raise _NeedList
        x = self.atom(x)
        f = self.atom(self.value(k))
        return f"{self.atom(f'{f}({x})')}({cells})"

    def _execute(self, t, cls, cells) -> str:
        """execute(t) for an action that is not a bind, scope or `>>`."""
        if cls is PureEVM:
            return self.value(t.expr)
        if cls is AddEVM:
            if not isinstance(t.level, int) or isinstance(t.level, bool) or t.level < 0:
                raise CompileError(f"add: level must be a non-negative int, got {t.level!r}",
                                   t.loc)
            v = self.atom(self.value(t.val))
            if type(cells) is LocalCells:
                if t.level >= len(cells.names):
                    raise _NeedList  # the list reports the bad level at run time
                cells.add(self, t.level, v)
                return "None"
            self.emit(f"{cells}[{t.level}] = _padd({v}, {cells}[{t.level}])")
            return "None"
        if cls is Let:
            return self._let_chain(t, self.execute)
        if cls is Case:
            return self._case(t, self.execute)
        if cls is Ann:
            return self.execute(t.expr)
        if cls is App and type(t.fn) is Lam:
            return self._beta(t, self.execute)
        if type(cells) is LocalCells:
            raise _NeedList
        a = self.atom(self.value(t))
        return f"{a}({cells})"

    # ------------------------------------------------------------ extensions
    def _extension(self, t) -> str:
        vec = tables.VECTORISE.get(type(t)) \
            if self.vectorise and id(t) not in self.rule_only else None
        if vec is not None:
            out = vec(self, t)  # numpy code (chad/compile/vectorise.py), or None
            if out is not None:
                return out
        return self.eval_rule(t)

    def eval_rule(self, t, known: dict | None = None) -> str:
        """The node t by its compile rule; with the "eval" rule, `known` maps
        the id of a sub-term already computed to its atom."""
        how = tables.COMPILE.get(type(t))
        if how is None:
            raise CompileError(f"no compile rule for {type(t).__name__}", t.loc)
        if how != "eval":
            return how(self, t)
        rule = tables.EVAL.get(type(t))
        if rule is None:
            raise CompileError(f"no evaluation rule for {type(t).__name__}", t.loc)
        kids = []
        for child, bound in binders_of(t):
            if bound:
                kids.append(self.local_def(list(bound), child))
            elif known is not None and id(child) in known:
                kids.append(known[id(child)])
            else:
                kids.append(self.atom(self.value(child)))
        ids = self.const(tuple(id(c) for c in children(t)), "I")
        evm = "_E"
        args = ", ".join([self.const(rule, "R"), self.const(t, "N"), ids, evm] + kids)
        return f"_run_rule({args})"
