"""The morning report's regressions (harness.readers.report.regressions, through
build_summary and its renderers): only confirmed calls alert, naming both runs; a one-off
is shown with its rerun and no alert; hostile addenda neither crash nor inject markup."""

from __future__ import annotations

from harness.readers.report.page import render_html
from harness.readers.report.regressions import regression_lists
from harness.readers.report.summary import build_summary, render_markdown

CALL = {"movement": "regression", "p_value": 1 / 210, "shift": 0.8, "baseline": 19,
        "recent": 2, "baseline_median": 1.0, "recent_median": 1.8, "worse": "higher"}
ALONE = {**CALL, "p_value": 0.05, "recent": 1}


def record(doc: dict | None) -> dict:
    return {"row": None, "run": None, "metrics": None, "problems": [], "reference": None,
            "path": None, "gate0": None, "regression": doc}


def original(run_id: str, control: str = "c", rerun: dict | None = None) -> dict:
    return {"schema": "harness.regression/v1", "run_id": run_id, "control": control,
            "figures": {"duration_s": ALONE}, "regressions": ["duration_s"],
            "rerun": rerun or {"scheduled": True, "why": "confirm a regression call"},
            "confirms": None}


def rerun(run_id: str, of: str, confirmation: str, control: str = "c") -> dict:
    pair = CALL if confirmation == "confirmed" else {**CALL, "movement": "no change",
                                                     "p_value": 0.3, "shift": 0.4}
    return {"schema": "harness.regression/v1", "run_id": run_id, "control": control,
            "figures": {"duration_s": pair}, "regressions": [], "rerun": None,
            "confirms": {"run_id": of, "seal_digest": "ab" * 32, "figures": {
                "duration_s": {"confirmation": confirmation, "alone": ALONE,
                               "rerun_alone": {**pair, "p_value": 0.5, "shift": 0.01}}}}}


def summary(*docs: dict | None) -> dict:
    return build_summary({"name": "camp-20261202T220000Z"}, [record(d) for d in docs])


def test_a_confirmed_regression_names_both_runs() -> None:
    got = summary(original("r1"), rerun("r2", "r1", "confirmed"))
    assert got["unconfirmed"] == []
    [reg] = got["regressions"]
    assert (reg["control"], reg["figure"], reg["run_id"], reg["rerun_id"]) == (
        "c", "duration_s", "r1", "r2")
    assert reg["p_value"] == 1 / 210 and reg["alone"]["p_value"] == 0.05
    md = render_markdown(got)
    assert "## Regressions" in md
    assert "REGRESSION c duration\\_s: median +80.0% (p=0.005, 2 recent against 19 earlier " \
           "runs), run r1 confirmed by its rerun r2" in md
    assert "<h2>Regressions</h2>" in render_html(got)


def test_a_one_off_is_listed_unconfirmed_with_its_rerun_and_no_alert() -> None:
    got = summary(original("r1"), rerun("r2", "r1", "unconfirmed"))
    assert got["regressions"] == []
    [one] = got["unconfirmed"]
    assert (one["run_id"], one["rerun_id"], one["shift"]) == ("r1", "r2", 0.4)
    md = render_markdown(got)
    assert "REGRESSION" not in md
    assert ("one-off c duration\\_s: run r1 was called +80.0% (p=0.050); its rerun r2 did "
            "not confirm it (the rerun alone: median +1.0%, p=0.500; with the run: "
            "p=0.300); no alert") in md


def test_a_call_no_rerun_answered_says_why() -> None:
    why = {"scheduled": False, "why": "the deadline leaves no room: about 60 s"}
    got = summary(original("r1", rerun=why))
    assert got["regressions"] == []
    assert [(u["run_id"], u["rerun_id"], u["why"]) for u in got["unconfirmed"]] == [
        ("r1", None, "the deadline leaves no room: about 60 s")]
    scheduled = summary(original("r1"))["unconfirmed"][0]["why"]
    assert scheduled == "its confirmation rerun was scheduled and not sealed accepted"


