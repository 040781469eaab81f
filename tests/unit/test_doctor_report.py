"""Rendering of the doctor's lines: plain text, rich table and JSON say the same thing."""

from __future__ import annotations

import json

from harness.judge.doctor.checks import Check
from harness.judge.doctor.table import as_document, render_json, render_plain, render_table

CHECKS = [
    Check("engine", "ok", "Docker 27.3.1 (API 1.47)"),
    Check("/dev/kfd", "warn", "missing"),
    Check("gpu", "fail", "required gfx942, host has gfx1100"),
]


def test_plain_lines_are_aligned_and_end_with_a_verdict():
    lines = render_plain(CHECKS).splitlines()
    assert lines[0] == "ok    engine    Docker 27.3.1 (API 1.47)"
    assert lines[2] == "fail  gpu       required gfx942, host has gfx1100"
    assert lines[-1] == "host NOT ready: 1 ok, 1 warn, 1 fail"
    assert render_plain(CHECKS[:2]).splitlines()[-1] == "host ready: 1 ok, 1 warn, 0 fail"


def test_table_shows_every_check():
    text = render_table(CHECKS, width=100)
    for c in CHECKS:
        assert c.name in text and c.status in text
    assert "host NOT ready" in text


def test_json_document():
    doc = json.loads(render_json(CHECKS))
    assert doc == as_document(CHECKS)
    assert doc["ok"] is False and [c["status"] for c in doc["checks"]] == ["ok", "warn", "fail"]
    assert as_document(CHECKS[:2])["ok"] is True
