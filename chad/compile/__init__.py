"""The compiler: derivative programs (and source programs) to Python code.

    source.py    rewrites of the source before the transformation (compiled
                 path only): let-bound lambdas and small calls inlined
    inline.py    calls of derived defs expanded in target terms
    codegen.py   target terms to Python source (A-normal form, generated names only)
    vectorise.py build / map bodies batched as numpy code (vmap style)
    failing.py   which terms cannot fail (may be computed early)
    parallel_codegen.py  fork points for the parallel runtime
    registers.py dead pure assignments dropped, locals whose value is dead reused
    support.py   what generated code calls: the mutable-array EVM without costs,
                 the cells' monoid, the bridge running an evaluation rule
    vector_support.py, parallel_support.py  what vectorised / forking code calls
    known.py     facts about arrays known by construction (identity indices, no -0.0)
    ieee.py      numpy without floating-point warnings, cheaply
    kernels.py   loops numpy lacks (the evaluator's running sums, a branch-free
                 select), in C (_kernels.c, an optional extension: setup.py)
    convert.py   arguments in, gradients out, with fast paths
    backend.py   compile a def's primal, gradient or forward/backward pair; cache

The pipeline: parse -> check -> transform -> simplify (chad/simplify/) ->
compile (here) or evaluate with step counts (chad/costmodel/). docs/compiler.md.
"""
