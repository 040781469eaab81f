"""Where run folders live: one answer for every command, naming its source.

Order: `--runs-dir`; `$HARNESS_RUNS_DIR`; `runs_dir` in the nearest `harness.toml` (upwards,
to the git root); else `gpu-runs`. A harness.toml in a folder someone else may write is
skipped with a warning, never refused (as git's `safe.directory`): refusing would let them
stop every harness command beneath it.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.base.errors import InvalidInput
from harness.base.readfile import TooLarge, read_fd
from harness.base.tree import printable
from harness.config.checkout import project_of

DEFAULT = "gpu-runs"
ENV = "HARNESS_RUNS_DIR"
CONFIG = "harness.toml"
CONFIG_LIMIT = 64 * 1024
MAX_PARENTS = 64  # a config search climbs at most this many folders
# The one sentence every command's --help gives for its --runs-dir default: the commands
# that take run ids, and those that take a campaign.
TRUSTED = (f"a {CONFIG} another user could write is skipped, with a warning, unless it is "
           "in your git work tree")
WHERE_FROM = (f"default: ${ENV}, else runs_dir in the project's {CONFIG}, else "
              f"{DEFAULT}/ in the project folder (the one holding {CONFIG}, else the "
              f"current folder); {TRUSTED}")
WHERE_FROM_CAMPAIGN = (f"default: ${ENV}, else runs_dir in the campaign project's {CONFIG} "
                       f"(searched from the campaign's folder upwards), else {DEFAULT}/ in "
                       "the campaign's project folder; a relative DIR is taken from the "
                       f"current folder; {TRUSTED}")


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


def choose(option: str | Path | None, env: str | None, config: ProjectConfig | None,
           cwd: Path, project: Path | None = None) -> RunsDir:
    """The runs dir by precedence: option, environment (empty is unset), config file,
    default. Pure. The default is beside the config file, else in `project`, else `cwd`."""
    named = [(None if option is None else str(option), cwd, "--runs-dir"), (env, cwd, ENV)]
    if config is not None:
        named.append((config.runs_dir, config.file.parent, str(config.file)))
    for value, base, source in named:
        if value:
            return RunsDir(Path(os.path.abspath(base / os.path.expanduser(value))), source)
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


@dataclass(frozen=True)
class Skipped:
    """A harness.toml the search did not obey, and why."""

    file: Path
    why: str


@dataclass(frozen=True)
class Search:
    """What the search found: the config it obeys (None: none), and those it skipped."""

    config: ProjectConfig | None
    skipped: tuple[Skipped, ...] = ()


ROOT = 0


def _owner(st: os.stat_result, uid: int) -> str | None:
    return None if st.st_uid in (uid, ROOT) else (
        f"owned by uid {st.st_uid}, neither you (uid {uid}) nor root")


def unsafe(file: os.stat_result, folder: os.stat_result, uid: int) -> str | None:
    """Why a harness.toml outside the current git work tree must not be obeyed (None: it
    may be): `file` is its lstat (or fstat), `folder` its folder's stat, `uid` the current
    user's. Pure."""
    if stat.S_ISLNK(file.st_mode):
        return "a symlink, never followed"
    if (why := _owner(file, uid)) is not None:
        return why
    if file.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "writable by its group or by others"
    if (why := _owner(folder, uid)) is not None:
        return f"its folder is {why}"
    if folder.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not folder.st_mode & stat.S_ISVTX:
        return "its folder is writable by its group or by others, without the sticky bit"
    return None


def _open_folder(folder: Path) -> int | None:
    """A descriptor of `folder` to stat and open beneath (O_PATH: no read right needed), or
    None where it cannot be opened (the search then looks further up)."""
    try:
        return os.open(folder, os.O_DIRECTORY | os.O_CLOEXEC | getattr(os, "O_PATH", 0))
    except OSError:
        return None


