"""Campaign/control/lock validation: every fault as FILE:LINE:COL, never a traceback."""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path

import pytest

from harness.config.loader import check, load_campaign
from harness.config.schema import parse_duration
from harness.config.yamlsafe import YamlFaults, loads

ID = "sha256:" + "cd" * 32


def write(p: Path, text: str) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text))
    return p


@pytest.fixture
def project(tmp_path):
    write(tmp_path / "images.lock", f"images:\n  img:\n    id: {ID}\n")
    write(tmp_path / "controls/c1.yaml", """\
        name: c1
        image: img
        device: cpu
        command: [python3, -V]
        """)
    write(tmp_path / "campaigns/camp.yaml", """\
        name: camp
        row: ROW-1
        controls: [c1]
        """)
    return tmp_path


def faults_of(*paths) -> list[str]:
    return [str(f) for f in check(list(paths))[0]]


def test_valid_project_checks_clean(project):
    assert faults_of(project / "campaigns/camp.yaml") == []
    loaded, faults = load_campaign(project / "campaigns/camp.yaml")
    assert faults == [] and loaded.controls["c1"][0].network == "none"
    assert loaded.lock_path == Path.home() / "gpu.lock"


def test_unknown_key_is_reported_at_its_position(project):
    p = write(project / "controls/c1.yaml", """\
        name: c1
        image: img
        device: cpu
        comand: [python3]
        command: [python3]
        """)
    assert faults_of(p) == [f"{p}:4:1: unknown key 'comand' (did you mean 'command'?)"]


def test_bad_value_position_and_missing_key(project):
    p = write(project / "controls/c1.yaml", """\
        name: c1
        image: img
        device: gpu
        """)
    out = faults_of(p)
    assert any(f.startswith(f"{p}:3:9: device:") for f in out), out
    assert any("missing required key 'command'" in f for f in out), out


def test_every_fault_is_reported_not_just_the_first(project):
    p = write(project / "controls/c1.yaml", """\
        name: "bad name/.."
        image: img
        device: cpu
        command: []
        timeout: soon
        """)
    out = faults_of(p)
    assert len(out) == 3, out
    assert [f.split(":")[1] for f in out] == ["1", "4", "5"]


def test_duplicate_keys_are_errors(project):
    p = write(project / "controls/c1.yaml", "name: c1\nname: c2\n")
    assert faults_of(p) == [f"{p}:2:1: duplicate key 'name' (first at line 1)"]


def test_object_building_tags_are_refused():
    with pytest.raises(YamlFaults) as e:
        loads("a: !!python/object/apply:os.system ['true']\n", "x.yaml")
    assert "x.yaml:1:4: tag" in str(e.value)


def test_billion_laughs_is_refused_fast():
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 10):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 10)}]")
    t0 = time.monotonic()
    with pytest.raises(YamlFaults) as e:
        loads("\n".join(lines) + "\n", "bomb.yaml")
    assert time.monotonic() - t0 < 5
    assert "too large" in str(e.value)


def test_syntax_error_has_position():
    with pytest.raises(YamlFaults) as e:
        loads("a: [1, 2\nb: 3\n", "s.yaml")
    assert str(e.value).startswith("s.yaml:")
    assert "YAML syntax" in str(e.value)


def test_campaign_cross_checks_control_file_and_image(project):
    write(project / "campaigns/camp.yaml", """\
        name: camp
        row: R
        controls: [c1, missing]
        """)
    write(project / "controls/c1.yaml", """\
        name: c1
        image: nope
        device: cpu
        command: [x]
        """)
    out = faults_of(project / "campaigns/camp.yaml")
    assert any("campaigns/camp.yaml:3:16: control 'missing' not found" in f for f in out), out
    # an image the lock does not pin, and no pinned name near it: one still to pin, so a
    # warning (every run is refused IMAGE-NOT-PINNED), not a fault
    (project / "campaigns/camp.yaml").write_text("name: camp\nrow: R\ncontrols: [c1]\n")
    out, warnings = check([project / "campaigns/camp.yaml"])
    assert out == [] and [str(w) for w in warnings] == [
        f"{project / 'controls/c1.yaml'}:2:8: warning: image 'nope' is not pinned in "
        "images.lock, so every run is refused (IMAGE-NOT-PINNED) until `harness images pin "
        f"nope REF --images-lock {os.path.relpath(project / 'images.lock')}` pins the local "
        "image REF (a tag or repo digest) on the host that runs it"]


def test_mounts_outside_allowed_roots_are_refused(project):
    write(project / "controls/c1.yaml", """\
        name: c1
        image: img
        device: cpu
        command: [x]
        mounts:
          - {source: /etc, target: /host-etc}
        """)
    out = faults_of(project / "campaigns/camp.yaml")
    assert len(out) == 1 and "outside the allowed mount roots" in out[0], out
    assert ":6:" in out[0]


def test_bad_image_lock_id(tmp_path):
    p = write(tmp_path / "images.lock", "images:\n  img:\n    id: sha256:123\n")
    out = faults_of(p)
    assert len(out) == 1 and out[0].startswith(f"{p}:3:9: images.img.id:"), out


def test_non_utf8_and_empty_files(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_bytes(b"name: \xff\n")
    assert "not UTF-8" in faults_of(p)[0]
    p.write_text("")
    assert "expected a mapping" in faults_of(p)[0]


@pytest.mark.parametrize("value,seconds", [(90, 90.0), ("90s", 90.0), ("30m", 1800.0),
                                           ("2h", 7200.0), ("1.5h", 5400.0)])
def test_durations(value, seconds):
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", [True, "soon", -1, 0, "5 weeks"])
def test_bad_durations(value):
    with pytest.raises(ValueError):
        parse_duration(value)


def test_plan_keeps_campaign_order_repeats_and_filter(project):
    write(project / "controls/c2.yaml", "name: c2\nimage: img\ndevice: cpu\ncommand: [x]\n")
    write(project / "campaigns/camp.yaml", """\
        name: camp
        row: R
        controls: [{control: c2, repeat: 2}, c1]
        """)
    loaded, faults = load_campaign(project / "campaigns/camp.yaml")
    assert faults == []
    assert loaded.plan() == [("c2", 0), ("c2", 1), ("c1", 0)]
    assert loaded.plan(["c1"]) == [("c1", 0)]
