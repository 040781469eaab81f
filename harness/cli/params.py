"""The command line's shared parameters: bounded numbers, the options several commands
take, run and night references, and what a path given is when it is not what the command
takes.

click's `float` accepts `nan`, `inf` and `1e308`, each of which means "never" as a lock
wait or a deadline; so durations go through the YAML's `parse_duration` (exit 2 on those).

A night folder given where a campaign or a run belongs, or a bundle where a run folder
belongs, is refused naming the command that takes it, instead of "the YAML file is a
folder" or "not a run folder". A night folder is one holding the night journal
(RUNS/nights/<campaign>-<stamp>/journal.sqlite); a bundle is a .tar, .tar.gz or .tgz file,
or an unpacked bag (bagit.txt). Only names are looked at (lexists): nothing is opened or
followed.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from click.shell_completion import CompletionItem

from harness.base import terminal
from harness.base.errors import HarnessError, InvalidInput
from harness.base.timeutil import parse_duration
from harness.config import runsdir
from harness.measure.nightfolder.naming import (
    JOURNAL_NAME,
    NIGHTS,
    find_night,
    night_names,
    night_parts,
)
from harness.measure.runfolder import refs
from harness.readers.report.inert import inert


def parse_hours(value: Any) -> float:
    """A number of hours, bounded as every duration is (`parse_duration`). Pure."""
    try:
        hours = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{str(value)[:40]!r} is not a number of hours") from None
    return parse_duration(hours * 3600) / 3600


class BoundedParam(click.ParamType):
    """A parameter parsed by `parse`, whose ValueError is click's usage error (exit 2)."""

    def __init__(self, name: str, parse: Any) -> None:
        self.name = name
        self._parse = parse

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        try:
            return self._parse(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)


DURATION = BoundedParam("duration", parse_duration)
HOURS = BoundedParam("hours", parse_hours)


def lock_timeout_option(locks: str = "the GPU lock",
                        default: str = " (default: the campaign's lock_timeout)") -> Any:
    """The one `--lock-timeout DURATION` of the commands that launch (run, night, rerun)."""
    return click.option("--lock-timeout", type=DURATION,
                        help=f"how long to wait for {locks}, e.g. 600 or 2h{default}")


# run, night and rerun report progress the same way (harness.measure.ui.reporter)
JSON_LINES = click.option("--json-lines/--no-json-lines", default=None,
                          help="progress as JSON lines (default: when stderr is not a terminal)")


# ---- the runs dir and run references (harness.config.runsdir, runfolder.refs) -------------

RUNS_DIR_KEY = "harness.runs_dir"  # ctx.meta: the resolved RunsDir, for RUN references


