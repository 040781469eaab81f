"""Gather the seal's evidence, re-check what was pinned, decide the status, write run.json,
seal the folder: `clean` first (what no seal may hold refuses the run), SHA256SUMS last
(it covers every other file), then the folder is read-only."""

from __future__ import annotations

import os
import time

from harness.base import faultpoint
from harness.base.catalogue import EVIDENCE_LOG, MODEL_CHANGED, SEAL_CHANGED
from harness.base.reason import Reason, rules
from harness.base.states import Status
from harness.base.timeutil import utc_now
from harness.judge.verdict import decide
from harness.measure import perflog
from harness.measure.runfolder import layout, runjson
from harness.measure.runfolder.manifest import make_read_only, write_manifest
from harness.measure.runfolder.runjson import RunRecord
from harness.measure.seal import seal_changes, source_seal
from harness.measure.slurm import identity as slurm_identity
from harness.pipeline import evidence
from harness.pipeline.clean import clean
from harness.pipeline.context import RunContext
from harness.pipeline.evidence.source import SEAL, Scene
from harness.pipeline.preflight import hash_model
from harness.pipeline.results import Carried, Sealed


def recheck(ctx: RunContext, host: dict | None) -> tuple[list[Reason], Carried | None]:
    """The seal and model must be the same bytes after the run; the seal is carried on."""
    reasons: list[Reason] = []
    handover = None
    pre = ctx.preflight
    for stream, err in ((ctx.outcome or {}).get("log_errors") or {}).items():
        reasons.append(Reason(EVIDENCE_LOG, f"the {stream} log could not be written whole: "
                                              f"{err}"))
    if pre.seal is not None:
        inputs = ctx.loaded.files()
        seal = source_seal(ctx.loaded.project_dir, inputs)
        reasons += [Reason(SEAL_CHANGED, c) for c in seal_changes(pre.seal.files, seal.files)]
        handover = Carried(ctx.run_id, utc_now(), time.monotonic(),
                           tuple(map(str, inputs)), host, seal)
    if ctx.control.model is not None and ctx.model_source is not None and pre.model_hashes:
        _, problems = hash_model(ctx.model_source, ctx.control.model.sha256)
        reasons += [Reason(MODEL_CHANGED, str(p)) for p in problems]
    return reasons, handover


def run_record(ctx: RunContext, status: str, reasons: list[Reason],
               blocks: dict[str, dict | None] | None = None) -> RunRecord:
    """run.json; `blocks` are those the evidence fills (`evidence.blocks`)."""
    camp, pre, held = ctx.loaded.campaign, ctx.preflight, ctx.launch.held
    outcome = ctx.outcome or {}
    return RunRecord(
        run_id=ctx.run_id, attempt=ctx.attempt,
        campaign={"name": camp.name, "file": str(ctx.loaded.campaign_file), "row": camp.row},
        control={"name": ctx.control.name, "file": str(ctx.control_file),
                 "device": ctx.control.device},
        image={"name": ctx.control.image, "id": pre.image_id},
        seal=pre.seal.digest if pre.seal else None, model_hashes=pre.model_hashes,
        status=status, reasons=tuple(reasons), rules=rules(reasons),
        times={"created": ctx.created, "started": outcome.get("started"),
               "ended": outcome.get("ended"), "sealed": utc_now()},
        lock=held.as_dict() if held else None,
        outcome={"exit_code": outcome.get("exit_code"), "oom_killed": outcome.get("oom_killed"),
                 "timed_out": outcome.get("timed_out"), "interrupted": outcome.get("interrupted"),
                 "duration_s": outcome.get("duration_s")},
        post_steps=[{"name": p.name, "exit_code": p.exit_code, "verdict": p.verdict}
                    for p in ctx.post.results],
        rerun_of=ctx.rerun_of, stages=list(ctx.stages), provenance=pre.provenance,
        harness=pre.harness, approval=pre.approval, slurm=slurm_identity.record(os.environ),
        **(blocks or {}))


def run(ctx: RunContext) -> Sealed:
    removed = clean(ctx.run_dir)  # nothing unsealable may reach write_manifest
    got = evidence.gather(SEAL, Scene(ctx, {**ctx.preflight.gathered, **ctx.launch.gathered}))
    host = got["host-after"].doc if "host-after" in got else None
    checked, handover = recheck(ctx, host if host and "error" not in host else None)
    after = [*ctx.after, *removed, *evidence.reasons(got), *checked]
    status, reasons = decide(preflight=list(ctx.stopped), outcome=ctx.outcome,
                             post=list(ctx.post.results), after=after)
    runjson.write(ctx.run_dir, run_record(ctx, status, reasons,
                                         evidence.blocks(layout.RECORD, got)))
    faultpoint.reach("sealing")
    write_manifest(ctx.run_dir)
    make_read_only(ctx.run_dir)
    perf_log(ctx)
    return Sealed(Status(status), tuple(reasons), handover)


def perf_log(ctx: RunContext) -> None:
    """The campaign's performance log lines: a convenience, so a failure is a note."""
    try:
        perflog.append_sealed(ctx.run_dir)
    except Exception as e:  # the seal is what matters; the log can be rebuilt from it
        ctx.ui.event("perflog-not-written", error=f"{type(e).__name__}: {e}"[:500])
