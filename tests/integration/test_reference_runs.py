"""A control's references, judged on a real run: the refusal is sealed like any verdict,
and the seal appends the run's figures to the campaign's performance log."""

from __future__ import annotations

import csv
import io

import pytest

from harness.measure.runfolder.manifest import verify_folder


@pytest.mark.docker
def test_a_refusing_reference_is_sealed_and_logged(project):
    project.control("timed", """\
        command: [python3, -c, "print('INFO Available KV cache memory: 2.50 GiB')"]
        timeout: 2m
        reference:
          duration_s: {upper: 0.000001, refuse: true}
          kv_cache_gib: {value: 3.0, tolerance: 0.05}
        """)
    camp = project.campaign("camp", ["timed"])
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 1, r.stdout + r.stderr
    [run] = project.run_dirs()
    rec = project.record(run)
    assert rec["status"] == "refused" and rec["rules"] == ["REFERENCE-OUTSIDE"], rec
    assert [p["name"] for p in rec["post_steps"]] == ["exit-code", "reference"]
    assert verify_folder(run) == []  # the reference verdict is inside the seal
    rows = list(csv.DictReader(io.StringIO((project.runs / "perflog/camp.csv").read_text())))
    by = {row["metric"]: row for row in rows}
    assert by["kv_cache_gib"]["value"] == "2.5" and by["kv_cache_gib"]["outside"] == "true"
    assert by["duration_s"]["outside"] == "true" and by["exit_code"]["value"] == "0"
    assert {row["status"] for row in rows} == {"refused"}
    assert len((project.runs / "perflog/camp.jsonl").read_text().splitlines()) == len(rows)
