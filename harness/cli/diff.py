"""`harness diff`: prints `harness.judge.difference`'s comparison of two runs.

Every value comes from a run folder, so each goes out through `inert`; colour wraps only
text already made inert, and --json is ensure_ascii, so no control character reaches a
terminal.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from harness.base.errors import HarnessError, InvalidInput
from harness.base.plural import counted
from harness.base.readfile import InputError
from harness.base.terminal import colour_wanted, paint_statuses
from harness.cli.params import REFS_RUNS_DIR, RUN_OR_NIGHT, Named, color_option
from harness.judge.difference import SCHEMA, diff_runs, exit_status, loads, mount_words
from harness.judge.nightpairs import NIGHT_SCHEMA, night_document, night_exit_status, pick_runs
from harness.judge.runfigures import CHANGES
from harness.measure.nightfolder.naming import run_beside
from harness.readers.report.ending import SUMMARY_JSON, summary_bytes
from harness.readers.report.format import MIB, fmt
from harness.readers.report.inert import inert
from harness.readers.report.summary import SCHEMA as SUMMARY_SCHEMA

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


def _capped(lines: list[str], more: str = "more") -> list[str]:
    if len(lines) <= MAX_ITEMS:
        return lines
    return [*lines[:MAX_ITEMS], f"    … and {len(lines) - MAX_ITEMS} {more}"]


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


def _amount(value: Any, unit: str) -> str:
    """A figure in its unit as the report writes it; bytes in MiB."""
    if unit == "B":
        return fmt(value / MIB if isinstance(value, int | float) else None, "MiB")
    return fmt(value, unit)


def _percent(shift: float) -> str:
    pct = 100 * shift
    return f"{pct:+.0f} %" if abs(pct) >= 10 else f"{pct:+.1f} %"


def figure_words(row: Mapping[str, Any]) -> str:
    """`duration_s 1.31 s -> 2.84 s (+117 %, worse)`: one figure of two runs, in the regression
    judge's name and unit; `(not recorded in b)` where one run has none."""
    unit = str(row.get("unit") or "")
    text = f"{inert(row['figure'], 120)} {_amount(row['a'], unit)} -> {_amount(row['b'], unit)}"
    change, shift = row.get("change"), row.get("shift")
    if change in ("only in a", "only in b"):
        return f"{text} (not recorded in {'b' if change == 'only in a' else 'a'})"
    said = [_percent(shift) if isinstance(shift, float) else "from 0" if row["a"] == 0 else "",
            row.get("way") or ""]
    said = [x for x in said if x]
    return f"{text} ({', '.join(said)})" if said else text


def _joined(texts: list[str]) -> str:
    """The first MAX_ITEMS of `texts`, comma-separated, then how many more."""
    shown = ", ".join(texts[:MAX_ITEMS])
    return shown + (f", … and {len(texts) - MAX_ITEMS} more" if len(texts) > MAX_ITEMS else "")


def _names(rows: list[dict]) -> str:
    return _joined([inert(r["figure"], 120) for r in rows])


def _figures(t: dict) -> list[str]:
    """The figures that changed, one a line, then one line each for those within the judge's
    effect floor, the same and those neither run recorded."""
    rows = t.get("figures") or []
    by: dict[str, list[dict]] = {c: [r for r in rows if r["change"] == c] for c in CHANGES}
    floor = f"{100 * t['min_effect']:g} %"
    if not rows or len(by["not recorded"]) == len(rows):
        return ["figures: none recorded in either run"]
    changed = [r for c in CHANGES[:3] for r in by[c]]
    counts = [f"{len(changed)} changed by {floor} or more" if changed else
              f"none changed by {floor} or more"]
    counts += [f"{len(by[c])} {'within ' + floor if c == 'within' else c}"
               for c in CHANGES[3:] if by[c]]
    lines = _capped([f"    {figure_words(r)}" for r in changed], "more changed")
    if by["within"]:
        small = [f"{inert(r['figure'], 120)} {_percent(r['shift'])}" for r in by["within"]]
        lines.append(f"    within {floor}: {_joined(small)}")
    if by["same"]:
        lines.append(f"    same: {_names(by['same'])}")
    if by["not recorded"]:
        lines.append(f"    not recorded in either run: {_names(by['not recorded'])}")
    return [f"figures: {', '.join(counts)}", *lines]


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


