"""Small, well-formed fake run folders for the bundle tests (no Docker needed)."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path


def seal(folder: Path) -> None:
    """Write SHA256SUMS the way the pipeline does: sha256sum format, sorted, every other file
    except those in addenda (which carry their own)."""
    lines = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if rel == "SHA256SUMS" or rel.startswith("addenda/"):
            continue
        lines.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {rel}\n")
    (folder / "SHA256SUMS").write_text("".join(lines))


def make_run(parent: Path, run_id: str = "rehearsal-echo-20261130T083000Z-3fa2", *,
             full: bool = True, row: int = 0, ended: str = "2026-11-30T08:40:00Z") -> Path:
    """A sealed run folder. `full=False` keeps only a tiny run.json and one log (tiny bundles)."""
    folder = parent / run_id
    (folder / "logs").mkdir(parents=True)
    if not full:
        (folder / "run.json").write_text(json.dumps({"run_id": run_id, "status": "accepted"}))
        (folder / "logs" / "stdout.log").write_text("ok\n")
        seal(folder)
        return folder
    record = {
        "schema": "harness.run/v1", "run_id": run_id,
        "campaign": {"name": "kv-warmup", "file": "campaigns/kv.yaml", "row": row},
        "control": {"name": "echo", "file": "controls/echo.yaml"},
        "image": {"name": "rehearsal:1", "id": "sha256:" + "a" * 64},
        "seal": "sha256:" + "b" * 64, "status": "accepted", "reasons": [],
        "times": {"created": "2026-11-30T08:29:59Z", "started": "2026-11-30T08:30:00Z",
                  "ended": ended},
        "lock": {"path": "/run/gpu.lock", "acquired": "2026-11-30T08:30:00Z",
                 "released": ended, "wait_s": 0.5},
        "outcome": {"exit_code": 0, "oom_killed": False, "timed_out": False},
        "post_steps": [{"name": "exit-code", "exit_code": 0, "verdict": "accepted"}],
        "rerun_of": None,
        "model_hashes": {"model/config.json": "sha256:" + "c" * 64},
    }
    (folder / "run.json").write_text(json.dumps(record, indent=2))
    (folder / "docker-vector.json").write_text(json.dumps({"argv": ["docker", "run", "x"]}))
    (folder / "host-before.json").write_text(json.dumps({"hostname": "gfx1100-box"}))
    (folder / "preflight.json").write_text("{}")
    (folder / "logs" / "stdout.log").write_text("INFO engine started\n")
    (folder / "logs" / "stderr.log").write_text("")
    (folder / "post-steps" / "exit-code").mkdir(parents=True)
    (folder / "post-steps" / "exit-code" / "verdict.json").write_text('{"verdict":"accepted"}')
    seal(folder)
    return folder


def make_keys(tmp: Path, name: str) -> tuple[Path, str]:
    """An unencrypted ed25519 key pair; returns (private key path, allowed_signers line)."""
    key = tmp / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)],
                   check=True)
    kind, blob = (tmp / f"{name}.pub").read_text().split()[:2]
    return key, f'{name}@example namespaces="harness-evidence" {kind} {blob}\n'
