"""vLLM's memory figures from the native logs (`measure.metrics`): absent lines stay null,
never 0. The logs are the workload's to write and the figures a convenience, so a parser
that fails leaves a metrics.json that says why, and never costs the run its seal."""

from __future__ import annotations

from harness.measure import metrics
from harness.measure.runfolder import layout
from harness.pipeline.evidence.source import SEAL, Evidence, Gathered, Scene


def _figures(scene: Scene) -> Gathered:
    run_dir = scene.ctx.run_dir
    logs = run_dir / layout.LOGS
    if not logs.is_dir():
        return Gathered()
    return Gathered(metrics.write_metrics([logs / layout.STDOUT_LOG, logs / layout.STDERR_LOG],
                                          base=run_dir))


METRICS = Evidence("metrics", SEAL, layout.METRICS, _figures, failed=metrics.failed_metrics)
