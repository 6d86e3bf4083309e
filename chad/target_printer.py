"""Pretty-printer for target (derivative) terms, used by `chad show`.

The notation follows the paper: `let`, `case`, closures `\\[captured] x -> e`,
the EVM operations `pure`, `bind`, `>>`, `run`, `add x@level` (the paper's `one`),
`scope`, and the sparse linear operations `lpair`, `lfst`, `linl`, `lcastl`,
`lzero`, ... Primitives print as `OP arg`. Target terms are not meant to be parsed
back; they contain generated names with `$`.

`term_to_json` gives the same term as a JSON tree (`chad show --json`): each node
is an object {"node": class name, field: value, ...} with the node's fields in
declaration order; sub-terms are objects, tuples lists, types their printed form,
real constants numbers (or "inf", "-inf", "nan": chad/values.py). Source
positions and inferred types are left out.
"""

from __future__ import annotations

import attrs

from chad import tables
from chad import terms as T
from chad.values import _float

INDENT = "  "
_ATOM, _APP = 3, 2


def show_term(t: T.Term) -> str:
    return "\n".join(_lines(t, 0))


def _lines(t, depth: int) -> list[str]:
    """Multi-line layout for lets and cases; everything else on one line."""
    pad = INDENT * depth
    out = []
    while isinstance(t, T.Let):
        rhs = _lines(t.rhs, depth + 1)
        if len(rhs) == 1:
            out.append(f"{pad}let {t.name} = {rhs[0].strip()} in")
        else:
            out.append(f"{pad}let {t.name} =")
            out.extend(rhs)
            out.append(f"{pad}in")
        t = t.body
    if isinstance(t, T.Case):
        out.append(f"{pad}case {_one(t.scrut)} of")
        out.append(f"{pad}{{ inl {t.lname} ->")
        out.extend(_lines(t.lbody, depth + 1))
        out.append(f"{pad}| inr {t.rname} ->")
        out.extend(_lines(t.rbody, depth + 1))
        out.append(f"{pad}}}")
        return out
    out.append(pad + _one(t))
    return out


def _one(t, prec: int = 0) -> str:
    s, p = _show(t)
    return f"({s})" if p < prec else s


def _show(t) -> tuple[str, int]:
    match t:
        case T.Var(name):
            return name, _ATOM
        case T.Unit():
            return "()", _ATOM
        case T.Prim("LIT", _, c) | T.Prim("ILIT", _, c):
            return repr(c), _ATOM
        case T.Prim("LZERO", _):
            return "lzero", _ATOM
        case T.Prim(op, arg):
            return f"{op} {_one(arg, _ATOM)}", _APP
        case T.Pair(a, b):
            return f"({_one(a)}, {_one(b)})", _ATOM
        case T.Fst(e):
            return f"fst {_one(e, _ATOM)}", _APP
        case T.Snd(e):
            return f"snd {_one(e, _ATOM)}", _APP
        case T.Inl(e):
            return f"inl {_one(e, _ATOM)}", _APP
        case T.Inr(e):
            return f"inr {_one(e, _ATOM)}", _APP
        case T.Lam(x, _ty, body, caps):
            caps_s = "" if caps is None else "[" + ", ".join(caps) + "] "
            return f"\\{caps_s}{x} -> {_one(body)}", 0
        case T.App(f, a):
            return f"{_one(f, _APP)} {_one(a, _ATOM)}", _APP
        case T.Let() | T.Case():
            return " ".join(line.strip() for line in _lines(t, 0)), 0
        case T.PureEVM(e):
            return f"pure {_one(e, _ATOM)}", _APP
        case T.BindEVM(m, k):
            return f"bind {_one(m, _ATOM)} {_one(k, _ATOM)}", _APP
        case T.ThenEVM(a, b):
            return f"{_one(a, _APP)} >> {_one(b, _APP)}", 1
        case T.RunEVM(m, e):
            return f"run {_one(m, _ATOM)} {_one(e, _ATOM)}", _APP
        case T.AddEVM(level, name, v):
            return f"add {name}@{level} {_one(v, _ATOM)}", _APP
        case T.ScopeEVM(i, m):
            return f"scope {_one(i, _ATOM)} {_one(m, _ATOM)}", _APP
        case T.LUnit():
            return "lunit", _ATOM
        case T.LPair(a, b):
            return f"lpair {_one(a, _ATOM)} {_one(b, _ATOM)}", _APP
        case T.LFst(e, _):
            return f"lfst {_one(e, _ATOM)}", _APP
        case T.LSnd(e, _):
            return f"lsnd {_one(e, _ATOM)}", _APP
        case T.LPairZero():
            return "lpairzero", _ATOM
        case T.LSumZero():
            return "lsumzero", _ATOM
        case T.LInl(e):
            return f"linl {_one(e, _ATOM)}", _APP
        case T.LInr(e):
            return f"linr {_one(e, _ATOM)}", _APP
        case T.LCastL(e, _):
            return f"lcastl {_one(e, _ATOM)}", _APP
        case T.LCastR(e, _):
            return f"lcastr {_one(e, _ATOM)}", _APP
    show = tables.SHOW.get(type(t))  # extensions' nodes (chad/extend.py)
    if show is not None:
        return show(t, _one)
    return f"<{type(t).__name__}>", _ATOM


def term_to_json(t: T.Term):
    """The JSON tree of a (target or source) term; see the module docstring."""
    out = {"node": type(t).__name__}
    for f in attrs.fields(type(t)):
        if f.eq:  # loc and ty are metadata (eq=False): not part of the term
            out[f.name] = _field_json(getattr(t, f.name))
    return out


def _field_json(v):
    if isinstance(v, T.Term):
        return term_to_json(v)
    if isinstance(v, (tuple, list)):
        return [_field_json(x) for x in v]
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return _float(v)
    return str(v)  # a Type (its printed form) or an extension's constant
