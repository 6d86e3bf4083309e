"""Symbolic cost rules of the gather shortcut (Efficient CHAD (Smeding & Vákár),
§8.1; chad/arrays/transform.py's `chad_build` with `extract_gathers`): a build
whose body reads `a ! e` once per element, with `a` bound outside and `e`
mentioning no variable bound inside the body but i. The derivative computes the
index array `ix = build n (i. e)` and the gathered array `g = gather a ix` in the
forward pass, binds `x = g ! i` around the body's derivative, keeps x's cotangent
in a per-element scope cell and ends the reverse pass with one
`add a (BArray ix dx)`.

The source shape is `build s (i. C[a ! e])`, with the placeholder `SubRead(k,
a ! e)` for C[a ! e]: sub-term k is C[x] (in the context Γ, i, x), and the read
is evaluated once in it, so cost(C[a ! e]) = P_k − 1 + cost(a ! e) (the read
replaces the variable x). The index expression e is a sub-term whose primal
runs twice (in the source's reads and in the derivative's index array): one
aggregated symbol ΣP_e serves both (evaluation commutes with weakening).

Costs transcribed from chad/arrays/evaluate.py (eval_build, eval_index,
eval_gather: 1 + c(a) + c(ix) + length ix) and tested against the counting
evaluator (tests/test_prove.py). The final `add` adds a BArray into the cell of
`a`, an array: plusv of two non-empty bags has slack 2 (docs/proofs.md, "A
finding"), which the obligation includes.
"""

from __future__ import annotations

from typing import Any

from attrs import field, frozen

from chad.arrays.evaluate import array_of, element
from chad.arrays.nodes import Gather
from chad.extend import register_node
from chad.terms import Build, Index, Let, Term, Var, node
from chad.types import ArrayT, Z

from .array_rules import length_of
from .loop_rules import _elements, count_of, loop_array
from .specs import GAMMA, Instance, RuleSpec
from .symbolic import EXTRA_RULES, AbsT, Opaque, Sub, SymbolicError


@node("reads")
@frozen
class SubRead(Term):
    """Source placeholder: sub-term k with the gather reads `reads` (a_j ! e_j)
    in it, each evaluated once per element, listed in their order in C:
    C[a_1 ! e_1, ...], where sub-term k is C[x_1, ...]. `names` are the x_j,
    needed only when the placeholder is backed by a real C (concrete mode)."""

    k: int
    reads: tuple
    ty: Any = field(eq=False)
    names: tuple = field(default=(), eq=False)
    loc: Any = field(default=None, eq=False, kw_only=True, repr=False)


def _chad_sub_read(chad, t: SubRead):
    # extract_gathers has replaced the reads by the variables x_j bound around
    # the body's derivative: what is left is sub-term k, C[x_1, ...]
    if not all(isinstance(r, Var) for r in t.reads):
        raise SymbolicError("a gather read that the transform did not extract")
    return chad(Sub(t.k, t.ty))


register_node(SubRead, chad=_chad_sub_read)


def _read_parts(read):
    if not (isinstance(read, Index) and isinstance(read.arr, Var) and isinstance(read.idx, Sub)):
        raise SymbolicError("a gather read that is not `a ! e` with e a placeholder")
    return read.arr.name, read.idx.k


def _source_build_read(se, t: Build, env, n, c0):
    """build s (i. C[a_1 ! e_1, ..., a_r ! e_r]): each read replaces a variable
    (1 step) and costs 1 + 1 + P_e: Σ_i (P_k + Σ_j (1 + P_ej)) = ΣP_k + r·n + Σ_j ΣP_ej."""
    body = t.body
    k, cost = body.k, c0
    envs = [{**env, t.name: i} for i in range(n)] if se.concrete is not None else []
    for j, read in enumerate(body.reads):
        a, ke = _read_parts(read)
        idx, SPe = _shared_primal(se, ke, [{**env, t.name: i} for i in range(n)]
                                  if se.concrete is not None else [], n)
        cost += n + SPe
        if se.concrete is not None:
            for e, i in zip(envs, idx):
                e[body.names[j]] = element(env[a], int(i))
    vals, SPk = _elements(se, "P", k, envs)
    se.hyps.append(SPk >= n)
    se.P[k] = SPk
    if se.concrete is not None:
        return array_of(t.ty, vals), cost + SPk
    return loop_array(se, k, n), cost + SPk


