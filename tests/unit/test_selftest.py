"""`harness selftest`: the Gate-0 cases shipped in the package, judged by the real Gate 0.

Each shipped case must pass, and the selftest must fail when a case's expectation or its
documents are changed, when a case cannot be read (hostile data: symlinks, stray names,
oversized or malformed files), and say which harness ran it. The image gate's staging is
checked here without Docker; tests/integration/test_selftest_image_gate.py runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import __version__
from harness.base.errors import InvalidInput
from harness.cli.main import _run
from harness.config.gatelist import Gate
from harness.config.loader import require_campaign
from harness.driver import imagescenario as image_gate
from harness.judge import gate0cases as cases
from harness.judge.gate0cases import Broken, Case, CaseResult, load_cases, run_case
from harness.judge.gaterecord.onegate import GateRun, judge, junit_counts

REPO = Path(__file__).resolve().parents[2]
SEED = "01-seed-refused-on-custom-ops"
PAIR = "02-seed-pair-accepted"


def shipped() -> dict[str, Case | Broken]:
    return {c.name: c for c in load_cases()}


@pytest.fixture
def copied(tmp_path: Path) -> Path:
    """A writable copy of the shipped cases."""
    root = tmp_path / "gate0"
    shutil.copytree(cases.CASES, root)
    return root


def spec_of(root: Path, name: str) -> dict:
    return json.loads((root / name / "case.json").read_text())


def write_spec(root: Path, name: str, spec: dict) -> None:
    (root / name / "case.json").write_text(json.dumps(spec))


def judged(root: Path, name: str) -> CaseResult:
    [case] = [c for c in load_cases(root) if c.name == name]
    return run_case(case)


# ---- the shipped cases ------------------------------------------------------------------

def test_every_shipped_case_is_read_and_passes_with_the_real_gate0() -> None:
    found = load_cases()
    assert len(found) >= 17
    assert not [c for c in found if isinstance(c, Broken)]
    results = [run_case(c) for c in found]
    assert [(r.name, r.why) for r in results if not r.passed] == []
    assert all(len(r.proves) > 40 for r in results), "every case says what it proves"


def test_the_cases_cover_the_seed_its_pair_a_missing_document_and_a_worker_layout() -> None:
    found = shipped()
    seed = found[SEED].spec.expect
    assert seed.refused_by == ["GATE0-FIELD-DIFFERS"]
    assert ("engine-core", "compilation.custom_ops", "value-changed") in {
        (d.process, d.field, d.kind) for d in seed.differences}
    assert seed.changed_in == {"compilation.custom_ops": "VllmConfig.__post_init__ #2"}
    assert "transitions.jsonl" in found[SEED].files
    assert found[PAIR].spec.expect.verdict == "accepted"
    rules = {rule for c in found.values() for rule in c.spec.expect.refused_by}
    assert {"GATE0-MISSING", "GATE0-PROCESS-MISSING", "GATE0-UNREADABLE", "GATE0-SOURCE",
            "GATE0-INCOMPLETE", "GATE0-PROCESS-KIND", "GATE0-CONTRACT-MISSING",
            "GATE0-PHASE"} <= rules
    assert any("worker-1.startup.json" in c.files for c in found.values())
    settled = found["03-settled-fields-accepted-by-default"]
    assert settled.spec.contract is None and settled.spec.expect.verdict == "accepted"
    generation = json.loads(settled.files["generation.json"])["fields"]
    assert generation["cache.num_gpu_blocks"] is not None  # it does change, and is accepted


def test_the_seed_case_reports_the_call_that_changed_custom_ops() -> None:
    result = run_case(shipped()[SEED])
    assert result.passed
    assert "compilation.custom_ops changed in VllmConfig.__post_init__ #2" in result.got
    assert result.got.startswith("refused by GATE0-FIELD-DIFFERS: engine-core "
                                 "compilation.custom_ops value-changed")


# ---- a changed case fails ----------------------------------------------------------------

def test_a_changed_expected_rule_fails_naming_both(copied: Path) -> None:
    spec = spec_of(copied, "07-worker-generation-missing")
    spec["expect"]["refused_by"] = ["GATE0-MISSING"]
    write_spec(copied, "07-worker-generation-missing", spec)
    result = judged(copied, "07-worker-generation-missing")
    assert not result.passed
    assert result.why == "refused by GATE0-PROCESS-MISSING, expected GATE0-MISSING"


def test_a_seed_whose_generation_kept_custom_ops_is_accepted_and_the_case_fails(
        copied: Path) -> None:
    for name in ("generation.json", "worker-0.generation.json"):
        path = copied / SEED / "observations" / name
        doc = json.loads(path.read_text())
        doc["fields"]["compilation.custom_ops"] = ["+sparse_attn_indexer", "none"]
        path.write_text(json.dumps(doc))
    result = judged(copied, SEED)
    assert not result.passed
    assert "Gate 0 accepted, expected refused" in result.why
    assert "not found engine-core compilation.custom_ops value-changed" in result.why


def test_an_expected_call_the_trace_does_not_name_fails(copied: Path) -> None:
    spec = spec_of(copied, SEED)
    spec["expect"]["changed_in"] = {"compilation.custom_ops": "VllmConfig.__post_init__ #1"}
    write_spec(copied, SEED, spec)
    result = judged(copied, SEED)
    assert not result.passed
    assert "IMAGE-GATE-TRACE" in result.why and "not inside VllmConfig.__post_init__ #1" \
        in result.why


def test_a_missing_trace_fails_a_case_that_expects_a_call(copied: Path) -> None:
    (copied / SEED / "observations" / "transitions.jsonl").unlink()
    result = judged(copied, SEED)
    assert not result.passed and "checkpoint" in result.why


def test_an_unexpected_difference_and_a_missing_mention_fail(copied: Path) -> None:
    spec = spec_of(copied, "09-two-workers-one-changed")
    spec["expect"]["differences"] = []
    spec["expect"]["mentions"] = ["worker-7"]
    write_spec(copied, "09-two-workers-one-changed", spec)
    why = judged(copied, "09-two-workers-one-changed").why
    assert "not expected worker-1 compilation.custom_ops value-changed" in why
    assert "no reason mentions 'worker-7'" in why


def test_the_contract_decides_as_in_the_gate0_post_step(copied: Path) -> None:
    spec = spec_of(copied, "03-settled-fields-accepted-by-default")
    spec["contract"] = "all"
    write_spec(copied, "03-settled-fields-accepted-by-default", spec)
    result = judged(copied, "03-settled-fields-accepted-by-default")
    assert not result.passed and "cache.num_gpu_blocks" in result.got


# ---- hostile case data -----------------------------------------------------------------------

def broken(root: Path, name: str) -> str:
    [case] = [c for c in load_cases(root) if c.name == name]
    assert isinstance(case, Broken), case
    result = run_case(case)
    assert not result.passed and result.why.startswith("unreadable case: ")
    return case.why


def test_a_symlinked_observation_is_never_followed(copied: Path, tmp_path: Path) -> None:
    target = copied / PAIR / "observations" / "startup.json"
    (tmp_path / "elsewhere.json").write_bytes(target.read_bytes())
    target.unlink()
    target.symlink_to(tmp_path / "elsewhere.json")
    assert "observations/startup.json: a symlink" in broken(copied, PAIR)


def test_a_symlinked_observations_folder_or_case_json_is_refused(copied: Path) -> None:
    folder = copied / PAIR / "observations"
    shutil.move(folder, copied / "moved")
    folder.symlink_to(copied / "moved")
    assert "a symlink" in broken(copied, PAIR)
    spec = copied / SEED / "case.json"
    shutil.move(spec, copied / "spec.json")
    spec.symlink_to(copied / "spec.json")
    assert "case.json: a symlink" in broken(copied, SEED)


@pytest.mark.parametrize("name", ["evil.json", "worker-99999.startup.json", "..json",
                                  "startup.json.bak"])
def test_a_file_no_instrument_writes_is_refused(copied: Path, name: str) -> None:
    (copied / PAIR / "observations" / name).write_text("{}")
    assert "no case holds" in broken(copied, PAIR)


def test_a_stray_entry_at_the_top_is_a_failing_case(copied: Path) -> None:
    (copied / "notes.txt").write_text("x")
    (copied / "bad name").mkdir()
    found = {c.name: c for c in load_cases(copied)}
    assert isinstance(found["notes.txt"], Broken)
    assert isinstance(found["bad name"], Broken)


@pytest.mark.parametrize("mutate, why", [
    (lambda s: s.update(extra=1), "Extra inputs"),
    (lambda s: s.update(schema="harness.selftest.gate0-case/v9"), "schema"),
    (lambda s: s["expect"].update(refused_by=["NOT-A-RULE"]), "not a rule of the catalogue"),
    (lambda s: s["expect"].update(verdict="maybe"), "verdict"),
    (lambda s: s["expect"]["differences"].append(
        {"process": "engine-core", "field": "a.b", "kind": "odd"}), "not one of"),
    (lambda s: s.update(contract=["not dotted"]), "contract"),
    (lambda s: s.update(proves="two\nlines"), "proves"),
    (lambda s: s["expect"].update(changed_in={"model.dtype": "VllmConfig.__post_init__ #2"}),
     "not among the expected differences"),
])
def test_a_malformed_case_json_is_a_failing_case(copied: Path, mutate, why: str) -> None:
    spec = spec_of(copied, SEED)
    mutate(spec)
    write_spec(copied, SEED, spec)
    assert why in broken(copied, SEED)


def test_an_oversized_or_non_json_case_json_is_a_failing_case(copied: Path) -> None:
    (copied / SEED / "case.json").write_text(" " * (cases.MAX_SPEC + 1))
    assert "over the" in broken(copied, SEED)
    (copied / PAIR / "case.json").write_bytes(b"\xff{")
    assert "is not a case" in broken(copied, PAIR)


def test_a_missing_cases_folder_says_so(tmp_path: Path) -> None:
    with pytest.raises(cases.CasesMissing):
        load_cases(tmp_path / "absent")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(cases.CasesMissing):
        load_cases(tmp_path / "link")


# ---- the JUnit report ---------------------------------------------------------------------

def test_the_junit_report_is_what_a_gate_counts_with_the_harness_named() -> None:
    results = [CaseResult("a", "proves a", True, "accepted"),
               CaseResult("b\x01", "proves b", False, "refused", "why \x1b[31m <&>")]
    data = cases.junit_xml("suite", results, {"harness.version": "9.9"})
    assert junit_counts(data) == {"tests": 2, "failures": 1, "errors": 0, "skipped": 0}
    assert b'name="harness.version" value="9.9"' in data
    assert b"\\u0001" in data and b"\x1b" not in data


def test_a_gate_with_min_tests_accepts_the_shipped_report() -> None:
    data = cases.junit_xml("s", [run_case(c) for c in load_cases()], {})
    gate = Gate.model_validate({"name": "gate0", "run": ["harness", "selftest"],
                                "timeout": 60, "expect": {"junit": "junit.xml",
                                                          "min_tests": 17}})
    assert judge(gate, GateRun(0, 1.0, junit=data)).passed


# ---- the command ------------------------------------------------------------------------------

@dataclass
class Ran:
    exit_code: int
    output: str


@pytest.fixture
def invoke(capsys):
    """`harness selftest ARGS` as `main` runs it (errors become exit codes and messages)."""
    def run(*args: str) -> Ran:
        code = _run(["selftest", *args])
        got = capsys.readouterr()
        return Ran(code, got.out + got.err)
    return run


def test_the_command_passes_writes_junit_and_names_the_harness(tmp_path: Path,
                                                               invoke) -> None:
    out = invoke("--junitxml", str(tmp_path / "j.xml"))
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert sum(line.startswith("passed  ") for line in lines) == len(load_cases())
    assert lines[-1].startswith(f"selftest: {len(load_cases())} of {len(load_cases())} "
                                f"Gate-0 cases passed; harness {__version__}")
    data = (tmp_path / "j.xml").read_bytes()
    assert junit_counts(data)["tests"] == len(load_cases())
    assert f'name="harness.version" value="{__version__}"'.encode() in data
    assert b'name="harness.mode" value="' in data


def test_a_failing_case_exits_1(copied: Path, monkeypatch, invoke) -> None:
    spec = spec_of(copied, PAIR)
    spec["expect"]["verdict"] = "refused"
    write_spec(copied, PAIR, spec)
    monkeypatch.setattr(cases, "CASES", copied)
    out = invoke()
    assert out.exit_code == 1
    assert f"FAILED  {PAIR}: accepted" in out.output
    assert "    proves: The seed case's pair" in out.output


def test_case_and_list_choose_and_describe(invoke) -> None:
    out = invoke("--case", PAIR)
    assert out.exit_code == 0 and out.output.startswith(f"passed  {PAIR}: accepted")
    assert "1 of 1 Gate-0 cases passed" in out.output
    listed = invoke("--list")
    assert listed.exit_code == 0
    assert listed.output.splitlines()[0].startswith(f"{SEED}: The seed's case")


@pytest.mark.parametrize("args", [["--case", "nope"], ["--image", "rehearsal"],
                                  ["--runs-dir", "/tmp"], ["--lock-timeout", "10"],
                                  ["--image-gate", "c.yaml", "--list"],
                                  ["--junitxml", "/no/such/folder/j.xml"]])
def test_bad_usage_exits_2(args: list[str], invoke) -> None:
    assert invoke(*args).exit_code == 2


def test_without_its_cases_the_installation_is_unfit(monkeypatch, tmp_path: Path,
                                                     invoke) -> None:
    monkeypatch.setattr(cases, "CASES", tmp_path / "absent")
    out = invoke()
    assert out.exit_code == 3 and "lacks the harness's package data" in out.output


def test_it_runs_without_pytest_or_the_source_tree_on_the_path(tmp_path: Path) -> None:
    """The selftest imports no test runner: with pytest made unimportable it still runs."""
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "pytest.py").write_text("raise ImportError('pytest is not installed here')")
    (blocker / "_pytest.py").write_text("raise ImportError('pytest is not installed here')")
    env = {**os.environ, "PYTHONPATH": f"{blocker}{os.pathsep}{REPO}"}
    proc = subprocess.run([sys.executable, "-m", "harness", "selftest"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


# ---- the image gate's staging (no Docker) -------------------------------------------------------

def operator(tmp_path: Path, images: str = "rehearsal") -> Path:
    """A campaign of an operator's own, with one control in image `images`."""
    for d in ("campaigns", "controls"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "images.lock").write_text(
        "images:\n  rehearsal:\n    id: sha256:" + "1" * 64 + "\n    ref: r:local\n"
        "  other:\n    id: sha256:" + "2" * 64 + "\n    ref: o:local\n")
    (tmp_path / "controls" / "c.yaml").write_text(
        f"name: c\nimage: {images}\ndevice: cpu\ncommand: [/bin/true]\n")
    campaign = tmp_path / "campaigns" / "op.yaml"
    campaign.write_text(f"name: op\nrow: OP\nlock: {tmp_path}/locks/gpu.lock\n"
                        "lock_timeout: 7m\ncontrols: [c]\nrequire_approval: true\n")
    (tmp_path / "locks").mkdir()
    return campaign


