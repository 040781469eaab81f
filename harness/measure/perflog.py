"""The performance log: one line per figure of every sealed run, per campaign, for months.

`RUNS_DIR/perflog/<campaign>.csv` and `.jsonl`: a convenience derived from sealed runs,
never evidence. Appended in one O_APPEND write under a flock on the CSV itself (no lock
file beside it), so runs sealing at once never interleave; a text cell a spreadsheet would
read as a formula is prefixed with `'`."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from harness.base import flock
from harness.base.atomic import append_bytes
from harness.base.names import is_name
from harness.base.readfile import InputError, read_bounded
from harness.base.shapes import dict_or_empty
from harness.base.timeutil import parse_or_none
from harness.config.references import FIGURE_UNITS, FIGURES, TELEMETRY_UNITS
from harness.instrument.harness_observer.encode import loads as strict_loads
from harness.measure.metrics import METRICS, UNITS
from harness.measure.runfolder import layout
from harness.measure.runfolder import runjson as run_record

PERFLOG_DIR = "perflog"
SCHEMA = "harness.perflog/v1"
COLUMNS = ("sealed", "campaign", "control", "run_id", "attempt", "status", "metric", "value",
           "unit", "lower", "upper", "outside")
MAX_INT = 10**18
MAX_JSON_BYTES = 16 * 1024 * 1024
LOCK_TIMEOUT_S = 60.0
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def number(value: Any) -> float | int | None:
    """A finite number of sane size, or None (never NaN, Infinity, a bool or 10**400)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int):
        return value if abs(value) <= MAX_INT else None
    return value if math.isfinite(value) else None


def _seconds(start: Any, end: Any) -> float | None:
    a, b = parse_or_none(start), parse_or_none(end)
    return round((b - a).total_seconds(), 3) if a and b else None


def figures(run: Mapping[str, Any], metrics_doc: Mapping[str, Any] | None) -> dict:
    """Every figure of a sealed run: the one definition the report, log and CSV report share."""
    times, lock, outcome = dict_or_empty(run.get("times")), dict_or_empty(run.get("lock")), \
        dict_or_empty(run.get("outcome"))
    doc = dict_or_empty(metrics_doc)
    metrics = dict_or_empty(doc.get("metrics", doc))
    hold = number(lock.get("hold_s"))
    found = {
        "duration_s": _seconds(times.get("started"), times.get("ended")),
        "lock_wait_s": number(lock.get("wait_s")),
        "lock_hold_s": hold if hold is not None else _seconds(lock.get("acquired"),
                                                              lock.get("released")),
        "exit_code": number(outcome.get("exit_code")),
    }
    vllm = {m: number(metrics.get(m)) for m in METRICS}
    return {**found, **vllm,
            **telemetry_figures(dict_or_empty(run.get("telemetry")), vllm["generated_tokens"])}


def telemetry_figures(block: Mapping[str, Any], tokens: float | None = None) -> dict:
    """The run's telemetry figures; None where not sampled (energy per token: no tokens)."""
    container = dict_or_empty(dict_or_empty(block.get("figures")).get("container"))
    peak = dict_or_empty(container.get("memory_peak_bytes")).get("peak")
    energy = number(block.get("energy_j"))
    return {"energy_j": energy,
            "energy_per_token_j": round(energy / tokens, 6) if energy is not None
            and tokens is not None and tokens > 0 else None,
            "memory_peak_bytes": number(peak),
            "cpu_pct_mean": number(block.get("cpu_pct_mean"))}


def unit(metric: str) -> str:
    return FIGURE_UNITS.get(metric) or TELEMETRY_UNITS.get(metric) or UNITS.get(metric, "")


