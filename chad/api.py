"""The library API: `import chad` then `chad.grad(...)`, `chad.vjp(...)`,
`chad.primal(...)`, `chad.cost(...)`, `chad.run(...)`, and the JAX-shaped
`chad.value_and_grad`, `chad.jacrev`, `chad.jvp`, `chad.jacfwd`, `chad.hessian`,
`chad.resolve`, `chad.complexity` (at the end) for `@chad.function`s (chad/frontend/) and text programs alike. Loading,
running and the compiled primal are chad/api_core.py's, re-exported here.

`grad`, `vjp` and `primal` run compiled code by default (`backend="compiled"`,
chad/compile/): generated Python, compiled once per (program, def, transform,
runtime) and cached. `backend="interp"` runs the counting evaluator, the
reference (chad/costmodel/evaluate.py); `run` and `cost` always do, since they
report steps. Both backends give the same values and gradients. A run-time
error of compiled code is reported as the interpreter reports it (with the
program's location): the call is replayed on the interpreter to find it.

Programs may be given as text (parsed and type checked here) or as a parsed
`Program`. Arguments are Python values or their JSON form (numbers, lists for
pairs and arrays, {"inl": v} for sums). Gradients come back dense, as Python
values: floats, tuples for pairs, `Inj` for sums, numpy arrays for Array R.
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

import numpy as np
from attrs import frozen

from chad.costmodel.evaluate import Evaluator
from chad.costmodel.measure import (  # noqa: F401  (the TH2 numbers, re-exported here)
    C_CONST, C_PARAMS, C_PRIMAL, UNSET, CostReport, measure, th2_bound,
)

from . import forward_api
from .api_core import (  # noqa: F401  (re-exported: the library API)
    BACKENDS, _backend, _call, _decoder, _defs, _replay, decode_args, load,
    make_evm, primal,
)
from .api_core import run as _run
from .compile import backend as compiled
from .compile import convert
from .cotangents import ctg_from_json, densify
from .deep import run_deep
from .errors import ChadError, UsageError
from .frontend import plans
from .frontend.annotations import TupleT
from .frontend.annotations import python_name as _python_name
from .frontend.function import ChadFunction, from_text, with_python_source
from .frontend.values import cotangent_encoder, decoder, tangent_encoder
from .terms import Def, Program
from .transform.registry import get_transform
from .types import BOOL, ArrayT, R, Real, Z, is_first_order



def run(program, args: Sequence[Any], fn: str | None = None) -> tuple[Any, int]:
    """Evaluate def `fn` (default: the last) on args: (value, steps). For a
    `@chad.function` f, `run(f, args)` takes the Python arguments and gives the
    value as a call of f does."""
    if isinstance(program, ChadFunction):
        func, fn = program, _no_fn(program, fn)
        value, steps = _run(func.program, func.encode_args(args), func.def_name)
        return decoder(func.result_type)(value), steps
    return _run(program, args, fn)


@frozen
class VJPResult:
    value: Any
    primal_steps_forward: int  # steps of the forward (primal) pass of the derivative


def vjp(program, *args, **kwargs):
    """Two forms.

    `vjp(prog, fn=None, evm="array", transform="efficient", backend=None,
    simplify=True)(*args)`, prog a text program or a `Program`, gives (value,
    backprop); backprop(ctg) gives the dense gradient, one cotangent per
    parameter. ctg may be sparse (None = zero).

    `vjp(f, *primals)`, f a `@chad.function` (or `chad.from_text(...)`), is
    JAX's: (out, vjp_fn), vjp_fn(cotangent) -> one gradient per argument, as
    numpy values in the arguments' shapes. Keywords: backend, evm, transform.

    backend: "compiled" (the default, except with evm="spec") or "interp"."""
    if isinstance(program, ChadFunction):
        return _vjp_of(program, args, **kwargs)
    return _text_vjp(program, *args, **kwargs)


def _text_vjp(program: str | Program, fn: str | None = None, evm: str = "array",
              transform: str = "efficient", backend: str | None = None, simplify: bool = True):
    backend = _backend(backend, evm)
    prog = load(program)
    d = prog.find(fn)
    spec = get_transform(transform)
    _check_first_order(d)
    if backend == "compiled":
        return _compiled_vjp(prog, d, spec, evm, simplify)
    forward = run_deep(spec.forward_term, d)

    def at(*args):
        env = decode_args(d, args)
        ev = Evaluator(_defs(prog), make_evm(evm))
        (value, bp), _cf = run_deep(ev.eval, forward, dict(env))

        def backprop(ctg=UNSET):
            ct = _decode_ctg(d, ctg, value)
            cells, _steps = run_deep(spec.backward, ev, bp, ct, d)
            return tuple(densify(p.ty, env[p.name], c) for p, c in zip(d.params, cells))

        return value, backprop

    return at


def grad(program, *args, **kwargs):
    """Two forms.

    `grad(prog, fn=None, evm="array", transform="efficient", backend=None,
    simplify=True)(*args, ctg=None)`, prog a text program or a `Program`, gives
    (value, gradients), one gradient per parameter.

    `grad(f, argnums=0)`, f a `@chad.function` (or `chad.from_text(...)`) with a
    float result, is JAX's: `grad(f)(*args)` is the gradient with respect to
    argument `argnums` (a tuple of them for a tuple of ints), as numpy values in
    the arguments' shapes. Keywords: backend, evm, transform.

    backend: "compiled" (the default, except with evm="spec") or "interp"."""
    if isinstance(program, ChadFunction):
        return _value_and_grad(program, *args, only_gradient=True, **kwargs)
    return _text_grad(program, *args, **kwargs)


def _text_grad(program: str | Program, fn: str | None = None, evm: str = "array",
               transform: str = "efficient", backend: str | None = None, simplify: bool = True):
    backend = _backend(backend, evm)
    prog = load(program)
    d = prog.find(fn)
    if backend == "compiled" and convert.value_independent(d.result):
        _check_first_order(d)
        return _compiled_grad(prog, d, get_transform(transform), evm, simplify)
    f = _text_vjp(prog, fn, evm, transform, backend, simplify)

    def at(*args, ctg=UNSET):
        value, backprop = f(*args)
        return value, backprop(ctg)

    return at


# ------------------------------------------------------------------ the compiled backend

def _decode_ctg(d: Def, ctg, value):
    ctg = _default_ctg(d, ctg)
    if ctg is UNSET:
        raise UsageError(f"a cotangent is required for a result of type {d.result}")
    return ctg_from_json(d.result, ctg, "ctg", value)


def _compiled_grad(prog: Program, d: Def, spec, evm: str, simplify: bool):
    """The one-term gradient, for results whose cotangent decodes without the
    value (R, Z, (), and pairs of them)."""
    module = compiled.gradient_module(prog, d, spec.name, evm, simplify)
    entry, decode, dense = module.entry, _decoder(d, copy=False), convert.gradients(d.params)
    cells_of, ctg_of = spec.cells_of, convert.cotangent(d.result)
    real = isinstance(d.result, Real)
    located = not compiled.rewrites(prog, False, spec.name, simplify)

    def at(*args, ctg=UNSET):
        vals = decode(args)
        if ctg is UNSET:
            if not real:
                raise UsageError(f"a cotangent is required for a result of type {d.result}")
            ct = 1.0
        else:
            ct = ctg_of(ctg)
        try:
            value, back = _call(entry, *vals, ct)
        except Exception as e:  # without a location: replayed on the reference
            _replay(e, f"the gradient of {d.name}",
                    lambda: grad(prog, d.name, evm, spec.name, "interp")(*args, ctg=ct), located)
        return value, dense(vals, cells_of(back))

    return at


def _compiled_vjp(prog: Program, d: Def, spec, evm: str, simplify: bool):
    forward, backward = compiled.vjp_modules(prog, d, spec.name, evm, simplify)
    fwd, bwd, decode = forward.entry, backward.entry, _decoder(d)
    dense = convert.gradients(d.params)
    cells_of = spec.cells_of
    located = not compiled.rewrites(prog, False, spec.name, simplify)

    def at(*args):
        vals = decode(args)
        try:
            pair = _call(fwd, *vals)
        except Exception as e:  # without a location: replayed on the reference
            _replay(e, f"the forward pass of {d.name}",
                    lambda: vjp(prog, d.name, evm, spec.name, "interp")(*args), located)
        value = pair[0]

        def backprop(ctg=UNSET):
            ct = _decode_ctg(d, ctg, value)
            try:
                back = _call(bwd, pair, ct)
            except Exception as e:  # without a location: replayed on the reference
                _replay(e, f"the backward pass of {d.name}",
                        lambda: vjp(prog, d.name, evm, spec.name, "interp")(*args)[1](ct),
                        located)
            return dense(vals, cells_of(back))

        return value, backprop

    return at


def cost(program: str | Program, args: Sequence[Any], ctg: Any = UNSET, fn: str | None = None,
         transform: str = "efficient", evm: str = "array") -> CostReport:
    """Primal steps, gradient steps (TH2's left side) and the TH2 bound: the
    measurement of chad/costmodel/measure.py, on the arguments checked here.
    For a `@chad.function` f, `cost(f, args)` takes the Python arguments (and a
    cotangent in the result's shape)."""
    if isinstance(program, ChadFunction):
        func, fn = program, _no_fn(program, fn)
        func._prepare()
        if ctg is not UNSET:
            ctg = cotangent_encoder(func.result_type)(ctg, "ctg")
        return cost(func.program, func.encode_args(args), ctg, func.def_name, transform, evm)
    prog = load(program)
    d = prog.find(fn)
    _check_first_order(d)
    return measure(prog, decode_args(d, args), ctg, transform, evm, fn).report()


def _default_ctg(d: Def, ctg):
    """The default cotangent: 1.0 for a result of type R."""
    if ctg is UNSET and isinstance(d.result, Real):
        return 1.0
    return ctg


def _check_first_order(d: Def) -> None:
    for p in d.params:
        if not is_first_order(p.ty):
            raise UsageError(f"cannot differentiate {d.name}: parameter {p.name} has a function type {p.ty}")
    if not is_first_order(d.result):
        raise UsageError(f"cannot differentiate {d.name}: its result type {d.result} is a function type")


# ------------------------------------------------------------------ the JAX-shaped API
#
# For a @chad.function (chad/frontend/) or `from_text(program, fn)`: arguments and
# results are Python values (floats, ints, bools, numpy arrays, tuples), gradients
# come back in the arguments' shapes (an int's is None). Built on `grad` and `vjp`
# above: the compiled backend by default, once per function. On the compiled
# backend, value_and_grad/grad, vjp and jvp call the compiled entries through a
# call plan (chad/frontend/plans.py: Python values straight to the compiled
# code's and back), cached per function, over the general path built here
# (the front end's converters, then the text API), which it falls back to for
# keyword arguments and for any error, to report it.


def resolve(f, fn: str | None = None) -> tuple[Program, str]:
    """(the checked program, the def name) of a decorated function, of
    `from_text(...)`, or of a text program or `Program` (def `fn`, default the last)."""
    func = _as_function(f, fn)
    func._prepare()
    return func.program, func.def_name


def _as_function(f, fn: str | None = None) -> ChadFunction:
    if isinstance(f, ChadFunction):
        if fn is not None:
            raise UsageError("fn= names a def of a text program; a decorated function is one def")
        return f
    if isinstance(f, (str, Program)):
        return from_text(f, fn)
    raise UsageError(f"expected a @chad.function, chad.from_text(...) or a program, "
                     f"got {type(f).__name__}")


def _argnums(func: ChadFunction, argnums) -> tuple[tuple[int, ...], bool]:
    single = isinstance(argnums, int) and not isinstance(argnums, bool)
    nums = (argnums,) if single else argnums
    if not isinstance(nums, tuple) or not nums or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in nums):
        raise UsageError(f"argnums must be an int or a non-empty tuple of ints, got {argnums!r}")
    n = len(func.param_names)
    for i in nums:
        if not -n <= i < n:
            raise UsageError(f"argnums={argnums!r}: {func.def_name} has {n} argument(s)")
    nums = tuple(i % n for i in nums)
    if len(set(nums)) != len(nums):
        raise UsageError(f"argnums={argnums!r} names an argument twice")
    for i in nums:
        if not _has_real(func.param_types[i]):
            raise UsageError(f"argnums={argnums!r}: argument {func.param_names[i]} has no float "
                             "in it, so it has no gradient (leave it out of argnums)")
    return nums, single


def _has_real(ty) -> bool:
    if ty == R:
        return True
    if isinstance(ty, TupleT):
        return any(_has_real(e) for e in ty.elems)
    if isinstance(ty, ArrayT):
        return _has_real(ty.elem)
    return False


def value_and_grad(f, argnums=0, *, fn: str | None = None, backend: str | None = None,
                   evm: str = "array", transform: str = "efficient"):
    """`value_and_grad(f, argnums=0)(*args)` gives (value, gradient) of a function
    with a float result; the gradient as `grad(f, argnums)` gives it."""
    return _value_and_grad(f, argnums, fn=fn, backend=backend, evm=evm, transform=transform)


def _value_and_grad(f, argnums=0, *, fn: str | None = None, backend: str | None = None,
                    evm: str = "array", transform: str = "efficient",
                    only_gradient: bool = False):
    """value_and_grad, or grad (only_gradient): on the compiled backend the call
    plan (chad/frontend/plans.py), built once per function and arguments of
    this call, over the general path below."""
    func = _as_function(f, fn)
    func._prepare()
    if func.result_type != R:
        raise UsageError(f"value_and_grad and grad need a float result; {func.def_name} returns "
                         f"{_py(func.result_type)}: use chad.vjp or chad.jacrev")
    nums, single = _argnums(func, argnums)
    key = ("grad", nums, single, only_gradient, backend, evm, transform)
    plan = func._api_cache.get(key)
    if plan is None:
        general = _general_value_and_grad(func, nums, single, backend, evm, transform)
        if only_gradient:
            vg = general

            def general(*args, **kwargs):
                return vg(*args, **kwargs)[1]
        plan = general
        if _backend(backend, evm) == "compiled":
            d = func.program.find(func.def_name)
            spec = get_transform(transform)
            module = compiled.gradient_module(func.program, d, spec.name, evm)
            plan = plans.gradient_call(module.entry, spec.cells_of, func.param_types, nums,
                                       single, only_gradient, general)
        func._api_cache[key] = plan
    return plan


def _general_value_and_grad(func: ChadFunction, nums, single: bool, backend, evm: str,
                            transform: str):
    """value_and_grad by the general path: the front end's converters, then the
    text API's gradient."""
    g = _text_grad(func.program, func.def_name, evm, transform, backend)
    decs = [decoder(func.param_types[i], gradient=True) for i in nums]

    encode = func.encode_args
    func._converters()
    if func._all_real:  # floats in, floats out: chad's own values, nothing to convert
        n, whole = len(func.param_names), nums == tuple(range(len(func.param_names)))

        def reals(*args, **kwargs):
            if kwargs or len(args) != n:
                args = encode(args, kwargs)
            else:
                for a in args:
                    if type(a) is not float:
                        args = encode(args)
                        break
            try:
                value, grads = g(*args)
            except ChadError as e:
                raise with_python_source(e) from None
            if single:
                return value, grads[nums[0]]
            return value, (grads if whole else tuple([grads[i] for i in nums]))

        return reals
    if single:
        (d,), (i,) = decs, nums

        def one(*args, **kwargs):
            value, grads = g(*encode(args, kwargs))
            return value, d(grads[i])

        return _located(one)

    def at(*args, **kwargs):
        value, grads = g(*encode(args, kwargs))
        return value, tuple([d(grads[i]) for d, i in zip(decs, nums)])

    return _located(at)


def _located(fn):
    """fn, its errors shown with the Python source line of their position
    (a runtime error of a decorated function is at a line of its file)."""
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ChadError as e:
            raise with_python_source(e) from None

    return call


def _vjp_of(func: ChadFunction, primals, backend: str | None = None, evm: str = "array",
            transform: str = "efficient"):
    func._prepare()
    key = ("vjp", backend, evm, transform)
    plan = func._api_cache.get(key)
    if plan is None:  # built once per function: vjp(f, ...) is called per point
        general = functools.partial(_general_vjp, func, (
            _text_vjp(func.program, func.def_name, evm, transform, backend),
            cotangent_encoder(func.result_type),
            [decoder(t, gradient=True) for t in func.param_types], decoder(func.result_type)))
        plan = general
        if _backend(backend, evm) == "compiled":
            d = func.program.find(func.def_name)
            spec = get_transform(transform)
            forward, backward = compiled.vjp_modules(func.program, d, spec.name, evm)
            plan = plans.vjp_call(forward.entry, backward.entry, spec.cells_of,
                                  func.param_types, func.result_type, general)
        func._api_cache[key] = plan
    return plan(*primals)


def _general_vjp(func: ChadFunction, cached, *primals):
    """vjp by the general path: the front end's converters, then the text API's."""
    back_of, ct_of, decs, decode = cached
    value, backprop = _located(back_of)(*func.encode_args(primals))

    def vjp_fn(ct):
        grads = backprop(ct_of(ct, "cotangent"))
        return tuple([d(g) for d, g in zip(decs, grads)])

    return decode(value), _located(vjp_fn)


def jacrev(f, argnums=0, *, fn: str | None = None, backend: str | None = None,
           evm: str = "array", transform: str = "efficient"):
    """`jacrev(f, argnums=0)(*args)`: the Jacobian by reverse mode, one backward
    pass per real in the result. Its shape is the result's shape followed by the
    argument's (JAX's convention): a float result gives the gradient, an array
    result of length m and an array argument of length n an m x n matrix, a
    tuple result a tuple (per argument inside it when argnums is a tuple)."""
    func = _as_function(f, fn)
    func._prepare()
    nums, single = _argnums(func, argnums)
    back_of = _text_vjp(func.program, func.def_name, evm, transform, backend)
    out_ty = func.result_type
    ct_of = cotangent_encoder(out_ty)
    decs = [decoder(t, gradient=True) for t in func.param_types]

    def at(*args, **kwargs):
        value, backprop = back_of(*func.encode_args(args, kwargs))
        out = decoder(out_ty)(value)

        def grads(ct):
            gs = backprop(ct_of(ct, "cotangent"))
            return [d(g) for d, g in zip(decs, gs)]

        tree = _jac_tree(out_ty, out, lambda c: c, grads)
        per_arg = [_project(tree, j) for j in nums]
        if single:
            return per_arg[0]
        if isinstance(out_ty, TupleT):  # JAX: the result's structure outside
            return tuple(tuple(p[k] for p in per_arg) for k in range(len(out_ty.elems)))
        return tuple(per_arg)

    return _located(at)


def jvp(f, primals, tangents, *, fn: str | None = None, backend: str | None = None):
    """JAX's `jvp(f, primals, tangents) -> (value, tangent)`: the value of f at
    `primals` and its derivative applied to `tangents` (one per argument, in the
    argument's shape; None for an int or a bool), by CHAD's forward transformation
    (chad/transform/forward.py, run by chad/forward_api.py)."""
    func = _as_function(f, fn)
    func._prepare()
    key = ("jvp", backend)
    plan = func._api_cache.get(key)
    if plan is None:  # built once per function: jvp(f, ...) is called per point
        general = functools.partial(_general_jvp, func, backend)
        plan = general
        if forward_api._backend(backend) == "compiled":
            d = func.program.find(func.def_name)
            forward_api._check_first_order(d)
            entry = compiled.jvp_module(func.program, d).entry
            plan = plans.jvp_call(entry, func.param_types, func.result_type, general)
        func._api_cache[key] = plan
    return plan(primals, tangents)


def _general_jvp(func: ChadFunction, backend: str | None, primals, tangents):
    """jvp by the general path: the front end's converters, then forward mode's."""
    primals, tangents = tuple(primals), tuple(tangents)
    if len(tangents) != len(primals):
        raise UsageError(f"jvp: {len(primals)} primal(s) but {len(tangents)} tangent(s)")
    args = func.encode_args(primals)
    tans = [tangent_encoder(t)(x, f"tangents[{i}]")
            for i, (t, x) in enumerate(zip(func.param_types, tangents))]
    value, tangent = _located(forward_api.run_jvp)(func.program, func.def_name, args, tans,
                                                    backend)
    out = func.result_type
    return decoder(out)(value), decoder(out, gradient=True)(tangent)


def jacfwd(f, argnums=0, *, fn: str | None = None, backend: str | None = None):
    """`jacfwd(f, argnums=0)(*args)`: the Jacobian by forward mode, one jvp per
    input direction; float and array-of-float arguments and results, shaped as
    `jacrev` shapes them (chad/forward_api.py)."""
    func = _as_function(f, fn)
    func._prepare()
    nums, single = _argnums(func, argnums)
    inner = forward_api.jacfwd(func.program, func.def_name, nums[0] if single else nums,
                               backend=backend)
    return _located(lambda *args, **kwargs: inner(*func.encode_args(args, kwargs)))


def hessian(f, argnums: int = 0, *, fn: str | None = None, backend: str | None = None):
    """`hessian(f, argnums=0)(*args)`: second derivatives of a float-valued
    function in one float or array argument, forward over forward
    (chad/forward_api.py; forward over reverse is not provided)."""
    func = _as_function(f, fn)
    func._prepare()
    nums, single = _argnums(func, argnums)
    if not single:
        raise UsageError(f"hessian: argnums must be one int, got {argnums!r}")
    inner = forward_api.hessian(func.program, func.def_name, nums[0], backend=backend)
    return _located(lambda *args, **kwargs: inner(*func.encode_args(args, kwargs)))


def _jac_tree(ty, val, place, grads):
    """The gradients of every real of the result (place(c): the whole result's
    cotangent with c at this part), as a tree: ("R", grads) ("T", parts)
    ("A", parts) ("N",)."""
    if ty == R:
        return ("R", grads(place(1.0)))
    if ty in (Z, BOOL) or not _has_real(ty):
        return ("N",)
    if isinstance(ty, TupleT):
        n = len(ty.elems)
        return ("T", [_jac_tree(e, val[k], lambda c, k=k: place(
            tuple(c if j == k else None for j in range(n))), grads)
            for k, e in enumerate(ty.elems)])
    m = len(val)

    def at(i, c):
        if ty.elem == R:
            z = np.zeros(m)
            z[i] = c
            return z
        return [c if j == i else None for j in range(m)]

    return ("A", [_jac_tree(ty.elem, val[i], lambda c, i=i: place(at(i, c)), grads)
                  for i in range(m)])


def _project(tree, j: int):
    kind = tree[0]
    if kind == "R":
        return tree[1][j]
    if kind == "N":
        return None
    if kind == "T":
        return tuple(_project(t, j) for t in tree[1])
    return _stack([_project(t, j) for t in tree[1]])


def _stack(parts):
    if not parts or all(p is None for p in parts):
        return None if parts else np.zeros((0,))
    if isinstance(parts[0], tuple):
        return tuple(_stack([p[k] for p in parts]) for k in range(len(parts[0])))
    return np.stack([np.asarray(p, dtype=np.float64) for p in parts])


def _py(ty) -> str:
    return _python_name(ty)


def _no_fn(func: ChadFunction, fn) -> None:
    if fn is not None:
        raise UsageError("fn= names a def of a text program; a decorated function is one def")
    func._prepare()


def complexity(f, make_args, sizes: Sequence[int] = (1, 2, 3, 4, 5),
               heldout: Sequence[int] = (7, 9), transform: str = "efficient", evm: str = "array"):
    """The complexity check of a function over a family of inputs: `make_args(n)`
    gives the (Python) arguments of size n. Measures primal and gradient steps at
    every size, fits each exactly as a function of n (verified at the held-back
    sizes) and lets z3 decide whether gradient(n) <= c*primal(n) + c' + ... for
    every n (chad/costmodel/families.py `study`; docs/complexity-checker.md).
    Returns a FamilyResult: `.status` ("bounded" or "refuted"), `.verdict`,
    `.render()`. Python functions are outside the formalisation's first-order
    language, so the verdict is z3's on the fitted forms, not a proof."""
    from .costmodel.families import Family, Instance, study  # (z3, only when asked)

    func = _as_function(f)
    func._prepare()
    if func.result_type != R:
        raise UsageError(f"complexity needs a float result; {func.def_name} returns "
                         f"{_py(func.result_type)}")
    sizes, heldout = tuple(sizes), tuple(heldout)
    if len(sizes) < 3 or set(sizes) & set(heldout):
        raise UsageError("complexity needs at least three sizes, distinct from the held-back ones")

    def make(n: int) -> Instance:
        args = make_args(n)
        if not isinstance(args, (tuple, list)):
            raise UsageError(f"make_args({n}) must give a tuple of arguments")
        return Instance(n, func.program, func.encode_args(tuple(args)), UNSET)

    family = Family(func.def_name, f"{func.def_name} on make_args(n)", make, sizes, heldout,
                    (transform,), requires="python",
                    reference="a function of the Python front end")
    return study(family, transform, evm)
