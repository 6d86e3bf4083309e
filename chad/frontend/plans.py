"""Call plans: one generated Python function per (signature, kind of call) that
takes a decorated function's Python arguments straight to the compiled
backend's values, calls the compiled code (chad/compile/backend.py) and takes
its result straight back to Python values, with no intermediate value.

The kinds: the primal (calling the function), the gradient (`value_and_grad`,
`grad`), the two halves of `vjp` (the forward pass, and the backward pass its
vjp_fn runs) and `jvp`. For a `tuple[float, float, float]` argument the plan
reads the three floats and builds the compiled pair `(x, (y, z))` at once; a
result or a gradient in nested pairs is read into a flat tuple the same way
(the conversions of each type: plan_code.py).

A plan never reports an error itself: if anything raises (a wrong argument, a
run-time error of the compiled code), the call is made again by the general
path (`general`: the front end's converters, then the text API, as chad/api.py
builds it), which reports it with its messages and positions; keyword
arguments take the general path too. Compiled code has no effect but its
result, so the second run is the same computation. A recursion too deep for
this thread is retried on a big stack by the plan itself, as the general path
does (chad/deep.py). The convention is the compiled backend's
(docs/compiler.md); no paper section is followed here.
"""

from __future__ import annotations

from chad.deep import run_deep

from .plan_code import (
    Writer, argument, cotangent, gradient, tangent, tangent_out, value,
)

_FAIL = object()


# ------------------------------------------------------------------ the plans

def run(w: Writer, target: str, entry, args: str) -> None:
    """target = entry(args); if it recurses too deeply for this thread, the same
    call on a big-stack thread (chad/deep.py, as chad/api_core.py `_call`)."""
    fn = w.const(entry)
    with w.block("try:"):
        w.emit(f"{target} = {fn}({args})")
    with w.block("except RecursionError:"):
        w.emit(f"{target} = {w.const(run_deep)}({fn}, {args})")


def _head(w: Writer, n: int, general: str) -> list[str]:
    """def call(*args, **kwargs), its arguments as a0.. (else the general path)."""
    names = [f"a{i}" for i in range(n)]
    w.emit("def call(*args, **kwargs):")
    w.depth += 1
    with w.block(f"if kwargs or len(args) != {n}:"):
        w.emit(f"return {general}(*args, **kwargs)")
    if n:
        w.emit(f"{', '.join(names)}{',' if n == 1 else ''} = args")
    return names


def primal(entry, params, result, general):
    """call(*args) -> the Python value of the compiled primal `entry`."""
    w = Writer()
    g = w.const(general)
    names = _head(w, len(params), g)
    with w.block("try:"):
        vals = [argument(w, t, a) for t, a in zip(params, names)]
        out = w.tmp()
        run(w, out, entry, ", ".join(vals))
        w.emit(f"return {value(w, result, out)}")
    with w.block("except Exception:"):
        w.emit("pass")
    w.emit(f"return {g}(*args, **kwargs)")
    return w.function("call")


def gradient_call(entry, cells_of, params, nums, single: bool, only_gradient: bool, general):
    """call(*args) -> (value, gradient) from the compiled gradient `entry`
    (params..., ctg) -> (value, backward result) at ctg 1.0; the gradients of
    the arguments nums (one, if single; only them, if only_gradient)."""
    w = Writer()
    g = w.const(general)
    names = _head(w, len(params), g)
    with w.block("try:"):
        vals = [argument(w, t, a) for t, a in zip(params, names)]
        v, back = w.tmp(), w.tmp()
        run(w, f"{v}, {back}", entry, ", ".join(vals + ["1.0"]))
        cells = [w.tmp() for _ in params]
        w.emit(f"{', '.join(cells)}{',' if len(cells) == 1 else ''} = {w.const(cells_of)}({back})")
        grads = [gradient(w, params[i], cells[i], vals[i]) for i in nums]
        out = grads[0] if single else f"({', '.join(grads)},)"
        w.emit(f"return {out}" if only_gradient else f"return {v}, {out}")
    with w.block("except Exception:"):
        w.emit("pass")
    w.emit(f"return {g}(*args, **kwargs)")
    return w.function("call")


