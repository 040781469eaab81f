"""The executor a night's controls run on: here (`LocalExecutor`), or one Slurm job per
launch (`SlurmExecutor`). The one place that looks at `executor.kind`; for Slurm it makes
each job's settings from the campaign, the night and the site."""

from __future__ import annotations

import functools
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path

from harness.base.errors import InvalidInput
from harness.config.executor import ExecutorConfig
from harness.config.loader import Loaded, resolve
from harness.driver.local import LocalExecutor
from harness.driver.plan import LaunchRequest, NightExecutor
from harness.driver.slurmjobs import Settings, SlurmExecutor
from harness.measure.slurm import calls
from harness.measure.slurm.job import Site
from harness.measure.ui import Reporter

# (drop, runs_dir, run id) -> the arrival's record, or None when nothing new came.
Fetch = Callable[[Path, Path, str], "Mapping[str, object] | None"]


def harness_path(configured: str | None) -> str:
    """The `harness` the jobs exec: the configured one, else the one running now."""
    if configured is not None:
        return os.path.abspath(os.path.expanduser(configured))
    beside = Path(sys.executable).parent / "harness"
    found = str(beside) if beside.is_file() else shutil.which("harness")
    if found is None:
        raise InvalidInput("executor: cannot tell where `harness` is; set executor.harness")
    return os.path.abspath(found)


def site_of(loaded: Loaded, config: ExecutorConfig, runs_dir: Path) -> Site:
    drop = (resolve(config.drop, loaded.campaign_file.parent) if config.drop
            else runs_dir / "slurm")
    home = (str(resolve(config.home_root, loaded.campaign_file.parent))
            if config.home_root else None)
    runs = config.host_runs_dir or str(runs_dir)
    if not os.path.isabs(runs):
        raise InvalidInput(f"executor.host_runs_dir must be absolute (a path on every host): "
                           f"{runs[:200]!r}")
    return Site(harness=harness_path(config.harness), workdir=str(loaded.project_dir),
                runs_dir=runs, drop=str(drop), partition=config.partition,
                account=config.account, gfx=loaded.campaign.host.gfx, home_root=home)


def night_executor(loaded: Loaded, config: ExecutorConfig, ui: Reporter, *, night_dir: Path,
                   runs_dir: Path, lock_timeout: float | None, until: datetime | None,
                   on_submitted: Callable[[LaunchRequest, str, str], None] | None,
                   fetch: Fetch | None = None) -> NightExecutor:
    """The executor of `config.kind`: this host, or a Slurm job per launch (`fetch` bound
    to this night's drop and runs folder)."""
    if config.kind == "local":
        return LocalExecutor(loaded, ui, lock_timeout=lock_timeout)
    found = calls.history()  # sacct or the jobcomp file, where the cluster keeps them
    site = site_of(loaded, config, runs_dir)
    # only for runs on hosts' own disks: a shared RUNS_DIR's folder is the evidence itself
    bound = (functools.partial(fetch, Path(site.drop), runs_dir)
             if fetch is not None and config.host_runs_dir else None)
    settings = Settings(
        night=night_dir.name, campaign_file=str(loaded.campaign_file),
        site=site, fetch=bound,
        lock_wait_s=lock_timeout or loaded.campaign.lock_timeout, until=until,
        seal_grace_s=config.seal_grace, use_sacct=found.use_sacct, jobcomp=found.jobcomp)
    return SlurmExecutor(loaded, ui, settings, on_submitted=on_submitted,
                         window=config.window, per_job=config.runs_per_job)
