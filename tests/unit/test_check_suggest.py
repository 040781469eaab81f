"""`harness check` says "did you mean" for an unknown key, from the schema at that place."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from harness.config.loader import check_files
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
    faults = [str(f) for f in check_files([camp, ctl])]
    assert f"{camp}:4:1: unknown key 'stop_polcy' (did you mean 'stop_policy'?)" in faults
    assert any(f.startswith(f"{ctl}:6:3: unknown key 'memroy' (did you mean 'memory'?)")
               for f in faults), faults
