"""The stages of one run, each with one signature and each named in the record.

A stage is `run(ctx, keep) -> result` and hands `keep` each partial result as it learns
it, so a stage cut short by an exception or a signal still leaves what it found (the
lock's hold, the outcome, the post-steps that ran). A stage that raises is recorded under
its own name (`stage <name>:` in the reason)."""

from __future__ import annotations

import errno
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from harness.base.catalogue import ENV_DISK_FULL, ENV_ERROR, ENV_IO, HARNESS_ERROR
from harness.base.errors import EnvironmentFault, HarnessError
from harness.base.reason import Reason
from harness.base.states import StageResult
from harness.pipeline.context import RunContext


class Result(Protocol):
    """What every stage result has: the reasons the stage refuses with."""

    @property
    def reasons(self) -> tuple[Reason, ...]: ...


R = TypeVar("R")
Keep = Callable[[R], R]  # store a partial result; returns it


@dataclass(frozen=True)
class Stage:
    name: str  # also where its result is kept (`RunContext.took`)
    run: Callable[[RunContext, Keep[Any]], Result]
    # False: only recorded; the verdict reads the stage's own results (`ctx.post`)
    files: bool = True


def error_reason(e: BaseException) -> Reason:
    """The rule an unexpected exception is recorded under (environment: the host)."""
    if isinstance(e, HarnessError):
        return Reason(e.rule or (ENV_ERROR if isinstance(e, EnvironmentFault)
                                 else HARNESS_ERROR), e.message)
    if isinstance(e, OSError) and e.errno == errno.ENOSPC:
        return Reason(ENV_DISK_FULL, f"the runs folder is full: {e}")
    if isinstance(e, OSError):
        return Reason(ENV_IO, f"{type(e).__name__}: {e}")
    return Reason(HARNESS_ERROR, f"{type(e).__name__}: {e}")


def _record(name: str, result: StageResult, t0: float, **extra: object) -> dict:
    return {"name": name, "result": result, "seconds": round(time.monotonic() - t0, 3),
            **extra}


def run_stages(ctx: RunContext, stages: tuple[Stage, ...]) -> None:
    """Run each stage in order until one refuses before launch or raises; an `Interrupted`
    is recorded against its stage and re-raised."""
    for stage in stages:
        t0 = time.monotonic()
        try:
            found = ctx.took(stage.name, stage.run(ctx, lambda r, at=stage.name: ctx.took(at, r)))
        except Exception as e:
            reason = error_reason(e)
            reason = Reason(reason.rule, f"stage {stage.name}: {reason.detail}")
            ctx.recorded(_record(stage.name, StageResult.ERROR, t0, rule=reason.rule))
            ctx.file([reason])
            ctx.ui.event("error", stage=stage.name, error=str(reason))
            return
        except BaseException:
            ctx.recorded(_record(stage.name, StageResult.INTERRUPTED, t0))
            raise
        reasons = list(found.reasons)
        ctx.recorded(_record(stage.name, StageResult.REFUSED if reasons else StageResult.OK,
                             t0, **({"rules": sorted({r.rule for r in reasons})}
                                    if reasons else {})))
        if not reasons:
            continue
        ctx.ui.event(f"{stage.name}-refused", reasons=[str(r) for r in reasons])
        if not stage.files:
            continue
        before = ctx.outcome is None
        ctx.file(reasons)
        if before:
            return
