"""A recorded docker vector read back, so two runs of one control compare (`harness diff`). Pure.

Tokens of one launch alone (run id, run folder, launcher pid and start, Slurm job, the
source seal) become `ELIDED`, so two launches differ only where someone changed something.
The argv is hostile: anything not shaped like `docker run …` is not read (None), and
secret-looking values are redacted."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from harness.instrument.harness_observer.interface import ENV_SEAL
from harness.measure.runfolder.layout import CONTAINER_CID
from harness.measure.vector import (
    LAUNCHER_PID,
    LAUNCHER_STARTED,
    SLURM_JOB_LABEL,
    looks_secret,
    redact,
)

# The options vector.build writes as `--opt VALUE`; others are `--opt=VALUE` or flags.
VALUE_OPTIONS = frozenset({
    "--name", "--cidfile", "--label", "--network", "--cap-drop", "--security-opt", "--memory",
    "--memory-swap", "--cpus", "--shm-size", "--pids-limit", "--user", "--workdir",
    "--entrypoint", "--env", "-e", "--mount", "--device", "--group-add", "--ipc"})
ENV_OPTIONS = frozenset({"--env", "-e"})
MAX_TOKENS = 20_000  # a vector is a few hundred tokens

RUN_ID = "<run-id>"
RUN_DIR = "<run-dir>"
LAUNCH_ONLY = "<this launch>"
SEAL = "<seal>"
BY_NAME = "<passed by name>"
PER_LAUNCH_LABELS = frozenset({LAUNCHER_PID, LAUNCHER_STARTED, SLURM_JOB_LABEL})
ELIDED = ("the run id", "the run folder", "the launcher's pid and start time", "the Slurm job",
          f"{ENV_SEAL} (see seal)")


@dataclass(frozen=True)
class Option:
    flag: str
    value: str | None  # None: a flag alone
    joined: bool = False  # written `--flag=value`, one token

    def line(self) -> str:
        if self.value is None:
            return self.flag
        return f"{self.flag}={self.value}" if self.joined else f"{self.flag} {self.value}"


@dataclass(frozen=True)
class View:
    """One launch, normalised: option lines, the environment, the image and the command."""

    options: tuple[str, ...]
    env: dict[str, str]
    image: str | None
    command: str | None

    def lines(self) -> list[str]:
        """Everything but the environment, one comparable line each."""
        tail = [f"image {self.image}"] if self.image is not None else []
        if self.command is not None:
            tail.append(f"command {self.command}")
        return [*self.options, *tail]

    def env_lines(self) -> list[str]:
        return [f"--env {k}={v}" for k, v in self.env.items()]


def split(argv: list[str]) -> tuple[list[Option], str | None, list[str]]:
    """Pure: `docker run` options, the image and the command, from a vector.build argv."""
    options: list[Option] = []
    i = 2  # after "docker", "run"
    while i < len(argv):
        token = argv[i]
        if not token.startswith("-"):
            return options, token, argv[i + 1:]
        if "=" in token and token.startswith("--"):
            flag, value = token.split("=", 1)
            options.append(Option(flag, value, joined=True))
        elif token in VALUE_OPTIONS and i + 1 < len(argv):
            options.append(Option(token, argv[i + 1]))
            i += 1
        else:
            options.append(Option(token, None))
        i += 1
    return options, None, []


def run_folder_of(options: list[Option]) -> str | None:
    """The run folder as launched: the cidfile's folder (vector.build puts it there)."""
    for o in options:
        if o.flag == "--cidfile" and o.value and o.value.endswith("/" + CONTAINER_CID):
            folder = o.value[: -len(CONTAINER_CID) - 1]
            return folder or None
    return None


#: A run id shorter than this is not elided: a minted one is far longer, and a forged
#: record's "a" or "-" must not blank out every occurrence of that text in the diff.
ELIDE_MIN = 12


def elide(text: str, run_id: str | None, run_dir: str | None) -> str:
    """Pure: the run folder and run id in `text` replaced by placeholders; both come from the
    hostile record, so only a plausible run id and a matching absolute folder are replaced."""
    if run_id is None or len(run_id) < ELIDE_MIN:
        return text
    if run_dir and run_dir.startswith("/") and run_dir.endswith("/" + run_id):
        text = text.replace(run_dir, RUN_DIR)
    return text.replace(run_id, RUN_ID)


def env_entry(value: str, passed_env: dict) -> tuple[str, str]:
    """Pure: (name, value as shown) of one `--env` value: redacted when secret, the seal elided."""
    name, eq, shown = value.partition("=")
    if not eq:
        marker = passed_env.get(name)
        return name, marker if isinstance(marker, str) and marker.startswith("<redacted") \
            else BY_NAME
    if name == ENV_SEAL:
        return name, SEAL
    return name, redact(shown) if looks_secret(name) else shown


def _option_line(o: Option, run_id: str | None, run_dir: str | None) -> str:
    if o.flag == "--label" and o.value is not None:
        key = o.value.partition("=")[0]
        if key in PER_LAUNCH_LABELS:
            return f"--label {key}={LAUNCH_ONLY}"
    return elide(o.line(), run_id, run_dir)


def view(vector: Any, run_id: Any = None) -> View | None:
    """Pure: the normalised launch of docker-vector.json; None unless shaped `docker run …`."""
    argv = vector.get("argv") if isinstance(vector, dict) else None
    if (not isinstance(argv, list) or len(argv) > MAX_TOKENS or argv[:2] != ["docker", "run"]
            or not all(isinstance(t, str) for t in argv)):
        return None
    passed = vector.get("passed_env")
    passed = passed if isinstance(passed, dict) else {}
    run_id = run_id if isinstance(run_id, str) and run_id else None
    options, image, command = split(argv)
    run_dir = run_folder_of(options)
    env: dict[str, str] = {}
    lines: list[str] = []
    for o in options:
        if o.flag in ENV_OPTIONS and o.value is not None:
            name, shown = env_entry(o.value, passed)
            env[elide(name, run_id, run_dir)] = elide(shown, run_id, run_dir)
        else:
            lines.append(_option_line(o, run_id, run_dir))
    cmd = elide(shlex.join(command), run_id, run_dir) if image is not None else None
    return View(tuple(lines), env, None if image is None else elide(image, run_id, run_dir),
                cmd)
