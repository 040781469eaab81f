"""What a run inside a Slurm job records about that job, read from its environment. Pure.

Why: a run's evidence must say where it ran and on what, without asking Slurm later (its
answers expire): the job id and its idempotency token (the controller maps the sealed run
back to its journal row by them), the node, and the GPU indexes Slurm allocated
(`SLURM_JOB_GPUS`, and `ROCR_VISIBLE_DEVICES` as gres.conf `Flags=amd_gpu_env` sets it).
These values are recorded, never forwarded: the container's environment is built by the
vector from the control alone, so the host's ROCR_VISIBLE_DEVICES never reaches it as is
(inside a container device indexes restart at 0; ROCR and HIP number devices differently).

Every value is hostile (a user can set any of these variables): each must match a narrow
pattern or it is left out, so a forged value can neither break a label nor a record.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from harness.base import bounds
from harness.base.names import is_name

_JOB_ID = re.compile(r"[0-9]{1,12}")
_INDEXES = re.compile(r"[0-9]{1,4}(,[0-9]{1,4}){0,63}")
TOKEN_ENV = "HARNESS_SLURM_TOKEN"


def job_id(environ: Mapping[str, str]) -> str | None:
    """The job's id when this process runs in a Slurm job (a plain number), else None."""
    value = environ.get("SLURM_JOB_ID", "")
    return value if _JOB_ID.fullmatch(value) else None


def gpu_indexes(environ: Mapping[str, str]) -> tuple[int, ...] | None:
    """The GPU indexes Slurm allocated to this job on this node (`SLURM_JOB_GPUS`, e.g.
    `0,1`), each once, in Slurm's order; None when absent or not such a list. Pure."""
    value = _matching(environ, "SLURM_JOB_GPUS", _INDEXES.fullmatch)
    if value is None:
        return None
    return tuple(dict.fromkeys(bounds.parse_int(i, "a GPU index", max_digits=4)
                               for i in value.split(",")))


def node_name(text: object) -> bool:
    """A plain Slurm node name: a safe name (harness.base.names), never a list or a
    pattern, at most 64 characters."""
    return is_name(text)


def _matching(environ: Mapping[str, str], name: str,
              ok: Callable[[str], object]) -> str | None:
    value = environ.get(name, "")
    return value if ok(value) else None


def record(environ: Mapping[str, str]) -> dict[str, str | None] | None:
    """run.json's `slurm` block, or None outside a job. Unreadable values are None."""
    job = job_id(environ)
    if job is None:
        return None
    # Only inside a job: every local run records `slurm: null` without loading the sbatch
    # builder (its patterns and dataclasses are a few ms of each run's start).
    from harness.measure.slurm.job import parse_token

    token = environ.get(TOKEN_ENV, "")
    return {
        "job_id": job,
        "token": token if parse_token(token) is not None else None,
        "node": _matching(environ, "SLURMD_NODENAME", node_name),
        "gpus": _matching(environ, "SLURM_JOB_GPUS", _INDEXES.fullmatch),
        "rocr_visible_devices": _matching(environ, "ROCR_VISIBLE_DEVICES", _INDEXES.fullmatch),
    }
