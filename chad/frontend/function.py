"""`@chad.function`: a typed Python function as a chad def.

`Function` wraps the Python function. On first use (a call, `chad.to_source`,
`chad.grad`, ...) it translates the function and every decorated function it
calls (their defs come first in the program, callees before callers),
parses the chad text, moves every position to the Python source
(emit.py) and type checks the program. Calling it runs the compiled primal and
returns Python values; the translation and compilation happen once, and so does
the generation of the call plan (plans.py) that takes the arguments straight
to the compiled code's values and its result back (any other value, and any
error, goes the general way: values.py's converters, then the text API's).

`ChadFunction` is the common interface the JAX-shaped API uses (chad/api.py):
a checked `program`, the `def_name` to run, the parameters' names and
front-end types and the result's. `from_text` makes one from a program in the
text language.
"""

from __future__ import annotations

import ast
import functools
import linecache
import operator

from chad import api_core, features
from chad.checker import check_program
from chad.deep import run_deep
from chad.errors import ChadError, UsageError
from chad.parser import parse_program
from chad.printer import print_program
from chad.terms import Program
from chad.types import R

from . import plans
from .annotations import from_chad, python_name
from .emit import Frag, Rendered, relocate
from .errors import UnsupportedError
from .ex import Signature
from .names import Names, def_name
from .source import function_source
from .statements import Translator
from .values import decoder, encoder


class ChadFunction:
    """A def of a checked chad program, callable with Python values.
    `_api_cache` holds what chad/api.py builds once per function."""

    @property
    def _api_cache(self) -> dict:
        cache = self.__dict__.get("_api_cache_dict")
        if cache is None:
            cache = self.__dict__["_api_cache_dict"] = {}
        return cache

    program: Program
    def_name: str
    param_names: tuple[str, ...]
    param_types: tuple
    result_type: object
    chad_text: str

    def _prepare(self) -> None:
        """Translate (if needed) and set the attributes above."""

    def _converters(self):
        if getattr(self, "_encoders", None) is None:
            self._prepare()
            self._encoders = [encoder(t) for t in self.param_types]
            self._paths = [f"argument {n} of {self.def_name}" for n in self.param_names]
            self._all_real = all(t == R for t in self.param_types)
            self._decode = decoder(self.result_type)
        return self._encoders, self._decode

    def encode_args(self, args, kwargs=None) -> list:
        """The chad values of Python arguments (by position, or by name)."""
        encoders, _ = self._converters()
        if kwargs:
            args = self._bind(args, kwargs)
        if len(args) != len(encoders):
            sig = ", ".join(f"{n}: {python_name(t)}"
                            for n, t in zip(self.param_names, self.param_types))
            raise UsageError(f"{self.def_name}({sig}) takes {len(encoders)} argument(s), "
                             f"got {len(args)}")
        if self._all_real:
            for a in args:
                if type(a) is not float:
                    break
            else:
                return args  # floats: chad's own values
        return [e(a, p) for e, a, p in zip(encoders, args, self._paths)]

    def _bind(self, args, kwargs) -> list:
        names = self.param_names
        out = list(args) + [_MISSING] * (len(names) - len(args))
        for k, v in kwargs.items():
            if k not in names or out[names.index(k)] is not _MISSING:
                raise UsageError(f"{self.def_name}() got an unexpected or repeated argument {k}")
            out[names.index(k)] = v
        gaps = [i for i, o in enumerate(out) if o is _MISSING]  # (`in` would compare arrays)
        if gaps:
            missing = names[gaps[0]]
            raise UsageError(f"{self.def_name}() is missing the argument {missing}")
        return out

    # A call is the call plan's (plans.py), found as the instance attribute
    # `_plan` by C code alone: no Python frame of this class per call.
    __call__ = property(operator.attrgetter("_plan"))

    def _plan(self, *args, **kwargs):
        """The first call: build the call plan of the compiled primal, keep it as
        the instance's `_plan` (which hides this method), and call it."""
        self._converters()
        entry = api_core.compiled_primal(self.program, self.def_name)
        plan = self._plan = plans.primal(entry, self.param_types, self.result_type,
                                         self.general_call)
        return plan(*args, **kwargs)

    def general_call(self, *args, **kwargs):
        """A call by the general path: the front end's converters, then the text
        API's (and the errors both report)."""
        primal = self.__dict__.get("_primal")
        if primal is None:
            self._converters()
            primal = self._primal = api_core.primal(self.program, self.def_name)
        try:
            return self._decode(primal(*self.encode_args(args, kwargs)))
        except ChadError as e:  # a runtime error: show the Python line
            raise with_python_source(e) from None


_MISSING = object()


class TextFunction(ChadFunction):
    """A def of a text program (`chad.from_text`); a pair is a 2-tuple."""

    def __init__(self, program, fn: str | None = None):
        self.program = api_core.load(program)
        d = self.program.find(fn)
        self.def_name = d.name
        self.param_names = tuple(p.name for p in d.params)
        self.param_types = tuple(from_chad(p.ty) for p in d.params)
        self.result_type = from_chad(d.result)
        self.chad_text = print_program(self.program)

    def __repr__(self) -> str:
        return f"<chad def {self.def_name}>"


