"""A campaign's `executor:` block: where `harness night` runs its controls (local, or one
Slurm job each; keys in docs/slurm.md). The command line's flags win over it. Validated by
the loader with positions, so schema.py imports nothing from here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from harness.base.errors import InvalidInput
from harness.config.samehost import MAX_GROUP
from harness.config.schema import Duration, NameField, Strict

KINDS = ("local", "slurm")
WINDOW = 4  # small: --until or a stop-on-refusal has at most this many pending jobs to cancel
# A slot's controls one Slurm job carries, each next run waiting on the host's GPU lock so
# the GPU never waits for the scheduler; small, because the job's --time is their sum and a
# retry after a lost node starts the job's unfinished runs over on another node.
RUNS_PER_JOB = 4
MAX_RUNS_PER_JOB = MAX_GROUP  # a job's name carries every control, as a group's does


class ExecutorConfig(Strict):
    """The `executor:` block as written (the driver's executors are what runs)."""

    kind: Literal["local", "slurm"] = "local"
    partition: NameField | None = None
    account: NameField | None = None
    drop: str | None = Field(default=None, min_length=1, max_length=1024,
                             description="relative to the campaign file, or absolute")
    harness: str | None = Field(default=None, min_length=1, max_length=1024,
                                description="the harness executable on every host "
                                            "(default: this one's path)")
    home_root: str | None = Field(default=None, min_length=1, max_length=1024,
                                  description="HOME=<home_root>/<node> in each job: one GPU "
                                              "lock per host where homes are shared")
    host_runs_dir: str | None = Field(
        default=None, min_length=1, max_length=1024,
        description="where each host writes its run folders, on its own disk (absolute); "
                    "default: the night's --runs-dir, which must then be shared")
    seal_grace: Duration = Field(default=120.0, ge=0, le=24 * 3600)
    window: int = Field(default=WINDOW, ge=1, le=10_000,
                        description="jobs submitted or running at once (slurm); a stop "
                                    "cancels only those still pending")
    runs_per_job: int = Field(default=RUNS_PER_JOB, ge=1, le=MAX_RUNS_PER_JOB,
                              description="a slot's next controls one Slurm job runs, each "
                                          "next run waiting on the host's GPU lock (a "
                                          "same_host group is never split)")


class ExecutorBlock(Strict):
    """The wrapper the loader validates `{"executor": ...}` with, for positions."""

    executor: ExecutorConfig = ExecutorConfig()


def merged(base: ExecutorConfig, **given: Any) -> ExecutorConfig:
    """`base` with the command line's values (None: not given) on top, validated again."""
    values = {**base.model_dump(), **{k: v for k, v in given.items() if v is not None}}
    try:
        return ExecutorConfig.model_validate(values)
    except ValueError as e:
        raise InvalidInput(f"--executor options: {e}") from None
