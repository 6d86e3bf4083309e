"""Golden step counts: every entry of tests/golden/corpus.json, recomputed.

The corpus holds ~500 programs (first-order, large types, arrays, functions, def
calls, chains, the examples) with their exact primal and gradient step counts,
size(ctg), bound, value and dense gradient (floats as float.hex()). This test only
reads it: a difference is either a bug or an intended change, which is then made
deliberate by `make golden` (tests/golden/regenerate.py) and a reviewed diff.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.golden.regenerate import CORPUS, DEFAULT_EVM, NUMBERS, load_corpus, measure

ENTRIES = load_corpus()
EVMS = ("map", "array", "parallel")
SAMPLE_EVERY = 4  # the all-runtimes test takes every 4th entry
SHOW = 5  # mismatches printed in full


def _short(v, n=300):
    s = json.dumps(v)
    return s if len(s) <= n else s[:n] + f"... ({len(s)} chars)"


def _compare(entries, evm):
    """(number compared, mismatches) where each mismatch is (entry, {field: (want, got)})."""
    bad = []
    for e in entries:
        try:
            got = measure(e["program"], e["args"], e["ctg"], evm=evm)
        except Exception as exc:  # noqa: BLE001 - reported as a mismatch
            got = {k: f"raised {type(exc).__name__}: {exc}" for k in NUMBERS}
        diff = {k: (e[k], got[k]) for k in NUMBERS if e[k] != got[k]}
        if diff:
            bad.append((e, diff))
    return len(entries), bad


def _report(n, bad, evm):
    by_field = {}
    for _e, diff in bad:
        for k in diff:
            by_field[k] = by_field.get(k, 0) + 1
    lines = [f"{len(bad)} of {n} golden entries differ on evm {evm!r} "
             f"(by field: {by_field}). First {min(SHOW, len(bad))}:"]
    for e, diff in bad[:SHOW]:
        lines.append(f"--- {e['name']} ({e['family']})")
        prog = e["program"].strip().splitlines()
        if len(prog) > 12:
            prog = prog[:12] + [f"... ({len(prog) - 12} more lines)"]
        lines.append("    program: " + "\n             ".join(prog))
        lines.append(f"    args: {_short(e['args'])}   ctg: {_short(e['ctg'])}")
        for k, (want, got) in diff.items():
            lines.append(f"    {k}: golden {_short(want)}  project {_short(got)}")
    lines.append("If the change is intended: `make golden` (python tests/golden/regenerate.py) "
                 "and review the diff of tests/golden/corpus.json.")
    return "\n".join(lines)


def test_corpus_is_well_formed():
    names = [e["name"] for e in ENTRIES]
    assert len(names) == len(set(names))
    assert len(ENTRIES) >= 450
    fams = {e["family"] for e in ENTRIES}
    assert {"first-order", "arrays", "functions", "arrays+functions", "chains",
            "examples"} <= fams
    text = "\n".join(e["program"] for e in ENTRIES)
    for construct in ("build", "map ", "fold", "sum ", "length", " ! ", "\\", "g(", "case",
                      "sign", "let"):
        assert construct in text, construct
    assert os.path.getsize(CORPUS) < 500_000
    with open(CORPUS) as f:
        assert json.load(f)["evm"] == DEFAULT_EVM


def test_golden_step_counts_values_and_gradients_default_runtime():
    n, bad = _compare(ENTRIES, DEFAULT_EVM)
    assert not bad, _report(n, bad, DEFAULT_EVM)


@pytest.mark.parametrize("evm", EVMS)
def test_golden_sample_on_every_runtime(evm):
    """Step counts do not depend on the runtime; on this sample the values and
    gradients are bit-identical on all three as well."""
    n, bad = _compare(ENTRIES[::SAMPLE_EVERY], evm)
    assert not bad, _report(n, bad, evm)