def from_text(program, fn: str | None = None) -> TextFunction:
    """The def `fn` (default: the last) of a text program as a function."""
    return TextFunction(program, fn)


class Function(ChadFunction):
    """A Python function decorated with `@chad.function`."""

    def __init__(self, fn):
        self.fn = fn
        functools.update_wrapper(self, fn)
        self._built = False

    def __repr__(self) -> str:
        return f"<chad.function {self.fn.__qualname__}>"

    # ------------------------------------------------------------ the translation

    def _source(self):
        if getattr(self, "_src", None) is None:
            self._src, self._node = function_source(self.fn)
        return self._src, self._node

    def signature_types(self):
        """(parameters [(name, type)], result type) from the annotations."""
        if getattr(self, "_sig", None) is None:
            src, node = self._source()
            try:
                self._sig = Translator(src, self.fn, Names(), lambda o: None).signature(node)
            except ChadError as e:
                raise with_python_source(e) from None
        return self._sig

    def callees(self) -> list["Function"]:
        """The decorated functions this one names (module globals or closure)."""
        src, node = self._source()
        out: list[Function] = []
        t = Translator(src, self.fn, Names(), lambda o: None)
        for sub in ast.walk(node):
            if isinstance(sub, (ast.Name, ast.Attribute)) and isinstance(
                    getattr(sub, "ctx", None), ast.Load):
                try:
                    obj = t.resolve(sub)
                except ChadError:
                    continue
                if isinstance(obj, Function) and obj is not self and obj not in out:
                    out.append(obj)
        return out

    def _prepare(self) -> None:
        if self._built:
            return
        try:
            run_deep(self._translate)  # a long body recurses deeply (chad/deep.py)
        except ChadError as e:
            raise with_python_source(e) from None
        except Exception as e:  # a bug of the translator: say so, at the function
            src, node = self._source()
            raise UnsupportedError(f"internal error while translating {self.fn.__qualname__} "
                                   f"({type(e).__name__}: {e}); please report this",
                                   src.loc(node), src.text) from e

    def _translate(self) -> None:
        features.load()  # the parser and checker know every extension
        order: list[Function] = []
        visiting: list[Function] = []

        def visit(f: Function):
            if f in order:
                return
            if f in visiting:
                src, node = f._source()
                raise UnsupportedError(f"{f.fn.__qualname__} calls itself (through "
                                       f"{', '.join(g.fn.__name__ for g in visiting)}): recursion "
                                       "is not supported", src.loc(node), src.text)
            visiting.append(f)
            for g in f.callees():
                visit(g)
            visiting.pop()
            order.append(f)

        visit(self)
        names: dict[Function, str] = {}
        taken: set[str] = set()
        for f in [self] + order[:-1]:  # this function keeps its own name if it can
            names[f] = def_name(f.fn.__name__, taken)
            taken.add(names[f])
        reserved = frozenset(taken)

        def callee(obj):
            if isinstance(obj, Function) and obj in names:
                params, result = obj.signature_types()
                return Signature(names[obj], tuple(params), result)
            return None

        frags = []
        for f in order:
            src, node = f._source()
            frags.append(Translator(src, f.fn, Names(reserved), callee).translate_def(
                node, names[f]))
        src, node = self._source()
        rendered = Rendered(Frag(frags, src.loc(node)), src.loc(node))
        label = f"<chad text of {self.fn.__qualname__}>"
        try:
            parsed = parse_program(rendered.text, label)
        except ChadError as e:  # the generated text must parse: a bug of the translator
            raise UnsupportedError(f"internal error: the chad text translated from "
                                   f"{self.fn.__qualname__} does not parse ({e.message}); "
                                   "please report this", src.loc(node), src.text) from None
        program = relocate(parsed, rendered)
        program = check_program(program)
        params, result = self.signature_types()
        # the chad text as the program's source: the compiled backend's cache key
        # (positions are the Python file's; errors were rendered from it above)
        self.program = Program(program.defs, rendered.text, src.name)
        self.def_name = names[self]
        self.param_names = tuple(p for p, _t in params)
        self.param_types = tuple(t for _p, t in params)
        self.result_type = result
        self.chad_text = rendered.text
        self._built = True


def with_python_source(e: ChadError) -> ChadError:
    """e, showing the Python source line of its position."""
    if e.loc is not None and e.source is None:
        e.source = "".join(linecache.getlines(e.loc.file)) or None
    return e


def function(fn) -> Function:
    """Decorator: translate the typed Python function fn into a chad def (on first use)."""
    if isinstance(fn, Function):
        return fn
    return Function(fn)


def to_source(f) -> str:
    """The chad program a decorated function (or `from_text`) is translated to."""
    if not isinstance(f, ChadFunction):
        raise UsageError(f"to_source takes a @chad.function, got {type(f).__name__}")
    f._prepare()
    return f.chad_text
