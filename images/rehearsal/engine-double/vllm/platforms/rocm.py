"""Test double of vllm/platforms/rocm.py: the config-defaults hook and its one unguarded append.

Upstream (rocm.py:894 at the seed's pin, :1155 in 0.33.0) appends "+sparse_attn_indexer"
without checking whether it is already there, while its neighbours are guarded. Calling the
hook twice on one config therefore appends twice. That is the mechanism reproduced here.
"""


class RocmPlatform:
    device_name = "rocm"
    device_type = "cuda"

    @classmethod
    def apply_config_platform_defaults(cls, vllm_config) -> None:
        compilation_config = vllm_config.compilation_config
        fp8 = vllm_config.model_config.quantization == "fp8"
        if fp8 and "+quant_fp8" not in compilation_config.custom_ops:  # guarded, as upstream
            compilation_config.custom_ops.append("+quant_fp8")
        compilation_config.custom_ops.append("+sparse_attn_indexer")  # unguarded, as upstream
