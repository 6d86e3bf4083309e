"""`chad check`: the complexity criterion over generated programs and over
program families (docs/complexity-checker.md; docs/complexity-checker.md).

    chad check [--transform T[,T...]] [--evm E] [--programs N] [--max-depth D]
               [--seed S] [--constants c,c',c''] [--features auto|first-order|all|...]
               [--shape mixed|random|chains] [--stats] [--json] [--plot FILE.png]
    chad check --family NAME [--transform T[,T...]] [--evm E] [--json] [--plot FILE.png]
    chad check --mode forward [--programs N] [--max-depth D] [--seed S]
               [--constants c,c'] [--features ...] [--shape ...] [--json]
               (forward mode: chad/check_forward_cli.py)

Generated programs: for each program the four numbers (primal steps, gradient
steps, size(ctg), |Γ|) are recorded and the TH2-form bound
gradient <= c' + c*primal + size(ctg) + c''*|Γ| is checked (default: TH2's 34, 5, 4,
from chad/proofs/statements.py).
A violation is shrunk by hypothesis and printed in surface syntax, with its
numbers and the `chad cost` line reproducing it; the exit code is then 1. z3's
optimiser reports the smallest c covering every observation (c', c'' fixed): the
largest c seen, a lower bound of the constant needed, in all and per fragment
(first-order, arrays, loops, functions) next to the constant each is held to and what
covers it (the formalisation's proof: the efficient transform, first-order only);
and the jointly minimised (c, c', c'').

Families: the step counts at each n, their exact fits as functions of n, and z3's
verdict on "exists (c, c') bounding the family for all n": bounded (sat, with the
smallest witness; exit 0) or refuted (unsat; exit 1).
"""

from __future__ import annotations

import importlib.util
import os

from chad.costmodel.criterion import (
    ARRAYS, FIRST_ORDER, FRAGMENTS, FUNCTIONS, LOOPS, Constants, ProgressBar, run_check,
    transform_features, transform_names,
)
from chad.costmodel.coverage import FEATURES, coverage
from chad.costmodel.families import FAMILIES, study
from chad.costmodel.fit import joint_fit, smallest_c
from chad.costmodel.measure import C_CONST, C_PARAMS, C_PRIMAL

from .errors import UsageError
from .values import dumps

DEFAULT_PROGRAMS = 200
DEFAULT_DEPTH = 5
_DEFAULT_CONSTANTS = f"{C_PRIMAL},{C_CONST},{C_PARAMS}"


def add_check_parser(sub) -> None:
    sp = sub.add_parser(
        "check", help="check the complexity criterion on generated programs or a family",
        description="Check gradient <= c' + c*primal + size(ctg) + c''*|params| on generated "
                    "programs (shrinking a violation), or decide it for a program family with z3.")
    sp.add_argument("--mode", default="reverse", choices=("reverse", "forward"),
                    help="reverse (default): gradient <= c' + c*primal + size(ctg) + c''*|params|; "
                         "forward: jvp <= c*primal + c' (--constants c,c'; "
                         "docs/forward-mode.md)")
    sp.add_argument("--transform", default="efficient",
                    help="transform(s) to check, comma-separated: efficient, naive, naive-ho "
                         "(default efficient)")
    sp.add_argument("--evm", default="array", choices=("map", "array", "parallel", "spec"),
                    help="the EVM runtime: array (default), map, parallel, or spec (the "
                         "formalisation's LACM)")
    sp.add_argument("--programs", type=int, default=DEFAULT_PROGRAMS, metavar="N",
                    help=f"number of generated programs (default {DEFAULT_PROGRAMS})")
    sp.add_argument("--max-depth", type=int, default=DEFAULT_DEPTH, metavar="D",
                    help=f"maximum depth of a generated body (default {DEFAULT_DEPTH})")
    sp.add_argument("--seed", type=int, default=0, metavar="S",
                    help="seed of the generator; the run is deterministic given it (default 0)")
    sp.add_argument("--constants", default=_DEFAULT_CONSTANTS, metavar="c,c1,c2",
                    help=f"the bound's c, c' and c'' (default {_DEFAULT_CONSTANTS}: the "
                         f"formalisation's TH2)")
    sp.add_argument("--features", default="auto",
                    help="language of the generated programs: auto (everything the transform "
                         "supports), first-order, or a comma list of arrays,functions,loops")
    sp.add_argument("--shape", default="mixed", choices=("random", "chains", "mixed"),
                    help="random programs, chains (one construct nested up to 16 times: the "
                         "per-construct constants), or a mix of both, half and half (default)")
    sp.add_argument("--stats", action="store_true",
                    help="also print the coverage of the run: per feature of the language, "
                         "how many programs contain it and how many exercise it at run time")
    sp.add_argument("--family", metavar="NAME",
                    help="check a program family instead: op_fst, t_magic, nested_lambdas, "
                         "build_index, nested_maps, iter_chain, scan_chain")
    sp.add_argument("--json", action="store_true", help="a JSON summary on stdout")
    sp.add_argument("--plot", metavar="FILE.png",
                    help="plot gradient steps against primal steps (or against n for a family)")


