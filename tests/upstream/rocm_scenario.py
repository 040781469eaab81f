"""The duplicate "+sparse_attn_indexer" append, reproduced with vLLM's own ROCm code on a CPU.

Run in a fresh interpreter by the `rocm_scenario` fixture (tests/upstream/conftest.py):
`python rocm_scenario.py OUT_DIR`. No vLLM file is touched: the harness's transition trace
wraps the real classes in memory, exactly as the in-container instrument does. Writes to
OUT_DIR: transitions.jsonl (the trace), startup.json and generation.json (observation
documents of the config after the first and the second direct hook call), result.json.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from amdsmi_standin import install_amdsmi_standin  # this folder: the script's own


def main(out: str) -> None:
    if "amdsmi" in sys.modules or os.environ.get("VLLM_TARGET_DEVICE") == "cpu":
        raise SystemExit("run in a fresh interpreter without VLLM_TARGET_DEVICE=cpu")
    install_amdsmi_standin()

    from harness.instrument.harness_observer import snapshot, trace
    from harness.instrument.harness_observer.encode import encode, type_name

    trace.install(out)  # the instrument's own install: post-init and the platform's hook

    import vllm
    from vllm.config import VllmConfig
    from vllm.platforms import current_platform
    from vllm.platforms.rocm import RocmPlatform

    steps: list[dict[str, Any]] = []

    def record(label: str, cfg: Any) -> None:
        ops = cfg.compilation_config.custom_ops
        steps.append({"label": label, "config_id": id(cfg), "list_id": id(ops),
                      "custom_ops": list(ops), "mode": encode(cfg.compilation_config.mode)})

    cfg = VllmConfig()  # __post_init__ calls current_platform.apply_config_platform_defaults
    record("VllmConfig()", cfg)

    RocmPlatform.apply_config_platform_defaults(cfg)  # direct call 1
    record("apply_config_platform_defaults call 1", cfg)
    snapshot.write_document(out, "startup.json", snapshot.observation(
        "startup", cfg, rank=0, hook="upstream tier: after direct call 1"))

    RocmPlatform.apply_config_platform_defaults(cfg)  # direct call 2, same config
    record("apply_config_platform_defaults call 2", cfg)
    snapshot.write_document(out, "generation.json", snapshot.observation(
        "generation", cfg, rank=0, hook="upstream tier: after direct call 2"))

    cfg.__post_init__()  # what EngineCore does after the handshake
    record("VllmConfig.__post_init__ again", cfg)

    result = {"vllm": vllm.__version__, "platform": type_name(type(current_platform)),
              "steps": steps}
    with open(os.path.join(out, "result.json"), "w") as f:
        json.dump(result, f, indent=2, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1])
