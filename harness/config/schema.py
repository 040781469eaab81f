"""The shapes of campaigns, controls and the image lock, as strict pydantic models: unknown
keys are errors (a typo must not fall back to a default), names are restricted, durations
and sizes parsed once.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from harness.base import names
from harness.base.stoprule import StopPolicy
from harness.base.timeutil import parse_duration
from harness.config.builtins import POSTSTEPS, check_options
from harness.config.fieldlist import parse_choice
from harness.config.mountable import path_text_problem, plain_path_problem, target_problem
from harness.config.references import References

SAFE_NAME = names.SAFE_NAME  # the one alphabet of names (harness.base.names)
NameField = Annotated[str, StringConstraints(pattern=SAFE_NAME)]
ImageId = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
Sha256 = Annotated[str, StringConstraints(pattern=r"^(sha256:)?[0-9a-f]{64}$")]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]

MAX_CPUS = 1024.0


Duration = Annotated[float, BeforeValidator(parse_duration)]


def _refused_by(problem: Any) -> Any:
    """A validator that refuses a path text `problem` names a problem of."""
    def check(value: str) -> str:
        if (why := problem(value)) is not None:
            raise ValueError(f"{why}: {value!r}")
        return value
    return check


AbsPath = Annotated[str, AfterValidator(_refused_by(plain_path_problem))]
MountTarget = Annotated[str, AfterValidator(_refused_by(target_problem))]
# As the control writes it (relative to its file): only characters are refused here; the
# loader and the launch judge the resolved path.
SourcePath = Annotated[str, AfterValidator(_refused_by(path_text_problem))]


def _no_nul(data: Any) -> Any:
    """No string anywhere in a config may hold NUL: it cannot pass into an argv or a path,
    so a file that checks clean would fail (or be cut short) at run time."""
    stack = [(data, "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                raise ValueError(f"{where or 'a value'} contains a NUL character")
        elif isinstance(value, dict):
            for k, v in value.items():
                if isinstance(k, str) and "\x00" in k:
                    raise ValueError(f"a key under {where or 'the top'} contains a NUL "
                                     "character")
                stack.append((v, f"{where}.{k}" if where else str(k)))
        elif isinstance(value, list | tuple):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(value))
    return data


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=False, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _strings_without_nul(cls, data: Any) -> Any:
        return _no_nul(data)


class Mount(Strict):
    """A host folder made visible in the container. Read-only unless it says otherwise."""

    source: SourcePath = Field(description="host path, relative to the control file")
    target: MountTarget
    read_only: bool = True
    sealed: bool = True  # in the source seal; false: an environment (config/mountinputs.py)


class Model(Strict):
    """The model folder: always mounted read-only, its files' sha256 pinned."""

    source: SourcePath
    target: MountTarget = "/models/model"
    sha256: dict[str, Sha256] = Field(default_factory=dict)

    @field_validator("sha256")
    @classmethod
    def _relative(cls, v: dict[str, str]) -> dict[str, str]:
        for rel in v:
            if rel.startswith("/") or ".." in rel.split("/") or not rel:
                raise ValueError(f"pinned file names are relative to the model folder: {rel!r}")
        return v


