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
                    that it agrees with forward + backward;
  backward_term(d, r)
                    the backward pass as a term, in the environment of the
                    variable r (the forward pair) and CTG: what `backward` does,
                    for the compiler (chad/compile/); `cells_of` turns its value
                    into the list of parameter cotangents.

The transforms are registered by name (chad/extend.py `register_transform`); the
composition root (chad/features.py) registers every transform there is.
"""

from __future__ import annotations

from typing import Callable

from attrs import frozen

from chad import tables
from chad.errors import UsageError

CTG = "ctg$"


@frozen
class TransformSpec:
    name: str
    forward_term: Callable
    backward: Callable[..., tuple[list, int]]
    gradient_term: Callable
    description: str = ""
    # the Chad class deriving def bodies for this transform (def calls derive
    # their callee with the caller's transform); None: not a CHAD variant
    chad_class: type | None = None
    backward_term: Callable | None = None
    cells_of: Callable | None = None


def transform_names() -> tuple[str, ...]:
    """The names of the registered transforms, in registration order."""
    return tuple(tables.TRANSFORMS)


def get_transform(name: str) -> TransformSpec:
    spec = tables.TRANSFORMS.get(name)
    if spec is None:
        known = ", ".join(transform_names()) or "none registered: call chad.features.load()"
        raise UsageError(f"unknown transform {name!r} (choose from {known})")
    return spec
