"""Test double of vllm/config/vllm.py: VllmConfig and its post-init, which calls the platform
defaults hook (unguarded append) and then a guarded "none"/"all" append."""

from dataclasses import dataclass, field

from vllm.config.compilation import CompilationConfig, CompilationMode, CUDAGraphMode


@dataclass
class ModelConfig:
    model: str = ""
    tokenizer: str = ""
    dtype: str = "bfloat16"
    max_model_len: int = 4096
    seed: int = 0
    trust_remote_code: bool = False
    enforce_eager: bool = False
    quantization: str | None = None


@dataclass
class CacheConfig:
    block_size: int = 16
    gpu_memory_utilization: float = 0.92
    cache_dtype: str = "auto"
    enable_prefix_caching: bool = True
    swap_space: float = 4.0
    num_gpu_blocks: int | None = None


@dataclass
class ParallelConfig:
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    distributed_executor_backend: str = "uni"
    worker_extension_cls: str = ""


@dataclass
class SchedulerConfig:
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    enable_chunked_prefill: bool = True


@dataclass
class DeviceConfig:
    device: str = "cuda"


@dataclass
class VllmConfig:
    model_config: ModelConfig = field(default_factory=ModelConfig)
    cache_config: CacheConfig = field(default_factory=CacheConfig)
    parallel_config: ParallelConfig = field(default_factory=ParallelConfig)
    scheduler_config: SchedulerConfig = field(default_factory=SchedulerConfig)
    compilation_config: CompilationConfig = field(default_factory=CompilationConfig)
    device_config: DeviceConfig = field(default_factory=DeviceConfig)

    def __post_init__(self) -> None:
        from vllm.platforms import current_platform

        if self.model_config.enforce_eager:
            self.compilation_config.mode = CompilationMode.NONE
            self.compilation_config.cudagraph_mode = CUDAGraphMode.NONE
        current_platform.apply_config_platform_defaults(self)
        ops = self.compilation_config.custom_ops
        if "none" not in ops and "all" not in ops:  # guarded, as upstream
            ops.append("none" if self.compilation_config.mode == CompilationMode.VLLM_COMPILE
                       else "all")

    def __str__(self) -> str:
        m, c = self.model_config, self.compilation_config
        compilation = {"mode": c.mode, "backend": c.backend, "custom_ops": c.custom_ops,
                       "cudagraph_mode": c.cudagraph_mode,
                       "cudagraph_capture_sizes": c.cudagraph_capture_sizes}
        return (f"model={m.model!r}, tokenizer={m.tokenizer!r}, dtype={m.dtype}, "
                f"max_seq_len={m.max_model_len}, seed={m.seed}, "
                f"enforce_eager={m.enforce_eager}, compilation_config={compilation!r}")
