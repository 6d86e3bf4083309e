"""Benchmarks, run by `python -m benchmarks [name ...]`.

Every module `benchmarks/bench_<name>.py` that defines `main() -> None` is a
benchmark: the driver (benchmarks/__main__.py) imports it and calls `main()`,
which prints its own small table. Add a benchmark by adding such a module.
Benchmarks measure and report; they never fail on wall time.
"""
