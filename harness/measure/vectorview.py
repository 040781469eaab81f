"""A recorded docker vector read back: its options, environment, image and command, as two
runs of the same control can be compared (`harness diff`). Pure.

`vector.build` writes the argv that docker-vector.json records; this reads it back. Some
tokens belong to one launch alone: the run id (in the container name, a label and
HARNESS_RUN_ID), the run folder (the cidfile, the observations mount), the launcher's pid
and start time, the Slurm job, and the source seal the container is told (the seal has
its own topic in the diff). Each is replaced by a placeholder (`ELIDED`), so two launches
of one control differ only where someone changed something: an added environment variable
reads `--env VLLM_ENABLE_V1_MULTIPROCESSING=0` on one side only.

The argv comes from a run folder and is hostile: anything that is not a list of strings
shaped like `docker run …` is not read (None). Values of secret-looking names never leave
here in clear (`vector.looks_secret`, `vector.redact`, the vector's own rules): the
vector passes them by name only, and an older or edited argv holding one is redacted.
"""

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

# The options vector.build writes as `--opt VALUE` (two tokens); others are `--opt=VALUE`
# or flags alone.
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
    """One launch, normalised: option lines (env apart) in argv order, the environment
    (name -> value, elided and redacted), the image and the command (shell-quoted)."""

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
    """Pure: `docker run` options, the image (the first token that is no option's) and the
    command after it, from an argv as vector.build writes it."""
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
    """Pure: the run folder and the run id in `text` replaced by their placeholders. Both
    come from the run's own (hostile) record, so only a run id long enough to be one and
    only a run folder that is absolute and named for that run id are replaced."""
    if run_id is None or len(run_id) < ELIDE_MIN:
        return text
    if run_dir and run_dir.startswith("/") and run_dir.endswith("/" + run_id):
        text = text.replace(run_dir, RUN_DIR)
    return text.replace(run_id, RUN_ID)


def env_entry(value: str, passed_env: dict) -> tuple[str, str]:
    """Pure: (name, value as shown) of one `--env` value: a value passed by name shows the
    vector's sha256 marker when it recorded one; a secret-looking name's value is redacted;
    the seal the container is told is elided (the diff compares seals on their own)."""
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
    """Pure: the normalised launch of a docker-vector.json document; None when it holds no
    argv shaped like `docker run …` (absent, hostile or cut)."""
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
