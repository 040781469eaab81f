"""`harness show` on a gate record: gates.json as a few readable lines.

Every value comes from a folder anyone may have edited, so each goes through the caller's
`inert`; the seal is checked and its state shown, never assumed."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.base.errors import InvalidInput
from harness.base.readfile import InputError, read_bounded
from harness.judge.gaterecord.gatesjson import GATE_RECORD, RECORD_LIMIT, parse
from harness.measure.origin import describe
from harness.measure.runfolder.layout import RECORD
from harness.measure.runfolder.manifest import verify_folder

Inert = Callable[..., str]


def is_gate_record(folder: Path) -> bool:
    """A folder holding gates.json and no run.json."""
    return (os.path.lexists(Path(folder) / GATE_RECORD)
            and not os.path.lexists(Path(folder) / RECORD))


def read(folder: Path) -> dict[str, Any]:
    """gates.json, bounded and strict (InvalidInput, exit 2), intact or not."""
    try:
        data = read_bounded(Path(folder) / GATE_RECORD, RECORD_LIMIT, "gate record")
    except InputError as e:
        raise InvalidInput(e.message) from None
    return parse(data, str(Path(folder) / GATE_RECORD))


def _git(git: dict[str, Any], inert: Inert) -> str:
    commit = git.get("commit")
    if "clean" in git:  # v2: the seal's files and the checkout, at one commit throughout
        if git["clean"]:
            return f"{inert(commit, 80)} clean (every sealed byte in that commit)"
        return (f"{inert(commit, 80)} NOT CLEAN ({inert(git['problems_total'], 20)} "
                f"problem(s): {inert('; '.join(git['problems'][:5]), 600)}); no approval "
                "can rest on this record")
    if not isinstance(commit, str):
        return f"unknown ({inert(git.get('error'), 200)})"
    if git.get("dirty"):
        return (f"{inert(commit, 80)} DIRTY ({inert(git.get('changed_total'), 20)} changed: "
                f"{inert(git.get('changed'), 300)})")
    return f"{inert(commit, 80)} clean" if git.get("dirty") is False else inert(commit, 80)


def _gate(g: dict[str, Any], inert: Inert) -> str:
    line = f"  {'PASS' if g['passed'] else 'FAIL'} {inert(g['name'], 64)}  {g['duration_s']:g} s"
    line += f"  exit {inert(g['exit_code'], 20)}"
    counts = g["counts"]
    if isinstance(counts, dict):
        line += "  tests " + inert(counts, 200)
    if g["kill_score"] is not None or g["min_kill_score"] is not None:
        line += f"  kill {inert(g['kill_score'], 20)}% (min {inert(g['min_kill_score'], 20)})"
    if g["why"]:
        line += f"\n       why: {inert(g['why'], 2000)}"
    return line


def render(folder: Path, doc: dict[str, Any], inert: Inert) -> list[str]:
    """Pure but for the seal check: the lines `harness show` prints for a gate record."""
    problems = verify_folder(Path(folder))
    seal = ("intact" if not problems else
            f"NOT INTACT ({len(problems)} problem(s): "
            f"{inert('; '.join(map(str, problems[:5])), 1000)})")
    verdict = "passed" if doc["passed"] else "FAILED"
    return [f"gate record: {inert(str(folder), 1000)}",
            f"  campaign {inert(doc['campaign']['name'], 100)} "
            f"({inert(doc['campaign']['file'], 500)})",
            f"  source seal {inert(doc['source_seal'], 80)}",
            f"  git {_git(doc['git'], inert)}",
            *([f"  made by {inert(describe(doc['harness']), 1000)}"] if "harness" in doc
              else []),
            f"  times {inert(doc['times']['started'], 40)} .. {inert(doc['times']['ended'], 40)}",
            f"  folder seal {seal}",
            f"  {verdict}: {sum(g['passed'] for g in doc['gates'])}/{len(doc['gates'])} gates",
            *(f"  REFUSED {inert(r['rule'], 64)}: {inert(r['detail'], 2000)}"
              for r in doc.get("refusals", [])),
            *(_gate(g, inert) for g in doc["gates"])]


def headline(doc: dict[str, Any], required: list[str]) -> str:
    """Pure: the verdict `harness gates` ends with, before the record's path. A record lacking
    some gates (`--only`) can never carry an approval, so it must not read as "gates passed"."""
    ran = [g["name"] for g in doc["gates"]]
    missing = [name for name in required if name not in ran]
    verdict = "passed" if doc["passed"] else "FAILED"
    if not missing:
        return f"gates {verdict}"
    return (f"partial record ({len(ran)} of {len(ran) + len(missing)} gates): cannot carry "
            f"an approval (not run: {', '.join(missing)}); the gates that ran {verdict}")