def runs_dir_option(mode: str = "reads", help: str = "run folders",
                    campaign: str | None = None) -> Any:
    """The one `--runs-dir` option, resolved by harness.config.runsdir and checked for
    the command's `mode`: "reads" (must exist: exit 2), "creates" (may be made), "any",
    "lazy" (the RunsDir; the command checks), "optional" (None unless given, then
    "creates"), "refs" (no parameter: only where RUN and NIGHT references resolve). With
    `campaign` (the campaign parameter's name) the runs dir is that project's, so the
    option is resolved after it, not eagerly; without, it is eager so RUN references
    resolve under it whatever the order on the command line."""
    def callback(command: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is None and mode in ("optional", "refs"):
            return None  # references resolve under the default when they need it
        given = command.params.get(campaign) if campaign is not None else None
        named = given is not None and os.path.isfile(given)
        runs = runsdir.resolve(value, campaign=given if named else None)
        command.meta[RUNS_DIR_KEY] = runs
        if mode == "lazy":
            return runs
        if given is not None and not named:  # the command refuses the campaign first
            return runs.path
        if mode == "reads":
            return runsdir.require_existing(runs)
        if mode in ("creates", "optional"):
            return runsdir.require_creatable(runs)
        return runs.path

    where = (" (default: beside the original; ids resolve under $HARNESS_RUNS_DIR, else "
             f"the {runsdir.CONFIG} runs_dir, else {runsdir.DEFAULT}/)") if mode == "optional" \
        else f" ({runsdir.WHERE_FROM if campaign is None else runsdir.WHERE_FROM_CAMPAIGN})"
    return click.option("--runs-dir", type=click.Path(path_type=Path), default=None,
                        is_eager=campaign is None, callback=callback, metavar="DIR",
                        help=help + where, expose_value=mode != "refs")


REFS_RUNS_DIR = runs_dir_option("refs", help="where run and night ids are looked up")


def default_lock() -> Path:
    return Path(os.environ.get("HOME", "~")).expanduser() / "gpu.lock"


def lock_option(help: str = "the GPU lock file (default: $HOME/gpu.lock)") -> Any:
    """The one `--lock PATH` option (the GPU lock file; the night lock is beside it): `~` and
    $VARS expanded; None when not given, for the command's own default (`default_lock`)."""
    def expand(command: click.Context, param: click.Parameter, value: Any) -> Path | None:
        return None if value is None else Path(os.path.expandvars(os.path.expanduser(value)))

    return click.option("--lock", "lock_path", type=click.Path(), default=None,
                        metavar="PATH", callback=expand, help=help)


def color_option() -> Any:
    """The one `--color WHEN` option: status words (and diff's hunks) in colour on a
    terminal unless NO_COLOR is set (auto), always (also into a pipe), or never."""
    def choose(command: click.Context, param: click.Parameter, value: Any) -> str:
        terminal.choose_colour(value)
        if value != "auto":  # click.echo strips ANSI codes unless the context says colour
            command.color = value == "always"
        return value

    return click.option("--color", "--colour", "color", type=click.Choice(terminal.COLOUR_WHENS),
                        default="auto", show_default=True, is_eager=True, expose_value=False,
                        callback=choose, help="colour status words: on a terminal unless "
                        "NO_COLOR is set (auto), always, or never")


def runs_dir_in(line: click.Context | None) -> Any:
    """The RunsDir this command line resolved (its --runs-dir), else the one the
    environment, config file or default gives."""
    found = line.meta.get(RUNS_DIR_KEY) if line is not None else None
    if found is None:
        found = runsdir.resolve(None)  # once per command line: a skipped config warns once
        if line is not None:
            line.meta[RUNS_DIR_KEY] = found
    return found


class _Ref(click.ParamType):
    """A folder given by its path or by a reference under the runs dir. In usage lines its
    metavar says an id works too, not only a folder (`RUN`, not `RUN_DIR`); it completes
    to the ids of the folders it takes (`completions`: runs, nights or both)."""

    metavar = ""
    runs = nights = False  # which ids it completes to

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str:
        return self.metavar

    def shell_complete(self, ctx: click.Context, param: click.Parameter,
                       incomplete: str) -> list[Any]:
        return completions(ctx, incomplete, runs=self.runs, nights=self.nights)


class RunRef(_Ref):
    """A run folder: a path (an existing one always wins), or a reference resolved under
    the runs dir by runfolder.refs (run id, prefix, hex tail, `latest`, `@-N`); an
    ambiguous reference is exit 2."""

    name, metavar, runs = "run", "RUN", True

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Path:
        if isinstance(value, Path):
            return value
        text = str(value)
        if os.path.lexists(text) or not refs.looks_like_ref(text):
            return Path(text)
        runs = _runs_to_search(text, ctx)
        return refs.find_run(text, runs.path, f"{runs.path} (from {runs.source})")


COMPLETE_LIMIT = 5_000  # folders read for one completion: a hint, never a crawl
RUN = RunRef()


def completions(ctx: click.Context | None, incomplete: str, *, runs: bool = False,
                nights: bool = False) -> list[CompletionItem]:
    """`latest`, then the run ids and/or night ids that start with what was typed (each
    newest first), then the shell's own file names. A typed path (`/`, a leading `.`)
    completes as a file only; no runs dir here, as file names only."""
    items = [CompletionItem(refs.LATEST)] if refs.LATEST.startswith(incomplete) else []
    typed_path = "/" in incomplete or incomplete.startswith(".")
    for wanted, parts in ((runs, refs.run_parts), (nights, night_parts)):
        if not wanted or typed_path:
            continue
        try:
            where = runs_dir_in(ctx).path
            names = night_names(where / NIGHTS, COMPLETE_LIMIT) if parts is night_parts \
                else refs.run_names(where, COMPLETE_LIMIT)
        except (HarnessError, OSError):
            continue
        items += [CompletionItem(n) for n in refs.newest_first(names, parts)
                  if n.startswith(incomplete)]
    return [*items, CompletionItem(incomplete, type="file")]


def _runs_to_search(text: str, ctx: click.Context | None) -> runsdir.RunsDir:
    runs = runs_dir_in(ctx)
    if not os.path.isdir(runs.path):
        raise InvalidInput(f"{inert(text, 200)}: no such folder, and no runs dir to find it "
                           f"in by id: {runsdir.missing(runs)}")
    return runs


def _nights_where(runs: runsdir.RunsDir) -> str:
    return f"{runs.path}/{NIGHTS} (from {runs.source})"


class NightRef(_Ref):
    """A night folder: a path (an existing one always wins; a missing one is exit 2), or a
    reference resolved under RUNS/nights by nightfolder.naming.find_night (the whole night
    id, a unique prefix, `latest`, `@-N`); an ambiguous reference is exit 2."""

    name, metavar, nights = "night", "NIGHT", True

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Path:
        if isinstance(value, Path):
            return value
        text = str(value)
        if os.path.lexists(text):
            return Path(text)
        if not refs.looks_like_ref(text):
            raise InvalidInput(f"{inert(text, 400)}: no such file or folder")
        runs = _runs_to_search(text, ctx)
        return find_night(text, runs.path, _nights_where(runs))


NIGHT = NightRef()
RUN_KIND, NIGHT_KIND = "run", "night"


@dataclass(frozen=True)
class Named:
    """What a RUN_OR_NIGHT argument names: a run folder or a night folder (`kind`)."""

    kind: str  # RUN_KIND or NIGHT_KIND
    path: Path

    @property
    def is_night(self) -> bool:
        return self.kind == NIGHT_KIND


def _attempt(find: Any) -> Path | InvalidInput:
    try:
        return find()
    except InvalidInput as e:
        return e


class RunOrNightRef(_Ref):
    """A run or a night: a path (an existing one wins; a folder holding a night journal is a
    night), else a reference. `latest` and `@-N` are runs; the whole night id is that night
    and the whole run id that run (a folder named to begin with it cannot make it
    ambiguous); any other reference is whichever one of a run (RUN's forms) and a night it
    names, exit 2 when it names one of each."""

    name, metavar, runs, nights = "run_or_night", "RUN|NIGHT", True, True

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Named:
        if isinstance(value, Named):
            return value
        text = str(value)
        if os.path.lexists(text) or not refs.looks_like_ref(text):
            path = Path(text)
            return Named(NIGHT_KIND if is_night_folder(path) else RUN_KIND, path)
        if text == refs.LATEST or text.startswith("@-"):
            return Named(RUN_KIND, RUN.convert(text, param, ctx))
        runs = _runs_to_search(text, ctx)
        night = _attempt(lambda: find_night(text, runs.path, _nights_where(runs)))
        if isinstance(night, Path) and night.name == text:
            return Named(NIGHT_KIND, night)
        run = _attempt(lambda: RUN.convert(text, param, ctx))
        if isinstance(run, Path) and run.name == text:
            return Named(RUN_KIND, run)
        for got in (run, night):
            if isinstance(got, InvalidInput) and not isinstance(got, refs.NoMatch):
                raise got
        if isinstance(run, Path) and isinstance(night, Path):
            raise InvalidInput(f"{text[:200]!r} is ambiguous: it names run {run.name} and "
                               f"night {night.name}; give more of the id")
        if isinstance(run, Path):
            return Named(RUN_KIND, run)
        if isinstance(night, Path):
            return Named(NIGHT_KIND, night)
        raise refs.NoMatch(f"{run.message}; no night either (`harness ls --nights`)")


RUN_OR_NIGHT = RunOrNightRef()


# ---- what a path given is, when it is not what the command takes ----------------------

BUNDLE_SUFFIXES = (".tar", ".tar.gz", ".tgz")
BAG_DECLARATION = "bagit.txt"


def is_night_folder(path: Path) -> bool:
    return os.path.isdir(path) and os.path.lexists(Path(path) / JOURNAL_NAME)


def is_bundle(path: Path) -> bool:
    """A bundle archive (by its name, a file) or an unpacked bag (a folder with bagit.txt)."""
    if os.path.isdir(path):
        return os.path.lexists(Path(path) / BAG_DECLARATION)
    return os.path.lexists(path) and str(path).endswith(BUNDLE_SUFFIXES)


def _quoted(path: Path) -> str:
    return shlex.quote(str(path))[:400]


def refuse_night(path: Path, where: str) -> None:
    """InvalidInput (exit 2) when `path` is a night folder given as `where` (a campaign,
    a run folder): the message says `harness rerun --failed NIGHT_DIR`."""
    if is_night_folder(path):
        raise InvalidInput(f"{str(path)[:400]}: that is a night folder, not {where}: "
                           f"`harness rerun --failed {_quoted(path)} --reason TEXT`?")


def refuse_bundle(path: Path) -> None:
    """InvalidInput (exit 2) when `path` is a bundle given where a run folder belongs."""
    if is_bundle(path):
        raise InvalidInput(f"{str(path)[:400]}: that is a bundle, not a run folder: "
                           f"`harness bundle verify {_quoted(path)}`")