def rows(entry: Mapping[str, Any]) -> list[dict]:
    """The log's lines for one run: the figures every run has always, vLLM's only with a value."""
    findings = dict_or_empty(entry.get("findings"))
    out = []
    for metric, value in dict_or_empty(entry.get("figures")).items():
        if value is None and metric not in FIGURES:
            continue
        f = dict_or_empty(findings.get(metric))
        out.append({
            "sealed": entry.get("sealed"), "campaign": entry.get("campaign"),
            "control": entry.get("control"), "run_id": entry.get("run_id"),
            "attempt": entry.get("attempt"), "status": entry.get("status"), "metric": metric,
            "value": number(value), "unit": unit(metric), "lower": number(f.get("lower")),
            "upper": number(f.get("upper")),
            "outside": f.get("outside") if isinstance(f.get("outside"), bool) else None,
        })
    return out


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value) if isinstance(value, float) else str(value)
    text = str(value)
    return "'" + text if text.startswith(_FORMULA) else text


def csv_text(lines: Iterable[Mapping[str, Any]], header: bool = True) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    if header:
        writer.writerow(COLUMNS)
    for line in lines:
        writer.writerow([_cell(line.get(c)) for c in COLUMNS])
    return buf.getvalue()


def jsonl_text(lines: Iterable[Mapping[str, Any]]) -> str:
    return "".join(json.dumps({"schema": SCHEMA, **{c: line.get(c) for c in COLUMNS}},
                              ensure_ascii=True, allow_nan=False, sort_keys=True) + "\n"
                   for line in lines)


def file_stem(campaign: Any) -> str:
    """The log's file name: the campaign's name when plain, else a digest of it."""
    text = str(campaign)
    if is_name(text):  # one path component, never "." or ".."
        return text
    return "campaign-" + hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()[:16]


def append(runs_dir: Path, campaign: Any, lines: list[dict]) -> Path:
    """Append `lines` to RUNS_DIR/perflog/<campaign>.csv and .jsonl; returns the CSV's path."""
    folder = Path(runs_dir) / PERFLOG_DIR
    folder.mkdir(exist_ok=True)
    if folder.is_symlink() or not folder.is_dir():
        raise OSError(f"{folder} is not a folder")
    stem = file_stem(campaign)
    with flock.exclusive(folder / f"{stem}.csv", "performance log", timeout=LOCK_TIMEOUT_S):
        append_bytes(folder / f"{stem}.csv", csv_text(lines, header=False).encode(),
                     header=(",".join(COLUMNS) + "\n").encode())
        append_bytes(folder / f"{stem}.jsonl", jsonl_text(lines).encode())
    return folder / f"{stem}.csv"


def read_doc(path: Path) -> Any:
    """A JSON document of the run folder, bounded and strict; None when absent or broken."""
    try:
        return strict_loads(read_bounded(path, MAX_JSON_BYTES, path.name).decode("utf-8"))
    except (InputError, ValueError):
        return None


def findings_of(verdict: Any) -> dict[str, dict]:
    """The `reference` post-step's findings by figure name ({} without a valid list)."""
    found = dict_or_empty(verdict).get("findings")
    return {f["metric"]: f for f in found if isinstance(f, dict) and isinstance(
        f.get("metric"), str)} if isinstance(found, list) else {}


def sealed_entry(run_dir: Path) -> dict:
    """What the log keeps of a sealed run folder (harness.pipeline.finish calls this)."""
    run = run_record.read(run_dir).view()
    verdict = read_doc(run_dir / layout.POST_STEPS / "reference" / layout.VERDICT)
    return {"sealed": dict_or_empty(run.get("times")).get("sealed"),
            "campaign": dict_or_empty(run.get("campaign")).get("name"),
            "control": dict_or_empty(run.get("control")).get("name"), "run_id": run.get("run_id"),
            "attempt": run.get("attempt"), "status": run.get("status"),
            "figures": figures(run, read_doc(run_dir / layout.METRICS)),
            "findings": findings_of(verdict)}


def append_sealed(run_dir: Path) -> Path:
    """Append a just-sealed run's lines to its campaign's log beside the run folders."""
    entry = sealed_entry(Path(run_dir))
    return append(Path(run_dir).parent, entry["campaign"], rows(entry))
