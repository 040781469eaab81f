"""The gates a campaign lists (`gates:` inline, or `gates_file:`): argv commands, never
shell strings, that must pass before its seal is approved; `{gate_dir}` in an argument is
the gate's own output folder. Validated here so schema.py imports nothing from it.
"""

from __future__ import annotations

import posixpath
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints, model_validator

from harness.config.schema import Duration, Strict

GATE_DIR_TOKEN = "{gate_dir}"
GATE_DIR_ENV = "HARNESS_GATE_DIR"
MAX_GATES = 64
# A gate's folder sits next to these in its record; a gate may not take their names.
RESERVED = frozenset({"gates.json", "sha256sums", "addenda"})
GateName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]
Arg = Annotated[str, StringConstraints(min_length=1, max_length=4096)]


def relative_problem(value: str) -> str | None:
    """Pure: why `value` is not a plain relative path that stays below its base."""
    if not value or value.startswith("/") or "\\" in value:
        return "must be a relative path (no leading '/', no backslash)"
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        return "must not contain control characters"
    norm = posixpath.normpath(value)
    if norm == ".." or norm.startswith("../"):
        return "must stay inside its folder (no '..' out of it)"
    return None


def _relative(value: str) -> str:
    if (why := relative_problem(value)) is not None:
        raise ValueError(f"{why}: {value[:200]!r}")
    return posixpath.normpath(value)


RelPath = Annotated[str, StringConstraints(max_length=1024), AfterValidator(_relative)]


def _argv(value: Any) -> Any:
    if isinstance(value, str):
        raise ValueError("run must be an argv list (e.g. [make, test]), never a shell string")
    return value


class Expect(Strict):
    exit_code: int = Field(default=0, ge=0, le=255)
    junit: RelPath | None = Field(default=None, description="relative to the gate's folder")
    min_tests: int | None = Field(default=None, ge=0, le=10_000_000)
    min_kill_score: float | None = Field(default=None, ge=0, le=100)

    @model_validator(mode="after")
    def _tests_need_junit(self) -> Expect:
        if self.min_tests is not None and self.junit is None:
            raise ValueError("min_tests counts the tests of a JUnit file: give junit too")
        return self

    @property
    def least_tests(self) -> int:
        return 1 if self.min_tests is None else self.min_tests


def _name(value: str) -> str:
    if value.lower() in RESERVED:
        raise ValueError(f"{value!r} is the name of a file of the gate record")
    return value


class Gate(Strict):
    name: Annotated[GateName, AfterValidator(_name)]
    run: Annotated[list[Arg], BeforeValidator(_argv)] = Field(min_length=1, max_length=1000)
    timeout: Duration
    cwd: RelPath | None = Field(default=None, description="relative to the project folder")
    expect: Expect = Expect()


def _unique(gates: list[Gate]) -> list[Gate]:
    seen: set[str] = set()
    for g in gates:
        if g.name.lower() in seen:
            raise ValueError(f"two gates are named {g.name!r} (names are folders: "
                             "unique, case-insensitively)")
        seen.add(g.name.lower())
    return gates


class GateList(Strict):
    gates: Annotated[list[Gate], AfterValidator(_unique)] = Field(min_length=1,
                                                                  max_length=MAX_GATES)
