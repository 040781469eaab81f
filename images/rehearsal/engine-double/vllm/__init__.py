"""TEST DOUBLE of vLLM for the harness rehearsal image (standard library only).

It reproduces, and only reproduces, the mechanism behind the seed incident (see the harness
docs, vllm-notes.md): an IntEnum compilation mode, a platform defaults hook that appends
"+sparse_attn_indexer" unguarded, a `VllmConfig.__post_init__` that the engine core calls a
second time after its start-up handshake, in a separate process, on the very config object
its one-process (`uni`) worker shares. It loads no model and touches no GPU; the numbers in
its memory log lines are made up but shaped like vLLM's.
"""

__version__ = "0.0.0+double"


def __getattr__(name: str):
    # Lazy, like vLLM: importing `vllm` alone must not start the engine machinery.
    if name == "LLM":
        from vllm.entrypoints.llm import LLM

        return LLM
    if name == "SamplingParams":
        from vllm.sampling_params import SamplingParams

        return SamplingParams
    raise AttributeError(name)
