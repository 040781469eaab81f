"""verdict.json, what one post-step decided: its one shape, written and read back here.

A reason's `by` is the step the harness ran, never what the step says of itself, so no
step can claim one of the harness's environment rules (exit 3). The file is the step's,
so it is hostile: bounded, no symlink, strict JSON, type-checked; a bad one is a problem
(POST-VERDICT-UNREADABLE), never an exception."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.base.catalogue import POST_REFUSED, is_rule_id
from harness.base.readfile import InputError, read_bounded
from harness.base.reason import Reason
from harness.base.states import Verdict
from harness.base.tree import printable
from harness.instrument.harness_observer.encode import loads as strict_loads
from harness.measure.runfolder.layout import VERDICT

SCHEMA = "harness.verdict/v2"  # v1: reasons as "RULE: detail" text
VERDICT_LIMIT = 1 << 20  # a verdict is a few KiB; gate0's lists its contract and findings
MAX_REASONS = 50
MAX_REASON_CHARS = 1000
_SHAPE = 'reasons must be a list of strings or {"rule", "detail"} objects'


@dataclass(frozen=True)
class PostResult:
    """One post-step as the harness saw it: its exit code (None: it never ran, or was
    killed), the verdict it wrote (None: none) and its reasons, each already the step's."""

    name: str
    exit_code: int | None
    verdict: Verdict | None
    reasons: tuple[Reason, ...] = ()

    @classmethod
    def refusal(cls, name: str, rule: str, detail: str,
                exit_code: int | None = None) -> PostResult:
        """A step the harness refused before it could judge (its folder, its command)."""
        return cls(name, exit_code, Verdict.REFUSED, (Reason(rule, detail, name),))


def verdict_of(reasons: Sequence[object]) -> Verdict:
    """Refused when there is any reason, else accepted: every built-in judge's rule."""
    return Verdict.REFUSED if reasons else Verdict.ACCEPTED


def items(reasons: Iterable[Reason]) -> list[dict[str, str]]:
    """The reasons as a verdict.json holds them: `{"rule", "detail"}`, no `by`."""
    return [{"rule": r.rule, "detail": r.detail} for r in reasons]


def document(reasons: Sequence[Reason], **fields: Any) -> dict[str, Any]:
    """A built-in step's verdict.json: its schema, verdict and reasons, then `fields`."""
    return {"schema": SCHEMA, "verdict": verdict_of(reasons), "reasons": items(reasons),
            **fields}


def _clip(text: str) -> str:
    return text if len(text) <= MAX_REASON_CHARS else text[:MAX_REASON_CHARS] + "..."


def _item(raw: object) -> str | dict[str, str] | None:
    """One reason as written, printable and clipped; None when it is not a reason."""
    if isinstance(raw, str):
        return _clip(printable(raw))
    if not isinstance(raw, dict) or not isinstance(raw.get("detail"), str):
        return None
    rule = raw.get("rule")
    if rule not in (None, "") and not is_rule_id(rule):
        return None
    return {"rule": rule or "", "detail": _clip(printable(raw["detail"]))}


def _reasons(raw: object) -> list[str | dict[str, str]] | None:
    """The reasons a verdict lists; None when the list is not one of reasons."""
    if raw is None:
        return []
    found = [_item(r) for r in raw] if isinstance(raw, list) else [None]
    kept = [r for r in found if r is not None]
    if len(kept) < len(found):
        return None
    if len(kept) > MAX_REASONS:
        return [*kept[:MAX_REASONS], f"(and {len(kept) - MAX_REASONS} more reasons in {VERDICT})"]
    return kept


def _parse(doc: object) -> tuple[Verdict | None, list[str | dict[str, str]], str | None]:
    if not isinstance(doc, dict):
        return None, [], f"{VERDICT} is a JSON {type(doc).__name__}, not an object"
    verdict, kept = doc.get("verdict"), _reasons(doc.get("reasons"))
    if verdict is not None and verdict not in tuple(Verdict):
        return None, [], _clip(f"{VERDICT}: verdict must be one of {', '.join(Verdict)}, "
                               f"not {printable(json.dumps(verdict)[:80])}")
    if kept is None:
        return None, [], f"{VERDICT}: {_SHAPE}"
    return (None if verdict is None else Verdict(verdict)), kept, None


def read(out_dir: Path, step: str) -> tuple[Verdict | None, list[Reason], str | None]:
    """(verdict, reasons, problem) from the `verdict.json` post-step `step` wrote in `out_dir`, if
    it wrote one: each reason the step's, under the rule it named (or POST-REFUSED)."""
    path = Path(out_dir) / VERDICT
    if not os.path.lexists(path):
        return None, [], None
    try:
        doc = strict_loads(read_bounded(path, VERDICT_LIMIT, "verdict file").decode("utf-8"))
    except InputError as e:
        return None, [], _clip(e.message.replace(os.fspath(path), VERDICT, 1))
    except UnicodeDecodeError as e:
        return None, [], f"{VERDICT} is not UTF-8 ({e.reason} at byte {e.start})"
    except ValueError as e:  # encode.DecodeError: NaN, a duplicate key, too deep, a huge int
        return None, [], _clip(f"{VERDICT} is not strict JSON: {e}")
    verdict, kept, problem = _parse(doc)
    return verdict, [Reason.of(k, by=step, default_rule=POST_REFUSED) for k in kept], problem


def result(step: str, exit_code: int | None, verdict: Verdict | None,
           reasons: list[Reason], faults: list[Reason]) -> PostResult:
    """The step's result from its exit code, what it wrote (`read`) and what the harness
    found wrong with its files (`faults`, the step's too): a step with a fault has not
    accepted, whatever it exited; one that wrote no verdict is judged by its exit code."""
    if faults:
        return PostResult(step, exit_code, Verdict.REFUSED, (*faults, *reasons))
    if verdict is None:
        verdict = Verdict.ACCEPTED if exit_code == 0 else Verdict.REFUSED
    return PostResult(step, exit_code, verdict, tuple(reasons))
