"""`harness check` says "did you mean" for an unknown key, from the schema at that place."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from harness.config.loader import check
from harness.config.schema import Campaign, Control, ImageLock
from harness.config.suggest import did_you_mean

ID = "sha256:" + "a" * 64


@pytest.mark.parametrize(("model", "loc", "want"), [
    (Campaign, ("stop_polcy",), "stop_policy"),
    (Campaign, ("controls", 1, "repet"), "repeat"),
    (Campaign, ("host", "min_free_gb"), "min_free_gib"),
    (Control, ("resources", "shm_sze"), "shm_size"),
    (Control, ("post_steps", 0, "timout"), "timeout"),
    (Control, ("model", "sha265"), "sha256"),
    (ImageLock, ("images", "rehearsal", "archve"), "archive"),
    (Control, ("zzzz",), None),  # nothing near: no guess
    (Control, ("env", "FOO"), None),  # a free mapping has no keys to suggest
    (Control, ("nosuch", "device"), None),  # a path that leaves the schema
])
def test_the_nearest_key_of_the_mapping_that_refused(model, loc, want) -> None:
    assert did_you_mean(model, loc) == want


def test_check_prints_the_hint_at_the_key(tmp_path: Path) -> None:
    (tmp_path / "images.lock").write_text(f"images:\n  img:\n    id: {ID}\n")
    ctl = tmp_path / "controls" / "c1.yaml"
    ctl.parent.mkdir()
    ctl.write_text(textwrap.dedent("""\
        name: c1
        image: img
        device: cpu
        command: [python3, -V]
        resources:
          memroy: 1g
        """))
    camp = tmp_path / "campaigns" / "camp.yaml"
    camp.parent.mkdir()
    camp.write_text("name: camp\nrow: R\ncontrols: [c1]\nstop_polcy: stop-on-refusal\n")
    faults = [str(f) for f in check([camp, ctl])[0]]
    assert f"{camp}:4:1: unknown key 'stop_polcy' (did you mean 'stop_policy'?)" in faults
    assert any(f.startswith(f"{ctl}:6:3: unknown key 'memroy' (did you mean 'memory'?)")
               for f in faults), faults


def _model_project(tmp_path: Path, sha256: str) -> tuple[Path, Path]:
    (tmp_path / "images.lock").write_text(f"images:\n  img:\n    id: {ID}\n")
    (tmp_path / "models" / "m").mkdir(parents=True)
    ctl = tmp_path / "controls" / "c1.yaml"
    ctl.parent.mkdir()
    ctl.write_text("name: c1\nimage: img\ndevice: cpu\ncommand: [python3, -V]\n"
                   f"model:\n  source: ../models/m\n  sha256: {sha256}\n")
    camp = tmp_path / "campaigns" / "camp.yaml"
    camp.parent.mkdir()
    camp.write_text(f"name: camp\nrow: R\ncontrols: [c1]\nmount_roots: [{tmp_path}]\n")
    return camp, ctl


def test_an_unpinned_model_is_a_warning_with_its_position_once(tmp_path: Path) -> None:
    from tests.inprocess import invoke

    camp, ctl = _model_project(tmp_path, "{}")
    faults, warnings = check([camp, ctl])
    assert faults == []
    assert [str(w) for w in warnings] == [
        f"{ctl}:7:11: warning: model.sha256 pins no file, so every run is refused "
        "(MODEL-UNPINNED) until `harness model pin FOLDER` on the GPU host fills it"]
    code, out = invoke("check", str(camp))
    assert code == 0 and "MODEL-UNPINNED" in out and "ok: 1 file(s) valid" in out


def test_a_pinned_model_has_no_warning(tmp_path: Path) -> None:

    camp, ctl = _model_project(tmp_path, "{w: " + "ab" * 32 + "}")
    assert check([camp, ctl]) == ([], [])
