"""Term nodes of closure-converted programs and of the derivatives of functions.

Closure-converted source (Efficient CHAD (Smeding & Vákár), appendix C):

    Pack(tag, e)            pack_ρ e : Σα. α × ((α × τ) ->□ σ),  e : ρ × ((ρ × τ) ->□ σ)
    Unpack(e, z, body)      case e of pack_α z -> body
    ClosedLam(x, body)      λx. body : τ ->□ σ   (body's only free variable is x)
    ClosedApp(f, e)         application of a closed function

The fused form (the default; same semantics, fewer administrative steps):

    MkClosure(tag, caps, x, body)
                            pack_ρ ⟨⟨y1..yk⟩, λ⟨x, y1..yk⟩. body⟩ in one node: the
                            closed function binds x and the captured y1..yk
                            directly (no destructuring lets). Costs 1 + k, as the
                            source lambda.
    CApp(f, e)              case f of pack z -> (snd z) ⟨e, fst z⟩ in one node:
                            costs 1 + c(f) + c(e) + c(body), as the source app.

Target only (the derivative programs):

    LCastPack(tag, e)       cast_ρ on Σ cotangents: the inside of an LPacked with
                            tag ρ, or the zero (None)
    LPackAs(p, e)           pack a cotangent with the tag of the primal closure p
    LFunZero()              the zero cotangent of a function type (None)
    LTagZero()              the zero cotangent of the abstract α (None)
    DCall(name, args, mode) call of the derivative of def `name` (built by the
                            transform `mode` on first use, see calls.py)
    EnvOneT(i, d)           the one-entry environment bag [(i, d)] (fused form)
    EnvScatter(e, targets)  the action adding each entry (i, d) of the bag e to
                            the cell targets[i] = (level, name, sub): d itself, or
                            the one-entry bag [(sub, d)] when sub is not None
    LogOneT(a, d)           the one-entry log [(a, d)] (naive §9)
    LogFold(log, x, body)   for each entry x of the log, the action body; the
                            actions are sequenced with >> (naive §9's fold)

Their costs are in docs/cost-model.md ("Functions") and in evaluate.py.
"""

from __future__ import annotations

from typing import Any

from attrs import field, frozen

from chad.terms import Term, node


def _meta():
    return field(default=None, eq=False, kw_only=True, repr=False)


@node("expr")
@frozen
class Pack(Term):
    tag: Any
    expr: Term
    loc: Any = _meta()
    ty: Any = _meta()


@node("scrut", "body", binds={"body": "name"})
@frozen
class Unpack(Term):
    scrut: Term
    name: str
    body: Term
    loc: Any = _meta()
    ty: Any = _meta()


@node("body", binds={"body": "name"}, closure=True)
@frozen
class ClosedLam(Term):
    name: str
    body: Term
    loc: Any = _meta()
    ty: Any = _meta()


@node("fn", "arg")
@frozen
class ClosedApp(Term):
    fn: Term
    arg: Term
    loc: Any = _meta()
    ty: Any = _meta()


@node("body", binds={"body": ("name", "captures")}, reads="captures", closure=True)
@frozen
class MkClosure(Term):
    tag: Any
    captures: tuple
    name: str
    body: Term
    loc: Any = _meta()
    ty: Any = _meta()


@node("fn", "arg")
@frozen
class CApp(Term):
    fn: Term
    arg: Term
    loc: Any = _meta()
    ty: Any = _meta()


@node("expr")
@frozen
class LCastPack(Term):
    tag: Any
    expr: Term
    loc: Any = _meta()
    ty: Any = _meta()


@node("primal", "expr")
@frozen
class LPackAs(Term):
    primal: Term
    expr: Term
    loc: Any = _meta()
    ty: Any = _meta()


@node()
@frozen
class LFunZero(Term):
    loc: Any = _meta()
    ty: Any = _meta()


@node()
@frozen
class LTagZero(Term):
    loc: Any = _meta()
    ty: Any = _meta()


@node("args")
@frozen
class DCall(Term):
    name: str
    args: tuple
    mode: str = "efficient"
    loc: Any = _meta()
    ty: Any = _meta()


@node("expr")
@frozen
class EnvOneT(Term):
    index: int
    expr: Term
    loc: Any = _meta()
    ty: Any = _meta()


@node("expr")
@frozen
class EnvScatter(Term):
    expr: Term
    targets: tuple
    loc: Any = _meta()
    ty: Any = _meta()


@node("arg", "ctg")
@frozen
class LogOneT(Term):
    arg: Term
    ctg: Term
    loc: Any = _meta()
    ty: Any = _meta()


@node("log", "body", binds={"body": "name"})
@frozen
class LogFold(Term):
    log: Term
    name: str
    body: Term
    loc: Any = _meta()
    ty: Any = _meta()
