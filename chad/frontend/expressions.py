"""Translating Python expressions into chad text (as position-tagged fragments).

Each Python expression becomes an `Ex`: its chad text and its front-end type
(R, Z, Bool, `chad.Array[T]`, tuples). Types are propagated here, as Python's
own arithmetic would: an int meets a float and becomes one (`toreal`, or a real
literal), `/` is always real division, `//` and `%` follow Python's floor
semantics, `and`/`or` short-circuit (translated to `if`), comparisons may
chain. Every compound piece is parenthesised, so chad's precedence never
changes the meaning (e.g. chad's `-x ** 2.0` is `(-x) ** 2.0`, Python's is not).

Anything outside the subset raises `UnsupportedError` at the node's Python
position, with what to write instead. Calls are calls.py's.
"""

from __future__ import annotations

import ast
import builtins
import types

import numpy as np

from chad.types import BOOL, ArrayT, R, Z

from .annotations import TupleT, python_name
from .calls import CallTranslator
from .emit import Frag, join
from .errors import FrontendTypeError, UnsupportedError
from .ex import Ex, atomic, int_constant, int_literal, real_literal
from .scope import Dropped, Frame, Macro, Var


_NOT_SUPPORTED = {
    "NamedExpr": "the walrus operator := is not supported: assign on a line of its own",
    "Dict": "dicts are not supported: use a tuple or a chad.Array",
    "Set": "sets are not supported: use a tuple or a chad.Array",
    "DictComp": "dict comprehensions are not supported: use a list comprehension",
    "SetComp": "set comprehensions are not supported: use a list comprehension",
    "JoinedStr": "strings are not supported (chad computes with numbers)",
    "Await": "await is not supported",
    "Yield": "generators (yield) are not supported: return a value",
    "YieldFrom": "generators (yield) are not supported: return a value",
    "Starred": "*-unpacking is not supported: write the elements out",
    "Slice": "slices are not supported: build the part with a comprehension "
             "[a[i] for i in range(lo, hi)]",
}


