"""`harness approve --gates NAME`: the gate record's name, as the approval stores it, is
found in RUNS_DIR/gates/ as well as a folder is taken; a name that is not a record's (a
path part, `..`, a control character, one not there) is bad input (exit 2), never a
lookup outside that folder. Real git project, real `harness gates`; no Docker."""

from __future__ import annotations

import json

import pytest

from harness.cli.main import _run as harness_cli
from tests.approval_helpers import one_control_project

GATES = "gates:\n  - name: unit\n    run: [\"true\"]\n    timeout: 30\n"


@pytest.fixture
def gated(tmp_path, monkeypatch, capsys):
    root = tmp_path / "proj"
    campaign = one_control_project(root, monkeypatch, GATES)
    runs = root / "runs"
    assert harness_cli(["gates", str(campaign), "--runs-dir", str(runs), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)["record"]
    return campaign, runs, record


def test_the_record_name_is_found_in_the_runs_dirs_gates(gated, capsys):
    campaign, runs, record = gated
    name = record.rsplit("/", 1)[-1]
    assert harness_cli(["approve", str(campaign), "--gates", name, "--runs-dir", str(runs),
                        "--reviewer", "rev@x", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["gates"]["record"] == name


@pytest.mark.parametrize("name", ["../gates", "nope-20260101T000000Z", "a\x1bb", "x" * 300,
                                  "gates/..", "/etc"],
                         ids=["dotdot", "absent", "escape", "long", "path", "not-a-record"])
def test_a_name_that_is_no_record_here_is_bad_input(gated, capsys, name):
    campaign, runs, _ = gated
    code = harness_cli(["approve", str(campaign), "--gates", name, "--runs-dir", str(runs)])
    err = capsys.readouterr().err
    assert code == (1 if name == "/etc" else 2), err  # /etc: a folder, not a gate record
    assert "Traceback" not in err and "\x1b" not in err
    assert not (campaign.parent.parent / "approvals").exists()
