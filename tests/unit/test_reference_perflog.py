"""Reference values with tolerances, the `reference` post-step, and the performance log."""

from __future__ import annotations

import csv
import io
import json
import multiprocessing
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from pydantic import TypeAdapter, ValidationError

from harness.base.catalogue import REFERENCE_MISSING, REFERENCE_OPTIONS, REFERENCE_OUTSIDE
from harness.base.errors import EnvironmentFault
from harness.base.reason import Reason
from harness.config.references import VLLM_METRICS, Bound, References, within
from harness.config.schema import Control, PostStep
from harness.judge.poststeps import reference
from harness.measure import metrics, perflog
from harness.pipeline.post import run_one, steps

REFS = TypeAdapter(References)
CONTROL = {"name": "c", "image": "rehearsal", "device": "cpu", "command": ["true"]}


def test_the_names_config_knows_are_the_metrics_harness_parses() -> None:
    assert VLLM_METRICS == metrics.METRICS


@pytest.mark.parametrize("bad, message", [
    ({"value": 3.0}, "value and tolerance go together"),
    ({"tolerance": 0.1}, "value and tolerance go together"),
    ({"value": 3.0, "tolerance": 0.1, "upper": 4}, "not both"),
    ({"lower": 5, "upper": 4}, "lower 5 is above upper 4"),
    ({}, "give value and tolerance, or lower"),
    ({"upper": float("nan")}, "finite"),
    ({"upper": 1e300}, "finite number of at most"),
    ({"value": 1, "tolerance": -0.1}, "greater than or equal"),
    ({"upper": 1, "refuse": "yes please"}, "bool"),
    ({"upper": 1, "tolerence": 0.1}, "Extra inputs"),
])
def test_a_bound_takes_one_clear_form(bad: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Bound(**bad)


def test_unknown_figure_names_are_refused_with_the_list() -> None:
    with pytest.raises(ValidationError, match=r"no figure named 'duraton_s'.*duration_s"):
        REFS.validate_python({"duraton_s": {"upper": 3}})


def test_limits_and_within() -> None:
    assert Bound(value=10.0, tolerance=0.05).limits() == (9.5, 10.5)
    assert Bound(value=-10.0, tolerance=0.1).limits() == (-11.0, -9.0)
    assert Bound(upper=600).limits() == (None, 600)
    assert within(10.5, 9.5, 10.5) is True and within(10.51, 9.5, 10.5) is False
    assert within(None, 0, 1) is None and within(float("nan"), 0, 1) is None
    assert within(True, 0, 1) is None  # a bool is not a figure


def test_a_control_with_references_gets_the_reference_step_last() -> None:
    control = Control(**CONTROL, reference={"duration_s": {"upper": 5, "refuse": True}})
    assert [s.name for s in steps(control)] == ["exit-code", "reference"]
    assert [s.name for s in steps(Control(**CONTROL))] == ["exit-code"]
    listed = Control(**CONTROL, post_steps=["reference", "exit-code"],
                     reference={"duration_s": {"upper": 5}})
    assert [s.name for s in steps(listed)] == ["reference", "exit-code"]  # not twice


def test_judge_refuses_only_where_the_control_says_so() -> None:
    refs = REFS.validate_python({
        "duration_s": {"value": 3.0, "tolerance": 0.1},          # outside, not refusing
        "kv_cache_gib": {"lower": 10, "refuse": True},           # inside
        "lock_wait_s": {"upper": 60, "refuse": True},            # no value: refuses
    })
    verdict, reasons, findings = reference.judge(refs, {"duration_s": 3.5, "kv_cache_gib": 11})
    assert verdict == "refused"
    assert reasons == [Reason(REFERENCE_MISSING, "lock_wait_s has no value in this run "
                                                 "(expected ≤ 60 s)")]
    by = {f["metric"]: f for f in findings}
    assert by["duration_s"]["outside"] is True and by["kv_cache_gib"]["outside"] is False
    verdict, reasons, _ = reference.judge(refs, {"duration_s": 3.5, "kv_cache_gib": 9.9,
                                                 "lock_wait_s": 1})
    assert verdict == "refused" and reasons == [
        Reason(REFERENCE_OUTSIDE, "kv_cache_gib = 9.9 GiB, expected ≥ 10")]
    assert reference.judge(refs, {"kv_cache_gib": 10, "lock_wait_s": 60})[0] == "accepted"


def _run_dir(tmp_path: Path, log: str, outcome: object) -> Path:
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "logs" / "stdout.log").write_text(log)
    (run / "outcome.json").write_text(json.dumps(outcome))
    return run


