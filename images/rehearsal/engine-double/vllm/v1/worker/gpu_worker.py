"""Test double of the GPU worker: made-up but vLLM-shaped memory numbers, a fake token step."""

import math
import time

from vllm.logger import init_logger
from vllm.v1.worker.worker_base import WorkerBase

logger = init_logger(__name__)

GIB = 1 << 30
TOTAL_GIB = 23.98          # a 24 GB RDNA3 card
MODEL_GIB = 1.52
ACTIVATION_PEAK_GIB = 0.91
NON_TORCH_GIB = 0.29
GRAPH_GIB = 0.25
KV_BYTES_PER_TOKEN = 24576


class Worker(WorkerBase):
    def init_device(self) -> None:
        self.device = "cuda:0"

    def load_model(self) -> None:
        start = time.perf_counter()
        logger.info("Model loading took %s GiB memory and %.6f seconds", MODEL_GIB,
                    time.perf_counter() - start + 0.41)

    def determine_available_memory(self) -> int:
        util = self.vllm_config.cache_config.gpu_memory_utilization
        budget = math.ceil(TOTAL_GIB * GIB * util)
        non_kv = int((MODEL_GIB + ACTIVATION_PEAK_GIB + NON_TORCH_GIB) * GIB)
        available = budget - non_kv - int(GRAPH_GIB * GIB)
        logger.info("Available KV cache memory: %.2f GiB", available / GIB)
        return available

    def initialize_from_config(self, num_tokens: int) -> None:
        self.kv_tokens = num_tokens
        max_len = self.vllm_config.model_config.max_model_len
        logger.info("GPU KV cache size: %s tokens", f"{num_tokens:,}")
        logger.info("Maximum concurrency for %s tokens per request: %.2fx", f"{max_len:,}",
                    num_tokens / max_len)

    def compile_or_warm_up_model(self) -> None:
        logger.info("Graph capturing finished in %.0f secs, took %.2f GiB", 3, GRAPH_GIB)

    def execute_model(self, scheduler_output) -> int:
        """One generation step: a deterministic fake token from the prompt and the step."""
        prompt, step = scheduler_output
        return (sum(prompt.encode()) * 31 + step * 7) % 50000
