"""Sealed run folders as the pipeline leaves them, with the files a regression call reads
(run.json, host-before.json, metrics.json), for the regression tests without Docker. The
host snapshot's shape is a real one's, from a cpu-profile run on this machine
(benchmarks/out/work/report/runs/*/host-before.json), cut to a few fields."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from harness.measure.runfolder.manifest import write_manifest

T0 = datetime(2026, 12, 1, 22, 0, tzinfo=UTC)
HOST = {"schema": "harness.host/v1", "hostname": "vm", "boot_id": "b1",
        "taken_at": "2026-12-01T22:00:00Z", "uptime_s": 10.0,
        "kernel": {"release": "6.18.44"}, "docker": {"version": "20.10.24"}}


def sealed_run(runs: Path, n: int, *, duration: float = 1.0, status: str = "accepted",
               image: str = "sha256:aa", host: dict | None = None,
               folder: Path | None = None) -> Path:
    """A run folder as the pipeline leaves it, with the files a call reads, sealed: the
    n-th minute's run of control `c` (or at `folder`, a name a night chose)."""
    start = T0 + timedelta(minutes=n)
    folder = folder or runs / f"c-{start:%Y%m%dT%H%M%SZ}-{n:08x}"
    run_id = folder.name
    folder.mkdir(parents=True)
    iso = "%Y-%m-%dT%H:%M:%S.%fZ"
    record = {
        "schema": "harness.run/v2", "run_id": run_id, "attempt": 1, "status": status,
        "campaign": {"name": "camp", "file": "/x/camp.yaml", "row": "R"},
        "control": {"name": "c", "file": "/x/c.yaml", "device": "cpu"},
        "image": {"name": "rehearsal", "id": image}, "seal": "sha256:" + "1" * 64,
        "reasons": [], "rules": [], "model_hashes": {}, "post_steps": [], "rerun_of": None,
        "outcome": {"exit_code": 0},
        "lock": {"wait_s": 0.05, "hold_s": duration + 0.1},
        "times": {"created": start.strftime(iso), "started": start.strftime(iso),
                  "ended": (start + timedelta(seconds=duration)).strftime(iso),
                  "sealed": (start + timedelta(seconds=duration + 1)).strftime(iso)},
    }
    (folder / "run.json").write_text(json.dumps(record))
    (folder / "host-before.json").write_text(json.dumps(host or HOST))
    (folder / "metrics.json").write_text(json.dumps({"metrics": {"kv_cache_gib": None}}))
    write_manifest(folder)
    return folder
