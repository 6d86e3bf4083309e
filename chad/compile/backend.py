"""The compiled backend: a def's primal, gradient and backward pass as Python
functions, generated from (simplified) terms, cached.

    primal_function(prog, d)              f(*args) -> value
    gradient_function(prog, d, T, R)      g(*args, ctg) -> (value, raw cotangents)
    vjp_functions(prog, d, T, R)          forward(*args) -> pair (value, backprop),
                                          backward(pair, ctg) -> raw cotangents

The gradient is one term: `let r = forward in (fst r, backward r ctg)` with the
transform T's forward and backward terms (chad/transform/registry.py), so the
simplifier sees the backpropagator where it is applied and can inline it. R is
the runtime: with "array" the EVM is inlined (chad/compile/codegen.py); with
"parallel" too, the same code but with fork points running independent heavy
parts on two threads (chad/compile/parallel_codegen.py); with "map" the
generated code calls the runtime's EVM interface.

Compilation (transform, simplify, generate, `compile`) runs on the caller's
thread: the passes walk the spines of deep programs (10,000 nested lets, a sum
of 10,000 terms) with loops. Only if a pass raises RecursionError there (a
program nested some other way: 20,000 parentheses) does it run again on a
big-stack thread (chad/deep.py, run_shallow). The generated functions run on
the caller's thread. The counting evaluator never sees simplified terms: step
counts are the reference evaluator's alone.
"""

from __future__ import annotations

import math
import threading
import types
from collections import OrderedDict

import attrs

from chad.deep import in_deep_work, run_shallow
from chad.errors import ChadError, UsageError
from chad.runtime.registry import make_evm
from chad.terms import Call, Def, Fst, Let, Pair, Program, Var, subterms
from chad.types import is_first_order
from chad.transform.registry import CTG, get_transform

from .codegen import CompileError, Gen
from .inline import inline
from chad.memory import keep_freed_memory
from .source import prepare_body, small_defs
from . import switch
from .support import FastArrayEVM

FORWARD = "fwd$0"   # the forward pair in the gradient and backward terms
# runtimes whose EVM the generated code inlines: the array runtime's, and the
# parallel runtime's, which is the same code with fork points
# (chad/compile/parallel_codegen.py)
INLINED = ("array", "parallel")
CACHE_SIZE = 128

_cache: OrderedDict = OrderedDict()   # compiled modules
_terms: OrderedDict = OrderedDict()   # transformed (and simplified) terms
_lock = threading.Lock()


def _prepare(simplify: bool):
    return _simplified if simplify else None


def _simplify(term):
    from chad.simplify import simplify  # the simplifier layer

    return simplify(term)


def _simplified(term):
    """simplify(term), once per term object: the bodies of the defs a term calls
    (kept alive by the program and the derivative cache anyway) are compiled for
    each runtime, and the simplified term does not depend on it."""
    def build():
        return term, _simplify(term)  # the term kept alive: its id stays its own

    return _lru(_terms, ("simplified", id(term)), build)[1]


class Module:
    """One generated module: its source and its entry function."""

    def __init__(self, source: str, entry, gen: Gen) -> None:
        self.source = source
        self.entry = entry
        self.namespace = gen.ns


# The fast versions of the table's sine and cosine: math.sin and math.cos are
# the same function but for an infinity, where they raise ValueError and the
# table's versions (chad/primitives.py) give NaN.
FAST_MATH = {"_sin": math.sin, "_cos": math.cos}


