"""The call plans of decorated functions (chad/frontend/plans.py): calling a
function, its gradient, its vjp and its jvp convert Python values straight to the
compiled code's and back, with the same results, bit for bit, as the general
path (the front end's converters, then the text API) and as the text API on
the translated program; the plan itself handles every argument of the right
types (it never falls back); a wrong argument gives the general path's error;
the generated source depends on the types alone, never on a name."""

from __future__ import annotations

import importlib.util
import math
import random
import re
import struct

import numpy as np
import pytest

import chad
from chad import api, api_core, forward_api
from chad.compile import backend
from chad.errors import ChadError
from chad.frontend import plans
from chad.frontend.values import cotangent_encoder, decoder, tangent_encoder
from chad.transform.registry import get_transform
from chad.types import R
from benchmarks.compiled_suite import cases as suite_cases
from benchmarks.compiled_suite import python_versions

EFFICIENT = get_transform("efficient")


def identical(a, b) -> bool:
    """The same Python value bit for bit: types, structure, floats' bits, arrays'
    dtypes, shapes and bytes."""
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    return a == b


def _forbidden(*args, **kwargs):
    raise AssertionError("the call plan fell back to the general path")


def fast_plans(f):
    """The primal, gradient (every argument with a float) and vjp plans of f,
    with no general path to fall back to."""
    prog, name = chad.resolve(f)
    d = prog.find(name)
    ptys, rty = f.param_types, f.result_type
    out = {"primal": plans.primal(api_core.compiled_primal(prog, name), ptys, rty, _forbidden)}
    nums = tuple(i for i, t in enumerate(ptys) if api._has_real(t))
    if rty == R and nums:
        entry = backend.gradient_module(prog, d).entry
        out["grad"] = (nums, plans.gradient_call(entry, EFFICIENT.cells_of, ptys, nums, False,
                                                 False, _forbidden))
    out["jvp"] = plans.jvp_call(backend.jvp_module(prog, d).entry, ptys, rty, _forbidden)
    fwd, bwd = backend.vjp_modules(prog, d)
    out["vjp"] = plans.vjp_call(fwd.entry, bwd.entry, EFFICIENT.cells_of, ptys, rty, _forbidden)
    return out


def general_vjp(f, args):
    return api._general_vjp(f, (api._text_vjp(*chad.resolve(f)), cotangent_encoder(
        f.result_type), [decoder(t, gradient=True) for t in f.param_types],
        decoder(f.result_type)), *args)


def check_against_general(f, args, ct, tangents=None):
    """Each plan, on args, against the general path and the text API (and,
    given tangents, the jvp's)."""
    fast = fast_plans(f)
    value = fast["primal"](*args)
    assert identical(value, f.general_call(*args))
    prog, name = chad.resolve(f)
    vals = f.encode_args(args)
    assert identical(value, decoder(f.result_type)(chad.primal(prog, name)(*vals)))
    assert identical(value, f(*args))  # the plan f's calls use
    if "grad" in fast:
        nums, plan = fast["grad"]
        got = plan(*args)
        want = api._general_value_and_grad(f, nums, False, None, "array", "efficient")(*args)
        assert identical(got, want)
        v, grads = chad.grad(prog, name)(*vals)
        assert identical(got, (v, tuple(decoder(f.param_types[i], gradient=True)(grads[i])
                                        for i in nums)))
        assert identical(got, chad.value_and_grad(f, argnums=nums)(*args))
    out, vjp_fn = fast["vjp"](*args)
    out2, vjp_fn2 = general_vjp(f, args)
    assert identical(out, out2) and identical(out, value)
    assert identical(vjp_fn(ct), vjp_fn2(ct))
    out3, vjp_fn3 = chad.vjp(f, *args)
    assert identical(out3, out) and identical(vjp_fn3(ct), vjp_fn(ct))
    if tangents is not None:
        got = fast["jvp"](args, tangents)
        assert identical(got, api._general_jvp(f, None, args, tangents))
        assert identical(got, chad.jvp(f, args, tangents))
        assert identical(got[0], value)
        pv, pt = forward_api.jvp(prog, name, vals, [tangent_encoder(t)(x, "t") for t, x
                                                     in zip(f.param_types, tangents)])
        assert identical(got, (decoder(f.result_type)(pv),
                               decoder(f.result_type, gradient=True)(pt)))


# ------------------------------------------------------------ the benchmark's programs

VERSIONS = python_versions.versions(quick=True)
CASES = {c.key: c for c in suite_cases(quick=True)}


