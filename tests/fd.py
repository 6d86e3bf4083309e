"""Finite-difference helpers for gradient tests: central differences of the
scalar <ctg, f(x)> with respect to every real leaf of the arguments."""

from __future__ import annotations

import numpy as np

from chad.types import ArrayT, Prod, Real, Sum, Type
from chad.values import Inj


def real_leaves(ty: Type, v, path=()):
    """Paths to the real leaves of value v : ty."""
    match ty:
        case Real():
            yield path
        case Prod(a, b):
            yield from real_leaves(a, v[0], path + (0,))
            yield from real_leaves(b, v[1], path + (1,))
        case Sum(a, b):
            yield from real_leaves(a if v.side == 0 else b, v.value, path + ("inj",))
        case ArrayT(e):
            for i, x in enumerate(v):
                yield from real_leaves(e, x, path + (i,))


def get(v, path):
    for p in path:
        v = v.value if p == "inj" else v[p]
    return v


def perturb(ty: Type, v, path, h: float):
    if not path:
        return v + h
    p, rest = path[0], path[1:]
    match ty:
        case Prod(a, b):
            return (perturb(a, v[0], rest, h), v[1]) if p == 0 else (v[0], perturb(b, v[1], rest, h))
        case Sum(a, b):
            return Inj(v.side, perturb(a if v.side == 0 else b, v.value, rest, h))
        case ArrayT(e):
            if isinstance(v, np.ndarray):
                w = v.copy()
                w[p] = perturb(e, w[p], rest, h)
                return w
            return tuple(perturb(e, x, rest, h) if i == p else x for i, x in enumerate(v))
    raise TypeError(ty)


def pair_with(ty: Type, ctg, v) -> float | None:
    """<ctg, v> for a dense-or-sparse ctg; None if v's sum side differs from ctg's."""
    if ctg is None:
        return 0.0
    match ty:
        case Real():
            return float(ctg) * float(v)
        case Prod(a, b):
            x, y = pair_with(a, ctg[0], v[0]), pair_with(b, ctg[1], v[1])
            return None if x is None or y is None else x + y
        case Sum(a, b):
            if ctg.side != v.side:
                return None
            return pair_with(a if v.side == 0 else b, ctg.value, v.value)
        case ArrayT(e):
            total = 0.0
            for c, x in zip(ctg, v):
                r = pair_with(e, c, x)
                if r is None:
                    return None
                total += r
            return total
    return 0.0


def fd_gradient(f, params, args, ctg, result_ty, h=1e-5, tol=1e-3):
    """{(param index, path): derivative} by central differences, or None when the
    program is not differentiable there: a sum side flips, or the two one-sided
    differences disagree (a kink or a jump, e.g. a `sign` tie at 0)."""
    out = {}
    centre = pair_with(result_ty, ctg, f(list(args)))
    if centre is None:
        return None
    for i, p in enumerate(params):
        for path in real_leaves(p.ty, args[i]):
            vals = []
            for s in (h, -h):
                a2 = list(args)
                a2[i] = perturb(p.ty, args[i], path, s)
                r = pair_with(result_ty, ctg, f(a2))
                if r is None:
                    return None
                vals.append(r)
            forward, backward = (vals[0] - centre) / h, (centre - vals[1]) / h
            if abs(forward - backward) > tol * (1 + abs(forward) + abs(backward)):
                return None
            out[(i, path)] = (vals[0] - vals[1]) / (2 * h)
    return out


def near_sign_tie(body, env, defs=None, eps=1e-3) -> bool:
    """True when some `sign e` in the evaluation of body sees |e| < eps: there the
    derivative follows the branch taken, and finite differences cross branches."""
    from chad.terms import Prim
    from chad.costmodel.evaluate import Evaluator

    seen = []

    class Watch(Evaluator):
        def eval(self, t, env):
            if isinstance(t, Prim) and t.op == "SIGN":
                v, _ = super().eval(t.arg, env)
                seen.append(v)
            return super().eval(t, env)

    Watch(defs).eval(body, dict(env))
    return any(abs(v) < eps for v in seen)


def assert_gradient_matches_fd(chad, prog, args, rel=1e-6, abs=1e-6):
    """chad.grad of the last def of prog at args (ctg 1.0, result R) against central
    differences of its compiled primal."""
    import pytest

    d = prog.find(None)
    f = chad.primal(prog)
    fd = fd_gradient(lambda a: f(*a), d.params, list(args), 1.0, d.result)
    assert fd, "not differentiable at these arguments"
    _, grads = chad.grad(prog)(*args)
    for (i, path), expected in fd.items():
        got = grads[i]
        for step in path:
            got = got.value if step == "inj" else got[step]
        assert got == pytest.approx(expected, rel=rel, abs=abs), (i, path)


EVMS = ("spec", "map", "array", "parallel")


def assert_same_on_every_runtime(prog, args, ctg=1.0):
    """The gradient's step count and its result are the same on every EVM (the
    formalisation's LACM and the three runtimes)."""
    from chad.costmodel.measure import measure

    ms = [measure(prog, args, ctg, evm=e) for e in EVMS]
    assert len({m.gradient_steps for m in ms}) == 1, [m.gradient_steps for m in ms]
    assert len({repr(m.result) for m in ms}) == 1, [m.result for m in ms]
