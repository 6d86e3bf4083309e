"""The array literal rule for every length: one obligation over a symbolic number
of elements n >= 1, generalised from the real transform's obligations for
literals of 1 to GEN_CHECK elements (Efficient CHAD (Smeding & Vákár), §8; the
rule is chad/arrays/transform.py's `chad_array_lit`).

A literal of m elements has m sub-terms of its own, so chad/proofs/rules.py
derives one obligation per m (chad/proofs/loop_rules.py: `[e_1, ..., e_m]`, the
element i with its own symbols P_i, crun_i, ccall_i, m_i, φ(ctg_i), its action
running on the cells element i − 1 left). Here each of those obligations is put
in a canonical form:

* an element's symbols are replaced by their sums over the elements (ΣP, Σcrun,
  Σccall, Σm, Σφ(ctg)): every linear form of the obligation must give all the
  elements of a family the same coefficient (it then is that coefficient times
  the sum);
* the cells between two elements vanish: they occur only in the elements'
  hypotheses, which are summed (TH1 summed over the elements, as for the loops:
  right side c·ΣP − m·b), where they telescope;
* a hypothesis about one element (P_i >= 1, ...) is summed over the m elements
  (ΣP >= m): it must occur once per element;
* every constant must be affine in m.

The forms for m = 1 .. GEN_CHECK must agree but for their constants, which are
then written α + β·n for a symbol n >= 1: that is the obligation for n
elements. It implies each per-m obligation (a model of the per-m hypotheses
gives, by summing, a model of the aggregated ones with the same goal), so
proving it proves every literal of n >= 1 elements whose transform has the
shape of the checked ones (the rule is a loop over the elements; the check
covers GEN_CHECK lengths). tests/test_prove_arrays.py checks the implication
with z3 for each m. The empty literal keeps its own obligation.
"""

from __future__ import annotations

import re

import attrs
import z3

from chad.terms import ArrayLit
from chad.types import ArrayT

from .specs import GAMMA, Instance, RuleSpec
from .symbolic import AbsT, Sub

GEN_CHECK = 6  # the lengths the generalisation is checked on: 1 .. GEN_CHECK
_ELEM = re.compile(r"^(P|crun|ccall|m)(\d+)_\d+$")


class NotUniform(Exception):
    """The per-m obligations are not one form with constants affine in m."""


def literal(m: int, el=None) -> Instance:
    el = el or AbsT(1)
    return Instance(ArrayLit(tuple(Sub(k, el) for k in range(1, m + 1)), ty=ArrayT(el)),
                    GAMMA, f"{m} element{'s' if m != 1 else ''}")


def linear(e) -> dict:
    """A linear integer z3 expression as {symbol name: coefficient, 1: constant}."""
    out: dict = {}

    def go(x, k):
        if z3.is_int_value(x):
            out[1] = out.get(1, 0) + k * x.as_long()
        elif z3.is_const(x):
            out[x.decl().name()] = out.get(x.decl().name(), 0) + k
        elif z3.is_add(x):
            for c in x.children():
                go(c, k)
        elif z3.is_sub(x):
            go(x.children()[0], k)
            for c in x.children()[1:]:
                go(c, -k)
        elif z3.is_app_of(x, z3.Z3_OP_UMINUS):
            go(x.children()[0], -k)
        elif z3.is_mul(x):
            consts = [c for c in x.children() if z3.is_int_value(c)]
            rest = [c for c in x.children() if not z3.is_int_value(c)]
            f = 1
            for c in consts:
                f *= c.as_long()
            if len(rest) > 1:
                raise NotUniform(f"a non-linear term {x}")
            if rest:
                go(rest[0], k * f)
            else:
                out[1] = out.get(1, 0) + k * f
        else:
            raise NotUniform(f"an unexpected term {x}")

    go(e if isinstance(e, z3.ExprRef) else z3.IntVal(e), 1)
    return {s: c for s, c in out.items() if c != 0}


_RELS = {z3.Z3_OP_GE: ">=", z3.Z3_OP_LE: "<=", z3.Z3_OP_EQ: "=="}


