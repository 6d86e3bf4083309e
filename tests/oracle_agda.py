"""An independent oracle: the Agda formalisation of Efficient CHAD, transliterated.

Source: https://github.com/tomsmeding/efficient-chad-agda at its latest commit
a13909c9327ef571c8489609f36156d39676e62b ("Fix bug in costing of lfst and lsnd",
2023-10-17), files `spec.agda`, `spec/LACM.agda` and `spec/linear-types.agda`.
Everything here is written from those files, clause by clause, and shares no code
with the project (`chad/`, `chad/costmodel/`, `chad/runtime/`): it has its own types,
values, terms (tuples with de Bruijn indices, as `Term` in spec.agda), `eval`
with costs, `chad`, the LACM, `zerov`/`plusv`, `φ` and `size`.

The first-order fragment only (as the formalisation): var let prim unit pair fst
snd inl inr case in the source; lam app and the EVM and linear forms in the
target; primitives ADD MUL NEG LIT IADD IMUL INEG SIGN (+ LZERO LADD LSCALE LNEG).

Representation
--------------
Types (`Typ Pr`):  "R" | "Z" | "U" | ("*", a, b) | ("+", a, b)
Linear types:      "LU" | "LR" | ("*!", a, b) | ("+!", a, b)
Values:            R float, Z int, U None, pair tuple (a, b), sum In(side, v)
Linear values:     LU None (tt), LR float, pairs None (nothing) or (x, y) (just),
                   sums None (nothing) or In(side, v) (just (inj₁/inj₂ v))
Environments:      a Python tuple, index 0 is `var Z` (the innermost binder)
Functions:         a Python callable x -> (result, cost)   (Rep (σ :-> τ))
LACM actions:      a Python callable env -> (result, env', cost), where an
                   environment tuple (LEtup) is None for [] and (x, rest)

Terms (one tuple per constructor of `Term`; fields after the tag):
    ("var", i)  ("let", rhs, body)  ("prim", op, e)  ("unit",)  ("pair", a, b)
    ("fst", e)  ("snd", e)  ("inl", e, sumty)  ("inr", e, sumty)  ("case", e, l, r)
    ("lam", (i1, ..., ik), body)  ("app", f, a)
    ("pure", e)  ("bind", m, k)  ("run", m, envterm, n)  ("add", i, ltyp, e)
    ("scope", init, m)  ("lunit",)  ("lpair", a, b)  ("lfst", e, ltyp)
    ("lsnd", e, ltyp)  ("lpairzero",)  ("linl", e)  ("linr", e)
    ("lcastl", e, ltyp)  ("lcastr", e, ltyp)  ("lsumzero",)
`op` is a name, or ("LIT", c). `sumty` is the type of an injection (only the
source uses it, for chad's types). The implicit type arguments that `eval` needs
(`lfst {σ}` for `zerov σ`, `add {τ}` for `plusv τ`, `run {Γ'}` for `length Γ'`)
are stored in the node.
"""

from __future__ import annotations

import math
import sys

sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))

AGDA_REPO = "tomsmeding/efficient-chad-agda"
AGDA_COMMIT = "a13909c9327ef571c8489609f36156d39676e62b"
PRIMOPS = ("ADD", "MUL", "NEG", "LIT", "IADD", "IMUL", "INEG", "SIGN")


class In:
    """inj₁ (side 0) / inj₂ (side 1) of a sum (values and linear values)."""

    __slots__ = ("side", "value")

    def __init__(self, side: int, value):
        self.side = side
        self.value = value

    def __eq__(self, other):
        return isinstance(other, In) and self.side == other.side and self.value == other.value

    def __hash__(self):
        return hash((self.side, self.value))

    def __repr__(self):
        return f"{('inl', 'inr')[self.side]}({self.value!r})"


# ------------------------------------------------------------------ spec/linear-types.agda
ONE = 1


def zerov(lt):
    """zerov : (τ : LTyp) -> LinRep τ × ℤ"""
    if lt == "LU":
        return None, ONE
    if lt == "LR":
        return 0.0, ONE
    return None, ONE  # (σ :*! τ) and (σ :+! τ): nothing


