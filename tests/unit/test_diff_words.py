"""`harness diff` v2 in words: the control's YAML as a unified hunk, git state said plainly,
colour only where it is wanted (NO_COLOR honoured), `--exit-code` as git's, the JSON
schema's name, and a fix showing as the env line it added. Pure functions where they
exist; the command through click's CliRunner (and once on a real terminal) over sealed run
folders built here."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.base.terminal import colour_wanted
from harness.cli.diff import (
    SECTIONS,
    diff,
    git_words,
    hunk_style,
    painted,
    render,
)
from harness.config.schema import Control
from harness.judge.difference import SCHEMA, TOPICS, compare, exit_status, yaml_hunk
from harness.measure.runfolder.manifest import write_manifest
from harness.measure.vector import VectorInput, build
from tests.unit.terminal_helpers import on_terminal

REPO = Path(__file__).resolve().parents[2]
IMAGE = "sha256:" + "cd" * 32
COMMIT_A, COMMIT_B = "1cf90c2237b5" + "0" * 28, "9d1e0a6b4c2f" + "1" * 28
CONTROL = "name: k\nimage: rehearsal\ndevice: cpu\ncommand: [python3, run.py]\n"
FIX = 'env:\n  VLLM_ENABLE_V1_MULTIPROCESSING: "0"\n'
ESC = "\x1b["


def git(commit: str | None = COMMIT_A, dirty: bool | None = False, changed: list | None = None,
        error: str | None = None) -> dict:
    return {"commit": commit, "dirty": dirty, "changed": changed or [], "error": error}


def topic(a: dict | None, b: dict | None) -> dict:
    return compare({"record": {"provenance": a}}, {"record": {"provenance": b}})["topics"]["git"]


# ---- the YAML hunk ------------------------------------------------------------------------

def test_a_changed_control_reads_as_a_unified_hunk() -> None:
    h = yaml_hunk("inputs/control.yaml", CONTROL, CONTROL + FIX)
    assert h["same"] is False and h["cut"] == 0 and h["note"] is None
    assert h["hunk"][:3] == ["--- a/inputs/control.yaml", "+++ b/inputs/control.yaml",
                             "@@ -2,3 +2,5 @@"]
    assert h["hunk"][3:] == [" image: rehearsal", " device: cpu", " command: [python3, run.py]",
                             "+env:", '+  VLLM_ENABLE_V1_MULTIPROCESSING: "0"']
    assert [hunk_style(x) for x in h["hunk"]] == [
        "header", "header", "hunk", None, None, None, "added", "added"]
    assert hunk_style("-image: old") == "removed"
    assert yaml_hunk("x", CONTROL, CONTROL) == {"same": True, "hunk": [], "cut": 0, "note": None}


def test_a_long_hunk_is_cut_and_counted_and_a_huge_file_is_not_diffed() -> None:
    a = "".join(f"k{i}: {i}\n" for i in range(600))
    b = "".join(f"k{i}: {i + 1}\n" for i in range(600))
    h = yaml_hunk("c", a, b)
    assert len(h["hunk"]) == 400 and h["cut"] == 2 + 1 + 1200 - 400
    huge = yaml_hunk("c", "x\n" * 20_001, "y\n")
    assert huge["same"] is False and huge["hunk"] == [] and "20000 lines" in huge["note"]


def test_a_carriage_return_stays_in_its_line_and_is_shown_inert() -> None:
    h = yaml_hunk("c", "a: 1\n", "a: 1\r\x1b[2Jaccepted\n")
    assert h["hunk"][-1] == "+a: 1\r\x1b[2Jaccepted"
    doc = compare(_side("a", "a: 1\n"), _side("b", "a: 1\r\x1b[2Jaccepted\n"))
    text = "\n".join(render(doc))
    assert "    +a: 1\\x0d\\x1b[2Jaccepted" in text and "\x1b" not in text and "\r" not in text


def _side(name: str, control: str | None, campaign: str = "name: c\n") -> dict:
    texts = {"control": control, "campaign": campaign}
    return {"dir": f"/runs/{name}", "record": {"run_id": name, "status": "accepted"},
            "notes": [], "inputs": {k: {"text": v, "why": None if v else "not kept"}
                                    for k, v in texts.items()}}


def test_inputs_a_run_did_not_keep_are_not_compared_and_say_why() -> None:
    doc = compare(_side("a", None), _side("b", CONTROL))
    t = doc["topics"]["inputs"]
    assert t["same"] is None and "inputs" not in doc["differs"]
    assert t["files"]["control"]["note"] == "a: not kept"
    assert "inputs: control.yaml not compared, campaign.yaml same" in render(doc)
    assert "    control.yaml: a: not kept" in render(doc)


# ---- git in words -------------------------------------------------------------------------

def test_git_says_clean_to_dirty_with_the_changed_paths_at_one_commit() -> None:
    t = topic(git(), git(dirty=True, changed=["controls/x.yaml", "harness/y.py"]))
    assert t["same"] is False and t["state"] == {"a": "clean", "b": "dirty", "same": False}
    assert git_words(t) == "git: clean -> dirty (controls/x.yaml, harness/y.py) at 1cf90c2237b5"


def test_git_says_the_commit_changed_in_12_digits_and_whole_in_the_document() -> None:
    t = topic(git(COMMIT_A), git(COMMIT_B))
    assert git_words(t) == "git: 1cf90c2237b5 -> 9d1e0a6b4c2f, both clean"
    assert t["commit"] == {"a": COMMIT_A, "b": COMMIT_B, "same": False}
    both = topic(git(COMMIT_A), git(COMMIT_B, dirty=True, changed=["a", "b", "c", "d", "e", "f"]))
    assert git_words(both) == "git: 1cf90c2237b5 -> 9d1e0a6b4c2f, clean -> dirty (a, b, c, d, e, …)"


def test_git_same_unknown_and_not_recorded() -> None:
    assert git_words(topic(git(), git())) == "git: same, 1cf90c2237b5 clean"
    no_tree = git(None, None, error="not a git work tree")
    assert git_words(topic(no_tree, no_tree)) == "git: same, unknown (not a git work tree)"
    assert git_words(topic(git(), None)) == (
        "git: not compared (a: 1cf90c2237b5 clean; b: not recorded)")
    dirty = topic(git(dirty=True, changed=["a"]), git(dirty=True, changed=["b"]))
    assert git_words(dirty) == "git: dirty (a) -> dirty (b) at 1cf90c2237b5"
    hostile = topic(git("\x1b[2J" + "f" * 40), git())
    assert "\x1b" not in git_words(hostile) and "\\x1b[2Jfffffff" in git_words(hostile)


# ---- colour -------------------------------------------------------------------------------

class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_colour_is_wanted_only_on_a_terminal_without_no_color_unless_always() -> None:
    tty, pipe = _Stream(True), _Stream(False)
    assert colour_wanted("auto", tty, {}) and colour_wanted("auto", tty, {"NO_COLOR": ""})
    assert not colour_wanted("auto", tty, {"NO_COLOR": "1"})
    assert not colour_wanted("auto", pipe, {})
    assert colour_wanted("always", pipe, {"NO_COLOR": "1"})
    assert not colour_wanted("never", tty, {})
    assert painted(("+ x", "added"), True) == "\x1b[32m+ x\x1b[0m"
    assert painted(("- x", "removed"), True) == "\x1b[31m- x\x1b[0m"
    assert painted(("+ x", "added"), False) == "+ x"
    assert painted(("plain", None), True) == "plain"


# ---- the command over sealed run folders --------------------------------------------------

def _vector(tmp: Path, run_id: str, control_yaml: str) -> dict:
    import yaml

    ctl = Control.model_validate(yaml.safe_load(control_yaml))
    folder = tmp / run_id
    inp = VectorInput(control=ctl, image_id=IMAGE, run_id=run_id, campaign="c",
                      lock_path=tmp / "gpu.lock", cidfile=folder / "container.cid",
                      observations_dir=folder / "observations", instrument_dir=tmp / "inst",
                      launcher={"pid": str(len(run_id)), "started": "1.0", "host": "vm"})
    return build(inp).evidence()


def run_folder(tmp: Path, run_id: str, status: str, control_yaml: str = CONTROL,
               provenance: dict | None = None) -> Path:
    """A sealed run folder with what diff reads: run.json, the docker vector, inputs/."""
    folder = tmp / run_id
    (folder / "inputs").mkdir(parents=True)
    record = {"schema": "harness.run/v2", "run_id": run_id, "attempt": 1, "status": status,
              "reasons": [], "rules": [], "seal": "sha256:s", "image": {"id": IMAGE},
              "model_hashes": {}, "campaign": {"name": "c"}, "control": {"name": "k"},
              "provenance": provenance or git()}
    (folder / "run.json").write_text(json.dumps(record))
    (folder / "docker-vector.json").write_text(json.dumps(_vector(tmp, run_id, control_yaml)))
    (folder / "inputs" / "control.yaml").write_text(control_yaml)
    (folder / "inputs" / "campaign.yaml").write_text("name: c\n")
    write_manifest(folder)
    return folder


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path, Path]:
    a = run_folder(tmp_path, "k-20260101T000000Z-aaaa1111", "refused")
    b = run_folder(tmp_path, "k-20260102T000000Z-bbbb2222", "accepted", CONTROL + FIX,
                   git(dirty=True, changed=["controls/k.yaml"]))
    same = run_folder(tmp_path, "k-20260103T000000Z-cccc3333", "refused")
    return a, b, same


def invoke(*args: object, env: dict | None = None) -> tuple[int, str]:
    r = CliRunner().invoke(diff, [str(x) for x in args], env=env, catch_exceptions=False)
    return r.exit_code, r.output


def test_the_fix_reads_as_the_env_line_it_added_and_the_yaml_it_changed(pair) -> None:
    a, b, _ = pair
    code, out = invoke(a, b, "--color", "never")
    assert code == 0, out
    lines = out.splitlines()
    assert "differs: status, inputs, git, env" in lines
    assert "env: 1 differ" in lines and "    + --env VLLM_ENABLE_V1_MULTIPROCESSING=0" in lines
    assert "docker argv: same (elided: the run id, the run folder, the launcher's pid and " \
        "start time, the Slurm job, HARNESS_SEAL (see seal))" in lines
    assert "inputs: control.yaml differs, campaign.yaml same" in lines
    assert "    +env:" in lines and '    +  VLLM_ENABLE_V1_MULTIPROCESSING: "0"' in lines
    assert "git: clean -> dirty (controls/k.yaml) at 1cf90c2237b5" in lines
    assert ESC not in out


def test_sections_come_in_the_text_order_with_the_figures_and_outcome_first(pair) -> None:
    a, b, _ = pair
    _, out = invoke(a, b)
    starts = {"figures": "figures:", "status": "status:", "rules": "rules:",
              "gate0": "gate0 verdict:",
              "seal": "seal:", "inputs": "inputs:", "git": "git:", "approval": "approval:",
              "image": "image:", "model": "model:", "mounts": "mounts:",
              "engine": "engine args:", "env": "env:",
              "docker": "docker argv:"}
    heads = [next(i for i, x in enumerate(out.splitlines()) if x.startswith(starts[t]))
             for t in SECTIONS]
    assert heads == sorted(heads) and set(SECTIONS) == set(TOPICS)


def test_colour_only_when_asked_and_never_under_no_color_on_auto(pair) -> None:
    a, b, _ = pair
    _, plain = invoke(a, b)  # auto, and CliRunner's stdout is no terminal
    assert ESC not in plain
    _, always = invoke(a, b, "--color", "always", env={"NO_COLOR": "1"})
    assert "\x1b[32m    + --env VLLM_ENABLE_V1_MULTIPROCESSING=0\x1b[0m" in always
    assert "\x1b[36m    @@ " in always and "\x1b[1m    --- a/inputs/control.yaml" in always
    _, never = invoke(a, b, "--colour", "never")
    assert never == plain


def _on_a_terminal(args: list[str], env: dict[str, str]) -> str:
    """`harness diff` with its stdout on a pseudo-terminal: what a person would see."""
    code, out, err = on_terminal(["diff", *args], env, timeout=30)
    assert code == 0, err
    return out


def test_auto_colours_a_terminal_unless_no_color_is_set(pair) -> None:
    a, b, _ = pair
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    assert "\x1b[32m" in _on_a_terminal([str(a), str(b)], env)
    assert ESC not in _on_a_terminal([str(a), str(b)], {**env, "NO_COLOR": "1"})


def test_exit_code_is_gits_when_asked_and_0_otherwise(pair) -> None:
    a, b, same = pair
    assert invoke(a, b)[0] == 0
    assert invoke(a, b, "--exit-code")[0] == 1
    code, out = invoke(a, same, "--exit-code")
    assert code == 0 and "differs: nothing" in out.splitlines()
    assert invoke(a, b, "--exit-code", "--json")[0] == 1
    assert exit_status({"differs": ["status"]}, False) == 0
    assert exit_status({"differs": []}, True) == 0 and exit_status({}, True) == 0


def test_the_json_document_names_its_schema(pair) -> None:
    a, b, _ = pair
    code, out = invoke(a, b, "--json")
    doc = json.loads(out)
    assert code == 0 and SCHEMA == doc["schema"] == "harness.diff/v4"
    assert doc["differs"] == ["status", "inputs", "git", "env"]  # in TOPICS order
    assert doc["topics"]["env"]["added"] == {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    assert doc["topics"]["git"]["commit"]["a"] == COMMIT_A  # whole, not cut to 12
    assert out.isascii()
