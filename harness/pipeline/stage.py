"""The stages of one run, each with one signature and each named in the record.

As in ReFrame's pipeline, a run is explicit stages, each readable on its own:
`preflight` (before the lock), `launch` (under the lock), `post` (the post-steps). A stage
is `run(ctx) -> list[Reason]`: the reasons it refuses with, empty to go on. Before a
container exists a refusal stops the run; after it, the reasons are judged with the
outcome. A stage that raises is recorded under its own name (`stages` in run.json, and
`stage <name>:` in the reason), so the record says which stage failed and why.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Callable
from dataclasses import dataclass

from harness.base.catalogue import ENV_DISK_FULL, ENV_ERROR, ENV_IO, HARNESS_ERROR
from harness.base.errors import EnvironmentFault, HarnessError
from harness.base.reason import Reason
from harness.pipeline.context import RunContext

OK, REFUSED, ERROR, INTERRUPTED = "ok", "refused", "error", "interrupted"


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[RunContext], list[Reason]]
    # False: the reasons are only recorded against the stage, because the verdict reads
    # them from the stage's own results (the post-steps' verdicts, in `ctx.post`).
    files: bool = True


def error_reason(e: BaseException) -> Reason:
    """The rule an unexpected exception is recorded under (environment when the host
    failed: the disk, the engine, a permission)."""
    if isinstance(e, HarnessError):
        return Reason(e.rule or (ENV_ERROR if isinstance(e, EnvironmentFault)
                                 else HARNESS_ERROR), e.message)
    if isinstance(e, OSError) and e.errno == errno.ENOSPC:
        return Reason(ENV_DISK_FULL, f"the runs folder is full: {e}")
    if isinstance(e, OSError):
        return Reason(ENV_IO, f"{type(e).__name__}: {e}")
    return Reason(HARNESS_ERROR, f"{type(e).__name__}: {e}")


def _record(ctx: RunContext, name: str, result: str, t0: float, **extra: object) -> None:
    ctx.stages.append({"name": name, "result": result,
                       "seconds": round(time.monotonic() - t0, 3), **extra})


def _file(ctx: RunContext, reasons: list[Reason]) -> None:
    """Before a container exists, reasons stop the run; afterwards they judge it."""
    if ctx.outcome is None:
        ctx.preflight += reasons
    else:
        ctx.after += reasons


def run_stages(ctx: RunContext, stages: tuple[Stage, ...]) -> None:
    """Run each stage in order until one refuses before launch or raises.

    An `Interrupted` (a signal) is recorded against the stage it cut and re-raised for
    the caller, which seals the run as interrupted."""
    for stage in stages:
        t0 = time.monotonic()
        try:
            found = stage.run(ctx)
        except Exception as e:
            reason = error_reason(e)
            reason = Reason(reason.rule, f"stage {stage.name}: {reason.detail}")
            _record(ctx, stage.name, ERROR, t0, rule=reason.rule)
            _file(ctx, [reason])
            ctx.ui.event("error", stage=stage.name, error=str(reason))
            return
        except BaseException:
            _record(ctx, stage.name, INTERRUPTED, t0)
            raise
        _record(ctx, stage.name, REFUSED if found else OK, t0,
                **({"rules": sorted({r.rule for r in found})} if found else {}))
        if not found:
            continue
        ctx.ui.event(f"{stage.name}-refused", reasons=[str(r) for r in found])
        if not stage.files:
            continue
        before = ctx.outcome is None
        _file(ctx, found)
        if before:
            return
