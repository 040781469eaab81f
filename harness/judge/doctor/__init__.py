"""`harness doctor`'s decisions: is this host fit to run controls? One ok/warn/fail line per
check, judged from the facts harness.probe.doctor gathers."""

from harness.judge.doctor.checks import Check, any_failed

__all__ = ["Check", "any_failed"]
