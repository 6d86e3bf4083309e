"""Review of row hoisting (chad/compile/rows.py) and of vtake2/vadd
(chad/compile/vector_support.py): cases written to break them.

The contract: the compiled backend's values and gradients equal the
interpreter's (bit for bit, or within 1e-12 relative for a program whose source
was rewritten, `chad.compile.source.rewritten`), and its errors are the
interpreter's (same message). The first tests below FAIL on the reviewed
commit (each docstring says what goes wrong); the rest are the strongest
cases tried that hold. Nothing here is timed.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import os

import numpy as np
import pytest

import chad
from chad.cli import main
from chad.compile import backend, rows, vector_support
from chad.compile.source import rewritten
from chad.errors import ChadError
from chad.terms import Def, Param, Program, Var, rewrite
from chad.types import ArrayT, Real
from tests.test_vectorise import RUNTIMES, agree

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The row m ! i is read twice inside the inner build; with rows of length 2
# both reads fail, `m ! i ! (j * 2)` first (at j = 1) in the evaluation order.
TWO_READS = ("def f(m : Array (Array R)) : R = "
             "sum (build (length m) (\\i -> sum (build 3 (\\j -> m ! i ! j * m ! i ! (j * 2)))))")


def _error(run):
    with pytest.raises(ChadError) as info:
        run()
    return str(info.value)


# ------------------------------------------------------------------ failing cases


@pytest.mark.parametrize("evm", RUNTIMES)
def test_hoisting_keeps_the_interpreters_error_grad(evm):
    """FAILS. The interpreter's gradient reports `m ! i ! (j * 2)` at 1:95 (the
    first failing read in its order); the compiled one, whose source reads the
    hoisted row variable, reports `m ! i ! j` at 1:83. With
    `backend.rewriting_rows(False)` the compiled error is the interpreter's:
    hoisting changes the derivative's evaluation order (CHAD of an index of a
    row *variable* reads every j of the first read before the second read;
    the original `m ! i ! j` does not), so the claim "a ! i cannot fail, it
    may be read first" does not make the rewrite unobservable."""
    args = ([np.ones(2)],)
    want = _error(lambda: chad.grad(TWO_READS, backend="interp", evm=evm)(*args))
    got = _error(lambda: chad.grad(TWO_READS, evm=evm)(*args))
    assert got == want
    with backend.rewriting_rows(False):
        assert _error(lambda: chad.grad(TWO_READS, evm=evm)(*args)) == want


def test_hoisting_keeps_the_interpreters_error_vjp():
    """FAILS: as above through `chad.vjp` (its forward pass already fails)."""
    args = ([np.ones(2)],)
    want = _error(lambda: chad.vjp(TWO_READS, backend="interp")(*args))
    assert _error(lambda: chad.vjp(TWO_READS)(*args)) == want


def test_hoisting_keeps_the_interpreters_error_on_a_matrix_vector_product():
    """FAILS: `m ! i ! j * v ! (j + 1)`, m = [[1, 1]], v = [0, 1, 2]: the
    interpreter's gradient reports `v ! 3` (1:117), the compiled one `m ! 0 ! 2`
    (1:105)."""
    text = ("def f(m : Array (Array R), v : Array R) : R = sum (build (length m) "
            "(\\i -> sum (build (length v) (\\j -> m ! i ! j * v ! (j + 1)))))")
    args = ([np.ones(2)], np.arange(3.0))
    want = _error(lambda: chad.grad(text, backend="interp")(*args))
    assert _error(lambda: chad.grad(text)(*args)) == want


def test_hoisting_keeps_the_interpreters_error_on_the_command_line(capsys, tmp_path):
    """FAILS: `chad grad` prints e.chad:2:52 compiled, e.chad:2:64 on interp."""
    f = tmp_path / "e.chad"
    f.write_text("def f(m : Array (Array R)) : R =\n"
                 "  sum (build (length m) (\\i -> sum (build 3 (\\j -> m ! i ! j * m ! i ! (j * 2)))))\n")
    errs = []
    for be in ("interp", "compiled"):
        code = main(["grad", str(f), "--args", "[[[1.0, 1.0]]]", "--backend", be])
        out, err = capsys.readouterr()
        assert code == 2 and out == ""
        errs.append(err)
    assert errs[0] == errs[1]


