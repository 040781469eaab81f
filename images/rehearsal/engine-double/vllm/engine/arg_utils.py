"""Test double of vllm/engine/arg_utils.py: EngineArgs -> VllmConfig (the first post-init)."""

from dataclasses import dataclass
from typing import Any

from vllm.config import (
    CacheConfig,
    CompilationConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
    VllmConfig,
)


@dataclass
class EngineArgs:
    model: str
    dtype: str = "bfloat16"
    max_model_len: int = 4096
    seed: int = 0
    enforce_eager: bool = False
    quantization: str | None = None
    gpu_memory_utilization: float = 0.92
    block_size: int = 16
    enable_prefix_caching: bool = True
    tensor_parallel_size: int = 1
    distributed_executor_backend: str = "uni"
    max_num_seqs: int = 256
    compilation_config: Any = None
    worker_extension_cls: str = ""

    def __post_init__(self) -> None:
        from vllm.plugins import load_general_plugins

        load_general_plugins()  # as upstream: plugins load in the front-end process too

    def create_engine_config(self) -> VllmConfig:
        if self.tensor_parallel_size != 1 or self.distributed_executor_backend != "uni":
            raise ValueError("the engine double has only the one-GPU uni executor")
        compilation = self.compilation_config
        if isinstance(compilation, dict):
            compilation = CompilationConfig(**compilation)
        elif isinstance(compilation, int):
            compilation = CompilationConfig(mode=compilation)
        elif compilation is None:
            compilation = CompilationConfig()
        return VllmConfig(
            model_config=ModelConfig(model=self.model, tokenizer=self.model, dtype=self.dtype,
                                     max_model_len=self.max_model_len, seed=self.seed,
                                     enforce_eager=self.enforce_eager,
                                     quantization=self.quantization),
            cache_config=CacheConfig(block_size=self.block_size,
                                     gpu_memory_utilization=self.gpu_memory_utilization,
                                     enable_prefix_caching=self.enable_prefix_caching),
            parallel_config=ParallelConfig(worker_extension_cls=self.worker_extension_cls),
            scheduler_config=SchedulerConfig(max_num_seqs=self.max_num_seqs),
            compilation_config=compilation,
        )
