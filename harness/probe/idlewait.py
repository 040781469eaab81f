"""The idle-GPU check: look (`measure.gpuproc`), judge (`judge.idlegpu`), and look again
until idle or `idle_gpu.wait_s` is spent; also `harness doctor`'s one line."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from harness.base.reason import Reason
from harness.config.schema import IdleGpu
from harness.judge import idlegpu
from harness.measure import engine, gpuproc
from harness.measure.telemetry.plan import gpu_indices

POLL_S = 1.0


def look(device: str, gpus: tuple[int, ...] | None, client: Any | None = None,
         **where: Any) -> gpuproc.GpuFacts:
    """One look at the GPU; `where` points the rocm sources at fixtures."""
    client = client if client is not None else engine.client()
    if device == "cpu":
        return gpuproc.cpu_facts(client)
    return gpuproc.rocm_facts(gpus, client=client, **where)


def check(control: Any, *, phase: str, run_id: str | None = None, lock: str | None = None,
          container: str | None = None, client: Any | None = None,
          looker: Callable[[], gpuproc.GpuFacts] | None = None,
          clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep,
          poll_s: float = POLL_S) -> tuple[dict, list[Reason]]:
    """(document, reasons) at `phase`; before launch it polls while `wait_s` allows."""
    gpus = gpu_indices(control.gpus)
    ours = idlegpu.Ours(run_id, lock, gpus, container)
    looker = looker or (lambda: look(control.device, gpus, client))
    wait_s = control.idle_gpu.wait_s if phase == "locked" else 0.0
    started = clock()
    polls = 0
    while True:
        facts = looker()
        polls += 1
        reasons = idlegpu.judge(facts, phase, ours, control.idle_gpu.vram_max_mb)
        if not idlegpu.keep_waiting(reasons, clock() - started, wait_s, poll_s):
            break
        sleep(poll_s)
    spent = clock() - started
    return idlegpu.document(facts, phase, reasons, polls=polls, waited_s=spent,
                            elapsed_ms=spent * 1000), reasons


def doctor_line(profile: str, client: Any | None) -> tuple[str, str]:
    """(status, detail) of doctor's `idle gpu` line: a run's look and judgement with a
    control's defaults; a busy GPU, or a look not taken, warns."""
    if profile == "cpu" and client is None:
        return "warn", "no Docker engine to list the containers on the control's CPUs"
    facts = look(profile, None, client) if client is not None else gpuproc.rocm_facts(None)
    reasons = idlegpu.locked(facts, idlegpu.Ours(None), IdleGpu().vram_max_mb)
    if reasons:
        return "warn", "; ".join(r.text() for r in reasons[:5])
    if facts.errors:
        return "warn", "not proven idle: " + "; ".join(facts.errors)
    what = ("no other container pinned on the CPUs" if profile == "cpu"
            else "no process holds the GPU")
    return "ok", f"idle: {what}"
