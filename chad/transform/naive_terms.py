"""The DENSE linear operations of naive CHAD (Efficient CHAD (Smeding & Vákár), Fig. 4), as target nodes
with honest costs.

Fig. 4 implements the linear types of Fig. 3 naively:

    R (lin) := R     1 (lin) := 1     t (x) s := t x s     t (+) s := 1 + (t + s)
    EV (x1 : t1, ..., xn : tn) := t1 x ... x tn   (associated to the left)

so a cotangent of a pair is always a materialised pair (its zero is a pair of
zeros), and an environment cotangent is a tuple with one dense cell per variable
in scope. Values (same Python encoding as chad/linear.py, minus the sparse
`None` for pairs):

    LR        float
    LUn       None
    LPairT    (a, b), always materialised
    LSumT     None  (Fig. 4's `inl <>`, the zero of a sum: O(1), as in Fig. 4)
              or Inj(side, v)  (Fig. 4's `inr (inl v)` / `inr (inr v)`)
    EV []          None
    EV (G, x : t)  (EV G, cell of x)   -- left-nested, so split is the identity

Costs (docs/naive-chad.md): one step per scalar or structure node built or
visited. `tsize(lt)` is the number of nodes of the dense zero of lt:
tsize(R) = tsize(1) = tsize(t (+) s) = 1, tsize(t (x) s) = 1 + tsize t + tsize s.

    DZero lt            tsize(lt)
    DCast side lt e     1 + cost(e)            (+ tsize(lt) when e is the zero)
    DDensify lt e       cost(e) + size of the dense result (sparse -> dense)
    EVZero lts          1 + sum_i (1 + tsize(lt_i))
    EVOneHot lts i v    1 + cost(v) + n + sum_{j != i} tsize(lt_j)
    EVPlus lts a b      1 + cost(a) + cost(b) + sum_i (1 + plus cost of cell i)
    EVSplit e           1 + cost(e)            (Fig. 4: split := \\y. y)

where the plus cost of two dense cotangents is (Fig. 4): R, 1: 1; pairs:
1 + both components; sums: 1 if the left one is the zero, else
1 + (cast of the right one: 1, or 1 + tsize if it is the zero) + the inner plus.
"""

from __future__ import annotations

from typing import Any

from attrs import field, frozen

from chad.errors import EvalError
from chad.extend import register_node
from chad.linear import LPairT, LR, LSumT, LType, LUn
from chad.terms import Term, node
from chad.values import Inj


def _meta():
    return field(default=None, eq=False, kw_only=True, repr=False)


# ----------------------------------------------------------------- node classes


@node()
@frozen
class DZero(Term):
    """The dense zero 0_lt of Fig. 4 (a pair of zeros for a pair type)."""

    lt: LType
    loc: Any = _meta()
    ty: Any = _meta()


@node("expr")
@frozen
class DCast(Term):
    """Fig. 4's lcastl (side 0) / lcastr (side 1); `lt` is that side's type."""

    side: int
    lt: LType
    expr: Term
    loc: Any = _meta()
    ty: Any = _meta()


@node("expr")
@frozen
class DDensify(Term):
    """Turn a sparse cotangent (chad/linear.py: None = zero pair/sum) of linear
    type lt into the dense representation of Fig. 4."""

    lt: LType
    expr: Term
    loc: Any = _meta()
    ty: Any = _meta()


@node()
@frozen
class EVZero(Term):
    """0 of EV G: a tuple of |G| dense zeros."""

    lts: tuple
    loc: Any = _meta()
    ty: Any = _meta()


@node("val")
@frozen
class EVOneHot(Term):
    """one_{x : t in G} v: the environment vector with v at `level`, zeros elsewhere."""

    lts: tuple
    level: int
    name: str
    val: Term
    loc: Any = _meta()
    ty: Any = _meta()


@node("left", "right")
@frozen
class EVPlus(Term):
    """+ on EV G: cellwise dense addition."""

    lts: tuple
    left: Term
    right: Term
    loc: Any = _meta()
    ty: Any = _meta()


@node("expr")
@frozen
class EVSplit(Term):
    """split : EV (G, x : t) -> EV G x t. The identity on the left-nested tuple."""

    expr: Term
    loc: Any = _meta()
    ty: Any = _meta()


# ----------------------------------------------------------------- dense values and costs


def tsize(lt: LType) -> int:
    """Nodes of the dense zero of lt (= the cost of building it)."""
    match lt:
        case LR() | LUn() | LSumT():
            return 1
        case LPairT(a, b):
            return 1 + tsize(a) + tsize(b)
    raise EvalError(f"internal: naive CHAD has no dense cotangents of {lt!r}")


def dzero(lt: LType):
    """(0_lt, cost)."""
    match lt:
        case LR():
            return 0.0, 1
        case LUn() | LSumT():
            return None, 1
        case LPairT(a, b):
            za, ca = dzero(a)
            zb, cb = dzero(b)
            return (za, zb), 1 + ca + cb
    raise EvalError(f"internal: naive CHAD has no dense cotangents of {lt!r}")


def dcast(side: int, lt: LType, x):
    """lcastl/lcastr of Fig. 4 without the node's own step: (value, cost beyond 1).

    Fig. 4 says `error` for the other side; like the evaluator's sparse casts we
    return the zero instead (it does not arise for cotangents of well-typed
    programs: a cotangent of a sum is always on the side of its value)."""
    if isinstance(x, Inj) and x.side == side:
        return x.value, 0
    return dzero(lt)


