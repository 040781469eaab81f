"""What an identity contract is: the dotted fields Gate 0 compares. Pure and in config, so
`harness check` and `harness finalize --contract` judge a contract by one rule without
loading the finalizer. The default, `VLLM_IDENTITY`, leaves out the fields vLLM settles
after start-up (`SETTLED_AFTER_STARTUP`), which would refuse every run; `contract: all`
compares every field (docs/gate0-contract.md).
"""

from __future__ import annotations

from typing import Any

Where = tuple[str | int, ...]

# The kinds of difference Gate 0 classifies, here so config can check them without the judge.
VALUE_CHANGED = "value-changed"
ENCODING_MISMATCH = "encoding-mismatch"
MISSING_IN_STARTUP = "missing-in-startup"
MISSING_IN_GENERATION = "missing-in-generation"
KINDS = (VALUE_CHANGED, ENCODING_MISMATCH, MISSING_IN_STARTUP, MISSING_IN_GENERATION)

ALL = "all"  # `contract: all`: compare every field either observation holds

# What Gate 0 compares when a campaign names no contract; a field missing from an
# observation refuses the run, so an engine without one needs a contract of its own.
VLLM_IDENTITY: tuple[str, ...] = (
    "cache.block_size",
    "cache.cache_dtype",
    "cache.gpu_memory_utilization",
    "compilation.backend",
    "compilation.compile_sizes",
    "compilation.cudagraph_capture_sizes",
    "compilation.cudagraph_mode",
    "compilation.custom_ops",
    "compilation.mode",
    "compilation.splitting_ops",
    "compilation.use_inductor_graph_partition",
    "device.device",
    "model.dtype",
    "model.enforce_eager",
    "model.model",
    "model.quantization",
    "model.seed",
    "model.tokenizer",
    "model.trust_remote_code",
    "parallel.distributed_executor_backend",
    "parallel.pipeline_parallel_size",
    "parallel.tensor_parallel_size",
    "parallel.worker_extension_cls",
    "scheduler.max_num_batched_tokens",
    "scheduler.max_num_seqs",
)

# Left out of VLLM_IDENTITY: vLLM settles them after the start-up observation, so a
# difference is no change of engine. cache.block_size stays in deliberately (the KV layout
# the run measured); a model whose block size vLLM changes needs its own contract.
SETTLED_AFTER_STARTUP: dict[str, str] = {
    "cache.num_gpu_blocks": "set by the engine when it sizes the KV cache, just after the "
                            "start-up observation (the profile run decides it)",
    "cache.num_cpu_blocks": "set together with num_gpu_blocks when the KV cache is sized",
    "model.max_model_len": "auto-fitted to the KV cache that start-up measured when the "
                           "control does not fix it",
    "scheduler.enable_chunked_prefill": "vLLM may switch it after start-up (the notes list it "
                                        "among the fields that legitimately change)",
    "cache.enable_prefix_caching": "vLLM may switch it after start-up (the notes list it "
                                   "among the fields that legitimately change)",
    "compilation.compilation_time": "a measurement (seconds spent compiling), not a setting",
}


class ContractError(ValueError):
    """A contract that cannot be used; `faults` says every reason."""

    def __init__(self, faults: list[str]) -> None:
        super().__init__("; ".join(faults))
        self.faults = faults


def contract_faults(obj: Any) -> list[tuple[Where, str]]:
    """Every reason `obj` is not a contract, each with the path it is about. Pure."""
    base: Where = ()
    if isinstance(obj, dict):
        if set(obj) != {"fields"}:
            return [((), "a contract object has exactly one key, 'fields'")]
        obj, base = obj["fields"], ("fields",)
    if not isinstance(obj, list) or not obj:
        return [(base, "a contract is a non-empty list of dotted field names")]
    faults: list[tuple[Where, str]] = [
        ((*base, i), f"entry {i} is not a non-empty string: {v!r}"[:200])
        for i, v in enumerate(obj) if not isinstance(v, str) or not v.strip()]
    seen: set[str] = set()
    for i, v in enumerate(obj):
        if isinstance(v, str):
            if v in seen:
                faults.append(((*base, i), f"field {v!r} is listed twice"))
            seen.add(v)
    return faults


def fields_of(obj: Any) -> list[str]:
    """The field names of a valid contract, in order (list or {"fields": [...]})."""
    return list(obj["fields"] if isinstance(obj, dict) else obj)


def choice_faults(obj: Any) -> list[tuple[Where, str]]:
    """`contract_faults` for a campaign's `contract:` or gate0's option, where `all` is also
    a choice. Pure."""
    if obj == ALL:
        return []
    if isinstance(obj, str):
        return [((), f"a contract is a list of dotted field names or {ALL!r}, not {obj!r}"[:200])]
    return contract_faults(obj)


def parse_choice(obj: Any) -> list[str] | str:
    """A campaign's `contract:` (or gate0's option): `all`, or a contract's field names."""
    if obj == ALL:
        return ALL
    faults = choice_faults(obj)
    if faults:
        raise ContractError([message for _, message in faults])
    return fields_of(obj)


def resolve(choice: list[str] | str | None) -> list[str] | None:
    """The fields Gate 0 compares for a choice: none made -> VLLM_IDENTITY; `all` -> None
    (every observed field, the finalizer's union); a list -> that list. Pure."""
    if choice is None:
        return list(VLLM_IDENTITY)
    if choice == ALL:
        return None
    return list(choice)


def parse_contract(obj: Any) -> list[str]:
    """Validate a loaded contract; order is kept, duplicates and empties are refused."""
    faults = contract_faults(obj)
    if faults:
        raise ContractError([message for _, message in faults])
    return fields_of(obj)
