"""The docker vector: the exact `docker run` argv for one run, built by a pure function.

Safe defaults live here, where a reviewer can read them in one place: never
`--privileged`, `--network none` unless the control asks, model and instrument mounts
read-only, secrets passed by name only (their values never enter the argv), `--pull=never`
(no registry), launch by image Id, and labels that let a later run find an orphan.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from harness.config.schema import Control

LABEL_PREFIX = "org.harness"
INSTRUMENT_TARGET = "/opt/harness-instrument"
OBSERVATIONS_TARGET = "/harness/out"

# vLLM's documented ROCm flags (see docs/vllm-notes.md), minus SYS_PTRACE: not needed to run.
ROCM_FLAGS = [
    "--device", "/dev/kfd", "--device", "/dev/dri",
    "--group-add", "video", "--group-add", "render",
    "--ipc=host", "--security-opt", "seccomp=unconfined",
]
# The rehearsal profile has no devices and needs no privilege at all.
CPU_FLAGS = ["--cap-drop", "ALL", "--security-opt", "no-new-privileges"]


@dataclass(frozen=True)
class VectorInput:
    control: Control
    image_id: str
    run_id: str
    campaign: str
    lock_path: Path
    cidfile: Path
    observations_dir: Path
    instrument_dir: Path
    mount_sources: tuple[Path, ...] = ()  # host paths of control.mounts, resolved, in order
    model_source: Path | None = None
    extra_env: dict[str, str] = field(default_factory=dict)


def labels(inp: VectorInput) -> dict[str, str]:
    return {
        f"{LABEL_PREFIX}.run-id": inp.run_id,
        f"{LABEL_PREFIX}.campaign": inp.campaign,
        f"{LABEL_PREFIX}.control": inp.control.name,
        f"{LABEL_PREFIX}.device": inp.control.device,
        f"{LABEL_PREFIX}.lock": str(inp.lock_path),
    }


def container_name(run_id: str) -> str:
    return f"harness-{run_id}"


def _env_value(v: object) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


@dataclass(frozen=True)
class Vector:
    """The argv, plus values docker must read from the launcher's environment (secrets)."""

    argv: list[str]
    passed_env: dict[str, str]

    def evidence(self) -> dict:
        """What `docker-vector.json` holds: the exact argv; secrets only as sha256 markers."""
        return {"argv": self.argv, "passed_env": {k: redact(v) for k, v in self.passed_env.items()}}


def build(inp: VectorInput, environ: dict[str, str] | None = None) -> Vector:
    """Return the `docker run` vector for this run. No I/O.

    `environ` is where secrets named by the control are read from (the harness's own
    environment); they and any secret-looking `env` entries go by name only.
    """
    environ = environ or {}
    ctl = inp.control
    argv = ["docker", "run", "--pull=never", "--name", container_name(inp.run_id),
            "--cidfile", str(inp.cidfile)]
    for k, v in sorted(labels(inp).items()):
        argv += ["--label", f"{k}={v}"]
    argv += ["--network", ctl.network]
    argv += ROCM_FLAGS if ctl.device == "rocm" else CPU_FLAGS
    res = ctl.resources
    if res.memory:
        argv += ["--memory", res.memory, "--memory-swap", res.memory]
    if res.cpus:
        argv += ["--cpus", f"{res.cpus:g}"]
    if res.shm_size:
        argv += ["--shm-size", res.shm_size]
    argv += ["--pids-limit", str(res.pids or 4096)]
    if ctl.user:
        argv += ["--user", ctl.user]
    if ctl.workdir:
        argv += ["--workdir", ctl.workdir]
    if ctl.entrypoint is not None:
        argv += ["--entrypoint", ctl.entrypoint]

    env: dict[str, str] = {k: _env_value(v) for k, v in ctl.env.items()}
    if ctl.device == "rocm" and ctl.gpus is not None:
        env["HIP_VISIBLE_DEVICES"] = ctl.gpus
    env["HARNESS_RUN_ID"] = inp.run_id
    env["HARNESS_IMAGE_ID"] = inp.image_id
    env["HARNESS_OBSERVATIONS_DIR"] = OBSERVATIONS_TARGET
    if ctl.engine:
        env["HARNESS_ENGINE_ARGS"] = json.dumps(ctl.engine, sort_keys=True)
    if ctl.instrument:
        env["PYTHONPATH"] = INSTRUMENT_TARGET
    env.update(inp.extra_env)
    passed: dict[str, str] = {}
    for k in sorted(env):
        if looks_secret(k):
            passed[k] = env[k]
            argv += ["--env", k]
        else:
            argv += ["--env", f"{k}={env[k]}"]
    for name in ctl.secrets:  # by name only: docker reads the value from our environment
        if name in environ:
            passed[name] = environ[name]
        argv += ["--env", name]

    if ctl.model and inp.model_source is not None:
        argv += ["--mount", f"type=bind,source={inp.model_source},target={ctl.model.target},"
                            "readonly"]
    if ctl.instrument:
        argv += ["--mount", f"type=bind,source={inp.instrument_dir},target={INSTRUMENT_TARGET},"
                            "readonly"]
    argv += ["--mount", f"type=bind,source={inp.observations_dir},target={OBSERVATIONS_TARGET}"]
    for m, src in zip(ctl.mounts, inp.mount_sources, strict=True):
        spec = f"type=bind,source={src},target={m.target}"
        argv += ["--mount", spec + (",readonly" if m.read_only else "")]

    argv.append(inp.image_id)
    argv += ctl.command
    return Vector(argv, passed)


def redact(value: str) -> str:
    """A marker that lets a reviewer check a secret they hold, without storing it."""
    return f"<redacted sha256:{hashlib.sha256(value.encode()).hexdigest()}>"


def looks_secret(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD"))