def _unrecorded(name: str, t: dict) -> list[Line]:
    missing = " and ".join(s for s in ("a", "b") if t[s] is None)
    return [(f"{name}: not compared ({missing}: no docker argv recorded)", None)]


def _docker(t: dict) -> list[Line]:
    elided = ", ".join(t["elided"])
    if t["same"] is None:
        return _unrecorded("docker argv", t)
    if t["same"]:
        return [(f"docker argv: same (elided: {elided})", None)]
    n = len(t["removed"]) + len(t["added"])
    return [(f"docker argv: {n} lines differ (elided: {elided})", None),
            *_changes(t["removed"], t["added"])]


def _env(t: dict) -> list[Line]:
    apart = ", ".join(t.get("apart") or [])
    if t["same"] is None:
        return _unrecorded("env", t)
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

# The text's order: the figures the run measured (what a regression is called on), the
# outcome (the why of a refusal, never below a long YAML hunk), then the inputs. The JSON
# document keeps `judge.difference.TOPICS` order.
SECTIONS = ("figures", "status", "rules", "gate0", "seal", "inputs", "git", "approval", "image",
            "model", "mounts", "engine", "env", "docker")


def sections(t: dict) -> dict[str, list[Line]]:
    """Pure: each topic's lines (text, style), by topic name."""
    return {"figures": _plain(_figures(t["figures"])),
            "status": _plain([_pair("status", t["status"])]),
            "rules": _plain([_pair("rules", t["rules"])]),
            "gate0": _plain(_gate0(t["gate0"])), "seal": _plain(_seal(t["seal"])),
            "inputs": _inputs(t["inputs"]), "git": _plain([git_words(t["git"])]),
            "approval": _plain(_approval(t["approval"])),
            "image": _plain([_pair("image", t["image"])]),
            "model": _plain(_mapping("model", t["model"])),
            "mounts": _plain(_mounts(t["mounts"])),
            "engine": _plain([_pair("engine args", t["engine"]) if t["engine"]["a"] is not None
                              or not t["engine"]["same"] else "engine args: none in either run"]),
            "env": _env(t["env"]), "docker": _docker(t["docker"])}


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


def painted(line: Line, colour: bool) -> str:
    """Pure: one line as printed: its style's ANSI codes around its inert text, else its
    status words in their colours (as every command paints them), or bare."""
    text, style = line
    if colour and style in STYLES:
        return click.style(text, **STYLES[style])
    return paint_statuses(text, colour)


# ---- two nights ------------------------------------------------------------------------------

def read_night(night: Path) -> dict:
    """{"dir", "runs": `pick_runs`} of a night folder, from its summary.json (bounded, strict
    JSON, the summary's schema); InvalidInput (exit 2) when it is none."""
    path = Path(night) / SUMMARY_JSON
    try:
        doc = loads(summary_bytes(night).decode("utf-8"))
    except InputError as e:
        raise InvalidInput(f"{night}: no readable night summary: {e.message}"[:2000]) from None
    except (ValueError, RecursionError):  # UnicodeDecodeError too
        raise InvalidInput(f"{path}: not JSON") from None
    if not isinstance(doc, dict) or doc.get("schema") != SUMMARY_SCHEMA:
        raise InvalidInput(f"{path}: not a night summary (schema {SUMMARY_SCHEMA})")
    return {"dir": str(night), "runs": pick_runs(doc.get("runs"))}


def diff_nights(night_a: Path, night_b: Path) -> dict:
    """Read both nights' summaries and compare the run each judged each control by, each
    found by its name beside the night (`run_beside`), never where the summary says."""
    a, b = read_night(night_a), read_night(night_b)
    compared: dict[str, dict] = {}
    for name in sorted(set(a["runs"]) & set(b["runs"])):
        given = [n["runs"][name]["run_dir"] for n in (a, b)]
        found = [run_beside(night_a, given[0]), run_beside(night_b, given[1])]
        if None in found:
            missing = [g for g, f in zip(given, found, strict=True) if f is None]
            compared[name] = {"error": "run folder not found beside its night: "
                                       f"{', '.join(missing)}"}
            continue
        try:
            compared[name] = diff_runs(*found)
        except HarnessError as e:
            compared[name] = {"error": e.message[:2000]}
    return night_document(a, b, compared)


