"""Stage 6: re-check what was pinned, decide the status, write run.json, seal the folder.

SHA256SUMS is written last and covers every other file; then the folder is read-only.
Before anything is judged or sealed, `clean` removes and records what no seal may hold
(symlinks, FIFOs, devices, unsealable names), which refuses the run.
"""

from __future__ import annotations

import json

from harness import engine, faultpoint
from harness.atomic import write_json
from harness.host import identity
from harness.pipeline.clean import clean
from harness.pipeline.context import RunContext
from harness.pipeline.preflight import hash_model
from harness.report.metrics import failed_metrics, write_metrics
from harness.seal import make_read_only, seal_changes, source_seal, write_manifest
from harness.timeutil import utc_now
from harness.verdict import Reason, decide


def recheck(ctx: RunContext) -> list[Reason]:
    """The seal and model must be the same bytes after the run as before."""
    reasons: list[Reason] = []
    for stream, err in ((ctx.outcome or {}).get("log_errors") or {}).items():
        reasons.append(Reason("EVIDENCE-LOG", f"the {stream} log could not be written whole: "
                                              f"{err}"))
    before = ctx.run_dir / "host-before.json"
    if before.is_file() and ctx.outcome is not None:
        after = identity.snapshot(docker_client=engine.client())
        write_json(ctx.run_dir / "host-after.json", after, exclusive=True)
        changes = identity.drift(json.loads(before.read_text()), after)
        reasons += [Reason(identity.RULE_HOST_DRIFT, c) for c in changes]
    if ctx.seal is not None:
        after = source_seal(ctx.loaded.project_dir, ctx.loaded.files())
        reasons += [Reason("SEAL-CHANGED", c) for c in seal_changes(ctx.seal.files, after.files)]
    if ctx.control.model is not None and ctx.model_source is not None and ctx.model_hashes:
        _, problems = hash_model(ctx.model_source, ctx.control.model.sha256)
        reasons += [Reason("MODEL-CHANGED", str(p)) for p in problems]
    return reasons


def run_record(ctx: RunContext, status: str, reasons: list[Reason]) -> dict:
    camp = ctx.loaded.campaign
    return {
        "schema": "harness.run/v1",
        "run_id": ctx.run_id,
        "attempt": ctx.attempt,
        "campaign": {"name": camp.name, "file": str(ctx.loaded.campaign_file), "row": camp.row},
        "control": {"name": ctx.control.name, "file": str(ctx.control_file),
                    "device": ctx.control.device},
        "image": {"name": ctx.control.image, "id": ctx.image_id},
        "seal": ctx.seal.digest if ctx.seal else None,
        "model_hashes": ctx.model_hashes,
        "status": status,
        "reasons": [str(r) for r in reasons],
        "rules": sorted({r.rule for r in reasons}),
        "times": {"created": ctx.created,
                  "started": (ctx.outcome or {}).get("started"),
                  "ended": (ctx.outcome or {}).get("ended"),
                  "sealed": utc_now()},
        "lock": ctx.held.as_dict() if ctx.held else None,
        "outcome": {k: (ctx.outcome or {}).get(k) for k in
                    ("exit_code", "oom_killed", "timed_out", "interrupted", "duration_s")},
        "post_steps": [{"name": p.name, "exit_code": p.exit_code, "verdict": p.verdict}
                       for p in ctx.post],
        "rerun_of": ctx.rerun_of,
    }


def metrics(ctx: RunContext) -> None:
    """vLLM's memory figures from the native log (absent lines stay null, never 0).

    The log is the workload's to write, and metrics are a convenience: nothing here may
    stop the run from being sealed with its real status. A failure becomes a note."""
    logs = ctx.run_dir / "logs"
    if not logs.is_dir():
        return
    try:
        doc = write_metrics([logs / "stdout.log", logs / "stderr.log"], base=ctx.run_dir)
    except Exception as e:  # the verdict matters more than the metrics
        doc = failed_metrics(f"{type(e).__name__}: {e}"[:500])
    try:
        write_json(ctx.run_dir / "metrics.json", doc, exclusive=True)
    except Exception as e:  # e.g. disk full: run.json's own write reports it
        ctx.ui.event("metrics-not-written", error=f"{type(e).__name__}: {e}"[:500])


def run(ctx: RunContext) -> tuple[str, list[Reason]]:
    removed = clean(ctx.run_dir)  # nothing unsealable may reach write_manifest
    metrics(ctx)
    ctx.after = [*ctx.after, *removed, *recheck(ctx)]  # keeps what launch found after the run
    status, reasons = decide(preflight=ctx.preflight, outcome=ctx.outcome, post=ctx.post,
                             after=ctx.after)
    write_json(ctx.run_dir / "run.json", run_record(ctx, status, reasons), exclusive=True)
    faultpoint.reach("sealing")
    write_manifest(ctx.run_dir)
    make_read_only(ctx.run_dir)
    return status, reasons