def test_the_gated_images_are_the_campaigns_unless_named(tmp_path: Path) -> None:
    loaded = require_campaign(operator(tmp_path))
    assert image_gate.images_of(loaded, ()) == ["rehearsal"]
    assert image_gate.images_of(loaded, ("other", "other")) == ["other"]
    with pytest.raises(InvalidInput, match="not pinned"):
        image_gate.images_of(loaded, ("nope",))


def test_the_staged_campaign_runs_the_shipped_controls_in_the_operators_image_and_lock(
        tmp_path: Path) -> None:
    loaded = require_campaign(operator(tmp_path / "op"))
    staged = image_gate.stage(loaded, "rehearsal", tmp_path / "stage")
    assert staged.lock_path == loaded.lock_path
    assert staged.image_lock_file == loaded.image_lock_file
    assert staged.campaign.lock_timeout == 420
    assert not staged.campaign.require_approval
    assert [c for c, _ in staged.plan()] == list(image_gate.CONTROLS)
    scenario = image_gate.scenario_dir()
    for control, _ in staged.controls.values():
        assert control.image == "rehearsal" and control.device == "cpu" and control.instrument
        [mount] = control.mounts
        assert (mount.source, mount.target) == (str(scenario), "/opt/harness-selftest")
        assert [p.name for p in control.post_steps] == ["exit-code", "image-gate"]
    assert scenario / image_gate.SCENARIO_FILE in staged.files()  # in the run's seal
    assert sorted(p.name for p in (tmp_path / "op").iterdir()) == [
        "campaigns", "controls", "images.lock", "locks"]  # nothing written to the project


def test_a_staged_path_the_loader_would_expand_is_refused(tmp_path: Path) -> None:
    loaded = require_campaign(operator(tmp_path))
    with pytest.raises(InvalidInput, match="cannot be staged"):
        image_gate.campaign_doc(loaded, "rehearsal", Path("/opt/$HOME/scenario"))


def test_the_image_gate_refuses_an_unpinned_image_before_running(tmp_path: Path,
                                                                invoke) -> None:
    campaign = operator(tmp_path)
    out = invoke("--image-gate", str(campaign), "--image", "nope")
    assert out.exit_code == 2 and "not pinned" in out.output
    assert not (tmp_path / "gpu-runs").exists()
