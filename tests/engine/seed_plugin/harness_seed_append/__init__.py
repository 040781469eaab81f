"""TEST ONLY. The seed's defect, given to the real engine on a CPU.

vLLM's ROCm platform appends "+sparse_attn_indexer" to `compilation_config.custom_ops` in
`apply_config_platform_defaults` without checking that it is already there, and
`VllmConfig.__post_init__` calls that hook each time it runs. The engine core runs the
post-init a second time after its start-up handshake, so on a ROCm host the list the
engine was sized under is not the list it generates under: the seed's Gate-0 case.

The CPU platform's hook is a no-op, so the defect cannot arise here by itself. This
`vllm.general_plugins` entry point (found through PYTHONPATH, mounted read-only by the
control `engine-cpu-seed`, never installed) wraps the current platform's hook with the
same unguarded append, in every process that loads plug-ins. Nothing else changes: the
engine, its files and the observer are the real ones. Standard library only.
"""

from __future__ import annotations

import functools

ENTRY = "+sparse_attn_indexer"
MARK = "__harness_seed_append__"


def register() -> None:
    from vllm.platforms import current_platform

    platform = type(current_platform)
    original = platform.__dict__.get("apply_config_platform_defaults")
    if original is None:  # inherited: wrap what the class resolves to
        original = classmethod(platform.apply_config_platform_defaults.__func__)
    func = original.__func__ if isinstance(original, classmethod) else original
    if getattr(func, MARK, False):
        return

    @functools.wraps(func)
    def apply_config_platform_defaults(cls, vllm_config, *args, **kwargs):
        result = func(cls, vllm_config, *args, **kwargs)
        vllm_config.compilation_config.custom_ops.append(ENTRY)  # unguarded, as ROCm's
        return result

    setattr(apply_config_platform_defaults, MARK, True)
    platform.apply_config_platform_defaults = classmethod(apply_config_platform_defaults)
