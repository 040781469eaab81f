"""What was measured around the container, read at the seal: its telemetry and the kernel
log from the lock to the seal.

Each gives run.json a block that says what was read and from where, and the reasons it
refuses with: a kernel fault in the window always (`harness.judge.kernellog`); a log that
cannot be read (or read whole), or telemetry with gaps, only when the control asks for that evidence
(`kernel_log: {required: true}`, `telemetry: {required: true}`). Otherwise what could not
be read is a note in the block, and the run is judged as before.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.base.atomic import write_bytes
from harness.base.catalogue import ENV_KERNEL_LOG_UNREADABLE
from harness.base.readfile import InputError, read_text_bounded
from harness.base.reason import Reason
from harness.judge import kernellog
from harness.judge import telemetry as judge_telemetry
from harness.measure import kmsg
from harness.measure.runfolder import layout
from harness.measure.telemetry import quantities as q
from harness.measure.telemetry import samples
from harness.pipeline.context import RunContext

KERNEL_HINT = ("run `harness doctor` for how to let the harness read it (root or CAP_SYSLOG "
               "for /dev/kmsg, kernel.dmesg_restrict=0 for dmesg, or HARNESS_KERNEL_LOG "
               "naming a log file the harness's user can read)")
MAX_STARTUP = 16 * 1024 * 1024


def kernel_log(ctx: RunContext) -> tuple[dict | None, list[Reason]]:
    """The kernel log's lines since the lock, kept in the run folder, and each fault they
    show; None before a lock was taken (no window)."""
    start = ctx.launch.kernel
    if start is None:
        return None, []
    tally = kernellog.Tally()
    window = kmsg.read(start, each=tally.add)
    found = tally.findings()
    block = {"source": window.source, "kind": window.kind, "readable": window.readable,
             "error": window.error, "lines": len(window.lines), "truncated": window.truncated,
             "window_usec": [window.start_usec, window.end_usec],
             "file": layout.KERNEL_LOG if window.lines else None,
             "faults": [{"rule": f.rule, "count": f.count} for f in found],
             "mark": start.recorded(), "read": window.read,
             "gaps": [g.detail() for g in window.gaps]}
    if window.lines:
        write_bytes(ctx.run_dir / layout.KERNEL_LOG,
                    ("\n".join(window.lines) + "\n").encode("utf-8", "replace"),
                    exclusive=True)
    reasons = kernellog.refusals(found, window.gaps, required=ctx.control.kernel_log.required)
    if not window.readable and ctx.control.kernel_log.required:
        reasons.append(Reason(ENV_KERNEL_LOG_UNREADABLE, f"{window.error}; {KERNEL_HINT}"))
    return block, reasons


def startup_time(run_dir: Path) -> float | None:
    """When the engine core said it was ready (its start-up observation's own clock). The
    workload writes this file: a time that is not a plain number is no time."""
    try:
        text = read_text_bounded(run_dir / layout.OBSERVATIONS / layout.STARTUP,
                                 MAX_STARTUP, what="observation")
        when = json.loads(text).get("observed", {}).get("time")
    except (InputError, ValueError, AttributeError, RecursionError):
        return None
    return float(when) if q.number(when) else None


def telemetry(ctx: RunContext) -> tuple[dict | None, list[Reason]]:
    """The telemetry block of run.json and what it refuses with; None when no container
    ran (nothing was sampled, nothing was asked)."""
    sampled = (ctx.outcome or {}).get("telemetry")
    if ctx.outcome is None:
        return None, []
    required = ctx.control.telemetry.required
    if not isinstance(sampled, dict) or not sampled.get("sampled"):
        missing = sampled.get("missing") if isinstance(sampled, dict) else None
        why = "; ".join(missing or []) or "the container was not sampled"
        return ({"sampled": False, "why": why, "required": required},
                judge_telemetry.refusals({}, required=required, why=why))
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
    return doc, judge_telemetry.refusals(doc, required=required)


def unread(name: str, ctx: RunContext, why: str) -> list[Reason]:
    """What a reader above that raised (`name`: "telemetry" or "kernel_log") refuses with:
    nothing when the control did not ask for that evidence, else the refusal an unreadable
    source earns, so no failure of a reader can stand in for evidence that was required."""
    if name == "telemetry":
        return judge_telemetry.refusals({}, required=ctx.control.telemetry.required, why=why)
    if ctx.control.kernel_log.required:
        return [Reason(ENV_KERNEL_LOG_UNREADABLE, f"{why}; {KERNEL_HINT}")]
    return []
