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


@pytest.fixture
def kept(monkeypatch):
    """Counts the blocks of products a nested reverse pass keeps as their
    factors (chad/compile/scaled.py, ScaledRows: so a test knows that path
    ran)."""
    from chad.compile import scaled

    made = [0]
    real = scaled.ScaledRows.__init__

    def init(self, *a):
        made[0] += 1
        real(self, *a)

    monkeypatch.setattr(scaled.ScaledRows, "__init__", init)
    return made


def in_threads(work, k: int = 4) -> None:
    """work() run on k threads at once, all joined."""
    import threading

    threads = [threading.Thread(target=work) for _ in range(k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


@pytest.fixture
def forking(monkeypatch):
    """Both parallel runtimes fork wherever a split has two non-empty halves
    (the interpreter's ParallelEVM at grain 1, the compiled code's
    parallel_support.grain(1)): their fork paths run on small inputs."""
    from chad import api_core
    from chad.compile import parallel_support
    from chad.runtime.parallel_evm import ParallelEVM
    from chad.runtime.registry import make_evm

    def runtime(name, **options):
        if name == "parallel":
            return ParallelEVM(grain=1, max_workers=2)
        return make_evm(name, **options)

    monkeypatch.setattr(api_core, "_make_runtime", runtime)
    with parallel_support.grain(1):
        yield