class ExprTranslator(CallTranslator):
    """The expression half of the translator (statements.py adds statements)."""

    def __init__(self, src, fn, names, callee):
        self.src = src  # source.SourceFile
        self.fn = fn  # the Python function (its globals and closure)
        self.names = names  # names.Names
        self.callee = callee  # object -> Signature | None (decorated functions)
        self.expanding: list[int] = []  # macros being expanded (no recursion)

    # ------------------------------------------------------------ helpers

    def loc(self, node):
        return self.src.loc(node) if node is not None else None

    def err(self, node, message: str, cls=UnsupportedError):
        raise cls(message, self.loc(node), self.src.text)

    def F(self, node, *parts) -> Frag:
        return Frag(list(parts), self.loc(node))

    def coerce(self, ex: Ex, ty, node, what: str) -> Ex:
        """ex as a value of type ty (an int becomes a float where one is expected)."""
        if ex.ty == ty:
            return ex
        if ex.ty == Z and ty == R:
            if ex.lit is not None:
                if abs(ex.lit) > 2 ** 1023:
                    self.err(node, f"{what}: the integer is too large for a float")
                return Ex(self.F(node, real_literal(float(ex.lit))), R)
            return Ex(self.F(node, "(toreal ", ex.frag, ")"), R)
        if isinstance(ty, TupleT) and ex.parts is not None and len(ex.parts) == len(ty.elems):
            parts = tuple(self.coerce(p, t, node, what) for p, t in zip(ex.parts, ty.elems))
            return self.tuple_ex(node, parts)
        self.err(node, f"{what}: expected {python_name(ty)}, found {python_name(ex.ty)}",
                 FrontendTypeError)

    def tuple_ex(self, node, parts) -> Ex:
        return Ex(self.F(node, "(", *join(", ", [p.frag for p in parts]), ")"),
                  TupleT(tuple(p.ty for p in parts)), parts=tuple(parts))

    def unify(self, a: Ex, b: Ex, node, what: str) -> tuple[Ex, Ex]:
        if a.ty == b.ty:
            return a, b
        if {a.ty, b.ty} == {R, Z}:
            return self.coerce(a, R, node, what), self.coerce(b, R, node, what)
        if isinstance(a.ty, TupleT) and isinstance(b.ty, TupleT) and a.parts and b.parts \
                and len(a.parts) == len(b.parts):
            pa, pb = zip(*(self.unify(x, y, node, what) for x, y in zip(a.parts, b.parts)))
            return self.tuple_ex(node, pa), self.tuple_ex(node, pb)
        self.err(node, f"{what}: one side is {python_name(a.ty)}, the other "
                       f"{python_name(b.ty)}", FrontendTypeError)

    def numeric(self, ex: Ex, node, what: str) -> Ex:
        if ex.ty in (R, Z):
            return ex
        if isinstance(ex.ty, ArrayT):
            self.err(node, f"{what} on a whole array is not supported: write a comprehension, "
                           "e.g. [a[i] + b[i] for i in range(len(a))]")
        self.err(node, f"{what} needs a float or an int, found {python_name(ex.ty)}",
                 FrontendTypeError)

    def real(self, ex: Ex, node, what: str) -> Ex:
        return self.coerce(self.numeric(ex, node, what), R, node, what)

    def integer(self, ex: Ex, node, what: str) -> Ex:
        if ex.ty != Z:
            self.err(node, f"{what} must be an int, found {python_name(ex.ty)}", FrontendTypeError)
        return ex

    def boolean(self, ex: Ex, node, what: str) -> Ex:
        if ex.ty != BOOL:
            hint = " (write x != 0 or x > 0.0)" if ex.ty in (R, Z) else ""
            self.err(node, f"{what} must be a bool, found {python_name(ex.ty)}{hint}",
                     FrontendTypeError)
        return ex

    def let(self, node, name: str, rhs, body) -> Frag:
        return self.F(node, "(let ", name, " = ", rhs, " in ", body, ")")

    def shared(self, node, ex: Ex, use) -> Ex:
        """use(Ex of a variable) with ex bound to a fresh name first (unless
        ex is already a name or a literal), so that it is evaluated once."""
        if atomic(ex.frag):
            return use(ex)
        t = self.names.temp()
        out = use(Ex(self.F(node, t), ex.ty))
        return Ex(self.let(node, t, ex.frag, out.frag), out.ty, parts=None)

    # ------------------------------------------------------------ names and constants

    def global_value(self, name: str, node):
        """The value of a name that is not a local: the closure, the module's
        globals, then the builtins."""
        code = self.fn.__code__
        if name in code.co_freevars:
            cell = self.fn.__closure__[code.co_freevars.index(name)]
            try:
                return cell.cell_contents
            except ValueError:
                self.err(node, f"{name} is not defined yet where the function is decorated")
        if name in self.fn.__globals__:
            return self.fn.__globals__[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        self.err(node, f"unknown name {name}: it is not a parameter, a local variable or "
                       "a module-level constant", FrontendTypeError)

    def resolve(self, node, frame: Frame | None = None):
        """The Python object an ast Name or Attribute chain names (not a local)."""
        if isinstance(node, ast.Name):
            if frame is not None and frame.lookup(node.id) is not None:
                self.err(node, f"{node.id} is a local variable here, not a module or a function "
                               "(for the length of an array write len(a))")
            return self.global_value(node.id, node)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value, frame)
            if not isinstance(base, types.ModuleType):
                self.err(node, f"attribute access .{node.attr} is supported on modules only "
                               "(math.pi, np.exp); for the length of an array write len(a)")
            try:
                return getattr(base, node.attr)
            except AttributeError:
                self.err(node, f"module {base.__name__} has no attribute {node.attr}")
        self.err(node, f"{ast.unparse(node)} is not a name")

    def constant(self, value, node, name: str) -> Ex:
        """A value closed over (or a literal) as a chad literal, through repr only."""
        if isinstance(value, (bool, np.bool_)):
            return Ex(self.F(node, "true" if value else "false"), BOOL)
        if isinstance(value, (int, np.integer)):
            if abs(int(value)) >= 10 ** 4000:
                self.err(node, f"{name} is an integer too long for a literal")
            return Ex(self.F(node, int_literal(int(value))), Z, lit=int(value))
        if isinstance(value, (float, np.floating)):
            return Ex(self.F(node, real_literal(float(value))), R)
        if isinstance(value, tuple) and len(value) >= 2:
            return self.tuple_ex(node, [self.constant(v, node, name) for v in value])
        if self.callee(value) is not None or isinstance(value, types.FunctionType):
            self.err(node, f"{name} is a function: call it, f(...); functions are not values here")
        self.err(node, f"{name} is a value of type {type(value).__name__}, which a chad "
                       "function cannot use as a constant (only float, int and bool, and tuples of them): pass "
                       "it as an argument instead")

    # ------------------------------------------------------------ dispatch

    def expr(self, node, frame: Frame) -> Ex:
        method = getattr(self, "x_" + type(node).__name__, None)
        if method is None:
            kind = type(node).__name__
            self.err(node, _NOT_SUPPORTED.get(kind, f"this expression ({kind}) is not supported"))
        return method(node, frame)

    def x_Constant(self, node, frame):
        v = node.value
        if isinstance(v, (bool, int, float)):
            return self.constant(v, node, repr(v))
        if v is None:
            self.err(node, "None is not supported: every value is a float, int, bool, tuple or "
                           "array")
        self.err(node, f"a {type(v).__name__} constant is not supported "
                       "(chad computes with float, int and bool)")

    def x_Name(self, node, frame):
        entry = frame.lookup(node.id)
        if isinstance(entry, Var):
            return Ex(self.F(node, entry.name), entry.ty)
        if isinstance(entry, Macro):
            self.err(node, f"{node.id} is a local function: call it, {node.id}(...); it cannot be "
                           "used as a value")
        if isinstance(entry, Dropped):
            self.err(node, entry.reason, FrontendTypeError)
        return self.constant(self.global_value(node.id, node), node, node.id)

    def x_Attribute(self, node, frame):
        return self.constant(self.resolve(node, frame), node, ast.unparse(node))

    # ------------------------------------------------------------ operators

    def x_BinOp(self, node, frame):
        op = type(node.op).__name__
        a = self.expr(node.left, frame)
        b = self.expr(node.right, frame)
        sym = {"Add": "+", "Sub": "-", "Mult": "*", "Div": "/", "FloorDiv": "//", "Mod": "%",
               "Pow": "**"}.get(op)
        if sym is None:
            extra = " (for a dot product write np.dot(a, b) or sum(a[i] * b[i] for i in " \
                    "range(len(a))))" if op == "MatMult" else ""
            symbol = {"MatMult": "@", "BitAnd": "&", "BitOr": "|", "BitXor": "^",
                      "LShift": "<<", "RShift": ">>"}.get(op, op)
            self.err(node, f"the operator {symbol} is not supported{extra}")
        a = self.numeric(a, node.left, f"the operator {sym}")
        b = self.numeric(b, node.right, f"the operator {sym}")
        if op == "Pow":
            return self.power(node, a, b)
        if op in ("Add", "Sub", "Mult") and a.ty == Z and b.ty == Z:
            return Ex(self.F(node, "(", a.frag, f" {sym} ", b.frag, ")"), Z)
        if op in ("Add", "Sub", "Mult", "Div"):
            a, b = self.real(a, node.left, sym), self.real(b, node.right, sym)
            return Ex(self.F(node, "(", a.frag, f" {sym} ", b.frag, ")"), R)
        if a.ty == Z and b.ty == Z:
            fn = "div" if op == "FloorDiv" else "mod"
            return Ex(self.F(node, f"{fn}(", a.frag, ", ", b.frag, ")"), Z)
        a, b = self.real(a, node.left, sym), self.real(b, node.right, sym)
        if op == "FloorDiv":  # float // float is a float, floor(a / b)
            return Ex(self.F(node, "(toreal (floor (", a.frag, " / ", b.frag, ")))"), R)
        # float % float: a - b * floor(a / b), the sign of b (as Python)
        return self.shared(node, a, lambda x: self.shared(node, b, lambda y: Ex(self.F(
            node, "(", x.frag, " - (", y.frag, " * (toreal (floor (", x.frag, " / ", y.frag,
            ")))))"),
            R)))

    def power(self, node, a: Ex, b: Ex) -> Ex:
        if a.ty == Z and b.ty == Z:
            if b.lit is not None and 0 <= b.lit <= 8:
                k = b.lit
                if k == 0:
                    return Ex(self.F(node, "1"), Z)
                return self.shared(node, a, lambda x: Ex(self.F(
                    node, "(", *join(" * ", [x.frag] * k), ")"), Z))
            self.err(node, "int ** int is supported for a literal exponent 0..8 only: "
                           "write float(n) ** k for a float result")
        a = self.real(a, node.left, "**")
        return Ex(self.F(node, "(", a.frag, " ** ", b.frag, ")"), R)

    def x_UnaryOp(self, node, frame):
        a = self.expr(node.operand, frame)
        match node.op:
            case ast.USub():
                a = self.numeric(a, node.operand, "unary -")
                return Ex(self.F(node, "(- ", a.frag, ")"), a.ty,
                          lit=-a.lit if a.lit is not None else None)
            case ast.UAdd():
                return self.numeric(a, node.operand, "unary +")
            case ast.Not():
                a = self.boolean(a, node.operand, "the operand of not")
                return Ex(self.F(node, "(not ", a.frag, ")"), BOOL)
        self.err(node, "the operator ~ is not supported")

    def x_BoolOp(self, node, frame):
        values = [self.boolean(self.expr(v, frame), v, "an operand of and/or")
                  for v in node.values]
        out = values[-1]
        for v in reversed(values[:-1]):  # short-circuit, as Python
            if isinstance(node.op, ast.And):
                out = Ex(self.F(node, "(if ", v.frag, " then ", out.frag, " else false)"), BOOL)
            else:
                out = Ex(self.F(node, "(if ", v.frag, " then true else ", out.frag, ")"), BOOL)
        return out

    def x_Compare(self, node, frame):
        ops = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
               ast.NotEq: "!="}
        operands = [node.left] + list(node.comparators)
        for op in node.ops:
            if type(op) not in ops:
                self.err(node, f"the comparison {type(op).__name__} is not supported "
                               "(only < <= > >= == != on numbers)")
        exs = [self.numeric(self.expr(o, frame), o, "a comparison") for o in operands]

        def compare(i: int, left: Ex) -> Ex:
            right = exs[i + 1]
            a, b = self.unify(left, right, node, "a comparison")
            test = Ex(self.F(node, "(", a.frag, f" {ops[type(node.ops[i])]} ", b.frag, ")"), BOOL)
            if i + 1 == len(node.ops):
                return test
            # a < b < c: b evaluated once, c only when a < b (as Python)
            rest = compare(i + 1, right)
            return Ex(self.F(node, "(if ", test.frag, " then ", rest.frag, " else false)"), BOOL)

        lets = []
        for k in range(1, len(exs) - 1):  # a middle operand is evaluated once
            if not atomic(exs[k].frag):
                t = self.names.temp()
                lets.append((t, exs[k].frag))
                exs[k] = Ex(self.F(operands[k], t), exs[k].ty)
        out = compare(0, exs[0])
        for t, rhs in reversed(lets):
            out = Ex(self.let(node, t, rhs, out.frag), BOOL)
        return out

    def x_IfExp(self, node, frame):
        c = self.boolean(self.expr(node.test, frame), node.test, "the condition")
        a, b = self.unify(self.expr(node.body, frame), self.expr(node.orelse, frame), node,
                          "the two branches of the if-expression")
        return Ex(self.F(node, "(if ", c.frag, " then ", a.frag, " else ", b.frag, ")"), a.ty)

    # ------------------------------------------------------------ tuples and arrays

    def x_Tuple(self, node, frame):
        if len(node.elts) < 2:
            self.err(node, "tuples of fewer than two elements are not supported")
        return self.tuple_ex(node, [self.expr(e, frame) for e in node.elts])

    def x_List(self, node, frame):
        if not node.elts:
            self.err(node, "an empty list is not supported (its element type is unknown): "
                           "build it with a comprehension over range(0)")
        elems = [self.expr(e, frame) for e in node.elts]
        ty = R if any(e.ty == R for e in elems) and all(e.ty in (R, Z) for e in elems) \
            else elems[0].ty
        elems = [self.coerce(e, ty, n, "an element of the list") for e, n in zip(elems, node.elts)]
        return Ex(self.F(node, "[", *join(", ", [e.frag for e in elems]), "]"), ArrayT(ty))

    def x_Subscript(self, node, frame):
        a = self.expr(node.value, frame)
        index = node.slice
        if isinstance(index, ast.Slice):
            self.err(index, _NOT_SUPPORTED["Slice"])
        if isinstance(index, ast.Tuple) and isinstance(a.ty, ArrayT):  # a[i, j] = a[i][j]
            for i in index.elts:
                a = self.index(node, a, i, frame)
            return a
        return self.index(node, a, index, frame)

    def index(self, node, a: Ex, index, frame) -> Ex:
        if isinstance(a.ty, TupleT):
            k = int_constant(index)
            n = len(a.ty.elems)
            if k is None or not -n <= k < n:
                self.err(index, f"a tuple of {n} elements is indexed by a literal 0..{n - 1}")
            k %= n
            text: object = a.frag
            for _ in range(k):
                text = self.F(node, "(snd ", text, ")")
            if k < n - 1:
                text = self.F(node, "(fst ", text, ")")
            return Ex(text, a.ty.elems[k])
        if not isinstance(a.ty, ArrayT):
            self.err(node, f"only arrays and tuples can be indexed, not {python_name(a.ty)}",
                     FrontendTypeError)
        k = int_constant(index)
        if k is not None and k < 0:  # a[-1]
            return self.shared(node, a, lambda x: Ex(self.F(
                node, "(", x.frag, " ! ((length ", x.frag, f") - {-k}))"), a.ty.elem))
        i = self.integer(self.expr(index, frame), index, "an array index")
        return Ex(self.F(node, "(", a.frag, " ! ", i.frag, ")"), a.ty.elem)

    def x_ListComp(self, node, frame):
        return self.comprehension(node, frame)

    def x_GeneratorExp(self, node, frame):
        self.err(node, "a generator expression is supported only as the argument of sum(...): "
                       "write a list comprehension [...]")

    def comprehension(self, node, frame) -> Ex:
        if len(node.generators) != 1:
            self.err(node, "a comprehension with several for clauses is not supported: "
                           "nest them, [[... for j in range(m)] for i in range(n)]")
        gen = node.generators[0]
        if gen.ifs:
            self.err(gen.ifs[0], "a condition in a comprehension is not supported (the length "
                                 "must be known): use an if-expression, [x if c else 0.0 for ...]")
        if gen.is_async:
            self.err(node, "async comprehensions are not supported")
        inner = Frame(frame, fresh=True)
        rng = self.range_args(gen.iter, frame)
        if rng is not None:
            start, count = rng
            if not isinstance(gen.target, ast.Name):
                self.err(gen.target, "the variable of a comprehension over range is one name")
            name = self.bind(inner, gen.target.id, Z)
            if start is None:
                body = self.expr(node.elt, inner)
                return Ex(self.F(node, "(build ", count.frag, " (\\", name, " -> ", body.frag,
                                 "))"), ArrayT(body.ty))
            k = self.names.temp()

            def build(s: Ex) -> Ex:
                body = self.expr(node.elt, inner)
                return Ex(self.F(node, "(build ", count.frag, " (\\", k, " -> ",
                                 self.let(node, name, self.F(node, "(", k, " + ", s.frag, ")"),
                                          body.frag), "))"), ArrayT(body.ty))

            return self.shared(node, start, build)
        seq = self.expr(gen.iter, frame)
        if not isinstance(seq.ty, ArrayT):
            self.err(gen.iter, "a comprehension runs over range(...) or an array, not "
                               f"{python_name(seq.ty)}")
        if isinstance(gen.target, ast.Name):  # map (\x -> e) a
            x = self.bind(inner, gen.target.id, seq.ty.elem)
            body = self.expr(node.elt, inner)
            return Ex(self.F(node, "(map (\\", x, " -> ", body.frag, ") ", seq.frag, ")"),
                      ArrayT(body.ty))
        x = self.names.temp()
        binds = self.bind_target(gen.target, Ex(self.F(gen.target, x), seq.ty.elem), inner)
        body = self.expr(node.elt, inner)
        return Ex(self.F(node, "(map (\\", x, " -> ", binds(body.frag), ") ", seq.frag, ")"),
                  ArrayT(body.ty))

    def range_args(self, node, frame):
        """(start Ex or None, count Ex) when node is range(n) or range(a, b)."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and frame.lookup(node.func.id) is None
                and self.global_value(node.func.id, node.func) is builtins.range):
            return None
        if node.keywords or not 1 <= len(node.args) <= 2:
            self.err(node, "range takes one or two arguments here (a step is not supported)")
        args = [self.integer(self.expr(a, frame), a, "an argument of range") for a in node.args]
        if len(args) == 1:
            return None, args[0]
        start, stop = args
        return start, Ex(self.F(node, "(", stop.frag, " - ", start.frag, ")"), Z)

    # ------------------------------------------------------------ binding

    def bind(self, frame: Frame, ident: str, ty) -> str:
        """A chad name for the Python local `ident` in frame, now of type ty."""
        base = self.names.local(ident)
        name = self.names.fresh(base) if frame.fresh else base
        frame.vars[ident] = Var(name, ty)
        return name

    def bind_target(self, target, value: Ex, frame: Frame):
        """Bind an assignment target (a name or a nested tuple of names) to value
        (whose text must be a name if the target is a tuple): returns a function
        wrapping the body in the lets."""
        if isinstance(target, ast.Name):
            name = self.bind(frame, target.id, value.ty)
            return lambda body: self.let(target, name, value.frag, body)
        if isinstance(target, (ast.Tuple, ast.List)):
            if any(isinstance(e, ast.Starred) for e in target.elts):
                self.err(target, "*-unpacking is not supported: name every element")
            if not isinstance(value.ty, TupleT) or len(value.ty.elems) != len(target.elts):
                what = python_name(value.ty)
                hint = " (index an array: a[0], a[1])" if isinstance(value.ty, ArrayT) else ""
                self.err(target, f"cannot unpack {what} into {len(target.elts)} names{hint}",
                         FrontendTypeError)
            if all(isinstance(e, ast.Name) for e in target.elts):  # let (x, y, z) = e in
                names = [self.bind(frame, e.id, ty) for e, ty in zip(target.elts,
                                                                     value.ty.elems)]
                return lambda body: self.F(target, "(let (", ", ".join(names), ") = ",
                                           value.frag, " in ", body, ")")
            t = self.names.temp()
            wrappers = []
            rest: object = self.F(target, t)
            n = len(target.elts)
            for k, (elt, ty) in enumerate(zip(target.elts, value.ty.elems)):
                part = rest if k == n - 1 else self.F(target, "(fst ", rest, ")")
                wrappers.append(self.bind_target(elt, Ex(part, ty), frame))
                rest = self.F(target, "(snd ", rest, ")")

            def wrap(body):
                for w in reversed(wrappers):
                    body = w(body)
                return self.let(target, t, value.frag, body)

            return wrap
        kind = {"Subscript": "an element a[i] = ...", "Attribute": "an attribute x.a = ..."}.get(
            type(target).__name__, type(target).__name__)
        self.err(target, f"assignment to {kind} is not supported (values are immutable): build a "
                         "new value, e.g. b = [v if j == i else a[j] for j in range(len(a))]")

    def function_body(self, fnode, frame) -> Ex:  # statements.py
        raise NotImplementedError