def plusv(lt, x, y):
    """plusv : (τ : LTyp) -> LinRep τ -> LinRep τ -> LinRep τ × ℤ (clauses in order)"""
    if lt == "LU":
        return None, ONE
    if lt == "LR":
        return x + y, ONE  # primFloatPlus x y
    tag, s, t = lt
    if tag == "*!":
        if x is None:
            return y, ONE
        if y is None:
            return x, ONE
        xr, cx = plusv(s, x[0], y[0])
        yr, cy = plusv(t, x[1], y[1])
        return (xr, yr), ONE + cx + cy
    # (σ :+! τ)
    if y is None:
        return x, ONE
    if x is None:
        return y, ONE
    if x.side == 0 and y.side == 0:
        z, cz = plusv(s, x.value, y.value)
        return In(0, z), ONE + cz
    if x.side == 1 and y.side == 1:
        z, cz = plusv(t, x.value, y.value)
        return In(1, z), ONE + cz
    return None, ONE  # NOTE (Agda): a proper implementation would error here.


# ------------------------------------------------------------------ spec/LACM.agda
def lacm_pure(x):
    return lambda e: (x, e, ONE)


def lacm_bind(f, g):
    """bind f g e = let x, e1, c1 = f e; m2, ccall = g x; y, e2, c2 = m2 e1
    in y, e2, one + c1 + ccall + c2"""

    def act(e):
        x, e1, c1 = f(e)
        m2, ccall = g(x)
        y, e2, c2 = m2(e1)
        return y, e2, ONE + c1 + ccall + c2

    return act


def lacm_run(n_gamma, f, e):
    """run {Γ} f e = let r, e', c = f e in r, e', one + length Γ + c"""
    r, e2, c = f(e)
    return r, e2, ONE + n_gamma + c


def lacm_add(idx, lt, x):
    """add Z x (y, e) = (tt, (plusv τ x y, e), one + cz); add (S i): recurse, uncosted."""

    def act(e):
        y, rest = e
        if idx == 0:
            z, cz = plusv(lt, x, y)
            return None, (z, rest), ONE + cz
        r, rest2, c = lacm_add(idx - 1, lt, x)(rest)
        return r, (y, rest2), c

    return act


def lacm_scope(x, f):
    """scope x f e = let r, (x', e'), c = f (x, e) in (x', r), e', one + c"""

    def act(e):
        r, (x2, e2), c = f((x, e))
        return (x2, r), e2, ONE + c

    return act


# ------------------------------------------------------------------ spec.agda: evalprim
def evalprim(op, v):
    if isinstance(op, tuple):  # LIT x
        assert op[0] == "LIT" and v is None
        return op[1]
    if op == "ADD" or op == "LADD":
        return v[0] + v[1]
    if op == "MUL" or op == "LSCALE":
        return v[0] * v[1]
    if op == "NEG" or op == "LNEG":
        return -v
    if op == "IADD":
        return v[0] + v[1]
    if op == "IMUL":
        return v[0] * v[1]
    if op == "INEG":
        return -v
    if op == "SIGN":
        if v < 0.0:
            return In(0, In(0, None))
        if 0.0 < v:
            return In(0, In(1, None))
        return In(1, None)
    if op == "LZERO":
        return 0.0
    raise ValueError(f"oracle: unknown primitive {op!r}")


def prim_type(op, arg_ty):
    """The result type of a source primitive (data Primop)."""
    if isinstance(op, tuple):
        return "R"
    return {"ADD": "R", "MUL": "R", "NEG": "R", "IADD": "Z", "IMUL": "Z", "INEG": "Z",
            "SIGN": ("+", ("+", "U", "U"), "U")}[op]


