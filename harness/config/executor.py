"""A campaign's `executor:` block: where `harness night` runs its controls.

    executor:
      kind: slurm          # local (default): here, one after another; slurm: one job each
      partition: gpu       # sbatch --partition (optional)
      account: lab         # sbatch --account (optional)
      drop: /shared/drop   # shared folder: job scripts and logs (<drop>/jobs), bundles
      host_runs_dir: /var/lib/harness/runs  # runs on each host's disk, home as bundles
      seal_grace: 2m       # after Slurm says a job ended, how long to wait for its seal
      window: 4            # at most this many jobs submitted or running at once

`harness night --executor slurm --partition P --account A --drop DIR` sets the same keys
for one start; the command line wins. The Campaign model keeps the raw mapping (schema.py
imports nothing from here), and the loader validates it with positions, as for `gates:`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from harness.base.errors import InvalidInput
from harness.config.schema import Duration, NameField, Strict

KINDS = ("local", "slurm")
WINDOW = 4  # small: --until or a stop-on-refusal has at most this many pending jobs to cancel


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
