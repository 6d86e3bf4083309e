"""A sum over an inner loop of a product, summed without its block of products
(chad/compile/order.py row_dots, kernels.dots, vector_support.vsumprod, the
rewrite fusion.summed_product), and a nested reverse pass capturing only what
it reads (chad/arrays/nested.py)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import chad
from chad.compile import backend, kernels, order
from chad.compile.fusion import summed_product
from chad.compile.ieee import quiet
from chad.compile.vector_support import vsum, vsumprod

SMV = ("def smv(m : Array (Array R), v : Array R) : R = sum (build (length m) (\\i -> "
       "sum (build (length v) (\\j -> m ! i ! j * v ! j))))")
AFFINE = ("def f(w : Array (Array R), b : Array R, x : Array R) : R = sum (build (length w) "
          "(\\i -> tanh (sum (build (length x) (\\j -> w ! i ! j * x ! j)) + b ! i)))")
LENGTHS = (*range(0, 20), 63, 64, 127, 128, 129, 130, 136, 255, 256, 257, 1000, 1031, 8193,
           20011)


def _bits(a) -> bytes:
    return np.ascontiguousarray(a, dtype=np.float64).tobytes()


def _values(rng, shape, special: bool):
    """Reals of magnitudes 10^-8 to 10^8 (any other order of the additions
    gives other sums), signed zeros; with special, infinities and NaNs too."""
    x = rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 9, shape)
    x[rng.random(shape) < 0.1] = -0.0
    if special:
        x[rng.random(shape) < 0.01] = math.inf
        x[rng.random(shape) < 0.01] = -math.inf
        x[rng.random(shape) < 0.005] = math.nan
    return x


@pytest.mark.parametrize("m", LENGTHS)
def test_the_c_loop_is_numpys_reduce_of_the_products(m):
    """kernels.dots against np.sum of each row of a * b (the evaluator's sum
    of a row; numpy's reduce of the block when its rows are contiguous): the
    same bits, on contiguous, reversed, transposed and broadcast operands."""
    if not kernels.native():
        pytest.skip("the C extension is not built")
    rng = np.random.default_rng(m)
    a = _values(rng, (5, m), special=m % 3 == 0)
    v = _values(rng, (1, m), special=False)
    col = _values(rng, (5, 1), special=False)
    cases = [(a, np.broadcast_to(v, a.shape)), (a[::-1], a), (a[:, ::-1], a),
             (np.asfortranarray(a), np.broadcast_to(v, a.shape)),
             (np.broadcast_to(v, a.shape), a[::-1, ::-1]),
             (a, v), (v, a[::-1]), (col, a), (a, col[::-1]), (col, v)]  # broadcast by the loop
    for x, y in cases:
        with quiet():
            want = np.array([np.sum(np.ascontiguousarray(r)) for r in x * y])
        got = kernels.dots(x, y)
        nan = np.isnan(want)
        assert (np.isnan(got) == nan).all()
        assert _bits(got[~nan]) == _bits(want[~nan])


def test_the_c_loop_refuses_what_it_cannot_take():
    if not kernels.native():
        pytest.skip("the C extension is not built")
    with pytest.raises(ValueError, match="shapes"):
        kernels.dots(np.ones((3, 4)), np.ones((3, 5)))
    with pytest.raises(ValueError, match="shapes"):
        kernels.dots(np.ones((3, 4)), np.ones((2, 4)))
    with pytest.raises(TypeError):
        kernels.dots(np.ones((3, 4), dtype=np.int64), np.ones((3, 4)))
    with pytest.raises(TypeError):
        kernels.dots(np.ones(4), np.ones(4))


@pytest.mark.parametrize("m", (1, 7, 8, 100, 129, 1000))
def test_vsumprod_is_vsum_of_the_product(m, kernels_impl):
    """Whatever the operands (blocks, a row broadcast over the outer loop, a
    value of the outer loop only, integers, a real), vsumprod is vsum of the
    product, bit for bit, with the C loop and without it."""
    rng = np.random.default_rng(m)
    n = 6
    a = _values(rng, (n, m), special=True)
    v = _values(rng, (1, m), special=False)
    col = _values(rng, (n, 1), special=False)
    ints = rng.integers(-5, 5, (n, m))
    for x, y in [(a, v), (v, a), (a[::-1], a), (a, col), (col, v), (col, col), (a, 2.5),
                 (ints, a), (ints, ints), (a.T.copy().T, v)]:
        with quiet():
            want = vsum(x * y, m, 1, 2)
            got = vsumprod(x, y, m, 1, 2)
        assert np.shape(got) == np.shape(want)
        nan = np.isnan(np.asarray(want, dtype=float))
        assert (np.isnan(np.asarray(got, dtype=float)) == nan).all()
        assert _bits(np.asarray(got)[~nan]) == _bits(np.asarray(want)[~nan])
    # another axis or rank: the product and vsum themselves
    with quiet():
        assert _bits(vsumprod(a, v, n, 0, 2)) == _bits(vsum(a * v, n, 0, 2))
    with pytest.raises(ValueError):  # shapes that do not broadcast: numpy's error
        vsumprod(np.ones((n, m + 1)), np.ones((n, m)), m, 1, 2)


def test_the_probe_decides(monkeypatch):
    """The probe holds on this numpy; if numpy summed otherwise, the product
    is made and numpy's reduce runs."""
    if not kernels.native():
        pytest.skip("the C extension is not built")
    assert order._dots_probe()
    a, v = np.ones((3, 200)), np.ones((1, 200))
    assert order.row_dots(a, v, 200) is not None
    monkeypatch.setattr(order, "_DOTS_CHECKED", [False])
    assert order.row_dots(a, v, 200) is None


def test_the_rewrite_of_a_summed_product():
    assert summed_product("v3", "(a1 * _f(v2))", "_vsum(v3, v4, 1, 2, v5)") == \
        ("", "_vsumprod(a1, _f(v2), v4, 1, 2, v5)", "")
    assert summed_product("v3", "((a1 + a2) * a3)", "(v9 + _vsum(v3, v4, 1, 2)) * v2") == \
        ("(v9 + ", "_vsumprod(a1 + a2, a3, v4, 1, 2)", ") * v2")
    # not a product, not the sum of it, not a sum, not code
    assert summed_product("v3", "(a1 + a2)", "_vsum(v3, v4, 1, 2)") is None
    assert summed_product("v3", "a1 * a2", "_vsum(v7, v4, 1, 2)") is None
    assert summed_product("v3", "a1 * a2", "_vout(v3, v4, 1, 2)") is None
    assert summed_product("v3", "a1 * a2 +", "_vsum(v3, v4, 1, 2)") is None


def test_the_product_moves_only_past_what_cannot_act():
    """registers: the sum's statement is rewritten only where nothing to the
    left of the sum can act or fail (a call, a subscript) and it is not in a
    conditional expression."""
    from chad.compile.registers import reuse_locals

    def rewritten(line: str) -> list[str]:
        return reuse_locals(["def f(a1, a2, a3):", "    v4 = (a1 * a2)", line,
                             "    _g(v5)", "    return v5"], reals={"v4"})
    assert "_vsumprod(a1, a2, a3, 1, 2)" in rewritten("    v5 = (a3 + _vsum(v4, a3, 1, 2))")[1]
    assert reuse_locals(["def f(a1, a2, a3):", "    v4 = (a1 * a2)",
                         "    return (a3 + _vsum(v4, a3, 1, 2))"], reals={"v4"})[1] == \
        "    return (a3 + _vsumprod(a1, a2, a3, 1, 2))"
    for line in ("    v5 = (_g(a3) + _vsum(v4, a3, 1, 2))", "    v5 = (a3[0] + _vsum(v4, a3, 1, 2))",
                 "    v5 = (a3 if a3 else _vsum(v4, a3, 1, 2))"):
        assert not any("_vsumprod" in x for x in rewritten(line))
    # not a batched real's product: left alone
    lines = reuse_locals(["def f(a1, a2, a3):", "    v4 = (a1 * a2)",
                          "    v5 = _vsum(v4, a3, 1, 2)", "    return v5"])
    assert not any("_vsumprod" in x for x in lines)


def _source(text: str) -> str:
    prog = chad.load(text)
    return backend.gradient_module(prog, prog.find(None)).source


@pytest.mark.parametrize("text", [SMV, AFFINE])
def test_a_matrix_vector_products_rows_are_summed_without_their_block(text):
    source = _source(text)
    assert "_vsumprod(" in source and "_vsum(" not in source


@pytest.mark.parametrize("evm", ["array", "parallel", "map"])
@pytest.mark.parametrize("text", [SMV, AFFINE])
@pytest.mark.parametrize("n", [1, 9, 130])
def test_summed_products_give_the_interpreters_values(text, n, evm):
    rng = np.random.default_rng(n)
    m = tuple(_values(rng, (n,), special=False) for _ in range(n))
    v = _values(rng, (n,), special=False)
    args = (m, v) if text is SMV else (m, _values(rng, (n,), special=False), v)
    assert _bits(chad.primal(text)(*args)) == _bits(chad.primal(text, backend="interp")(*args))
    got = chad.grad(text, evm=evm)(*args)
    want = chad.grad(text, backend="interp", evm=evm)(*args)
    assert _bits(got[0]) == _bits(want[0])
    for g, w in zip(got[1], want[1]):
        if isinstance(w, tuple):
            assert [_bits(r) for r in g] == [_bits(r) for r in w]
        else:
            assert _bits(g) == _bits(w)


_DEF = re.compile(r"^def (vb[0-9]+)\((.*)\):$", re.M)


MAP_CLOSURE = ("def weighted(w : R, xs : Array R) : R = "
               "let f = \\(x : R) -> tanh (w * x) * x in sum (map f xs)")


@pytest.mark.parametrize("text", [SMV, AFFINE, MAP_CLOSURE])
def test_a_batched_reverse_pass_captures_only_what_it_reads(text):
    """A batched backpropagator (of a nested loop's outer elements, or of a
    single loop's elements) takes the values its body reads, and nothing
    else: the inner loop's block of products, or `w * x` where the
    derivative reads `tanh (w * x)` only, is not kept alive until the
    reverse pass."""
    source = _source(text)
    found = False
    for m in _DEF.finditer(source):
        found = True
        body = source[m.end():].split("\ndef ", 1)[0]
        read = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", body))
        captured = [p.strip() for p in m.group(2).split(",") if p.strip().startswith("c")]
        assert captured and all(c in read for c in captured), (m.group(1), captured)
    assert found
