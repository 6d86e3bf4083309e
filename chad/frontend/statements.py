"""Translating Python statements: a function body becomes one chad expression.

A block is translated front to back, each statement wrapping the rest:

* `x = e` (and `x += e`, `x: T = e`) is `let x = e in <rest>`; reassignment is
  a new `let` (SSA). `a, b = e` binds through `let`s of `fst`/`snd`.
* `return e` ends the block; code after it is an error.
* `if c:` whose branches both return is `if c then A else B`; when only some
  paths return, the rest of the block goes into both branches; otherwise the
  variables the branches assign are joined: `let (x, y) = if c then (.., ..)
  else (.., ..) in <rest>`.
* `for i in range(a, b):` is the language's bounded iteration `iter`
  (docs/language.md "Iteration"), its state the tuple of the loop index and
  the variables the body updates:
  `let s = iter (b - a) (\\t -> let (i, x, y) = t in <body>; (i + 1, x, y)) (a, x, y)`.
* a nested `def` is a local function, translated where it is called
  (expressions.py `expand`).

Everything else (while, break, try, global, ...) is an error saying what to
write instead.
"""

from __future__ import annotations

import ast

from chad.types import UNIT, R, Z, show_type

from .annotations import TupleT, annotation_type, chad_type, python_name
from .emit import Frag, join
from .errors import FrontendTypeError
from .ex import MACRO_IDS, Ex
from .expressions import ExprTranslator
from .scope import Dropped, Frame, Macro, Var

_REFUSED = {
    "While": "while loops are not supported (chad loops are bounded): write for i in range(n), "
             "with a flag in the loop variables for an early exit",
    "Break": "break is not supported: keep a flag, e.g. done = done or cond, and make the rest "
             "of the body an if not done: ...",
    "Continue": "continue is not supported: put the rest of the body under an if",
    "Global": "global is not supported: pass the value as an argument",
    "Nonlocal": "nonlocal is not supported: return the new value instead",
    "Try": "try is not supported (errors in chad are not caught)",
    "TryStar": "try is not supported (errors in chad are not caught)",
    "With": "with is not supported",
    "AsyncWith": "with is not supported",
    "AsyncFor": "async for is not supported: write for i in range(n)",
    "Raise": "raise is not supported",
    "Assert": "assert is not supported (there are no exceptions in chad): remove it",
    "Delete": "del is not supported: stop using the name instead",
    "Import": "import is not supported inside the function: import at module level",
    "ImportFrom": "import is not supported inside the function: import at module level",
    "ClassDef": "classes are not supported",
    "Match": "match is not supported: write if/elif/else",
    "AsyncFunctionDef": "async functions are not supported",
    "TypeAlias": "type aliases are not supported inside the function",
}


