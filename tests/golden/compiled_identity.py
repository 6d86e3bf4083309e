"""Fingerprints of what the compiler makes of a fixed set of programs: the
simplified gradient term and the generated Python of each def's primal,
gradient, vjp (array and map runtimes), naive and naive-ho gradients and jvp.

The passes that walk the spines of deep programs with loops (the
transformations, the checker, the simplifier, the code generator; docs/compiler.md,
"Deep programs") must give exactly what their recursive versions gave:
compiled_identity.json holds the fingerprints made by the recursive versions
(the commit before the loops), with the programs themselves, and
tests/test_deep.py recomputes them. A deliberate change of the compiler's
output regenerates the file:

    .venv/bin/python tests/golden/compiled_identity.py --write
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import sys

import attrs

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FILE = os.path.join(HERE, "compiled_identity.json")
PER_FAMILY = 12


def term_text(t) -> str:
    """The term in pre-order, one line per node: its class and its fields other
    than sub-terms (names, captures, levels, constants, types of zeros), the
    lengths of its tuple fields of sub-terms. Iterative: deep terms are fine."""
    from chad.terms import shape, subterms

    lines = []
    for u in subterms(t):
        sh = shape(u)
        parts = [type(u).__name__]
        for f in attrs.fields(type(u)):
            if not f.eq:
                continue
            v = getattr(u, f.name)
            if f.name in sh.children:
                if type(v) is tuple:
                    parts.append(f"{f.name}#{len(v)}")
                elif v is None:
                    parts.append(f"{f.name}=None")
            else:
                parts.append(f"{f.name}={v!r}")
        lines.append(" ".join(parts))
    return "\n".join(lines)


def _h(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def fingerprints(text: str) -> dict:
    """def name/what -> fingerprint (or the error's class name) for one program."""
    import chad
    from chad.compile import backend
    from chad.deep import run_deep
    from chad.simplify import simplify
    from chad.terms import Fst, Let, Pair, Var
    from chad.transform.registry import get_transform
    from chad.types import Real

    prog = chad.load(text)
    out = {}
    spec = get_transform("efficient")
    for d in prog.defs:
        def put(what, make):
            try:
                out[f"{d.name}/{what}"] = _h(make())
            except Exception as e:  # noqa: BLE001 - the error is the fingerprint
                out[f"{d.name}/{what}"] = type(e).__name__

        # (on a big-stack thread: the recursive versions needed it)
        put("simplified", lambda: term_text(simplify(run_deep(lambda: Let(
            backend.FORWARD, spec.forward_term(d),
            Pair(Fst(Var(backend.FORWARD)), spec.backward_term(d, backend.FORWARD)))))))
        put("primal", lambda: backend.primal_module(prog, d).source)
        for evm in ("array", "map"):
            put(f"vjp/{evm}", lambda: "".join(
                m.source for m in backend.vjp_modules(prog, d, "efficient", evm)))
        if isinstance(d.result, Real):
            for tr in ("efficient", "naive", "naive-ho"):
                put(f"grad/{tr}", lambda: backend.gradient_module(prog, d, tr).source)
        put("jvp", lambda: backend.jvp_module(prog, d).source)
    backend.clear_cache()
    return out


def programs() -> dict:
    """name -> program text: the examples, deep ones, and generated ones."""
    from hypothesis import HealthCheck, given, settings

    from chad.costmodel import generators as G

    progs = {}
    for f in sorted(glob.glob(os.path.join(ROOT, "examples", "*.chad"))):
        with open(f) as fh:
            progs[os.path.basename(f)] = fh.read()
    lets = ["def f(x : R) : R =", "  let x0 = x in"]
    lets += [f"  let x{i} = x{i - 1} * 1.0 + 0.5 in" for i in range(1, 300)] + ["  x299"]
    progs["300 nested lets"] = "\n".join(lets) + "\n"
    progs["a sum of 300 terms"] = "def f(x : R) : R = " + " + ".join(["x"] * 300) + "\n"
    chain = ["def chain(x0 : R, y : R) : R ="]
    chain += [f"  let x{k + 1} = x{k} + 0.01 * (y + 0.5 * sin x{k}) in" for k in range(60)]
    progs["60-let chain"] = "\n".join(chain + ["  x60"]) + "\n"
    families = [
        ("first-order", G.programs(max_depth=5, max_params=3)),
        ("arrays", G.programs(max_depth=4, max_params=3, arrays=True)),
        ("functions", G.programs(max_depth=4, max_params=3, functions=True)),
        ("language", G.language_programs(max_depth=4)),
        ("chains", G.chains(10, arrays=True, functions=True)),
    ]
    for name, strategy in families:
        found: list = []

        @settings(max_examples=PER_FAMILY, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(strategy)
        def collect(case):
            found.append(case.source())

        collect()
        for i, src in enumerate(found):
            progs[f"{name} {i}"] = src
    return progs


def main(argv) -> int:
    if "--write" not in argv:
        print(__doc__)
        return 2
    progs = programs()
    data = {"programs": progs,
            "fingerprints": {name: fingerprints(text) for name, text in progs.items()}}
    with open(FILE, "w") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
        fh.write("\n")
    print(f"{FILE}: {len(progs)} programs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
