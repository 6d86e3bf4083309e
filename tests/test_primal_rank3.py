"""The primal path batched through three loops (docs/compiler.md, "Loops three
deep in a primal"): a small def that calls small defs inlined at its calls
(chad/compile/source.py `small_defs`), the length and the sum of a row of an
argument's rows (`length (xs ! k)`, `sum (ys ! k)`: Batcher.row_array, a
guarded region), a layer's output read by the next layer's inner loop (an
array built along one loop, indexed by a deeper one: np.swapaxes), and a
region's rank raised once when a loop the syntax does not show needs it.

Checked: the generated code says which loops are vectorised, the results are
the interpreter's bit for bit, ragged rows run the per-element code (and count
as a fall-back), and errors are the interpreter's. Nothing here is timed.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chad
from benchmarks.bench_vectorised import MLP_TEXT
from chad.compile import backend, source, vector_support
from chad.errors import ChadError
from tests.test_vectorise import agree

pytestmark = pytest.mark.filterwarnings("error::SyntaxWarning", "error::RuntimeWarning")

# the benchmark's MLP 10-20-5 on a batch: loss calls affine twice and logsumexp,
# which calls max2
MLP = MLP_TEXT

ROW_SUMS = "def rs(xs : Array (Array R)) : Array R = build (length xs) (\\k -> sum (xs ! k))"
ROW_LENGTHS = ("def rl(xs : Array (Array R)) : Array R = "
               "build (length xs) (\\k -> toreal (length (xs ! k)))")
# a layer's output h, built along the loop over i, read by the next layer's
# inner loop over j, one loop deeper
TWO_LAYERS = """\
def two(w : Array (Array R), u : Array (Array R), xs : Array (Array R)) : Array (Array R) =
  build (length xs) (\\k ->
    let x = xs ! k in
    let h = build (length w) (\\i -> sin (sum (build (length x) (\\j -> w ! i ! j * x ! j)))) in
    build (length u) (\\i -> sum (build (length h) (\\j -> u ! i ! j * h ! j))))
