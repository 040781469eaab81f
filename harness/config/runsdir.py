"""Where run folders live: one answer for every command, and where it came from.

The runs dir is, in this order: the command's `--runs-dir`; else `$HARNESS_RUNS_DIR`; else
`runs_dir = "..."` in the project's `harness.toml` (the first found from a folder upwards,
stopping at a git root or the file system root), relative to that file's folder; else
`gpu-runs` beside that `harness.toml`, or, with none, in the project folder.

Which project: a command given a campaign file works for that campaign's project, so the
search starts in the campaign's folder and the last default is the campaign's project
folder (`checkout.project_of`): `harness run /srv/ops/campaigns/c.yaml` writes the same
runs from any folder. A command given only run ids (`show`, `ls`, `status`) has no
campaign: its search starts in the current folder, and the last default is that folder.
So `harness status` from a sub-folder, or from anywhere with `HARNESS_RUNS_DIR` set, reads
the same runs as from the project root. A relative `--runs-dir` or `HARNESS_RUNS_DIR` is
the operator's word where it is typed: relative to the current folder.

Every answer says where it came from, so "no such runs dir: X (from HARNESS_RUNS_DIR)"
tells the operator which knob to turn. `choose` is pure; `resolve` reads the environment,
the current folder and the config file.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from harness.base.errors import InvalidInput
from harness.base.readfile import InputError, read_bounded
from harness.config.checkout import project_of

DEFAULT = "gpu-runs"
ENV = "HARNESS_RUNS_DIR"
CONFIG = "harness.toml"
CONFIG_LIMIT = 64 * 1024
MAX_PARENTS = 64  # a config search climbs at most this many folders
# The one sentence every command's --help gives for its --runs-dir default: the commands
# that take run ids, and those that take a campaign.
WHERE_FROM = (f"default: ${ENV}, else runs_dir in the project's {CONFIG}, else "
              f"{DEFAULT}/ in the project folder (the one holding {CONFIG}, else the "
              "current folder)")
WHERE_FROM_CAMPAIGN = (f"default: ${ENV}, else runs_dir in the campaign project's {CONFIG} "
                       f"(searched from the campaign's folder upwards), else {DEFAULT}/ in "
                       "the campaign's project folder; a relative DIR is taken from the "
                       "current folder")


@dataclass(frozen=True)
class RunsDir:
    """A runs dir and where it came from (for messages: `--runs-dir`, `HARNESS_RUNS_DIR`,
    `/proj/harness.toml`, `the default`)."""

    path: Path
    source: str

    @property
    def named(self) -> bool:
        """Whether someone named it (an option, the environment, a config file)."""
        return self.source != "the default"


@dataclass(frozen=True)
class ProjectConfig:
    """A found `harness.toml`: its path and its `runs_dir` value, if it has one."""

    file: Path
    runs_dir: str | None


def _expand(text: str) -> Path:
    return Path(os.path.expanduser(text))


def choose(option: str | Path | None, env: str | None, config: ProjectConfig | None,
           cwd: Path, project: Path | None = None) -> RunsDir:
    """The runs dir by precedence: option, environment, config file, default. Pure; an
    empty environment value counts as unset (as a shell's `VAR=` means). The option and
    the environment are relative to `cwd`, the config's runs_dir to its file; the default
    is beside the config file, else in `project` (a campaign's project), else in `cwd`."""
    if option is not None and str(option) != "":
        return RunsDir(Path(os.path.abspath(cwd / _expand(str(option)))), "--runs-dir")
    if env:
        return RunsDir(Path(os.path.abspath(cwd / _expand(env))), ENV)
    if config is not None and config.runs_dir:
        base = config.file.parent
        return RunsDir(Path(os.path.abspath(base / _expand(config.runs_dir))), str(config.file))
    base = config.file.parent if config is not None else project or cwd
    return RunsDir(Path(os.path.abspath(base / DEFAULT)), "the default")


def parse_config(data: bytes, where: str) -> str | None:
    """`runs_dir` of a harness.toml's bytes (None when it sets none). Pure; InvalidInput
    for a file that is not TOML, or a runs_dir that is not a non-empty string."""
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise InvalidInput(f"{where}: not a TOML file ({e})") from None
    value = doc.get("runs_dir")
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise InvalidInput(f"{where}: runs_dir must be a non-empty string (a folder, "
                           "relative to this file's folder)")
    return value


def find_config(start: Path) -> Path | None:
    """The nearest harness.toml from `start` upwards; the search stops after a folder that
    holds `.git` (the project root) or at the file system root."""
    here = Path(os.path.abspath(start))
    for _ in range(MAX_PARENTS):
        candidate = here / CONFIG
        if os.path.lexists(candidate):
            return candidate
        if os.path.lexists(here / ".git") or here.parent == here:
            return None
        here = here.parent
    return None


def read_config(path: Path) -> ProjectConfig:
    """A harness.toml read bounded (a regular file only); InvalidInput otherwise."""
    try:
        data = read_bounded(path, CONFIG_LIMIT, what="project config")
    except InputError as e:
        raise InvalidInput(f"{path}: {e.message}") from None
    return ProjectConfig(path, parse_config(data, str(path)))


def resolve(option: str | Path | None, cwd: Path | None = None, *,
            campaign: Path | None = None) -> RunsDir:
    """The runs dir for this command line, from the option, the environment, the config
    file, or the default. `cwd` (default: the current folder) is where a relative option
    or environment value is read from. With `campaign` (the command's campaign file, as
    the loader reads it: relative to the current folder) the config is searched from the
    campaign's folder and the default is its project's; without, both come from `cwd`."""
    here = Path(os.path.abspath(cwd or Path.cwd()))
    where = None if campaign is None else Path(os.path.abspath(campaign))
    found = None if option or os.environ.get(ENV) else find_config(
        here if where is None else where.parent)
    config = read_config(found) if found is not None else None
    return choose(option, os.environ.get(ENV), config, here,
                  None if where is None else project_of(where))


def missing(runs: RunsDir) -> str:
    """The one message for a runs dir that is not there."""
    where = f"from {runs.source}" if runs.named else (
        f"the default; give --runs-dir, set {ENV}, or runs_dir in a {CONFIG}")
    return f"no such runs dir: {runs.path} ({where})"


def require_existing(runs: RunsDir) -> Path:
    """The runs dir of a command that reads it: it must be a folder (exit 2 otherwise)."""
    if not os.path.isdir(runs.path):
        if os.path.lexists(runs.path):
            raise InvalidInput(f"runs dir {runs.path} (from {runs.source}) is not a folder")
        raise InvalidInput(missing(runs))
    return runs.path


def require_creatable(runs: RunsDir) -> Path:
    """The runs dir of a command that creates runs: it may be made, but only in a folder
    that exists (a typo'd parent is an error, exit 2, not a new tree)."""
    if os.path.isdir(runs.path):
        return runs.path
    if os.path.lexists(runs.path):
        raise InvalidInput(f"runs dir {runs.path} (from {runs.source}) is not a folder")
    if not os.path.isdir(runs.path.parent):
        raise InvalidInput(f"{missing(runs)}, and its parent {runs.path.parent} is not a "
                           "folder either: nothing was created")
    return runs.path
