"""The compiler: derivative programs (and source programs) to Python code.

    codegen.py   target terms to Python source (A-normal form, generated names only)
    registers.py dead pure assignments dropped, locals whose value is dead reused
    support.py   what generated code calls: the mutable-array EVM without costs,
                 the cells' monoid, the bridge running an evaluation rule
    backend.py   compile a def's primal, gradient or forward/backward pair; cache

The pipeline: parse -> check -> transform -> simplify (chad/simplify/) ->
compile (here) or evaluate with step counts (chad/costmodel/). docs/compiler.md.
"""