def with_fast_math(ns: dict, entry_name: str):
    """The entry function of a module (exec'd in ns) calling math.sin and
    math.cos directly (a Python-level wrapper call less per sine), and, if that
    raises ValueError (an infinity, or an error the table's versions raise too),
    the same code with the table's versions: the same result in every case.
    Only for functions whose arguments and result hold no function value: the
    generated code has no effect but its result, so running it again is the
    same computation, and no fast closure escapes to be called later. The
    functions share their code objects: nothing is compiled twice."""
    fast_ns = dict(ns)
    fast_ns.update(FAST_MATH)
    for name, value in ns.items():
        if type(value) is types.FunctionType and value.__globals__ is ns:
            code, defaults = value.__code__, value.__defaults__
            if defaults:  # helpers bound by default arguments (codegen.LOCAL_HELPERS)
                names = code.co_varnames[code.co_argcount - len(defaults):code.co_argcount]
                defaults = tuple(FAST_MATH.get(n, d) for n, d in zip(names, defaults))
            fast_ns[name] = types.FunctionType(code, fast_ns, value.__name__, defaults,
                                               value.__closure__)
    fast, safe = fast_ns[entry_name], ns[entry_name]

    def entry(*args):
        try:
            return fast(*args)
        except ValueError:
            return safe(*args)

    return entry


def evm_for(runtime: str):
    """The EVM object compiled code uses: the inlined array EVM, or the runtime."""
    if runtime == "spec":
        raise UsageError("the spec EVM is a model for the counting evaluator; compiled code "
                         "runs on map, array or parallel (or use backend interp)")
    return FastArrayEVM() if runtime in INLINED else make_evm(runtime)


def _generate(prog: Program, params: list[str], term, runtime: str, simplify: bool,
              label: str, evm=None, fast_math: bool = False, defs: dict | None = None,
              private: bool = False, escapes: bool = False) -> Module:
    """Generate and compile the module of `term` (already simplified when
    `simplify`; the bodies of the defs it calls are simplified here); with
    `fast_math`, its entry runs with_fast_math."""
    gen = Gen(inline=(runtime in INLINED), prepare=_prepare(simplify), vectorise=_vectorise[0],
              fork=(runtime == "parallel"))
    gen.defs = defs if defs is not None else {d.name: d for d in prog.defs}
    gen.private = private  # a derivative's module (codegen.Gen)
    gen.escapes = escapes  # a vjp's forward pass (codegen.Gen)
    gen.ns["_E"] = evm if evm is not None else evm_for(runtime)
    try:
        entry = gen.function(params, term, "entry", prepared=True)
    except CompileError as e:
        if e.loc is None:
            e.loc = gen.last_loc or getattr(term, "loc", None)
        raise
    except ChadError:
        raise
    except Exception as e:  # a bug of the compiler: reported where it happened
        if isinstance(e, RecursionError) and not in_deep_work():
            raise  # run_shallow runs it again on a big-stack thread
        raise CompileError(f"while compiling {label}: {type(e).__name__}: {e}",
                           gen.last_loc or getattr(term, "loc", None)) from e
    source = header(label, runtime, simplify) + gen.source()
    try:
        code = compile(source, f"<chad compiled {label}>", "exec")
    except (SyntaxError, RecursionError, MemoryError, ValueError) as e:
        if isinstance(e, RecursionError) and not in_deep_work():
            raise
        raise CompileError(f"the generated Python for {label} does not compile: {e}",
                           getattr(term, "loc", None)) from None
    exec(code, gen.ns)
    if fast_math and ("_sin(" in source or "_cos(" in source):
        return Module(source, with_fast_math(gen.ns, entry), gen)
    return Module(source, gen.ns[entry], gen)


def _first_order(d: Def) -> bool:
    """No function value in the def's arguments or result (with_fast_math)."""
    return is_first_order(d.result) and all(is_first_order(p.ty) for p in d.params)


def header(label: str, runtime: str, simplify: bool) -> str:
    return (f"# chad compiled: {label} (runtime {runtime}"
            f"{', simplified' if simplify else ''})\n"
            "# every name is generated; the program's names and strings never appear here\n\n")


def _lru(cache: OrderedDict, key, build):
    with _lock:
        hit = cache.get(key)
        if hit is not None:
            cache.move_to_end(key)
            return hit
    value = build()
    with _lock:
        cache[key] = value
        while len(cache) > CACHE_SIZE:
            cache.popitem(last=False)
    return value


def _cached(key, build):
    keep_freed_memory()  # once per process (chad/memory.py)
    return _lru(_cache, key, build)


