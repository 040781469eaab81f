"""What was measured around a run, when reading it fails: the workload writes the start-up
observation the telemetry summary reads, so a file it shaped to break the reader must not
turn required evidence into a pass (harness/pipeline/bracket.py, pipeline/finish.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.base.catalogue import ENV_KERNEL_LOG_UNREADABLE, TELEMETRY_GAP
from harness.measure.runfolder import layout
from harness.pipeline import bracket, finish


def ctx(telemetry: bool, kernel_log: bool) -> SimpleNamespace:
    return SimpleNamespace(control=SimpleNamespace(
        telemetry=SimpleNamespace(required=telemetry),
        kernel_log=SimpleNamespace(required=kernel_log)))


def test_a_start_up_observation_nested_past_the_parser_is_no_time(tmp_path: Path) -> None:
    (tmp_path / layout.OBSERVATIONS).mkdir()
    startup = tmp_path / layout.OBSERVATIONS / layout.STARTUP
    startup.write_text("[" * 200_000 + "]" * 200_000)
    assert bracket.startup_time(tmp_path) is None  # not a RecursionError
    startup.write_text('{"observed": {"time": 12.5}}')
    assert bracket.startup_time(tmp_path) == 12.5


@pytest.mark.parametrize("required", [True, False])
def test_a_reader_that_raises_refuses_only_where_its_evidence_was_required(
        monkeypatch, required: bool) -> None:
    def broken(_ctx):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(bracket, "telemetry", broken)
    monkeypatch.setattr(bracket, "kernel_log", broken)
    blocks, reasons = finish.measured_around(ctx(required, required))
    assert blocks["telemetry"] == blocks["kernel_log"] == {
        "error": "RecursionError: maximum recursion depth exceeded"}
    rules = [r.rule for r in reasons]
    assert rules == ([TELEMETRY_GAP, ENV_KERNEL_LOG_UNREADABLE] if required else [])
    if required:
        assert "RecursionError" in reasons[0].detail and "harness doctor" in reasons[1].detail