_SIZE = re.compile(r"([0-9]{1,15})([bkmg]?)", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def size_bytes(value: str, least: int, most: int) -> int:
    """`256m` -> bytes, as docker reads it. Pure. Bounded both ways: docker reads `0` as
    "no limit" and refuses under 6 MiB of memory, so a clean file names a real limit."""
    m = _SIZE.fullmatch(value)
    if m is None:
        raise ValueError(f"not a size: {value!r} (use e.g. 512m or 2g)")
    n = int(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]
    if not least <= n <= most:
        raise ValueError(f"{value!r} must be between {least} and {most} bytes")
    return n


def _memory(value: str) -> str:
    size_bytes(value, 6 << 20, 1 << 44)
    return value


def _shm_size(value: str) -> str:
    size_bytes(value, 1, 1 << 40)
    return value


class Resources(Strict):
    """Container limits: each finite and bounded, so none can be switched off by NaN/inf."""

    memory: Annotated[str, AfterValidator(_memory)] | None = None
    cpus: float | None = Field(default=None, gt=0, le=MAX_CPUS)
    shm_size: Annotated[str, AfterValidator(_shm_size)] | None = None
    pids: int | None = Field(default=None, gt=0, le=1 << 22)


class KernelLog(Strict):
    """The kernel log over the run's window (harness.measure.kmsg). Read wherever the host
    allows; `required`: a log that cannot be read refuses the run instead of a note."""

    required: bool = False


class Telemetry(Strict):
    """Figures sampled while the container runs (harness.measure.telemetry), every
    `interval`; `required`: a gap over twice the interval, or no sample, refuses the run
    (TELEMETRY-GAP) instead of a note."""

    interval: Annotated[Duration, Field(ge=0.1, le=60.0)] = 1.0
    required: bool = False


class IdleGpu(Strict):
    """The GPU proven idle under the lock before launch (harness.judge.idlegpu): VRAM in
    use over `vram_max_mb` refuses; a foreign holder refuses at once, or after polling
    up to `wait_s` seconds for it to leave."""

    vram_max_mb: int = Field(default=512, ge=0, le=1 << 24)
    wait_s: Annotated[Duration, Field(ge=0.0, le=86400.0)] = 0.0


class PostStep(Strict):
    """A judge run after the container exits: a built-in by name, or a command."""

    name: NameField
    run: list[str] | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    timeout: Duration = 600.0

    @model_validator(mode="after")
    def _runs(self) -> PostStep:
        """Without `run:` the name must be a built-in: otherwise the step would only fail
        at run time, after the GPU was spent."""
        if self.run is None and self.name not in POSTSTEPS:
            raise ValueError(f"unknown built-in post-step {self.name!r} (built-ins: "
                             f"{', '.join(sorted(POSTSTEPS))}); give `run:` for a command")
        if self.run is not None and not self.run:
            raise ValueError(f"post-step {self.name!r}: `run:` is an empty command")
        if self.run is None:
            check_options(self.name, self.options)
        return self


def _post_step(value: Any) -> Any:
    return {"name": value} if isinstance(value, str) else value


class Control(Strict):
    """One prepared run."""

    name: NameField
    description: str = ""
    image: NameField = Field(description="a name in images.lock")
    device: Literal["rocm", "cpu"]
    gpus: str | None = Field(default=None, pattern=r"^[0-9]{1,3}(,[0-9]{1,3}){0,63}$")
    command: list[str] = Field(min_length=1)
    entrypoint: str | None = None
    workdir: AbsPath | None = None
    user: str | None = Field(default=None, pattern=r"^[0-9a-z_][0-9a-z_-]*(:[0-9a-z_-]+)?$")
    env: dict[EnvName, str | int | float | bool] = Field(default_factory=dict)
    secrets: list[EnvName] = Field(default_factory=list, description=(
        "names passed from the harness's own environment, never written in clear"))
    model: Model | None = None
    mounts: list[Mount] = Field(default_factory=list)
    network: Literal["none", "bridge", "host"] = "none"
    resources: Resources = Resources()
    timeout: Duration = 3600.0
    stop_grace: Duration = 10.0
    instrument: bool = False
    engine: dict[str, Any] = Field(default_factory=dict)
    post_steps: list[Annotated[PostStep, BeforeValidator(_post_step)]] = Field(
        default_factory=lambda: [PostStep(name="exit-code")])
    reference: References = Field(default_factory=dict)  # harness.config.references
    kernel_log: KernelLog = KernelLog()
    telemetry: Telemetry = Telemetry()
    idle_gpu: IdleGpu = IdleGpu()

    @model_validator(mode="after")
    def _checks(self) -> Control:
        if self.gpus is not None and self.device != "rocm":
            raise ValueError("gpus is only meaningful with device: rocm")
        names = [p.name for p in self.post_steps]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"post-step names must be unique: {sorted(dup)}")
        targets = [m.target for m in self.mounts] + ([self.model.target] if self.model else [])
        if len(set(targets)) != len(targets):
            raise ValueError("two mounts share a target path")
        clash = set(self.secrets) & set(self.env)
        if clash:
            raise ValueError(f"names both in env and secrets: {sorted(clash)}")
        return self