def _term(key, build, simplify: bool, defs: dict | None = None):
    """The term build() makes, with its calls inlined and simplified when
    asked, cached under key: shared by the modules of the three runtimes."""
    def make():
        t = run_shallow(build)
        if not simplify:
            return t
        if defs:
            t = run_shallow(inline, t, defs)
        return _simplify(t)  # cached under key: t itself need not be kept

    return _lru(_terms, key, make)


def clear_cache() -> None:
    """Forget every compiled function and term (the next call compiles again)."""
    with _lock:
        _cache.clear()
        _terms.clear()


class _Same:
    """A program in a cache key, compared and hashed by identity: hashing the
    Program itself would hash every term of it (a recursion as deep as the
    program); holding it keeps its id from being reused."""

    __slots__ = ("obj",)

    def __init__(self, obj) -> None:
        self.obj = obj

    def __eq__(self, other) -> bool:
        return type(other) is _Same and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


def _key(prog: Program, d: Def, *rest):
    # a program given as text is parsed anew by each API call: its source and
    # file identify it; a Program built in Python is identified by the object
    rest = rest + (_vectorise[0], _rows[0], _cases[0])
    name = None if d is None else d.name
    if prog.source is not None:
        return (prog.source, prog.file, name) + rest
    return (_Same(prog), name) + rest


_vectorise = [True]
_rows = [True]
_cases = switch.ENABLED


class _Switch:
    """A process-wide compilation choice for a `with` block (its list's one
    item); modules compiled either way are cached apart (`_key`)."""

    flag: list

    def __init__(self, on: bool) -> None:
        self.on = on

    def __enter__(self):
        self.old = self.flag[0]
        self.flag[0] = self.on
        return self

    def __exit__(self, *exc) -> None:
        self.flag[0] = self.old


class vectorising(_Switch):
    """`with vectorising(False):` compiles array nodes as per-element loops only
    (their evaluation rules), as before vectorisation (chad/compile/
    vectorise.py): for tests and benchmarks comparing the two."""

    flag = _vectorise


class rewriting_rows(_Switch):
    """`with rewriting_rows(False):` compiles without row hoisting (chad/compile/
    rows.py): for tests and benchmarks comparing the two."""

    flag = _rows


class batching_cases(_Switch):
    """`with batching_cases(False):` compiles a case of (value,
    backpropagator) pairs in a forward pass element by element, as before
    chad/compile/switch.py: for tests and benchmarks comparing the two."""

    flag = _cases


def _defs(prog: Program, simplify: bool = True) -> dict | None:
    """The defs a derivative may call (for inlining), or None when no def calls
    another: then no term of the program's derivatives has a call to inline, and
    the pass over the (large) target term is skipped."""
    if not any(type(n) is Call for d in prog.defs for n in subterms(d.body)):
        return None
    return _source(prog, False, simplify)


def _rewrites(transform: str, simplify: bool) -> bool:
    """Whether a derivative's def bodies get the source rewrites: when simplified,
    for every transform but the naive one (the first-order language only: a
    program with a lambda stays an error there, as on the interpreter)."""
    return simplify and transform != "naive"


def _source(prog: Program, calls: bool, simplify: bool = True) -> dict:
    """The program's defs by name, each body with the source rewrites of
    chad/compile/source.py (with `calls`, the primal path's: small defs' calls
    inlined too); unsimplified compilation keeps the defs as they are. A def
    nothing applies to is itself. Cached per program."""
    if not simplify:
        return {d.name: d for d in prog.defs}

    def build():
        small = small_defs(prog.defs) if calls else None
        out = {}
        for d in prog.defs:
            mine = small and {k: v for k, v in small.items() if k != d.name}
            body = run_shallow(prepare_body, d.body, [p.name for p in d.params], mine,
                               _rows[0])
            out[d.name] = d if body is d.body else attrs.evolve(d, body=body)
        return out
    return _lru(_terms, _key(prog, None, "source", calls), build)


