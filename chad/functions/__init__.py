"""Functions: lambdas, application and def calls (Smeding & Vákár, *Efficient
CHAD*, §9 and appendix C). `register()` declares every function node, the
function type formers and the naive-ho transform through chad/extend.py; the
composition root (chad/features.py) calls it.

    types.py      closure-converted types, cotangent types, runtime values
    terms.py      the node classes of converted programs and derivatives (with shapes)
    convert.py    typed closure conversion
    efficient.py  efficient CHAD of closures (appendix C), on the fly after conversion
    calls.py      def calls: closed functions, derivatives called, not inlined
    forward.py    forward-mode CHAD of lambdas, application and def calls (FCall)
    naive_ho.py   naive higher-order CHAD (§9), its own TransformSpec "naive-ho"
    evaluate.py   evaluation rules and `chad show` notation of the new nodes
    programs.py   t_n, and generated higher-order programs for the tests
"""

from __future__ import annotations

from chad.extend import (
    CotangentValue, LinearType, TypeFormer, register_node, register_transform, register_type,
)
from chad.linear import L_UN
from chad.terms import App, Call, Lam, LUnit
from chad.types import Fun

from . import calls, naive_ho
from . import compiled as C
from . import efficient as F
from . import forward as FW
from . import evaluate as V
from .terms import (
    CApp, ClosedApp, ClosedLam, DCall, EnvOneT, EnvScatter, LCastPack, LFunZero, LogFold,
    LogOneT, LPackAs, LTagZero, MkClosure, Pack, Unpack,
)
from .types import (
    L_ABSTRACT, L_FUN, ClosedFun, ClosureT, LAbstract, LFunT, LPacked, TyVar, CatBag,
)


def register() -> None:
    """Declare the function nodes and types, and the naive-ho transform."""
    # source forms (their classes are the language's, chad/terms.py); their
    # evaluation and printing are core rules, their CHAD rules come from here
    register_node(Lam, chad=F.source_lam, forward=FW.forward_lam)
    register_node(App, chad=F.source_app, forward=FW.forward_app)
    register_node(Call, chad=calls.call_rule, forward=FW.forward_call)
    register_node(FW.FCall, compiled=FW.lower_fcall, eval=FW.eval_fcall, show=FW.show_fcall,
                  forward=FW.forward_fcall)
    # closure conversion (chad/functions/terms.py)
    register_node(Pack, compiled="eval", eval=V.eval_pack, chad=F.pack, show=V.SHOW[Pack])
    register_node(Unpack, compiled="eval", eval=V.eval_unpack, chad=F.unpack, show=V.SHOW[Unpack])
    register_node(ClosedLam, compiled=C.lower_closed_lam, eval=V.eval_closed_lam, chad=F.closed_lam, show=V.SHOW[ClosedLam])
    register_node(ClosedApp, compiled="eval", eval=V.eval_closed_app, chad=F.closed_app, show=V.SHOW[ClosedApp])
    register_node(MkClosure, compiled=C.lower_mk_closure, eval=V.eval_mk_closure, chad=F.mk_closure, show=V.SHOW[MkClosure])
    register_node(CApp, compiled=C.lower_capp, eval=V.eval_capp, chad=F.capp, show=V.SHOW[CApp])
    # derivative-only forms
    register_node(LCastPack, compiled="eval", eval=V.eval_lcastpack, show=V.SHOW[LCastPack])
    register_node(LPackAs, compiled="eval", eval=V.eval_lpackas, show=V.SHOW[LPackAs])
    register_node(LFunZero, compiled="eval", eval=V.eval_zero, show=V.SHOW[LFunZero])
    register_node(LTagZero, compiled="eval", eval=V.eval_zero, show=V.SHOW[LTagZero])
    register_node(DCall, compiled=C.lower_dcall, inline=C.inline_dcall, eval=calls.eval_dcall, show=V.SHOW[DCall])
    register_node(EnvOneT, compiled="eval", eval=V.eval_envone, show=V.SHOW[EnvOneT])
    register_node(EnvScatter, compiled="eval", eval=V.eval_envscatter, show=V.SHOW[EnvScatter])
    register_node(LogOneT, compiled="eval", eval=V.eval_logone, show=V.SHOW[LogOneT])
    register_node(LogFold, compiled="eval", eval=V.eval_logfold, show=V.SHOW[LogFold])
    # type formers: D2 of a function (and of its closure-converted Σ-type) is a
    # packed environment cotangent (efficient) or a log of calls (naive-ho)
    register_type(
        TypeFormer(Fun, D2=lambda t: L_FUN, zerot=lambda t: LFunZero()),
        linear=(LinearType(LFunT, LFunT.zero), LinearType(LAbstract, LAbstract.zero)),
        values=(CotangentValue(LPacked, plus=LPacked.plus, phi=LPacked.phi, size=LPacked.size),
                CotangentValue(CatBag, plus=CatBag.plus, phi=CatBag.phi,
                               size=CatBag.size)))
    register_type(TypeFormer(ClosureT, D2=lambda t: L_FUN, zerot=lambda t: LFunZero()))
    register_type(TypeFormer(ClosedFun, D2=lambda t: L_UN, zerot=lambda t: LUnit()))
    register_type(TypeFormer(TyVar, D2=lambda t: L_ABSTRACT, zerot=lambda t: LTagZero()))
    register_transform(naive_ho.SPEC)
