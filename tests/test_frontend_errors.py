"""The Python front end's errors: every construct outside the subset is reported
at the Python file, line and column (of this file), saying what is unsupported
and what to write instead; hostile identifiers are renamed safely."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import chad
from chad import Array
from chad.errors import ChadError

THIS = os.path.abspath(__file__)
GRID = np.ones(3)
LABEL = "a string"


def helper(x):  # a plain Python function, not decorated
    return x


def where(marker: str, at: str) -> tuple[int, int]:
    """The line holding `# marker` in this file and the column of `at` on it."""
    with open(THIS, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.rstrip().endswith(f"# {marker}"):
                return n, line.index(at) + 1
    raise AssertionError(marker)


@chad.function
def e_while(x: float) -> float:
    while x > 0:  # while
        x = x - 1.0
    return x


@chad.function
def e_break(x: float) -> float:
    y = x
    for i in range(3):
        y = y * 2.0
        break  # break
    return y


@chad.function
def e_continue(x: float) -> float:
    y = x
    for i in range(3):
        continue  # continue
    return y


@chad.function
def e_global(x: float) -> float:
    global GRID  # global
    return x


@chad.function
def e_try(x: float) -> float:
    try:  # try
        y = x
    except ValueError:
        y = 0.0
    return y


@chad.function
def e_attr_assign(x: float) -> float:
    x.real = 1.0  # attrassign
    return x


@chad.function
def e_item_assign(a: Array[float]) -> float:
    a[0] = 1.0  # itemassign
    return a[0]


@chad.function
def e_unknown_call(x: float) -> float:
    return helper(x)  # unknowncall


@chad.function
def e_closure_array(x: float) -> float:
    return x * GRID[0]  # closearray


@chad.function
def e_closure_str(x: float) -> float:
    return x if LABEL else x  # closestr


@chad.function
def e_no_param_annotation(x) -> float:  # noparamann
    return x


@chad.function
def e_no_result_annotation(x: float):  # noresultann
    return x


@chad.function
def e_default(x: float = 1.0) -> float:  # default
    return x


@chad.function
def e_varargs(*xs: float) -> float:  # varargs
    return 0.0


@chad.function
def e_return_in_loop(x: float) -> float:
    for i in range(3):
        return x  # returnloop
    return x


@chad.function
def e_for_array(a: Array[float]) -> float:
    s = 0.0
    for v in a:  # forarray
        s = s + v
    return s


@chad.function
def e_range_step(n: int) -> int:
    s = 0
    for i in range(0, n, 2):  # rangestep
        s = s + i
    return s


@chad.function
def e_comp_if(a: Array[float]) -> Array[float]:
    return [v for v in a if v > 0.0]  # compif


@chad.function
def e_comp_two(a: Array[float]) -> Array[float]:
    return [v * w for v in a for w in a]  # comptwo


@chad.function
def e_slice(a: Array[float]) -> Array[float]:
    return a[1:]  # slice


@chad.function
def e_walrus(x: float) -> float:
    return (y := x) + y  # walrus


@chad.function
def e_string(x: float) -> float:
    s = "text"  # string
    return x


@chad.function
def e_none(x: float) -> float:
    y = None  # none
    return x


@chad.function
def e_matmul(a: Array[float], b: Array[float]) -> float:
    return a @ b  # matmul


@chad.function
def e_lambda_value(x: float) -> float:
    return (lambda v: v)  # lambdavalue


@chad.function
def e_recursive(x: float) -> float:
    return e_recursive(x)  # recursive


@chad.function
def e_nested_recursion(x: float) -> float:
    def loop(v):
        return loop(v)  # nestedrec
    return loop(x)


@chad.function
def e_one_branch(x: float) -> float:
    if x > 0.0:
        y = x
    else:
        z = x
    return y  # onebranch


@chad.function
def e_bool_plus(x: float, b: bool) -> float:
    return x + b  # boolplus


@chad.function
def e_return_type(x: float) -> int:
    return x  # returntype


@chad.function
def e_float_index(a: Array[float], x: float) -> float:
    return a[x]  # floatindex


@chad.function
def e_print(x: float) -> float:
    print(x)  # print
    return x


@chad.function
def e_import(x: float) -> float:
    import math as m  # import
    return m.sin(x)


@chad.function
def e_is(x: float) -> bool:
    return x is x  # is


@chad.function
def e_dict(x: float) -> float:
    d = {1: x}  # dict
    return x


@chad.function
def e_unreachable(x: float) -> float:
    return x
    y = x  # unreachable


@chad.function
def e_no_return(x: float) -> float:
    y = x  # noreturn


@chad.function
def e_cond_not_bool(x: float) -> float:
    if x:  # condnotbool
        return x
    return -x


@chad.function
def e_array_arith(a: Array[float], b: Array[float]) -> Array[float]:
    return a + b  # arrayarith


@chad.function
def e_unknown_name(x: float) -> float:
    return x + undefined_thing  # noqa: F821  # unknownname


@chad.function
def e_sum_start(a: Array[float]) -> float:
    return sum(a, 1.0)  # sumstart


@chad.function
def e_shape(a: Array[float]) -> int:
    return a.shape  # shape


@chad.function
def e_sq_wrong_arg(x: float) -> float:
    return math_sq(True)  # wrongarg


@chad.function
def math_sq(x: float) -> float:
    return x * x


@chad.function
def e_tuple1(x: tuple[float]) -> float:  # tuple1
    return 0.0


CASES = [
    (e_while, "while", "while", "while loops are not supported"),
    (e_break, "break", "break", "break is not supported"),
    (e_continue, "continue", "continue", "continue is not supported"),
    (e_global, "global", "global", "global is not supported"),
    (e_try, "try", "try", "try is not supported"),
    (e_attr_assign, "attrassign", "x.real", "assignment to an attribute"),
    (e_item_assign, "itemassign", "a[0]", "assignment to an element"),
    (e_unknown_call, "unknowncall", "helper", "call to an unknown function helper"),
    (e_closure_array, "closearray", "GRID", "GRID is a value of type ndarray"),
    (e_closure_str, "closestr", "LABEL", "pass it as an argument"),
    (e_no_param_annotation, "noparamann", "x)", "parameter x has no type annotation"),
    (e_no_result_annotation, "noresultann", "def", "has no type annotation"),
    (e_default, "default", "1.0", "default values of parameters are not supported"),
    (e_varargs, "varargs", "xs", "only plain positional parameters"),
    (e_return_in_loop, "returnloop", "return", "return inside a for loop"),
    (e_for_array, "forarray", "a:", "for i in range(len(a))"),
    (e_range_step, "rangestep", "range", "a step is not supported"),
    (e_comp_if, "compif", "v > 0.0", "a condition in a comprehension"),
    (e_comp_two, "comptwo", "[v", "nest them"),
    (e_slice, "slice", "1:", "slices are not supported"),
    (e_walrus, "walrus", "y :=", "the walrus operator"),
    (e_string, "string", '"text"', "a str constant is not supported"),
    (e_none, "none", "None", "None is not supported"),
    (e_matmul, "matmul", "a @ b", "the operator @ is not supported"),
    (e_lambda_value, "lambdavalue", "lambda", "a lambda is supported only"),
    (e_recursive, "recursive", "e_recursive(x)", "recursion is not allowed"),
    (e_nested_recursion, "nestedrec", "loop(v)", "recursion is not supported"),
    (e_one_branch, "onebranch", "y", "give it a value before the if"),
    (e_bool_plus, "boolplus", "b ", "found bool"),
    (e_return_type, "returntype", "x ", "expected int, found float"),
    (e_float_index, "floatindex", "x]", "an array index must be an int"),
    (e_print, "print", "print", "print has no effect"),
    (e_import, "import", "import", "import at module level"),
    (e_is, "is", "x is", "not supported"),
    (e_dict, "dict", "{", "dicts are not supported"),
    (e_unreachable, "unreachable", "y", "unreachable code"),
    (e_no_return, "noreturn", "y", "can end without a return"),
    (e_cond_not_bool, "condnotbool", "x:", "must be a bool"),
    (e_array_arith, "arrayarith", "a +", "write a comprehension"),
    (e_unknown_name, "unknownname", "undefined_thing", "unknown name undefined_thing"),
    (e_sum_start, "sumstart", "sum", "a start value is not supported"),
    (e_shape, "shape", "a.shape", "write len(a)"),
    (e_sq_wrong_arg, "wrongarg", "True", "expected float, found bool"),
    (e_tuple1, "tuple1", "tuple[float]", "at least two"),
]


@pytest.mark.parametrize("f,marker,at,message", CASES, ids=[c[1] for c in CASES])
def test_error_names_python_place(f, marker, at, message):
    with pytest.raises(ChadError) as info:
        chad.to_source(f)
    err = info.value
    line, col = where(marker, at)
    assert err.loc is not None and err.loc.file == THIS
    assert (err.loc.line, err.loc.col) == (line, col), str(err)
    assert message in err.message, err.message
    text = str(err)
    assert text.startswith(f"{THIS}:{line}:{col}: ")
    assert "^" in text  # the Python source line, with a caret under the column


def test_every_error_is_a_chad_error_also_when_called():
    for f, *_ in CASES:
        with pytest.raises(ChadError):
            f(1.0)


def test_a_lambda_or_exec_cannot_be_decorated():
    with pytest.raises(ChadError, match="not a lambda"):
        chad.to_source(chad.function(lambda x: x))
    namespace: dict = {}
    exec("def made(x: float) -> float:\n    return x\n", namespace)
    with pytest.raises(ChadError, match="source .* is not available"):
        chad.to_source(chad.function(namespace["made"]))


# ------------------------------------------------------------ hostile identifiers

@chad.function
def sin(x: float) -> float:  # a def named like a chad keyword
    return math.sin(x) * 2.0


scale = chad.function  # (a decorator under another name)


@scale
def hostile(__import__: float, os: float, let: float, fst: float, R: float, Array: float,
            p_1: float, t: float) -> float:
    exec = __import__ * os
    build = [let * fst + in_ for in_ in range(2)]
    λ = R + Array
    t_1 = t + 1.0
    sum_ = sum(build)
    return exec + sum_ + λ + p_1 + t_1 + sin(t)


def _python_hostile(*args):
    return hostile.__wrapped__(*args)


def test_hostile_identifiers_are_renamed_safely():
    args = (1.5, 2.0, 0.5, 3.0, -1.0, 4.0, 0.25, 0.7)
    # the same value as Python, and no Python code was run from a name
    assert hostile(*args) == pytest.approx(_python_hostile(*args))
    src = chad.to_source(hostile)
    assert "sin'd(" in src  # the def named sin is renamed, and called by that name
    assert "let'k" in src and "fst'k" in src  # keyword names are primed
    assert "u'u1" in src  # the non-ASCII name
    g = chad.grad(hostile, argnums=tuple(range(8)))(*args)
    want = [2.0, 1.5, 6.0, 1.0, 1.0, 1.0, 1.0, 1.0 + 2.0 * math.cos(0.7)]
    np.testing.assert_allclose(g, want, rtol=1e-12)


@chad.function
def sq_local(x: float) -> float:
    return x * x


sql = sq_local


@chad.function
def shadows_def_name(x: float) -> float:
    sq_local = x + 1.0  # a local with the callee's def name
    return sql(sq_local) + sq_local


def test_a_local_never_captures_a_def_name():
    assert shadows_def_name(2.0) == shadows_def_name.__wrapped__(2.0)
    assert "sq_local'k" in chad.to_source(shadows_def_name)


def test_relocated_type_errors_point_at_python():
    """A type error the checker finds in the generated text is reported at the
    Python position of the fragment (the position map of emit.py)."""
    from chad.checker import check_program
    from chad.frontend.emit import Rendered, frag, relocate
    from chad.parser import parse_program
    from chad.terms import Loc

    here, bad = Loc("user.py", 3, 5), Loc("user.py", 7, 12)
    root = frag(here, "def f(x : R) : R = ", frag(None, "x + ", frag(bad, "true")))
    rendered = Rendered(root, here)
    program = relocate(parse_program(rendered.text, "<t>"), rendered)
    with pytest.raises(ChadError) as info:
        check_program(program)
    assert info.value.loc == bad


@chad.function
def out_of_range(a: Array[float], i: int) -> float:
    return a[i] * 2.0  # outofrange


def test_runtime_errors_point_at_python():
    line, col = where("outofrange", "a[i]")
    for call in (lambda: out_of_range(np.ones(2), 5),
                 lambda: chad.grad(out_of_range)(np.ones(2), 5),
                 lambda: chad.vjp(out_of_range, np.ones(2), 5)):
        with pytest.raises(ChadError) as info:
            call()
        err = info.value
        assert (err.loc.file, err.loc.line, err.loc.col) == (THIS, line, col)
        assert "out of range" in err.message
        assert "return a[i] * 2.0" in str(err)  # the Python line, shown
