"""Finding a campaign's nights and reading what each night left behind, for reports.

All of it is evidence: opened read-only, size-capped, and a damaged file becomes a line
in the report rather than a traceback."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from harness.base.errors import InvalidInput
from harness.base.readfile import InputError, read_bounded, read_text_bounded
from harness.base.states import Status
from harness.judge.difference import gate0_differences
from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.naming import JOURNAL_NAME, campaign_of_night_name, run_beside
from harness.measure.runfolder import layout, shape
from harness.measure.runfolder import runjson as run_record
from harness.measure.runfolder.layout import KERNEL_LOG, METRICS, POST_STEPS, RECORD, VERDICT
from harness.measure.runfolder.reruns import fold_index, index_lines, original_id
from harness.readers.report.inert import inert

MAX_JSON_BYTES = 16 * 1024 * 1024
REFERENCE_STEP = "reference"  # the post-step whose verdict holds the reference findings


def campaign_name(campaign_file: Path) -> str:
    """The campaign's `name`, validated by the project's campaign schema."""
    from harness.config.loader import load_model
    from harness.config.schema import Campaign

    campaign, _, faults = load_model(Path(campaign_file), Campaign)
    if campaign is None:
        faults_text = [str(f) for f in faults]
        raise InvalidInput(f"{campaign_file}: not a valid campaign", faults=faults_text)
    return campaign.name


def read_json(path: Path | str) -> tuple[Any, str | None]:
    """(document, None) or (None, a one-line problem). Never raises, never blocks: a FIFO,
    a symlink, an oversized file, broken or too deeply nested JSON are each a problem."""
    name = os.path.basename(path)
    if not os.path.lexists(path):
        return None, f"{name} missing"
    try:
        return json.loads(read_bounded(path, MAX_JSON_BYTES, what=name)), None
    except InputError as e:
        return None, f"{name} unreadable: {e.message}"
    except RecursionError:
        return None, f"{name} unreadable: nested too deeply"
    except ValueError as e:  # not JSON, not UTF-8, an integer past Python's digit limit
        return None, f"{name} unreadable: {e}"


def read_run(run_dir: Path | str, *, trend: bool = False) -> tuple[dict | None, str | None]:
    """(run.json as the one reader sees it, for display; None) or (None, a problem). For a
    `trend`, the file as read once it has a run record's shape: no typed record, as no trend
    shows reasons."""
    if not os.path.lexists(os.path.join(run_dir, RECORD)):
        return None, f"{RECORD} missing"
    try:
        if not trend:
            return run_record.read(run_dir).view(), None
        doc = run_record.load(run_dir)
        return (None, f"{RECORD} is not a run record") if shape.problems(doc) else (doc, None)
    except InvalidInput as e:
        return None, f"{RECORD} unreadable: {e.message}"


def load_run(run_dir: Path | None, row: dict | None = None, *, trend: bool = False) -> dict:
    """One record for the summary: the journal row, run.json, metrics.json, problems; for a
    `trend` (an earlier night's run) no reference findings and no Gate-0 values, which only
    the night reported shows."""
    record: dict[str, Any] = {"row": row, "run": None, "metrics": None, "problems": [],
                              "reference": None, "path": None, "gate0": None}
    if run_dir is None:
        if row and row.get("run_dir"):
            record["problems"].append(f"run folder {row['run_dir']} not found")
        return record
    # plain strings, not Paths: a year of nights reads ~7,000 run folders through here
    record["path"] = base = os.path.abspath(run_dir)
    if not trend:
        verdict, _ = read_json(os.path.join(base, POST_STEPS, REFERENCE_STEP, VERDICT))
        record["reference"] = verdict if isinstance(verdict, dict) else None
    run, problem = read_run(base, trend=trend)
    if run is not None:
        record["run"] = run
        if run.get("status") == Status.REFUSED and not trend:  # its Gate-0 values go inline
            record["gate0"] = gate0_differences(Path(base))
    elif problem:
        record["problems"].append(problem)
    metrics = os.path.join(base, METRICS)
    doc, problem = read_json(metrics)
    if isinstance(doc, dict):
        record["metrics"] = doc
    elif problem and os.path.exists(metrics):
        record["problems"].append(problem)
    elif doc is not None:
        record["problems"].append(f"{METRICS} is not a JSON object")
    return record


def with_night_evidence(records: list[dict]) -> list[dict]:
    """The night's records, each with what only the night reported shows (not the nights
    a trend reads, so a year of history reads none of it): its run's sealed `regression`
    addendum (None when it has none, or it does not verify), its telemetry as plot series
    and the kernel log's fault lines."""
    from harness.readers.report.runplots import read_series  # only a report of one night

    for record in records:
        path = record.get("path")
        record["regression"] = None
        # read only where there are addenda: their reader's import pulls in the Docker SDK
        if path and os.path.isdir(os.path.join(path, layout.ADDENDA)):
            from harness.judge.regressionfile import read_sealed

            record["regression"] = read_sealed(Path(path))
        record["telemetry"] = read_series(path) if path else {}
        record["kernel"] = kernel_excerpt(path) if path else []
    return records