# ------------------------------------------------------------------ spec.agda: eval
def eval_(env: tuple, t):
    """eval : Val tag Γ -> Term tag Γ τ -> Rep τ × ℤ"""
    tag = t[0]
    if tag == "var":
        return env[t[1]], ONE
    if tag == "let":
        v, c1 = eval_(env, t[1])
        r, c2 = eval_((v,) + env, t[2])
        return r, ONE + c1 + c2
    if tag == "lam":
        captured = tuple(env[i] for i in t[1])  # buildValFromInj inj env
        body = t[2]
        return (lambda x: eval_((x,) + captured, body)), ONE + len(t[1])
    if tag == "app":
        f, cf = eval_(env, t[1])
        x, cx = eval_(env, t[2])
        y, cy = f(x)
        return y, ONE + cf + cx + cy
    if tag == "prim":
        v, c = eval_(env, t[2])
        return evalprim(t[1], v), ONE + c
    if tag == "unit" or tag == "lunit":
        return None, ONE
    if tag == "pair":
        a, ca = eval_(env, t[1])
        b, cb = eval_(env, t[2])
        return (a, b), ONE + ca + cb
    if tag == "fst":
        v, c = eval_(env, t[1])
        return v[0], ONE + c
    if tag == "snd":
        v, c = eval_(env, t[1])
        return v[1], ONE + c
    if tag == "inl" or tag == "linl":
        v, c = eval_(env, t[1])
        return In(0, v), ONE + c
    if tag == "inr" or tag == "linr":
        v, c = eval_(env, t[1])
        return In(1, v), ONE + c
    if tag == "case":
        v, c = eval_(env, t[1])
        z, cz = eval_((v.value,) + env, t[2] if v.side == 0 else t[3])
        return z, ONE + c + cz
    if tag == "pure":
        v, c = eval_(env, t[1])
        return lacm_pure(v), ONE + c
    if tag == "bind":
        m, c1 = eval_(env, t[1])
        k, c2 = eval_(env, t[2])
        return lacm_bind(m, k), ONE + c1 + c2
    if tag == "run":
        m, c1 = eval_(env, t[1])
        denv, c2 = eval_(env, t[2])
        x, envctg, capp = lacm_run(t[3], m, denv)
        return (x, envctg), ONE + c1 + c2 + capp
    if tag == "add":
        v, c = eval_(env, t[3])
        return lacm_add(t[1], t[2], v), ONE + c
    if tag == "scope":
        v, c1 = eval_(env, t[1])
        m, c2 = eval_(env, t[2])
        return lacm_scope(v, m), ONE + c1 + c2
    if tag == "lpair":
        a, ca = eval_(env, t[1])
        b, cb = eval_(env, t[2])
        return (a, b), ONE + ca + cb  # just (a, b)
    if tag == "lfst" or tag == "lsnd":
        v, c = eval_(env, t[1])
        if v is None:  # the corrected rule (a13909c): one + ce + cz
            z, cz = zerov(t[2])
            return z, ONE + c + cz
        return v[0 if tag == "lfst" else 1], ONE + c
    if tag == "lpairzero" or tag == "lsumzero":
        return None, ONE
    if tag == "lcastl" or tag == "lcastr":
        v, c = eval_(env, t[1])
        side = 0 if tag == "lcastl" else 1
        if v is not None and v.side == side:
            return v.value, ONE + c
        z, cz = zerov(t[2])  # nothing, or the other side (Agda: "would error here")
        return z, ONE + c + cz
    raise ValueError(f"oracle: unknown term {tag!r}")


def cost(env: tuple, t) -> int:
    return eval_(env, t)[1]


# ------------------------------------------------------------------ weakening (sink)
def w_end(i):
    return i


def w_skip(w):
    return lambda i: 1 + w(i)


def w_copy(w):
    return lambda i: 0 if i == 0 else 1 + w(i - 1)


# which fields of each constructor are sub-terms: "T" plain, "B" under one binder
_FIELDS = {
    "let": "TB", "prim": "xT", "pair": "TT", "fst": "T", "snd": "T", "inl": "Tx",
    "inr": "Tx", "case": "TBB", "app": "TT", "pure": "T", "bind": "TT", "run": "TTx",
    "add": "xxT", "scope": "TT", "lpair": "TT", "lfst": "Tx", "lsnd": "Tx",
    "linl": "T", "linr": "T", "lcastl": "Tx", "lcastr": "Tx",
    "unit": "", "lunit": "", "lpairzero": "", "lsumzero": "",
}


