"""What a run inside a Slurm job records about that job, from its environment. Pure.

Recorded, never forwarded (the container's environment comes from the control alone).
Every variable is hostile: a value must match a narrow pattern or it is left out."""

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
    """The GPU indexes in `SLURM_JOB_GPUS`, each once, in Slurm's order; None otherwise."""
    value = _matching(environ, "SLURM_JOB_GPUS", _INDEXES.fullmatch)
    if value is None:
        return None
    return tuple(dict.fromkeys(bounds.parse_int(i, "a GPU index", max_digits=4)
                               for i in value.split(",")))


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
        "node": _matching(environ, "SLURMD_NODENAME", is_name),
        "gpus": _matching(environ, "SLURM_JOB_GPUS", _INDEXES.fullmatch),
        "rocr_visible_devices": _matching(environ, "ROCR_VISIBLE_DEVICES", _INDEXES.fullmatch),
    }
