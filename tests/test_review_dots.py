"""Review of a7f3191 (sums of products without their block: fusion.summed_product,
registers._sum_products, vector_support.vsumprod, order.row_dots, kernels.dots,
colsum's descending rows, back_function_nested's captures).

No failing test: the review found no bug in the change. The tests below pin
properties checked during the review that are not already covered by
tests/test_row_dots.py: vsumprod against vsum of the product on adversarial
values, layouts and operand kinds (errors included), colsum on blocks whose
rows go down in memory, the rewrite's order of calls and subscripts on
hand-written line lists, the probe run from several threads, the C loop's
buffers released on every path, the nested reverse functions reading no name
they were not given, and compiled against interpreted values on programs the
rewrite touches (ragged rows, index errors, broadcast operands)."""

from __future__ import annotations

import ast
import builtins
import math
import threading

import numpy as np
import pytest

import chad
from chad.compile import backend, kernels, order
from chad.compile.ieee import quiet
from chad.compile.registers import reuse_locals
from chad.compile.vector_support import vsum, vsumprod

_SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, 1e308, -1e308, 5e-324, -5e-324,
             1.0, -1.0, 1e-300, 1e300]


def _same(got, want) -> bool:
    """The same shape and bits, a NaN as a NaN (IEEE leaves open which NaN two
    meeting NaNs give: docs/compiler.md, "Values")."""
    g = np.array(got, dtype=np.float64)
    w = np.array(want, dtype=np.float64)
    if g.shape != w.shape or not np.array_equal(np.isnan(g), np.isnan(w)):
        return False
    return g[~np.isnan(g)].tobytes() == w[~np.isnan(w)].tobytes()


def _layouts(a, b):
    yield a, b
    yield a[::-1], b[:, ::-1]
    yield np.asfortranarray(a), np.asfortranarray(b)
    yield a, b[:1]
    yield a[:1], b
    yield a[:, :1], b
    yield a[:, :1], b[:, :1]          # both broadcast along the loop: viewed to m
    yield a[:1, :1], b[::-1, :1]
    yield a[::-1, ::-1], b[::-1, ::-1]
    yield a[:0], b[:1]                # 0 rows against 1
    yield a[:1], b[:0]
    wide = np.zeros((a.shape[0], 2 * a.shape[1]))
    wide[:, 1::2] = a
    yield wide[:, 1::2][:, ::-1], b   # a stride of 16, reversed
    rec = np.zeros(a.shape, dtype=[("x", "f8"), ("k", "i4")])
    rec["x"] = a
    yield rec["x"], b                 # a stride of 12: unaligned rows


@pytest.mark.parametrize("m", [0, 1, 3, 7, 8, 9, 15, 16, 17, 127, 128, 129, 136, 257, 1031])
def test_vsumprod_is_vsum_of_the_product_on_adversarial_values_and_layouts(m):
    """Values of every magnitude with infinities, NaNs, signed zeros and
    subnormals, on reversed, Fortran, broadcast, empty, strided and unaligned
    operands, the loop size the operands' or one they broadcast to: vsumprod
    is vsum(a * b) bit for bit (a NaN as a NaN), errors of the same type."""
    rng = np.random.default_rng(1000 + m)
    for _ in range(3):
        a = rng.standard_normal((4, m)) * 10.0 ** rng.integers(-300, 300, (4, m))
        b = rng.standard_normal((4, m)) * 10.0 ** rng.integers(-300, 300, (4, m))
        for arr in (a, b):
            k = rng.random(arr.shape) < 0.15
            arr[k] = rng.choice(_SPECIALS, k.sum())
        for x, y in _layouts(a, b):
            for size in {m, m + 2}:
                try:
                    with quiet():
                        want = vsum(x * y, size, 1, 2)
                except Exception as e:  # noqa: BLE001
                    want = e
                try:
                    with quiet():
                        got = vsumprod(x, y, size, 1, 2)
                except Exception as e:  # noqa: BLE001
                    got = e
                if isinstance(want, Exception) or isinstance(got, Exception):
                    assert type(got) is type(want), (x.shape, y.shape, size, want, got)
                else:
                    assert _same(got, want), (x.shape, x.strides, y.shape, y.strides, size)


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
def test_vsumprod_on_every_kind_of_operand():
    """Integers, bools, float32, big-endian doubles, complex, objects, a numpy
    scalar, Python numbers, 0-, 1- and 3-D arrays, np.matrix, shapes that do
    not broadcast (0 against 1 and 3), empty loops and a negative size in no
    live element: vsumprod gives vsum(a * b)'s value or an error of its type."""
    cands = {
        "A": np.arange(12.0).reshape(3, 4), "A3": np.ones((3, 4, 1)), "A1d": np.arange(4.0),
        "A0d": np.array(2.0), "f": 2.5, "i": 3, "np64": np.float64(1.5),
        "i64": np.arange(12).reshape(3, 4), "bool": np.ones((3, 4), bool),
        "f32": np.ones((3, 4), np.float32) * 1.1, "big": np.ones((3, 5)), "row": np.ones((1, 4)),
        "col": np.ones((3, 1)), "rows2": np.ones((2, 4)), "e0": np.ones((0, 4)),
        "e01": np.ones((0, 1)), "c0": np.ones((3, 0)), "mat": np.matrix(np.ones((3, 4))),
        "be": np.ones((3, 4), dtype=">f8"), "obj": np.ones((3, 4), dtype=object),
        "nan11": np.full((1, 1), np.nan), "nz11": np.full((1, 1), -0.0),
    }

    def run(f):
        try:
            with quiet(), _nothing():
                r = f()
            return ("ok", np.asarray(r).shape, np.asarray(r, dtype=np.float64).tobytes())
        except Exception as e:  # noqa: BLE001
            return ("error", type(e))

    for a in cands.values():
        for b in cands.values():
            for m, live in ((4, 1), (5, 1), (1, 1), (0, 1), (-1, 0)):
                want = run(lambda: vsum(a * b, m, 1, 2, live))
                got = run(lambda: vsumprod(a, b, m, 1, 2, live))
                assert got == want, (a, b, m, live)