def sink(w, t):
    """sink : Weakening Γ Γ' -> Term tag Γ τ -> Term tag Γ' τ"""
    tag = t[0]
    if tag == "var":
        return ("var", w(t[1]))
    if tag == "lam":  # sink w (lam Γ' inj e) = lam Γ' (weaken-var w ∘ inj) e
        return ("lam", tuple(w(i) for i in t[1]), t[2])
    out = [tag]
    for kind, f in zip(_FIELDS[tag], t[1:]):
        out.append(sink(w, f) if kind == "T" else sink(w_copy(w), f) if kind == "B" else f)
    return tuple(out)


def sink1(t):
    return sink(w_skip(w_end), t)


# ------------------------------------------------------------------ types
def is_pair(ty):
    return isinstance(ty, tuple) and ty[0] == "*"


def is_sum(ty):
    return isinstance(ty, tuple) and ty[0] == "+"


def d2(ty):
    """D2τ' : Typ Pr -> LTyp"""
    if ty == "U" or ty == "Z":
        return "LU"
    if ty == "R":
        return "LR"
    tag, a, b = ty
    return ("*!" if tag == "*" else "+!", d2(a), d2(b))


def typeof(t, gamma: tuple):
    """The type of a source term in context gamma (index 0 innermost)."""
    tag = t[0]
    if tag == "var":
        return gamma[t[1]]
    if tag == "let":
        return typeof(t[2], (typeof(t[1], gamma),) + gamma)
    if tag == "prim":
        return prim_type(t[1], typeof(t[2], gamma))
    if tag == "unit":
        return "U"
    if tag == "pair":
        return ("*", typeof(t[1], gamma), typeof(t[2], gamma))
    if tag == "fst":
        return typeof(t[1], gamma)[1]
    if tag == "snd":
        return typeof(t[1], gamma)[2]
    if tag == "inl" or tag == "inr":
        return t[2]
    if tag == "case":
        _, s, _t = typeof(t[1], gamma)
        return typeof(t[2], (s,) + gamma)
    raise ValueError(f"oracle: not a source term: {tag!r}")


# ------------------------------------------------------------------ spec.agda: CHAD
V0, V1 = ("var", 0), ("var", 1)


def zerot(ty):
    """zerot : (τ : Typ Pr) -> Term Du Γ (D2τ τ)"""
    if ty == "U" or ty == "Z":
        return ("lunit",)
    if ty == "R":
        return ("prim", "LZERO", ("lunit",))
    return ("lpairzero",) if ty[0] == "*" else ("lsumzero",)


def lamwith(vars_, body):
    return ("lam", tuple(vars_), body)


def thenevm(a, b):
    """thenevm a b = let' b (bindevm (sink1 a) (lamwith [zero] (var (S Z))))"""
    return ("let", b, ("bind", sink1(a), lamwith([0], V1)))


def dprim_(op):
    """dprim' : Primop Pr σ τ -> Term Du (D2τ τ ∷ D1τ σ ∷ []) (D2τ σ)"""
    if isinstance(op, tuple):  # LIT x
        return ("lunit",)
    if op == "ADD":
        return ("lpair", V0, V0)
    if op == "MUL":
        return ("lpair", ("prim", "LSCALE", ("pair", V0, ("snd", V1))),
                ("prim", "LSCALE", ("pair", V0, ("fst", V1))))
    if op == "NEG":
        return ("prim", "LNEG", V0)
    if op == "SIGN":
        return ("prim", "LZERO", ("lunit",))
    if op in ("IADD", "IMUL"):
        return ("lpair", ("lunit",), ("lunit",))
    if op == "INEG":
        return ("lunit",)
    raise ValueError(f"oracle: no derivative for {op!r}")


def dprim(op, p, d):
    """dprim op p d = let' p (let' (sink1 d) (sink (WCopy (WCopy WCut)) (dprim' op)))"""
    return ("let", p, ("let", sink1(d), sink(w_copy(w_copy(w_end)), dprim_(op))))


