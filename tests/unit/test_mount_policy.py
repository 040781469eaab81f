"""The mount policy has one owner (harness.config.mountable): the loader and the launch ask
the same rules, each in its own words, and no other module spells one."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from harness.base.catalogue import (
    ENV_MOUNT_SOURCE,
    MOUNT_OUTSIDE_ROOTS,
    MOUNT_OVER_HARNESS,
    MOUNT_SOURCE_KIND,
    MOUNT_SYSTEM_PATH,
)
from harness.config import mountable
from harness.config.mountable import MountSource, declared_problem, judge, place

HARNESS = Path(__file__).resolve().parents[2] / "harness"
ROOTS = [Path("/srv/proj")]
SYSTEM = mountable.system_paths({})


def _src(real: str, kind: str | None = "dir", read_only: bool = True,
         declared: str | None = None) -> MountSource:
    return MountSource("mounts[0]", Path(declared or real), Path(real), kind, read_only)


@pytest.mark.parametrize(("real", "found"), [
    ("/srv/proj/data", None),
    ("/srv/proj", None),
    ("/srv/other", (MOUNT_OUTSIDE_ROOTS, None)),
    ("/srv", (MOUNT_OUTSIDE_ROOTS, None)),
])
def test_place_is_the_roots_then_the_system_paths(real, found):
    assert place(Path(real), ROOTS, SYSTEM) == found


def test_a_system_path_under_a_root_still_hits():
    assert place(Path("/etc/ssl"), [Path("/")], SYSTEM) == (MOUNT_SYSTEM_PATH, Path("/etc"))
    assert place(Path("/"), [Path("/")], SYSTEM) == (MOUNT_SYSTEM_PATH, Path("/"))


@pytest.mark.parametrize(("src", "rule"), [
    (_src("/srv/other"), MOUNT_OUTSIDE_ROOTS),
    (_src("/srv/proj/gone", kind=None), ENV_MOUNT_SOURCE),
    (_src("/srv/proj/fifo", kind="special file"), MOUNT_SOURCE_KIND),
    (_src("/srv/proj/runs/x", read_only=False), MOUNT_OVER_HARNESS),
    (_src("/srv/proj", read_only=False), MOUNT_OVER_HARNESS),  # contains what is trusted
    (_src("/srv/proj/runs/x"), None),  # read-only may see the evidence
    (_src("/srv/proj/scratch", read_only=False), None),
    (_src("/srv/proj/w.bin", kind="file"), None),
])
def test_judge_names_the_first_rule_a_source_breaks(src, rule):
    got = judge(src, ROOTS, [Path("/srv/proj/runs")], SYSTEM)
    assert [r.rule for r in got] == ([rule] if rule else [])


def test_the_launch_words_say_where_a_source_leads_now():
    [r] = judge(_src("/outside", declared="/srv/proj/data/later"), ROOTS, [], SYSTEM)
    assert r.detail == ("mounts[0]: /srv/proj/data/later (resolves to /outside) is outside "
                        "the mount roots (/srv/proj) at launch")


def test_the_load_words_fault_the_declared_source(tmp_path):
    roots = [tmp_path]
    assert declared_problem(tmp_path / "data", roots, SYSTEM) is None
    assert declared_problem(Path("/srv,x"), roots, SYSTEM).startswith("resolves to '/srv,x', ")
    assert declared_problem(tmp_path.parent / "x", roots, SYSTEM) == (
        f"{tmp_path.parent / 'x'} is outside the allowed mount roots ({tmp_path}); add its "
        "folder to the campaign's mount_roots")
    assert declared_problem(Path("/run/x"), [Path("/")], SYSTEM) == (
        "/run/x overlaps the system path /run (MOUNT-SYSTEM-PATH: never mountable, even "
        "read-only)")


def test_a_declared_symlink_is_judged_where_it_leads(tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "root/link").symlink_to(tmp_path / "elsewhere")
    why = declared_problem(tmp_path / "root/link", [tmp_path / "root"], SYSTEM)
    assert why is not None and "outside the allowed mount roots" in why


def test_locate_resolves_and_sees_what_is_there(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    os.mkfifo(tmp_path / "fifo")
    assert mountable.locate("m", tmp_path / "link", False) == MountSource(
        "m", tmp_path / "link", tmp_path / "real", "dir", False)
    assert mountable.locate("m", tmp_path / "fifo", True).kind == "special file"
    assert mountable.locate("m", tmp_path / "gone", True).kind is None


def test_protected_paths_hold_the_evidence_the_lock_the_inputs_and_the_code(tmp_path):
    inputs = [tmp_path / "campaigns/c.yaml"]
    got = mountable.protected_paths(runs_dir=tmp_path / "runs", lock=tmp_path / "gpu.lock",
                                    project=tmp_path, inputs=inputs)
    for p in (tmp_path / "runs", tmp_path / "gpu.lock", inputs[0], tmp_path / "Makefile",
              mountable.HARNESS_DIR):
        assert p in got, p
    assert got == sorted(set(got))


# ---- one owner -----------------------------------------------------------------------------

POLICY = {"system_paths", "system_hit", "protected_paths", "judge_source", "git_files",
          "plain_path_problem", "path_text_problem", "target_problem", "declared_problem",
          "mountable"}


def test_the_mount_rules_are_defined_only_in_mountable():
    """No other module defines a function of the policy's, nor the system path list."""
    found = []
    for p in sorted(HARNESS.rglob("*.py")):
        if p == HARNESS / "config" / "mountable.py" or "instrument" in p.parts:
            continue
        tree = ast.parse(p.read_text())
        found += [f"{p.relative_to(HARNESS)}:{n.lineno}: {n.name}" for n in ast.walk(tree)
                  if isinstance(n, ast.FunctionDef) and n.name.lstrip("_") in POLICY]
        found += [f"{p.relative_to(HARNESS)}:{n.lineno}: a system path list"
                  for n in ast.walk(tree) if isinstance(n, ast.Constant)
                  and n.value in ("/var/run/docker.sock", "/proc", "/sys")]
    assert found == []


def test_the_launch_judges_with_the_policy_and_no_rule_of_its_own():
    text = (HARNESS / "pipeline" / "launch.py").read_text()
    for rule in ("MOUNT_OUTSIDE_ROOTS", "MOUNT_SYSTEM_PATH", "MOUNT_OVER_HARNESS",
                 "MOUNT_SOURCE_KIND", "ENV_MOUNT_SOURCE"):
        assert rule not in text, rule
    assert "mountable.judge(" in text
