"""Progress on a terminal reads as sentences; without one it is JSON, exact.

The terminal form once printed `reasons=['…']`, `progress={…}` and
`hold_s=2.490031047000002`, and broke long hashes across lines."""

from __future__ import annotations

import io
import json

from rich.console import Console

from harness.cli.display import NightLines
from harness.measure.ui import Reporter, TerminalReporter, sentence

DIGEST = "sha256:" + "c0ffee" * 10 + "abcd"


def _terminal_lines(kind: str, **fields: object) -> list[str]:
    ui = TerminalReporter()
    out = io.StringIO()
    ui.console = Console(file=out, width=80, color_system=None)
    ui.event(kind, **fields)
    return out.getvalue().splitlines()


def test_seconds_are_rounded_with_their_unit() -> None:
    assert sentence("lock-released", {"hold_s": 2.490031047000002}) == \
        "released the GPU lock after holding it 2.49 s"
    assert sentence("lock-acquired", {"lock": "/l/gpu.lock", "wait_s": 0.0}) == \
        "took the GPU lock /l/gpu.lock after waiting 0 s"


def test_lists_and_mappings_are_words_not_python_reprs() -> None:
    sealed = sentence("sealed", {"run_id": "r1", "status": "refused", "dir": "gpu-runs/r1",
                                 "reasons": ["GATE0-FIELD-DIFFERS: a", "RUN-EXIT: 1"]})
    assert sealed == "run r1 sealed as refused in gpu-runs/r1: GATE0-FIELD-DIFFERS: a; RUN-EXIT: 1"
    assert sentence("sealed", {"run_id": "r1", "status": "accepted", "dir": "d",
                               "reasons": []}) == "run r1 sealed as accepted in d"
    end = sentence("night-end", {"why": "done", "exit_code": 1, "progress": {
        "done": 3, "total": 3, "states": {"accepted": 2, "refused": 1}}})
    assert end == "night ended (done), exit code 1: 3/3 done; accepted 2, refused 1"
    odd = sentence("something-new", {"items": ["a", "b"], "map": {"k": 1.5}, "ok": True})
    assert odd == "something-new: items a; b, map k 1.5, ok yes"
    for text in (sealed, end, odd):
        assert "[" not in text and "{" not in text and "=" not in text


def test_a_missing_field_falls_back_to_plain_words() -> None:
    assert sentence("run", {"run_id": "r1"}) == "run: run id r1"


def test_terminal_lines_keep_a_hash_whole_on_one_line() -> None:
    lines = _terminal_lines("launch", run_id="20261130T184700Z-a-" + "b" * 30, image=DIGEST)
    assert len(lines) == 1 and lines[0].endswith(f"in image {DIGEST}")
    assert "…" not in lines[0]


def test_control_characters_never_reach_the_terminal() -> None:
    lines = _terminal_lines("deferred", control="c\x1b]8;;http://x\x07", reasons=["\x1b[2J"])
    assert "\x1b" not in "".join(lines) and "\x07" not in "".join(lines)


def test_without_a_terminal_each_event_is_one_exact_json_object() -> None:
    out = io.StringIO()
    Reporter(out).event("lock-released", hold_s=2.490031047000002)
    NightLines(out).event("night-end", progress={"done": 1, "total": 2})
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    # durations are written to the millisecond: a clock's last digits are noise, not evidence
    assert first["event"] == "lock-released" and first["hold_s"] == 2.49
    assert second["progress"] == {"done": 1, "total": 2}


def test_a_nights_regression_events_read_as_sentences() -> None:
    """The fields as harness/driver/night/confirm.py emits them."""
    call = sentence("regression-call", {"run_id": "r2", "regressions": ["duration_s"],
                                        "confirmed": ["duration_s"], "addendum": "/runs/r2/x"})
    assert call == ("run r2 called against its earlier runs; regressions: duration_s; "
                    "confirmed by its rerun: duration_s; sealed in /runs/r2/x")
    quiet = sentence("regression-call", {"run_id": "r2", "regressions": [], "confirmed": [],
                                         "addendum": "/a"})
    assert quiet == "run r2 called against its earlier runs; regressions: none; sealed in /a"
    assert sentence("regression-rerun", {"run_id": "r2", "control": "c", "figures":
                                         ["duration_s", "kv_tokens"], "attempt": 2}) == (
        "run r2 of control c may have regressed in duration_s; kv_tokens: attempt 2 reruns "
        "it to confirm before anyone is told")
    for kind in ("regression-not-rerun", "regression-uncalled", "regression-failed",
                 "rerun-index-failed"):
        said = sentence(kind, {"run_id": "r2", "why": "no time", "error": "no time"})
        assert said.startswith("the ") or said.startswith("run r2 "), said
        assert "no time" in said and ":" in said and "_" not in said


def test_a_stopped_nights_claims_read_as_sentences() -> None:
    assert sentence("slurm-claimed", {"job_id": "12", "controls": ["a", "b"]}) == \
        "job 12: the night stopped before these launched, and never will: a; b"
