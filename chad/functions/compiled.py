"""How the compiler (chad/compile/) lowers the function nodes that cannot run
through their evaluation rule: those holding a body to be compiled.

    ClosedLam x body        a Python function of x
    MkClosure ρ ys x body   Packed(ρ, (env tuple, f)) with f a Python function of
                            (x, env tuple) that unpacks y1..yk from the tuple
    CApp f e                f's function applied to (e, f's env tuple)
    DCall g args            the derivative of def g (calls.py `derived`), compiled
                            once per module as a top-level function, called;
                            before simplification a small one is inlined instead
                            (`inline_dcall`, chad/compile/inline.py)

The other function nodes run through their evaluation rules ("eval" in
chad/functions/__init__.py). Values are the evaluator's (Packed, LPacked, ...),
except that a closed function is a Python function instead of a term.
"""

from __future__ import annotations

import itertools

from chad.compile.codegen import CompileError
from chad.compile.inline import MAX_BODY
from chad.terms import Let, Var

from .calls import derived
from .types import Packed

ENV = "env$closure"  # the closed function's second parameter (no source name has '$')


def lower_closed_lam(gen, t) -> str:
    return gen.local_def([t.name], t.body)


def lower_mk_closure(gen, t) -> str:
    env = "None"
    for y in reversed(t.captures):
        env = gen.atom(f"({gen.atom(gen.value(Var(y, loc=t.loc)))}, {env})")
    n = len(t.captures)

    def unpack(gen, args):
        # the parameters are (x, env tuple): bind y1..yk from the tuple
        if n:
            names = [gen.fresh("p") for _ in range(n)]
            pattern = "_"
            for name in reversed(names):
                pattern = f"({name}, {pattern})"
            gen.emit(f"{pattern} = {args[1]}")
            gen.env.update(zip(t.captures, names))

    fn = gen.local_def([t.name, ENV], t.body, "f", closed=True, setup=unpack)
    packed, tag = gen.const(Packed, "C"), gen.const(t.tag, "T")
    return f"{packed}({tag}, ({env}, {fn}))"


def lower_capp(gen, t) -> str:
    f = gen.atom(gen.value(t.fn))
    x = gen.atom(gen.value(t.arg))
    inner = gen.atom(f"{f}.value")
    return f"{inner}[1]({x}, {inner}[0])"


def lower_dcall(gen, t) -> str:
    d = gen.defs.get(t.name)
    if d is None:
        raise CompileError(f"call of an unknown def {t.name!r}", t.loc)
    key = ("dcall", t.name, t.mode)
    fn = gen.functions.get(key)
    if fn is None:
        fn = gen.function([p.name for p in d.params], derived(d, t.mode), "dc")
        gen.functions[key] = fn
    args = [gen.atom(gen.value(a)) for a in t.args]
    return f"{fn}({', '.join(args)})"


_ARGS = itertools.count(1)


def inline_dcall(t, defs, inliner):
    """DCall g args as `let a1 = arg1 in ... let y1 = a1 in ... g$D's body`
    (calls.py `derived`: a closed term of g's parameters), when g's derived body
    is small enough (chad/compile/inline.py); None: leave the call."""
    d = defs.get(t.name)
    if d is None:
        return None
    body = derived(d, t.mode)
    size = inliner.size(body)
    if size > MAX_BODY:
        return None
    inliner.added += size
    temps = [f"arg$i{next(_ARGS)}" for _ in t.args]  # fresh: no source name has '$'
    out = body
    for p, a in reversed(list(zip(d.params, temps))):
        out = Let(p.name, Var(a), out)
    for a, e in reversed(list(zip(temps, t.args))):
        out = Let(a, e, out)
    return out
