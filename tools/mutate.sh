#!/usr/bin/env bash
# `make mutate`: mutation testing of the cost and CHAD rules.
# The files in order of importance, one mutmut run each, so that a run stopped early
# (MUTATE_BUDGET seconds, default unlimited) leaves complete results for the first files;
# then tools/mutate_report.py writes docs/mutation-report.md.
# Configuration (files, kill command): [tool.mutmut] in pyproject.toml.
set -u
PY=${PY:-.venv/bin/python}
MUTMUT=${MUTMUT:-"$PY tools/mutmut_run.py"}
BUDGET=${MUTATE_BUDGET:-0}
CHILDREN=${MUTATE_CHILDREN:-2}
PATTERNS=(
  "chad.costmodel.evaluate.*"
  "chad.transform.efficient.*"
  "chad.arrays.evaluate.*"
  "chad.arrays.transform.*"
  "chad.functions.evaluate.*"
  "chad.functions.efficient.*"
  "chad.functions.calls.x_eval_dcall__mutmut_*"
  "chad.functions.calls.x_call_rule__mutmut_*"
  "chad.transform.naive_terms.x_tsize__mutmut_*"
  "chad.transform.naive_terms.x__d*"
  "chad.transform.naive_terms.x__ev*"
  "chad.runtime.array_evm.*"
  "chad.runtime.map_evm.*"
  "chad.runtime.parallel_evm.*"
  "chad.runtime.protocol.*"
  "chad.costmodel.lacm.*"
)
start=$(date +%s)
for p in "${PATTERNS[@]}"; do
  if [ "$BUDGET" -gt 0 ] && [ $(( $(date +%s) - start )) -ge "$BUDGET" ]; then
    echo "mutate: budget of ${BUDGET}s spent; not run: $p"; continue
  fi
  echo "mutate: $p"
  $MUTMUT run --max-children "$CHILDREN" "$p" > /dev/null 2>&1 || echo "mutate: mutmut exited $? on $p"
done
"$PY" tools/mutate_report.py "$@"
