"""Telemetry: the container's figures sampled while it runs (`measure.telemetry`), and
the run.json block that summarises them at the seal (`judge.samplefigures`). Sampling is
evidence gained, never a reason not to run: what cannot be sampled is said in the block,
and refuses only a control that requires telemetry."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from harness.base.catalogue import TELEMETRY_GAP
from harness.base.readfile import InputError, read_text_bounded
from harness.judge import samplefigures as judge_telemetry
from harness.measure.runfolder import layout
from harness.measure.telemetry import plan, samples
from harness.measure.telemetry import quantities as q
from harness.pipeline.evidence.source import DURING, SEAL, Evidence, Gathered, Scene

MAX_STARTUP = 16 * 1024 * 1024


def startup_time(run_dir: Path) -> float | None:
    """When the engine core said it was ready; a time that is no plain number is none."""
    try:
        text = read_text_bounded(run_dir / layout.OBSERVATIONS / layout.STARTUP,
                                 MAX_STARTUP, what="observation")
        when = json.loads(text).get("observed", {}).get("time")
    except (InputError, ValueError, AttributeError, RecursionError):
        return None
    return float(when) if q.number(when) else None


def _start(scene: Scene) -> Gathered:
    """The sampler started on the container's cgroup and the control's GPUs."""
    ctl = scene.ctx.control
    seen = scene.gathered.get("container")
    cgroup = seen.doc.get("cgroup") if seen is not None and isinstance(seen.doc, dict) else None
    sampler, missing = plan.start(plan.Plan(ctl.telemetry.interval, ctl.device,
                                            plan.gpu_indices(ctl.gpus)),
                                  cgroup, scene.ctx.run_dir / layout.TELEMETRY)
    doc = {"interval_s": ctl.telemetry.interval, "missing": missing,
           "sampled": sampler is not None}
    if sampler is None:
        return Gathered(doc)
    return Gathered(doc, held=lambda: Gathered({**doc, **dataclasses.asdict(sampler.stop())}))


def _summary(scene: Scene) -> Gathered:
    """run.json's telemetry block and its refusals; none when no container ran."""
    ctx = scene.ctx
    if ctx.outcome is None:
        return Gathered()
    sampled = ctx.outcome.get("telemetry")
    required = ctx.control.telemetry.required
    if not isinstance(sampled, dict) or not sampled.get("sampled"):
        missing = sampled.get("missing") if isinstance(sampled, dict) else None
        why = "; ".join(missing or []) or "the container was not sampled"
        return Gathered({"sampled": False, "why": why, "required": required},
                        tuple(judge_telemetry.refusals({}, required=required, why=why)))
    interval = float(sampled.get("interval_s") or ctx.control.telemetry.interval)
    seconds = float(sampled.get("seconds") or 0.0)
    doc = judge_telemetry.summarise(
        samples.read(ctx.run_dir / layout.TELEMETRY), interval=interval,
        end=seconds, startup_unix=startup_time(ctx.run_dir))
    cpu = float(sampled.get("cpu_s") or 0.0)
    doc = {"sampled": True, "required": required, "file": layout.TELEMETRY,
           "ended": sampled.get("ended"), "missing": sampled.get("missing") or [],
           "source_error": sampled.get("error"), "sampler_cpu_s": cpu,
           "sampler_cpu_pct": round(100 * cpu / seconds, 3) if seconds > 0 else None, **doc}
    return Gathered(doc, tuple(judge_telemetry.refusals(doc, required=required)))


SAMPLER = Evidence("sampler", DURING, f"{layout.OUTCOME}#telemetry", _start,
                   failed=lambda why: {"sampled": False, "missing": [why]})
TELEMETRY = Evidence("telemetry", SEAL, f"{layout.RECORD}#telemetry", _summary,
                     required=lambda control: control.telemetry.required, rule=TELEMETRY_GAP)
