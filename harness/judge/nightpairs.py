"""Two nights compared per control (`harness diff NIGHT_A NIGHT_B`): the run each night judged
a control by, and that pair's diff document cut to what a night is judged on (status and
figures); the controls in one night only are named.

Pure: the nights' summary.json entries are hostile, bounded here (names, count)."""

from __future__ import annotations

from typing import Any

from harness.base.shapes import dict_or_empty
from harness.base.states import Status

NIGHT_SCHEMA = "harness.diff-nights/v1"
NIGHT_TOPICS = ("figures", "status")  # what a control's two runs are compared by in two nights
MAX_CONTROLS = 500  # controls compared of one night (a hostile summary may list thousands)
TEXT_CHARS = 4096  # a control name or run folder longer is not one


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= TEXT_CHARS else None


def pick_runs(entries: Any) -> dict[str, dict]:
    """Pure: the run each control of a night is judged by, from summary.json's `runs`: its
    newest accepted run, else its newest run no later attempt superseded, else its newest
    ({control: {"run_id", "status", "run_dir"}}; newest by seal time, then by place in the
    list). Entries naming no control or no folder are skipped; at most MAX_CONTROLS."""
    best: dict[str, tuple[tuple, dict]] = {}
    for i, e in enumerate(entries if isinstance(entries, list) else []):
        e = dict_or_empty(e)
        control, run_dir = _text(e.get("control")), _text(e.get("run_dir")) or _text(
            e.get("path"))
        if control is None or run_dir is None or (
                control not in best and len(best) >= MAX_CONTROLS):
            continue
        rank = (e.get("status") == Status.ACCEPTED, e.get("superseded_by") is None,
                _text(e.get("sealed")) or "", i)
        if control not in best or rank > best[control][0]:
            best[control] = (rank, {"run_id": _text(e.get("run_id")),
                                    "status": _text(e.get("status")), "run_dir": run_dir})
    return {name: picked for name, (_, picked) in sorted(best.items())}


def night_document(a: dict, b: dict, compared: dict[str, dict]) -> dict:
    """Pure: two nights per control. `a`, `b`: {"dir", "runs": `pick_runs`}; `compared`: each
    control in both, the diff document of its two runs or {"error": why not compared}. A
    control `differs` in its status or figures (NIGHT_TOPICS); its inputs are only said."""
    controls = {}
    for name in sorted(set(a["runs"]) & set(b["runs"])):
        doc = compared[name]
        entry = {"a": a["runs"][name], "b": b["runs"][name], "error": doc.get("error")}
        if entry["error"] is None:
            entry.update(a=doc["a"], b=doc["b"], repeat=doc["repeat"],
                         differs=[t for t in doc["differs"] if t in NIGHT_TOPICS],
                         **{t: doc["topics"][t] for t in NIGHT_TOPICS})
        controls[name] = entry
    return {"schema": NIGHT_SCHEMA,
            **{s: {"dir": n["dir"], "controls": sorted(n["runs"])} for s, n in (("a", a),
                                                                               ("b", b))},
            "only_a": sorted(set(a["runs"]) - set(b["runs"])),
            "only_b": sorted(set(b["runs"]) - set(a["runs"])), "controls": controls}


def night_exit_status(doc: dict, exit_code: bool) -> int:
    """Pure: 1 when a control's runs could not be compared (not sealed, failing verification,
    not found), as for two runs; with `exit_code`, 1 too when a control is in one night
    only or its status or figures differ; else 0."""
    entries = doc["controls"].values()
    if any(e["error"] is not None for e in entries):
        return 1
    differ = doc["only_a"] or doc["only_b"] or any(e["differs"] for e in entries)
    return 1 if exit_code and differ else 0