def _scoped_bp(ty, inj):
    """The backpropagator shared by chad (let' ..) and the branches of chad (case' ..):
    lamwith [0, 2] (bindevm (scopeevm (zerot σ) (app (snd' (var (S Z))) (var Z)))
                            (lamwith [2] (app (snd' (var (S Z))) (inj (fst' (var Z))))))"""
    inner = ("fst", V0) if inj is None else (inj, ("fst", V0))
    return lamwith([0, 2], ("bind", ("scope", zerot(ty), ("app", ("snd", V1), V0)),
                            lamwith([2], ("app", ("snd", V1), inner))))


def chad(t, gamma: tuple):
    """chad : Term Pr Γ τ -> Term Du (D1Γ Γ) (D1τ τ :* (D2τ τ :-> D2Γ Γ))"""
    tag = t[0]
    if tag == "var":
        i = t[1]
        return ("pair", ("var", i), lamwith([], ("add", i, d2(gamma[i]), V0)))
    if tag == "let":
        e1, e2 = t[1], t[2]
        sigma = typeof(e1, gamma)
        return ("let", chad(e1, gamma),
                ("let", ("fst", V0),
                 ("let", sink(w_copy(w_skip(w_end)), chad(e2, (sigma,) + gamma)),
                  ("pair", ("fst", V0), _scoped_bp(sigma, None)))))
    if tag == "prim":
        op = t[1]
        return ("let", chad(t[2], gamma),
                ("pair", ("prim", op, ("fst", V0)),
                 lamwith([0], ("app", ("snd", V1), dprim(op, ("fst", V1), V0)))))
    if tag == "unit":
        return ("pair", ("unit",), lamwith([], ("pure", ("unit",))))
    if tag == "pair":
        s, u = typeof(t[1], gamma), typeof(t[2], gamma)
        return ("let", ("pair", chad(t[1], gamma), chad(t[2], gamma)),
                ("pair", ("pair", ("fst", ("fst", V0)), ("fst", ("snd", V0))),
                 lamwith([0], thenevm(("app", ("snd", ("fst", V1)), ("lfst", V0, d2(s))),
                                      ("app", ("snd", ("snd", V1)), ("lsnd", V0, d2(u)))))))
    if tag == "fst" or tag == "snd":
        _, s, u = typeof(t[1], gamma)
        ct = ("lpair", V0, zerot(u)) if tag == "fst" else ("lpair", zerot(s), V0)
        return ("let", chad(t[1], gamma),
                ("pair", (tag, ("fst", V0)),
                 lamwith([0], ("app", ("snd", V1), ct))))
    if tag == "inl" or tag == "inr":
        _, s, u = t[2]
        cast = ("lcastl", V0, d2(s)) if tag == "inl" else ("lcastr", V0, d2(u))
        return ("let", chad(t[1], gamma),
                ("pair", (tag, ("fst", V0), None),
                 lamwith([0], ("app", ("snd", V1), cast))))
    if tag == "case":
        _, s, u = typeof(t[1], gamma)

        def branch(e, ty, inj):
            return ("let", sink(w_copy(w_skip(w_end)), chad(e, (ty,) + gamma)),
                    ("pair", ("fst", V0), _scoped_bp(ty, inj)))

        return ("let", chad(t[1], gamma),
                ("case", ("fst", V0), branch(t[2], s, "linl"), branch(t[3], u, "linr")))
    raise ValueError(f"oracle: chad of a non-source term {tag!r}")


# ------------------------------------------------------------------ the theorems' quantities
def phi(lt, x) -> int:
    """φ : (τ : LTyp) -> LinRep τ -> ℤ (c_φ = 1)"""
    if lt == "LU" or lt == "LR" or x is None:
        return ONE
    tag, s, u = lt
    if tag == "*!":
        return ONE + phi(s, x[0]) + phi(u, x[1])
    return ONE + phi(s if x.side == 0 else u, x.value)


def size(lt, x) -> int:
    """size : (τ : LTyp) -> LinRep τ -> ℕ (the same clauses as φ)"""
    if lt == "LU" or lt == "LR" or x is None:
        return 1
    tag, s, u = lt
    if tag == "*!":
        return 1 + size(s, x[0]) + size(u, x[1])
    return 1 + size(s if x.side == 0 else u, x.value)


