"""The optional C extension chad.compile._kernels (running sums in the
evaluator's order and a select that does not branch: chad/compile/kernels.py).
Everything else is in pyproject.toml. The extension is optional: where it
cannot be built (no C compiler), chad installs without it and runs numpy's
np.cumsum and np.where instead, with the same values, more slowly. No
-ffast-math: the sums must keep their order."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("chad.compile._kernels", ["chad/compile/_kernels.c"],
                             extra_compile_args=["-O3", "-fno-fast-math", "-ffp-contract=off"], optional=True)])
