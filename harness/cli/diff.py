"""`harness diff`: prints `harness.judge.difference`'s comparison of two runs.

Every value comes from a run folder, so each goes out through `inert`; colour wraps only
text already made inert, and --json is ensure_ascii, so no control character reaches a
terminal.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from harness.base.plural import counted
from harness.base.terminal import isatty
from harness.cli.params import RUN
from harness.judge.difference import SCHEMA, diff_runs, exit_status, mount_words
from harness.readers.report.inert import inert

VALUE_CHARS = 300
MAX_ITEMS = 20
HUNK_CHARS = 1000
SHORT_COMMIT = 12
SHOWN_PATHS = 5

# What a styled line is: red removed, green added, bold a file header, cyan a hunk header.
STYLES = {"removed": {"fg": "red"}, "added": {"fg": "green"}, "header": {"bold": True},
          "hunk": {"fg": "cyan"}}
Line = tuple[str, str | None]  # (inert text, a STYLES key or None)


def _v(value: Any) -> str:
    return "—" if value is None else inert(value, VALUE_CHARS)


def _plain(lines: list[str]) -> list[Line]:
    return [(line, None) for line in lines]


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
        head += f" ({counted(len(lines), 'file')})"
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


def _mounts(t: dict) -> list[str]:
    """`mounts: same (/opt/venv)`, or a head line and one per mount differing or unknown."""
    rows = t["mounts"]
    targets = ", ".join(_v(r["target"]) for r in rows[:MAX_ITEMS])
    if t["same"] is True:
        return [f"mounts: same ({targets})" if rows else
                "mounts: none outside the seal in either run"]
    odd = [r for r in rows if r["same"] is not True]
    head = (f"mounts: {len([r for r in odd if r['same'] is False])} of {len(rows)} differ"
            if t["same"] is False else "mounts: not known, never the same")
    lines = [f"    {inert(mount_words(r), VALUE_CHARS)}" for r in odd]
    if not rows and t.get("note"):
        lines.append(f"    {_v(t['note'])}")
    return [head, *_capped(lines)]


def _approval(t: dict) -> list[str]:
    lines = [_pair("approval", t)]
    for side in ("a", "b"):
        if t[f"commit_differs_{side}"]:
            lines.append(f"    {side} ran at another commit than its approval reviewed")
    return lines


# ---- git in words -----------------------------------------------------------------------------

def _commit(value: Any) -> str:
    """A commit as `git log --abbrev` shows it (the JSON document keeps it whole)."""
    return inert(value[:SHORT_COMMIT], SHORT_COMMIT) if isinstance(value, str) else "no commit"


def git_state(p: Mapping[str, Any]) -> str:
    """`clean`, `dirty (a, b, …)` or `unknown (why)` of one run's provenance, in words."""
    dirty = p.get("dirty")
    if dirty is False:
        return "clean"
    if dirty is True:
        changed = [x for x in p.get("changed") or [] if isinstance(x, str)]
        names = ", ".join(inert(x, 120) for x in changed[:SHOWN_PATHS])
        more = ", …" if len(changed) > SHOWN_PATHS else ""
        return f"dirty ({names}{more})" if changed else "dirty"
    error = p.get("error")
    return f"unknown ({inert(error, 200)})" if isinstance(error, str) else "unknown"


def _at(p: Mapping[str, Any]) -> str:
    """`1cf90c2237b5 clean`; the state alone when git named no commit (not a work tree)."""
    commit = p.get("commit")
    return f"{_commit(commit)} {git_state(p)}" if isinstance(commit, str) else git_state(p)


def git_words(t: dict) -> str:
    """The git topic as one line: `git: clean -> dirty (controls/x.yaml) at 1cf90c2237b5`,
    `git: 1cf90c2237b5 -> 9d1e0a6b4c2f, both clean`, `git: same, 1cf90c2237b5 clean`."""
    a, b = t.get("a"), t.get("b")
    if t["same"] is None:
        def said(p: Any) -> str:
            return _at(p) if isinstance(p, dict) else "not recorded"
        return f"git: not compared (a: {said(a)}; b: {said(b)})"
    ca, cb, sa, sb = _commit(a.get("commit")), _commit(b.get("commit")), git_state(a), \
        git_state(b)
    if t["same"]:
        return f"git: same, {_at(a)}"
    if ca != cb or a.get("commit") != b.get("commit"):
        return f"git: {ca} -> {cb}, " + (f"both {sa}" if sa == sb else f"{sa} -> {sb}")
    if sa == sb:
        return f"git: {sa} at {ca} (what git said differs)"
    return f"git: {sa} -> {sb} at {ca}"


