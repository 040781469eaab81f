"""The executor that runs a control on this host: its folder, the GPU lock, Docker, the seal.
A window of one: `start` waits for the sealed outcome, so the stop policy is asked before
the next control starts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.base.errors import HarnessError
from harness.base.states import Status
from harness.config.loader import Loaded
from harness.driver.cutoff import seal_left
from harness.driver.drive import crashed
from harness.driver.plan import InFlight, LaunchRequest, Outcome
from harness.measure.ui import Reporter
from harness.pipeline.onerun import make_context, run_control
from harness.pipeline.results import Carried


class LocalExecutor:
    """`launch` = make the run folder, `run_control`, say how it ended; what a run measured
    after it is offered to the next (`pipeline.results.Carried`) unless it was interrupted."""

    window = 1  # one GPU: one control at a time
    together = False  # a same_host group's members run here one after another
    per_job = 1  # each start is one launch: the night's loop sees every outcome before the next

    def __init__(self, loaded: Loaded, ui: Reporter, *, lock_timeout: float | None,
                 before_launch: Callable[[], None] | None = None,
                 wait_first: bool = False) -> None:
        self.loaded = loaded
        self.wait_first = wait_first  # wait for a held GPU lock before making the folder
        self.ui = ui
        self.lock_timeout = lock_timeout
        self.before_launch = before_launch
        self._carry: Carried | None = None

    def launch(self, request: LaunchRequest) -> Outcome:
        """The sealed outcome; an error the pipeline could not seal past becomes `failed`."""
        if self.before_launch is not None:
            self.before_launch()
        carry, self._carry = self._carry, None  # offered to this launch only
        since = self._wait_free(request) if self.wait_first else None
        try:
            ctx = make_context(self.loaded, request.control, request.run_dir.parent, self.ui,
                               rerun_of=request.rerun_of, attempt=request.attempt,
                               run_id=request.run_id, carried=carry)
            sealed = run_control(ctx, lock_timeout=self.lock_timeout, since=since)
        except HarnessError as e:  # no folder, or it could not be sealed (disk full, say)
            return crashed(request, e)
        if sealed.status != Status.INTERRUPTED and not sealed.stop_requested:
            self._carry = sealed.handover
        return Outcome.of(ctx.run_dir, sealed.status, sealed.reasons,
                          stop_requested=sealed.stop_requested)

    def _wait_free(self, request: LaunchRequest) -> tuple[str, float]:
        """Wait for a held GPU lock before the run folder exists: a stop leaves nothing."""
        from harness.base.signals import signals_interrupt
        from harness.measure.lock import wait_free

        timeout = self.lock_timeout or self.loaded.campaign.lock_timeout
        try:
            with signals_interrupt():  # SIGTERM and SIGHUP stop the wait as Ctrl-C does
                return wait_free(self.loaded.lock_path, timeout, self.ui.waiting)
        except BaseException:  # a stop signal: nothing was made, say so and pass it on
            self.ui.event("cancelled", control=request.control,
                          why="stopped while waiting for the GPU lock: nothing was launched "
                              "and no run folder was made")
            raise

    def start(self, requests: tuple[LaunchRequest, ...]) -> Outcome:
        """Run the one request to its sealed outcome (this host launches one at a time)."""
        [request] = requests
        return self.launch(request)

    def poll(self, flying: list[InFlight]) -> tuple[list, bool]:
        """Nothing is ever in flight here: `start` waited."""
        return [], False

    def pause(self, changed: bool, failures: int) -> None:
        """Nothing to wait for between polls."""

    def cancel_pending(self, flying: list[InFlight]) -> list[InFlight]:
        return []

    def preflight(self, control: str, runs_dir: Path) -> list[str]:
        """The doctor's failing lines for this control's profile (empty: the host is fit)."""
        from harness.judge.doctor.checks import GIB
        from harness.probe.doctor.allchecks import (
            run_checks,  # a night's check, not `harness run`'s
        )

        ctl, _ = self.loaded.controls[control]
        lock = self.loaded.image_lock
        pinned = lock.images.get(ctl.image) if lock else None
        images = {ctl.image: pinned.model_dump()} if pinned else None
        fail_bytes = int(self.loaded.campaign.host.min_free_gib * GIB)
        checks = run_checks(lock_path=self.loaded.lock_path, runs_dir=runs_dir,
                            images=images, profile=ctl.device,
                            required_gfx=self.loaded.campaign.host.gfx,
                            fail_free_bytes=fail_bytes,
                            warn_free_bytes=max(10 * GIB, fail_bytes))
        return [f"{c.name}: {c.detail}" for c in checks if c.status == "fail"]

    def recover(self, requests: tuple[LaunchRequest, ...], job_id: str | None,
                ) -> list[tuple[LaunchRequest, Outcome | None]]:
        """Stop the containers of launches left `running`, seal their folders as found."""
        return [(r, seal_left(r, self.stop_grace(r.control), self.ui)) for r in requests]

    def stop_grace(self, control: str) -> float:
        found = self.loaded.controls.get(control)
        return found[0].stop_grace if found else 10.0
