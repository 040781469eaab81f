#!/usr/bin/env bash
# Mutation testing of the Gate-0 encoder and finalizer with mutmut 3 (config: [tool.mutmut]
# in pyproject.toml). Prints the kill score and exits non-zero below the floor (default 90%).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
FLOOR=${MUTATION_FLOOR:-90}
rm -rf mutants
"$PY" -m mutmut run --max-children "${MUTATION_JOBS:-2}" >/dev/null 2>&1 || {
  echo "mutation: mutmut run failed; rerun '$PY -m mutmut run' to see why" >&2; exit 3; }
"$PY" -m mutmut results --all true > mutants/results.txt 2>/dev/null \
  || "$PY" -m mutmut results > mutants/results.txt
"$PY" - "$FLOOR" <<'PY'
import sys
from collections import Counter

floor = float(sys.argv[1])
rows = [line.strip().rsplit(": ", 1) for line in open("mutants/results.txt") if ": " in line]
states = Counter(state for _, state in rows)
total = sum(states.values())
killed = states["killed"] + states["timeout"]
for name, state in rows:
    if state not in ("killed", "timeout"):
        print(f"  {state}: {name}")
score = 100.0 * killed / total if total else 0.0
print(f"mutation: killed {killed}/{total} = {score:.1f}% ({dict(sorted(states.items()))})")
sys.exit(0 if total and score >= floor else 1)
PY
