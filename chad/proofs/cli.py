"""`chad prove`: the inductive step of TH1 for every CHAD rule, proved by z3
(docs/proofs.md; Efficient CHAD (Smeding & Vákár), appendix B, lemmas.agda).

    chad prove [--constant K] [--b B] [--min] [--smt DIR] [--rule NAME[,NAME...]] [--json]

One line per rule: `proved`, or `FAILED` with the path, z3's counterexample and
the slack c·P − b − L there (negative). `--constant K` checks with K instead of the
documented constant (RULE_STEP's, chad/proofs/statements.py), `--b B` with the
per-term slack B instead of the documented one (0: the formalisation's TH1); `--min` adds the
smallest constant each rule needs; `--smt DIR` writes each obligation as an
SMT-LIB script (hypotheses, negated goal, check-sat; unsat = proved). The rules
with no obligation yet (`NOT_YET` in chad/proofs/rules.py) are listed after the
others as such. Exit 0 when every rule with an obligation is proved, 1 when one
fails, 2 on bad usage.
"""

from __future__ import annotations

import json
import os
import re

from chad.errors import UsageError

from .statements import RULE_STEP


def add_prove_parser(sub) -> None:
    sp = sub.add_parser(
        "prove", help="prove TH1's inductive step for every CHAD rule with z3",
        description="Derive, for each CHAD rule, TH1's inequality with the sub-terms abstract "
                    "(from the transform's code) and prove it with z3 (docs/proofs.md).")
    sp.add_argument("--constant", metavar="K", default=None,
                    help=f"the constant c to prove each rule with (default "
                         f"{RULE_STEP.constants['c']}; TH1's is {RULE_STEP.constants['th1']})")
    sp.add_argument("--b", metavar="B", default=None,
                    help=f"the slack b every term leaves, TH1 as <= c * P - b (default "
                         f"{RULE_STEP.constants['b']}; 0 is the formalisation's statement)")
    sp.add_argument("--min", action="store_true",
                    help="also report the smallest constant each rule needs")
    sp.add_argument("--smt", metavar="DIR", default=None,
                    help="write each obligation as an SMT-LIB file into DIR")
    sp.add_argument("--rule", metavar="NAMES", default=None,
                    help="only these rules (comma-separated, e.g. var,let,'prim DIV')")
    sp.add_argument("--json", action="store_true", help="one JSON object per rule")


def _constant(text, key: str = "c", flag: str = "--constant") -> int:
    if text is None:
        return RULE_STEP.constants[key]
    try:
        k = int(text)
    except ValueError:
        raise UsageError(f"{flag}: expected a non-negative integer, got {text!r}") from None
    if k < 0:
        raise UsageError(f"{flag}: expected a non-negative integer, got {k}")
    return k


def _file_name(rule: str, i: int) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", rule).strip("_") + f"_{i}.smt2"


def prove_rules(specs, c: int, want_min: bool = False, smt_dir: str | None = None,
                chad_class=None, b: int = 0) -> list[dict]:
    """Check every obligation of every rule at c (and per-term slack b); one
    result dict per rule."""
    from chad.transform.efficient import Chad

    from .prover import check, min_constant, smtlib
    from .rules import obligations

    results = []
    for spec in specs:
        obs = obligations(spec, chad_class or Chad)
        res = {"rule": spec.name, "paths": len(obs), "constant": c, "b": b, "proved": True}
        for i, ob in enumerate(obs):
            if smt_dir is not None and ob.error is None:
                with open(os.path.join(smt_dir, _file_name(spec.name, i)), "w") as f:
                    f.write(smtlib(ob, c, b))
            v = check(ob, c, b)
            if not v.holds and res["proved"]:
                res.update(proved=False, path=ob.label, model=v.model, slack=v.slack,
                           error=v.error)
        if want_min:
            mins = [min_constant(ob, b) for ob in obs]
            res["min"] = None if any(m is None for m in mins) else max(mins, default=0)
            res["paths_min"] = {ob.label or str(i): m for i, (ob, m) in enumerate(zip(obs, mins))}
        results.append(res)
    return results


def _line(r: dict, width: int) -> str:
    name = r["rule"].ljust(width)
    extra = ""
    if "min" in r:
        extra = ("  (needs c >= %d, slack %d)" % (r["min"], r["constant"] - r["min"])
                 if r["min"] is not None else "  (no constant suffices)")
        if len(r["paths_min"]) > 1:
            extra += "; per path: " + ", ".join(
                f"{label}: {'none' if m is None else m}" for label, m in r["paths_min"].items())
    if r["proved"]:
        return f"{name}  proved at c = {r['constant']}{extra}"
    where = f" [{r['path']}]" if r.get("path") else ""
    if r.get("error"):
        return f"{name}  FAILED{where}: {r['error']}{extra}"
    model = ", ".join(f"{k} = {v}" for k, v in sorted(r["model"].items()))
    return (f"{name}  FAILED at c = {r['constant']}{where}: slack {r['slack']}; "
            f"counterexample: {model}{extra}")


def cmd_prove(args) -> int:
    from .rules import NOT_YET, rule_table

    c = _constant(args.constant)
    b = _constant(args.b, "b", "--b")
    specs = rule_table()
    if args.rule is not None:
        wanted = [w.strip() for w in args.rule.split(",") if w.strip()]
        known = {s.name for s in specs}
        unknown = [w for w in wanted if w not in known]
        if unknown or not wanted:
            raise UsageError(f"--rule: unknown rule {', '.join(map(repr, unknown)) or '(none)'}; "
                             f"rules: {', '.join(sorted(known))}")
        specs = [s for s in specs if s.name in wanted]
    if args.smt is not None:
        try:
            os.makedirs(args.smt, exist_ok=True)
        except OSError as e:
            raise UsageError(f"--smt: cannot create {args.smt!r}: {e.strerror}") from None
        if not os.access(args.smt, os.W_OK):
            raise UsageError(f"--smt: {args.smt!r} is not writable")
    results = prove_rules(specs, c, args.min, args.smt, b=b)
    if args.json:
        for r in results:
            print(json.dumps(r, sort_keys=True))
    else:
        print(f"{RULE_STEP.name}: TH1's inductive step per CHAD rule, c = {c}, b = {b} "
              f"({len(results)} rule{'s' if len(results) != 1 else ''}; docs/proofs.md)")
        width = max((len(r["rule"]) for r in results), default=0)
        for r in results:
            print(_line(r, width))
        failed = sum(not r["proved"] for r in results)
        missing = [] if args.rule is not None else NOT_YET
        for name, needs in missing:
            print(f"{name:<{width}}  no obligation yet: needs {needs}")
        print(f"{len(results) - failed} proved, {failed} failed"
              + (f", {len(missing)} rules without an obligation yet (docs/proofs.md)"
                 if missing else ""))
    return 0 if all(r["proved"] for r in results) else 1
