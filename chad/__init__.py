"""chad: Efficient CHAD reverse-mode AD for a small typed functional language.

Pipeline (one folder or module per layer): parser -> checker -> transform ->
evaluate (chad/costmodel/, counting steps) with an EVM runtime (chad/runtime/).

    import chad
    value, (dx, dy) = chad.grad("def f(x : R, y : R) : R = x * y + sin x")(2.0, 3.0)

    @chad.function                      # typed Python, translated (chad/frontend/)
    def f(x: float, y: float) -> float:
        return x * y + math.sin(x)
    dx, dy = chad.grad(f, argnums=(0, 1))(2.0, 3.0)

The public names below are those of chad/api.py, chad/frontend/ and chad/errors.py. They are
loaded on first use (PEP 562), so that importing a lower layer (e.g.
`chad.costmodel.evaluate`, which imports `chad.terms`) does not pull in the API, and
with it every layer, through this package's `__init__`.
"""

from __future__ import annotations

import importlib

_PUBLIC = {
    "grad": "chad.api", "vjp": "chad.api", "primal": "chad.api", "cost": "chad.api",
    "run": "chad.api", "value_and_grad": "chad.api", "jacrev": "chad.api",
    "jvp": "chad.api", "jacfwd": "chad.api", "hessian": "chad.api",
    "resolve": "chad.api", "complexity": "chad.api",
    "function": "chad.frontend", "Array": "chad.frontend", "to_source": "chad.frontend",
    "from_text": "chad.frontend",
    "load": "chad.api", "make_evm": "chad.api", "CostReport": "chad.api", "UNSET": "chad.api",
    "ChadError": "chad.errors", "ParseError": "chad.errors", "TypeCheckError": "chad.errors",
    "EvalError": "chad.errors", "UsageError": "chad.errors",
}

__all__ = list(_PUBLIC)


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'chad' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
