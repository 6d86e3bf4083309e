"""Translating calls: of decorated functions (def calls), of the math/numpy
functions and builtins the front end knows (library.py), and of lambdas and
nested defs, which are expanded where they are called (late binding, as
Python's closures)."""

from __future__ import annotations

import ast

from chad.types import ArrayT, R, Z

from .annotations import TupleT, annotation_type, python_name
from .emit import join
from .errors import FrontendTypeError
from .ex import MACRO_IDS, Ex, Signature
from .library import BUILTINS, DERIVED, REFUSED, UNARY
from .scope import Frame, Macro, Var


class CallTranslator:
    """The calls half of the expression translator (expressions.py)."""

    def x_Lambda(self, node, frame):
        self.err(node, "a lambda is supported only when assigned to a name (f = lambda x: ...) "
                       "or called directly")

    def x_Call(self, node, frame):
        func = node.func
        if isinstance(func, ast.Lambda):
            return self.expand(Macro(func, frame.fid, next(MACRO_IDS)), node, frame)
        if isinstance(func, ast.Name):
            entry = frame.lookup(func.id)
            if isinstance(entry, Macro):
                return self.expand(entry, node, frame)
            if isinstance(entry, Var):
                self.err(func, f"{func.id} is a {python_name(entry.ty)}, not a function")
        if not isinstance(func, (ast.Name, ast.Attribute)):
            self.err(func, "only named functions can be called")
        obj = self.resolve(func, frame)
        name = ast.unparse(func)
        if any(isinstance(a, ast.Starred) for a in node.args):
            self.err(node, "*args in a call is not supported: pass the arguments one by one")
        sig = self.callee(obj)
        if sig is not None:
            return self.call_def(node, sig, frame, name)
        if node.keywords:
            self.err(node.keywords[0], f"keyword arguments are not supported in a call to {name}")
        try:
            unary, derived = UNARY.get(obj), DERIVED.get(obj)
            builtin, refused = BUILTINS.get(obj), REFUSED.get(obj)
        except TypeError:  # an unhashable object
            unary = derived = builtin = refused = None
        if unary is not None:
            (arg,) = self.args(node, frame, 1, name)
            return self.elementwise(node, unary, arg, name)
        if derived is not None:
            return self.derived(node, derived, frame, name)
        if builtin is not None:
            return self.builtin(node, builtin, frame, name)
        if refused is not None:
            self.err(node, refused)
        self.err(func, f"call to an unknown function {name}: only functions decorated with "
                       "@chad.function, math/numpy elementwise functions (math.sin, np.exp, ...), "
                       "abs, max, min, len, sum, float and int can be called (decorate "
                       f"{name} with @chad.function if it is yours)")

    def args(self, node, frame, n: int, name: str) -> list[Ex]:
        if len(node.args) != n:
            self.err(node, f"{name} takes {n} argument(s) here, got {len(node.args)}")
        return [self.expr(a, frame) for a in node.args]

    def call_def(self, node, sig: Signature, frame, name: str) -> Ex:
        args = list(node.args)
        by_name = {p: i for i, (p, _t) in enumerate(sig.params)}
        slots: list = args + [None] * (len(sig.params) - len(args))
        if len(args) > len(sig.params):
            self.err(node, f"{name} takes {len(sig.params)} argument(s), got {len(args)}")
        for kw in node.keywords:
            if kw.arg is None or kw.arg not in by_name or slots[by_name[kw.arg]] is not None:
                self.err(kw, f"{name} has no parameter {kw.arg} (or it is given twice)")
            slots[by_name[kw.arg]] = kw.value
        if any(s is None for s in slots):
            self.err(node, f"{name} takes {len(sig.params)} argument(s): "
                           + ", ".join(p for p, _t in sig.params))
        exs = [self.coerce(self.expr(a, frame), t, a, f"argument {p} of {name}")
               for a, (p, t) in zip(slots, sig.params)]
        return Ex(self.F(node, sig.name, "(", *join(", ", [e.frag for e in exs]), ")"),
                  sig.result)

    def elementwise(self, node, prim: str, arg: Ex, name: str) -> Ex:
        if isinstance(arg.ty, ArrayT):  # numpy's elementwise application
            x = self.names.temp()
            inner = self.elementwise(node, prim, Ex(self.F(node, x), arg.ty.elem), name)
            return Ex(self.F(node, "(map (\\", x, " -> ", inner.frag, ") ", arg.frag, ")"),
                      ArrayT(inner.ty))
        if prim == "abs" and arg.ty == Z:
            return Ex(self.F(node, "(abs ", arg.frag, ")"), Z)
        arg = self.real(arg, node, name)
        return Ex(self.F(node, f"({prim} ", arg.frag, ")"), R)

    def derived(self, node, how: str, frame, name: str) -> Ex:
        if how in ("max", "min"):
            a, b = self.args(node, frame, 2, name)
            return self.maxmin(node, how, self.real(a, node, name), self.real(b, node, name))
        if how == "pow":
            a, b = self.args(node, frame, 2, name)
            a, b = self.real(a, node, name), self.real(b, node, name)
            return Ex(self.F(node, "(", a.frag, " ** ", b.frag, ")"), R)
        if how == "dot":
            a, b = self.args(node, frame, 2, name)
            for x in (a, b):
                if x.ty != ArrayT(R):
                    self.err(node, f"{name} takes two chad.Array[float] here, found "
                                   f"{python_name(x.ty)}", FrontendTypeError)
            k = self.names.temp()
            return self.shared(node, a, lambda x: self.shared(node, b, lambda y: Ex(self.F(
                node, "(sum (build (length ", x.frag, ") (\\", k, " -> (", x.frag, " ! ", k,
                ") * (", y.frag, " ! ", k, "))))"), R)))
        if how == "sum":
            (a,) = self.args(node, frame, 1, name)
            return self.sum_of(node, a)
        (a,) = self.args(node, frame, 1, name)
        if how == "floor":
            return a if a.ty == Z else Ex(self.F(node, "(floor ", self.real(
                a, node, name).frag, ")"), Z)
        if how == "ceil":
            return a if a.ty == Z else Ex(self.F(node, "(- (floor (- ", self.real(
                a, node, name).frag, ")))"), Z)
        a = self.real(a, node, name)
        if how == "tan":
            return self.shared(node, a, lambda x: Ex(self.F(
                node, "((sin ", x.frag, ") / (cos ", x.frag, "))"), R))
        if how == "expm1":
            return Ex(self.F(node, "((exp ", a.frag, ") - 1.0)"), R)
        if how == "square":
            return self.shared(node, a, lambda x: Ex(self.F(node, "(", x.frag, " * ", x.frag,
                                                             ")"), R))
        raise AssertionError(how)

    def maxmin(self, node, how: str, a: Ex, b: Ex) -> Ex:
        return Ex(self.F(node, f"{how}(", a.frag, ", ", b.frag, ")"), R)

    def sum_of(self, node, a: Ex) -> Ex:
        if not isinstance(a.ty, ArrayT) or a.ty.elem not in (R, Z):
            self.err(node, f"sum takes an array of floats or ints, found {python_name(a.ty)}",
                     FrontendTypeError)
        return Ex(self.F(node, "(sum ", a.frag, ")"), a.ty.elem)

    def builtin(self, node, how: str, frame, name: str) -> Ex:
        if how == "sum":
            if len(node.args) != 1:
                self.err(node, "sum takes one argument here (a start value is not supported: "
                               "add it after the sum)")
            arg = node.args[0]
            if isinstance(arg, (ast.GeneratorExp, ast.ListComp)):
                return self.sum_of(node, self.comprehension(arg, frame))
            return self.sum_of(node, self.expr(arg, frame))
        if how in ("max", "min"):
            if len(node.args) < 2:
                self.err(node, f"{how} of a sequence is not supported: give the values, "
                               f"{how}(a, b)")
            exs = [self.numeric(self.expr(a, frame), a, name) for a in node.args]
            out = exs[0]
            for e in exs[1:]:
                out = self.maxmin2(node, how, out, e)
            return out
        (a,) = self.args(node, frame, 1, name)
        if how == "abs":
            return self.elementwise(node, "abs", self.numeric(a, node, name), name)
        if how == "len":
            if isinstance(a.ty, TupleT):
                return Ex(self.F(node, str(len(a.ty.elems))), Z, lit=len(a.ty.elems))
            if not isinstance(a.ty, ArrayT):
                self.err(node, f"len takes an array, found {python_name(a.ty)}", FrontendTypeError)
            return Ex(self.F(node, "(length ", a.frag, ")"), Z)
        if how == "float":
            return self.real(a, node, name)
        if how == "int":
            if a.ty == Z:
                return a
            a = self.real(a, node, name)  # truncation toward zero, as Python
            return self.shared(node, a, lambda x: Ex(self.F(
                node, "(if ", x.frag, " < 0.0 then (- (floor (- ", x.frag, "))) else (floor ",
                x.frag, "))"), Z))
        if how == "bool":
            return self.boolean(a, node, "the argument of bool")
        self.err(node, "range can be used only in a for loop or a comprehension: "
                       "for i in range(n): ... or [... for i in range(n)]")

    def maxmin2(self, node, how: str, a: Ex, b: Ex) -> Ex:
        a, b = self.unify(a, b, node, how)
        if a.ty == R:
            return self.maxmin(node, how, a, b)
        rel = ">" if how == "max" else "<"  # Python's: a unless b beats it
        return self.shared(node, a, lambda x: self.shared(node, b, lambda y: Ex(self.F(
            node, "(if ", y.frag, f" {rel} ", x.frag, " then ", y.frag, " else ", x.frag, ")"),
            Z)))

    # ------------------------------------------------------------ local functions

    def expand(self, macro: Macro, node, frame) -> Ex:
        """A call of a lambda or nested def: its parameters bound by lets to the
        arguments, its body translated in its defining frame as it is now."""
        fnode = macro.node
        label = "the lambda" if isinstance(fnode, ast.Lambda) else fnode.name
        if macro.uid in self.expanding:
            self.err(node, f"{label} calls itself: recursion is not supported "
                           "(write a for loop over range)")
        definer = frame.find(macro.fid)
        if definer is None:
            self.err(node, f"{label} is called outside the function that defines it")
        params = fnode.args
        if params.vararg or params.kwarg or params.kwonlyargs or params.defaults \
                or params.posonlyargs:
            self.err(fnode, "a local function takes plain positional parameters only")
        names = [a.arg for a in params.args]
        if node.keywords or len(node.args) != len(names):
            self.err(node, f"{label} takes {len(names)} positional argument(s)")
        inner = Frame(definer, fresh=True)
        binds = []
        for a, p in zip(node.args, params.args):
            ex = self.expr(a, frame)
            if p.annotation is not None:
                ty = annotation_type(p.annotation, lambda n: self.resolve(n), self.loc,
                                     f"parameter {p.arg}")
                ex = self.coerce(ex, ty, a, f"argument {p.arg} of {label}")
            binds.append((self.bind(inner, p.arg, ex.ty), ex))
        self.expanding.append(macro.uid)
        try:
            if isinstance(fnode, ast.Lambda):
                body = self.expr(fnode.body, inner)
            else:
                body = self.function_body(fnode, inner)
        finally:
            self.expanding.pop()
        text = body.frag
        for name, ex in reversed(binds):
            text = self.let(node, name, ex.frag, text)
        return Ex(text, body.ty)