def vjp_call(forward, backward, cells_of, params, result, general):
    """call(*primals) -> (value, vjp_fn) from the compiled forward pass (params
    -> (value, backpropagator)) and backward pass ((value, backpropagator), ctg)
    -> backward result; vjp_fn(ct) -> one gradient per argument. `general`:
    the general vjp (primals -> (value, vjp_fn)), for the forward pass and, with
    the cotangent, for the backward pass."""
    w = Writer()
    g = w.const(general)
    names = _head(w, len(params), g)
    vals = [w.tmp() for _ in params]
    pair, out = w.tmp(), w.tmp()
    fail = w.const(_FAIL)
    w.emit(f"{out} = {fail}")
    with w.block("try:"):
        got = [argument(w, t, a) for t, a in zip(params, names)]
        if vals:
            w.emit(f"{', '.join(vals)}{',' if len(vals) == 1 else ''} = "
                   f"{', '.join(got)}{',' if len(got) == 1 else ''}")
        run(w, pair, forward, ", ".join(vals))
        v = w.tmp()
        w.emit(f"{v} = {pair}[0]")
        w.emit(f"{out} = {value(w, result, v)}")
    with w.block("except Exception:"):
        w.emit("pass")
    with w.block(f"if {out} is {fail}:"):  # (outside the handler: no chained exception)
        w.emit(f"return {g}(*args, **kwargs)")
    ct = w.tmp()
    with w.block(f"def vjp_fn({ct}):"):
        w.emit(f"return back({ct}, {', '.join([pair] + vals)}, args)")
    w.emit(f"return {out}, vjp_fn")
    w.depth = 0
    # the backward pass
    ct, pair, args = w.tmp(), w.tmp(), w.tmp()
    vals = [w.tmp() for _ in params]
    with w.block(f"def back({', '.join([ct, pair] + vals + [args])}):"):
        with w.block("try:"):
            p = w.tmp()
            w.emit(f"{p} = {pair}[0]")
            c = cotangent(w, result, ct, p)
            bk = w.tmp()
            run(w, bk, backward, f"{pair}, {c}")
            cells = [w.tmp() for _ in params]
            if cells:
                w.emit(f"{', '.join(cells)}{',' if len(cells) == 1 else ''} = "
                       f"{w.const(cells_of)}({bk})")
            grads = [gradient(w, t, x, q) for t, x, q in zip(params, cells, vals)]
            w.emit(f"return ({', '.join(grads)}{',' if len(grads) == 1 else ''})")
        with w.block("except Exception:"):
            w.emit("pass")
        w.emit(f"return {g}(*{args})[1]({ct})")
    return w.function("call")


def jvp_call(entry, params, result, general):
    """call(primals, tangents) -> (value, tangent) from the compiled forward
    derivative `entry` (x1, dx1, x2, dx2, ...) -> (value, tangent)."""
    w = Writer()
    g, fail = w.const(general), w.const(_FAIL)
    n = len(params)
    seq = "(type({0}) is tuple or type({0}) is list) and len({0}) == {1}"
    w.emit("def call(primals, tangents):")
    w.depth += 1
    with w.block(f"if not ({seq.format('primals', n)} and {seq.format('tangents', n)}):"):
        w.emit(f"return {g}(primals, tangents)")
    names, tans = [f"a{i}" for i in range(n)], [f"d{i}" for i in range(n)]
    if n:
        w.emit(f"{', '.join(names)}{',' if n == 1 else ''} = primals")
        w.emit(f"{', '.join(tans)}{',' if n == 1 else ''} = tangents")
    out = w.tmp()
    w.emit(f"{out} = {fail}")
    with w.block("try:"):
        vals = [argument(w, ty, a) for ty, a in zip(params, names)]
        dts = [tangent(w, ty, d, v) for ty, d, v in zip(params, tans, vals)]
        v, dt = w.tmp(), w.tmp()
        both = ", ".join(x for pair in zip(vals, dts) for x in pair)
        run(w, f"{v}, {dt}", entry, both)
        tv = tangent_out(w, result, dt, v)
        w.emit(f"{out} = ({value(w, result, v)}, {tv})")
    with w.block("except Exception:"):
        w.emit("pass")
    with w.block(f"if {out} is {fail}:"):  # (outside the handler: no chained exception)
        w.emit(f"return {g}(primals, tangents)")
    w.emit(f"return {out}")
    return w.function("call")