def dplus(lt: LType, x, y):
    """x +_lt y on dense cotangents (Fig. 4): (value, cost)."""
    match lt:
        case LR():
            return x + y, 1
        case LUn():
            return None, 1
        case LPairT(a, b):
            u, cu = dplus(a, x[0], y[0])
            v, cv = dplus(b, x[1], y[1])
            return (u, v), 1 + cu + cv
        case LSumT(a, b):
            # case x of { inl _ -> y | inr x' -> case x' of
            #   { inl l -> linl (l + lcastl y) | inr r -> linr (r + lcastr y) } }
            if x is None:
                return y, 1
            side_lt = a if x.side == 0 else b
            y2, cc = dcast(x.side, side_lt, y)
            z, cz = dplus(side_lt, x.value, y2)
            return Inj(x.side, z), 1 + (1 + cc) + cz
    raise EvalError(f"internal: naive CHAD has no dense cotangents of {lt!r}")


def densify(lt: LType, x):
    """Sparse (chad/linear.py) to dense (Fig. 4): (value, cost = nodes built)."""
    match lt:
        case LR():
            return (0.0 if x is None else float(x)), 1
        case LUn():
            return None, 1
        case LPairT(a, b):
            if x is None:
                return dzero(lt)
            u, cu = densify(a, x[0])
            v, cv = densify(b, x[1])
            return (u, v), 1 + cu + cv
        case LSumT(a, b):
            if x is None:
                return None, 1
            z, cz = densify(a if x.side == 0 else b, x.value)
            return Inj(x.side, z), 1 + cz
    raise EvalError(f"internal: naive CHAD has no dense cotangents of {lt!r}")


def ev_zero(lts):
    ev, cost = None, 1
    for lt in lts:
        z, cz = dzero(lt)
        ev, cost = (ev, z), cost + 1 + cz
    return ev, cost


def ev_one_hot(lts, level: int, v):
    ev, cost = None, 0
    for i, lt in enumerate(lts):
        if i == level:
            z, cz = v, 0
        else:
            z, cz = dzero(lt)
        ev, cost = (ev, z), cost + 1 + cz
    return ev, cost


def ev_plus(lts, a, b):
    cells_a, cells_b = ev_to_cells(a), ev_to_cells(b)
    ev, cost = None, 0
    for lt, x, y in zip(lts, cells_a, cells_b):
        z, cz = dplus(lt, x, y)
        ev, cost = (ev, z), cost + 1 + cz
    return ev, cost


def ev_to_cells(ev) -> list:
    """The left-nested EV tuple ((((), c0), c1), ...) as the list [c0, c1, ...]."""
    cells = []
    while ev is not None:
        ev, c = ev
        cells.append(c)
    cells.reverse()
    return cells


# ----------------------------------------------------------------- evaluation rules


def _dzero(ev, t, env):
    return dzero(t.lt)


def _dcast(ev, t, env):
    v, c = ev.eval(t.expr, env)
    r, cc = dcast(t.side, t.lt, v)
    return r, 1 + c + cc


def _ddensify(ev, t, env):
    v, c = ev.eval(t.expr, env)
    r, cd = densify(t.lt, v)
    return r, c + cd


def _evzero(ev, t, env):
    return ev_zero(t.lts)


def _evonehot(ev, t, env):
    v, c = ev.eval(t.val, env)
    r, co = ev_one_hot(t.lts, t.level, v)
    return r, 1 + c + co


def _evplus(ev, t, env):
    a, ca = ev.eval(t.left, env)
    b, cb = ev.eval(t.right, env)
    r, cp = ev_plus(t.lts, a, b)
    return r, 1 + ca + cb + cp


def _evsplit(ev, t, env):
    v, c = ev.eval(t.expr, env)
    return v, 1 + c


_ATOM, _APP = 3, 2


def register() -> None:
    """Register the dense nodes' evaluation rules and notation (chad/extend.py)."""
    atom, app = _ATOM, _APP
    register_node(DZero, compiled="eval", eval=_dzero, show=lambda t, one: ("dzero", atom))
    register_node(DCast, compiled="eval", eval=_dcast, show=lambda t, one: (
        f"{('dcastl', 'dcastr')[t.side]} {one(t.expr, atom)}", app))
    register_node(DDensify, compiled="eval", eval=_ddensify,
                  show=lambda t, one: (f"densify {one(t.expr, atom)}", app))
    register_node(EVZero, compiled="eval", eval=_evzero, show=lambda t, one: (f"evzero[{len(t.lts)}]", atom))
    register_node(EVOneHot, compiled="eval", eval=_evonehot, show=lambda t, one: (
        f"onehot[{len(t.lts)}] {t.name}@{t.level} {one(t.val, atom)}", app))
    register_node(EVPlus, compiled="eval", eval=_evplus, show=lambda t, one: (
        f"{one(t.left, app)} +ev[{len(t.lts)}] {one(t.right, app)}", 1))
    register_node(EVSplit, compiled="eval", eval=_evsplit, show=lambda t, one: (f"split {one(t.expr, atom)}", app))
