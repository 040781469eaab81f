"""Command-line numbers that are bounds: parsed once, finite, positive and capped.

click's `float` accepts `nan`, `inf` and `1e308`; as a lock wait or a deadline each of those
means "never", which is exactly what a bound must not mean. Durations on the command line go
through the same `parse_duration` as durations in YAML, so `--lock-timeout 2h` works and
`--lock-timeout nan` is a usage error (exit 2)."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import click

from harness.base.errors import InvalidInput

MAX_HOURS = 30 * 24.0


def parse_hours(value: Any) -> float:
    """A number of hours: finite, positive, at most 30 days. Pure; ValueError otherwise."""
    try:
        hours = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{str(value)[:40]!r} is not a number of hours") from None
    if not math.isfinite(hours):
        raise ValueError("must be a finite number of hours (not NaN, not infinity)")
    if hours <= 0:
        raise ValueError(f"{hours:g}: must be positive")
    if hours > MAX_HOURS:
        raise ValueError(f"{hours:g}: at most {MAX_HOURS:g} hours (30 days)")
    return hours


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


def parse_duration(value: Any) -> float:
    """harness.config.schema's parse_duration, imported when a duration is parsed: the
    schema loads pydantic, which `harness show --help` must not wait for."""
    from harness.config.schema import parse_duration as parse

    return parse(value)


DURATION = _Bounded("duration", parse_duration)
HOURS = _Bounded("hours", parse_hours)


# ---- the runs dir and run references (harness.config.runsdir, runfolder.refs) -------------

RUNS_DIR_KEY = "harness.runs_dir"  # ctx.meta: the resolved RunsDir, for RUN references


def runs_dir_option(mode: str = "reads", help: str = "run folders",
                    campaign: str | None = None) -> Any:
    """The one `--runs-dir` option, resolved by harness.config.runsdir (option, then
    HARNESS_RUNS_DIR, then harness.toml, then the default) and checked for the command's
    use. `mode`: "reads" (it must exist: exit 2), "creates" (it may be made, in a folder
    that exists), "any" (no check), "lazy" (the RunsDir itself; the command checks),
    "optional" (None unless given; then as "creates").

    `campaign` names the command's campaign parameter: the runs dir is then that
    campaign project's, whatever the current folder. Such an option is resolved after
    the campaign (not eager: click takes an option not on the command line after every
    parameter that is, and the campaign parameter comes first); a campaign that is not a
    file is left to the command to refuse, its runs dir unchecked. Without `campaign` the
    option is eager, so run references (RUN) resolve under it whatever the order on the
    command line."""
    from harness.config import runsdir

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
    from harness.config import runsdir

    found = line.meta.get(RUNS_DIR_KEY) if line is not None else None
    if found is None:
        found = runsdir.resolve(None)  # once per command line: a skipped config warns once
        if line is not None:
            line.meta[RUNS_DIR_KEY] = found
    return found


class RunRef(click.ParamType):
    """A run folder: a path (an existing one always wins: a name with a `/`, or one that
    exists here), or a reference resolved under the runs dir by runfolder.refs: a whole
    run id, an id prefix, 4 to 8 digits of its hex tail, `latest` or `@-N`; a reference
    that is ambiguous (several runs, or a tail that matches a run's name) is exit 2."""

    name = "run"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Path:
        from harness.config import runsdir
        from harness.measure.runfolder import refs

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
        from click.shell_completion import CompletionItem

        from harness.base.errors import HarnessError
        from harness.measure.runfolder import refs

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
