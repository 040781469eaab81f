"""The docker vector: the exact `docker run` argv for one run, built by a pure function.

Safe defaults in one place: never `--privileged`, `--network none` unless asked, model and
instrument mounts read-only, secrets by name only, `--pull=never`, launch by image Id, and
labels that let a later run find an orphan. Every value is its own argv element, except
inside `--mount`, whose CSV `mount_arg` builds from paths `plain_path_problem` accepts."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.base import bounds
from harness.base.bounds import BadText
from harness.base.catalogue import ENV_GPU_MAP, MOUNT_UNSAFE_PATH
from harness.base.errors import InvalidInput
from harness.config.gpumapfile import node_problem
from harness.instrument.harness_observer import interface
from harness.instrument.harness_observer.interface import (
    ENGINE_SECRET_PREFIX,
    INSTRUMENT_TARGET,
    OBSERVATIONS_TARGET,
)

# The schema (pydantic) is imported only when a mount is checked (mount_arg), so that
# `harness status`, which reads LABEL_PREFIX alone, does not load the configuration models.
if TYPE_CHECKING:
    from harness.config.schema import Control

LABEL_PREFIX = "org.harness"
SLURM_JOB_LABEL = f"{LABEL_PREFIX}.slurm-job"
# Who launched a container (`labels`: from `VectorInput.launcher`), read back by the orphan
# reaper and by `harness status`: is the harness that holds the lock for it still there?
LAUNCHER_PID = f"{LABEL_PREFIX}.launcher-pid"
LAUNCHER_STARTED = f"{LABEL_PREFIX}.launcher-started"
LAUNCHER_HOST = f"{LABEL_PREFIX}.launcher-host"
# An engine value whose key looks secret becomes {SECRET_REF: "<env name>"}; the in-container
# driver reads the value (JSON) from that env var, which docker gets by name only.
SECRET_REF = "$harness_secret_env"

# vLLM's documented ROCm flags (see docs/vllm-notes.md), minus SYS_PTRACE: not needed to run.
ROCM_REST = ["--group-add", "video", "--group-add", "render",
             "--ipc=host", "--security-opt", "seccomp=unconfined"]
ROCM_FLAGS = ["--device", "/dev/kfd", "--device", "/dev/dri", *ROCM_REST]
# Device masks the host sets (Slurm's gres, a login shell): never read from the harness's
# environment into a container, whose device numbering restarts at 0 (docs/slurm.md).
HOST_DEVICE_MASKS = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES",
                     "GPU_DEVICE_ORDINAL")
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
    # As declared (resolved against the control's folder, before symlinks), for the evidence.
    declared_sources: tuple[str, ...] = ()
    model_declared: str | None = None
    launcher: dict[str, str] = field(default_factory=dict)  # pid, start time, host
    slurm_job: str | None = None  # the Slurm job id, when the run is a job (Epilog cleanup)
    # In a Slurm job on the rocm profile: the allocated GPUs' render nodes (the host's GPU
    # map); the container gets /dev/kfd and these, never all of /dev/dri. None: one host.
    render_nodes: tuple[str, ...] | None = None


@dataclass(frozen=True)
class BindMount:
    """One `--mount`: the host path docker gets, and what the control declared."""

    role: str  # model | instrument | observations | control
    source: str
    target: str
    read_only: bool
    declared: str | None = None

    def evidence(self) -> dict:
        return {"role": self.role, "declared": self.declared, "source": self.source,
                "target": self.target, "read_only": self.read_only}


def mount_arg(m: BindMount) -> str:
    """The `--mount` value for `m`; raises rather than emit a value docker could read
    differently (a `,` in a path would add fields, and docker keeps the last `source=`)."""
    from harness.config.mountable import plain_path_problem, target_problem

    problems = [("source", m.source, plain_path_problem(m.source)),
                ("target", m.target, target_problem(m.target) if m.role in ("control", "model")
                 else plain_path_problem(m.target))]
    for what, value, why in problems:
        if why is not None:
            raise InvalidInput(f"the {m.role} mount's {what} {value!r} {why}",
                               rule=MOUNT_UNSAFE_PATH)
    return (f"type=bind,source={m.source},target={m.target}"
            + (",readonly" if m.read_only else ""))


def labels(inp: VectorInput) -> dict[str, str]:
    out = {
        f"{LABEL_PREFIX}.run-id": inp.run_id,
        f"{LABEL_PREFIX}.campaign": inp.campaign,
        f"{LABEL_PREFIX}.control": inp.control.name,
        f"{LABEL_PREFIX}.device": inp.control.device,
        f"{LABEL_PREFIX}.lock": str(inp.lock_path),
    }
    out.update({f"{LABEL_PREFIX}.launcher-{k}": v for k, v in inp.launcher.items()})
    if inp.slurm_job is not None:  # scripts/slurm-epilog.sh stops containers by this label
        out[SLURM_JOB_LABEL] = inp.slurm_job
    return out


def launcher_of(container_labels: dict) -> tuple[int, float, str] | None:
    """(pid, start time, host) of the harness that launched a container, from its labels; None
    when missing or malformed (labels are anyone's who can reach the engine). Pure."""
    try:
        return (bounds.parse_int(container_labels[LAUNCHER_PID], "a launcher pid",
                                 max_digits=10),
                bounds.parse_decimal(container_labels[LAUNCHER_STARTED],
                                     "a launcher start time"),
                str(container_labels[LAUNCHER_HOST]))
    except (KeyError, BadText):
        return None


def env_value(v: object) -> str:
    """Pure: an `env` value as docker is given it (a bool as 1 or 0)."""
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


def split_engine_secrets(engine: Any) -> tuple[Any, dict[str, str]]:
    """Secret-looking keys' values (any depth) -> env references: (shown args, {env: JSON})."""
    secrets: dict[str, str] = {}

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            out = {}
            for key in sorted(value, key=str):
                if looks_secret(str(key)):
                    name = f"{ENGINE_SECRET_PREFIX}{len(secrets)}"
                    secrets[name] = json.dumps(value[key], sort_keys=True)
                    out[str(key)] = {SECRET_REF: name}
                else:
                    out[str(key)] = walk(value[key])
            return out
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return walk(engine), secrets


@dataclass(frozen=True)
class Vector:
    """The argv, plus values docker must read from the launcher's environment (secrets)."""

    argv: list[str]
    passed_env: dict[str, str]
    mounts: list[BindMount] = field(default_factory=list)

    def evidence(self) -> dict:
        """docker-vector.json: the exact argv, secrets as sha256 markers, each mount."""
        return {"argv": self.argv,
                "passed_env": {k: redact(v) for k, v in self.passed_env.items()},
                "mounts": [m.evidence() for m in self.mounts]}


def bind_mounts(inp: VectorInput) -> list[BindMount]:
    """Every mount of the run, in argv order."""
    ctl = inp.control
    out = []
    if ctl.model and inp.model_source is not None:
        out.append(BindMount("model", str(inp.model_source), ctl.model.target, True,
                             inp.model_declared))
    if ctl.instrument:
        out.append(BindMount("instrument", str(inp.instrument_dir), INSTRUMENT_TARGET, True))
    out.append(BindMount("observations", str(inp.observations_dir), OBSERVATIONS_TARGET, False))
    declared = inp.declared_sources or (None,) * len(ctl.mounts)
    for m, src, dec in zip(ctl.mounts, inp.mount_sources, declared, strict=True):
        out.append(BindMount("control", str(src), m.target, m.read_only, dec))
    return out


def device_args(ctl: Control, render_nodes: tuple[str, ...] | None) -> list[str]:
    """The device profile's flags: all of /dev/dri on one host; in a Slurm job /dev/kfd and the
    allocated render nodes, each a plain path (`--device` reads `:` as a separator)."""
    if ctl.device != "rocm":
        return list(CPU_FLAGS)
    if render_nodes is None:
        return list(ROCM_FLAGS)
    if not render_nodes:
        raise InvalidInput("a Slurm job's container needs at least one render node",
                           rule=ENV_GPU_MAP)
    argv = ["--device", "/dev/kfd"]
    for node in render_nodes:
        problem = node_problem(node)  # the GPU map's own rule for its entries
        if problem is not None:
            raise InvalidInput(f"render node {str(node)[:300]!r} {problem}", rule=ENV_GPU_MAP)
        argv += ["--device", node]
    return argv + ROCM_REST


def _sandbox_args(ctl: Control, render_nodes: tuple[str, ...] | None = None) -> list[str]:
    """Network, device profile, resource limits and the process's user and place."""
    argv = ["--network", ctl.network]
    argv += device_args(ctl, render_nodes)
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
    return argv


def build(inp: VectorInput, environ: dict[str, str] | None = None) -> Vector:
    """The `docker run` vector for this run, no I/O; secrets are passed by name only."""
    environ = environ or {}
    ctl = inp.control
    argv = ["docker", "run", "--pull=never", "--name", f"harness-{inp.run_id}",
            "--cidfile", str(inp.cidfile)]
    for k, v in sorted(labels(inp).items()):
        argv += ["--label", f"{k}={v}"]
    argv += _sandbox_args(ctl, inp.render_nodes)

    env: dict[str, str] = {k: env_value(v) for k, v in ctl.env.items()}
    if ctl.device == "rocm" and ctl.gpus is not None:
        env["HIP_VISIBLE_DEVICES"] = ctl.gpus
    env[interface.ENV_RUN_ID] = inp.run_id
    env[interface.ENV_IMAGE_ID] = inp.image_id
    env[interface.ENV_OBSERVATIONS_DIR] = OBSERVATIONS_TARGET
    if ctl.engine:
        shown, engine_secrets = split_engine_secrets(ctl.engine)
        env[interface.ENV_ENGINE_ARGS] = json.dumps(shown, sort_keys=True)
        env.update(engine_secrets)
    if ctl.instrument:
        # The instrument first: a mounted venv the control adds (the engine's) is searched
        # after it, so no package of the workload can stand in for the observer.
        own = env.get("PYTHONPATH")
        env["PYTHONPATH"] = INSTRUMENT_TARGET + (f":{own}" if own else "")
    env.update(inp.extra_env)
    passed: dict[str, str] = {}
    for k in sorted(env):
        if looks_secret(k):
            passed[k] = env[k]
            argv += ["--env", k]
        else:
            argv += ["--env", f"{k}={env[k]}"]
    for name in ctl.secrets:  # by name only: docker reads the value from our environment
        if name in HOST_DEVICE_MASKS:
            raise InvalidInput(f"secrets: {name} is a device mask the host sets; it is never "
                               "passed from the harness's environment (set it in env:)")
        if name in environ:
            passed[name] = environ[name]
        argv += ["--env", name]

    mounts = bind_mounts(inp)
    for m in mounts:
        argv += ["--mount", mount_arg(m)]

    argv.append(inp.image_id)
    argv += ctl.command
    return Vector(argv, passed, mounts)


def redact(value: str) -> str:
    """A marker that lets a reviewer check a secret they hold, without storing it."""
    return f"<redacted sha256:{hashlib.sha256(value.encode()).hexdigest()}>"


_WORDS = re.compile(r"[^_\-.0-9 ]+")
_SECRET_WORD = re.compile(
    r"(?:TOKEN|KEYS?|SECRETS?|PASSWORDS?|PASSWD|PASSPHRASE|PWD|AUTH|CREDENTIALS?)$")


def looks_secret(name: str) -> bool:
    """Does a name (env var or engine key) look like it holds a secret?

    Judged per word (split at `_`, `-`, `.`, spaces and digits) by how it ends: `HF_TOKEN`,
    `apiKey`, `DB_PASSPHRASE` are secret; `max_num_batched_tokens` and `tokenizer` are not:
    over-redacting engine sizes would hide what a reviewer needs."""
    return any(_SECRET_WORD.search(w) for w in _WORDS.findall(name.upper()))
