"""Refinalize: Gate 0 again over a sealed run folder, into an addendum beside it.

A re-judgement (a newer contract, `--all-fields`) must not change what was sealed, so it
goes into an addendum (`harness.judge.finalize.addendum`) and the run's recorded status
stands. It judges only what a seal vouches for: a folder that was never sealed
(`REFINALIZE-UNSEALED`) or fails `verify` (`REFINALIZE-NOT-INTACT`) is refused before
anything is read or written, and everything it judges is read as the bytes the seal
vouches for (`observed.SealedReader`). The check, the reading, the judging and the
writing all happen under the run's one addendum lock, so what is judged is what was
verified, and two refinalizes of one run take turns.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.base.atomic import dumps_json
from harness.base.catalogue import REFINALIZE_NOT_INTACT, REFINALIZE_UNSEALED
from harness.base.errors import OK, REFUSED, InvalidInput
from harness.base.states import Status, Verdict
from harness.base.timeutil import iso
from harness.judge.finalize.addendum import addendum_lock, write_under_lock
from harness.judge.finalize.contract import rejudge_contract
from harness.judge.finalize.observed import SealedReader, judge_run
from harness.measure.runfolder.layout import RECORD, VERDICT, post_step_file
from harness.measure.runfolder.sealed import require_sealed


def require_intact(run_dir: Path) -> None:
    """Refuse a folder no seal vouches for: never sealed, or failing `verify` (the one
    verified reader's check, with refinalize's own rules)."""
    require_sealed(run_dir, (REFINALIZE_UNSEALED, "refinalize judges only sealed runs"),
                   (REFINALIZE_NOT_INTACT,
                    "refinalize judges only intact runs, nothing was written"))


def refinalize(run_dir: Path, now: datetime, contract: list[str] | str | None = None,
               pins: dict[str, Any] | None = None) -> tuple[dict[str, Any], Path]:
    """Re-judge a sealed, intact run into a new addendum. The run's own status stands.
    `contract`: a list or `all`; None: as its gate0 verdict was judged (rejudge_contract)."""
    run_dir = Path(os.path.realpath(run_dir))  # the operator's path; nothing inside
    if not run_dir.is_dir():
        raise InvalidInput(f"{run_dir} is not a run folder with a readable {RECORD}")
    with addendum_lock(run_dir):
        require_intact(run_dir)  # under the lock: what is judged is what was verified
        sealed = SealedReader(run_dir)  # ...and read only as the bytes the seal vouches for
        run = sealed.record()
        if run is None:
            raise InvalidInput(f"{run_dir} is not a run folder with a readable {RECORD}")
        previous = sealed.json(post_step_file("gate0", VERDICT))
        verdict = judge_run(run_dir, rejudge_contract(contract, previous), pins, sealed)
        record = {**verdict, "refinalize": {
            "run_id": run.run_id, "time": iso(now),
            "original_status": run.status,
            "original_gate0": None if previous is None else previous.get("verdict"),
            "note": "a new judgement beside the old; the run's recorded status stands",
        }}
        folder = write_under_lock(run_dir, "refinalize",
                                  {VERDICT: dumps_json(record).encode()}, now)
    return record, folder


def standing(record: dict[str, Any]) -> int:
    """Exit code of a refinalize: 0 only when the run was accepted and still is."""
    accepted = record["refinalize"]["original_status"] == Status.ACCEPTED
    return OK if accepted and record["verdict"] == Verdict.ACCEPTED else REFUSED
