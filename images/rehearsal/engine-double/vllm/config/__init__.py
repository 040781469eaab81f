"""Test double of vllm.config."""

from vllm.config.compilation import CompilationConfig, CompilationMode, CUDAGraphMode
from vllm.config.vllm import (
    CacheConfig,
    DeviceConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
    VllmConfig,
)

__all__ = ["CUDAGraphMode", "CacheConfig", "CompilationConfig", "CompilationMode",
           "DeviceConfig", "ModelConfig", "ParallelConfig", "SchedulerConfig", "VllmConfig"]
