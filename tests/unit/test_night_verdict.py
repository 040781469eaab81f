"""The night's verdict on its figures, one line after its controls' headline
(harness.readers.report.verdict, through build_summary): a confirmed regression is named
with its move and p; "no regression" only when a call judged; a call on too few earlier
runs says "not judged" with the counts; a confirmation rerun is not counted as a failure;
figures that move with another are named on it, not called again (harness.judge.regression
.causes); the night's own line says the same (harness.driver.regress.Called.said)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from harness.driver.regress import Called
from harness.judge.comparable import Candidate, FigureCall, Selection
from harness.judge.regression import Call, Movement, Worse, causes
from harness.readers.report.page import render_html
from harness.readers.report.summary import build_summary, render_markdown
from harness.readers.report.table import render_table
from harness.readers.report.verdict import call_state, verdict
from harness.readers.statuslines import headline_of

FIGS = ("duration_s", "lock_hold_s")


def call(movement: str, p: float | None = 0.004, shift: float | None = 0.85) -> dict:
    return {"movement": movement, "p_value": p, "shift": shift, "baseline": 19, "recent": 2}


def doc(run_id: str, baseline: int, movement: str = "no change", *, figures=FIGS,
        confirms: dict | None = None, regressions: list | None = None) -> dict:
    return {"schema": "harness.regression/v1", "run_id": run_id, "control": "ux-step",
            "baseline": [{"run_id": f"b{i}"} for i in range(baseline)],
            "method": {"min_baseline": 9}, "figures": {f: call(movement) for f in figures},
            "regressions": regressions or [], "rerun": None, "confirms": confirms}


def record(i: int, run_id: str, regression: dict | None, *, origin: str = "plan",
           rerun_of: int | None = None, control: str = "ux-step", plan: int = 0) -> dict:
    row = {"id": i, "plan_index": plan, "control": control, "attempt": 1 + (rerun_of or 0),
           "state": "accepted", "run_id": run_id, "run_dir": run_id, "rerun_of": rerun_of,
           "origin": origin}
    return {"row": row, "run": {"run_id": run_id, "status": "accepted",
                                "control": {"name": control}},
            "path": f"/runs/{run_id}", "regression": regression}


def confirmed_night(figures=FIGS, unconfirmed: tuple[str, ...] = ()) -> dict:
    """A run called a regression on `figures` and its rerun confirming each but
    `unconfirmed`."""
    first = doc("r1", 19, "regression", figures=figures, regressions=list(figures))
    first["rerun"] = {"scheduled": True, "why": "confirm"}
    alone = call("regression", 0.05)
    second = doc("r2", 19, "regression", figures=figures, confirms={
        "run_id": "r1", "figures": {f: {
            "confirmation": "unconfirmed" if f in unconfirmed else "confirmed", "alone": alone,
            "rerun_alone": alone} for f in figures}})
    return build_summary({"name": "n", "dir": "/runs/nights/n"}, [
        record(1, "r1", first), record(2, "r2", second, origin="rerun", rerun_of=1)])


def test_a_confirmed_regression_is_in_the_headline_once_with_what_moved_with_it() -> None:
    s = confirmed_night()
    assert s["headline"] == ("1/1 control accepted (1 rerun to confirm) · 1 regression "
                             "confirmed: ux-step duration_s +85 % (p=0.004; lock_hold_s moved "
                             "with it)")
    assert [(r["figure"], r["moved_with"]) for r in s["regressions"]] == [
        ("duration_s", ["lock_hold_s"])]
    assert (s["verdict"]["confirmed"], s["verdict"]["judged"], s["verdict"]["not_judged"]) == (
        1, 1, [])
    md = render_markdown(s)
    assert "REGRESSION ux-step duration\\_s" in md and "lock\\_hold\\_s moved with it" in md
    assert "REGRESSION ux-step lock\\_hold\\_s" not in md
    for text in (render_table(s), md, render_html(s)):
        assert "1 regression confirmed: ux-step duration" in text
        assert "after rerun" not in text  # the rerun confirmed: nothing failed


def test_a_follower_its_rerun_left_unconfirmed_is_not_a_call_of_its_own() -> None:
    s = confirmed_night(unconfirmed=("lock_hold_s",))
    assert [(r["figure"], r["moved_with"]) for r in s["regressions"]] == [("duration_s", [])]
    assert s["unconfirmed"] == [] and s["verdict"]["line"].startswith("1 regression confirmed")
    led = confirmed_night(unconfirmed=("duration_s",))  # the cause unconfirmed: each as it is
    assert [r["figure"] for r in led["regressions"]] == ["lock_hold_s"]
    assert [(r["figure"], r["moved_with"]) for r in led["unconfirmed"]] == [("duration_s", [])]


def test_lock_hold_alone_is_called_as_itself() -> None:
    s = confirmed_night(figures=("lock_hold_s",))
    assert "1 regression confirmed: ux-step lock_hold_s +85 % (p=0.004)" in s["headline"]


@pytest.mark.parametrize(("figures", "want"), [
    (["duration_s", "lock_hold_s"], {"duration_s": ["lock_hold_s"]}),
    (["lock_hold_s", "duration_s", "kv_tokens"], {"duration_s": ["lock_hold_s"],
                                                  "kv_tokens": []}),
    (["lock_hold_s"], {"lock_hold_s": []}),
    ([], {}),
], ids=["both", "follower-first", "follower-alone", "none"])
def test_causes_name_each_figure_once(figures, want) -> None:
    assert causes(figures) == want


def accepted_night(*regressions: dict | None) -> dict:
    return build_summary({"name": "n"}, [record(i + 1, f"r{i + 1}", d, plan=i,
                                                control=f"c{i}")
                                         for i, d in enumerate(regressions)])


@pytest.mark.parametrize(("docs", "said"), [
    ([doc("r1", 3, "insufficient data")], "regressions: not judged: 3 of 9 earlier runs"),
    ([doc("r1", 19)], "no regression"),
    ([None], "regressions: not judged: no call sealed"),
    ([doc("r1", 19), doc("r2", 0, "insufficient data"), doc("r3", 4, "insufficient data"),
      None], "no regression in 1 control judged; not judged: 2 controls with 0–4 of 9 "
             "earlier runs, 1 control with no call sealed"),
], ids=["too-few", "judged", "no-call", "mixed"])
def test_no_regression_is_said_only_of_a_judged_call(docs, said) -> None:
    s = accepted_night(*docs)
    assert s["verdict"]["line"] == said
    assert s["headline"].endswith(f" · {said}")


def test_an_unconfirmed_call_is_not_a_regression_and_not_none() -> None:
    first = doc("r1", 19, "regression", regressions=["duration_s"])
    first["rerun"] = {"scheduled": False, "why": "the deadline"}
    s = accepted_night(first)
    assert s["verdict"]["line"] == "no regression confirmed (1 call unconfirmed)"


def test_many_regressions_are_counted_past_the_named_ones() -> None:
    runs = [{"status": "accepted", "superseded_by": None, "call": {"judged": True}}]
    found = [{"control": f"c{i}", "figure": "kv_tokens", "shift": -0.5, "p_value": 0.0001}
             for i in range(5)]
    line = verdict(runs, found, [])["line"]
    assert line.startswith("5 regressions confirmed: c0 kv_tokens -50 % (p<0.001), c1 ")
    assert line.endswith(" and 2 more") and "c3" not in line


@pytest.mark.parametrize("hostile", [
    "nope", {"figures": []}, {"figures": {"d": "x"}, "baseline": "x", "method": {
        "min_baseline": True}}], ids=["text", "list", "odd"])
def test_a_hostile_call_is_read_as_not_judged(hostile) -> None:
    found = call_state(hostile)
    assert found is None or (found["judged"] is False and found["needed"] == 9)


def test_no_control_accepted_says_no_verdict() -> None:
    refused = record(1, "r1", None)
    refused["run"]["status"] = refused["row"]["state"] = "refused"
    s = build_summary({"name": "n"}, [refused])
    assert s["headline"] == "0/1 control accepted; 1 refused" and s["verdict"]["line"] == ""


def called(movement: Movement, regressions: tuple[str, ...] = (), baseline: int = 3) -> Called:
    run = Candidate("r", "c", None, None, None, datetime(2026, 1, 1, tzinfo=UTC), "")
    calls = tuple(FigureCall(f, Worse.HIGHER, Call(
        Movement.REGRESSION if f in regressions else movement, baseline, 1, None, None, ""),
        None, None) for f in FIGS)
    return Called(run, (run,), calls, Selection((run,) * baseline))


def test_the_nights_line_says_not_judged_not_none() -> None:
    assert called(Movement.INSUFFICIENT).said == "not judged: 3 of 9 earlier runs"
    assert called(Movement.NO_CHANGE, baseline=19).said == []
    assert called(Movement.NO_CHANGE, FIGS, 19).said == ["duration_s (lock_hold_s moved with it)"]


def test_status_reads_the_headline_from_summary_json(tmp_path) -> None:
    assert headline_of(tmp_path) is None
    (tmp_path / "summary.json").write_text('{"headline": "1/1 \\u001b[2J ok"}')
    assert headline_of(tmp_path) == "1/1 \\x1b[2J ok"
    (tmp_path / "summary.json").write_text("[1")
    assert headline_of(tmp_path) is None
