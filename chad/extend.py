"""The one extension surface: how a feature adds term nodes, types, primitives and
transforms to chad (in the spirit of HIPS autograd's `extend.py` and of JAX's
per-primitive registrations).

A **term node** declares, in one place:
  - its shape (sub-terms, binders, variables read): the `@node` decorator on its
    class, which every traversal (free variables, rewriting, printing) reads;
  - its evaluation and cost rule, its CHAD rule(s) (per transform name), its
    forward-mode rule, its `chad show` notation and its lowering by the
    compiler: one `register_node(cls, eval=..., chad=..., forward=..., show=...,
    compiled=..., batch=..., vectorise=...)`.
A **type former** (a source type class) declares its cotangent type D2, its zero
term (`zerot`), its JSON codecs for cotangents, and the linear types and
cotangent values it introduces with their zero, plus, potential φ and size:
one `register_type(TypeFormer(...), linear=..., values=...)`.
A **primitive** is one `Primitive` entry (type, evaluation, transposed
derivative, extra cost): `register_primitive`.
A **transform** is a `TransformSpec`: `register_transform`.

An extension calls these from its package's `register()`; the composition root
(chad/features.py) calls the `register()` of every extension. Registering a
different rule for a key that is already taken is an error: an extension adds,
it never overrides. docs/extending.md walks through adding a node and a type.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from attrs import frozen

from chad import tables
from chad.primitives import Primitive
from chad.primitives import register as _register_primitive
from chad.terms import Shape, Term, node
from chad.transform.registry import TransformSpec

__all__ = [
    "node", "Shape", "Term", "register_node", "TypeFormer", "LinearType",
    "CotangentValue", "register_type", "Primitive", "register_primitive",
    "TransformSpec", "register_transform",
]


def register_node(cls: type, *, eval: Callable | None = None,
                  chad: Callable | Mapping[str, Callable] | None = None,
                  show: Callable | None = None,
                  compiled: Callable | str | None = None,
                  inline: Callable | None = None,
                  forward: Callable | None = None,
                  batch: Callable | None = None,
                  vectorise: Callable | None = None) -> type:
    """Register what the core needs to know about the node class `cls`.

    eval   rule(evaluator, node, env) -> (value, steps): its value and cost
           (chad/costmodel/evaluate.py; document the cost in docs/cost-model.md)
    chad   rule(chad, node) -> target term, for the efficient transform; or a
           mapping {transform name: rule} (a transform without its own rule for
           the node falls back to the efficient one)
    show   show(node, one) -> (text, precedence) for `chad show`, where
           one(sub, prec=0) shows a sub-term
    compiled  how the compiler (chad/compile/) lowers it: "eval" runs the node's
           evaluation rule on its compiled sub-terms (a sub-term under binders
           becomes a Python function of them; steps are not counted), or
           lower(gen, node) -> a Python expression, emitting statements through
           `gen` (chad/compile/codegen.py)
    inline expand(node, defs) -> an equivalent term or None: what the compiler may
           put in the node's place before simplifying (a call by the callee's
           body), so that the simplifier sees through it (chad/compile/inline.py)
    forward   rule(fwd, node) -> target term: its forward-mode CHAD rule
           (chad/transform/forward.py), whose value is the pair (primal, tangent)
    batch  rule(batcher, node) -> a batched value: the node vectorised with
           numpy inside the body of a build or map (chad/compile/vectorise.py);
           raise vectorise.NotBatchable where it cannot be
    vectorise  lower(gen, node) -> a Python expression or None: an array node
           (build, map) compiled as numpy code when its body is batchable; on
           None the compiler uses `compiled`
    """
    if not hasattr(cls, "__shape__"):
        raise TypeError(f"{cls.__name__}: declare its shape with @node before registering it")
    if eval is not None:
        tables.put(tables.EVAL, cls, eval, "an evaluation rule")
    if chad is not None:
        rules = {"efficient": chad} if callable(chad) else dict(chad)
        for mode, rule in rules.items():
            tables.put(tables.CHAD, (mode, cls), rule, "a CHAD rule")
    if show is not None:
        tables.put(tables.SHOW, cls, show, "a show rule")
    if compiled is not None:
        tables.put(tables.COMPILE, cls, compiled, "a compile rule")
    if inline is not None:
        tables.put(tables.INLINE, cls, inline, "an inline rule")
    if forward is not None:
        tables.put(tables.FORWARD, cls, forward, "a forward rule")
    if batch is not None:
        tables.put(tables.BATCH, cls, batch, "a batching rule")
    if vectorise is not None:
        tables.put(tables.VECTORISE, cls, vectorise, "a vectorised lowering")
    return cls


@frozen
class LinearType:
    """A linear (cotangent) type class and its zero: zero(lt) -> (value, steps)."""

    cls: type
    zero: Callable[[Any], tuple[Any, int]]


@frozen
class CotangentValue:
    """A class of cotangent values (and its subclasses) with the formalisation's
    monoid and measures: plus(x, y) -> (x + y, steps), phi(x) -> int (the
    potential), size(x) -> int (TH2's size). `None` is always the zero and never
    reaches these functions as x."""

    cls: type
    plus: Callable[[Any, Any], tuple[Any, int]]
    phi: Callable[[Any], int]
    size: Callable[[Any], int]


@frozen
class TypeFormer:
    """A source type class and its cotangent structure.

    D2              t -> the linear type of t's cotangents (D[t]₂)
    zerot           t -> a target term producing the zero cotangent of t
    ctg_from_json   (t, json, path, primal) -> a sparse cotangent (None: not
                    accepted at the boundary)
    densify         (t, primal, ctg) -> the dense cotangent returned to users
    dense_to_json   (t, dense) -> JSON data
    """

    cls: type
    D2: Callable
    zerot: Callable
    ctg_from_json: Callable | None = None
    densify: Callable | None = None
    dense_to_json: Callable | None = None


def register_type(former: TypeFormer, *, linear: tuple[LinearType, ...] = (),
                  values: tuple[CotangentValue, ...] = ()) -> None:
    """Register a type former with the linear types and cotangent values it brings."""
    tables.put(tables.TYPES, former.cls, former, "a type former")
    for lt in linear:
        tables.put(tables.LINEAR_ZERO, lt.cls, lt.zero, "a linear type's zero")
    for cv in values:
        tables.put(tables.COTANGENTS, cv.cls, cv, "a cotangent value class")


def register_primitive(p: Primitive) -> Primitive:
    """Add a primitive (type, evaluation, transposed derivative, extra cost)."""
    return _register_primitive(p)


def register_transform(spec: TransformSpec) -> TransformSpec:
    """Make a transform available by name to the API, the CLI and the checker."""
    tables.put(tables.TRANSFORMS, spec.name, spec, "a transform")
    return spec