# ---- the kept inputs, the docker argv, the environment ---------------------------------------

def hunk_style(line: str) -> str | None:
    """Pure: how a unified diff line is coloured (by its first character, as git does)."""
    if line.startswith(("--- ", "+++ ")):
        return "header"
    if line.startswith("@@"):
        return "hunk"
    return {"-": "removed", "+": "added"}.get(line[:1])


def _inputs(t: dict) -> list[Line]:
    files = t["files"]
    words = {True: "same", False: "differs", None: "not compared"}
    head = ", ".join(f"{name}.yaml {words[f['same']]}" for name, f in files.items())
    lines: list[Line] = [(f"inputs: {head}", None)]
    for name, f in files.items():
        if f["same"] is None or f.get("note"):
            lines.append((f"    {name}.yaml: {_v(f.get('note'))}", None))
        lines += [(f"    {inert(x, HUNK_CHARS)}", hunk_style(x)) for x in f["hunk"]]
        if f["cut"]:
            lines.append((f"    … and {f['cut']} more diff lines", None))
    return lines


def _changes(removed: list[str], added: list[str]) -> list[Line]:
    out = [(f"    - {_v(x)}", "removed") for x in removed[:MAX_ITEMS]]
    out += [(f"    + {_v(x)}", "added") for x in added[:MAX_ITEMS]]
    more = max(0, len(removed) - MAX_ITEMS) + max(0, len(added) - MAX_ITEMS)
    return [*out, (f"    … and {more} more", None)] if more else out


def _docker(t: dict) -> list[Line]:
    elided = ", ".join(t["elided"])
    if t["same"] is None:
        missing = " and ".join(s for s in ("a", "b") if t[s] is None)
        return [(f"docker argv: not compared ({missing}: no docker argv recorded)", None)]
    if t["same"]:
        return [(f"docker argv: same (elided: {elided})", None)]
    n = len(t["removed"]) + len(t["added"])
    return [(f"docker argv: {n} lines differ (elided: {elided})", None),
            *_changes(t["removed"], t["added"])]


def _env(t: dict) -> list[Line]:
    apart = ", ".join(t.get("apart") or [])
    if t["same"] is None:
        missing = " and ".join(s for s in ("a", "b") if t[s] is None)
        return [(f"env: not compared ({missing}: no docker argv recorded)", None)]
    if t["same"]:
        return [(f"env: same ({len(t['a'])} variables; {apart}: engine args)", None)]
    removed = [f"--env {k}={v}" for k, v in t["removed"].items()]
    added = [f"--env {k}={v}" for k, v in t["added"].items()]
    removed += [f"--env {k}={v['a']}" for k, v in t["changed"].items()]
    added += [f"--env {k}={v['b']}" for k, v in t["changed"].items()]
    n = len(t["added"]) + len(t["removed"]) + len(t["changed"])
    return [(f"env: {n} differ", None), *_changes(removed, added)]


# ---- Gate 0 -----------------------------------------------------------------------------------

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


# ---- the document -----------------------------------------------------------------------------

# The text's order: the outcome (the why of a refusal, never below a long YAML hunk), then
# the inputs, then figures. The JSON document keeps `judge.difference.TOPICS` order.
SECTIONS = ("status", "rules", "gate0", "seal", "inputs", "git", "approval", "image", "model",
            "mounts", "engine", "env", "docker", "metrics")


def sections(t: dict) -> dict[str, list[Line]]:
    """Pure: each topic's lines (text, style), by topic name."""
    return {"status": _plain([_pair("status", t["status"])]),
            "rules": _plain([_pair("rules", t["rules"])]),
            "gate0": _plain(_gate0(t["gate0"])), "seal": _plain(_seal(t["seal"])),
            "inputs": _inputs(t["inputs"]), "git": _plain([git_words(t["git"])]),
            "approval": _plain(_approval(t["approval"])),
            "image": _plain([_pair("image", t["image"])]),
            "model": _plain(_mapping("model", t["model"])),
            "mounts": _plain(_mounts(t["mounts"])),
            "engine": _plain([_pair("engine args", t["engine"]) if t["engine"]["a"] is not None
                              or not t["engine"]["same"] else "engine args: none in either run"]),
            "env": _env(t["env"]), "docker": _docker(t["docker"]),
            "metrics": _plain(_mapping("metrics", t["metrics"]))}


