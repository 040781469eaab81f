"""Reference values for a control's figures, with tolerances (as ReFrame's references).

    reference:
      duration_s: {value: 3.2, tolerance: 0.25}      # within ±25 %
      kv_cache_gib: {lower: 10.5, upper: 12}         # absolute bounds; either may be left out
      lock_wait_s: {upper: 600, refuse: true}        # outside refuses the run

Outside is marked, and refuses only with `refuse: true`. VLLM_METRICS repeats
harness.measure.metrics.METRICS (config cannot import measure; a unit test keeps them
equal). Pure.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

FIGURES = ("duration_s", "lock_wait_s", "lock_hold_s", "exit_code")
FIGURE_UNITS = {"duration_s": "s", "lock_wait_s": "s", "lock_hold_s": "s", "exit_code": ""}
VLLM_METRICS = (
    "kv_cache_gib", "kv_tokens", "max_concurrency", "max_model_len", "model_load_gib",
    "model_load_s", "graph_capture_s", "graph_capture_gib", "engine_init_s", "compilation_s",
    "generated_tokens",
)
# From the run's telemetry (run.json's `telemetry` block), where it was sampled: the energy
# its GPUs drew (rocm, where power is known) and per generated token (where the workload
# said how many it generated), the container's memory peak and mean CPU use.
TELEMETRY_FIGURES = ("energy_j", "energy_per_token_j", "memory_peak_bytes", "cpu_pct_mean")
TELEMETRY_UNITS = {"energy_j": "J", "energy_per_token_j": "J/token", "memory_peak_bytes": "B",
                   "cpu_pct_mean": "%"}
NAMES = FIGURES + VLLM_METRICS + TELEMETRY_FIGURES
MAX_ABS = 1e15  # a bound on every number here: past it a figure is not a measurement
MAX_TOLERANCE = 10.0  # ±1000 %: wider is no reference at all


def _bounded(value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and abs(value) <= MAX_ABS):
        raise ValueError(f"must be a finite number of at most {MAX_ABS:g} in size")
    return value


Number = Annotated[float, AfterValidator(_bounded)]


class Bound(BaseModel):
    """`value` with a relative `tolerance`, or absolute `lower`/`upper` bounds."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    value: Number | None = None
    tolerance: float | None = Field(default=None, ge=0, le=MAX_TOLERANCE,
                                    description="a fraction of |value|: 0.05 is ±5 %")
    lower: Number | None = None
    upper: Number | None = None
    refuse: bool = Field(default=False, description="a value outside refuses the run")

    @model_validator(mode="after")
    def _one_form(self) -> Bound:
        relative = self.value is not None or self.tolerance is not None
        if relative and (self.lower is not None or self.upper is not None):
            raise ValueError("give value and tolerance, or lower/upper, not both")
        if relative and (self.value is None or self.tolerance is None):
            raise ValueError("value and tolerance go together (tolerance 0.05 is ±5 %)")
        if not relative and self.lower is None and self.upper is None:
            raise ValueError("give value and tolerance, or lower and/or upper")
        if self.lower is not None and self.upper is not None and self.lower > self.upper:
            raise ValueError(f"lower {self.lower:g} is above upper {self.upper:g}")
        return self

    def limits(self) -> tuple[float | None, float | None]:
        """(lower, upper): None is no bound on that side."""
        if self.value is not None and self.tolerance is not None:
            span = abs(self.value) * self.tolerance
            return self.value - span, self.value + span
        return self.lower, self.upper


def _names(refs: dict[str, Bound]) -> dict[str, Bound]:
    unknown = sorted(set(refs) - set(NAMES))
    if unknown:
        raise ValueError(f"no figure named {', '.join(map(repr, unknown))} "
                         f"(figures: {', '.join(NAMES)})")
    return refs


References = Annotated[dict[str, Bound], AfterValidator(_names)]


def within(value: float | int | None, lower: float | None, upper: float | None) -> bool | None:
    """True inside [lower, upper] (bounds included), False outside, None without a value."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return (lower is None or value >= lower) and (upper is None or value <= upper)


def finding(name: str, bound: Bound, value: Any) -> dict:
    """What the report and the performance log keep of one figure against its reference."""
    lower, upper = bound.limits()
    inside = within(value, lower, upper)
    return {"metric": name, "value": value if inside is not None else None,
            "lower": lower, "upper": upper, "outside": None if inside is None else not inside,
            "refuse": bound.refuse}


def range_text(lower: float | None, upper: float | None) -> str:
    """`[2.4, 4]`, `≤ 600`, `≥ 10.5`: the expected range in a reason or a table cell."""
    if lower is not None and upper is not None:
        return f"[{lower:.6g}, {upper:.6g}]"
    return f"≤ {upper:.6g}" if upper is not None else f"≥ {lower:.6g}"