def rewrites(prog: Program, calls: bool, transform: str = "efficient",
             simplify: bool = True) -> bool:
    """Whether the compiled code sees a def body rewritten (chad/compile/
    source.py; with `calls`, the primal path's). The rewrites may change which
    of two failing reads comes first, so an error of such code is reported by
    replaying the call on the interpreter (chad/api_core.py, `_replay`)."""
    if not _rewrites(transform, simplify):
        return False
    defs = _source(prog, calls, True)
    return any(defs[d.name] is not d for d in prog.defs)


def primal_module(prog: Program, d: Def, simplify: bool = True) -> Module:
    """The def's body as a function of its parameters."""

    def build():
        defs = _source(prog, True, simplify)
        body = _term(_key(prog, d, "primal body", simplify), lambda: defs[d.name].body,
                     simplify)
        return run_shallow(_generate, prog, [p.name for p in d.params], body, "array",
                        simplify, f"{d.name}", None, _first_order(d), defs)
    return _cached(_key(prog, d, "primal", simplify), build)


def gradient_module(prog: Program, d: Def, transform: str = "efficient",
                    runtime: str = "array", simplify: bool = True) -> Module:
    """(value, backward result) as a function of the parameters and the cotangent."""
    spec = get_transform(transform)


    rw = _rewrites(transform, simplify)

    def term():
        sd = _source(prog, False, rw)[d.name]
        fwd = spec.forward_term(sd)
        return Let(FORWARD, fwd, Pair(Fst(Var(FORWARD)), spec.backward_term(sd, FORWARD)))

    def build():
        t = _term(_key(prog, d, "grad term", transform, simplify), term, simplify,
                  _defs(prog, rw))
        return run_shallow(_generate, prog, [p.name for p in d.params] + [CTG], t, runtime,
                        simplify, f"gradient of {d.name} ({transform})", None,
                        runtime in INLINED and _first_order(d), _source(prog, False, rw),
                        True)
    return _cached(_key(prog, d, "grad", transform, runtime, simplify), build)


def vjp_modules(prog: Program, d: Def, transform: str = "efficient",
                runtime: str = "array", simplify: bool = True) -> tuple[Module, Module]:
    """The forward pass (params -> (value, backprop)) and the backward pass
    ((value, backprop), ctg -> backward result)."""
    spec = get_transform(transform)


    def build():
        evm = evm_for(runtime)  # one EVM: the backward pass runs the forward's actions
        rw = _rewrites(transform, simplify)
        defs = _source(prog, False, rw)
        sd = defs[d.name]
        fwd = _term(_key(prog, d, "forward term", transform, simplify),
                    lambda: spec.forward_term(sd), simplify, _defs(prog, rw))
        forward = run_shallow(_generate, prog, [p.name for p in d.params], fwd, runtime,
                           simplify, f"forward pass of {d.name} ({transform})", evm,
                           False, defs, True, True)
        back = _term(_key(prog, d, "backward term", transform, simplify),
                     lambda: spec.backward_term(sd, FORWARD), simplify)
        backward = run_shallow(_generate, prog, [FORWARD, CTG], back, runtime, simplify,
                            f"backward pass of {d.name} ({transform})", evm, False, defs,
                            True)
        return forward, backward
    return _cached(_key(prog, d, "vjp", transform, runtime, simplify), build)


def jvp_module(prog: Program, d: Def, simplify: bool = True, order: int = 1) -> Module:
    """The forward-mode derivative (chad/transform/forward.py) as a function of
    the parameters and their tangents, in that order (x1, d$x1, x2, d$x2, ...):
    the pair (value, tangent). order 2: the forward derivative of that, a
    function of tangent_names(params, 2)."""
    from chad.transform.forward import forward_def, tangent_names


    def build():
        defs = _source(prog, False, simplify)
        t = _term(_key(prog, d, "jvp term", order, simplify),
                  lambda: forward_def(defs[d.name], order), simplify, _defs(prog, simplify))
        params = tangent_names([p.name for p in d.params], order)
        return run_shallow(_generate, prog, params, t, "array", simplify, f"jvp of {d.name}",
                           None, False, defs)
    return _cached(_key(prog, d, "jvp", order, simplify), build)
