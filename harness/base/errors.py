"""Errors that carry their exit code, so every command maps failures the same way.

Exit codes mean one thing everywhere:
0 ok/accepted, 1 refused or verification failed, 2 invalid input or usage,
3 environment (no engine, lock timeout, missing image).
"""

from __future__ import annotations

OK = 0
REFUSED = 1
INVALID = 2
ENVIRONMENT = 3


class HarnessError(Exception):
    """Base error; `code` is the process exit code it maps to."""

    code = INVALID

    def __init__(self, message: str, *, rule: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.rule = rule


def ruled(rule: str | None, message: str) -> str:
    """One error line, `[RULE] message`: the one place a rule is put before its message, so
    a message that already begins with its own rule (`RULE: ...`, `[RULE] ...`) is left as
    it is and no rule is printed twice."""
    if not rule or message.startswith((f"{rule}: ", f"[{rule}] ")):
        return message
    return f"[{rule}] {message}"


class InvalidInput(HarnessError):
    """Bad input: a file, an argument, a document. Exit 2."""

    code = INVALID

    def __init__(self, message: str, *, faults: list[str] | None = None, rule: str | None = None):
        super().__init__(message, rule=rule)
        self.faults = faults or []


class EnvironmentFault(HarnessError):
    """The host is not fit: no Docker engine, lock timeout, missing image. Exit 3."""

    code = ENVIRONMENT


class Refused(HarnessError):
    """A rule refused the run or the evidence failed verification. Exit 1."""

    code = REFUSED
