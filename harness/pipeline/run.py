"""One run of one control, stage by stage, with SIGTERM/SIGINT turned into a clean stop.

On a signal the container is stopped, the lock released, and what exists is sealed with
status `interrupted`; a SIGKILL cannot be caught, and the kernel frees the lock instead.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

from harness.config.loader import Loaded
from harness.errors import InvalidInput
from harness.execute import Interrupted
from harness.lock import GpuLock
from harness.pipeline import finish, launch, post, preflight
from harness.pipeline.context import RunContext, new_run_id
from harness.ui import Reporter
from harness.verdict import Reason


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """Turn SIGTERM and SIGINT into `Interrupted` in the main thread for the duration."""

    def handler(signum: int, frame: object) -> None:
        raise Interrupted(signal.Signals(signum).name)

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def make_context(loaded: Loaded, control_name: str, runs_dir: Path, ui: Reporter, *,
                 rerun_of: dict | None = None, attempt: int = 1) -> RunContext:
    if control_name not in loaded.controls:
        raise InvalidInput(f"campaign {loaded.campaign.name!r} has no control {control_name!r} "
                           f"(it has: {', '.join(loaded.controls)})")
    control, control_file = loaded.controls[control_name]
    run_id = new_run_id(control_name)
    runs_dir = Path(os.path.abspath(runs_dir))
    runs_dir.mkdir(parents=True, exist_ok=True)
    run_dir = runs_dir / run_id
    run_dir.mkdir()  # fails if it exists: a run folder is never reused
    return RunContext(loaded, control, control_file, run_id, run_dir, ui,
                      rerun_of=rerun_of, attempt=attempt)


def run_control(ctx: RunContext, *, lock_timeout: float | None = None) -> tuple[str, list[Reason]]:
    """Preflight, lock, launch, release, post-steps, seal. Returns (status, reasons)."""
    ui = ctx.ui
    ui.event("run", run_id=ctx.run_id, control=ctx.control.name, dir=str(ctx.run_dir))
    lock = GpuLock(ctx.loaded.lock_path, run_id=ctx.run_id,
                   timeout=lock_timeout or ctx.loaded.campaign.lock_timeout, on_wait=ui.waiting)
    with signals_interrupt():
        try:
            reasons = preflight.run(ctx)
            if reasons:
                ui.event("preflight-refused", reasons=[str(r) for r in reasons])
            else:
                launch.run(ctx, lock)
                if ctx.outcome is not None:
                    post.run(ctx)
        except Interrupted as e:
            if ctx.outcome is None:
                ctx.preflight.append(Reason("RUN-INTERRUPTED", f"harness received {e}"))
            else:
                ctx.outcome["interrupted"] = True
            ui.event("interrupted", signal=str(e))
        except BaseException as e:
            # Even a bug must not leave an unsealed folder behind: record it, then re-raise.
            ctx.preflight.append(Reason("HARNESS-ERROR", f"{type(e).__name__}: {e}"))
            with contextlib.suppress(Exception):
                lock.release()
                finish.run(ctx)
            raise
        finally:
            lock.release()
        status, reasons = finish.run(ctx)
    ui.event("sealed", run_id=ctx.run_id, status=status, dir=str(ctx.run_dir),
             reasons=[str(r) for r in reasons])
    return status, reasons