def test_the_row_name_does_not_capture_a_variable_of_a_program_built_in_python():
    """FAILS (silently wrong gradient). A Program built in Python may name a
    variable anything, `row$h7` included; rows.py names the hoisted row
    `row$h{N}` from a process-wide counter without looking at the names in
    the body, so the let shadows the program's variable: here the vector
    parameter is named as the next row, and the compiled gradient reads the
    row where the program reads the vector (value 30.0 instead of 640.0)."""
    src = ("def f(m : Array (Array R), w : Array R) : R = "
           "sum (build (length m) (\\i -> sum (build (length w) (\\j -> m ! i ! j * w ! j))))")
    d = chad.load(src).defs[0]
    name = f"row$h{next(rows._ROWS) + 1}"  # the name the next hoisted row gets

    def rename(t):
        return Var(name, loc=t.loc, ty=t.ty) if type(t) is Var and t.name == "w" else t

    prog = chad.load(Program((Def("f", (d.params[0], Param(name, ArrayT(Real()))),
                                  d.result, rewrite(d.body, rename)),)))
    args = ([np.array([1.0, 2.0]), np.array([3.0, 4.0])], np.array([10.0, 100.0]))
    got = chad.grad(prog)(*args)
    want = chad.grad(prog, backend="interp")(*args)
    assert want[0] == 640.0
    agree(got, want, exact=False)


def test_a_row_read_twice_is_not_hoisted_and_stays_bit_for_bit():
    """m ! i ! 0 receives three contributions, c = 3, v0 = 1e16 and w0 =
    -1e16: the interpreter adds (3 + 1e16) + -1e16 = 4; a hoisted row would
    sum two of them first (3 + (1e16 + -1e16) = 3). A row read more than once
    is therefore not hoisted (chad/compile/rows.py), and the gradient is the
    interpreter's bit for bit."""
    text = ("def f(m : Array (Array R), v : Array R, w : Array R, c : R) : R = "
            "sum (build (length m) (\\i -> m ! i ! 0 * c + sum (build (length v) "
            "(\\j -> m ! i ! j * v ! j + m ! i ! j * w ! j))))")
    assert not rewritten(chad.load(text))
    args = ([np.ones(2)], np.array([1e16, 1.0]), np.array([-1e16, 1.0]), 3.0)
    want = chad.grad(text, backend="interp")(*args)
    assert want[1][0][0][0] == 4.0
    agree(chad.grad(text)(*args), want, exact=True)


PREEXISTING = [
    # the outer build is empty; the inner loop's `v ! (j + 1)` is read anyway
    ("def f(m : Array (Array R), v : Array R) : R = sum (build (length m) "
     "(\\i -> sum (build (length v) (\\j -> m ! i ! j * v ! (j + 1)))))",
     ([], np.arange(3.0))),
    # the inner build is empty; the block `w ! i ! j` is taken anyway
    ("def f(m : Array (Array R), w : Array (Array R), v : Array R) : R = "
     "sum (build (length m) (\\i -> let m = w in sum (build (length v) "
     "(\\j -> m ! i ! j * v ! j))))",
     ([np.array([1.0, 2.0])], [], np.zeros(0))),
]


@pytest.mark.parametrize("case", range(len(PREEXISTING)))
def test_preexisting_primal_of_a_build_of_builds_reads_what_the_interpreter_does_not(case):
    """FAILS, but not because of this change (the same at HEAD~2, and with
    `rewriting_rows(False)`): the vectorised primal of a build of builds reads
    an index that no element of the (empty) loops reads, and reports an
    internal compiler error where the interpreter returns 0.0."""
    text, args = PREEXISTING[case]
    assert chad.primal(text, backend="interp")(*args) == 0.0
    assert chad.primal(text)(*args) == 0.0


# ------------------------------------------------------------- cases that hold

