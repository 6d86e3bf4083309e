"""The core's lookup tables, filled through the extension surface (chad/extend.py).

Each table maps a class (a term node, a source type, a linear type, a cotangent
value) or a name (a transform) to what the core needs to know about it. The core
modules read these tables; they never import an extension. Extensions (arrays,
functions) and the core's own modules fill them with the `register_*` functions
of chad/extend.py, and the composition root (chad/features.py) decides which
extensions are loaded.

This module imports nothing from the project, so every layer can read it.
"""

from __future__ import annotations

from typing import Any, Callable

# term node class -> rule(evaluator, node, env) -> (value, steps)   (chad/costmodel/evaluate.py)
EVAL: dict[type, Callable] = {}

# (transform name, term node class) -> rule(chad, node) -> target term
CHAD: dict[tuple[str, type], Callable] = {}

# term node class -> rule(forward, node) -> target term     (chad/transform/forward.py)
FORWARD: dict[type, Callable] = {}

# term node class -> show(node, one) -> (text, precedence)          (chad/target_printer.py)
SHOW: dict[type, Callable] = {}

# source type class -> TypeFormer (chad/extend.py): D2, zerot, JSON codecs
TYPES: dict[type, Any] = {}

# linear type class -> zero() -> (value, steps)                    (chad/linear.py zerov)
LINEAR_ZERO: dict[type, Callable] = {}

# cotangent value class -> CotangentValue (plus, phi, size)         (chad/linear.py)
COTANGENTS: dict[type, Any] = {}

# term node class -> how the compiler lowers it (chad/compile/): "eval" (its
# evaluation rule runs on compiled sub-terms) or lower(gen, node) -> expression
COMPILE: dict[type, Any] = {}

# term node class -> batch(batcher, node) -> a batched value: how the node is
# vectorised inside a build or map body (chad/compile/vectorise.py); a node
# class with an entry here is tried as a vectorised array operation first
BATCH: dict[type, Callable] = {}

# term node class -> vectorise(gen, node) -> a Python expression, or None: an
# array node (build, map) the compiler tries as numpy code first (chad/compile/
# vectorise.py); None means the node's `COMPILE` entry is used
VECTORISE: dict[type, Callable] = {}

# term node class -> expand(node, defs) -> an equivalent term, or None: what the
# compiler may put in the node's place before simplifying (e.g. a call inlined)
INLINE: dict[type, Any] = {}

# transform name -> TransformSpec                                   (chad/transform/registry.py)
TRANSFORMS: dict[str, Any] = {}


def put(table: dict, key, value, what: str) -> None:
    """Register `value` under `key`; registering a different value for a key that
    is taken is an error (an extension never overrides a rule)."""
    old = table.get(key)
    if old is not None and old != value:
        raise ValueError(f"{what} for {_name(key)} is already registered")
    table[key] = value


def cotangent_ops(x):
    """The CotangentValue registered for the class of x or one of its bases
    (None if there is none). Cached per class."""
    cls = type(x)
    ops = COTANGENTS.get(cls)
    if ops is None:
        for base in cls.__mro__[1:]:
            ops = COTANGENTS.get(base)
            if ops is not None:
                COTANGENTS[cls] = ops
                break
    return ops


def _name(key) -> str:
    if isinstance(key, tuple):
        return "(" + ", ".join(_name(k) for k in key) + ")"
    return getattr(key, "__name__", repr(key))
