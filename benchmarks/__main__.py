"""Driver: `python -m benchmarks` runs every benchmarks/bench_*.py module's main();
`python -m benchmarks evm ...` runs only the named ones (bench_evm, ...).
Options (`--quick`, ...) go to the named benchmarks whose main() takes an argv:
`python -m benchmarks compiled --quick`."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
import time

import benchmarks


def discover() -> list[str]:
    return sorted(m.name[len("bench_"):] for m in pkgutil.iter_modules(benchmarks.__path__)
                  if m.name.startswith("bench_"))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    names = discover()
    if any(a in ("-h", "--help") for a in argv):
        print(f"usage: python -m benchmarks [{' | '.join(names)} ...]")
        return 0
    options = [a for a in argv if a.startswith("-")]
    argv = [a for a in argv if not a.startswith("-")]
    unknown = [a for a in argv if a not in names]
    if unknown:
        print(f"unknown benchmark(s) {', '.join(unknown)}; available: {', '.join(names)}",
              file=sys.stderr)
        return 2
    for name in argv or names:
        module = importlib.import_module(f"benchmarks.bench_{name}")
        takes_argv = bool(inspect.signature(module.main).parameters)
        if options and not takes_argv:
            print(f"benchmark {name} takes no options ({' '.join(options)})", file=sys.stderr)
            return 2
        print(f"== {name} ==")
        start = time.perf_counter()
        module.main(options or None) if takes_argv else module.main()
        print(f"({name}: {time.perf_counter() - start:.1f} s)\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
