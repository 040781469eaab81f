#!/usr/bin/env bash
# Mutation testing of the Gate-0 encoder and finalizer with mutmut 3 (config: [tool.mutmut]
# in pyproject.toml). Fails before the run when a mutated module has no selected test file
# importing it; after it, prints the kill score (the `mutation: killed K/T = S%` line the
# gate judge reads) and exits non-zero below the floor (MUTATION_FLOOR, default 95: the
# kv-warmup campaign's min_kill_score), on any "no tests" mutant, or on a stale entry of
# scripts/mutation-equivalent.txt (the survivors justified as equivalent, left out of T).
# The checks are scripts/mutation_gate.py's.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
"$PY" scripts/mutation_gate.py selection
rm -rf mutants
start=$SECONDS
"$PY" -m mutmut run --max-children "${MUTATION_JOBS:-2}" >/dev/null 2>&1 || {
  echo "mutation: mutmut run failed; rerun '$PY -m mutmut run' to see why" >&2; exit 3; }
"$PY" -m mutmut results --all true > mutants/results.txt 2>/dev/null \
  || "$PY" -m mutmut results > mutants/results.txt
echo "mutation: mutmut ran in $((SECONDS - start)) s with ${MUTATION_JOBS:-2} children"
"$PY" scripts/mutation_gate.py score mutants/results.txt ${MUTATION_FLOOR:+--floor "$MUTATION_FLOOR"}
