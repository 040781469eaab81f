"""The executor that runs a control on this host: its folder, the GPU lock, Docker, the seal."""

from __future__ import annotations

from harness.base.errors import HarnessError
from harness.base.states import exit_code
from harness.config.loader import Loaded
from harness.driver.drive import crashed
from harness.driver.plan import LaunchRequest, Outcome
from harness.judge.verdict import lines
from harness.measure.ui import Reporter
from harness.pipeline.context import Carried
from harness.pipeline.run import make_context, run_control


class LocalExecutor:
    """`launch` = make the run folder, `run_control`, and say how it ended.

    What a run's after-run checks measured is offered to the next run it launches
    (`pipeline.context.Carried`), unless the run was interrupted or a stop was asked."""

    def __init__(self, loaded: Loaded, ui: Reporter, *, lock_timeout: float | None) -> None:
        self.loaded = loaded
        self.ui = ui
        self.lock_timeout = lock_timeout
        self._carry: Carried | None = None

    def launch(self, request: LaunchRequest) -> Outcome:
        """The sealed outcome; an error the pipeline could not seal past becomes `failed`."""
        carry, self._carry = self._carry, None  # offered to this launch only
        try:
            ctx = make_context(self.loaded, request.control, request.run_dir.parent, self.ui,
                               rerun_of=request.rerun_of, attempt=request.attempt,
                               run_id=request.run_id)
            ctx.carried = carry
            status, reasons = run_control(ctx, lock_timeout=self.lock_timeout)
        except HarnessError as e:  # no folder, or it could not be sealed (disk full, say)
            return crashed(request, e)
        if status != "interrupted" and not ctx.stop_requested:
            self._carry = ctx.handover
        return Outcome(ctx.run_dir, status, exit_code(status, reasons),
                       lines(reasons), bool(ctx.stop_requested))