class _nothing:
    def __enter__(self):
        import warnings
        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *exc):
        self._w.__exit__(*exc)


def _colsum_reference(block, start, col, add):
    acc = np.zeros(block.shape[1]) if start is None else np.array(start, dtype=np.float64)
    with quiet():
        for i in range(block.shape[0]):
            row = block[i] if col is None else col[i] * block[i]
            if add is not None:
                row = row + add
            acc = acc + row
    return acc


@pytest.mark.parametrize("n,m", [(1, 1), (2, 3), (5, 8), (17, 33), (4, 100)])
def test_colsum_of_rows_going_down_in_memory_is_unchanged(n, m):
    """colsum reads a block with a negative row stride from each row's end:
    every column's additions (and the products col[i] * x (+ add)) are still
    made row after row, bit for bit a Python loop over the rows."""
    if not kernels.native():
        pytest.skip("the C extension is not built")
    rng = np.random.default_rng(n * 100 + m)
    x = rng.standard_normal((n, m)) * 10.0 ** rng.integers(-8, 9, (n, m))
    x[rng.random((n, m)) < 0.1] = -0.0
    x[rng.random((n, m)) < 0.05] = math.inf
    col = rng.standard_normal(n)
    col[rng.random(n) < 0.2] = -0.0
    for block in (x[::-1], x[::-2], x[::-1, ::-1], np.asfortranarray(x)[::-1]):
        c = col[:block.shape[0]]
        for start in (None, rng.standard_normal(m)):
            for cc, add in ((None, None), (c, None), (c, 0.5), (c, -0.0)):
                assert _same(kernels.colsum(block, start, cc, add),
                             _colsum_reference(block, start, cc, add))


class _Logged:
    """A value whose operations are logged (the order of evaluation)."""

    log: list = []

    def __init__(self, name):
        self.name = name

    def __mul__(self, other):
        _Logged.log.append(("*", self.name, other.name))
        return _Logged(f"({self.name}*{other.name})")

    def __add__(self, other):
        _Logged.log.append(("+", self.name, other.name))
        return _Logged(f"({self.name}+{other.name})")

    def __getitem__(self, k):
        _Logged.log.append(("[]", self.name, k))
        return _Logged(f"{self.name}[{k}]")


def _logged_call(name):
    def call(*args):
        _Logged.log.append((name,) + tuple(getattr(a, "name", a) for a in args))
        return _Logged(f"{name}({','.join(str(getattr(a, 'name', a)) for a in args)})")
    return call


def _vsumprod_logged(a, b, *rest):
    return _logged_call("_vsum")(a * b, *rest)


def _run_logged(lines):
    env = {"_g": _logged_call("_g"), "_h": _logged_call("_h"), "_vsum": _logged_call("_vsum"),
           "_vout": _logged_call("_vout"), "_vsumprod": _vsumprod_logged}
    exec("\n".join(lines), env)  # noqa: S102
    _Logged.log = []
    r = env["f"](*(_Logged(f"a{k}") for k in range(1, 5)))
    out = tuple(x.name for x in r) if isinstance(r, tuple) else r.name
    return out, list(_Logged.log)