def test_a_night_without_calls_has_empty_lists_and_no_section() -> None:
    got = summary(None, {"schema": "harness.regression/v1", "run_id": "r1", "control": "c",
                         "figures": {}, "regressions": [], "rerun": None, "confirms": None})
    assert got["regressions"] == got["unconfirmed"] == []
    assert "## Regressions" not in render_markdown(got)


def test_hostile_addenda_neither_crash_nor_inject() -> None:
    hostile = [
        {"figures": "x", "regressions": "abc", "confirms": [1]},
        {"confirms": {"figures": {"duration_s": "no"}}, "figures": {"duration_s": [1]}},
        {"regressions": [None, 3, "duration_s"], "figures": {"duration_s": {"p_value": "0"}},
         "run_id": 7},
        {"confirms": {"run_id": "r\x1b[2J", "figures": {"d|<b>": {
            "confirmation": "confirmed", "alone": {"shift": float("nan")}}}},
         "control": "<script>x</script>", "figures": {"d|<b>": {"shift": 10**400}}},
    ]
    confirmed, _ = regression_lists([record(d) for d in hostile])
    assert [c["figure"] for c in confirmed] == ["d|<b>"]
    assert confirmed[0]["run_id"] == "r\\x1b[2J" and confirmed[0]["alone"]["shift"] is None
    got = summary(*hostile)
    md, page = render_markdown(got), render_html(got)
    assert "<script>" not in md and "<script>" not in page and "\x1b" not in md + page
    assert "d\\|\\<b\\>" in md


def test_a_confirmation_rerun_the_deadline_left_unrun_does_not_speak_for_its_slot() -> None:
    def row(i: int, attempt: int, state: str, origin: str, run_id: str | None) -> dict:
        return {**record(None), "row": {
            "id": i, "plan_index": 0, "control": "c", "attempt": attempt, "state": state,
            "origin": origin, "run_id": run_id, "rerun_of": 1 if i == 2 else None}}

    got = build_summary({"name": "n"}, [row(1, 1, "accepted", "plan", "r1"),
                                        row(2, 2, "planned", "rerun", None)])
    assert got["headline"] == "1/1 control accepted · regressions: not judged: no call sealed"
    assert [e["superseded_by"] for e in got["runs"]] == [None, None]


def test_a_baseline_that_skipped_junk_is_said_in_the_morning_summary() -> None:
    """A call made on a baseline that look-alike folders were skipped from (or that a cap
    cut short) gets a note naming the counts: an `insufficient data` answer is never
    silent about why."""
    doc = {**original("r1"), "regressions": [], "baseline": [{"run_id": "a"}] * 3,
           "skipped": {"empty": 800, "seal fails": 12}, "unexamined": 4,
           "stopped": "4 folders named as runs of c were not read: the cap was reached"}
    quiet = {**original("r2"), "regressions": [], "baseline": [], "skipped": {},
             "unexamined": 0, "stopped": None}
    got = summary(doc, quiet, None)
    assert got["baselines"] == [{"control": "c", "run_id": "r1", "baseline": 3,
                                 "skipped": {"empty": 800, "seal fails": 12},
                                 "unexamined": 4, "stopped": doc["stopped"]}]
    md = render_markdown(got)
    assert "baseline c: run r1 compared with 3 earlier runs; 812 folders named like its " \
           "runs skipped (800 empty, 12 seal fails); 4 not examined" in md
    assert "## Regressions" in md and "r2" not in md.split("## Regressions")[1].split("##")[0]
    assert "812 folders" in render_html(got)


def test_hostile_baseline_notes_neither_crash_nor_inject() -> None:
    hostile = [{**original("r1"), "regressions": [], "skipped": "x", "unexamined": "9",
                "stopped": 3},
               {**original("r2"), "regressions": [], "baseline": "abc",
                "skipped": {"<b>x</b>": 2, "y": -1, "z": True, "w": float("nan")},
                "unexamined": -5, "stopped": "<script>"}]
    got = summary(*hostile)
    [note] = got["baselines"]
    assert note["baseline"] == 0 and note["unexamined"] == 0
    assert list(note["skipped"].values()) == [2]
    assert "<script>" not in render_html(got) and "<b>x</b>" not in render_html(got)
