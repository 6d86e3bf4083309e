"""The transformations the API and CLI can use, behind one small interface.

A transform gives, for a checked def d:
  forward_term(d)   a target term, in the environment of d's parameters, whose
                    value is the pair (primal result, backpropagator);
  backward(ev, bp, ctg, d)
                    runs the backpropagator on the cotangent `ctg` with the
                    evaluator `ev` (and its EVM): (cotangent per parameter,
                    steps), where forward steps + these steps = gradient_steps;
  gradient_term(d)  the single term whose cost is gradient_steps (TH2's left
                    side, with the cotangent in the variable CTG); tests check
                    that it agrees with forward + backward.
"""

from __future__ import annotations

import importlib
from typing import Callable

from attrs import frozen

from chad.errors import UsageError

CTG = "ctg$"


@frozen
class TransformSpec:
    name: str
    forward_term: Callable
    backward: Callable[..., tuple[list, int]]
    gradient_term: Callable
    description: str = ""


_MODULES = {
    "efficient": "chad.transform.efficient",
    "naive": "chad.transform.naive",
    "naive-ho": "chad.functions.naive_ho",  # naive CHAD on functions (seed 000 §9)
}
TRANSFORM_NAMES = tuple(_MODULES)


def get_transform(name: str) -> TransformSpec:
    if name not in _MODULES:
        raise UsageError(f"unknown transform {name!r} (choose from {', '.join(_MODULES)})")
    try:
        module = importlib.import_module(_MODULES[name])
    except ModuleNotFoundError as e:  # pragma: no cover - during development only
        raise UsageError(f"the {name} transform is not available: {e}") from None
    return module.SPEC
