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
        "campaign": {"name": "kv-warmup", "file": "campaigns/kv.yaml", "row": str(row)},
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
    from harness.readers.bundle.safe_extract import unpack

    dest.mkdir(parents=True, exist_ok=True)
    root = unpack(archive, dest).root
    for path in root.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root


def rebag(root: Path, key: Path | None = None, *, statement: bool = True) -> None:
    """What a forger holding the signing key (or facing an unsigned bundle) can do after
    changing the payload: make every bag-level record agree with it again (manifest,
    statement subjects, Payload-Oxum, tag manifest) and sign it. Only the runs' own seals
    and the bundle's rules are left to notice."""
    from harness.base.atomic import dumps_json
    from harness.measure.runfolder.manifest import render as format_sums
    from harness.readers.bundle.bag import sign

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
    tags = ["bagit.txt", "bag-info.txt", "manifest-sha256.txt", "metadata/statement.intoto.json",
            *[t for t in ("index.html", "README.txt") if (root / t).is_file()]]
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


COMMIT = "c" * 40  # the reviewed commit the approvals below name
SEAL = "sha256:" + "b" * 64  # make_run's seal


def make_approved_run(parent: Path, run_id: str, reviewer_key: Path | None, *,
                      campaign: str = "camp", row: int = 0) -> Path:
    """A sealed run folder made under an approval, in `parent/project/gpu-runs/`, with the
    project its run.json names: `approvals/<campaign>-<seal hex 12>.json` (and its `.sig`,
    `harness approve --sign-key`'s signature in harness-approval@v1, when `reviewer_key` is
    given) and the passed gate record the approval rests on."""
    import inspect

    from harness.judge.gaterecord.gatesjson import digest as record_digest
    from harness.probe.sshsig import sign as sign_approval
    from tests.approval_helpers import gate_record

    project = parent / "project"
    record = project / "gpu-runs" / "gates" / f"{campaign}-g1"
    if not record.exists():
        commit = {"commit": COMMIT} if "commit" in inspect.signature(gate_record).parameters \
            else {}
        gate_record(record, campaign, SEAL, **commit)
    name = f"{campaign}-{SEAL[7:19]}.json"
    approval = project / "approvals" / name
    if not approval.exists():
        doc = {"schema": "harness.approval/v1",
               "campaign": {"name": campaign, "file": f"campaigns/{campaign}.yaml"},
               "source_seal": SEAL, "images": {"rehearsal:1": "sha256:" + "a" * 64},
               "models": {}, "git": {"commit": COMMIT, "dirty": False},
               "gates": {"record": f"gpu-runs/gates/{record.name}",
                         "digest": record_digest(record), "campaign": campaign,
                         "source_seal": SEAL, "passed": True},
               "reviewer": "rev@example", "approved_at": "2026-11-30T12:00:00Z"}
        approval.parent.mkdir(parents=True, exist_ok=True)
        approval.write_text(json.dumps(doc, indent=2))
        if reviewer_key is not None:
            sig = sign_approval(approval.read_bytes(), reviewer_key)
            approval.with_name(name + ".sig").write_bytes(sig)
    run = make_run(project / "gpu-runs", run_id, row=row)
    record_json = json.loads((run / "run.json").read_text())
    record_json["campaign"] = {"name": campaign, "row": str(row),
                               "file": str(project / "campaigns" / f"{campaign}.yaml")}
    record_json["approval"] = {  # in the order the run-time check writes it
        "file": f"approvals/{name}",
        "digest": "sha256:" + hashlib.sha256(approval.read_bytes()).hexdigest(),
        "seal": SEAL, "commit": COMMIT}
    (run / "run.json").write_text(json.dumps(record_json, indent=2))
    seal(run)
    return run


def retag(root: Path, key: Path | None = None, *, claim: bool | None = None) -> None:
    """What a forger does after changing tag files (an approval's `.sig`, say): a tag
    manifest over every tag file as it now is, signed with `key` (or left unsigned, its
    `.sig` removed). `claim`: keep (None), add (True) or drop (False) bag-info's
    `Bag-Signature` line, the bag's own word that it was signed."""
    from harness.measure.runfolder.manifest import render as format_sums
    from harness.readers.bundle.bag import sign

    info = root / "bag-info.txt"
    lines = [line for line in info.read_text().splitlines()
             if claim is None or not line.startswith("Bag-Signature:")]
    if claim:
        lines.append("Bag-Signature: tagmanifest-sha256.txt.sig harness-evidence")
    info.write_text("".join(f"{line}\n" for line in lines))
    signature = root / "tagmanifest-sha256.txt.sig"
    signature.unlink(missing_ok=True)
    tags = {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*") if p.is_file() and p.parts[len(root.parts)] != "data"
            and p.name != "tagmanifest-sha256.txt"}
    tagmanifest = format_sums(tags)
    (root / "tagmanifest-sha256.txt").write_text(tagmanifest)
    if key is not None:
        signature.write_bytes(sign(tagmanifest.encode(), key))
