"""Tests use the layers directly (evaluator, transforms, generators), so they
load every transform and extension first, as the API and the CLI do.

Hypothesis runs without its per-example deadline: a deadline is a timing test,
and the machines the suite runs on are shared and noisy."""

import pytest
from hypothesis import settings

from chad import features
from chad.compile import kernels

settings.register_profile("chad", deadline=None)
settings.load_profile("chad")
features.load()


@pytest.fixture(params=["native", "numpy"])
def kernels_impl(request, monkeypatch):
    """Each test of chad/compile/kernels.py twice: with the C loops (skipped
    where the extension is not built) and with numpy's fallbacks."""
    if request.param == "native":
        if not kernels.native():
            pytest.skip("the C extension is not built")
    else:
        monkeypatch.setattr(kernels, "_native", None)
    return request.param
