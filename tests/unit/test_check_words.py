"""`harness check` speaks to the operator: what a value should look like in words (never
a regular expression or a Python class name), and "did you mean" for every unknown key,
control or image name."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from harness.config.gatelist import GateList
from harness.config.loader import check
from harness.config.schema import Campaign, Control, ImageLock
from harness.config.words import PATTERN_WORDS

ID = "sha256:" + "a" * 64


def _patterns(node: object, found: set[str]) -> set[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                found.add(value)
            else:
                _patterns(value, found)
    elif isinstance(node, list):
        for value in node:
            _patterns(value, found)
    return found


@pytest.mark.parametrize("model", [Campaign, Control, ImageLock, GateList])
def test_every_pattern_in_the_schema_has_words(model) -> None:
    missing = _patterns(model.model_json_schema(), set()) - set(PATTERN_WORDS)
    assert missing == set(), "add a sentence to harness/config/words.py for each"


def _project(tmp_path: Path, control: str, campaign_extra: str = "",
             listed: str = "c1") -> tuple[Path, Path]:
    (tmp_path / "images.lock").write_text(f"images:\n  rehearsal:\n    id: {ID}\n")
    ctl = tmp_path / "controls" / "c1.yaml"
    ctl.parent.mkdir()
    ctl.write_text(textwrap.dedent(control))
    camp = tmp_path / "campaigns" / "camp.yaml"
    camp.parent.mkdir()
    camp.write_text(f"name: camp\nrow: R\ncontrols: [{listed}]\n{campaign_extra}")
    return camp, ctl


def test_refused_values_are_described_not_matched_against_a_regex(tmp_path: Path) -> None:
    camp, ctl = _project(tmp_path, """\
        name: c1
        image: "re hearsal"
        device: gpu
        command: python3
        env:
          1BAD: "1"
        resources: 5
        gpus: "a"
        """, "host:\n  gfx: rdna3\n")
    faults = [str(f) for f in check([camp, ctl])[0]]
    text = "\n".join(faults)
    assert "pattern" not in text and "^" not in text and "instance of" not in text, text
    assert f"{ctl}:2:8: image: expected a name of 1 to 64 letters" in text
    assert "got 're hearsal'" in text
    assert f"{ctl}:3:9: device: expected 'rocm' or 'cpu', got 'gpu'" in faults
    assert f"{ctl}:4:10: command: expected a list (lines starting with `- `, or [a, b]), " \
           "got 'python3'" in faults
    assert any(f.startswith(f"{ctl}:6:3: env: the key '1BAD': expected an environment "
                            "variable name") for f in faults), faults
    assert f"{ctl}:7:12: resources: expected a mapping (indented `key: value` lines), " \
           "got 5" in faults
    assert any("gpus: expected GPU indices separated by commas" in f for f in faults)
    assert any("host.gfx: expected a gfx target such as gfx1100, got 'rdna3'" in f
               for f in faults), faults


def test_a_huge_refused_value_is_quoted_short(tmp_path: Path) -> None:
    _camp, ctl = _project(tmp_path, f"name: c1\nimage: '{'x y' * 5000}'\ndevice: cpu\n"
                                   "command: [python3]\n")
    [fault] = [str(f) for f in check([ctl])[0]]
    assert len(fault) < 300 and fault.endswith("...")


def test_did_you_mean_for_a_control_and_an_image_name(tmp_path: Path) -> None:
    camp, ctl = _project(tmp_path, "name: c1\nimage: rehersal\ndevice: cpu\n"
                                   "command: [python3]\n", listed="c1")
    ctl.rename(ctl.with_name("night-a.yaml"))
    camp.write_text("name: camp\nrow: R\ncontrols: [nihgt-a]\n")
    faults = [str(f) for f in check([camp])[0]]
    assert any("control 'nihgt-a' not found" in f and f.endswith("(did you mean 'night-a'?)")
               for f in faults), faults
    ctl.with_name("night-a.yaml").rename(ctl)
    camp.write_text("name: camp\nrow: R\ncontrols: [c1]\n")
    faults = [str(f) for f in check([camp])[0]]
    assert any("image 'rehersal' is not in" in f and f.endswith("(did you mean 'rehearsal'?)")
               for f in faults), faults


def test_an_option_a_built_in_post_step_does_not_read_is_refused_at_its_key(tmp_path) -> None:
    camp, ctl = _project(tmp_path, """\
        name: c1
        image: rehearsal
        device: cpu
        command: [python3]
        post_steps:
          - name: gate0
            options:
              contrct: [cache.num_gpu_blocks]
          - name: exit-code
            options: {strict: true}
          - name: mine
            run: [python3, judge.py]
            options: {anything: 1}
        """)
    for faults in (check([ctl])[0], check([camp])[0]):
        assert [str(f) for f in faults] == [
            f"{ctl}:8:7: unknown option 'contrct' of the built-in post-step 'gate0' "
            "(did you mean 'contract'?)",
            f"{ctl}:10:15: unknown option 'strict' of the built-in post-step 'exit-code' "
            "(it reads: none)"]