def _shared_primal(se, k, envs, n):
    """The primal of sub-term k once per element (the index expression), one
    symbol ΣP_k shared by every evaluation of the same n elements."""
    key = ("shared", k)
    if key not in se.primal:
        vals, S = _elements(se, "P", k, envs)
        se.hyps.append(S >= n)
        se.primal[key] = (vals, S)
    return se.primal[key]


def _gather_lets(body):
    """The lets `x = g ! i` chad_build puts around the body's derivative."""
    lets = []
    while (isinstance(body, Let) and isinstance(body.rhs, Index)
           and isinstance(body.rhs.arr, Var) and isinstance(body.rhs.idx, Var)):
        lets.append((body.name, body.rhs.arr.name))
        body = body.body
    return lets, body


_plain_build = EXTRA_RULES[Build]


def _build(se, t: Build, env):
    if isinstance(t.body, SubRead):
        s, cs = se.eval(t.size, env)
        n = count_of(se, s)
        return _source_build_read(se, t, env, n, 1 + cs)
    if isinstance(t.body, Sub) and ("shared", t.body.k) in se.primal:
        # the derivative's index array `build n (i. e)`: the source's reads
        # evaluated e for the same n elements
        s, cs = se.eval(t.size, env)
        n = count_of(se, s)
        vals, S = se.primal[("shared", t.body.k)]
        if se.concrete is not None:
            return array_of(t.ty, vals), 1 + cs + S
        ix = Opaque("ix")
        ix.length = n
        return ix, 1 + cs + S
    lets, inner = _gather_lets(t.body)
    if not lets:
        return _plain_build(se, t, env)
    # build n (i. let x_1 = g_1 ! i in ... chad C): 4 steps per let per element

    def elem_env(i):
        e = {**env, t.name: i}
        for x, g in lets:
            e[x] = element(env[g], i)
        return e

    v, c = _plain_build(se, Build(t.size, t.name, inner, ty=t.ty, loc=t.loc), env, elem_env)
    n = v[2]
    return v, c + 4 * len(lets) * n


def _gather(se, t: Gather, env):
    a, ca = se.eval(t.arr, env)
    ix, ci = se.eval(t.idx, env)
    m = length_of(se, ix)
    if se.concrete is not None:
        return tuple(element(a, int(j)) for j in ix), 1 + ca + ci + m
    g = Opaque("gathered")
    g.length = m
    return g, 1 + ca + ci + m


def _sub_read_primal(se, t: SubRead, env):
    raise SymbolicError("a gather placeholder outside a build's body")


EXTRA_RULES.update({Build: _build, Gather: _gather, SubRead: _sub_read_primal})


def _instance(reads: str) -> Instance:
    """build s (i. C[...]) with the reads `reads`, a letter (the array) per read:
    "a" reads a ! e; "ab" a ! e and b ! e (one index array); "aa" a ! e and
    a ! e' (two: a read of the same array needs another index to be another
    read)."""
    res, els = AbsT(2), {"a": AbsT(3), "b": AbsT(4)}
    ctx = GAMMA + tuple((x, ArrayT(els[x])) for x in sorted(set(reads)))
    out, k = [], 3
    for j, x in enumerate(reads):
        if j and x == reads[j - 1]:
            k += 1  # the same array again: another index
        out.append(Index(Var(x, ty=ArrayT(els[x])), Sub(k, Z), ty=els[x]))
    labels = {"a": "one read", "ab": "two arrays, one index", "aa": "one array, two indices"}
    return Instance(Build(Sub(1, Z), "i", SubRead(2, tuple(out), res), ty=ArrayT(res)), ctx,
                    labels.get(reads, reads))


def gather_rules():
    return [RuleSpec("gather", lambda: [_instance("a"), _instance("ab"), _instance("aa")],
                     note="build with gather reads (§8.1): one read, two arrays with one "
                          "index, one array with two indices")]
