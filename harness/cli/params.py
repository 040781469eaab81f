"""Command-line numbers that are bounds: parsed once, finite, positive and capped.

click's `float` accepts `nan`, `inf` and `1e308`, each of which means "never" as a lock
wait or a deadline; so durations go through the YAML's `parse_duration` (exit 2 on those).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click
from click.shell_completion import CompletionItem

from harness.base.errors import HarnessError, InvalidInput
from harness.base.timeutil import parse_duration
from harness.config import runsdir
from harness.measure.runfolder import refs


def parse_hours(value: Any) -> float:
    """A number of hours, bounded as every duration is (`parse_duration`). Pure."""
    try:
        hours = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{str(value)[:40]!r} is not a number of hours") from None
    return parse_duration(hours * 3600) / 3600


class _Bounded(click.ParamType):
    def __init__(self, name: str, parse: Any) -> None:
        self.name = name
        self._parse = parse

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        try:
            return self._parse(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)


DURATION = _Bounded("duration", parse_duration)
HOURS = _Bounded("hours", parse_hours)


# ---- the runs dir and run references (harness.config.runsdir, runfolder.refs) -------------

RUNS_DIR_KEY = "harness.runs_dir"  # ctx.meta: the resolved RunsDir, for RUN references


def runs_dir_option(mode: str = "reads", help: str = "run folders",
                    campaign: str | None = None) -> Any:
    """The one `--runs-dir` option, resolved by harness.config.runsdir and checked for
    the command's `mode`: "reads" (must exist: exit 2), "creates" (may be made), "any",
    "lazy" (the RunsDir; the command checks), "optional" (None unless given, then
    "creates"). With `campaign` (the campaign parameter's name) the runs dir is that
    project's, so the option is resolved after it, not eagerly; without, it is eager so
    RUN references resolve under it whatever the order on the command line."""
    def callback(command: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is None and mode == "optional":
            return None
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
                        help=help + where)


def runs_dir_in(line: click.Context | None) -> Any:
    """The RunsDir this command line resolved (its --runs-dir), else the one the
    environment, config file or default gives."""
    found = line.meta.get(RUNS_DIR_KEY) if line is not None else None
    if found is None:
        found = runsdir.resolve(None)  # once per command line: a skipped config warns once
        if line is not None:
            line.meta[RUNS_DIR_KEY] = found
    return found


class RunRef(click.ParamType):
    """A run folder: a path (an existing one always wins), or a reference resolved under
    the runs dir by runfolder.refs (run id, prefix, hex tail, `latest`, `@-N`); an
    ambiguous reference is exit 2."""

    name = "run"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Path:
        if isinstance(value, Path):
            return value
        text = str(value)
        if os.path.lexists(text) or not refs.looks_like_ref(text):
            return Path(text)
        runs = runs_dir_in(ctx)
        if not os.path.isdir(runs.path):
            raise InvalidInput(f"{text[:200]}: no such folder, and no runs dir to find it "
                               f"in by id: {runsdir.missing(runs)}")
        return refs.find_run(text, runs.path, f"{runs.path} (from {runs.source})")

    def shell_complete(self, ctx: click.Context, param: click.Parameter,
                       incomplete: str) -> list[Any]:
        """The run ids under the runs dir that start with what was typed, newest first,
        and `latest`; then the shell's own file names (a run folder is a path too)."""
        items = [CompletionItem(refs.LATEST)] if refs.LATEST.startswith(incomplete) else []
        if "/" not in incomplete and not incomplete.startswith("."):
            try:
                names = refs.run_names(runs_dir_in(ctx).path, limit=COMPLETE_LIMIT)
            except (HarnessError, OSError):  # no runs dir here: file names only
                names = []
            items += [CompletionItem(n) for n in refs.newest_first(names)
                      if n.startswith(incomplete)]
        return [*items, CompletionItem(incomplete, type="file")]


COMPLETE_LIMIT = 5_000  # run folders read for one completion: a hint, never a crawl
RUN = RunRef()