def zero_env_term(gamma: tuple):
    """zero-env-term (τ ∷ Γ) = pair (zerot τ) (zero-env-term Γ); [] = unit"""
    t = ("unit",)
    for ty in reversed(gamma):
        t = ("pair", zerot(ty), t)
    return t


def th2_term(t, gamma: tuple):
    """runevm (app (snd' (sink (WSkip WEnd) (chad t))) (var Z)) (zero-env-term Γ),
    evaluated in push ctg (primalVal env)."""
    return ("run", ("app", ("snd", sink1(chad(t, gamma))), V0), zero_env_term(gamma),
            len(gamma))


class Result:
    """The oracle's numbers for one source term, environment and cotangent."""

    def __init__(self, value, primal_steps, gradient_steps, denv, ctg_size, bound):
        self.value = value
        self.primal_steps = primal_steps
        self.gradient_steps = gradient_steps
        self.denv = denv  # the output environment cotangent, one sparse value per Γ entry
        self.ctg_size = ctg_size
        self.bound = bound

    def __repr__(self):
        return (f"Result(value={self.value!r}, primal_steps={self.primal_steps}, "
                f"gradient_steps={self.gradient_steps}, denv={self.denv!r})")


def run_th2(t, gamma: tuple, env: tuple, ctg) -> Result:
    """Primal value and cost (`cost env t`), the TH2 left side (gradient steps) and
    the environment cotangent it returns, size(ctg) and the TH2 right side."""
    value, primal_steps = eval_(env, t)
    (_unit, denv), gsteps = eval_((ctg,) + env, th2_term(t, gamma))
    cells = []
    while denv is not None:
        x, denv = denv
        cells.append(x)
    res_ty = typeof(t, gamma)
    sz = size(d2(res_ty), ctg)
    bound = 5 + 34 * primal_steps + sz + 4 * len(gamma)
    return Result(value, primal_steps, gsteps, tuple(cells), sz, bound)


def th1_lhs(t, gamma: tuple, env: tuple, ctg, denvin: tuple) -> tuple[int, int]:
    """TH1's left side and its right side 34 * cost env t, for an incoming
    environment cotangent denvin (one sparse value per Γ entry)."""
    (_primal, bp), crun = eval_(env, chad(t, gamma))
    envf, ccall = bp(ctg)
    tup = None
    for x in reversed(denvin):
        tup = (x, tup)
    _tt, denvout, cmonad = lacm_run(len(gamma), envf, tup)
    outs = []
    while denvout is not None:
        x, denvout = denvout
        outs.append(x)
    lts = [d2(ty) for ty in gamma]
    lhs = (crun + ccall + cmonad - phi(d2(typeof(t, gamma)), ctg)
           - sum(phi(lt, x) for lt, x in zip(lts, denvin))
           + sum(phi(lt, x) for lt, x in zip(lts, outs)) - len(gamma))
    return lhs, 34 * cost(env, t)


# ------------------------------------------------------------------ densifying (docs/language.md)
def densify(ty, primal, ct):
    """The dense cotangent of `primal : ty` from a sparse one (docs/language.md: zeros
    filled in, a sum on the side of the argument's own value)."""
    if ty == "R":
        return 0.0 if ct is None else ct
    if ty == "Z" or ty == "U":
        return None
    tag, a, b = ty
    if tag == "*":
        ca, cb = (None, None) if ct is None else ct
        return (densify(a, primal[0], ca), densify(b, primal[1], cb))
    inner = ct.value if (ct is not None and ct.side == primal.side) else None
    return In(primal.side, densify(a if primal.side == 0 else b, primal.value, inner))


# ------------------------------------------------------------------ JSON of values / cotangents
def value_from_json(ty, j):
    if ty == "R":
        return float(j)
    if ty == "Z":
        return int(j)
    if ty == "U":
        return None
    tag, a, b = ty
    if tag == "*":
        return (value_from_json(a, j[0]), value_from_json(b, j[1]))
    if isinstance(j, bool):
        return In(0 if j else 1, None)
    (k, v), = j.items()
    return In(0, value_from_json(a, v)) if k == "inl" else In(1, value_from_json(b, v))