def test_the_post_step_reads_the_open_run_folder_and_seals_its_findings(tmp_path: Path) -> None:
    run = _run_dir(tmp_path, "INFO Available KV cache memory: 9.50 GiB\n",
                   {"exit_code": 0, "duration_s": 2.5})
    ctx = SimpleNamespace(
        run_dir=run, launch=SimpleNamespace(held=SimpleNamespace(
            as_dict=lambda: {"wait_s": 700.0, "hold_s": 3.0})),
        loaded=SimpleNamespace(campaign=SimpleNamespace(contract=None)),
        control=Control(**CONTROL, reference={"kv_cache_gib": {"value": 10, "tolerance": 0.01},
                                              "lock_wait_s": {"upper": 600, "refuse": True},
                                              "duration_s": {"upper": 3}}))
    result = run_one(PostStep(name="reference"), ctx)
    assert result.verdict == "refused" and result.exit_code == 1
    assert result.reasons == (
        Reason(REFERENCE_OUTSIDE, "lock_wait_s = 700 s, expected ≤ 600", "reference"),)
    doc = json.loads((run / "post-steps" / "reference" / "verdict.json").read_text())
    by = {f["metric"]: f for f in doc["findings"]}
    assert by["kv_cache_gib"] == {"metric": "kv_cache_gib", "value": 9.5, "lower": 9.9,
                                  "upper": 10.1, "outside": True, "refuse": False}
    assert by["duration_s"]["outside"] is False


@pytest.mark.parametrize("options", [[1], {"reference": {"nope": {"upper": 1}}},
                                     {"reference": {"duration_s": {"upper": 1}},
                                      "measured": [1]}])
def test_bad_options_refuse_with_their_rule(tmp_path: Path, options: object) -> None:
    run = _run_dir(tmp_path, "", "not an object")
    out = tmp_path / "out"
    out.mkdir()
    assert reference.run(run, out, options) == 1
    doc = json.loads((out / "verdict.json").read_text())
    assert doc["verdict"] == "refused" and doc["reasons"][0]["rule"] == REFERENCE_OPTIONS


# --- the performance log ---------------------------------------------------------------------

def _entry(**over: object) -> dict:
    return {"sealed": "2026-11-30T02:00:00Z", "campaign": "camp", "control": "c",
            "run_id": "r1", "attempt": 1, "status": "accepted",
            "figures": {"duration_s": 3.5, "lock_wait_s": None, "lock_hold_s": 4.0,
                        "exit_code": 0, "kv_cache_gib": 10.5, "kv_tokens": None},
            "findings": {"duration_s": {"lower": None, "upper": 3.0, "outside": True}},
            **over}


def test_rows_keep_every_run_figure_and_only_present_vllm_ones() -> None:
    rows = perflog.rows(_entry())
    assert [r["metric"] for r in rows] == ["duration_s", "lock_wait_s", "lock_hold_s",
                                           "exit_code", "kv_cache_gib"]
    assert rows[0]["upper"] == 3.0 and rows[0]["outside"] is True and rows[0]["unit"] == "s"
    assert rows[1]["value"] is None and rows[4]["unit"] == "GiB"


def test_csv_cells_cannot_become_formulas_or_split_lines() -> None:
    evil = _entry(campaign='=HYPERLINK("http://x")', control="+1,2\nnew row", status="@SUM",
                  run_id="-2")
    text = perflog.csv_text(perflog.rows(evil))
    parsed = list(csv.reader(io.StringIO(text)))
    assert parsed[0] == list(perflog.COLUMNS)
    assert len(parsed) == 1 + 5
    row = dict(zip(perflog.COLUMNS, parsed[1], strict=True))
    assert row["campaign"] == "'=HYPERLINK(\"http://x\")" and row["control"] == "'+1,2\nnew row"
    assert row["status"] == "'@SUM" and row["run_id"] == "'-2"
    assert row["value"] == "3.5"  # numbers are ours: never prefixed