@pytest.mark.parametrize("version", VERSIONS, ids=[v.key for v in VERSIONS])
def test_bench_programs_plans_agree_bit_for_bit(version):
    ct = version.ctg if version.ctg is not None else 1.0
    rng = np.random.default_rng(3)
    tangents = tuple(rng.standard_normal(np.shape(a)) if isinstance(a, np.ndarray) else
                     tuple(rng.standard_normal(len(a)).tolist()) if isinstance(a, tuple) else
                     float(rng.standard_normal()) for a in version.args)
    check_against_general(version.fn, version.args, ct, tangents)


@pytest.mark.parametrize("version", [v for v in VERSIONS if v.same],
                         ids=[v.key for v in VERSIONS if v.same])
def test_decorated_equals_the_suite_text_program(version):
    """Where the Python is written as the text is, the decorated function's value
    and gradient are the text program's, bit for bit."""
    case = CASES[version.key]
    n = len(version.args)
    value, grads = chad.value_and_grad(version.fn, argnums=tuple(range(n)))(*version.args)
    tv, tg = chad.grad(case.text, case.fn)(*case.args)
    assert identical(value, tv)
    decoded = tuple(decoder(t, gradient=True)(g) for t, g in zip(version.fn.param_types, tg))
    assert identical(grads, decoded)
    assert identical(version.fn(*version.args),
                     decoder(version.fn.result_type)(chad.primal(case.text, case.fn)(*case.args)))


# ------------------------------------------------------------ generated functions

def _gen_type(rng: random.Random, depth: int = 0):
    kinds = ["R", "R", "R", "Z", "B", "AR", "AAR", "AZ"] + (["T", "T"] if depth < 2 else [])
    k = rng.choice(kinds)
    if k == "T":
        return ("T", [_gen_type(rng, depth + 1) for _ in range(rng.randint(2, 3))])
    return (k,)


def _annotation(t) -> str:
    return {"R": "float", "Z": "int", "B": "bool", "AR": "Array[float]",
            "AAR": "Array[Array[float]]", "AZ": "Array[int]"}.get(t[0]) or (
        "tuple[" + ", ".join(_annotation(e) for e in t[1]) + "]")


class _Body:
    def __init__(self, rng):
        self.rng, self.lines, self.n = rng, [], 0

    def fresh(self) -> str:
        self.n += 1
        return f"v{self.n}"

    def reals(self, t, name: str) -> str:
        """A float expression of every number in the variable `name` of type t."""
        k = t[0]
        c = repr(round(self.rng.uniform(0.5, 2.0), 3))
        if k == "R":
            return f"{c} * math.sin({name})"
        if k == "Z":
            return f"float({name})"
        if k == "B":
            return f"({c} if {name} else -0.25)"
        if k == "AR":
            i = self.fresh()
            return f"sum({name}[{i}] * {name}[{i}] for {i} in range(len({name})))"
        if k == "AAR":
            i, j = self.fresh(), self.fresh()
            return (f"sum(sum({c} * {name}[{i}][{j}] for {j} in range(len({name}[{i}]))) "
                    f"for {i} in range(len({name})))")
        if k == "AZ":
            return f"float(sum({name}))"
        names = [self.fresh() for _ in t[1]]
        self.lines.append(f"    {', '.join(names)} = {name}")
        return "(" + " + ".join(self.reals(e, x) for e, x in zip(t[1], names)) + ")"


RESULTS = {
    "float": "s",
    "tuple[float, float]": "(s, math.cos(s))",
    "tuple[float, tuple[float, int]]": "(s, (2.0 * s, 3))",
    "Array[float]": "[s * float(k) for k in range(3)]",
}


def _value(rng, t, exact: bool):
    k = t[0]
    if k == "R":
        x = rng.uniform(-2.0, 2.0)
        return x if exact else np.float64(x)
    if k == "Z":
        return rng.randint(-3, 3)
    if k == "B":
        return rng.random() < 0.5
    if k == "AR":
        a = np.array([rng.uniform(-1, 1) for _ in range(rng.randint(0, 3))])
        return a if exact else a.tolist()
    if k == "AAR":
        m = np.array([[rng.uniform(-1, 1) for _ in range(2)] for _ in range(rng.randint(1, 3))])
        return m if exact else list(m)
    if k == "AZ":
        a = np.array([rng.randint(-5, 5) for _ in range(rng.randint(0, 3))], dtype=np.int64)
        return a if exact else a.tolist()
    parts = tuple(_value(rng, e, exact) for e in t[1])
    return parts if exact else list(parts)


