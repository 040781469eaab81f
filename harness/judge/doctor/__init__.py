"""`harness doctor`: is this host fit to run controls? One ok/warn/fail line per check."""

from harness.judge.doctor.checks import Check, any_failed
from harness.judge.doctor.run import run_checks

__all__ = ["Check", "any_failed", "run_checks"]
