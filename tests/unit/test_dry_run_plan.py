"""`--dry-run` prints the plan one line a control (control, image short Id, lock, timeout,
what the preflight says); the docker argv only under `-v/--verbose`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli.main import cli

REPO = Path(__file__).resolve().parents[2]
LINE = re.compile(r"^  1\. night-a  \[cpu\]  image rehearsal (\w{12}|\(not present\))  "
                  r"lock free  timeout \d+ s  preflight: (ok|would refuse: [A-Z0-9-, ]+)$")


def _camp(tmp_path: Path) -> Path:
    (tmp_path / "locks").mkdir()
    camp = tmp_path / "camp.yaml"
    camp.write_text(f"name: plan\nrow: R\nlock: {tmp_path / 'locks' / 'gpu.lock'}\n"
                    f"images_lock: {REPO / 'images.lock'}\ncontrols_dir: {REPO / 'controls'}\n"
                    "controls:\n  - night-a\n")
    return camp


@pytest.mark.parametrize("command", ["run", "night"])
def test_the_plan_is_one_line_a_control_and_the_argv_only_verbose(tmp_path, command):
    args = [command, str(_camp(tmp_path)), "--runs-dir", str(tmp_path / "runs"), "--dry-run"]
    plain = CliRunner().invoke(cli, args)
    assert plain.exit_code in (0, 1), plain.output
    [line] = [x for x in plain.output.splitlines() if x.startswith("  1. ")]
    assert LINE.match(line), line
    assert "docker run" not in plain.output
    verbose = CliRunner().invoke(cli, [*args, "-v"])
    lines = verbose.output.splitlines()
    at = lines.index(line)
    assert lines[at + 1].startswith("     docker run --pull=never "), lines[at + 1]
    doc = json.loads(CliRunner().invoke(cli, [*args, "--json"]).output)
    assert doc["controls"][0]["timeout_s"] > 0 and doc["controls"][0]["argv"][0] == "docker"
    assert not (tmp_path / "runs").exists()


def test_verbose_without_dry_run_is_a_usage_error(tmp_path):
    got = CliRunner().invoke(cli, ["run", str(_camp(tmp_path)), "-v"])
    assert got.exit_code == 2 and "-v/--verbose goes with --dry-run" in got.output