def _lstat_at(name: str, dfd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except OSError:
        return None


def _climb(start: Path, uid: int) -> tuple[list[Path], bool]:
    """The folders the search looks in, from `start` up to the nearest folder holding
    `.git` (included) or the file system root, at most MAX_PARENTS; and whether that
    `.git` and its folder are the current user's or root's (the current work tree)."""
    here, folders = Path(os.path.abspath(start)), []
    for _ in range(MAX_PARENTS):
        folders.append(here)
        dfd = _open_folder(here)
        if dfd is not None:
            try:
                git = _lstat_at(".git", dfd)
                if git is not None:
                    mine = _owner(git, uid) is None and _owner(os.fstat(dfd), uid) is None
                    return folders, mine
            finally:
                os.close(dfd)
        if here.parent == here:
            break
        here = here.parent
    return folders, False


def _read_beneath(folder: Path, dfd: int, trusted: bool,
                  uid: int) -> ProjectConfig | Skipped | None:
    """The harness.toml in `folder` (its descriptor `dfd`): None when there is none, Skipped
    when it is unsafe and not `trusted`, else its ProjectConfig (InvalidInput when it
    cannot be read as one). The file judged is the one read."""
    path = folder / CONFIG
    try:
        fd = os.open(CONFIG, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dfd)
    except OSError as e:
        seen = _lstat_at(CONFIG, dfd)
        if seen is None:
            return None
        why = None if trusted else unsafe(seen, os.fstat(dfd), uid)
        if why is not None:
            return Skipped(path, why)
        if e.errno == errno.ELOOP:
            raise InvalidInput(f"{path}: the project config is a symlink; give the file "
                               "itself") from None
        raise InvalidInput(f"{path}: cannot read the project config: {e.strerror or e}") \
            from None
    try:
        st = os.fstat(fd)
        why = None if trusted else unsafe(st, os.fstat(dfd), uid)
        if why is not None:
            return Skipped(path, why)
        if not stat.S_ISREG(st.st_mode):
            raise InvalidInput(f"{path}: the project config is not a regular file")
        return ProjectConfig(path, parse_config(read_fd(fd, CONFIG_LIMIT), str(path)))
    except TooLarge:
        raise InvalidInput(f"{path}: the project config is over the {CONFIG_LIMIT} byte "
                           "limit") from None
    except OSError as e:
        raise InvalidInput(f"{path}: cannot read the project config: {e.strerror or e}") \
            from None
    finally:
        os.close(fd)


def search(start: Path, uid: int | None = None) -> Search:
    """The nearest harness.toml from `start` upwards (to the folder holding `.git`) that
    may be obeyed, and the unsafe ones skipped on the way."""
    uid = os.geteuid() if uid is None else uid
    folders, trusted = _climb(start, uid)
    skipped: list[Skipped] = []
    for folder in folders:
        dfd = _open_folder(folder)
        if dfd is None:
            continue
        try:
            found = _read_beneath(folder, dfd, trusted, uid)
        finally:
            os.close(dfd)
        if isinstance(found, Skipped):
            skipped.append(found)
        elif found is not None:
            return Search(found, tuple(skipped))
    return Search(None, tuple(skipped))


def skipped_warning(skipped: Skipped) -> str:
    """The one warning for a harness.toml the search skipped: which, why, and what is
    obeyed instead."""
    return (f"harness: warning: {printable(str(skipped.file))} not obeyed: "
            f"{skipped.why}; a {CONFIG} is obeyed in your git work tree, or where it and "
            "its folder are yours or root's and no one else may write them")


def _to_stderr(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed or gone stderr changes nothing
        pass


def resolve(option: str | Path | None, cwd: Path | None = None, *,
            campaign: Path | None = None,
            warn: Callable[[str], None] = _to_stderr) -> RunsDir:
    """The runs dir for this command line. With `campaign` the config is searched from the
    campaign's folder and the default is its project's, else both come from `cwd`; each
    harness.toml skipped is told to `warn`."""
    here = Path(os.path.abspath(cwd or Path.cwd()))
    where = None if campaign is None else Path(os.path.abspath(campaign))
    config = None
    if not (option or os.environ.get(ENV)):
        found = search(here if where is None else where.parent)
        for skipped in found.skipped:
            warn(skipped_warning(skipped))
        config = found.config
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
