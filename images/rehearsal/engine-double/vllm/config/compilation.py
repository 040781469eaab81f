"""Test double of vllm/config/compilation.py: the two enums and a small CompilationConfig.

Members and values as upstream (compilation.py:37-48 CompilationMode, an IntEnum;
CUDAGraphMode right after it, a plain Enum whose composite members have tuple values).
"""

import enum
from dataclasses import dataclass, field


class CompilationMode(enum.IntEnum):
    NONE = 0
    STOCK_TORCH_COMPILE = 1
    DYNAMO_TRACE_ONCE = 2
    VLLM_COMPILE = 3


class CUDAGraphMode(enum.Enum):
    NONE = 0
    PIECEWISE = 1
    FULL = 2
    FULL_DECODE_ONLY = (FULL, NONE)
    FULL_AND_PIECEWISE = (FULL, PIECEWISE)


@dataclass
class CompilationConfig:
    mode: CompilationMode = CompilationMode.VLLM_COMPILE
    custom_ops: list = field(default_factory=list)
    cudagraph_mode: CUDAGraphMode = CUDAGraphMode.FULL_AND_PIECEWISE
    cudagraph_capture_sizes: list = field(default_factory=lambda: [1, 2, 4, 8])
    splitting_ops: list = field(default_factory=lambda: ["vllm::unified_attention"])
    compile_sizes: list = field(default_factory=list)
    backend: str = "inductor"
    use_inductor_graph_partition: bool = False

    def __post_init__(self) -> None:
        # Upstream's validator accepts member names and ints as well as members.
        if isinstance(self.mode, str):
            self.mode = CompilationMode[self.mode.upper()]
        elif not isinstance(self.mode, CompilationMode):
            self.mode = CompilationMode(self.mode)