"""


def _primal_source(text):
    prog = chad.load(text)
    return backend.primal_module(prog, prog.find(None)).source


def _comments(src):
    return [line.strip() for line in src.splitlines()
            if line.strip().startswith("# ") and ("vectorised" in line or "per-element" in line)]


def _interp(text, args):
    return chad.run(text, [a.tolist() if isinstance(a, np.ndarray) else
                           [list(r) for r in a] if isinstance(a, list) else a for a in args])[0]


def _outcome(f):
    try:
        return ("ok", f())
    except ChadError as e:
        return ("err", type(e).__name__, str(e))


def _same(text, args, exact=True):
    """The compiled primal's outcome is the interpreter's: bit for bit, or
    within 1e-12 relative where numpy's tanh, exp or log of an array may round
    an element otherwise than of a single real (its SIMD loops)."""
    got = _outcome(lambda: chad.primal(text)(*args))
    want = _outcome(lambda: _interp(text, args))
    assert got[0] == want[0], (got, want)
    if want[0] == "ok":
        agree(got[1], want[1], exact=exact)
    else:
        assert got == want
    return got


def _mlp_args(rng, batch=7, shape=(4, 6, 3)):
    i, h, o = shape
    return [rng.normal(size=(h, i)), rng.normal(size=h), rng.normal(size=(o, h)),
            rng.normal(size=o), rng.normal(size=(batch, i)), rng.uniform(size=(batch, o))]


def test_defs_calling_small_defs_are_small():
    defs = chad.load(MLP).defs
    assert set(source.small_defs(defs)) == {"max2", "logsumexp", "affine", "loss", "batch"}


def test_a_def_over_the_size_bound_with_its_callees_is_not_small(monkeypatch):
    defs = chad.load(MLP).defs
    sizes = {d.name: sum(1 for _ in chad.terms.subterms(d.body)) for d in defs}
    # loss alone fits; with affine twice and logsumexp (with max2) it does not
    monkeypatch.setattr(source, "SMALL_DEF", sizes["loss"] + sizes["affine"])
    small = source.small_defs(defs)
    assert {"max2", "logsumexp", "affine"} <= set(small) and "loss" not in small
    assert "batch" not in small  # its callee is not small


def test_the_mlp_batch_primal_is_vectorised_through_three_loops():
    comments = _comments(_primal_source(MLP))
    # the batch's loop (its fallback's loop over the batch, each input's layers batched)
    assert comments[0] == "# build: vectorised (guarded: rows of one length)", comments
    assert not any("per-element" in c for c in comments), comments


@pytest.mark.parametrize("batch", [0, 1, 2, 7, 64])
def test_the_mlp_batch_primal_is_the_interpreters(batch):
    before = vector_support.FELL_BACK[0]
    _same(MLP, _mlp_args(np.random.default_rng(batch), batch), exact=False)
    assert vector_support.FELL_BACK[0] == before  # the vectorised code gave it


def test_ragged_inputs_run_the_per_element_code():
    args = _mlp_args(np.random.default_rng(3))
    xs = [np.array(r) for r in args[4]]
    xs[2] = xs[2][:2]  # a shorter input: a shorter sum in the first layer
    args[4] = xs
    before = vector_support.FELL_BACK[0]
    _same(MLP, args, exact=False)
    assert vector_support.FELL_BACK[0] == before + 1


def test_an_out_of_range_read_is_the_interpreters_error():
    args = _mlp_args(np.random.default_rng(4))
    args[4] = np.random.default_rng(5).normal(size=(7, 5))  # inputs longer than w1's rows
    got = _same(MLP, args)  # (the same error and message as the interpreter's)
    assert got[0] == "err" and "out of range" in got[2], got


@pytest.mark.parametrize("rows", [(0, 0), (3, 0), (1, 1), (5, 7), (4, 200)])
def test_row_sums_and_lengths(rows):
    x = np.random.default_rng(sum(rows)).normal(size=rows) * 1e3
    for text in (ROW_SUMS, ROW_LENGTHS):
        assert _comments(_primal_source(text))[0] == \
            "# build: vectorised (guarded: rows of one length)"
        _same(text, [x])
        _same(text, [[r for r in x]])  # a list of rows


def test_row_sums_of_ragged_rows():
    rows = [np.arange(3.0), np.arange(5.0) * 0.1, np.array([]), np.array([1e308, 1e308])]
    before = vector_support.FELL_BACK[0]
    got = _same(ROW_SUMS, [rows])
    assert got[1][3] == float("inf")
    assert vector_support.FELL_BACK[0] == before + 1


def test_row_sums_keep_the_evaluators_order():
    # values whose sum depends on the order of the additions (pairwise, as
    # np.sum of each row, the evaluator's)
    rng = np.random.default_rng(9)
    x = rng.normal(size=(6, 301)) * np.array([1e16, 1.0, -1e16] * 100 + [3.0])
    _same(ROW_SUMS, [x])


def test_a_layers_output_read_one_loop_deeper():
    src = _primal_source(TWO_LAYERS)
    assert "_np.swapaxes" in src
    assert "# build: vectorised (guarded: rows of one length)" in _comments(src)
    rng = np.random.default_rng(11)
    before = vector_support.FELL_BACK[0]
    for batch in (0, 1, 5):
        _same(TWO_LAYERS, [rng.normal(size=(4, 3)), rng.normal(size=(2, 4)),
                           rng.normal(size=(batch, 3))], exact=False)
    assert vector_support.FELL_BACK[0] == before


def test_the_swap_needs_the_loop_over_the_whole_array():
    # the deeper loop runs over x's elements, fewer than h has: not the same
    # loop size, so h ! j is not the swapped array (the per-element code, right)
    text = TWO_LAYERS.replace("build (length h) (\\j -> u ! i ! j * h ! j)",
                              "build (length x) (\\j -> u ! i ! j * h ! j)")
    assert text != TWO_LAYERS
    assert "_np.swapaxes" not in _primal_source(text)
    rng = np.random.default_rng(12)
    before = vector_support.FELL_BACK[0]
    _same(text, [rng.normal(size=(4, 3)), rng.normal(size=(2, 4)), rng.normal(size=(3, 3))],
          exact=False)
    assert vector_support.FELL_BACK[0] == before  # (a swap of the wrong size would fail)


# ------------------------------------------------------------------ generated

_EXTRAS = ("", " + c", " * c", " + sum (xs ! k)", " - toreal (length x)", " + b ! i")
_RESULTS = ("sum {h}", "sum (build (length {h}) (\\i -> {h} ! i * {h} ! i))",
            "fold (\\p -> max(fst p, snd p)) {h}", "sum x + sum {h}", "{h} ! 0",
            "sum (map (\\v -> v * c) {h})")


@st.composite
def _layered(draw):
    """A batch of layers over the rows of xs (only +, -, * and max: exact),
    and arguments for it (shapes from 0 up, rows maybe ragged)."""
    layers = draw(st.integers(1, 3))
    lines, h = [], "x"
    for n in range(layers):
        extra = draw(st.sampled_from(_EXTRAS))
        w = ("w", "u")[n % 2]
        lines.append(f"    let h{n} = build (length {w}) (\\i -> sum (build (length {h}) "
                     f"(\\j -> {w} ! i ! j * {h} ! j)){extra}) in")
        h = f"h{n}"
    result = draw(st.sampled_from(_RESULTS)).format(h=h)
    text = ("def f(w : Array (Array R), u : Array (Array R), b : Array R, "
            "xs : Array (Array R), c : R) : Array R =\n"
            "  build (length xs) (\\k ->\n    let x = xs ! k in\n" + "\n".join(lines)
            + f"\n    {result})\n")
    width = draw(st.integers(0, 4))
    batch = draw(st.integers(0, 5))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    w = rng.normal(size=(draw(st.integers(0, 4)), width))
    u = rng.normal(size=(draw(st.integers(0, 4)), len(w)))
    b = rng.normal(size=draw(st.integers(0, 5)))
    xs = [rng.normal(size=width) for _ in range(batch)]
    if batch and draw(st.booleans()):  # a ragged row
        xs[draw(st.integers(0, batch - 1))] = rng.normal(size=draw(st.integers(0, 5)))
    return text, [w, u, b, xs, float(rng.normal())]


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(_layered())
def test_generated_layers_are_the_interpreters(case):
    text, args = case
    _same(text, args)


# ------------------------------------------------------------------ sliced sums of products

@pytest.mark.parametrize("shapes", [
    ((3, 4, 9, 1), (1, 1, 9, 1)), ((1, 4, 9, 1), (3, 1, 9, 1)), ((3, 1, 9), (3, 4, 9)),
    ((3, 4, 1, 1, 1), (3, 4, 9, 1, 1)), ((2, 3, 200, 1), (2, 1, 200, 1)),
    ((2, 3, 0, 1), (1, 3, 0, 1)), ((1, 1, 5, 1), (1, 1, 5, 1)),
])
def test_sliced_sums_of_products_are_the_blocks(monkeypatch, shapes):
    rng = np.random.default_rng(len(str(shapes)))
    a = rng.normal(size=shapes[0]) * 10.0 ** rng.integers(-8, 9, shapes[0])
    b = rng.normal(size=shapes[1])
    a[rng.random(a.shape) < 0.1] = -0.0
    rank, m = len(shapes[0]), max(shapes[0][2], shapes[1][2])
    want = vector_support.vsum(a * b, m, 2, rank)
    monkeypatch.setattr(vector_support, "SLICED_DOTS", 0)
    calls = []
    real = vector_support.row_dots
    monkeypatch.setattr(vector_support, "row_dots",
                        lambda *xs: calls.append(1) or real(*xs))
    got = vector_support.vsumprod(a, b, m, 2, rank)
    assert got.shape == want.shape and got.tobytes() == want.tobytes()
    if m:
        assert len(calls) == max(shapes[0][0], shapes[1][0])  # by slices


def test_the_mlp_batch_summed_by_slices(monkeypatch):
    monkeypatch.setattr(vector_support, "SLICED_DOTS", 0)
    before = vector_support.FELL_BACK[0]
    _same(MLP, _mlp_args(np.random.default_rng(21), 9), exact=False)
    assert vector_support.FELL_BACK[0] == before


# ------------------------------------------------------------------ three loops, no rows

DEEP = ("def d(w : Array (Array R), a : Array R, k : Z) : Array R = "
        "build k (\\t -> sum (build (length w) (\\i -> "
        "sum (build (length a) (\\j -> tanh (w ! i ! j * a ! j + toreal t))))))")


def test_three_loops_deep_are_guarded_without_rows():
    assert _comments(_primal_source(DEEP))[0] == "# build: vectorised (guarded: loops three deep)"
    rng = np.random.default_rng(30)
    before = vector_support.FELL_BACK[0]
    _same(DEEP, [rng.normal(size=(4, 3)), rng.normal(size=3), 5], exact=False)
    assert vector_support.FELL_BACK[0] == before


def test_a_memory_error_three_loops_deep_runs_the_per_element_code(monkeypatch):
    """A temporary of all three loops' elements that does not fit: the
    per-element code (one outer element's loops at a time), as before the
    loops were batched together."""
    real = vector_support.HELPERS["_vsum"]

    def no_memory(x, n, axis, rank, *rest):
        if rank >= 3:  # (the sums of the fallback's own regions, of two loops, run)
            raise MemoryError("a block of every loop's elements")
        return real(x, n, axis, rank, *rest)

    text = DEEP.replace("toreal t", "toreal t * 0.5")  # (a program not compiled yet)
    monkeypatch.setitem(vector_support.HELPERS, "_vsum", no_memory)
    rng = np.random.default_rng(31)
    before = vector_support.FELL_BACK[0]
    _same(text, [rng.normal(size=(4, 3)), rng.normal(size=3), 5], exact=False)
    assert vector_support.FELL_BACK[0] == before + 1
    # the fallback runs the outer loop element by element, its body's loops batched
    src = _primal_source(text)
    assert _comments(src)[:2] == ["# build: vectorised (guarded: loops three deep)",
                                  "# build: vectorised"], _comments(src)
