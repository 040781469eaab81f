"""Gate 0 over a run folder: read its observations, judge, and (refinalize) add an addendum.

Sealed evidence is never rewritten: a later judgement goes into a new folder
`addenda/<UTCstamp>-<name>/` with its own SHA256SUMS, and the write bit is lent to the run
folder only for the moment it takes to create that folder.
"""

from __future__ import annotations

import contextlib
import json
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.atomic import dumps_json, write_bytes
from harness.errors import EnvironmentFault, InvalidInput
from harness.finalize.documents import DocumentError, read_document
from harness.finalize.rules import VERDICT_SCHEMA, judge
from harness.seal import make_read_only, write_manifest
from harness.timeutil import stamp

OBSERVATIONS = "observations"
STARTUP = "startup.json"
GENERATION = "generation.json"


def refusal(reasons: list[str], contract: list[str] | None) -> dict[str, Any]:
    """A verdict for a run whose observations cannot be compared at all."""
    return {"schema": VERDICT_SCHEMA, "verdict": "refused", "reasons": reasons,
            "refused_by": sorted({r.partition(":")[0] for r in reasons}),
            "differences": [], "compared": 0, "contract": contract}


def read_run(run_dir: Path) -> dict[str, Any] | None:
    """run.json, or None when absent or unreadable (the gate then binds to nothing)."""
    try:
        run = json.loads((run_dir / "run.json").read_bytes())
    except (OSError, ValueError):
        return None
    return run if isinstance(run, dict) else None


def expected_source(run: dict[str, Any] | None) -> dict[str, str]:
    """The seal and image Id the run recorded, which both observations must carry."""
    if run is None:
        return {}
    out = {}
    if isinstance(run.get("seal"), str):
        out["seal"] = run["seal"]
    image = run.get("image")
    if isinstance(image, dict) and isinstance(image.get("id"), str):
        out["image"] = image["id"]
    return out


def recorded_source(run_dir: Path) -> dict[str, str]:
    """What the harness itself recorded as the run's seal and image: run.json once sealed,
    preflight.json while the post-steps run (run.json is written after them)."""
    run = read_run(run_dir)
    if run is not None:
        return expected_source(run)
    try:
        pre = json.loads((Path(run_dir) / "preflight.json").read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(pre, dict):
        return {}
    seal = pre.get("source_seal")
    return expected_source({"seal": seal.get("seal") if isinstance(seal, dict) else None,
                            "image": pre.get("image")})


def judge_run(run_dir: Path, contract: list[str] | None = None,
              pins: dict[str, Any] | None = None) -> dict[str, Any]:
    """Gate-0 verdict for `run_dir`. Missing or unreadable observations refuse."""
    docs = {}
    reasons = []
    for name in (STARTUP, GENERATION):
        path = Path(run_dir) / OBSERVATIONS / name
        if not path.exists():
            reasons.append(f"GATE0-MISSING: {OBSERVATIONS}/{name} was not written")
            continue
        try:
            docs[name] = read_document(path)
        except DocumentError as e:
            reasons += [f"GATE0-UNREADABLE: {fault}" for fault in e.faults]
    if reasons:
        return refusal(reasons, contract)
    return judge(docs[STARTUP], docs[GENERATION], contract=contract, pins=pins,
                 expected_source=recorded_source(Path(run_dir)))


@contextlib.contextmanager
def writable(path: Path) -> Iterator[None]:
    """Lend the owner's write bit to one folder, and take it back whatever happens."""
    mode = stat.S_IMODE(path.stat().st_mode)
    if not mode & stat.S_IWUSR:
        path.chmod(mode | stat.S_IWUSR)
    try:
        yield
    finally:
        path.chmod(mode)


def _new_folder(addenda: Path, base: str) -> Path:
    for n in range(100):
        folder = addenda / (base if n == 0 else f"{base}-{n}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise EnvironmentFault(f"{addenda}: could not create a new addendum folder for {base}")


def write_addendum(run_dir: Path, name: str, files: dict[str, bytes], now: datetime) -> Path:
    """Create `addenda/<stamp>-<name>/` holding `files` and their SHA256SUMS, all read-only."""
    run_dir = Path(run_dir)
    addenda = run_dir / "addenda"
    base = f"{stamp(now)}-{name}"
    try:
        if not addenda.exists():
            with writable(run_dir):
                addenda.mkdir()
                addenda.chmod(stat.S_IMODE(run_dir.stat().st_mode) & ~stat.S_IWUSR | 0o500)
        with writable(addenda):
            folder = _new_folder(addenda, base)
        for filename, data in sorted(files.items()):
            write_bytes(folder / filename, data)  # a new folder: nothing to collide with
        write_manifest(folder)  # the addendum's own SHA256SUMS, the same as a run's
        make_read_only(folder)
    except OSError as e:
        raise EnvironmentFault(f"cannot write the addendum under {addenda}: {e}") from None
    return folder


def refinalize(run_dir: Path, now: datetime, contract: list[str] | None = None,
               pins: dict[str, Any] | None = None) -> tuple[dict[str, Any], Path]:
    """Re-judge a sealed run into a new addendum. The run's own status is never changed."""
    run_dir = Path(run_dir)
    run = read_run(run_dir)
    if not run_dir.is_dir() or run is None:
        raise InvalidInput(f"{run_dir} is not a run folder with a readable run.json")
    previous = read_run_verdict(run_dir)
    if contract is None and previous is not None and isinstance(previous.get("contract"), list):
        contract = previous["contract"]
    verdict = judge_run(run_dir, contract, pins)
    record = {**verdict, "refinalize": {
        "run_id": run.get("run_id"), "time": now.astimezone(UTC).isoformat(),
        "original_status": run.get("status"),
        "original_gate0": None if previous is None else previous.get("verdict"),
        "note": "a new judgement beside the old; the run's recorded status stands",
    }}
    folder = write_addendum(run_dir, "refinalize", {"verdict.json": dumps_json(record).encode()},
                            now)
    return record, folder


def read_run_verdict(run_dir: Path) -> dict[str, Any] | None:
    """The gate0 post-step's original verdict, if the run has one."""
    try:
        verdict = json.loads((run_dir / "post-steps" / "gate0" / "verdict.json").read_bytes())
    except (OSError, ValueError):
        return None
    return verdict if isinstance(verdict, dict) else None


def standing(record: dict[str, Any]) -> int:
    """Exit code of a refinalize: 0 only when the run was accepted and still is."""
    accepted = record["refinalize"]["original_status"] == "accepted"
    return 0 if accepted and record["verdict"] == "accepted" else 1

