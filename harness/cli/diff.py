"""`harness diff RUN_A RUN_B [--json]`: what differs between two runs.

The comparison is `harness.judge.diff` (pure); this module prints it. Every value comes from a
run folder, so each one goes out through `inert` (one line, controls escaped, bounded);
the --json document is written with ensure_ascii, so no control character reaches a
terminal either.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from harness.judge.diff import diff_runs
from harness.readers.report.inert import inert

VALUE_CHARS = 300
MAX_ITEMS = 20


def _v(value: Any) -> str:
    return "—" if value is None else inert(value, VALUE_CHARS)


def _capped(lines: list[str]) -> list[str]:
    if len(lines) <= MAX_ITEMS:
        return lines
    return [*lines[:MAX_ITEMS], f"    … and {len(lines) - MAX_ITEMS} more"]


def _pair(name: str, t: dict) -> str:
    if t["same"] is None:
        return f"{name}: not compared (a: {_v(t['a'])}; b: {_v(t['b'])})"
    if t["same"]:
        return f"{name}: same {_v(t['a'])}"
    return f"{name}: {_v(t['a'])} -> {_v(t['b'])}"


def _seal(t: dict) -> list[str]:
    head = _pair("seal", t)
    files = t.get("files")
    if files is None:
        return [head, f"    seal files not compared: {_v(t.get('note'))}"]
    lines = [f"    {kind} {_v(name)}" for kind in ("added", "removed", "changed")
             for name in files[kind]]
    if lines:
        head += f" ({len(lines)} files)"
    return [head, *_capped(lines)]


def _mapping(name: str, t: dict) -> list[str]:
    if t["same"] is None:
        return [f"{name}: not compared (a: {_v(t['a'])}; b: {_v(t['b'])})"]
    if t["same"]:
        return [f"{name}: same ({len(t['a'])} entries)"]
    lines = [f"    added {_v(k)}: {_v(v)}" for k, v in t["added"].items()]
    lines += [f"    removed {_v(k)}: {_v(v)}" for k, v in t["removed"].items()]
    lines += [f"    {_v(k)}: {_v(v['a'])} -> {_v(v['b'])}" for k, v in t["changed"].items()]
    return [f"{name}: {len(lines)} differ", *_capped(lines)]


def _approval(t: dict) -> list[str]:
    lines = [_pair("approval", t)]
    for side in ("a", "b"):
        if t[f"commit_differs_{side}"]:
            lines.append(f"    {side} ran at another commit than its approval reviewed")
    return lines


def _values(side: str, found: dict | None) -> str:
    if found is None:
        return f"      {side}: not observed"
    kind = found.get("kind") or "same at both points"
    seen = [f"{point} " + (inert(found[point], VALUE_CHARS) if point in found else "—")
            for point in ("startup", "generation")]  # a JSON null shows as null
    return f"      {side}: {_v(kind)}; {seen[0]}; {seen[1]}"


def _gate0(t: dict) -> list[str]:
    head = _pair("gate0 verdict", t["verdict"])
    where = {f: "differs in a only" for f in t["only_a"]}
    where.update({f: "differs in b only" for f in t["only_b"]})
    where.update({f: "differs in both" for f in t["both"]})
    for other in ("a", "b"):
        if not t["recorded"][other]:
            where = {f: f"{w} ({other} has no Gate-0 verdict)" for f, w in where.items()}
    lines = []
    for item in t["fields"][:MAX_ITEMS]:
        lines.append(f"    {_v(item['field'])}: {where.get(item['field'], 'differs')}")
        lines += [_values("a", item["a"]), _values("b", item["b"])]
    if len(t["fields"]) > MAX_ITEMS:
        lines.append(f"    … and {len(t['fields']) - MAX_ITEMS} more fields")
    if not t["fields"]:
        lines = ["    no field differs in either run"]
    return [head, *lines]


def render(doc: dict) -> list[str]:
    """The diff document as text lines, grouped by topic; every value inert."""
    lines = []
    for side in ("a", "b"):
        h = doc[side]
        lines.append(f"{side}: {_v(h['run_id'])} (attempt {_v(h['attempt'])}, "
                     f"{_v(h['status'])}) {_v(h['dir'])}")
    differs = doc["differs"]
    lines.append(f"differs: {', '.join(differs)}" if differs else "differs: nothing compared")
    t = doc["topics"]
    lines += [_pair("status", t["status"]), _pair("rules", t["rules"]), *_seal(t["seal"]),
              _pair("git", t["git"]), *_approval(t["approval"]), _pair("image", t["image"]),
              *_mapping("model", t["model"]), _pair("engine args", t["engine"]),
              *_gate0(t["gate0"]), *_mapping("metrics", t["metrics"])]
    for side in ("a", "b"):
        lines += [f"note ({side}): {_v(n)}" for n in doc[side]["notes"][:MAX_ITEMS]]
    return lines


@click.command("diff")
@click.argument("run_a", type=click.Path(path_type=Path, file_okay=False))
@click.argument("run_b", type=click.Path(path_type=Path, file_okay=False))
@click.option("--json", "as_json", is_flag=True,
              help="print the diff as one JSON document (schema harness.diff/v1)")
def diff(run_a: Path, run_b: Path, as_json: bool) -> None:
    """What differs between two runs: status and rules, the source seal and its files,
    git commit, the approval each ran under (and whether it reviewed the commit the run
    ran at), image Id, model pins, engine args, each Gate-0 field either run found
    differing (with both runs' start-up and generation values), and metrics.

    Nothing is written: both folders are only read. A topic one run did not record is
    "not compared".

    Exit codes: 0 both runs were read and compared, whether or not they differ (the
    `differs` line, or the JSON's "differs" list, says what does); 2 either folder has no
    readable run.json.
    """
    doc = diff_runs(run_a, run_b)
    if as_json:
        click.echo(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True))
        return
    for line in render(doc):
        click.echo(line)
