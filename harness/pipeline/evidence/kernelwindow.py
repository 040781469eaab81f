"""The kernel log from the lock to the seal (`measure.kmsg`), kept in the run folder, and
each fault it shows (`judge.kernellog`): a fault always refuses; a log that cannot be read
(or read whole) only a control that asks for it (`kernel_log: {required: true}`)."""

from __future__ import annotations

from harness.base.atomic import write_bytes
from harness.base.catalogue import ENV_KERNEL_LOG_UNREADABLE
from harness.base.reason import Reason
from harness.judge import kernellog
from harness.measure import kmsg
from harness.measure.runfolder import layout
from harness.pipeline.evidence.source import LOCKED, SEAL, Evidence, Gathered, Scene

KERNEL_HINT = ("run `harness doctor` for how to let the harness read it (root or CAP_SYSLOG "
               "for /dev/kmsg, kernel.dmesg_restrict=0 for dmesg, or HARNESS_KERNEL_LOG "
               "naming a log file the harness's user can read)")


def window(scene: Scene) -> Gathered:
    """The window since the mark taken with the lock; none before a lock (no window)."""
    marked = scene.gathered.get("kernel-mark")
    start = marked.held if marked is not None else None
    if not isinstance(start, kmsg.Mark):
        return Gathered()
    ctx, tally = scene.ctx, kernellog.Tally()
    got = kmsg.read(start, each=tally.add)
    found = tally.findings()
    block = {"source": got.source, "kind": got.kind, "readable": got.readable,
             "error": got.error, "lines": len(got.lines), "truncated": got.truncated,
             "window_usec": [got.start_usec, got.end_usec],
             "file": layout.KERNEL_LOG if got.lines else None,
             "faults": [{"rule": f.rule, "count": f.count} for f in found],
             "mark": start.recorded(), "read": got.read,
             "gaps": [g.detail() for g in got.gaps]}
    if got.lines:
        write_bytes(ctx.run_dir / layout.KERNEL_LOG,
                    ("\n".join(got.lines) + "\n").encode("utf-8", "replace"), exclusive=True)
    required = ctx.control.kernel_log.required
    reasons = kernellog.refusals(found, got.gaps, required=required)
    if not got.readable and required:
        reasons.append(Reason(ENV_KERNEL_LOG_UNREADABLE, f"{got.error}; {KERNEL_HINT}"))
    return Gathered(block, tuple(reasons))


MARK = Evidence("kernel-mark", LOCKED, None, lambda _scene: Gathered(held=kmsg.mark()))
WINDOW = Evidence("kernel_log", SEAL, f"{layout.RECORD}#kernel_log", window,
                  required=lambda control: control.kernel_log.required,
                  rule=ENV_KERNEL_LOG_UNREADABLE, hint=KERNEL_HINT)
