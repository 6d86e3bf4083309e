"""Regenerate the golden step counts: tests/golden/corpus.json.

    python tests/golden/regenerate.py            # recompute every entry's numbers
                                                 # for the programs already stored
    python tests/golden/regenerate.py --new      # draw a fresh set of programs
    make golden                                  # the first form

Every entry is a program (TEXT), its arguments and output cotangent (JSON), and
what the project computes for it on the default runtime ("array"): primal steps,
gradient steps (TH2's left side), size(ctg), the bound, the value and the dense
gradient. Floats in values and gradients are stored as float.hex() strings, so the
comparison is exact (nan is "nan"). tests/test_golden.py compares every entry;
it never writes this file.

Regenerating is deliberate: run it only when a change of a step count or a value
is intended, and read the diff of corpus.json (the script prints a summary of the
entries that changed) before committing it.

Programs come from chad/costmodel/generators.py (used only as a source of program
text, with `derandomize`: the same hypothesis version gives the same programs)
and from examples/*.chad (with the arguments of their `# args:` lines). Only the
public API is used: chad.load, chad.cost, chad.grad.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus.json")
DEFAULT_EVM = "array"

if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


# Exact JSON of values and gradients (floats as hex): the oracle's `canon`.
from tests.oracle_agda import canon  # noqa: E402


def measure(program: str, args, ctg, evm: str = DEFAULT_EVM) -> dict:
    """The project's numbers for one entry (public API only). The value is the one
    chad.cost reports; chad.grad must give the same (else "value" is a list of
    both, which no corpus entry has: the test then reports it)."""
    import chad

    prog = chad.load(program)
    rep = chad.cost(prog, args, ctg, evm=evm)
    value, grads = chad.grad(prog, evm=evm)(*args, ctg=ctg)
    v1, v2 = canon(rep.value), canon(value)
    return {
        "primal_steps": rep.primal_steps,
        "gradient_steps": rep.gradient_steps,
        "ctg_size": rep.ctg_size,
        "bound": rep.bound,
        "value": v1 if v1 == v2 else {"chad.cost": v1, "chad.grad": v2},
        "gradient": canon(list(grads)),
    }


NUMBERS = ("primal_steps", "gradient_steps", "ctg_size", "bound", "value", "gradient")


# ------------------------------------------------------------------ drawing programs
# family -> (number of programs, strategy factory)
def families():
    import chad

    chad.load  # the public API's import registers every extension (arrays, functions)
    from chad.costmodel import generators as G

    return [
        ("first-order", 110, lambda: G.programs(max_depth=4, max_params=3, finite=True)),
        ("first-order-wide", 25, lambda: G.programs(max_depth=3, max_params=2, wide=True,
                                                     type_depth=3, finite=True)),
        ("arrays", 110, lambda: G.programs(max_depth=4, max_params=3, arrays=True,
                                           finite=True)),
        ("functions", 100, lambda: G.programs(max_depth=4, max_params=3, functions=True,
                                              finite=True)),
        ("arrays+functions", 90, lambda: G.programs(max_depth=4, max_params=3, arrays=True,
                                                    functions=True, finite=True)),
        ("chains", 45, lambda: G.chains(12, arrays=True, functions=True)),
    ]


def draw_cases(strategy, n: int, family: str):
    """n generated cases, deterministically: hypothesis with `derandomize` draws
    3n distinct ones (its first draws are the simplest programs, all zeros), of
    which a fixed pseudo-random sample of n is kept, in drawing order."""
    import random

    from hypothesis import HealthCheck, given, settings

    out, seen = [], set()

    @settings(max_examples=6 * n, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(case):
        if len(out) >= 3 * n:
            return
        key = (case.source(), json.dumps(case.args_json()), json.dumps(case.ctg_json()))
        if key not in seen:
            seen.add(key)
            out.append(key)

    collect()
    keep = sorted(random.Random(family).sample(range(len(out)), min(n, len(out))))
    return [out[i] for i in keep]


def example_entries():
    import chad

    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "*.chad"))):
        with open(path) as f:
            text = f.read()
        args = ctg = None
        for line in text.splitlines():
            if line.startswith("# args:"):
                args = json.loads(line[len("# args:"):])
            elif line.startswith("# ctg:"):
                ctg = json.loads(line[len("# ctg:"):])
        if args is None:
            continue
        if ctg is None and str(chad.load(text).find(None).result) == "R":
            ctg = 1.0  # the default of chad grad / chad cost, made explicit
        out.append({"family": "examples", "name": os.path.basename(path), "program": text,
                    "args": args, "ctg": ctg})
    return out


def new_entries():
    entries = []
    for family, n, make in families():
        for k, (text, args, ctg) in enumerate(draw_cases(make(), n, family)):
            entries.append({"family": family, "name": f"{family}-{k}", "program": text,
                            "args": json.loads(args), "ctg": json.loads(ctg)})
    entries += example_entries()
    return entries


# ------------------------------------------------------------------ the file
def load_corpus(path: str = CORPUS) -> list[dict]:
    with open(path) as f:
        return json.load(f)["entries"]


KEYS = ("name", "family", "program", "args", "ctg") + NUMBERS


def write_corpus(entries: list[dict], path: str = CORPUS) -> None:
    head = {
        "about": "Golden step counts of the project (tests/test_golden.py compares; "
                 "regenerate deliberately with `make golden` and read the diff). "
                 "Floats are float.hex() strings.",
        "evm": DEFAULT_EVM,
        "count": len(entries),
    }
    with open(path, "w") as f:
        f.write("{\n")
        for k, v in head.items():
            f.write(f"{json.dumps(k)}: {json.dumps(v)},\n")
        f.write('"entries": [\n')
        for i, e in enumerate(entries):
            # one key per line, so that a diff names the field that changed
            f.write("{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(e[k])}" for k in KEYS
                                        if k in e) + "\n}")
            f.write(",\n" if i + 1 < len(entries) else "\n")
        f.write("]\n}\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--new", action="store_true",
                    help="draw a fresh set of programs instead of keeping the stored ones")
    ns = ap.parse_args(argv)

    old = {}
    if os.path.exists(CORPUS):
        old = {e["name"]: e for e in load_corpus()}
    if ns.new or not old:
        base = new_entries()
    else:
        base = [{k: v for k, v in e.items() if k not in NUMBERS} for e in old.values()]

    entries, failed = [], 0
    for e in base:
        try:
            nums = measure(e["program"], e["args"], e["ctg"])
        except Exception as exc:  # a program the project rejects: not golden material
            failed += 1
            print(f"skipped {e['name']}: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        entries.append({**e, **nums})

    changed = [e["name"] for e in entries
               if e["name"] in old and any(old[e["name"]].get(k) != e[k] for k in NUMBERS)]
    added = [e["name"] for e in entries if e["name"] not in old]
    removed = [n for n in old if n not in {e["name"] for e in entries}]
    write_corpus(entries)
    fams = {}
    for e in entries:
        fams[e["family"]] = fams.get(e["family"], 0) + 1
    print(f"wrote {CORPUS}: {len(entries)} entries ({', '.join(f'{k} {v}' for k, v in fams.items())}),"
          f" {os.path.getsize(CORPUS) // 1024} KB; skipped {failed}")
    print(f"changed numbers: {len(changed)}, added: {len(added)}, removed: {len(removed)}")
    for n in changed[:20]:
        o, e = old[n], next(x for x in entries if x["name"] == n)
        diffs = [f"{k}: {o.get(k)!r} -> {e[k]!r}" for k in NUMBERS if o.get(k) != e[k]]
        print(f"  {n}: " + "; ".join(d if len(d) < 200 else d[:200] + "..." for d in diffs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
