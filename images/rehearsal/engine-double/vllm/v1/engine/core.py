"""Test double of vllm/v1/engine/core.py: the engine core in its own process.

As upstream: `EngineCore.__init__` loads the general plugins, logs the config line, builds
the executor, profiles memory and sizes the KV cache, warms up; `EngineCoreProc` does that
inside `_perform_handshakes` and, after the handshake, calls `vllm_config.__post_init__()`
again ("update config which may have changed from the handshake") on the same object its
uni worker shares. Then the busy loop serves generate and collective_rpc requests.
"""

import os
import time
from contextlib import contextmanager

from vllm import __version__ as VLLM_VERSION
from vllm.logger import configure, init_logger
from vllm.plugins import load_general_plugins
from vllm.v1.executor import UniProcExecutor
from vllm.v1.worker.gpu_worker import KV_BYTES_PER_TOKEN

logger = init_logger(__name__)


class EngineCore:
    def __init__(self, vllm_config, executor_class=UniProcExecutor) -> None:
        load_general_plugins()
        self.vllm_config = vllm_config
        logger.info("Initializing a V1 LLM engine (v%s) with config: %s", VLLM_VERSION,
                    vllm_config)
        self.model_executor = executor_class(vllm_config)
        num_gpu_blocks = self._initialize_kv_caches(vllm_config)
        vllm_config.cache_config.num_gpu_blocks = num_gpu_blocks

    def _initialize_kv_caches(self, vllm_config) -> int:
        start = time.time()
        available = self.model_executor.determine_available_memory()
        num_tokens = available // KV_BYTES_PER_TOKEN
        self.model_executor.initialize_from_config(num_tokens)
        self.model_executor.compile_or_warm_up_model()
        logger.info("init engine (profile, create kv cache, warmup model) took %.2f s",
                    time.time() - start + 4.2)
        return num_tokens // vllm_config.cache_config.block_size

    def generate(self, prompt: str, max_tokens: int) -> list:
        return [self.model_executor.execute_model((prompt, step)) for step in range(max_tokens)]

    def collective_rpc(self, method, args=(), kwargs=None) -> list:
        return self.model_executor.collective_rpc(method, args, kwargs)


class EngineCoreProc(EngineCore):
    def __init__(self, vllm_config, conn) -> None:
        self.conn = conn
        with self._perform_handshakes(conn):
            super().__init__(vllm_config)
        # Update config which may have changed from the handshake.
        vllm_config.__post_init__()

    @contextmanager
    def _perform_handshakes(self, conn):
        conn.send(("HELLO", os.getpid()))
        yield
        conn.send(("READY", os.getpid()))

    def run_busy_loop(self) -> None:
        while True:
            message = self.conn.recv()
            kind, payload = message[0], message[1:]
            if kind == "shutdown":
                return
            try:
                if kind == "generate":
                    result = self.generate(*payload)
                else:
                    result = self.collective_rpc(*payload)
                self.conn.send(("ok", result))
            except Exception as e:
                self.conn.send(("error", f"{type(e).__name__}: {e}"))


def run_engine_core(vllm_config, conn) -> None:
    configure(prefix=f"(EngineCore pid={os.getpid()}) ")
    try:
        engine = EngineCoreProc(vllm_config, conn)
    except Exception as e:
        logger.exception("EngineCore failed to start")
        conn.send(("FAILED", f"{type(e).__name__}: {e}"))
        raise
    engine.run_busy_loop()
