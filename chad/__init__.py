"""chad: Efficient CHAD reverse-mode AD for a small typed functional language.

Pipeline (one module per layer): parser -> checker -> transform -> evaluate.

    import chad
    value, (dx, dy) = chad.grad("def f(x : R, y : R) : R = x * y + sin x")(2.0, 3.0)
"""

from .api import UNSET, CostReport, cost, grad, load, make_evm, run, vjp  # noqa: F401
from .errors import ChadError, EvalError, ParseError, TypeCheckError, UsageError  # noqa: F401

__all__ = ["grad", "vjp", "cost", "run", "load", "make_evm", "CostReport", "UNSET",
           "ChadError", "ParseError", "TypeCheckError", "EvalError", "UsageError"]
