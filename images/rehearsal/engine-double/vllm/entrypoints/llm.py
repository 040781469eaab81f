"""Test double of vllm.LLM: front-end process; the engine core runs in a child process
named "EngineCore" (multiprocessing, spawn), fed its config by pickling, which does not
re-run `__post_init__`.

As upstream, `VLLM_ENABLE_V1_MULTIPROCESSING=0` runs the engine core in-process instead:
no handshake, so no second `__post_init__` (vllm-notes.md)."""

import atexit
import contextlib
import multiprocessing
import os

from vllm.engine.arg_utils import EngineArgs
from vllm.outputs import CompletionOutput, RequestOutput
from vllm.v1.engine.core import EngineCore, run_engine_core


class _InProcess:
    """The in-process client: calls the engine core directly."""

    def __init__(self, vllm_config) -> None:
        self.core = EngineCore(vllm_config)

    def call(self, kind, *payload):
        if kind == "generate":
            return self.core.generate(*payload)
        return self.core.collective_rpc(*payload)


class _LLMEngine:
    """As upstream's LLMEngine, the front-end's holder of its own configuration."""

    def __init__(self, vllm_config) -> None:
        self.vllm_config = vllm_config


class LLM:
    def __init__(self, model: str, **kwargs) -> None:
        self.llm_engine_args = EngineArgs(model=model, **kwargs)
        vllm_config = self.llm_engine_args.create_engine_config()
        self.llm_engine = _LLMEngine(vllm_config)
        self._inproc = None
        self._proc = None
        if os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "1") == "0":
            self._inproc = _InProcess(vllm_config)
            return
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._proc = context.Process(target=run_engine_core, args=(vllm_config, child),
                                     name="EngineCore", daemon=True)
        self._proc.start()
        child.close()
        atexit.register(self.shutdown)
        for expected in ("HELLO", "READY"):
            kind, detail = self._receive()
            if kind != expected:
                raise RuntimeError(f"Engine core initialization failed: {detail}")

    def _receive(self):
        try:
            return self._conn.recv()
        except EOFError:
            raise RuntimeError("Engine core process died") from None

    def _call(self, *message):
        if self._inproc is not None:
            return self._inproc.call(message[0], *message[1:])
        self._conn.send(message)
        kind, result = self._receive()
        if kind != "ok":
            raise RuntimeError(result)
        return result

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None) -> list:
        return self._call("rpc", method, tuple(args), dict(kwargs or {}))

    def generate(self, prompts, sampling_params=None) -> list:
        from vllm.sampling_params import SamplingParams

        params = sampling_params or SamplingParams()
        prompts = [prompts] if isinstance(prompts, str) else list(prompts)
        outputs = []
        for i, prompt in enumerate(prompts):
            tokens = self._call("generate", prompt, params.max_tokens)
            text = "".join(f" t{t}" for t in tokens)
            outputs.append(RequestOutput(str(i), prompt, [CompletionOutput(0, text, tokens)]))
        return outputs

    def shutdown(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            with contextlib.suppress(OSError):
                self._conn.send(("shutdown",))
            self._proc.join(timeout=10)
            if self._proc.is_alive():
                self._proc.terminate()