H2 = "def f(m : Array (Array R), w : Array (Array R), v : Array R) : R = "
HOLDING = {
    # the size's array rebound inside the body: never the same variable
    "let_shadows_m": H2 + "sum (build (length m) (\\i -> let m = w in "
                          "sum (build (length v) (\\j -> m ! i ! j * v ! j))))",
    "inner_let_shadows_m": H2 + "sum (build (length m) (\\i -> sum (build (length v) "
                                "(\\j -> let m = w in m ! i ! j * v ! j))))",
    "lambda_param_m": H2 + "sum (build (length m) (\\i -> sum (build (length v) "
                           "(\\j -> (\\m -> m ! i ! j) w * v ! j))))",
    "inner_binder_i": H2 + "sum (build (length m) (\\i -> sum (build (length v) "
                           "(\\i -> m ! i ! 0 * v ! i))))",
    "let_shadows_i": H2 + "sum (build (length m) (\\i -> let i = i + 1 in "
                          "sum (build (length v) (\\j -> m ! i ! j * v ! j))))",
    "pattern_shadows_i": H2 + "sum (build (length m) (\\i -> let (i, z) = (i + 1, 2) in "
                              "sum (build (length v) (\\j -> m ! i ! j * v ! j))))",
    "size_of_let_bound_alias": H2 + "let a = m in sum (build (length a) (\\i -> let a = v in "
                                    "sum (build (length a) (\\j -> m ! i ! j * a ! j))))",
    "inlined_lambda_twice": H2 + "sum (build (length m) (\\i -> let g = \\(m : Array (Array R)) "
                                 "-> sum (build (length v) (\\j -> m ! i ! j * v ! j)) in g w + g m))",
    "lambda_over_arrays": H2 + "let g = \\(a : Array (Array R)) -> sum (build (length a) (\\i -> "
                               "sum (build (length v) (\\j -> a ! i ! j * v ! j)))) in "
                               "g w + g m + g (build 2 (\\k -> v))",
    "nested_builds_over_length_m": H2 + "sum (build (length m) (\\i -> sum (build (length m) "
                                        "(\\k -> sum (build (length v) (\\j -> m ! i ! j * m ! k ! j "
                                        "* v ! j))))))",
    "annotations": H2 + "sum (build (length (m : Array (Array R))) (\\i -> sum (build (length v) "
                        "(\\j -> (m : Array (Array R)) ! (i : Z) ! j * v ! j))))",
    "fold_map_iter_scan": H2 + "sum (build (length m) (\\i -> fold (\\p -> fst p + snd p * m ! i ! 0) "
                               "0.0 v + sum (map (\\x -> x * m ! i ! 1) v) + iter 2 (\\s -> s * m ! i ! 0) "
                               "1.0 + sum (scan (\\p -> fst p + snd p * m ! i ! 1) 0.0 v)))",
    "closures_in_an_array": H2 + "let fs = build (length m) (\\i -> \\(x : R) -> x * m ! i ! 0 + "
                                 "sum (build (length v) (\\j -> m ! i ! j * x))) in "
                                 "sum (build (length fs) (\\k -> (fs ! k) (v ! 0)))",
    "untaken_branch": H2 + "sum (build (length m) (\\i -> if i > 5 then sum (build (length v) "
                           "(\\j -> m ! i ! j * v ! j)) else m ! 0 ! 0 * v ! 0))",
}
HOLDING_ARGS = [
    ([np.array([1.0, -2.0]), np.array([3.0, 0.5]), np.array([-0.0, 4.0])],
     [np.array([0.25, 1.5]), np.array([2.0, -1.0])], np.array([-0.0, 1.5])),
    ([np.array([1.0, -2.0]), np.array([3.0])], [np.array([0.25, 1.5])], np.array([2.0, 1.5])),
    ([np.array([1.0, 2.0])], [], np.zeros(0)),
    ([np.array([1.0, 2.0])], [], np.ones(1)),
    ([], [np.ones(3)], np.ones(2)),
]


def _outcome(run):
    try:
        return "ok", run()
    except ChadError as e:
        return "error", str(e)


@pytest.mark.parametrize("name", sorted(HOLDING))
def test_shadowing_and_loops_agree_with_the_interpreter(name):
    text = HOLDING[name]
    exact = not rewritten(chad.load(text))
    for args in HOLDING_ARGS:
        for evm in RUNTIMES:
            want = _outcome(lambda: chad.grad(text, backend="interp", evm=evm)(*args))
            got = _outcome(lambda: chad.grad(text, evm=evm)(*args))
            assert got[0] == want[0], (evm, args, got, want)
            if want[0] == "error":
                assert got[1] == want[1]
            else:
                agree(got[1], want[1], exact=exact)


