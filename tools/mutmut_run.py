"""Run mutmut (`make mutate`) so that it also mutates the registered cost rules.

mutmut 3 skips every decorated function (its trampolines cannot sit under an arbitrary
decorator). The core cost rules in chad/costmodel/evaluate.py are registered with a decorator,
`@rule(Var)` etc., which only registers the function in the table chad.tables.EVAL. Before
mutmut mutates a file, this wrapper rewrites each `@rule(...)` on a top-level function into
the equivalent call `rule(...)(name)` at the end of the module, so the functions are
mutated like any other; the source files themselves are not changed.
Usage: python tools/mutmut_run.py <mutmut arguments>, e.g. `run "chad.costmodel.evaluate.*"`.
"""
from __future__ import annotations

import re
import sys

import mutmut.__main__ as mm

_DECORATED = re.compile(r"^@(rule\([^\n]*\))\n(def (\w+)\()", re.M)


def undecorate(code: str) -> str:
    regs = []

    def strip(m: re.Match) -> str:
        regs.append(f"{m.group(1)}({m.group(3)})")
        return m.group(2)

    code = _DECORATED.sub(strip, code)
    if regs:
        code = code.rstrip("\n") + "\n\n\n# registrations moved out of decorators by tools/mutmut_run.py\n" + "\n".join(regs) + "\n"
    return code


_original = mm.mutate_file_contents


def mutate_file_contents(filename, code, *args, **kwargs):
    return _original(filename, undecorate(code), *args, **kwargs)


mm.mutate_file_contents = mutate_file_contents

if __name__ == "__main__":
    sys.argv[0] = "mutmut"
    sys.exit(mm.cli())
