"""A readable summary of one run folder, for a person at a terminal.

Anything in a run folder may come from the workload, so every value is data, never markup:
rich gets a `Text`, controls, ANSI escapes and bidi overrides made visible, length cut. A
run.json that is not a JSON object is exit 2; odd fields inside are shown, never a crash."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from harness.base.catalogue import GATE0_FIELD_DIFFERS
from harness.base.errors import InvalidInput
from harness.base.readfile import InputError, read_text_bounded
from harness.base.shapes import dict_or_empty
from harness.base.terminal import STATUS_COLOURS
from harness.judge.difference import gate0_differences
from harness.judge.finalize.attribute import trace_answers
from harness.measure.origin import describe
from harness.measure.runfolder import inputs as kept
from harness.measure.runfolder.layout import ADDENDA, OBSERVATIONS, RECOVERED, TRANSITIONS
from harness.measure.runfolder.reruns import reruns_of
from harness.measure.runfolder.runjson import RunRecord, provenance_of
from harness.readers.report.gitline import git_line
from harness.readers.report.inert import inert
from harness.readers.report.steps import holders

MAX_VALUE_CHARS = 2000
MAX_GATE0_FIELDS = 20
GATE0_VALUE_CHARS = 300
MAX_INPUT_ITEMS = 20
INPUT_NAME_WIDTH = 22  # inputs/resolved.json and two spaces
MAX_INPUT_LINE = 10_000  # one line of a kept YAML file (the file itself is at most 1 MiB)


def plain(value: Any, limit: int = MAX_VALUE_CHARS) -> str:
    """Any JSON value as one line of inert text (see harness.readers.report.inert)."""
    return inert(value, limit)


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _field(value: Any) -> str:
    return "—" if value is None else plain(value)


def _seconds(value: Any) -> str:
    """A duration as a person reads it (the exact float stays in run.json and --json)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value == value:
        return f"{value:.3g} s" if abs(value) < 100 else f"{value:.0f} s"
    return f"{_field(value)} s"


def _rows(run_dir: Path, record: dict) -> list[tuple[str, str]]:
    camp, lock, out = (dict_or_empty(record.get(k)) for k in ("campaign", "lock", "outcome"))
    rows = [
        ("campaign", f"{_field(camp.get('name'))} (row {_field(camp.get('row'))})"),
        ("control", _field(dict_or_empty(record.get("control")).get("name"))),
        ("attempt", _field(record.get("attempt"))),
        ("image", _field(dict_or_empty(record.get("image")).get("id"))),
        ("seal", _field(record.get("seal"))),
        ("git", git_line(provenance_of(record.get("provenance")))),
        *([("harness", describe(record["harness"]))] if isinstance(record.get("harness"), dict)
          else []),
        ("exit code", _field(out.get("exit_code"))),
        ("duration", _seconds(out.get("duration_s"))),
        ("lock", (f"{_field(lock.get('path'))}: acquired {_field(lock.get('acquired'))}, "
                  f"released {_field(lock.get('released'))} "
                  f"(waited {_seconds(lock.get('wait_s'))})") if lock else "not taken"),
    ]
    stages = [f"{plain(s.get('name'), 40)} {_field(s.get('result'))} "
              f"({_seconds(s.get('seconds'))})"
              for s in map(dict_or_empty, _list(record.get("stages")))]
    if stages:
        rows.append(("stages", " · ".join(stages)))
    for p in map(dict_or_empty, _list(record.get("post_steps"))):
        rows.append((f"post-step {plain(p.get('name'), 200)}",
                     f"{_field(p.get('verdict'))} (exit {_field(p.get('exit_code'))})"))
    if (approved := _approval(record)) is not None:
        rows.append(("approval", approved))
    rerun = dict_or_empty(record.get("rerun_of"))
    if rerun:
        rows.append(("rerun of", f"{_field(rerun.get('run_id'))}: {_field(rerun.get('reason'))}"))
    for r in reruns_of(run_dir):
        rows.append(("rerun by", f"{_field(r.get('run_id'))} ({_field(r.get('status'))}): "
                                 f"{_field(r.get('reason'))}"))
    return rows


