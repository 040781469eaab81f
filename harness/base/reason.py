"""A reason: why something was refused, as one typed value every seam carries.

It names its rule, who found it (`by`) and a detail for people. Its exit class comes from
the rule catalogue, never its text, so a post-step cannot claim the host was at fault.
`Reason.of` is the one reader of every stored form; nothing decides from the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.base import catalogue
from harness.base.errors import ENVIRONMENT, REFUSED

HARNESS = "harness"  # `by` of the harness's own reasons
# The older text forms: "RULE-ID: detail", a post-step's "[step] ..." or "POST-<step>: ...".
_PREFIXED = re.compile(rf"^({catalogue.RULE_SHAPE}): (.*)$", re.S)
_BY_STEP = re.compile(r"^\[([^\]\n]{1,200})\] (.*)$", re.S)
_V1_POST = re.compile(r"^POST-(.+?): (.*)$", re.S)


def _split(text: str) -> tuple[str | None, str]:
    m = _PREFIXED.match(text)
    return (m.group(1), m.group(2)) if m else (None, text)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


@dataclass(frozen=True, slots=True)
class Reason:
    rule: str
    detail: str
    by: str = HARNESS

    @property
    def exit(self) -> int:
        """The exit class this reason stops a run with: the catalogue's for the harness's
        own rules (1 refused, 3 environment); a post-step's reasons always refuse."""
        return catalogue.exit_class(self.rule) if self.by == HARNESS else REFUSED

    @property
    def environment(self) -> bool:
        """The host was at fault (exit 3)."""
        return self.exit == ENVIRONMENT

    def text(self) -> str:
        """One line for people: "RULE: detail", "[step] RULE: detail" when a post-step
        found it, so no post-step's text can begin like one of the harness's own."""
        line = f"{self.rule}: {self.detail}" if self.rule else self.detail
        return line if self.by == HARNESS else f"[{self.by}] {line}"

    __str__ = text

    def as_dict(self) -> dict[str, str]:
        return {"rule": self.rule, "by": self.by, "detail": self.detail}

    @classmethod
    def of(cls, item: object, *, by: str = HARNESS, default_rule: str = "") -> Reason:
        """A reason from any stored form. Read from a post-step's own output (`by` its name)
        every reason is that step's, whatever it claims; from the harness's own records the
        object's `by` or the text's step prefix says who found it."""
        if isinstance(item, Reason):
            return item if by == HARNESS else cls(item.rule, item.detail, by)
        if isinstance(item, Mapping):
            own = _text(item.get("by")) if by == HARNESS else ""
            return cls(_text(item.get("rule")) or default_rule, _text(item.get("detail")),
                       own or by)
        if not isinstance(item, str):
            return cls(default_rule, _text(item), by)
        step = _BY_STEP.match(item) if by == HARNESS else None
        if step:
            by, item = step.group(1), step.group(2)
        post = _V1_POST.match(item) if by == HARNESS else None
        if post and f"POST-{post.group(1)}" not in catalogue.RULES:
            by, item = post.group(1), post.group(2)
            default_rule = default_rule or catalogue.POST_REFUSED
        rule, detail = _split(item)
        return cls(rule or default_rule, detail, by)


def rules(reasons: Iterable[Reason]) -> list[str]:
    """The ids that refused, sorted, each once (a record's and a journal row's `rules`)."""
    return sorted({r.rule for r in reasons if r.rule})


def exit_class(reasons: Iterable[Reason]) -> int:
    """3 when any reason says the host was at fault, else 1: what a refused run exits."""
    return ENVIRONMENT if any(r.environment for r in reasons) else REFUSED


def ordered(reasons: Iterable[Reason]) -> list[Reason]:
    """The harness's environment reasons first, for people reading a list (a screen, a
    journal line); decisions use `exit_class`, never the order."""
    return sorted(reasons, key=lambda r: not r.environment)