ELEMENT_TYPES = [
    ("def f(m : Array (Array Z), v : Array R) : R = sum (build (length m) (\\i -> "
     "sum (build (length v) (\\j -> toreal (m ! i ! j) * v ! j))))",
     [([np.array([1, 2]), np.array([3, -4])], np.array([1.5, 2.0])),
      ([np.array([1, 2]), np.array([3])], np.array([1.5, 2.0]))]),
    ("def f(m : Array (Array (Array R)), v : Array R) : R = sum (build (length m) (\\i -> "
     "sum (build (length v) (\\j -> m ! i ! j ! 0 * sum (m ! i ! j) * v ! j))))",
     [([[np.ones(2), np.arange(3.0)], [np.ones(1), np.full(1, 2.5)]], np.array([1.0, -2.0])),
      ([[np.ones(2), np.arange(3.0)], [np.ones(1), np.zeros(0)]], np.array([1.0, 2.0]))]),
    ("def f(m : Array (Array (R * R)), v : Array R) : R = sum (build (length m) (\\i -> "
     "sum (build (length v) (\\j -> fst (m ! i ! j) * snd (m ! i ! j) * v ! j))))",
     [([[(1.0, 2.0), (3.0, 4.0)], [(5.0, 6.0), (7.0, -8.0)]], np.array([1.0, 2.0])),
      ([[(1.0, 2.0)], [(5.0, 6.0), (7.0, 8.0)]], np.array([1.0, 2.0]))]),
    ("def f(m : Array (Array R), v : Array R) : Array (Array R) = build (length m) (\\i -> "
     "build (length v) (\\j -> m ! i ! j * v ! j))",
     [([np.array([1.0, -0.0]), np.array([np.inf, 2.0])], np.array([-0.0, 3.0]))]),
]


@pytest.mark.parametrize("case", range(len(ELEMENT_TYPES)))
def test_element_types_agree_with_the_interpreter(case):
    text, argsets = ELEMENT_TYPES[case]
    exact = not rewritten(chad.load(text))
    prog = chad.load(text)
    for args in argsets:
        ctg = None
        if "Array (Array R) =" in text:
            ctg = [np.array([1.0, -1.0]), np.array([np.nan, -0.0])]
        kw = {} if ctg is None else {"ctg": ctg}
        for evm in RUNTIMES:
            want = _outcome(lambda: chad.grad(prog, backend="interp", evm=evm)(*args, **kw))
            got = _outcome(lambda: chad.grad(prog, evm=evm)(*args, **kw))
            assert got[0] == want[0] and (want[0] == "ok" or got[1] == want[1]), (got, want)
            if want[0] == "ok":
                agree(got[1], want[1], exact=exact)


def test_signs_of_zeros_and_non_finite_values_bit_for_bit():
    text = ("def smv(m : Array (Array R), v : Array R) : R = sum (build (length m) "
            "(\\i -> sum (build (length v) (\\j -> m ! i ! j * v ! j))))")
    nan, inf = float("nan"), float("inf")
    for m, v, ctg in [
        ([np.array([-0.0, 1.0]), np.array([1.0, 1.0])], np.array([-0.0, 1.0]), -1.0),
        ([np.array([inf, 1.0]), np.array([nan, -inf])], np.array([0.0, 1e308]), 2.0),
        ([np.array([1e308, 1e308])], np.array([1e308, -1e308]), 1.0),
    ]:
        for evm in RUNTIMES:
            agree(chad.grad(text, evm=evm)(m, v, ctg=ctg),
                  chad.grad(text, backend="interp", evm=evm)(m, v, ctg=ctg), exact=True)


