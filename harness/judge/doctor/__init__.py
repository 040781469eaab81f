"""`harness doctor`'s decisions: is this host fit to run controls? One ok/warn/fail line per
check, judged from the facts harness.probe.doctor gathers."""