def test_the_rewrite_keeps_the_order_of_calls_and_subscripts():
    """On hand-written line lists (operands that are calls, subscripts and
    sums; calls, subscripts, tuples and `_vout(` around the sum, a `return`
    or an assignment): reuse_locals' rewritten code makes the same calls,
    subscripts and products in the same order, with the same result, as the
    lines it was given; a call or subscript left of the sum blocks it."""
    operands = ["a1", "a2", "_g(a3)", "a4[0]", "(a1 + a2)", "_h(a1, a2)"]
    lefts = ["", "a3 + ", "_g(a1) + ", "a1[0] + ", "(a1, ", "_vout(", "(a2 + (a3 + "]
    rights = ["", " + a1", " + _g(a2)", ")", "))"]
    rewritten = 0
    for a in operands:
        for b in operands:
            for left in lefts:
                for right in rights:
                    if left.count("(") - left.count(")") != right.count(")") - right.count("("):
                        continue
                    for ret in (False, True):
                        body = f"{left}_vsum(v5, a3, 1, 2){right}"
                        lines = ["def f(a1, a2, a3, a4):", f"    v5 = ({a} * {b})"]
                        lines += [f"    return {body}"] if ret else [f"    v6 = {body}",
                                                                      "    return v6"]
                        new = reuse_locals(lines, reals={"v5"})
                        if not any("_vsumprod" in x for x in new):
                            continue
                        rewritten += 1
                        assert not ("_g(" in left or "[" in left or "_vout(" in left), new
                        assert _run_logged(new) == _run_logged(lines), (lines, new)
    assert rewritten > 100