def test_a_deep_body_is_hoisted_without_a_deep_python_stack():
    """2,000 nested lets between the build and its inner loop: compiled with
    hoisting, the gradient equals the interpreter's; `rewritten` (not run
    through run_shallow) on 10,000 such lets in a fresh interpreter with the
    default recursion limit."""
    def text(n):
        lets = "".join(f"let x{k} = x{k - 1} * 1.0 in " for k in range(1, n + 1))
        return ("def f(m : Array (Array R), v : Array R) : R = sum (build (length m) "
                "(\\i -> let x0 = 1.0 in " + lets
                + f"sum (build (length v) (\\j -> m ! i ! j * v ! j * x{n}))))")
    args = ([np.array([1.0, 2.0]), np.array([3.0, -4.0])], np.array([0.5, 2.0]))
    prog = chad.load(text(2000))
    assert rewritten(prog)
    agree(chad.grad(prog)(*args), chad.grad(prog, backend="interp")(*args), exact=False)
    script = (f"import sys; sys.path.insert(0, {ROOT!r})\n"
              "import chad\nfrom chad.compile.source import rewritten\n"
              "assert sys.getrecursionlimit() == 1000\n"
              "print(rewritten(chad.load(sys.stdin.read())))\n")
    out = subprocess.run([sys.executable, "-c", script], input=text(10000),
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr[-2000:]


def _reference_take2(rows_, n, axis, m, axis2, rank):
    """vtake2 before the change (the per-row loop), but with m = 0 no element
    is read, so nothing can fail (the evaluator reads no row then)."""
    if m == 0:
        mat = np.zeros((n, 0))
        if axis > axis2:
            mat = mat.T
        shape = [1] * rank
        shape[axis] = n
        shape[axis2] = 0
        return mat.reshape(shape)
    if len(rows_) < n:
        raise IndexError(f"index {len(rows_)} out of range for an array of length {len(rows_)}")
    first = np.asarray(rows_[0]) if n else np.empty(0)
    mat = np.empty((n, m), dtype=first.dtype)
    for r in range(n):
        row = rows_[r]
        if len(row) < m:
            raise IndexError(f"index {len(row)} out of range for an array of length {len(row)}")
        mat[r] = row[:m]
    if axis > axis2:
        mat = mat.T
    shape = [1] * rank
    shape[axis] = n
    shape[axis2] = m
    return mat.reshape(shape)


def _take(fn, *args):
    try:
        r = fn(*args)
        return "ok", r.shape, r.dtype, r.tobytes()
    except Exception as e:  # noqa: BLE001 - the error is compared
        return "error", type(e).__name__, str(e)


def test_vtake2_equals_the_row_loop_on_edge_cases():
    nan, inf = float("nan"), float("inf")
    rowsets = [
        [np.array([1.0, nan]), np.array([-0.0, inf])],
        [np.array([1, 2], dtype=np.int64), np.array([3, -4], dtype=np.int64)],
        [np.array([1.0, 2.0]), np.array([3.0])],            # ragged, short
        [np.array([1.0, 2.0]), np.array([3.0, 4.0, 5.0])],  # ragged, long
        [np.array([1.0, 2.0, 9.0]), np.array([3.0, 4.0])],  # first longer than m
        [np.zeros(0), np.zeros(0)],
        [np.zeros(0), np.ones(2)],
        [],
        np.arange(6.0).reshape(3, 2),
        (np.ones(2), np.ones(2), np.ones(2)),
        [np.ones(4)[::-2], np.ones(4)[::2]],
    ]
    for rows_ in rowsets:
        for n, m in itertools.product(range(4), range(4)):
            for axis, axis2, rank in [(0, 1, 2), (1, 0, 2), (0, 2, 3)]:
                want = _take(_reference_take2, rows_, n, axis, m, axis2, rank)
                got = _take(vector_support.vtake2, rows_, n, axis, m, axis2, rank)
                assert got == want, (rows_, n, m, axis, axis2, rank)
    # the result never aliases the caller's rows
    base = np.arange(6.0).reshape(3, 2)
    out = vector_support.vtake2(base, 3, 0, 2, 1, 2)
    out[0, 0] = 99.0
    assert base[0, 0] == 0.0


def test_vadd_without_its_own_quiet_warns_nothing():
    """inf + -inf and overflow in the batched reverse passes' per-element and
    shared cells: no RuntimeWarning (this module turns them into errors)."""
    for text in ["def f(v : Array R, a : R, b : R) : R = sum (map (\\x -> x * a + x * b) v)",
                 "def f(v : Array R, a : R, b : R) : R = "
                 "sum (map (\\x -> let y = x * a in y + y * b + x * b) v)",
                 "def f(m : Array (Array R), a : R, b : R) : R = sum (build (length m) "
                 "(\\i -> sum (build 2 (\\j -> m ! i ! j * a + m ! i ! j * b))))"]:
        for a, b in [(float("inf"), float("-inf")), (1e308, 1e308), (float("nan"), 1.0)]:
            first = np.array([1.0, 2.0, 3.0])
            args = (([first, first],) if "m :" in text else (first,)) + (a, b)
            for evm in RUNTIMES:
                agree(chad.grad(text, evm=evm)(*args),
                      chad.grad(text, backend="interp", evm=evm)(*args),
                      exact=not rewritten(chad.load(text)))
