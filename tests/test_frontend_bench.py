"""The decorated-Python versions of the compiled-gradient benchmark's programs
(benchmarks/compiled_suite/python_versions.py) compute the suite's programs:
the same values and gradients as the text, and, where the Python is written as
the text is (`same`), the same step counts on the interpreter. Nothing is timed."""

from __future__ import annotations

import pytest

import chad
from benchmarks.compiled_suite import cases, common, python_versions

CASES = {c.key: c for c in cases(quick=True)}
VERSIONS = python_versions.versions(quick=True)


@pytest.mark.parametrize("version", VERSIONS, ids=[v.key for v in VERSIONS])
def test_python_version_computes_the_suite_program(version):
    case = CASES[version.key]
    prog, name = chad.resolve(version.fn)
    vals = version.fn.encode_args(version.args)
    kw = {} if case.ctg is None else {"ctg": case.ctg}
    value, grads = chad.grad(prog, name)(*vals, **kw)
    ref_value, ref_grads = chad.grad(case.text, case.fn, backend="interp")(*case.args, **kw)
    ok, err = common.compare(grads, ref_grads)
    assert ok, err
    ok, err = common.compare(value, ref_value)
    assert ok, err
    if version.same:
        steps = chad.run(prog, vals, name)[1]
        assert steps == chad.run(case.text, case.args, case.fn)[1]


def test_jax_calls_agree_with_the_text_gradient():
    f = next(v for v in VERSIONS if v.key == "mlp")
    grads = chad.grad(f.fn, argnums=tuple(range(6)))(*f.args)
    ref = chad.grad(CASES["mlp"].text, "mlp")(*CASES["mlp"].args)[1]
    ok, err = common.compare(grads, ref)
    assert ok, err
