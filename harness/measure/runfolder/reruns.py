"""The rerun index read back: `RUNS_DIR/reruns.jsonl`, the forward links from original runs
to their reruns (harness.driver.rerun appends it).

Apart from harness.driver.rerun so that `harness show`, which lists a run's reruns, loads none of
the code that launches one.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.base.readfile import InputError, read_bounded

INDEX = "reruns.jsonl"
INDEX_LIMIT = 64 * 1024 * 1024


def fold_index(lines: list[str]) -> dict[str, dict]:
    """Pure: rerun run_id -> its latest entry (a `finished` line supersedes `started`).
    Lines that are not JSON objects (a torn last line) are skipped."""
    out: dict[str, dict] = {}
    for line in lines:
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):  # torn, not JSON, or nested past the stack
            continue
        if isinstance(entry, dict) and isinstance(entry.get("rerun"), dict):
            out[str(entry["rerun"].get("run_id"))] = entry
    return out


def original_id(entry: dict) -> str | None:
    """Pure: the run id an index entry reruns, or None when the entry does not say."""
    original = entry.get("original")
    run_id = original.get("run_id") if isinstance(original, dict) else None
    return run_id if isinstance(run_id, str) else None


def index_lines(runs_dir: Path) -> list[str]:
    """The index's lines in `runs_dir` ([] when it is missing or cannot be read): bounded,
    regular files only, so a FIFO or a huge index never hangs `show`, `ls` or a report."""
    try:
        raw = read_bounded(Path(runs_dir) / INDEX, INDEX_LIMIT, what="rerun index")
    except InputError:
        return []
    return raw.decode("utf-8", "replace").splitlines()


def reruns_of(run_dir: Path) -> list[dict]:
    """The reruns of the run in `run_dir`, oldest first, from the index beside it:
    [{"run_id", "path", "reason", "status", "at"}]."""
    run_dir = Path(run_dir)
    out = []
    for rid, e in fold_index(index_lines(run_dir.parent)).items():
        if original_id(e) == run_dir.name:
            out.append({"run_id": rid, "path": e["rerun"].get("path"), "reason": e.get("reason"),
                        "status": e.get("status"), "at": e.get("at")})
    return sorted(out, key=lambda r: str(r["at"]))
