"""The programs of benchmarks/bench_compiled.py (benchmarks/compiled_suite/) are
the same function for every tool: chad's text parses and type checks, and every
implementation (the hand-written VJPs always; PyTorch, JAX and autograd where
installed, else skipped) computes chad's interpreter's value and gradient, to
the tolerance the benchmark checks before timing. Nothing here is timed.

The chain is taken at its quick length (100 lets), the rest at full size."""

from __future__ import annotations

import pytest

import chad
from benchmarks.compiled_suite import MODULES, cases, common

CASES = {c.key: c for c in cases(quick=True)}
PEERS = ("torch", "jax", "autograd")


@pytest.fixture(scope="module")
def reference():
    """chad's interpreter's (value, gradients) per case, computed once."""
    return {key: common.chad_impl(c, "interp").grad() for key, c in CASES.items()}


@pytest.mark.parametrize("key", sorted(CASES))
def test_program_parses_and_type_checks(key):
    c = CASES[key]
    prog = chad.load(c.text)
    d = prog.find(c.fn)
    assert len(d.params) == len(c.args)


def test_every_module_is_a_case():
    assert [m.case().key for m in MODULES] == list(CASES)
    assert [c.key for c in cases() if c.scalar] == ["mul_sin", "rotvecquat", "chain"]


def test_full_length_chain_has_1000_lets():
    from benchmarks.compiled_suite import chain

    text = chain.text()
    assert text.count("let ") == 1000 and "x1000 =" in text
    assert chad.load(text).find("chain") is not None


def _check(impl, ref):
    value, grads = impl.unpack(impl.grad())
    ref_value, ref_grads = ref
    ok, err = common.compare(grads, ref_grads)
    assert ok, f"gradient differs from chad's interpreter: relative error {err:.3g}"
    ok, err = common.compare(value, ref_value)
    assert ok, f"value differs: relative error {err:.3g}"
    ok, err = common.compare(impl.primal(), ref_value)
    assert ok, f"primal differs: relative error {err:.3g}"


@pytest.mark.parametrize("key", sorted(CASES))
def test_hand_written_vjp_matches_chad(key, reference):
    _check(CASES[key].peers["numpy"](), reference[key])


@pytest.mark.parametrize("peer", PEERS)
@pytest.mark.parametrize("key", sorted(CASES))
def test_peer_matches_chad(key, peer, reference):
    pytest.importorskip(peer)
    _check(CASES[key].peers[peer](), reference[key])


def test_compare_rejects_a_different_gradient():
    assert common.compare((1.0, (2.0, 3.0)), (1.0, (2.0, 3.0)))[0]
    assert not common.compare((1.0, (2.0, 3.0 + 1e-6)), (1.0, (2.0, 3.0)))[0]
    assert not common.compare((1.0, 2.0), (1.0, 2.0, 3.0))[0]