def _discrete(t) -> bool:
    return t[0] in ("Z", "B", "AZ") or (t[0] == "T" and all(_discrete(e) for e in t[1]))


def _tangent(rng, t, v, exact: bool):
    """A tangent of the value v of type t."""
    k = t[0]
    if _discrete(t):
        return None
    if k == "R":
        x = rng.uniform(-1.0, 1.0)
        return x if exact else np.float64(x)
    if k == "AR":
        a = np.array([rng.uniform(-1, 1) for _ in range(len(v))])
        return a if exact else a.tolist()
    if k == "AAR":
        m = np.array([[rng.uniform(-1, 1) for _ in range(len(r))] for r in v])
        return m if exact else list(m)
    parts = tuple(_tangent(rng, e, x, exact) for e, x in zip(t[1], v))
    return parts if exact else list(parts)


def _cotangent(rng, result: str):
    if result == "float":
        return rng.uniform(-1, 1)
    if result == "tuple[float, float]":
        return (rng.uniform(-1, 1), None)
    if result == "tuple[float, tuple[float, int]]":
        return (rng.uniform(-1, 1), (rng.uniform(-1, 1), None))
    return np.array([rng.uniform(-1, 1) for _ in range(3)])


def generated_functions(tmp_path, count: int = 14, seed: int = 7):
    """count decorated functions with random signatures (written to a module:
    the front end reads a function's source from its file), with their types."""
    rng = random.Random(seed)
    lines = ["import math", "import chad", "from chad import Array", ""]
    made = []
    for k in range(count):
        params = [_gen_type(rng) for _ in range(rng.randint(1, 4))]
        result = list(RESULTS)[k % len(RESULTS)]
        body = _Body(rng)
        names = [f"p{i}" for i in range(len(params))]
        total = " + ".join(body.reals(t, x) for t, x in zip(params, names))
        sig = ", ".join(f"{x}: {_annotation(t)}" for x, t in zip(names, params))
        lines += ["", "@chad.function", f"def g{k}({sig}) -> {result}:"] + body.lines + [
            f"    s = {total}", f"    return {RESULTS[result]}", ""]
        made.append((f"g{k}", params, result))
    path = tmp_path / "generated_plans.py"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    spec = importlib.util.spec_from_file_location("chad_test_generated_plans", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return rng, [(getattr(module, n), params, result) for n, params, result in made]


def test_generated_functions_plans_agree_bit_for_bit(tmp_path):
    rng, functions = generated_functions(tmp_path)
    for f, params, result in functions:
        for exact in (True, False):  # exact types, and ints, lists, numpy scalars
            args = tuple(_value(rng, t, exact) for t in params)
            tangents = tuple(_tangent(rng, t, a, exact) for t, a in zip(params, args))
            check_against_general(f, args, _cotangent(rng, result), tangents)


@chad.function
def int_tail(p: tuple[float, int, int]) -> float:
    x, m, n = p
    return x * x * float(m + n)


def test_jvp_of_a_tuple_with_an_int_tail():
    """The tangent of (x, m, n) is (t, None, None): its tail (m, n) has no float,
    so its tangent is None, not a pair of Nones (both paths)."""
    p, t = (1.5, 2, 3), (0.5, None, None)
    want = (1.5 * 1.5 * 5.0, 2.0 * 1.5 * 5.0 * 0.5)  # d(x^2 (m + n)) = 2 x (m + n) dx
    assert chad.jvp(int_tail, (p,), (t,)) == want
    assert api._general_jvp(int_tail, None, (p,), (t,)) == want
    assert chad.jvp(int_tail, (p,), (None,))[1] == 0.0


# ------------------------------------------------------------ errors

@chad.function
def mixed(x: float, p: tuple[float, int], a: chad.Array[float]) -> float:
    q, n = p
    return x * q + float(n) * sum(a)


BAD_ARGS = [
    (1.0, (2.0, 3)),
    (1.0, (2.0, 3), np.ones(2), 4.0),
    ("1.0", (2.0, 3), np.ones(2)),
    (1.0, (2.0, 3.5), np.ones(2)),
    (1.0, (2.0, 3, 4), np.ones(2)),
    (1.0, [2.0, True], np.ones(2)),
    (1.0, (2.0, 3), np.ones((2, 2))),
    (1.0, (2.0, 3), np.ones(2, dtype=complex)),
    (10 ** 400, (2.0, 3), np.ones(2)),
]


def _message(call) -> str:
    with pytest.raises(ChadError) as info:
        call()
    return str(info.value)


@pytest.mark.parametrize("args", BAD_ARGS, ids=[str(i) for i in range(len(BAD_ARGS))])
def test_wrong_arguments_give_the_general_paths_errors(args):
    want = _message(lambda: mixed.general_call(*args))
    assert "argument" in want or "too large" in want
    assert _message(lambda: mixed(*args)) == want
    assert _message(lambda: chad.grad(mixed, argnums=(0, 2))(*args)) == _message(
        lambda: api._general_value_and_grad(mixed, (0, 2), False, None, "array", "efficient")(
            *args))
    assert _message(lambda: chad.vjp(mixed, *args)) == _message(
        lambda: general_vjp(mixed, args))


def test_wrong_cotangents_give_the_general_paths_errors():
    args = (1.0, (2.0, 3), np.ones(2))
    for ct in ("x", (1.0,), [1.0, 2.0]):
        assert _message(lambda: chad.vjp(mixed, *args)[1](ct)) == _message(
            lambda: general_vjp(mixed, args)[1](ct))


def test_keyword_and_mixed_arguments_take_the_general_path():
    args = (1.0, (2.0, 3), np.array([0.5, 1.5]))
    want = mixed(*args)
    assert identical(mixed(x=1.0, p=(2.0, 3), a=np.array([0.5, 1.5])), want)
    assert identical(mixed(1, [2, 3], [0.5, 1.5]), want)  # converted where they stand


# ------------------------------------------------------------ names

HOSTILE = ("a0", "args", "kwargs", "call", "back", "vjp_fn", "_k4", "t1", "_ndarray",
           "__import__")


def test_plan_source_depends_on_the_types_alone(tmp_path):
    """A function whose parameters are named like the plan's own names (and
    worse) gets the same generated source as one with plain names, and the
    right values."""
    types = ["float", "tuple[float, float]", "Array[float]", "int", "float", "float", "float",
             "float", "float", "float"]
    src = ["import math", "import chad", "from chad import Array", ""]
    for fname, names in (("hostile", HOSTILE), ("plain", [f"x{i}" for i in range(10)])):
        sig = ", ".join(f"{n}: {t}" for n, t in zip(names, types))
        n = names
        src += ["@chad.function", f"def {fname}({sig}) -> tuple[float, float]:",
                f"    u, w = {n[1]}",
                f"    s = {n[0]} * u + w + sum({n[2]}) + float({n[3]}) + "
                + " + ".join(f"math.sin({x})" for x in n[4:]),
                "    return s, 2.0 * s", ""]
    path = tmp_path / "hostile_plans.py"
    path.write_text("\n".join(src) + "\n", encoding="utf-8")
    spec = importlib.util.spec_from_file_location("chad_test_hostile_plans", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    args = (1.5, (0.5, -1.0), np.array([1.0, 2.0]), 3) + tuple(0.1 * k for k in range(6))
    want = 1.5 * 0.5 - 1.0 + 3.0 + 3.0 + sum(math.sin(0.1 * k) for k in range(6))
    for f in (module.hostile, module.plain):
        out = f(*args)
        assert out[0] == pytest.approx(want, rel=1e-14) and out[1] == pytest.approx(2 * want)
        chad.vjp(f, *args)[1]((1.0, 0.0))
    assert module.hostile._plan.source == module.plain._plan.source
    # one compiled source, two code objects (their specialised instructions are
    # per namespace: plan_code.py `_fresh`)
    assert module.hostile._plan.__code__ is not module.plain._plan.__code__
    key = ("vjp", None, "array", "efficient")
    assert (module.hostile._api_cache[key].source == module.plain._api_cache[key].source)
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", module.hostile._plan.source))
    assert "__import__" not in words and "hostile" not in words


def test_a_recursion_too_deep_is_run_on_a_big_stack():
    """An entry that recurses deeper than this thread allows: the plan runs it
    again on a big-stack thread (chad/deep.py), with no general path."""
    def deep_entry(x, y):
        def down(n):
            return 0.0 if n == 0 else down(n - 1)
        return down(50_000) + x * y

    with pytest.raises(RecursionError):
        deep_entry(2.0, 3.0)
    call = plans.primal(deep_entry, (R, R), R, _forbidden)
    assert call(2.0, 3.0) == 6.0