def kernel_excerpt(run_dir: str) -> list[dict]:
    """The faults the run's kept kernel log shows ({"rule", "count", "lines"}, the lines
    inert text), found again by the judge's own rules from the sealed kernel.log: what a
    reader sees is what refused the run."""
    from harness.judge.kernellog import findings
    from harness.measure import kmsg

    try:
        text = read_text_bounded(os.path.join(run_dir, KERNEL_LOG), kmsg.MAX_BYTES,
                                 what="kernel log")
    except InputError:
        return []  # none kept (nothing in the window, or not readable): run.json says which
    found = findings([r for line in text.splitlines() if (r := kmsg.record(line))])
    return [{"rule": f.rule, "count": f.count, "lines": [inert(x, 300) for x in f.lines]}
            for f in found]


def rerun_links(runs_dir: Path) -> dict[str, str]:
    """rerun run id -> original run id, from RUNS_DIR/reruns.jsonl (bounded; {} when
    missing or unreadable): ties a rerun to its original where no journal row does."""
    folded = fold_index(index_lines(runs_dir)).items()
    return {rid: orig for rid, entry in folded if (orig := original_id(entry)) is not None}


def load_night(night_dir: Path, *, trend: bool = False) -> tuple[dict, list[dict]]:
    """The night's identity and its run records, from its journal or, lacking one, its
    folders; `trend`: as `load_run` reads an earlier night's runs."""
    night_dir = Path(night_dir)
    if not night_dir.is_dir():
        raise InvalidInput(f"{night_dir} is not a folder")
    info: dict[str, Any] = {"name": night_dir.name, "dir": str(night_dir)}
    journal_path = night_dir / JOURNAL_NAME
    if os.path.lexists(journal_path):
        mode = journal_path.lstat().st_mode
        if not stat.S_ISREG(mode):  # a FIFO would hang SQLite's open, a symlink lead anywhere
            raise InvalidInput(f"{journal_path}: the journal is not a regular file")
        with Journal.open(journal_path, readonly=True) as journal:
            night = journal.night()
            rows = [r.as_dict() for r in journal.rows()]
        info.update(campaign=night.campaign, campaign_file=night.campaign_file,
                    seal=night.seal, created=night.created, deadline=night.deadline)
        records = [
            load_run(run_beside(night_dir, r["run_dir"])
                     if isinstance(r["run_dir"], str) and r["run_dir"] else None, r, trend=trend)
            for r in rows
        ]
        return info, records
    run_dirs = sorted(p for p in night_dir.iterdir() if (p / RECORD).is_file())
    if not run_dirs:
        raise InvalidInput(f"{night_dir} holds no {JOURNAL_NAME} and no run folders")
    info["campaign"] = campaign_of_night_name(night_dir.name)
    return info, [load_run(p, trend=trend) for p in run_dirs]