def repeat_words(r: Mapping[str, Any], mounts: Mapping[str, Any] | None = None) -> str:
    """Whether b ran what a ran: `plain repeat: ...`, `not a repeat: engine, mounts
    (/opt/venv) changed`, or `repeat: not known (...)`; `mounts` names the mounts."""
    rows = (mounts or {}).get("mounts") or []

    def named(topics: Any, same: bool | None) -> str:
        out = []
        for topic in topics or []:
            targets = [_v(m["target"]) for m in rows if m.get("same") is same]
            out.append(f"{topic} ({', '.join(targets[:SHOWN_PATHS])})" if topic == "mounts"
                       and targets else str(topic))
        return ", ".join(out)

    if r.get("plain") is True:
        return "plain repeat: same seal, inputs, git, image, model, mount contents, " \
               "engine args, env and docker argv"
    if r.get("plain") is False:
        return f"not a repeat: {named(r.get('changed'), False)} changed"
    return f"repeat: not known ({named(r.get('unknown'), None)} not recorded)"


def render_lines(doc: dict) -> list[Line]:
    """The diff document as (text, style) lines, by topic in SECTIONS order; all inert."""
    lines = []
    for side in ("a", "b"):
        h = doc[side]
        lines.append(f"{side}: {_v(h['run_id'])} (attempt {_v(h['attempt'])}, "
                     f"{_v(h['status'])}) {_v(h['dir'])}")
    differs = sorted(doc["differs"], key=lambda x: SECTIONS.index(x) if x in SECTIONS
                     else len(SECTIONS))
    lines.append(f"differs: {', '.join(differs)}" if differs else "differs: nothing")
    lines.append(repeat_words(doc.get("repeat") or {}, doc["topics"].get("mounts")))
    out = _plain(lines)
    by_topic = sections(doc["topics"])
    for name in SECTIONS:
        out += by_topic[name]
    for side in ("a", "b"):
        out += _plain([f"note ({side}): {_v(n)}" for n in doc[side]["notes"][:MAX_ITEMS]])
    return out


def render(doc: dict) -> list[str]:
    """The diff document as text lines, grouped by topic; every value inert."""
    return [text for text, _ in render_lines(doc)]


def colour_wanted(when: str, tty: bool, environ: Mapping[str, str]) -> bool:
    """Pure: colour for `--color WHEN`: `always` yes, `never` no, `auto` only on a terminal
    and only when NO_COLOR is unset or empty (no-color.org)."""
    if when == "always":
        return True
    return when == "auto" and tty and not environ.get("NO_COLOR")


def painted(line: Line, colour: bool) -> str:
    """Pure: one line as printed: its style's ANSI codes around its inert text, or bare."""
    text, style = line
    return click.style(text, **STYLES[style]) if colour and style in STYLES else text


@click.command("diff")
@click.argument("run_a", type=RUN)
@click.argument("run_b", type=RUN)
@click.option("--json", "as_json", is_flag=True,
              help=f"print the diff as one JSON document (schema {SCHEMA})")
@click.option("--exit-code", "exit_code", is_flag=True,
              help="exit 1 when the runs differ in anything compared, 0 when they do not "
                   "(as `git diff --exit-code`)")
@click.option("--color", "--colour", "color", type=click.Choice(["auto", "always", "never"]),
              default="auto", show_default=True,
              help="colour removed lines red and added lines green: on a terminal unless "
                   "NO_COLOR is set (auto), always, or never")
def diff(run_a: Path, run_b: Path, as_json: bool, exit_code: bool, color: str) -> None:
    """What differs between two runs: the outcome first, then the inputs, then metrics.

    Outcome: status, rules, each Gate-0 field either run found differing. Inputs: the
    source seal and its files, each run's own copy of the YAML as a unified diff, git
    state, the approval, image Id, model pins, what each mount outside the seal held,
    engine args, the environment and docker argv (one launch's own tokens elided). A line
    says whether b is a plain repeat of a. A topic one run did not record is "not
    compared"; a mount not known is never the same. Reads only. Each run may be a folder,
    a run id, a unique prefix, `latest` or `@-1` (`harness ls`). More: README.md.

    Exit codes: 0 both read and compared (with --exit-code: 1 when they differ); 1 either
    is not sealed or fails verification; 2 either has no readable run.json.
    """
    doc = diff_runs(run_a, run_b)
    if as_json:
        click.echo(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True))
    else:
        colour = colour_wanted(color, isatty(sys.stdout), os.environ)
        for line in render_lines(doc):
            click.echo(painted(line, colour), color=colour)
    raise click.exceptions.Exit(exit_status(doc, exit_code))
