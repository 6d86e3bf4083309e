"""`chad check --mode forward`: the forward-mode criterion jvp <= c*primal + c'
over generated programs (chad/costmodel/forward_check.py; docs/forward-mode.md).

    chad check --mode forward [--programs N] [--max-depth D] [--seed S]
               [--constants c,c'] [--features ...] [--shape ...] [--json]

Prints the numbers, z3's fitted constants (the smallest c with the given c', and
(c, c') jointly minimised), per fragment the largest c seen, and the smallest
violating program when there is one (exit 1).
"""

from __future__ import annotations

from chad.costmodel.criterion import FRAGMENTS, ProgressBar
from chad.costmodel.forward_check import DEFAULT, ForwardConstants, fit, run_forward_check
from chad.costmodel.generators import print_surface

from .errors import UsageError
from .values import dumps

_NOT_APPLICABLE = {"family": None, "plot": None, "stats": False}


def _features(text: str) -> dict[str, bool]:
    wanted = {"arrays": False, "functions": False, "loops": False}
    if text in ("auto", "all"):
        return {k: True for k in wanted}
    if text in ("first-order", "none"):
        return wanted
    for x in (s.strip() for s in text.split(",")):
        if x not in wanted:
            raise UsageError(f"--features: unknown feature {x!r} (arrays, functions, loops, "
                             f"all, first-order, auto)")
        wanted[x] = True
    return wanted


def check_forward(args, default_constants: str) -> int:
    for name, default in _NOT_APPLICABLE.items():
        if getattr(args, name, default) != default:
            raise UsageError(f"--{name} is not available with --mode forward")
    if args.transform != "efficient" or args.evm != "array":
        raise UsageError("--transform and --evm are reverse-mode options: forward mode has "
                         "one transformation and no EVM")
    if args.programs < 1:
        raise UsageError("--programs must be at least 1")
    if args.max_depth < 0:
        raise UsageError("--max-depth must not be negative")
    if args.constants == default_constants:
        constants = DEFAULT
    else:
        try:
            constants = ForwardConstants.parse(args.constants)
        except ValueError as e:
            raise UsageError(f"--constants: {e} (forward mode: c,c')") from None
    feats = _features(args.features)
    bar = ProgressBar("chad check forward")
    try:
        r = run_forward_check(args.programs, args.max_depth, args.seed, constants, feats,
                              args.shape, progress=bar)
    finally:
        bar.close()
    obs = r.observations
    fixed = fit(obs, constants.c1) if obs else None
    joint = fit(obs) if obs else None
    frags = []
    for f in FRAGMENTS:
        group = [o for o in obs if o.fragment == f]
        if group:
            frags.append({"fragment": f, "programs": len(group),
                          "largest_c_seen": fit(group, constants.c1).c})
    cex = None
    if r.counterexample is not None:
        case, o, err = r.counterexample
        cex = {"program": print_surface(case.program), "args": case.args_json(),
               "primal_steps": None if o is None else o.primal_steps,
               "jvp_steps": None if o is None else o.jvp_steps, "error": err}
    if args.json:
        print(dumps({"mode": "forward", "holds": r.holds, "seed": r.seed,
                     "programs": r.generated, "measurements": len(obs),
                     "features": r.features,
                     "constants": {"c": constants.c, "c1": constants.c1},
                     "max_ratio": round(r.max_ratio, 4),
                     "fitted": None if fixed is None else fixed.as_json(),
                     "joint": None if joint is None else joint.as_json(),
                     "fragments": frags, "counterexample": cex,
                     "observations": [o.as_row() for o in obs]}))
        return 0 if r.holds else 1
    feats_text = ", ".join(f"{k} {'on' if v else 'off'}" for k, v in r.features.items())
    lines = [f"chad check: forward mode, seed {r.seed}, {args.shape} programs of max depth "
             f"{r.max_depth} ({feats_text})"]
    if obs:
        lines.append(f"  {r.generated} program(s) generated: primal steps "
                     f"{min(o.primal_steps for o in obs)}..{max(o.primal_steps for o in obs)}, "
                     f"jvp steps {min(o.jvp_steps for o in obs)}.."
                     f"{max(o.jvp_steps for o in obs)}, jvp/primal up to {r.max_ratio:.1f}")
        rel = "<=" if fixed.c <= constants.c else ">"
        lines.append(f"  z3 (Optimize): the largest c seen over {len(obs)} measured program(s), "
                     f"with c' = {fixed.c1}: c = {fixed.c}   ({rel} {constants.c}; a lower bound "
                     f"of the constant needed, not a proof)")
        for f in frags:
            lines.append(f"    {f['fragment']}: {f['programs']} program(s), largest c seen "
                         f"{f['largest_c_seen']}")
        lines.append(f"  z3 (Optimize): (c, c') jointly minimised ({joint.objective}): "
                     f"c = {joint.c}, c' = {joint.c1}")
    if r.holds:
        lines.append(f"  the bound {constants} holds on every program: no violation")
    else:
        lines += ["", "  the smallest program found that violates the bound"
                  + (f" (it crashed: {cex['error']})" if cex["error"] else
                     f": primal {cex['primal_steps']} steps, jvp {cex['jvp_steps']} steps") + ":",
                  cex["program"], f"  args: {dumps(cex['args'])}"]
    print("\n".join(lines))
    return 0 if r.holds else 1