def _run_words(run: Mapping[str, Any]) -> str:
    return f"{_v(run.get('run_id'))} ({_v(run.get('status'))})"


def render_nights(doc: dict) -> list[str]:
    """Two nights in words: each night, the controls in one only, then each control in both:
    its two runs, status, figures and whether its inputs changed; every value inert."""
    lines = [f"{s}: night {_v(os.path.basename(doc[s]['dir']))} "
             f"({counted(len(doc[s]['controls']), 'control')}) {_v(doc[s]['dir'])}"
             for s in ("a", "b")]
    lines += [f"only in {s}: {_joined([_v(c) for c in doc[f'only_{s}']])}"
              for s in ("a", "b") if doc[f"only_{s}"]]
    controls = doc["controls"]
    differ = [_v(n) for n, e in controls.items() if e["error"] is None and e["differs"]]
    lines.append(f"controls that differ: {', '.join(differ) if differ else 'none'}")
    for name, e in controls.items():
        lines.append(f"{_v(name)}: {_run_words(e['a'])} -> {_run_words(e['b'])}")
        if e["error"] is not None:
            lines.append(f"    not compared: {_v(e['error'])}")
            continue
        lines.append(f"    {_pair('status', e['status'])}")
        lines += [f"    {x}" for x in _figures(e["figures"])]
        lines.append(f"    {repeat_words(e['repeat'])}")
    return lines


# ---- the command ------------------------------------------------------------------------------

@click.command("diff")
@click.argument("run_a", type=RUN_OR_NIGHT)
@click.argument("run_b", type=RUN_OR_NIGHT)
@REFS_RUNS_DIR
@click.option("--json", "as_json", is_flag=True,
              help=f"print the diff as one JSON document (schema {SCHEMA}; of two nights "
                   f"{NIGHT_SCHEMA})")
@click.option("--exit-code", "exit_code", is_flag=True,
              help="exit 1 when the runs differ in anything compared, 0 when they do not "
                   "(as `git diff --exit-code`)")
@color_option()
def diff(run_a: Named, run_b: Named, as_json: bool, exit_code: bool) -> None:
    """What differs between two runs: their figures first, then the outcome, then the inputs.

    Figures: durations, lock wait and hold, telemetry peaks and means, generated tokens and
    the engine log's figures, in the regression judge's names and units, those that moved
    by its effect floor (5 %) first. Outcome: status, rules, each Gate-0 field either run
    found differing. Inputs: the source seal and its files, each run's own copy of the YAML
    as a unified diff, git state, the approval, image Id, model pins, what each mount
    outside the seal held, engine args, the environment and docker argv (one launch's own
    tokens elided). A line says whether b is a plain repeat of a. A topic one run did not
    record is "not compared"; a mount not known is never the same. Reads only. Each run
    may be a folder, a run id, a unique prefix, `latest` or `@-1` (`harness ls`).

    Two night folders are compared per control: the run each night judged it by (its
    newest accepted run, else its final one), their status and figures; the controls in
    one night only are named. More: README.md.

    Exit codes: 0 both read and compared (with --exit-code: 1 when they differ; of two
    nights, when a control's status or figures differ or it is in one night only); 1
    either run (of two nights, any control's run) is not sealed or fails verification;
    2 either has no readable run.json, a night no readable summary.json, or one is a
    night and the other a run.
    """
    if run_a.is_night != run_b.is_night:
        night, other = (run_a, run_b) if run_a.is_night else (run_b, run_a)
        raise InvalidInput(f"{str(night.path)[:400]} is a night folder and "
                           f"{str(other.path)[:400]} is not: `harness diff` compares two runs "
                           "or two nights")
    if run_a.is_night:
        doc = diff_nights(run_a.path, run_b.path)
        lines = _plain(render_nights(doc))
        code = night_exit_status(doc, exit_code)
    else:
        doc = diff_runs(run_a.path, run_b.path)
        lines = render_lines(doc)
        code = exit_status(doc, exit_code)
    if as_json:
        click.echo(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True))
    else:
        colour = colour_wanted()
        for line in lines:
            click.echo(painted(line, colour), color=colour)
    raise click.exceptions.Exit(code)
