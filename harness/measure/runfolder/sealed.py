"""The one verified reader of a sealed run: the folder verifies, then run.json is read once
as the bytes its SHA256SUMS vouches for, so an edit after the seal is never taken as fact."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from harness.base.catalogue import RUN_NOT_INTACT, RUN_UNSEALED
from harness.base.errors import Refused
from harness.base.readfile import InputError, read_bounded
from harness.measure.runfolder import manifest, runjson
from harness.measure.runfolder.layout import RECORD, SUMS
from harness.measure.runfolder.runjson import RunRecord

MAX_SHOWN = 10


Rule = tuple[str, str]  # (rule id, what the refusal then says the caller does)
UNSEALED = (RUN_UNSEALED, "nothing in it is vouched for")
NOT_INTACT = (RUN_NOT_INTACT, "it is not the run that was sealed")


def require_sealed(run_dir: Path, unsealed: Rule = UNSEALED,
                   not_intact: Rule = NOT_INTACT) -> None:
    """Refuse a folder no seal vouches for: never sealed, or failing verification."""
    problems = manifest.verify_folder(run_dir)
    if any(p.kind == "no-manifest" for p in problems):
        raise Refused(f"{run_dir} was never sealed (no {SUMS}); {unsealed[1]}",
                      rule=unsealed[0])
    if problems:
        shown = "; ".join(str(p) for p in problems[:MAX_SHOWN])
        more = f"; and {len(problems) - MAX_SHOWN} more" if len(problems) > MAX_SHOWN else ""
        raise Refused(f"{run_dir} fails verification ({len(problems)} problem(s): {shown}"
                      f"{more}); {not_intact[1]}", rule=not_intact[0])


def read_record(run_dir: Path, loads: runjson.Loads = json.loads) -> RunRecord:
    """run.json of a sealed, intact run folder, as sealed, in the strict record shape."""
    run_dir = Path(run_dir)
    if not os.path.isdir(run_dir):
        raise Refused(f"{run_dir} is not a run folder", rule=RUN_UNSEALED)
    require_sealed(run_dir)
    where = f"{run_dir}/{RECORD}"
    try:
        claims = dict(manifest.load(run_dir / SUMS)[0])
        data = read_bounded(run_dir / RECORD, runjson.RECORD_LIMIT, "run record")
    except InputError as e:
        raise Refused(f"{run_dir}: {e.message}", rule=RUN_NOT_INTACT) from None
    if RECORD not in claims or hashlib.sha256(data).hexdigest() != claims[RECORD]:
        raise Refused(f"{where} is not the file its seal vouches for", rule=RUN_NOT_INTACT)
    return runjson.strict(runjson.parse(data, where, loads), where)