def test_file_names_never_follow_a_hostile_campaign_name() -> None:
    assert perflog.file_stem("rehearsal-night") == "rehearsal-night"
    for evil in ("../../etc/passwd", "..", "a/b", "x" * 200, "\x1b[31m", ""):
        stem = perflog.file_stem(evil)
        assert stem.startswith("campaign-") and "/" not in stem and ".." not in stem


def _append_many(args: tuple[str, int]) -> None:
    runs, n = args
    for i in range(20):
        perflog.append(Path(runs), "camp", perflog.rows(_entry(run_id=f"w{n}-{i}")))


def test_concurrent_appends_leave_whole_lines_and_one_header(tmp_path: Path) -> None:
    with multiprocessing.get_context("fork").Pool(4) as pool:
        pool.map(_append_many, [(str(tmp_path), n) for n in range(4)])
    text = (tmp_path / "perflog" / "camp.csv").read_text()
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert len(parsed) == 4 * 20 * 5 and text.count("sealed,campaign") == 1
    assert {r["run_id"] for r in parsed} == {f"w{n}-{i}" for n in range(4) for i in range(20)}
    lines = (tmp_path / "perflog" / "camp.jsonl").read_text().splitlines()
    assert len(lines) == 400 and all(json.loads(x)["campaign"] == "camp" for x in lines)


def test_a_symlinked_log_is_never_written_through(tmp_path: Path) -> None:
    (tmp_path / "perflog").mkdir()
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "perflog" / "camp.csv").symlink_to(victim)
    with pytest.raises(EnvironmentFault, match="symlink"):  # the flock refuses to open it
        perflog.append(tmp_path, "camp", perflog.rows(_entry()))
    assert victim.read_text() == "keep"
    other = tmp_path / "other"
    (other / "real").mkdir(parents=True)
    (other / "perflog").symlink_to(other / "real")
    with pytest.raises(OSError, match="not a folder"):
        perflog.append(other, "camp", perflog.rows(_entry()))
    assert list((other / "real").iterdir()) == []


def test_a_sealed_folder_appends_its_lines_beside_the_runs(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "r1"
    (run / "post-steps" / "reference").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({
        "schema": "harness.run/v1", "run_id": "r1", "status": "refused", "attempt": 2,
        "campaign": {"name": "camp"}, "control": {"name": "c"}, "reasons": [],
        "times": {"started": "2026-11-30T02:00:00Z", "ended": "2026-11-30T02:00:05Z",
                  "sealed": "2026-11-30T02:00:06Z"},
        "lock": {"wait_s": 1.5, "hold_s": 6.0}, "outcome": {"exit_code": 3}}))
    (run / "metrics.json").write_text(json.dumps({"metrics": {"kv_tokens": 1024}}))
    (run / "post-steps" / "reference" / "verdict.json").write_text(json.dumps(
        {"findings": [{"metric": "duration_s", "lower": 1, "upper": 4, "outside": True}]}))
    perflog.append_sealed(run)
    rows = list(csv.DictReader(io.StringIO((tmp_path / "runs/perflog/camp.csv").read_text())))
    by = {r["metric"]: r for r in rows}
    assert by["duration_s"]["value"] == "5.0" and by["duration_s"]["outside"] == "true"
    assert by["exit_code"]["value"] == "3" and by["kv_tokens"]["unit"] == "tokens"
    assert {r["status"] for r in rows} == {"refused"} and by["lock_wait_s"]["value"] == "1.5"


def test_report_csv_prints_the_nights_lines(tmp_path: Path) -> None:
    from harness.cli.report import report
    from tests.unit.test_summary_report import make_night

    runs = tmp_path / "gpu-runs"
    night = make_night(runs, "20261129T020000Z", "lmcache-1739-kv-lines.log")
    out = CliRunner().invoke(report, [str(night), "--format", "csv"])
    assert out.exit_code == 0, out.output
    rows = list(csv.DictReader(io.StringIO(out.output)))
    kv = [r for r in rows if r["control"] == "kv-auto" and r["metric"] == "kv_cache_gib"]
    assert kv and kv[0]["value"] == "6.51" and kv[0]["unit"] == "GiB"
    assert {r["metric"] for r in rows} >= {"duration_s", "lock_wait_s", "exit_code"}
