"""A stand-in `amdsmi` for absent AMD hardware: one gfx1100 GPU handle, nothing else.

Shared by the upstream tier's ROCm scenario (on the host) and the image gate's scenario
(inside the rehearsal image): both need vLLM's own platform detection to pick ROCm on a
machine with no AMD GPU and no amdsmi library. Standard library only.

Where its answers come from: the gfx target is the product's host class (gfx1100, Radeon RX
7900; docs/product.md and the seed report); the call names are those vllm/platforms/rocm.py
0.33.0 makes at import and during platform detection. It is not a captured amd-smi output:
only the one string is used.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class AmdSmiException(Exception):
    """The stand-in's error type; vllm.platforms.rocm imports the name."""


def install_amdsmi_standin() -> None:
    """Put a small `amdsmi` in sys.modules: one GPU handle reporting gfx1100.

    It stands in for absent hardware only (this machine has no AMD GPU and no amdsmi
    library). vllm.platforms.rocm asks amdsmi for the gfx arch at import and vLLM's platform
    detection asks it for processor handles; everything else raises, so no vLLM code path
    can mistake it for a working device query. No vLLM code is replaced."""
    mod = types.ModuleType("amdsmi")
    mod.AmdSmiException = AmdSmiException
    mod.AmdSmiMemoryType = types.SimpleNamespace(VRAM=0)
    mod.amdsmi_init = lambda *args, **kwargs: None
    mod.amdsmi_shut_down = lambda *args, **kwargs: None
    mod.amdsmi_get_processor_handles = lambda: ["stand-in-gpu-0"]
    mod.amdsmi_get_gpu_asic_info = lambda handle: {"target_graphics_version": "gfx1100"}

    def unavailable(name: str):
        def call(*args: Any, **kwargs: Any) -> Any:
            raise AmdSmiException(f"{name}: not available in the upstream tier's stand-in")
        return call

    for name in ("amdsmi_get_gpu_device_uuid", "amdsmi_get_gpu_memory_total",
                 "amdsmi_topo_get_link_type", "amdsmi_topo_get_numa_node_number"):
        setattr(mod, name, unavailable(name))
    sys.modules["amdsmi"] = mod
