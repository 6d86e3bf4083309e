"""The array programs whose gradient must scale linearly (docs/arrays.md): one table,
used by the step-count test (tests/test_arrays_scaling.py) and the wall-clock
benchmark (benchmarks/bench_arrays.py). name -> (source, n -> (args, ctg))."""

import numpy as np

PROGRAMS = {
    # §8.1's example: a gather read scaled pointwise; the result is an array.
    "build a!i*2": ("def f(a : Array R) : Array R = build (length a) (\\i -> a ! i * 2.0)",
              lambda n: ([np.linspace(0.0, 1.0, n)], [1.0] * n)),
    # a fold of squares (the reduction tree and unTree)
    "fold squares": ("def f(a : Array R) : R = fold (\\p -> fst p + snd p) "
             "(build (length a) (\\i -> a ! i * a ! i))",
             lambda n: ([np.linspace(0.0, 1.0, n)], 1.0)),
    # a loop reading a at computed indices under a branch: BOne / BPlus / collect
    "loop, branch": ("def f(a : Array R) : R = sum (build (length a) (\\i -> "
             "if i < 1 then a ! 0 else a ! (i - 1) * a ! (length a - i)))",
             lambda n: ([np.linspace(0.0, 1.0, n)], 1.0)),
    # a loop reading a at indices computed from an integer array: gathers
    "loop, a!(p!i)": ("def f(a : Array R, p : Array Z) : R = "
             "sum (build (length p) (\\i -> a ! (p ! i) * a ! (length a - 1 - i)))",
             lambda n: ([np.linspace(0.0, 1.0, n), list(np.random.default_rng(n).permutation(n))],
                        1.0)),
}
