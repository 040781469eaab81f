"""The hook at the end of a night: bundle, payload, send, record `hook.json`, say it.

It never raises for what the hook did and never changes the night's exit code. hook.json
is written once (exclusive), so a night's hook runs at most once; it never names the URL,
and every string in it and every line told goes through one `Redactor`, so no value of an
environment variable the hook names is written anywhere, whole or in part."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.base.atomic import write_json
from harness.base.errors import HarnessError
from harness.base.hashing import sha256_file
from harness.base.timeutil import utc_now
from harness.config.hook import HookConfig, secret_values
from harness.readers.bundle.export import ExportRefused, export_bundle
from harness.readers.hook.payload import (
    Bundled,
    SummaryUnreadable,
    build_payload,
    payload_bytes,
    read_summary,
)
from harness.readers.hook.redact import Redactor
from harness.readers.hook.send import Sent, post_webhook, run_command
from harness.readers.report.inert import inert

HOOK_FILE = "hook.json"
RESULT_SCHEMA = "harness.night-hook-result/v1"
BUNDLES_DIR = "bundles"  # RUNS_DIR/bundles/<night>.tar.gz: beside the night, not in it
MAX_SUFFIX = 100


@dataclass(frozen=True)
class Night:
    """The night that ended, as the hook is told of it."""

    campaign: str
    night_dir: Path
    runs_dir: Path
    ended: str
    exit_code: int
    cwd: Path  # where the command runs: the campaign's project folder


@dataclass
class Told:
    """What the hook did: lines for stdout (`said`) and for stderr (`failed`)."""

    said: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def _bundles_dir(runs_dir: Path) -> Path:
    """RUNS_DIR/bundles, made if missing; refused when something else stands there."""
    folder = Path(runs_dir) / BUNDLES_DIR
    try:
        folder.mkdir(mode=0o755, exist_ok=True)
        st = os.lstat(folder)
    except OSError as e:
        raise HarnessError(f"cannot make {folder}: {e.strerror or e}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise HarnessError(f"{folder} is not a folder (a symlink?); no bundle written there")
    return folder


def export_night(night_dir: Path, runs_dir: Path) -> Bundled:
    """The night's bundle at RUNS_DIR/bundles/<night>.tar.gz (or <night>-N.tar.gz: a bundle is
    never overwritten), and the sha256 of the file written."""
    try:
        folder = _bundles_dir(runs_dir)
        for n in range(1, MAX_SUFFIX + 1):
            out = folder / (f"{night_dir.name}.tar.gz" if n == 1
                            else f"{night_dir.name}-{n}.tar.gz")
            if os.path.lexists(out):
                continue
            try:
                result = export_bundle([night_dir], out)
            except HarnessError:
                if os.path.lexists(out):  # another writer took the name meanwhile
                    continue
                raise
            return Bundled(str(out), result.sha256 or sha256_file(out))
        return Bundled(error=f"{MAX_SUFFIX} bundles of {night_dir.name} already in {folder}")
    except ExportRefused as e:
        problems = "; ".join(str(p) for p in e.problems[:5])
        return Bundled(error=inert(f"{e.message}: {problems}", 1000))
    except HarnessError as e:
        return Bundled(error=inert(e.message, 1000))
    except OSError as e:
        return Bundled(error=inert(f"cannot write the bundle: {e.strerror or e}", 1000))


def _webhook(hook: HookConfig, body: bytes, environ: Mapping[str, str]) -> Sent:
    """The POST, its URL and headers read from the environment now."""
    missing = [n for n in (hook.webhook_env, *hook.headers_env.values())
               if n and not environ.get(n)]
    if missing:
        return Sent("webhook", "webhook", False, None, 0.0,
                    f"the environment variable {', '.join(missing)} is not set; nothing "
                    "was sent")
    headers = {h: environ[n] for h, n in hook.headers_env.items()}
    return post_webhook(environ[hook.webhook_env], headers, body, timeout=hook.timeout)


def _send(hook: HookConfig, night: Night, body: bytes, environ: Mapping[str, str],
          redactor: Redactor) -> list[Sent]:
    sent = []
    if hook.command is not None:
        env = {**environ, "HARNESS_NIGHT_DIR": str(night.night_dir)}
        sent.append(run_command(hook.command, body, timeout=hook.timeout, cwd=night.cwd,
                                env=env, redactor=redactor))
    if hook.webhook_env is not None:
        sent.append(_webhook(hook, body, environ))
    return sent


def _record(night: Night, document: dict, told: Told, redactor: Redactor) -> None:
    try:
        write_json(night.night_dir / HOOK_FILE, redactor.clean_tree(document),
                   exclusive=True)
    except OSError as e:
        told.failed.append(f"hook: cannot write {night.night_dir / HOOK_FILE}: "
                           f"{e.strerror or e}")


def after_night(hook: HookConfig, night: Night, environ: Mapping[str, str]) -> Told:
    """Bundle (when asked), build the payload, send it each way, record hook.json. Whatever
    goes wrong is told, never raised: the night is over and its exit code is set."""
    told = Told()
    redactor = Redactor.of(secret_values(hook, environ))
    try:
        _after_night(hook, night, environ, told, redactor)
    except Exception as e:  # a fault of ours: said by its kind only (no text may hold a secret)
        told.failed.append(f"hook: failed: {type(e).__name__} in the harness's hook")
    return Told([redactor.clean(line) for line in told.said],
                [redactor.clean(line) for line in told.failed])


def _after_night(hook: HookConfig, night: Night, environ: Mapping[str, str], told: Told,
                 redactor: Redactor) -> Told:
    if os.path.lexists(night.night_dir / HOOK_FILE):
        told.said.append(f"hook: already ran for this night ({night.night_dir / HOOK_FILE})")
        return told
    bundle = export_night(night.night_dir, night.runs_dir) if hook.bundle else Bundled()
    if bundle.error:
        told.failed.append(f"hook: no bundle: {bundle.error}")
    elif bundle.path:
        told.said.append(f"hook: bundle {bundle.path} sha256 {bundle.sha256}")
    document = {"schema": RESULT_SCHEMA, "at": utc_now(), "bundle": bundle.record(),
                "bundle_error": bundle.error, "payload_sha256": None, "sent": [],
                "error": None}
    try:
        summary = read_summary(night.night_dir)
    except SummaryUnreadable as e:
        document["error"] = inert(f"not sent: {e.message}", 1000)
        told.failed.append(f"hook: failed: {document['error']}")
        _record(night, document, told, redactor)
        return told
    payload = build_payload(summary, campaign=night.campaign, night=night.night_dir.name,
                            ended=night.ended, exit_code=night.exit_code, bundle=bundle)
    body = payload_bytes(payload)
    document["payload_sha256"] = hashlib.sha256(body).hexdigest()
    sent = _send(hook, night, body, environ, redactor)
    document["sent"] = [s.record() for s in sent]
    for s in sent:
        (told.said if s.ok else told.failed).append(s.line())
    _record(night, document, told, redactor)
    return told
