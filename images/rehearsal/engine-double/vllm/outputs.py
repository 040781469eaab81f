"""Test double of vLLM's request outputs."""

from dataclasses import dataclass, field


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list = field(default_factory=list)


@dataclass
class RequestOutput:
    request_id: str
    prompt: str
    outputs: list = field(default_factory=list)