def _usage(msg: str):
    return UsageError(msg)


def _check_plot_path(path: str) -> None:
    """Refuse a --plot file that cannot be written, before any work starts."""
    if importlib.util.find_spec("matplotlib") is None:
        raise _usage("--plot needs matplotlib, an optional extra: pip install 'chad[plots]'")
    if not path.lower().endswith(".png"):
        raise _usage("--plot: the file name must end in .png")
    if os.path.isdir(path):
        raise _usage(f"--plot: {path} is a directory")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise _usage(f"--plot: cannot write {path}: the directory {directory} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK) or (
            os.path.exists(path) and not os.access(path, os.W_OK)):
        raise _usage(f"--plot: cannot write {path}: permission denied")


def _save(fig, path: str) -> None:
    """fig to path; a failure (disk full, a race) is a usage error, not a crash."""
    try:
        fig.savefig(path, dpi=120)
    except OSError as e:
        raise _usage(f"--plot: cannot write {path}: {e.strerror or e}") from None


def _transforms(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    known = transform_names()
    if not names:
        raise _usage("--transform: no transform given")
    for t in names:
        if t not in known:
            raise _usage(f"--transform: unknown transform {t!r} (choose from {', '.join(known)})")
    return names


def _features(text: str, transform: str) -> dict[str, bool]:
    supported = transform_features(transform)
    if text == "auto":
        return supported
    if text in ("first-order", "none"):
        return {k: False for k in supported}
    wanted = {"arrays": False, "functions": False, "loops": False}
    items = list(wanted) if text == "all" else [x.strip() for x in text.split(",")]
    for x in items:
        if x not in wanted:
            raise _usage(f"--features: unknown feature {x!r} (arrays, functions, loops, all, "
                         f"first-order, auto)")
        if not supported.get(x):
            raise _usage(f"--features: the {transform} transform "
                         f"does not support {x}")
        wanted[x] = True
    return wanted


def cmd_check(args) -> int:
    if getattr(args, "mode", "reverse") == "forward":
        from .check_forward_cli import check_forward

        return check_forward(args, _DEFAULT_CONSTANTS)
    try:
        constants = Constants.parse(args.constants)
    except ValueError as e:
        raise _usage(f"--constants: {e}") from None
    transforms = _transforms(args.transform)
    if args.plot is not None:
        _check_plot_path(args.plot)
    if args.family is not None:
        if args.stats:
            raise _usage("--stats is about generated programs; a family (--family) has none")
        return _check_family(args, transforms, constants)
    if args.programs < 1:
        raise _usage("--programs must be at least 1")
    if args.max_depth < 0:
        raise _usage("--max-depth must not be negative")
    return _check_programs(args, transforms, constants)


# ----------------------------------------------------------------- generated programs


def _check_programs(args, transforms, constants) -> int:
    feats = {t: _features(args.features, t) for t in transforms}
    results, reports = [], []
    for t in transforms:
        bar = ProgressBar(f"chad check {t}")
        try:
            r = run_check(t, args.evm, args.programs, args.max_depth, args.seed, constants,
                          progress=bar, features=feats[t], shape=args.shape)
        finally:
            bar.close()
        fit = smallest_c(r.observations, constants.c1, constants.c2) if r.observations else None
        joint = joint_fit(r.observations) if r.observations else None
        path = r.counterexample.write() if r.counterexample is not None else None
        results.append((r, fit, joint, path))
    if args.plot:
        _plot_programs(args.plot, results, constants)
    if args.json:
        out = []
        for r, fit, joint, path in results:
            d = r.summary()
            d["fitted"] = None if fit is None else fit.as_json()
            d["joint"] = None if joint is None else joint.as_json()
            d["counterexample"] = (None if r.counterexample is None
                                   else r.counterexample.as_json(path))
            d["observations"] = [o.as_row() for o in r.observations]
            d["fragments"] = _fragments(r.observations, constants, r.transform)
            if args.stats:
                d["coverage"] = coverage(r.cases).as_json()
            out.append(d)
        print(dumps({"holds": all(r.holds for r, *_ in results), "results": out,
                          "plot": args.plot}))
    else:
        for r, fit, joint, path in results:
            reports.append(_report(args, r, fit, joint, path, constants))
            if args.stats:
                reports[-1] += "\n" + _coverage_table(coverage(r.cases))
        print("\n\n".join(reports))
        if args.plot:
            print(f"\nplot written to {args.plot}")
    return 0 if all(r.holds for r, *_ in results) else 1


def _report(args, r, fit, joint, path, constants) -> str:
    feats = ", ".join(f"{k} {'on' if v else 'off'}" for k, v in r.features.items())
    obs = r.observations
    shape = {"random": f"random programs of max depth {r.max_depth}",
             "chains": "chain programs",
             "mixed": f"random programs of max depth {r.max_depth} and chains, mixed"}[args.shape]
    lines = [f"chad check: {r.transform} transform, {r.evm} EVM, seed {r.seed}, "
             f"{shape} ({feats})"]
    if obs:
        lines.append(
            f"  {r.generated} program(s) generated"
            + (f" (+{len(obs) - r.generated} measured while shrinking)"
               if len(obs) > r.generated else "")
            + f": primal steps {min(o.primal_steps for o in obs)}..{max(o.primal_steps for o in obs)}, "
            f"gradient steps {min(o.gradient_steps for o in obs)}.."
            f"{max(o.gradient_steps for o in obs)}, gradient/primal up to {r.max_ratio:.1f}")
    if fit is not None:
        rel = "<=" if fit.c <= constants.c else ">"
        lines.append(f"  z3 (Optimize): the largest c seen over {len(obs)} measured program(s), "
                     f"with c' = {fit.c1}, c'' = {fit.c2}: c = {fit.c}   ({rel} {constants.c}; "
                     f"a lower bound of the constant needed, not a proof)")
        lines += _fragment_lines(obs, constants, r.transform)
    if joint is not None:
        lines.append(f"  z3 (Optimize): (c, c', c'') jointly minimised ({joint.objective}): "
                     f"c = {joint.c}, c' = {joint.c1}, c'' = {joint.c2}")
    if r.holds:
        lines.append(f"  the bound {constants} holds on every program: no violation")
    else:
        lines.append("")
        lines.append(r.counterexample.render(path))
    return "\n".join(lines)


# What each fragment is held to, and what covers it (docs/complexity-checker.md).
_HELD = {
    FIRST_ORDER: "proved by the Agda formalisation of Efficient CHAD for its language and "
                 "primitives (+, *, negation, literals, sign); the other primitives follow "
                 "the same per-primitive rule, not proved",
    ARRAYS: "not proved: the formalisation covers the first-order language only",
    FUNCTIONS: "not proved: the formalisation covers the first-order language only",
    LOOPS: "not proved: the formalisation covers the first-order language only",
}


_NOT_EFFICIENT = "not proved: the formalisation's bound is for the efficient transform"


def _fragments(obs, constants, transform: str) -> list[dict]:
    """Per fragment: the number of programs, the largest c seen over them (a lower
    bound of the constant needed), the constant it is held to and what covers it."""
    out = []
    for frag in FRAGMENTS:
        group = [o for o in obs if o.fragment == frag]
        if group:
            held = _HELD[frag] if transform == "efficient" else _NOT_EFFICIENT
            out.append({"fragment": frag, "programs": len(group),
                        "largest_c_seen": smallest_c(group, constants.c1, constants.c2).c,
                        "held_to": constants.c, "covered_by": held})
    return out


def _fragment_lines(obs, constants, transform: str) -> list[str]:
    out = []
    for f in _fragments(obs, constants, transform):
        rel = "<=" if f["largest_c_seen"] <= f["held_to"] else ">"
        out.append(f"    {f['fragment']}: {f['programs']} program(s), largest c seen "
                   f"{f['largest_c_seen']} ({rel} {f['held_to']}; {f['covered_by']})")
    return out


def _coverage_table(cov) -> str:
    """`--stats`: per feature, the programs containing it and those exercising it."""
    n = max(cov.programs, 1)
    lines = [f"  coverage of the {cov.programs} program(s) generated (contained / exercised "
             f"at run time; chad/costmodel/coverage.py):"]
    width = max(len(f.name) for f in FEATURES)
    for f, c, e in cov.rows():
        lines.append(f"    {f.name:<{width}}  {f.fragment:<11}  {c:>5} ({100 * c / n:5.1f}%)  "
                     f"{e:>5} ({100 * e / n:5.1f}%)" + (f"   {f.doc}" if f.doc else ""))
    return "\n".join(lines)


def _plot_programs(path, results, constants) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5))
    colors = {"efficient": "tab:blue", "naive": "tab:orange", "naive-ho": "tab:red"}
    pmax = 1
    for r, fit, _joint, _path in results:
        obs = r.observations
        if not obs:
            continue
        ok = [o for o in obs if o.holds(constants)]
        bad = [o for o in obs if not o.holds(constants)]
        col = colors.get(r.transform, None)
        ax.scatter([o.primal_steps for o in ok], [o.gradient_steps for o in ok], s=8,
                   alpha=0.5, color=col, label=f"{r.transform} ({len(obs)} measured)")
        if bad:
            ax.scatter([o.primal_steps for o in bad], [o.gradient_steps for o in bad], s=30,
                       marker="x", color="black", label=f"{r.transform}: violations ({len(bad)})")
        pmax = max(pmax, max(o.primal_steps for o in obs))
        if fit is not None:
            xs = [1, pmax]
            ax.plot(xs, [fit.c1 + fit.c * x + 1 + fit.c2 for x in xs], ":", color=col,
                    label=f"{r.transform}: fitted c = {fit.c}")
    xs = [1, pmax]
    ax.plot(xs, [constants.bound(x, 1, 1) for x in xs], "k-",
            label=f"bound {constants.c1} + {constants.c}·primal + size + {constants.c2}·|Γ| "
                  f"(size = |Γ| = 1)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("primal steps")
    ax.set_ylabel("gradient steps")
    ax.set_title("chad check: gradient vs primal steps")
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        _save(fig, path)
    finally:
        plt.close(fig)


# ----------------------------------------------------------------- families


def _check_family(args, transforms, constants) -> int:
    fam = FAMILIES.get(args.family)
    if fam is None:
        raise _usage(f"--family: unknown family {args.family!r} (choose from "
                     f"{', '.join(FAMILIES)})")
    for t in transforms:
        if t not in fam.transforms:
            raise _usage(f"--family {fam.name}: the {t} transform does not apply "
                         f"(use {', '.join(fam.transforms)})")
    results = [study(fam, t, args.evm, constants) for t in transforms]
    if args.plot:
        _plot_family(args.plot, results)
    if args.json:
        print(dumps({"family": fam.name, "results": [r.as_json() for r in results],
                          "plot": args.plot}))
    else:
        print("\n\n".join(r.render() for r in results))
        if args.plot:
            print(f"\nplot written to {args.plot}")
    return 0 if all(r.within for r in results) else 1


def _plot_family(path, results) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5))
    for r in results:
        ns = list(r.ns)
        ax.plot(ns, [o.gradient_steps for o in r.points], "o-",
                label=f"{r.transform}: gradient ({r.status})")
        ax.plot(ns, [o.bound(r.constants) for o in r.points], "--",
                label=f"{r.transform}: bound {r.constants.c1} + {r.constants.c}·primal + "
                      f"size + {r.constants.c2}·|Γ|")
    if results:
        ax.plot(list(results[0].ns), [o.primal_steps for o in results[0].points], "k.-",
                label="primal")
        ax.set_title(f"family {results[0].family.name}")
    ax.set_yscale("log")
    ax.set_xlabel("n")
    ax.set_ylabel("steps")
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        _save(fig, path)
    finally:
        plt.close(fig)