def test_the_probe_from_several_threads():
    """The probe run at once by threads meeting the unset flag (the C loop
    releases the GIL): every thread's sums are numpy's, the flag set to True."""
    if not kernels.native():
        pytest.skip("the C extension is not built")
    saved = order._DOTS_CHECKED[0]
    order._DOTS_CHECKED[0] = None
    rng = np.random.default_rng(7)
    a, v = rng.standard_normal((50, 1000)), rng.standard_normal((1, 1000))
    with quiet():
        want = np.add.reduce(a * v, axis=1, keepdims=True)
    results, errors = [], []

    def work():
        try:
            for _ in range(5):
                results.append(order.row_dots(a, v, 1000))
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    try:
        threads = [threading.Thread(target=work) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert len(results) == 30 and all(r is not None and r.tobytes() == want.tobytes()
                                          for r in results)
        assert order._DOTS_CHECKED[0] is True
    finally:
        order._DOTS_CHECKED[0] = saved


def test_the_c_loop_releases_what_it_holds():
    """dots on its error paths (shapes, types, the output's length and
    writability, missing arguments) keeps no reference and no buffer export:
    the arrays can be resized afterwards."""
    if not kernels.native():
        pytest.skip("the C extension is not built")
    import sys
    native = kernels._native
    a, b, out = np.ones((3, 4)), np.ones((1, 4)), np.empty(3)
    bad, ints, short = np.ones((3, 5)), np.ones((3, 4), np.int64), np.empty(2)
    ro = np.empty(3)
    ro.flags.writeable = False
    before = [sys.getrefcount(x) for x in (a, b, out, bad, ints, short, ro)]
    for _ in range(200):
        native.dots(a, b, out)
        for args in ((a, bad, out), (a, ints, out), (ints, a, out), (a, b, short), (a, b, ro),
                     (a, b, ints), (a, b, None), (None, b, out), (a, None, out)):
            with pytest.raises((TypeError, ValueError, BufferError)):
                native.dots(*args)
        del args
    assert [sys.getrefcount(x) for x in (a, b, out, bad, ints, short, ro)] == before
    for x in (a, b, out, bad, short):
        x.resize((x.size + 1,), refcheck=False)  # a BufferError if still exported


_NESTED = [
    "def f(m : Array (Array R), v : Array R) : R = sum (build (length m) (\\i -> "
    "let s = sum (build (length v) (\\j -> m ! i ! j * v ! j)) in exp s))",
    "def f(m : Array (Array R), v : Array R) : R = sum (build (length m) (\\i -> "
    "sum (build (length v) (\\j -> exp (m ! i ! j) * v ! j)) * "
    "sum (build (length v) (\\j -> m ! i ! j * m ! i ! j))))",
    "def f(m : Array (Array R), v : Array R, c : R) : R = sum (build (length m) (\\i -> "
    "c * sum (build (length v) (\\j -> m ! i ! j * v ! j * c))))",
    "def f(m : Array (Array R), v : Array R) : R = sum (build (length m) (\\i -> "
    "let r = m ! i in sum (build (length v) (\\j -> r ! j * v ! j / (1.0 + r ! j * r ! j)))))",
    "def f(m : Array (Array R), a : Array R, v : Array R) : R = sum (build (length m) (\\i -> "
    "tanh (sum (build (length v) (\\j -> (m ! i ! j - a ! i) * (v ! j - a ! i))))))",
    "def f(m : Array (Array R), a : Array R, v : Array R) : R = sum (build (length m) (\\i -> "
    "let s = sum (build (length (m ! i)) (\\j -> a ! i * v ! j)) in s * s + a ! i))",
]


@pytest.mark.parametrize("text", _NESTED)
@pytest.mark.parametrize("evm", ["array", "parallel"])
def test_no_generated_function_reads_a_name_it_was_not_given(text, evm):
    """The batched reverse functions drop captures their body never reads: no
    function of the module (the vb functions and the pending ones they call)
    loads a generated name that is neither its parameter, its local nor a
    top-level function."""
    prog = chad.load(text)
    source = backend.gradient_module(prog, prog.find(None), "efficient", evm).source
    tree = ast.parse(source)
    top = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    seen_vb = False
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        seen_vb |= fn.name.startswith("vb")
        params = {a.arg for a in fn.args.args}
        names = [n for n in ast.walk(fn) if isinstance(n, ast.Name)]
        stores = {n.id for n in names if isinstance(n.ctx, ast.Store)}
        free = {n.id for n in names if isinstance(n.ctx, ast.Load)} - params - stores - top
        assert all(x.startswith("_") or x in dir(builtins) for x in free), (fn.name, free)
    assert seen_vb or "(forward pass, nested loops)" not in source


def _flat(x):
    if isinstance(x, (tuple, list)):
        for y in x:
            yield from _flat(y)
    elif isinstance(x, np.ndarray):
        yield from (float(y) for y in x.ravel())
    else:
        yield x


def _outcome(f, args):
    try:
        return list(_flat(f(*args)))
    except Exception as e:  # noqa: BLE001
        return type(e)


_EXACT = [
    "def f(m : Array (Array R), a : Array R, v : Array R) : R = sum (build (length m) (\\i -> "
    "a ! i + sum (build (length v) (\\j -> m ! i ! j * v ! j))))",
    "def f(m : Array (Array R), a : Array R, v : Array R) : R = sum (build (length m) (\\i -> "
    "sum (build (length (m ! i)) (\\j -> (m ! i ! j + 1.0) * v ! j)) * a ! i))",
    "def f(m : Array (Array R), a : Array R, v : Array R) : R = sum (build (length m) (\\i -> "
    "sum (build (length v) (\\j -> a ! i * v ! j)) + sum (build (length v) (\\j -> v ! j * a ! i))))",
    "def f(m : Array (Array R), a : Array R, v : Array R) : R = sum (build (length m) (\\i -> "
    "let s = sum (build (length v) (\\j -> m ! i ! j * m ! i ! j)) in s * s + a ! i))",
    "def f(m : Array (Array R), a : Array R, v : Array R) : R = sum (build (length m) (\\i -> "
    "sum (build (length v) (\\j -> m ! i ! j * v ! j * a ! i))))",
]


@pytest.mark.parametrize("text", _EXACT)
def test_summed_products_against_the_interpreter_with_ragged_rows_and_errors(text):
    """Programs the rewrite touches (`_vsumprod` in the primal or the
    gradient), on rows shorter and longer than v, an a too short (an index
    error), empty inner loops, special values: compiled primal and gradients
    on the three runtimes are the interpreter's, bit for bit (a NaN as a NaN),
    and its errors of the same type."""
    prog = chad.load(text)
    assert "_vsumprod(" in (backend.primal_module(prog, prog.find(None)).source
                            + backend.gradient_module(prog, prog.find(None)).source)
    rng = np.random.default_rng(len(text))
    vals = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 1e308, 5e-324, 1e-8, 1e8])

    def r(n, special):
        x = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 9, n)
        if special:
            k = rng.random(n) < 0.3
            x[k] = rng.choice(vals, k.sum())
        return x
    cases = []
    for rows, cols in ((1, 1), (3, 2), (4, 9), (2, 130), (2, 0)):
        for special in (False, True):
            cases.append(([r(cols, special) for _ in range(rows)], r(rows, special), r(cols, special)))
            cases.append(([r(max(0, cols + d), special) for d in (-1, 1, 0)][:rows] or [r(cols, special)],
                          r(rows, special), r(cols, special)))
            cases.append(([r(cols, special) for _ in range(rows)], r(max(0, rows - 1), special),
                          r(cols, special)))
    for args in cases:
        assert _same_outcome(_outcome(chad.primal(text), args),
                             _outcome(chad.primal(text, backend="interp"), args))
        for evm in ("array", "parallel", "map"):
            assert _same_outcome(_outcome(chad.grad(text, evm=evm), args),
                                 _outcome(chad.grad(text, backend="interp", evm=evm), args)), evm


def _same_outcome(got, want) -> bool:
    if isinstance(want, type) or isinstance(got, type):
        return got is want
    if len(got) != len(want):
        return False
    for x, y in zip(got, want):
        if isinstance(y, float) and isinstance(x, float):
            if not (x.hex() == y.hex() or (math.isnan(x) and math.isnan(y))):
                return False
        elif x != y:
            return False
    return True
