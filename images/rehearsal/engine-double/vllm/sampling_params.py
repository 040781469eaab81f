"""Test double of vllm.SamplingParams: only what the driver uses."""

from dataclasses import dataclass


@dataclass
class SamplingParams:
    max_tokens: int = 16
    temperature: float = 1.0
