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


def make_keys(tmp: Path, name: str, namespace: str = "harness-evidence") -> tuple[Path, str]:
    """An unencrypted ed25519 key pair; returns (private key path, allowed_signers line
    trusting it for `namespace` only: bundles by default, approvals with
    `harness-approval@v1`)."""
    key = tmp / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)],
                   check=True)
    kind, blob = (tmp / f"{name}.pub").read_text().split()[:2]
    return key, f'{name}@example namespaces="{namespace}" {kind} {blob}\n'


def writable_bundle(archive: Path, dest: Path) -> Path:
    """Unpack a bundle (safely) and make it writable, so a test can play the forger."""
    from harness.bundle import safe_extract

    dest.mkdir(parents=True, exist_ok=True)
    root = safe_extract(archive, dest)
    for path in root.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root


def rebag(root: Path, key: Path | None = None, *, statement: bool = True) -> None:
    """What a forger holding the signing key (or facing an unsigned bundle) can do after
    changing the payload: make every bag-level record agree with it again (manifest,
    statement subjects, Payload-Oxum, tag manifest) and sign it. Only the runs' own seals
    and the bundle's rules are left to notice."""
    from harness.atomic import dumps_json
    from harness.bundle.sign import sign
    from harness.bundle.sums import format_sums

    def digest(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    payload = {p.relative_to(root).as_posix(): p for p in sorted((root / "data").rglob("*"))
               if p.is_file()}
    sums = {rel: digest(p) for rel, p in payload.items()}
    (root / "manifest-sha256.txt").write_text(format_sums(sums))
    if statement:
        doc = json.loads((root / "metadata/statement.intoto.json").read_text())
        doc["subject"] = [{"name": rel, "digest": {"sha256": sums[rel]}} for rel in sorted(sums)]
        (root / "metadata/statement.intoto.json").write_text(dumps_json(doc))
    oxum = f"{sum(p.stat().st_size for p in payload.values())}.{len(payload)}"
    info = (root / "bag-info.txt").read_text().splitlines()
    (root / "bag-info.txt").write_text("".join(
        (f"Payload-Oxum: {oxum}" if line.startswith("Payload-Oxum:") else line) + "\n"
        for line in info))
    tags = ["bagit.txt", "bag-info.txt", "manifest-sha256.txt", "metadata/statement.intoto.json"]
    tagmanifest = format_sums({t: digest(root / t) for t in tags})
    (root / "tagmanifest-sha256.txt").write_text(tagmanifest)
    signature = root / "tagmanifest-sha256.txt.sig"
    signature.unlink(missing_ok=True)
    if key is not None:
        signature.write_bytes(sign(tagmanifest.encode(), key))


def pack(root: Path, out: Path) -> Path:
    """Tar an unpacked bundle folder again, as a forger would hand it on."""
    import tarfile

    with tarfile.open(out, "w:gz") as tar:
        tar.add(root, arcname=root.name)
    return out