class ControlRef(Strict):
    control: NameField
    repeat: int = Field(default=1, ge=1, le=1000)


def _control_ref(value: Any) -> Any:
    return {"control": value} if isinstance(value, str) else value


class Retry(Strict):
    interrupted: int = Field(default=0, ge=0, le=10, description="extra attempts")


class Host(Strict):
    gfx: str | None = Field(default=None, pattern=r"^gfx[0-9a-f]+$")
    min_free_gib: float = Field(default=1.0, ge=0)


def _mount_root(value: str) -> str:
    if value == "/":  # every host path, the Docker socket included (loader: a link to /)
        raise ValueError("must not be '/' (it would make every host path mountable)")
    return value


class Campaign(Strict):
    name: NameField
    row: str = Field(min_length=1, max_length=200)
    description: str = ""
    lock: str = "~/gpu.lock"
    lock_timeout: Duration = 6 * 3600.0
    images_lock: str = "../images.lock"
    controls_dir: str = "../controls"
    mount_roots: list[Annotated[AbsPath, AfterValidator(_mount_root)]] = Field(
        default_factory=list, description="host folders under which mounts and models may live")
    host: Host = Host()
    controls: list[Annotated[ControlRef, BeforeValidator(_control_ref)]] = Field(min_length=1)
    stop_policy: StopPolicy = "continue"
    retry: Retry = Retry()
    contract: Annotated[list[str] | str, AfterValidator(parse_choice)] | None = None  # or all
    gates: list[Any] | None = None  # checked with positions by harness.config.gatelist (loader)
    gates_file: str | None = Field(default=None, min_length=1, max_length=1024)
    executor: dict[str, Any] | None = None  # checked with positions by harness.config.executor
    hook: dict[str, Any] | None = None  # checked with positions by harness.config.hook
    same_host: list[Any] | None = None  # checked with positions by harness.config.samehost
    require_approval: bool = False  # runs need an approval of their seal (harness.judge.approval)
    allowed_signers: str | None = Field(default=None, min_length=1, max_length=4096)


IMAGE_REF = r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,511}$"
ImageRef = Annotated[str, StringConstraints(pattern=IMAGE_REF)]
RepoDigest = Annotated[str, StringConstraints(
    pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,255}@sha256:[0-9a-f]{64}$")]
ARCHIVE_NAME = r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,254}$"


def _one_line(value: str) -> str:
    """Text shown to operators: one printable line, so it cannot forge other output lines."""
    if not value.strip():
        raise ValueError("must not be empty")
    if any(not ch.isprintable() for ch in value):
        raise ValueError("must be one line of printable text (no newline or control character)")
    return value


OneLine = Annotated[str, StringConstraints(max_length=500), AfterValidator(_one_line)]


class ImageArchive(Strict):
    """The `docker save` archive an image was pinned from; `docker load -i` gives it back."""

    sha256: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
    name: Annotated[str, StringConstraints(pattern=ARCHIVE_NAME)] | None = None


class PinChange(Strict):
    """One replacement of a pin: who, when, why, from which Id to which."""

    at: str = Field(pattern=r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
    old: ImageId
    new: ImageId
    reason: OneLine
    user: OneLine


class LockedImage(Strict):
    """A pin. `archive`, `repo_digest` and `build` say where *that* Id comes from."""

    id: ImageId
    ref: ImageRef | None = None
    repo_digest: RepoDigest | None = None
    store: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._-]{1,64}$")] | None = None
    archive: ImageArchive | None = None
    build: OneLine | None = Field(default=None, description="rebuilds this Id (advice only)")
    history: list[PinChange] = Field(default_factory=list, max_length=1000)


class ImageLock(Strict):
    images: dict[NameField, LockedImage] = Field(default_factory=dict)
