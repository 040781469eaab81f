"""A run keeps what it was made from (inputs/): the campaign and control bytes the source
seal hashed, kept only when they are those bytes and still load to what the run uses
(SEAL-CHANGED otherwise); a control holding secret-looking values kept only in its
redacted resolved form; and `harness show RUN --input` printing a kept file whole, each
line inert. Real files, a real loader and the real seal; no Docker (preflight's other
checks are not run)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.base.catalogue import SEAL_CHANGED
from harness.cli.main import main
from harness.cli.show import show
from harness.config.loader import require_campaign
from harness.measure.runfolder import inputs as kept
from harness.measure.runfolder.manifest import write_manifest
from harness.measure.seal import source_seal
from harness.measure.ui import Reporter
from harness.measure.vector import redact
from harness.pipeline.context import RunContext
from harness.pipeline.keepinputs import keep, redacted_control

IMAGE = "sha256:" + "ef" * 32
CONTROL = ("# a comment stays: the copy is the bytes, not a re-dump\nname: k\nimage: rehearsal\n"
           "device: cpu\ncommand: [python3, run.py]\nenv:\n  PLAIN: visible\n"
           "engine:\n  dtype: bfloat16\n")
SECRET = CONTROL + "  hf_token: engine-clear\n" + "secrets: [API_KEY]\n"


def project(tmp: Path, control: str = CONTROL) -> Path:
    for d in ("campaigns", "controls"):
        (tmp / d).mkdir()
    (tmp / "images.lock").write_text(f"images:\n  rehearsal:\n    id: {IMAGE}\n"
                                     "    ref: harness-rehearsal:local\n")
    (tmp / "controls" / "k.yaml").write_text(control)
    camp = tmp / "campaigns" / "c.yaml"
    camp.write_text(f"name: c\nrow: TEST\nlock: {tmp / 'gpu.lock'}\ncontrols: [k]\n")
    return camp


def context(camp: Path) -> RunContext:
    loaded = require_campaign(camp)
    control, control_file = loaded.controls["k"]
    run_dir = camp.parent.parent / "runs" / "k-20260101T000000Z-aaaa1111"
    run_dir.mkdir(parents=True)
    return RunContext(loaded, control, control_file, "k-20260101T000000Z-aaaa1111",  # type: ignore[arg-type]
                      run_dir, Reporter(io.StringIO()))


def seal_folder(run_dir: Path) -> Path:
    """What finish does, as far as show needs it: run.json, then SHA256SUMS last."""
    record = {"schema": "harness.run/v2", "run_id": run_dir.name, "attempt": 1,
              "status": "accepted", "reasons": [], "rules": [], "seal": "sha256:s",
              "image": {"id": IMAGE}, "model_hashes": {}, "campaign": {"name": "c"},
              "control": {"name": "k"}}
    (run_dir / "run.json").write_text(json.dumps(record))
    write_manifest(run_dir)
    return run_dir


def show_input(run_dir: Path, name: str) -> tuple[int, str]:
    r = CliRunner().invoke(show, [str(run_dir), "--input", name])
    return r.exit_code, r.output


def test_the_sealed_bytes_are_kept_and_sealed_with_the_run(tmp_path: Path) -> None:
    camp = project(tmp_path)
    ctx = context(camp)
    seal = source_seal(ctx.loaded.project_dir, ctx.loaded.files())
    assert keep(ctx, seal) == []
    run = seal_folder(ctx.run_dir)
    assert sorted(p.name for p in (run / "inputs").iterdir()) == [
        "campaign.yaml", "control.yaml", "image.json", "resolved.json"]
    assert (run / kept.KEPT["control"]).read_bytes() == (tmp_path / "controls/k.yaml").read_bytes()
    assert kept.read_kept(run, "campaign") == (camp.read_bytes(), None)
    assert kept.kept_digests(run)["control"] == seal.files["input/controls/k.yaml"]
    resolved, why = kept.read_kept_json(run, "resolved")
    assert why is None and resolved["schema"] == kept.SCHEMA
    assert resolved["control"]["env"] == {"PLAIN": "visible"}
    assert resolved["files"]["control"]["kept"] == kept.KEPT["control"]
    image, _ = kept.read_kept_json(run, "image")
    assert image["entry"]["id"] == IMAGE
    code, out = show_input(run, "control")
    assert code == 0 and out == CONTROL


def test_a_file_changed_after_the_seal_is_refused_seal_changed_and_not_kept(
        tmp_path: Path) -> None:
    ctx = context(project(tmp_path))
    seal = source_seal(ctx.loaded.project_dir, ctx.loaded.files())
    (tmp_path / "controls" / "k.yaml").write_text(CONTROL + "timeout: 5\n")
    [reason] = keep(ctx, seal)
    assert reason.rule == SEAL_CHANGED
    assert "input/controls/k.yaml: changed between the source seal" in reason.detail
    assert not (ctx.run_dir / kept.KEPT["control"]).exists()
    assert (ctx.run_dir / kept.KEPT["campaign"]).exists()  # unchanged: kept
    resolved = json.loads((ctx.run_dir / kept.KEPT["resolved"]).read_text())
    assert resolved["files"]["control"]["why"] == reason.detail


def test_a_file_sealed_after_an_edit_the_run_never_loaded_is_refused(tmp_path: Path) -> None:
    """The seal matches the bytes, but they are not what the run was loaded from."""
    ctx = context(project(tmp_path))
    (tmp_path / "controls" / "k.yaml").write_text(CONTROL + "timeout: 5\n")
    seal = source_seal(ctx.loaded.project_dir, ctx.loaded.files())
    [reason] = keep(ctx, seal)
    assert reason.rule == SEAL_CHANGED and "no longer the file this run was loaded" in reason.detail
    assert not (ctx.run_dir / kept.KEPT["control"]).exists()


def test_a_kept_copy_that_is_not_the_sealed_file_is_not_read(tmp_path: Path) -> None:
    ctx = context(project(tmp_path))
    keep(ctx, source_seal(ctx.loaded.project_dir, ctx.loaded.files()))
    run = seal_folder(ctx.run_dir)
    (run / kept.KEPT["control"]).write_text(CONTROL + "# edited after the seal\n")
    assert kept.read_kept(run, "control") == (
        None, "inputs/control.yaml is not the file the run's seal vouches for")
    code, _ = show_input(run, "control")
    assert code != 0


def test_only_a_secret_looking_control_is_kept_redacted(tmp_path: Path, capsys) -> None:
    ctx = context(project(tmp_path, SECRET.replace("PLAIN: visible", "HF_TOKEN: env-clear")))
    assert keep(ctx, source_seal(ctx.loaded.project_dir, ctx.loaded.files())) == []
    run = seal_folder(ctx.run_dir)
    assert not (run / kept.KEPT["control"]).exists()
    assert (run / kept.KEPT["campaign"]).exists()
    everything = b"".join(p.read_bytes() for p in (run / "inputs").iterdir())
    assert b"env-clear" not in everything and b"engine-clear" not in everything
    resolved, _ = kept.read_kept_json(run, "resolved")
    ctl = resolved["control"]
    # the vector's own markers: a reviewer can match them with docker-vector.json
    assert ctl["env"] == {"HF_TOKEN": redact("env-clear")}
    assert ctl["engine"] == {"dtype": "bfloat16", "hf_token": redact('"engine-clear"')}
    assert ctl["secrets"] == ["API_KEY"]  # names, never values: shown as they are
    assert "env.HF_TOKEN" in resolved["files"]["control"]["why"]
    assert "engine.hf_token" in resolved["files"]["control"]["why"]
    with pytest.raises(SystemExit) as e:  # through main: its errors' exit codes
        main(["show", str(run), "--input", "control"])
    assert e.value.code == 2 and "inputs/control.yaml was not kept" in capsys.readouterr().err


def test_redaction_touches_only_what_the_vector_passes_by_name() -> None:
    ctl = {"env": {"AUTH": True, "tokenizer": "gpt2"}, "engine": {"a": [{"db_password": 1}]},
           "secrets": ["HF_TOKEN"], "post_steps": [{"name": "x", "options": {"key": "k"}}]}
    out = redacted_control(ctl)
    assert out["env"] == {"AUTH": redact("1"), "tokenizer": "gpt2"}  # a bool as docker gets it
    assert out["engine"] == {"a": [{"db_password": redact("1")}]}
    assert out["secrets"] == ctl["secrets"] and out["post_steps"] == ctl["post_steps"]


def test_show_input_prints_hostile_text_inert(tmp_path: Path) -> None:
    bidi = CONTROL.replace("a comment stays", "a comment \u202edeppets")
    ctx = context(project(tmp_path, bidi))
    assert keep(ctx, source_seal(ctx.loaded.project_dir, ctx.loaded.files())) == []
    run = seal_folder(ctx.run_dir)
    code, out = show_input(run, "control")
    assert code == 0 and "\u202e" not in out and "# a comment \\u202edeppets" in out
    # a forged folder: any bytes may sit in a kept file, sealed
    forged = tmp_path / "forged"
    (forged / "inputs").mkdir(parents=True)
    (forged / kept.KEPT["campaign"]).write_bytes(
        b"name: c\x1b[2J\x1b]0;pwned\x07\r\nrow: \xc2\x9b31m\xff\n")  # C1 CSI, not UTF-8
    seal_folder(forged)
    code, out = show_input(forged, "campaign")
    assert code == 0 and out.splitlines() == [
        "name: c\\x1b[2J\\x1b]0;pwned\\x07\\x0d", "row: \\x9b31m\ufffd"]
    assert not any(ch in out for ch in "\x1b\x07\r\x9b")