def assigned(stmts) -> list[str]:
    """The names the statements assign (not inside nested functions), in order."""
    out: list[str] = []

    def target(t):
        if isinstance(t, ast.Name):
            if t.id not in out:
                out.append(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                target(e)

    def walk(ss):
        for s in ss:
            if isinstance(s, ast.Assign):
                for t in s.targets:
                    target(t)
            elif isinstance(s, (ast.AugAssign, ast.AnnAssign)):
                target(s.target)
            elif isinstance(s, ast.If):
                walk(s.body)
                walk(s.orelse)
            elif isinstance(s, ast.For):
                target(s.target)
                walk(s.body)

    walk(stmts)
    return out


def returns(stmts) -> bool:
    """Some statement (not inside a nested function) is a return."""
    for s in stmts:
        if isinstance(s, ast.Return):
            return True
        if isinstance(s, ast.If) and (returns(s.body) or returns(s.orelse)):
            return True
        if isinstance(s, (ast.For, ast.While)) and returns(s.body):
            return True
    return False


def always_returns(stmts) -> bool:
    """Every path through the statements ends in a return."""
    for s in stmts:
        if isinstance(s, ast.Return):
            return True
        if isinstance(s, ast.If) and always_returns(s.body) and always_returns(s.orelse):
            return True
    return False


class Translator(ExprTranslator):
    """Statements and whole defs (see the module docstring)."""

    def __init__(self, src, fn, names, callee):
        super().__init__(src, fn, names, callee)
        self.result = None  # the declared result type of the def being translated

    # ------------------------------------------------------------ defs

    def signature(self, fnode) -> tuple[list[tuple[str, object]], object]:
        """The parameters (Python name, type) and result type of a def node."""
        args = fnode.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
            bad = args.vararg or args.kwarg or (args.kwonlyargs or args.posonlyargs)[0]
            self.err(bad, "only plain positional parameters are supported "
                          "(no *args, **kwargs, keyword-only or positional-only markers)")
        if args.defaults:
            self.err(args.defaults[0], "default values of parameters are not supported")
        params = [(a.arg, annotation_type(a.annotation, self.resolve_annotation,
                                          lambda n, a=a: self.loc(n if n is not None else a),
                                          f"parameter {a.arg}"))
                  for a in args.args]
        result = annotation_type(fnode.returns, self.resolve_annotation,
                                 lambda n: self.loc(n if n is not None else fnode),
                                 f"the result of {fnode.name}")
        return params, result

    def resolve_annotation(self, node):
        return self.resolve(node)

    def translate_def(self, fnode, def_name: str):
        """The chad def of the Python def node, as a fragment."""
        params, result = self.signature(fnode)
        self.result = result
        frame = Frame(None, fresh=False)
        header = []
        for p, ty in params:
            if p in frame.vars:
                self.err(fnode, f"parameter {p} is given twice")
            header.append(self.F(fnode, self.bind(frame, p, ty), " : ", _chad_text(ty)))
        body = self.function_body(fnode, frame)
        return self.F(fnode, "def ", def_name, "(", *join(", ", header), ") : ",
                      _chad_text(result), " =\n  ", body.frag, "\n")

    def function_body(self, fnode, frame) -> Ex:
        stmts = list(fnode.body)
        if stmts and isinstance(stmts[0], ast.Expr) and isinstance(stmts[0].value, ast.Constant) \
                and isinstance(stmts[0].value.value, str):
            stmts = stmts[1:]  # the docstring
        if frame.parent is None:  # the decorated def: self.result is its result type
            return self.block(stmts, frame, self.missing_return(fnode))
        saved = self.result  # a nested def: its own result annotation, if any
        self.result = (annotation_type(fnode.returns, self.resolve_annotation, self.loc,
                                       f"the result of {fnode.name}")
                       if fnode.returns is not None else None)
        try:
            return self.block(stmts, frame, self.missing_return(fnode))
        finally:
            self.result = saved

    def missing_return(self, fnode):
        def final(frame):
            last = fnode.body[-1] if fnode.body else fnode
            self.err(last, f"{fnode.name} can end without a return: every path must end in "
                           "return <value>")
        return final

    # ------------------------------------------------------------ blocks

    def block(self, stmts, frame: Frame, final) -> Ex:
        """The value of the statements (each wraps the rest); `final(frame)` is
        the value when they run out without a return."""
        if not stmts:
            return final(frame)
        s, rest = stmts[0], list(stmts[1:])
        kind = type(s).__name__
        if kind in _REFUSED:
            self.err(s, _REFUSED[kind])
        method = getattr(self, "s_" + kind, None)
        if method is None:
            self.err(s, f"this statement ({kind}) is not supported")
        return method(s, rest, frame, final)

    def s_Pass(self, s, rest, frame, final):
        return self.block(rest, frame, final)

    def s_Expr(self, s, rest, frame, final):
        if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            return self.block(rest, frame, final)  # a string as a comment
        if isinstance(s.value, ast.Call):
            self.expr(s.value, frame)  # a call of print, of an unknown function: its error
        self.err(s, "an expression statement has no effect in chad (there are no side effects): "
                    "assign its value to a name, or remove it")

    def s_Return(self, s, rest, frame, final):
        if rest:
            self.err(rest[0], "unreachable code after return: remove it")
        if s.value is None:
            self.err(s, "return needs a value (a chad function always returns one)")
        ex = self.expr(s.value, frame)
        if self.result is not None:
            ex = self.coerce(ex, self.result, s.value, "the returned value")
        return ex

    def s_Assign(self, s, rest, frame, final):
        if len(s.targets) != 1:
            self.err(s, "chained assignment a = b = e is not supported: assign one name at a time")
        target = s.targets[0]
        if isinstance(target, ast.Name) and isinstance(s.value, ast.Lambda):
            frame.vars[target.id] = Macro(s.value, frame.fid, next(MACRO_IDS))
            return self.block(rest, frame, final)
        return self.assign(target, self.expr(s.value, frame), rest, frame, final)

    def s_AnnAssign(self, s, rest, frame, final):
        if s.value is None:
            self.err(s, "a declaration without a value is not supported: x: float = <value>")
        ty = annotation_type(s.annotation, self.resolve_annotation, self.loc,
                             f"the variable {ast.unparse(s.target)}")
        ex = self.coerce(self.expr(s.value, frame), ty, s.value, "the assigned value")
        return self.assign(s.target, ex, rest, frame, final)

    def s_AugAssign(self, s, rest, frame, final):
        if not isinstance(s.target, ast.Name):
            self.err(s.target, "augmented assignment to an element or attribute is not supported "
                               "(values are immutable)")
        load = ast.copy_location(ast.Name(s.target.id, ast.Load()), s.target)
        value = ast.copy_location(ast.BinOp(load, s.op, s.value), s)
        ex = self.expr(value, frame)
        return self.assign(s.target, ex, rest, frame, final)

    def assign(self, target, ex: Ex, rest, frame, final) -> Ex:
        wrap = self.bind_target(target, ex, frame)
        body = self.block(rest, frame, final)
        if isinstance(target, ast.Name) and _text(body.frag) == frame.vars[target.id].name:
            return Ex(ex.frag, body.ty)  # x = e; return x  is  e, not let x = e in x
        return Ex(wrap(body.frag), body.ty)

    def s_FunctionDef(self, s, rest, frame, final):
        if s.decorator_list:
            self.err(s.decorator_list[0], "a nested def takes no decorators (it is translated "
                                          "as part of the enclosing function)")
        frame.vars[s.name] = Macro(s, frame.fid, next(MACRO_IDS))
        return self.block(rest, frame, final)

    # ------------------------------------------------------------ if

    def s_If(self, s, rest, frame, final):
        cond = self.boolean(self.expr(s.test, frame), s.test, "the condition of if")
        if always_returns(s.body) and always_returns(s.orelse):
            if rest:
                self.err(rest[0], "unreachable code: both branches of the if above return")
            a = self.block(s.body, frame.copy(), final)
            b = self.block(s.orelse, frame.copy(), final)
            a, b = self.unify(a, b, s, "the values the two branches return")
            return Ex(self.F(s, "(if ", cond.frag, " then ", a.frag, " else ", b.frag, ")"), a.ty)
        if returns(s.body) or returns(s.orelse):  # the rest goes into both branches
            a = self.block(_then(s.body, rest), frame.copy(), final)
            b = self.block(_then(s.orelse, rest), frame.copy(), final)
            a, b = self.unify(a, b, s, "the values the two branches return")
            return Ex(self.F(s, "(if ", cond.frag, " then ", a.frag, " else ", b.frag, ")"), a.ty)
        both = set(assigned(s.body)) & set(assigned(s.orelse))
        carried = [v for v in assigned(list(s.body) + list(s.orelse))
                   if isinstance(frame.vars.get(v), Var) or v in both]
        self.drop(frame, assigned(list(s.body) + list(s.orelse)), carried,
                  f"{{}} is assigned in only one branch of the if at line {s.lineno}: give it a "
                  "value before the if")
        if not carried:
            self.block(s.body, frame.copy(), _nothing)  # for its errors
            self.block(s.orelse, frame.copy(), _nothing)
            return self.block(rest, frame, final)
        types = None
        for _attempt in range(2):  # again with ints widened to floats where needed
            a = self.block(s.body, frame.copy(), self.join_final(s, carried, types))
            b = self.block(s.orelse, frame.copy(), self.join_final(s, carried, types))
            if a.ty == b.ty:
                break
            types = [self.join_type(s, v, x, y) for v, x, y in
                     zip(carried, _elems(a.ty, len(carried)), _elems(b.ty, len(carried)))]
        joined = Ex(self.F(s, "(if ", cond.frag, " then ", a.frag, " else ", b.frag, ")"), a.ty)
        return self.unpack(s, carried, joined, rest, frame, final)

    def drop(self, frame, names, kept, reason: str) -> None:
        for v in names:
            if v not in kept and v not in frame.vars:
                frame.vars[v] = Dropped(reason.format(v))

    def join_final(self, s, carried, types):
        def final(f):
            parts = []
            for k, v in enumerate(carried):
                entry = f.lookup(v)
                if not isinstance(entry, Var):
                    self.err(s, f"{v} is assigned in only one branch of this if (or is a "
                                "function): give it a value before the if")
                ex = Ex(self.F(s, entry.name), entry.ty)
                if types is not None:
                    ex = self.coerce(ex, types[k], s, f"{v} after the if")
                parts.append(ex)
            return parts[0] if len(parts) == 1 else self.tuple_ex(s, parts)
        return final

    def join_type(self, s, v, x, y):
        if x == y:
            return x
        if {x, y} <= {R, Z}:
            return R
        self.err(s, f"{v} is {python_name(x)} in one branch and {python_name(y)} in the other",
                 FrontendTypeError)

    def unpack(self, s, carried, value: Ex, rest, frame, final) -> Ex:
        """let (x, y, ...) = value in <rest>, rebinding the carried variables."""
        types = _elems(value.ty, len(carried))
        names = [self.bind(frame, v, t) for v, t in zip(carried, types)]
        body = self.block(rest, frame, final)
        pattern = names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"
        return Ex(self.F(s, "(let ", pattern, " = ", value.frag, " in ", body.frag, ")"), body.ty)

    # ------------------------------------------------------------ for

    def s_For(self, s, rest, frame, final):
        if s.orelse:
            self.err(s.orelse[0], "for ... else is not supported")
        if not isinstance(s.target, ast.Name):
            self.err(s.target, "the variable of a for loop is one name (over range)")
        for node in _loop_body_nodes(s.body):
            if isinstance(node, ast.Return):
                self.err(node, "return inside a for loop is not supported: set a variable in the "
                               "loop and return after it")
            if isinstance(node, (ast.Break, ast.Continue)):
                self.err(node, _REFUSED[type(node).__name__])
        rng = self.range_args(s.iter, frame)
        if rng is None:
            self.err(s.iter, "a for loop runs over range(n) or range(a, b) only: for an array a "
                             "write for i in range(len(a)) and use a[i]")
        start, count = rng
        index = s.target.id
        if isinstance(frame.lookup(index), (Var, Macro)):
            self.err(s.target, f"the loop variable {index} is also a variable outside the loop: "
                               "give the loop its own variable")
        carried = [v for v in assigned(s.body) if isinstance(frame.vars.get(v), Var)]
        if index in carried:
            self.err(s.target, f"the loop assigns its own variable {index}: use another name")
        self.drop(frame, assigned(s.body), carried + [index],
                  f"{{}} is first assigned inside the for loop at line {s.lineno}: give it a value "
                  "before the loop to use it after")
        if not carried:  # no effect after the loop; translated for its errors only
            inner = frame.copy()
            self.bind(inner, index, Z)
            self.block(s.body, inner, _nothing)
            return self.block(rest, frame, final)
        types = [frame.vars[v].ty for v in carried]
        for _attempt in range(2):  # again with ints widened to floats where needed
            state = self.names.temp()
            inner = frame.copy()
            i_name = self.bind(inner, index, Z)
            v_names = [self.bind(inner, v, t) for v, t in zip(carried, types)]
            step = self.block(s.body, inner, self.loop_final(s, index, carried, types))
            new = [self.join_type(s, v, t, u) for v, t, u in
                   zip(carried, types, _elems(step.ty, len(carried) + 1)[1:])]
            if new == types:
                break
            types = new
        init = [self.coerce(Ex(self.F(s, frame.vars[v].name), frame.vars[v].ty), t, s,
                            f"{v} before the loop") for v, t in zip(carried, types)]
        start_text = start.frag if start is not None else "0"
        pattern = "(" + ", ".join([i_name] + v_names) + ")"
        loop = Ex(self.F(s, "(iter ", count.frag, " (\\", state, " -> (let ", pattern, " = ",
                         state, " in ", step.frag, ")) (", *join(", ", [start_text] +
                                                                [e.frag for e in init]), "))"),
                  step.ty)
        done = self.names.temp()
        names = [self.bind(frame, v, t) for v, t in zip(carried, types)]
        body = self.block(rest, frame, final)
        after = "(" + ", ".join([done] + names) + ")"
        return Ex(self.F(s, "(let ", after, " = ", loop.frag, " in ", body.frag, ")"), body.ty)

    def loop_final(self, s, index, carried, types):
        def final(f):
            i = f.lookup(index)
            parts = [Ex(self.F(s, "(", i.name, " + 1)"), Z)]
            for v, t in zip(carried, types):
                entry = f.lookup(v)
                if not isinstance(entry, Var):
                    self.err(s, f"{v} is not a value at the end of the loop body")
                ex = Ex(self.F(s, entry.name), entry.ty)
                if ex.ty == Z and t == R:
                    ex = self.coerce(ex, R, s, v)
                parts.append(ex)
            return self.tuple_ex(s, parts)
        return final


def _nothing(frame) -> Ex:
    """The value of a block translated only for its errors."""
    return Ex(Frag(["()"]), UNIT)


def _text(frag) -> str | None:
    """The text of a fragment that is a single name, else None."""
    while isinstance(frag, Frag) and len(frag.parts) == 1:
        frag = frag.parts[0]
    return frag if isinstance(frag, str) else None


def _then(stmts, rest) -> list:
    """stmts followed by rest, unless stmts always return."""
    return list(stmts) if always_returns(stmts) else list(stmts) + list(rest)


def _elems(ty, n: int) -> list:
    if n == 1:
        return [ty]
    assert isinstance(ty, TupleT)
    return list(ty.elems)


def _chad_text(ty) -> str:
    return show_type(chad_type(ty))


def _loop_body_nodes(stmts):
    """The statements of a loop body, into ifs and inner loops (not into nested defs)."""
    for s in stmts:
        yield s
        if isinstance(s, ast.If):
            yield from _loop_body_nodes(s.body)
            yield from _loop_body_nodes(s.orelse)
        elif isinstance(s, (ast.For, ast.While)):
            yield from _loop_body_nodes(s.body)