def ctg_from_json(ty, j):
    """A sparse cotangent (docs/language.md): null is the zero of a pair or a sum."""
    if ty == "R":
        return float(j)
    if ty == "Z" or ty == "U":
        return None
    if j is None:
        return None
    tag, a, b = ty
    if tag == "*":
        return (ctg_from_json(a, j[0]), ctg_from_json(b, j[1]))
    (k, v), = j.items()
    return In(0, ctg_from_json(a, v)) if k == "inl" else In(1, ctg_from_json(b, v))


def canon(v):
    """A canonical, exactly comparable form of a value: floats as hex (so -0.0 and
    0.0 differ, and nan equals nan), pairs as lists, injections as {"inl": ..}.
    Works on the oracle's values and, by duck typing, on the project's (tuples,
    objects with .side/.value, numpy arrays and scalars)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return {"inl": None} if v else {"inr": None}
    if isinstance(v, float) or type(v).__name__ in ("float64", "float32"):
        v = float(v)
        return "nan" if math.isnan(v) else v.hex()
    if isinstance(v, int) or type(v).__name__ in ("int64", "int32"):
        return int(v)
    if isinstance(v, (tuple, list)):
        return [canon(x) for x in v]
    if hasattr(v, "side") and hasattr(v, "value"):
        return {("inl", "inr")[v.side]: canon(v.value)}
    if hasattr(v, "tolist"):
        return [canon(x) for x in v.tolist()]
    raise TypeError(f"canon: unexpected value {v!r}")


# ------------------------------------------------------------------ from the project's core terms
class Unsupported(Exception):
    """A term outside the formalisation's fragment."""


def type_from_project(ty):
    """The oracle's type of a project type (chad.types), read by class name."""
    name = type(ty).__name__
    if name == "Real":
        return "R"
    if name == "Int":
        return "Z"
    if name == "UnitT":
        return "U"
    if name == "Prod":
        return ("*", type_from_project(ty.left), type_from_project(ty.right))
    if name == "Sum":
        return ("+", type_from_project(ty.left), type_from_project(ty.right))
    raise Unsupported(f"type {name}")


def term_from_project(t, scope: tuple = ()):
    """The oracle's source term of a checked core term (chad.terms), read by class
    name and field names only; `scope` lists the names in scope, innermost first.
    Raises Unsupported outside the fragment."""
    name = type(t).__name__
    go = term_from_project
    if name == "Var":
        if t.name not in scope:
            raise Unsupported(f"free variable {t.name}")
        return ("var", scope.index(t.name))
    if name == "Let":
        return ("let", go(t.rhs, scope), go(t.body, (t.name,) + scope))
    if name == "Prim":
        op = t.op
        if op == "LIT":
            return ("prim", ("LIT", float(t.const)), go(t.arg, scope))
        if op not in PRIMOPS:
            raise Unsupported(f"primitive {op}")
        return ("prim", op, go(t.arg, scope))
    if name == "Unit":
        return ("unit",)
    if name == "Pair":
        return ("pair", go(t.left, scope), go(t.right, scope))
    if name in ("Fst", "Snd"):
        return (name.lower(), go(t.expr, scope))
    if name in ("Inl", "Inr"):
        return (name.lower(), go(t.expr, scope), type_from_project(t.ty))
    if name == "Case":
        return ("case", go(t.scrut, scope), go(t.lbody, (t.lname,) + scope),
                go(t.rbody, (t.rname,) + scope))
    if name == "Ann":
        return go(t.expr, scope)
    raise Unsupported(f"term {name}")


def def_from_project(d):
    """(term, gamma, param names in Γ order) of a checked def: Γ = x1 ... xn with xn
    the innermost (var 0), as the def's parameters are bound in order."""
    names = tuple(p.name for p in reversed(d.params))
    gamma = tuple(type_from_project(p.ty) for p in reversed(d.params))
    type_from_project(d.result)
    return term_from_project(d.body, names), gamma, names