def _approval(record: dict) -> str | None:
    """The approval the run ran under, and whether it reviewed the commit the run ran at
    (approvals match on sealed bytes, so a later commit may run under an earlier review)."""
    approval = record.get("approval")
    if not isinstance(approval, dict):
        return None
    reviewed = approval.get("commit")
    ran = (provenance_of(record.get("provenance")) or {}).get("commit")
    if not isinstance(reviewed, str) or not isinstance(ran, str):  # None == None is no match
        same = f"not known whether it is the commit this run ran at ({_field(ran)})"
    else:
        same = ("the commit this run ran at" if reviewed == ran else
                f"not the commit this run ran at ({_field(ran)})")
    return (f"{_field(approval.get('file'))} ({_field(approval.get('digest'))}); reviewed "
            f"commit {_field(reviewed)}: {same}")


def _recovered(run_dir: Path) -> str | None:
    path = run_dir / RECOVERED
    if not path.exists() and not path.is_symlink():
        return None
    try:
        return plain(read_text_bounded(path, 1024 * 1024, what="recovery note").strip())
    except InputError as e:
        return plain(e.message)


def _addenda(run_dir: Path) -> list[str]:
    folder = run_dir / ADDENDA
    if folder.is_symlink() or not folder.is_dir():
        return []
    try:
        return sorted(plain(p.name, 200) for p in folder.iterdir())
    except OSError:
        return []


OUTSIDE_HASH = " (outside vLLM's own hash, which agreed)"


def _where(difference: dict) -> str:
    """`in engine-core: `: the process a difference was found in, when the verdict says;
    `in engine-core, worker-0: ` for one configuration object that several hold."""
    held = holders(difference)
    return f"in {held}: " if held else ""


def gate0_lines(run_dir: Path, run: RunRecord) -> list[str]:
    """For a Gate-0 refusal, each differing field with its start-up and generation values
    (from post-steps/gate0/verdict.json, bounded), at most MAX_GATE0_FIELDS of them."""
    if GATE0_FIELD_DIFFERS not in run.rules:
        return []
    found = gate0_differences(run_dir)
    lines = [f"    {_where(d)}{plain(d['field'], 200)} ({_field(d.get('kind'))})"
             f"{OUTSIDE_HASH if d.get('outside_engine_hash') is True else ''}: startup "
             f"{plain(d.get('startup'), GATE0_VALUE_CHARS)}, generation "
             f"{plain(d.get('generation'), GATE0_VALUE_CHARS)}"
             for d in found[:MAX_GATE0_FIELDS]]
    if len(found) > MAX_GATE0_FIELDS:
        lines.append(f"    … and {len(found) - MAX_GATE0_FIELDS} more fields")
    lines += [f"    which call: {plain(a, 2 * GATE0_VALUE_CHARS)}" for a in trace_answers(
        run_dir / OBSERVATIONS / TRANSITIONS, [d["field"] for d in found[:MAX_GATE0_FIELDS]])]
    return ["  Gate 0 differences:", *lines] if lines else []


def _control_lines(ctl: dict) -> list[str]:
    """The resolved control's key lines (resolved.json: secret-looking values redacted)."""
    env = dict_or_empty(ctl.get("env"))
    model = dict_or_empty(ctl.get("model"))
    lines = [f"image {_field(ctl.get('image'))} · device {_field(ctl.get('device'))} · "
             f"network {_field(ctl.get('network'))} · timeout {_seconds(ctl.get('timeout'))}",
             f"command: {plain(ctl.get('command'), 500)}"]
    if env:
        lines.append("env: " + ", ".join(f"{plain(k, 100)}={plain(v, 200)}"
                                         for k, v in sorted(env.items())[:MAX_INPUT_ITEMS]))
    if ctl.get("engine"):
        lines.append(f"engine: {plain(ctl.get('engine'), 500)}")
    if model:
        lines.append(f"model: {_field(model.get('source'))} -> {_field(model.get('target'))} "
                     f"({len(dict_or_empty(model.get('sha256')))} files pinned)")
    mounts = [f"{_field(m.get('source'))} -> {_field(m.get('target'))}"
              for m in map(dict_or_empty, _list(ctl.get("mounts"))[:MAX_INPUT_ITEMS])]
    if mounts:
        lines.append(f"mounts: {'; '.join(mounts)}")
    steps = [plain(dict_or_empty(s).get("name"), 100) for s in _list(ctl.get("post_steps"))]
    lines.append(f"post-steps: {', '.join(steps[:MAX_INPUT_ITEMS]) or 'none'}")
    return lines


