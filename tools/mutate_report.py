"""Write docs/mutation-report.md from mutmut's results (`make mutate`).

Per file: killed / total (mutants that no selected test reaches are counted apart, as
"no test"), then every surviving mutant with its diff and a reason. Reasons written by
hand in the report (the line `reason: ...` under a mutant) are kept when the report is
regenerated, for a mutant with the same diff (mutmut renumbers a changed file's mutants, so
a reason follows its diff, not only its name); a survivor without one is marked TODO. The
hand-written section `## Coverage ...` (what was run, and when) is kept too. A file with no result in mutants/ (not run in
this mutants/ directory, e.g. a fresh worktree) keeps its row and its survivors from the
previous report, marked "(earlier run)", so that a time-boxed run of some files does not
erase the results of the others.

Options: `--before DIR`, a copy of mutants/ (its *.meta and mutmut-stats.json) taken before
new tests were added, for the table "Score before"; `--earlier DIR`, another run's mutants/
directory, whose verdicts stand in for the mutants this run did not check, only in functions
whose source is unchanged (the same mutmut function hash; the report says how many).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

from mutmut.stats import status_by_exit_code

REPORT = Path("docs/mutation-report.md")
FILES = [
    "chad/costmodel/evaluate.py", "chad/transform/efficient.py", "chad/arrays/evaluate.py",
    "chad/arrays/transform.py", "chad/functions/evaluate.py", "chad/functions/efficient.py",
    "chad/functions/calls.py", "chad/transform/naive_terms.py", "chad/runtime/array_evm.py",
    "chad/runtime/map_evm.py", "chad/runtime/parallel_evm.py", "chad/runtime/protocol.py", "chad/costmodel/lacm.py",
]
# Only these functions of the two files that mix rules with other code are in scope.
SCOPE = {
    "chad/functions/calls.py": re.compile(r"\.x_(eval_dcall|call_rule)__mutmut_"),
    "chad/transform/naive_terms.py": re.compile(r"\.x_(tsize|_d\w+|_ev\w+)__mutmut_"),
}


_SECTION = re.compile(r"^#### `([^`]+)`\n\n(\S[^\n]*) \(([^)\n]+)\)\n\n```diff\n(.*?)\n?```\nreason: ([^\n]*)$",
                      re.M | re.S)


def old_reasons() -> dict:
    """The hand-written reasons of the previous report, by (mutant name, diff) and by (file,
    diff). A reason applies to a mutant only with the same diff: when a file changes, mutmut
    numbers its mutants anew, so a name can stand for another mutation; a mutant whose
    number changed but whose diff is the same (and unique in its file) keeps its reason."""
    reasons, by_diff = {}, {}
    if REPORT.exists():
        for m in _SECTION.finditer(REPORT.read_text()):
            name, _status, f, diff, reason = m.groups()
            if reason.startswith("TODO"):
                continue
            reasons[(name, diff.strip())] = reason
            key = (f, diff.strip())
            by_diff[key] = None if key in by_diff else reason  # None: not unique
    return {"name": reasons, "diff": by_diff}


def reason_for(reasons: dict, name: str, f: str, diff: str) -> str | None:
    return reasons["name"].get((name, diff)) or reasons["diff"].get((f, diff))


def old_report():
    """From the previous report: per file, its counts (files that were run), its counts in the
    table of the score before the new tests, and its surviving mutants (name, status, diff,
    reason); and the hand-written coverage section."""
    counts, before, sections, coverage = {}, {}, defaultdict(list), []
    if not REPORT.exists():
        return counts, before, sections, coverage
    text = REPORT.read_text()
    row = re.compile(r"^\| (\S+\.py)(?: \(earlier run\))? \| (\d+) / (\d+) \([^)]*\) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$")
    for line in text.splitlines():
        m = row.match(line)
        if m:  # the first table, then the score before
            f, killed, ran, surv, notests, timeout, notrun = m.group(1), *map(int, m.groups()[1:])
            (before if f in counts else counts)[f] = Counter({"killed": killed - timeout, "timeout": timeout, "survived": surv,
                                 "no tests": notests, "not checked": notrun})
    for m in _SECTION.finditer(text):
        name, status, f, diff, reason = m.groups()
        sections[f].append((name, status, diff.strip(), reason))
    m = re.search(r"^## Coverage.*?(?=^## )", text, re.M | re.S)
    if m:
        coverage = m.group(0).rstrip("\n").splitlines() + [""]
    m = re.search(r"^" + re.escape(KILLED_AGAIN) + r"(.*)\.$", text, re.M)
    for part in (m.group(1).split("; ") if m else []):
        f = part.split(" ", 1)[0]
        sections[f] += [(name, "killed again", None, None) for name in re.findall(r"`([^`]+)`", part)]
    return counts, before, sections, coverage


KILLED_AGAIN = "Killed when run again by name after new tests, in files of an earlier run: "


# Reasons that follow from the diff alone (checked by reading each such mutant once).
AUTO_REASONS = [
    (re.compile(r"^\S*\.x_(rule|register)__mutmut_"),
     "equivalent here: registration code, run once at import (features.load() in tests/conftest.py) "
     "before mutmut switches a mutant on; a broken registration fails every test at import."),
    (re.compile(r"raise \w*Error\("),
     "equivalent: changes an error's message or source location only (no step count, value or gradient)."),
    (re.compile(r"self\.fresh\("),
     "equivalent: changes a fresh variable's prefix only; fresh names are made unique by their counter "
     "and contain '$', so no name can clash and the terms evaluate alike."),
]


def auto_reason(name: str, diff: str) -> str | None:
    """The reason of AUTO_REASONS whose pattern the mutant's name matches, or that every
    removed AND every added line matches (`res = self.fresh("res")` -> `res = None` is
    not a prefix change)."""
    removed = [l for l in diff.splitlines() if l.startswith("-")]
    added = [l for l in diff.splitlines() if l.startswith("+")]
    for pat, reason in AUTO_REASONS:
        if pat.search(name) or (removed and added and all(pat.search(l) for l in removed + added)):
            return reason
    return None


def diff_of(name: str) -> str:
    try:  # in this process (one `mutmut show` per mutant takes a second or two)
        import mutmut.__main__ as mm
        out = mm.get_diff_for_mutant(name, path=mm.find_mutant(name).path)
    except Exception:
        out = subprocess.run([sys.executable, "tools/mutmut_run.py", "show", name],
                             capture_output=True, text=True).stdout
    lines = [l for l in out.splitlines() if l.startswith(("+", "-")) and not l.startswith(("+++", "---"))]
    return "\n".join(lines).strip()


def load_codes(root: Path, f: str) -> dict | None:
    meta = root / (f + ".meta")
    return json.loads(meta.read_text())["exit_code_by_key"] if meta.exists() else None


def function_hashes(root: Path) -> dict:
    stats = root / "mutmut-stats.json"
    return json.loads(stats.read_text()).get("function_hashes", {}) if stats.exists() else {}


def tally(root: Path, fallback: Path | None = None, earlier: Path | None = None, taken: Counter | None = None):
    """Per file, the Counter of statuses and the survivors. A mutant not checked in this
    run takes its verdict from `fallback` (a snapshot of an earlier run, when only that
    run's survivors were run again after adding tests), else from `earlier` (another
    mutants/ directory) when its function has the same source there (mutmut's function
    hash in both directories' mutmut-stats.json); `taken` counts those, per file."""
    rows, survivors = [], []
    totals = Counter()
    if earlier is not None:
        here = function_hashes(root) or function_hashes(Path("mutants"))
        there = function_hashes(earlier)
    for f in FILES:
        codes = load_codes(root, f)
        if codes is None:
            rows.append((f, None))
            continue
        if fallback is not None:
            old = load_codes(fallback, f) or {}
            codes = {k: (v if v is not None else old.get(k)) for k, v in codes.items()}
        if earlier is not None:
            old = load_codes(earlier, f) or {}
            for k, v in codes.items():
                fn = k.rsplit("__mutmut_", 1)[0]
                if v is None and old.get(k) is not None and fn in here and here[fn] == there.get(fn):
                    codes[k] = old[k]
                    if taken is not None:
                        taken[f] += 1
        scope = SCOPE.get(f)
        c = Counter()
        for name, code in sorted(codes.items(), key=lambda kv: (kv[0].rsplit("_", 1)[0], int(kv[0].rsplit("_", 1)[1]))):
            if scope and not scope.search(name):
                continue
            status = status_by_exit_code[code]
            c[status] += 1
            if status in ("survived", "no tests"):
                survivors.append((f, name, status))
        rows.append((f, c))
        if c["not checked"] < sum(c.values()):
            totals.update(c)
    return rows, survivors, totals


def line(f, c, label=""):
    if c is None or c["not checked"] == sum(c.values()):
        return f"| {f} | not run | | | | |"
    f = f + label
    ran = sum(c.values()) - c["not checked"]
    killed = c["killed"] + c["timeout"] + c["segfault"] + c["suspicious"]
    score = f"{100 * killed / ran:.1f}%" if ran else "-"
    return (f"| {f} | {killed} / {ran} ({score}) | {c['survived']} "
            f"| {c['no tests']} | {c['timeout']} | {c['not checked']} |")


HEADER = [
    "| file | killed / run (score) | survived | no selected test reaches it | timeout (counted killed) | not run |",
    "|---|---|---|---|---|---|",
]


def main() -> None:
    args = sys.argv[1:]
    before = Path(args[args.index("--before") + 1]) if "--before" in args else None
    earlier = Path(args[args.index("--earlier") + 1]) if "--earlier" in args else None
    reasons = old_reasons()
    taken = Counter()
    rows, survivors, totals = tally(Path("mutants"), before, earlier, taken)
    old_counts, old_before, old_sections, coverage = old_report()
    labels = {}

    killed_again: dict = defaultdict(set)

    def reruns(f):
        """This directory's verdicts for f when they are only survivors of the previous
        report run again by name (after new tests) in a file not run here, else None."""
        codes = load_codes(Path("mutants"), f) or {}
        checked = {k: status_by_exit_code[v] for k, v in codes.items() if v is not None}
        listed = {n: st for n, st, _d, _r in old_sections.get(f, [])}
        return (checked, listed) if checked and set(checked) <= set(listed) else None

    def carry_over(rows, totals, old, apply_reruns=False):
        for i, (f, c) in enumerate(rows):
            if f not in old:
                continue
            again = reruns(f)
            if c is None or c["not checked"] == sum(c.values()) or again:
                if again and c is not None:
                    totals.subtract(c)  # tally counted the re-runs as this file's run
                counts = Counter(old[f])
                if again and apply_reruns:
                    checked, listed = again
                    for k, st in checked.items():
                        if st in ("killed", "timeout", "segfault", "suspicious"):
                            if listed[k] != "killed again":  # else the old counts have it
                                counts[listed[k]] -= 1
                                counts["killed"] += 1
                            killed_again[f].add(k)
                rows[i] = (f, counts)
                labels[f] = " (earlier run)"
                totals.update(counts)

    carry_over(rows, totals, old_counts, apply_reruns=True)
    out = [
        "# Mutation report (`make mutate`)",
        "",
        "Generated by `tools/mutate_report.py` from mutmut's results; only the `reason:` lines",
        "are written by hand (and kept when the report is regenerated). The tool, its version",
        "and the kill command are in `[tool.mutmut]` of pyproject.toml and the `mutate` extra.",
        "",
        *HEADER,
        *[line(f, c, labels.get(f, "")) for f, c in rows],
        line("**total**", totals),
        "",
        *([f"Not checked in this mutants/ directory, and taken from an earlier run's (`--earlier`) for "
           f"functions whose source is the same there (mutmut's function hash): "
           + "; ".join(f"{f} {n} mutants" for f, n in taken.items()) + ".", ""] if taken else []),
        *([KILLED_AGAIN + "; ".join(f"{f} {len(k)} ({', '.join(f'`{n}`' for n in sorted(k))})" for f, k in killed_again.items())
           + ".", ""] if killed_again else []),
        *coverage,
        "## Surviving mutants",
        "",
        "Survived, or reached by no test of the kill command (\"no tests\").",
        "",
    ]
    new = defaultdict(list)
    for f, name, status in survivors:
        diff = diff_of(name)
        new[f].append((name, status, diff, reason_for(reasons, name, f, diff) or auto_reason(name, diff) or "TODO"))
    for f in FILES:
        kept = [x for x in old_sections.get(f, []) if x[0] not in killed_again[f] and x[1] != "killed again"]
        for name, status, diff, reason in (kept if f in labels else new[f]):
            out += [f"#### `{name}`", "", f"{status} ({f})", "", "```diff", diff, "```",
                    f"reason: {reason}", ""]
    if not survivors and not any(old_sections.get(f) for f in labels):
        out.append("None.")
    if before is not None:
        brows, bsurv, btotals = tally(before, None, earlier)
        carry_over(brows, btotals, old_before)
        out += ["", "## Score before the tests/test_mutants_*.py tests", "",
                "The same run with the test suite as it was (before the new tests):", "",
                *HEADER, *[line(f, c, labels.get(f, "")) for f, c in brows], line("**total**", btotals), ""]
    REPORT.write_text("\n".join(out) + "\n")
    print(f"wrote {REPORT}: {len(survivors)} surviving mutants")


if __name__ == "__main__":
    main()