def _relation(h):
    for op, rel in _RELS.items():
        if z3.is_app_of(h, op):
            a, b = h.children()
            return rel, linear(a - b)
    raise NotUniform(f"an unexpected hypothesis {h}")


class SymbolRoles:
    """The roles of one per-m obligation's symbols: element families, the
    cells between elements, shared symbols (by stem and occurrence)."""

    def __init__(self, ob, m: int, cells: int):
        names = sorted({n for f in _forms(ob) for n in f if n != 1},
                       key=lambda n: int(n.rsplit("_", 1)[1]))
        self.family: dict = {}   # name -> (family, element)
        self.shared: dict = {}   # name -> canonical name
        outs = [n for n in names if n.startswith("phiout_")]
        ctgs = [n for n in names if n.startswith("phictg_")]
        if len(outs) != m * cells or len(ctgs) != m:
            raise NotUniform("unexpected cells or element cotangents")
        for i, n in enumerate(ctgs):
            self.family[n] = ("phictg", i)
        for i, n in enumerate(outs):
            j, c = divmod(i, cells)
            if j == m - 1:
                self.shared[n] = f"phiout#{c}"
            else:
                self.family[n] = (f"phimid#{c}", j)
        seen: dict = {}
        for n in names:
            if n in self.family or n in self.shared:
                continue
            g = _ELEM.match(n)
            if g:
                self.family[n] = (g.group(1), int(g.group(2)) - 1)
                continue
            stem = n.rsplit("_", 1)[0]
            seen[stem] = seen.get(stem, -1) + 1
            self.shared[n] = f"{stem}#{seen[stem]}"

    def canon(self, form: dict, what: str) -> tuple:
        """The form over sums: each family's coefficient (the same for all its
        elements that occur), the shared symbols, the constant."""
        out, fam = {}, {}
        for n, c in form.items():
            if n == 1:
                out[1] = c
            elif n in self.shared:
                out[self.shared[n]] = c
            else:
                f, i = self.family[n]
                fam.setdefault(f, {})[i] = c
        for f, coefs in fam.items():
            if len(set(coefs.values())) != 1:
                raise NotUniform(f"{what}: the elements of {f} have different coefficients")
            out["Σ" + f] = next(iter(coefs.values()))
        return out

    def element_of(self, form: dict):
        """The one element whose symbols (and only those) a form mentions, or None."""
        es = {self.family[n][1] for n in form if n != 1 and n in self.family}
        if len(es) == 1 and all(n == 1 or n in self.family for n in form):
            return es.pop()
        return None


def _forms(ob):
    yield linear(ob.lhs)
    yield linear(ob.P)
    for h in ob.hyps:
        yield _relation(h)[1]
    for lhs, P, _ in ob.sub_hyps:
        yield linear(lhs)
        yield linear(P)


def _without_const(f: dict) -> tuple:
    return tuple(sorted((k, v) for k, v in f.items() if k != 1))


def canonical(ob, m: int, cells: int) -> dict:
    """The canonical form of the obligation for m elements: {key: constant},
    the key naming the piece (goal, a hypothesis, the summed sub-hypothesis)
    and its form over the sums."""
    if ob.error is not None:
        raise NotUniform(ob.error)
    names = SymbolRoles(ob, m, cells)
    out: dict = {}

    def put(key, const):
        if key in out:
            out[key] += const  # a repeated hypothesis: counted (per element)
        else:
            out[key] = const

    lhs, P = names.canon(linear(ob.lhs), "goal"), names.canon(linear(ob.P), "goal")
    put(("lhs", _without_const(lhs)), lhs.get(1, 0))
    put(("P", _without_const(P)), P.get(1, 0))
    per_elem: dict = {}
    seen: dict = {}
    for h in ob.hyps:
        rel, form = _relation(h)
        if all(n == 1 or names.family.get(n, ("",))[0].startswith("phimid") for n in form):
            continue  # about a cell between elements only: it vanishes from the goal
        e = names.element_of(form)
        c = names.canon(form, str(h))
        shape = (rel, _without_const(c))
        if e is None:
            i = seen[shape] = seen.get(shape, -1) + 1
            put(("hyp",) + shape + (i,), c.get(1, 0))
        else:
            per_elem.setdefault(shape + (c.get(1, 0),), set()).add(e)
    for key, es in per_elem.items():
        if es != set(range(m)):
            raise NotUniform(f"a hypothesis about some elements only: {key}")
        put(("elemhyp",) + key[:2], key[2] * m)  # summed over the elements
    sl, sp, mult = {}, {}, 0
    for lhs_k, P_k, mult_k in ob.sub_hyps:
        for n, c in linear(lhs_k).items():
            sl[n] = sl.get(n, 0) + c
        for n, c in linear(P_k).items():
            sp[n] = sp.get(n, 0) + c
        mult += mult_k
    sl = names.canon({n: c for n, c in sl.items() if c != 0}, "sub-terms")
    sp = names.canon(sp, "sub-terms")
    if any(isinstance(k, str) and k.startswith("Σphimid") for k in sl):
        raise NotUniform("the cells between elements do not telescope")
    put(("sub", _without_const(sl), _without_const(sp)), (sl.get(1, 0), sp.get(1, 0), mult))
    return out


