"""Is the GPU idle and clean for this run? Facts in (harness.measure.gpuproc), reasons out. Pure.

A run measures memory (the seed campaign's KV warm-up at gpu_memory_utilization 0.92): a
process the run does not own holding VRAM, or a container an earlier run left, changes the
figures, and the GPU lock cannot see a process that never took it. So, under the lock and
before launch ("locked"): a foreign holder refuses (ENV-GPU-BUSY, naming its pid, user, name
and memory; on the cpu profile a container pinned on the control's CPUs: one free to use
every CPU is listed, not refused, or any developer's database would refuse every rehearsal),
so does a running container another run launched on this GPU (ENV-ORPHAN-CONTAINER, naming
the container's id, name, image and run: this check is the only one that refuses it), and
VRAM in use over the control's bound (ENV-GPU-VRAM-IN-USE). After the run's container exited
("exited"), anything of the run's own still there refuses it (GPU-LEFT-BEHIND).

What is the run's own: a container labelled with its run id, and a process inside its
container. On the cpu profile another harness run's container on another lock is that
lock's business (locks may run side by side on purpose); on rocm any harness container of
the rocm profile holds the GPU, whatever its lock.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.base.catalogue import (
    ENV_GPU_BUSY,
    ENV_GPU_VRAM_IN_USE,
    ENV_ORPHAN_CONTAINER,
    GPU_LEFT_BEHIND,
)
from harness.base.reason import Reason
from harness.measure.gpuproc import Box, GpuFacts, Holder, cpuset

PHASES = ("locked", "exited")
MIB = 1024 * 1024


@dataclass(frozen=True)
class Ours:
    """What belongs to the run being judged: its run id, lock, GPUs (None: all) and its
    container, once launched."""

    run_id: str | None
    lock: str | None = None
    gpus: tuple[int, ...] | None = None
    container: str | None = None


def _mib(n: float | None) -> str:
    return "unknown memory" if n is None else f"{n / MIB:.0f} MiB of VRAM"


def holder_text(h: Holder) -> str:
    """`pid 4242 (python3, user alice) holds 512 MiB of VRAM on GPU 0`."""
    on = f" on GPU {','.join(map(str, h.gpus))}" if h.gpus else ""
    inside = f", in container {h.container[:12]}" if h.container else ""
    return (f"pid {h.pid} ({h.name or 'name unknown'}, user {h.user or 'unknown'}{inside}) "
            f"holds {_mib(h.vram_bytes)}{on}")


def box_text(b: Box) -> str:
    """`container 0123456789ab (name, image img)`."""
    return f"container {b.id[:12]} ({b.name}, image {b.image})"


def _on_our_gpus(h: Holder, ours: Ours) -> bool:
    return ours.gpus is None or not h.gpus or bool(set(h.gpus) & set(ours.gpus))


def _foreign_box(b: Box, facts: GpuFacts) -> Reason | None:
    """A container the harness did not launch, judged on the cpu profile by its CPUs."""
    shared = cpuset(b.cpuset) & facts.cpus if b.cpuset else None
    if not shared:
        return None
    return Reason(ENV_GPU_BUSY, f"{box_text(b)} runs pinned on CPUs {b.cpuset}, shared with "
                  f"the control's {len(shared)} CPU(s)")


def locked(facts: GpuFacts, ours: Ours, vram_max_mb: int) -> list[Reason]:
    """Reasons the GPU is not idle before launch; empty when it is."""
    out = [Reason(ENV_GPU_BUSY, f"{holder_text(h)} before launch")
           for h in facts.holders
           if (ours.container is None or h.container != ours.container) and _on_our_gpus(h, ours)]
    for b in facts.containers:
        if b.run_id is None:
            found = _foreign_box(b, facts) if facts.device == "cpu" else None
            out += [found] if found else []
        elif b.run_id != ours.run_id and (b.lock == ours.lock
                                          or b.device == facts.device == "rocm"):
            out.append(Reason(ENV_ORPHAN_CONTAINER, f"{box_text(b)} of run {b.run_id} "
                              "still runs on this GPU"))
    used = facts.vram_used_bytes
    if used is not None and used > vram_max_mb * MIB:
        out.append(Reason(ENV_GPU_VRAM_IN_USE, f"{used / MIB:.0f} MiB of VRAM in use before "
                          f"launch, over idle_gpu.vram_max_mb {vram_max_mb}"))
    return out


def exited(facts: GpuFacts, ours: Ours) -> list[Reason]:
    """Reasons the run left something of its own on the GPU; empty when it left nothing."""
    out = [Reason(GPU_LEFT_BEHIND, f"{holder_text(h)} after the run's container exited")
           for h in facts.holders if ours.container and h.container == ours.container]
    out += [Reason(GPU_LEFT_BEHIND, f"the run's {box_text(b)} still runs after it exited")
            for b in facts.containers if ours.run_id and b.run_id == ours.run_id]
    return out


def judge(facts: GpuFacts, phase: str, ours: Ours, vram_max_mb: int) -> list[Reason]:
    """The reasons of `phase` ("locked" or "exited")."""
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {', '.join(PHASES)}, not {phase!r}")
    return locked(facts, ours, vram_max_mb) if phase == "locked" else exited(facts, ours)


def keep_waiting(reasons: list[Reason], waited_s: float, wait_s: float, poll_s: float) -> bool:
    """Poll again? Only while something refuses and the next look still falls inside the
    control's bound: a wait of 0 refuses at once."""
    return bool(reasons) and waited_s + poll_s <= wait_s


def document(facts: GpuFacts, phase: str, reasons: list[Reason], *, polls: int,
             waited_s: float, elapsed_ms: float) -> dict:
    """What the check records: the facts of its last look, how long it waited, and why it
    refused (empty: idle)."""
    return {
        "phase": phase, "device": facts.device, "idle": not reasons,
        "proven": not facts.errors, "polls": polls,
        "waited_s": round(waited_s, 3), "elapsed_ms": round(elapsed_ms, 1),
        "holders": [{"pid": h.pid, "name": h.name, "user": h.user,
                     "vram_bytes": h.vram_bytes, "gpus": list(h.gpus),
                     "container": h.container, "source": h.source} for h in facts.holders],
        "containers": [{"id": b.id, "name": b.name, "image": b.image, "cpuset": b.cpuset,
                        "run_id": b.run_id} for b in facts.containers],
        "vram_used_bytes": facts.vram_used_bytes,
        "errors": list(facts.errors),
        "reasons": [r.as_dict() for r in reasons],
    }
