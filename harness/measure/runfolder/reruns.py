"""The rerun index `RUNS_DIR/reruns.jsonl`: forward links from original runs to their reruns.

Apart from harness.driver.rerun so that `harness show` loads none of the launching code."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.base.atomic import append_bytes
from harness.base.errors import InvalidInput
from harness.base.readfile import InputError, read_bounded
from harness.base.timeutil import utc_now

INDEX = "reruns.jsonl"
INDEX_LIMIT = 64 * 1024 * 1024


def fold_index(lines: list[str]) -> dict[str, dict]:
    """Pure: rerun run_id -> its latest entry; lines that are not JSON objects are skipped."""
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
    """The index's lines ([] when missing or unreadable), bounded, regular files only."""
    try:
        raw = read_bounded(Path(runs_dir) / INDEX, INDEX_LIMIT, what="rerun index")
    except InputError:
        return []
    return raw.decode("utf-8", "replace").splitlines()


def reruns_of(run_dir: Path) -> list[dict]:
    """The reruns of the run in `run_dir`, oldest first, from the index beside it."""
    run_dir = Path(run_dir)
    out = []
    for rid, e in fold_index(index_lines(run_dir.parent)).items():
        if original_id(e) == run_dir.name:
            out.append({"run_id": rid, "path": e["rerun"].get("path"), "reason": e.get("reason"),
                        "status": e.get("status"), "at": e.get("at")})
    return sorted(out, key=lambda r: str(r["at"]))


def index_entry(link: Mapping[str, Any], rerun_id: str, rerun_path: Path | str,
                night: Path | str | None, status: str) -> dict:
    """One line of the index: original, rerun, night, now, and where it stands."""
    return {"original": {"run_id": link["run_id"], "path": link["path"]},
            "rerun": {"run_id": rerun_id, "path": str(rerun_path)},
            "reason": link["reason"], "night": str(night) if night else None,
            "at": utc_now(), "status": status}


def append_index(runs_dir: Path, entry: dict) -> None:
    """Append one JSON line to `runs_dir/reruns.jsonl`, durably, never rewriting it."""
    line = (json.dumps(entry, sort_keys=True, ensure_ascii=False) + "\n").encode()
    path = runs_dir / INDEX
    try:
        append_bytes(path, line)
    except OSError as e:
        raise InvalidInput(f"{path}: cannot append to the rerun index: "
                           f"{e.strerror or e} (is it a link or a FIFO?)") from None