def generalise(obs: dict, cells: int):
    """From the obligations for m = 1 .. GEN_CHECK ({m: Obligation}): the
    obligation for n >= 1 elements (hyps, sub_hyps, lhs, P over z3 symbols,
    n included), or raise NotUniform."""
    canon = {m: canonical(ob, m, cells) for m, ob in obs.items()}
    ms = sorted(canon)
    keys = set(canon[ms[0]])
    if any(set(canon[m]) != keys for m in ms):
        raise NotUniform("the obligations for different lengths have different shapes")

    def affine(vals):
        a, b = vals[0], vals[1] - vals[0]
        base = a - b * ms[0]
        if any(v != base + b * m for v, m in zip(vals, ms)):
            raise NotUniform("a constant that is not affine in the number of elements")
        return base, b

    n = z3.Int("n")
    syms: dict = {}

    def sym(name):
        if name not in syms:
            syms[name] = z3.Int(name.replace("#", "_").replace("Σ", "sum_"))
        return syms[name]

    def expr(form, const):
        return sum((c * sym(k) for k, c in form), 0) + const

    hyps, sub_hyps, lhs, P = [n >= 1], [], None, None
    for key in sorted(keys, key=repr):
        vals = [canon[m][key] for m in ms]
        kind = key[0]
        if kind == "sub":
            (l0, l1), (p0, p1), (m0, m1) = (affine([v[i] for v in vals]) for i in range(3))
            sub_hyps.append((expr(key[1], l0 + l1 * n), expr(key[2], p0 + p1 * n), m0 + m1 * n))
            continue
        a, b = affine(vals)
        if kind in ("lhs", "P"):
            e = expr(key[1], a + b * n)
            lhs, P = (e, P) if kind == "lhs" else (lhs, e)
            continue
        rel, form = key[1], key[2]
        e = expr(form, a + b * n)
        hyps.append(e >= 0 if rel == ">=" else e <= 0 if rel == "<=" else e == 0)
    return hyps, sub_hyps, lhs, P


def literal_obligations(evaluate):
    """The array literal's obligations (evaluate: Instance -> its Obligation,
    chad/proofs/rules.py): the empty literal, and n >= 1 elements generalised
    from the literals of 1 .. GEN_CHECK elements."""
    ob0 = evaluate(literal(0))
    obs = {m: evaluate(literal(m)) for m in range(1, GEN_CHECK + 1)}
    label = "n >= 1 elements"
    try:
        hyps, sub_hyps, lhs, P = generalise(obs, len(GAMMA))
        agg = attrs.evolve(obs[1], label=label, hyps=tuple(hyps), sub_hyps=tuple(sub_hyps),
                           lhs=lhs, P=P, parts={})
    except NotUniform as e:
        agg = attrs.evolve(obs[1], label=label, hyps=(), sub_hyps=(), lhs=0, P=0, parts={},
                           error=f"not one obligation for every length: {e}")
    return [ob0, agg]


def literal_rules():
    return [RuleSpec("array literal", lambda: [], derive=literal_obligations)]
