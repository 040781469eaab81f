"""The shapes of campaigns, controls and the image lock, as strict pydantic models.

Unknown keys are errors (a typo must not silently fall back to a default), names that
become folder or container names are restricted to a safe set, and durations and sizes are
parsed once here so the rest of the harness sees plain numbers.
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

SAFE_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
SafeName = Annotated[str, StringConstraints(pattern=SAFE_NAME)]
ImageId = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
Sha256 = Annotated[str, StringConstraints(pattern=r"^(sha256:)?[0-9a-f]{64}$")]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d)?\s*$")
_UNITS = {None: 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def parse_duration(value: Any) -> float:
    """`90`, `90s`, `30m`, `2h` -> seconds. Booleans are not durations."""
    if isinstance(value, bool):
        raise ValueError("a duration, not a boolean")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (m := _DURATION.match(value)):
        seconds = float(m.group(1)) * _UNITS[m.group(2)]
    else:
        raise ValueError(f"not a duration: {value!r} (use e.g. 90, 90s, 30m, 2h)")
    if seconds <= 0:
        raise ValueError("a duration must be positive")
    return seconds


Duration = Annotated[float, BeforeValidator(parse_duration)]


def _abs_path(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError(f"must be an absolute path: {value!r}")
    if "\x00" in value or any(part == ".." for part in value.split("/")):
        raise ValueError(f"must not contain '..' or NUL: {value!r}")
    return value


AbsPath = Annotated[str, AfterValidator(_abs_path)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


class Mount(Strict):
    """A host folder made visible in the container. Read-only unless it says otherwise."""

    source: str = Field(description="host path; relative paths are relative to the control file")
    target: AbsPath
    read_only: bool = True


class Model(Strict):
    """The model folder: always mounted read-only, its files' sha256 pinned."""

    source: str
    target: AbsPath = "/models/model"
    sha256: dict[str, Sha256] = Field(default_factory=dict)

    @field_validator("sha256")
    @classmethod
    def _relative(cls, v: dict[str, str]) -> dict[str, str]:
        for rel in v:
            if rel.startswith("/") or ".." in rel.split("/") or not rel:
                raise ValueError(f"pinned file names are relative to the model folder: {rel!r}")
        return v


class Resources(Strict):
    memory: str | None = Field(default=None, pattern=r"^\d+[bkmgBKMG]?$")
    cpus: float | None = Field(default=None, gt=0)
    shm_size: str | None = Field(default=None, pattern=r"^\d+[bkmgBKMG]?$")
    pids: int | None = Field(default=None, gt=0)


class PostStep(Strict):
    """A judge run after the container exits: a built-in by name, or a command."""

    name: SafeName
    run: list[str] | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    timeout: Duration = 600.0


def _post_step(value: Any) -> Any:
    return {"name": value} if isinstance(value, str) else value


class Control(Strict):
    """One prepared run."""

    name: SafeName
    description: str = ""
    image: SafeName = Field(description="a name in images.lock")
    device: Literal["rocm", "cpu"]
    gpus: str | None = Field(default=None, pattern=r"^\d+(,\d+)*$")
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
    control: SafeName
    repeat: int = Field(default=1, ge=1, le=1000)


def _control_ref(value: Any) -> Any:
    return {"control": value} if isinstance(value, str) else value


class Retry(Strict):
    interrupted: int = Field(default=0, ge=0, le=10, description="extra attempts")


class Host(Strict):
    gfx: str | None = Field(default=None, pattern=r"^gfx[0-9a-f]+$")
    min_free_gib: float = Field(default=1.0, ge=0)


class Campaign(Strict):
    name: SafeName
    row: str = Field(min_length=1, max_length=200)
    description: str = ""
    lock: str = "~/gpu.lock"
    lock_timeout: Duration = 6 * 3600.0
    images_lock: str = "../images.lock"
    controls_dir: str = "../controls"
    mount_roots: list[AbsPath] = Field(default_factory=list, description=(
        "host folders under which mounts and models may live"))
    host: Host = Host()
    controls: list[Annotated[ControlRef, BeforeValidator(_control_ref)]] = Field(min_length=1)
    stop_policy: Literal["continue", "stop-on-refusal", "stop-on-failure"] = "continue"
    retry: Retry = Retry()
    contract: list[str] | None = None


class LockedImage(Strict):
    id: ImageId
    ref: str | None = None
    repo_digest: str | None = None
    store: str | None = None


class ImageLock(Strict):
    images: dict[SafeName, LockedImage] = Field(default_factory=dict)
