"""One run of one control, stage by stage. A stop signal stops the container, releases the
lock and seals what exists `interrupted` (sealing defers signals); a SIGKILL leaves the
folder to `recover.seal_orphans`."""

from __future__ import annotations

import contextlib
import os
from dataclasses import replace
from pathlib import Path

from harness.base.catalogue import ENV_RUN_EXISTS, ENV_SEAL
from harness.base.errors import EnvironmentFault, InvalidInput
from harness.base.iofault import io_fault
from harness.base.names import RunId
from harness.base.signals import Interrupted, pending_signal, signals_deferred, signals_interrupt
from harness.config.loader import Loaded
from harness.measure.lock import GpuLock
from harness.measure.ui import Reporter
from harness.pipeline import finish, launch, post, preflight, recover
from harness.pipeline.context import RunContext
from harness.pipeline.results import Carried, Sealed
from harness.pipeline.stage import Stage, error_reason, run_stages


def make_context(loaded: Loaded, control_name: str, runs_dir: Path, ui: Reporter, *,
                 rerun_of: dict | None = None, attempt: int = 1,
                 run_id: str | None = None, carried: Carried | None = None) -> RunContext:
    """Create the run folder (never reused) and record who writes it. `run_id`: journaled
    before the folder exists; `carried`: what the run before offers."""
    if control_name not in loaded.controls:
        raise InvalidInput(f"campaign {loaded.campaign.name!r} has no control {control_name!r} "
                           f"(it has: {', '.join(loaded.controls)})")
    control, control_file = loaded.controls[control_name]
    run_id = RunId.parse(run_id) if run_id else RunId.mint(control_name)
    runs_dir = Path(os.path.abspath(runs_dir))
    run_dir = run_id.folder(runs_dir)
    camp = loaded.campaign
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
        # Never reused; private while open, so no other host user can plant observations
        # (docker mounts it as root, whatever uid the workload runs as). Sealing makes it 0555.
        run_dir.mkdir(mode=0o700)
        run_dir.chmod(0o700)  # whatever the umask
    except FileExistsError:  # e.g. Slurm started a job's script again after slurmctld
        raise EnvironmentFault(  # lost its state: the first start's evidence stays as is
            f"run folder {run_dir} already exists: run {run_id} was started before, and a "
            f"run folder is never reused", rule=ENV_RUN_EXISTS) from None
    except OSError as e:  # read-only, full, forbidden: the host's problem, said plainly
        raise io_fault(e, f"cannot write the runs folder {runs_dir}") from None
    try:
        recover.write_owner(
            run_dir, run_id=run_id, attempt=attempt, rerun_of=rerun_of,
            campaign={"name": camp.name, "file": str(loaded.campaign_file), "row": camp.row},
            control={"name": control.name, "file": str(control_file), "device": control.device})
    except OSError as e:
        with contextlib.suppress(OSError):
            run_dir.rmdir()  # nothing was recorded in it: leave no ownerless folder
        raise io_fault(e, f"cannot write the runs folder {runs_dir}") from None
    return RunContext(loaded, control, control_file, run_id, run_dir, ui,
                      rerun_of=rerun_of, attempt=attempt, carried=carried)


STAGES = (Stage("preflight", preflight.run), Stage("launch", launch.run),
          Stage("post", post.run, files=False))


def run_control(ctx: RunContext, *, lock_timeout: float | None = None,
                since: tuple[str, float] | None = None) -> Sealed:
    """Preflight, launch, post-steps, seal. `since`: when a lock wait began."""
    ui = ctx.ui
    ui.event("run", run_id=ctx.run_id, control=ctx.control.name, dir=str(ctx.run_dir))
    lock = GpuLock(ctx.loaded.lock_path, run_id=ctx.run_id,
                   timeout=lock_timeout or ctx.loaded.campaign.lock_timeout,
                   on_wait=ui.waiting, since=since)
    ctx = replace(ctx, lock=lock)
    with signals_interrupt():
        try:  # a stage's exception is recorded under the stage's name by run_stages
            run_stages(ctx, STAGES)
        except Interrupted as e:
            ctx.interrupted(str(e))
            ui.event("interrupted", signal=str(e), run_id=ctx.run_id,
                     doing=f"sealing run {ctx.run_id} as interrupted")
        finally:
            lock.release()
        with signals_deferred():
            try:
                sealed = finish.run(ctx)
            except OSError as e:
                raise EnvironmentFault(f"could not seal {ctx.run_dir}: {error_reason(e)}; "
                                       "the folder is left unsealed and will be sealed as "
                                       "interrupted by the next run", rule=ENV_SEAL) from None
    ui.event("sealed", run_id=ctx.run_id, status=sealed.status, dir=str(ctx.run_dir),
             reasons=[str(r) for r in sealed.reasons])
    if pending_signal():
        ui.event("interrupted", signal=pending_signal(), after="sealing")
        sealed = replace(sealed, stop_requested=True)
    return sealed
