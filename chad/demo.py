"""The main job of `make run`: every bundled example through the whole pipeline.

For each examples/*.chad: parse, type check, evaluate (value and steps), then —
when the def is differentiable (first-order parameters and result) — its gradient
and the TH2 cost report. Arguments come from the example's `# args: JSON` line
(also `# ctg: JSON` and `# fn: NAME`).
"""

from __future__ import annotations

import json
import pathlib
import sys

from . import api
from .cotangents import dense_to_json
from .errors import ChadError
from .types import is_first_order
from .values import value_to_json

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def header(text: str, key: str):
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(f"# {key}:"):
            return line.split(":", 1)[1].strip()
    return None


def run_example(path: pathlib.Path) -> bool:
    text = path.read_text()
    print(f"== {path.name}")
    try:
        prog = api.load(text, str(path))
        d = prog.find(header(text, "fn"))
        args = json.loads(header(text, "args") or "[]")
        value, steps = api.run(prog, args, d.name)
        shown = ", ".join(json.dumps(a) for a in args)
        print(f"   {d.name}({shown}) = {json.dumps(value_to_json(d.result, value))}"
              f"   ({steps} steps)")
        if all(is_first_order(p.ty) for p in d.params) and is_first_order(d.result):
            ctg_text = header(text, "ctg")
            ctg = json.loads(ctg_text) if ctg_text else api.UNSET
            _, grads = api.grad(prog, d.name)(*args, ctg=ctg)
            g = [dense_to_json(p.ty, x) for p, x in zip(d.params, grads)]
            print(f"   gradient: {json.dumps(g)}")
            r = api.cost(prog, args, ctg, d.name)
            print(f"   cost: primal {r.primal_steps}, gradient {r.gradient_steps}, "
                  f"bound {r.bound}: {'holds' if r.holds else 'VIOLATED'}")
        return True
    except ChadError as e:
        print(f"   {e.with_source(text)}")
        return False


def main() -> int:
    paths = sorted(EXAMPLES.glob("*.chad"))
    ok = [run_example(p) for p in paths]
    print(f"\n{sum(ok)} of {len(ok)} examples ran through parse, check, run, grad and cost.")
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