def inputs_lines(run_dir: Path) -> list[str]:
    """What the run was made from (inputs/): each kept file with its sealed sha256, the control's
    key lines, and how to print one whole; a run made before the harness kept its inputs says so."""
    digests = kept.kept_digests(run_dir)
    if digests is None:
        return [f"  inputs: {kept.NOT_KEPT}"]
    lines = [f"  inputs (print one: harness show {plain(str(run_dir), 1000)} --input "
             f"{'|'.join(kept.KEPT)}):"]
    resolved, why = kept.read_kept_json(run_dir, "resolved")
    files = dict_or_empty(dict_or_empty(resolved).get("files"))
    for name, rel in kept.KEPT.items():
        source = dict_or_empty(files.get(name))
        seen = f"sha256:{plain(digests[name], 64)}" if name in digests else (
            f"not kept: {_field(source.get('why'))}")
        path = f"  from {_field(source.get('path'))}" if source.get("path") else ""
        lines.append(f"    {plain(rel, 200):<{INPUT_NAME_WIDTH}}{seen}{path}")
    if resolved is None:
        return [*lines, f"    resolved control not shown: {plain(why)}"]
    ctl = dict_or_empty(dict_or_empty(resolved).get("control"))
    return [*lines, "  control as resolved:", *(f"    {x}" for x in _control_lines(ctl))]


def input_text(run_dir: Path, name: str) -> list[str]:
    """The lines of one kept input, each made inert on its own (a line break stays one,
    nothing else reaches the terminal); InvalidInput when it is not the sealed file."""
    data, why = kept.read_kept(run_dir, name)
    if data is None:
        raise InvalidInput(f"{plain(str(run_dir), 1000)}: {plain(why)}")
    lines = data.decode("utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the file's last line break ends a line, it starts none
    return [plain(line, MAX_INPUT_LINE) for line in lines]


def render_run(run_dir: Path, run: RunRecord, console: Console | None = None) -> None:
    """Print the run; every value from the folder goes out as Text, never as markup."""
    console = console or Console()
    run_dir = Path(run_dir)
    record = run.view()
    status = record.get("status")
    style = STATUS_COLOURS.get(status, "white") if isinstance(status, str) else "white"
    head = Text.assemble((plain(record.get("run_id"), 200), "bold"), "  ",
                         (_field(status), style))
    # soft_wrap: rich neither cuts nor breaks a line (an Id, a seal, a path stays whole and
    # copyable); the terminal wraps what is too long, a pipe gets each line as one line.
    say = partial(console.print, highlight=False, soft_wrap=True)
    say(head)
    rows = _rows(run_dir, record)
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        say(Text.assemble((k, "dim"), " " * (width - len(k) + 2), v))
    for r in run.reasons:
        say(Text.assemble("  ", ("•", "red"), " ", plain(r.text())))
    for line in gate0_lines(run_dir, run):
        say(Text(line))
    for line in inputs_lines(run_dir):
        say(Text(line))
    recovered = _recovered(run_dir)
    if recovered is not None:
        say(Text.assemble("  ", ("recovered:", "yellow"), " ", recovered))
    for a in _addenda(run_dir):
        say(Text(f"  addendum: {a}"))
