"""Stage 6: re-check what was pinned, decide the status, write run.json, seal the folder.

SHA256SUMS is written last and covers every other file; then the folder is read-only.
Before anything is judged or sealed, `clean` removes and records what no seal may hold
(symlinks, FIFOs, devices, unsealable names), which refuses the run.
"""

from __future__ import annotations

import json
import os
import time

from harness.base import faultpoint
from harness.base.atomic import write_json
from harness.base.catalogue import EVIDENCE_LOG, MODEL_CHANGED, SEAL_CHANGED
from harness.base.reason import Reason, rules
from harness.base.states import Status
from harness.base.timeutil import utc_now
from harness.judge.verdict import decide
from harness.measure import engine, perflog
from harness.measure.host import identity
from harness.measure.metrics import failed_metrics, write_metrics
from harness.measure.runfolder import layout, record
from harness.measure.runfolder.manifest import make_read_only, write_manifest
from harness.measure.runfolder.record import RunRecord
from harness.measure.seal import seal_changes, source_seal
from harness.measure.slurm import identity as slurm_identity
from harness.pipeline import bracket
from harness.pipeline.carried import Carried
from harness.pipeline.clean import clean
from harness.pipeline.context import RunContext
from harness.pipeline.preflight import hash_model
from harness.pipeline.results import Sealed


def recheck(ctx: RunContext) -> tuple[list[Reason], Carried | None]:
    """The seal and model must be the same bytes after the run as before. What it measured
    (host snapshot, seal) is offered to the next run (`Carried`)."""
    reasons: list[Reason] = []
    handover = None
    pre = ctx.preflight
    for stream, err in ((ctx.outcome or {}).get("log_errors") or {}).items():
        reasons.append(Reason(EVIDENCE_LOG, f"the {stream} log could not be written whole: "
                                              f"{err}"))
    before = ctx.run_dir / layout.HOST_BEFORE
    host = seal = None
    if before.is_file() and ctx.outcome is not None:
        host = identity.snapshot(docker_client=engine.client())
        write_json(ctx.run_dir / layout.HOST_AFTER, host, exclusive=True)
        changes = identity.drift(json.loads(before.read_text()), host)
        reasons += [Reason(identity.RULE_HOST_DRIFT, c) for c in changes]
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
               around: dict[str, dict | None] | None = None) -> RunRecord:
    around = around or {}
    camp, pre, held = ctx.loaded.campaign, ctx.preflight, ctx.launch.held
    outcome = ctx.outcome or {}
    return RunRecord(
        run_id=ctx.run_id,
        attempt=ctx.attempt,
        campaign={"name": camp.name, "file": str(ctx.loaded.campaign_file), "row": camp.row},
        control={"name": ctx.control.name, "file": str(ctx.control_file),
                 "device": ctx.control.device},
        image={"name": ctx.control.image, "id": pre.image_id},
        seal=pre.seal.digest if pre.seal else None,
        model_hashes=pre.model_hashes,
        status=status,
        reasons=tuple(reasons),
        rules=rules(reasons),
        times={"created": ctx.created, "started": outcome.get("started"),
               "ended": outcome.get("ended"), "sealed": utc_now()},
        lock=held.as_dict() if held else None,
        outcome={"exit_code": outcome.get("exit_code"), "oom_killed": outcome.get("oom_killed"),
                 "timed_out": outcome.get("timed_out"),
                 "interrupted": outcome.get("interrupted"),
                 "duration_s": outcome.get("duration_s")},
        post_steps=[{"name": p.name, "exit_code": p.exit_code, "verdict": p.verdict}
                    for p in ctx.post.results],
        rerun_of=ctx.rerun_of,
        stages=list(ctx.stages),
        provenance=pre.provenance, harness=pre.harness,
        approval=pre.approval,
        slurm=slurm_identity.record(os.environ),
        telemetry=around.get("telemetry"),
        kernel_log=around.get("kernel_log"),
    )


def metrics(ctx: RunContext) -> None:
    """vLLM's memory figures from the native log (absent lines stay null, never 0).

    The log is the workload's to write, and metrics are a convenience: nothing here may
    stop the run from being sealed with its real status. A failure becomes a note."""
    logs = ctx.run_dir / layout.LOGS
    if not logs.is_dir():
        return
    try:
        doc = write_metrics([logs / layout.STDOUT_LOG, logs / layout.STDERR_LOG], base=ctx.run_dir)
    except Exception as e:  # the verdict matters more than the metrics
        doc = failed_metrics(f"{type(e).__name__}: {e}"[:500])
    try:
        write_json(ctx.run_dir / layout.METRICS, doc, exclusive=True)
    except Exception as e:  # e.g. disk full: run.json's own write reports it
        ctx.ui.event("metrics-not-written", error=f"{type(e).__name__}: {e}"[:500])


def measured_around(ctx: RunContext) -> tuple[dict[str, dict | None], list[Reason]]:
    """The telemetry and kernel-log blocks (`bracket`) and what they refuse with. Reading
    either may fail on a sick host: that is said in its block, never a lost seal, and a
    control that required that evidence is refused for it (`bracket.unread`)."""
    blocks: dict[str, dict | None] = {}
    reasons: list[Reason] = []
    for name, read in (("telemetry", bracket.telemetry), ("kernel_log", bracket.kernel_log)):
        try:
            blocks[name], found = read(ctx)
        except Exception as e:  # the seal matters more than this evidence; never a pass
            error = f"{type(e).__name__}: {e}"[:500]
            blocks[name], found = {"error": error}, bracket.unread(name, ctx, error)
        reasons += found
    return blocks, reasons


def run(ctx: RunContext) -> Sealed:
    removed = clean(ctx.run_dir)  # nothing unsealable may reach write_manifest
    metrics(ctx)
    around, faults = measured_around(ctx)
    checked, handover = recheck(ctx)
    after = [*ctx.after, *removed, *faults, *checked]  # with what launch found after the run
    status, reasons = decide(preflight=list(ctx.stopped), outcome=ctx.outcome,
                             post=list(ctx.post.results), after=after)
    record.write(ctx.run_dir, run_record(ctx, status, reasons, around))
    faultpoint.reach("sealing")
    write_manifest(ctx.run_dir)
    make_read_only(ctx.run_dir)
    perf_log(ctx)
    return Sealed(Status(status), tuple(reasons), handover)


def perf_log(ctx: RunContext) -> None:
    """One line per figure in the campaign's performance log (harness.measure.perflog), beside the
    run folders. A convenience derived from the sealed folder: a failure is a note."""
    try:
        perflog.append_sealed(ctx.run_dir)
    except Exception as e:  # the seal is what matters; the log can be rebuilt from it
        ctx.ui.event("perflog-not-written", error=f"{type(e).__name__}: {e}"[:500])
