"""Evidence around a run is one shape (harness/pipeline/evidence): a registry of sources,
one phase and one file each, and one place that decides what a source's failure means: a
refusal where the control required that evidence, otherwise a note in its document."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.base.catalogue import (
    ENV_KERNEL_LOG_UNREADABLE,
    HARNESS_ERROR,
    SLURM_NIGHT_STOPPED,
    SLURM_NOT_CLAIMED,
    TELEMETRY_GAP,
    WITNESS_ARGV_DIFFERS,
    WITNESS_EXEC_UNCONFIRMED,
)
from harness.measure.runfolder import layout
from harness.pipeline import evidence
from harness.pipeline.evidence import kernelwindow, sampled, slurmclaim, witnesses
from harness.pipeline.evidence.source import (
    DURING,
    EXITED,
    LAUNCHED,
    LOCKED,
    PHASES,
    SEAL,
    STARTED,
    Evidence,
    Gathered,
    Scene,
    Subject,
)


def ctx(run_dir: Path, telemetry: bool = False, kernel_log: bool = False) -> SimpleNamespace:
    events: list[tuple[str, dict]] = []
    return SimpleNamespace(run_dir=run_dir, events=events, outcome=None,
                           ui=SimpleNamespace(event=lambda kind, **kw: events.append((kind, kw))),
                           control=SimpleNamespace(
                               telemetry=SimpleNamespace(required=telemetry),
                               kernel_log=SimpleNamespace(required=kernel_log)))


def test_registry_names_and_files_are_unique_and_phases_known() -> None:
    names = [s.name for s in evidence.SOURCES]
    files = [s.file for s in evidence.SOURCES if s.file]
    assert len(set(names)) == len(names) and len(set(files)) == len(files)
    assert {s.phase for s in evidence.SOURCES} <= set(PHASES)
    assert {"launcher", "container", "telemetry", "kernel_log", "host-before", "host-after",
            "metrics", "mounts"} <= set(names)
    # the run.json blocks every run written before holds, still filled by a source
    assert set(evidence.blocks(layout.RECORD, {})) == {"telemetry", "kernel_log"}


def test_gather_writes_only_the_sources_of_that_phase(tmp_path: Path) -> None:
    argv = ("/no/such/docker", "run")
    got = evidence.gather(LAUNCHED, Scene(ctx(tmp_path), subject=Subject(os.getpid(), argv=argv)))
    assert set(got) == {s.name for s in evidence.SOURCES if s.phase == LAUNCHED}
    doc = json.loads((tmp_path / layout.LAUNCHER_WITNESS).read_text())
    assert doc == got["launcher"].doc and doc["pid"] == os.getpid()
    assert doc["schema"] == "harness.measure.witness.launcher/v1"
    # the witness saw this process, not the argv recorded: the launch is not vouched for
    refused = {r.rule for r in got["launcher"].reasons}
    assert refused & {WITNESS_ARGV_DIFFERS, WITNESS_EXEC_UNCONFIRMED}
    assert not (tmp_path / layout.CONTAINER_INSPECT).exists()


def broken(_scene: Scene) -> Gathered:
    raise RecursionError("maximum recursion depth exceeded")


@pytest.mark.parametrize("required", [True, False])
def test_a_source_that_raises_refuses_only_where_its_evidence_was_required(
        tmp_path: Path, required: bool) -> None:
    """The workload writes what the telemetry summary and the kernel-log reader read: a
    file shaped to break a reader never turns required evidence into a pass."""
    sources = (Evidence("telemetry", SEAL, "run.json#telemetry", broken,
                        required=sampled.TELEMETRY.required, rule=TELEMETRY_GAP),
               Evidence("kernel_log", SEAL, "run.json#kernel_log", broken,
                        required=kernelwindow.WINDOW.required, rule=ENV_KERNEL_LOG_UNREADABLE,
                        hint=kernelwindow.KERNEL_HINT),
               Evidence("own", SEAL, "own.json", lambda _s: Gathered({"fine": True})))
    run = ctx(tmp_path, required, required)
    got = evidence.gather(SEAL, Scene(run), sources)
    error = "RecursionError: maximum recursion depth exceeded"
    assert evidence.blocks(layout.RECORD, got, sources) == {
        "telemetry": {"error": error}, "kernel_log": {"error": error}}
    reasons = evidence.reasons(got)
    assert [r.rule for r in reasons] == (
        [TELEMETRY_GAP, ENV_KERNEL_LOG_UNREADABLE] if required else [])
    if required:
        assert error in reasons[0].detail and "harness doctor" in reasons[1].detail
    assert [kind for kind, _ in run.events] == ["evidence-failed"] * 2
    assert json.loads((tmp_path / "own.json").read_text()) == {"fine": True}


def test_a_failed_witness_is_recorded_and_never_loses_the_others(tmp_path: Path) -> None:
    got = evidence.gather(STARTED, Scene(ctx(tmp_path), subject=Subject(os.getpid())))
    assert "needs a container id" in got["container"].doc["error"]
    assert json.loads((tmp_path / layout.CONTAINER_INSPECT).read_text())["schema"] == \
        "harness.measure.witness.container/v1"
    assert not got["container"].reasons  # a note: the container witness is not required
    assert witnesses.LAUNCHER.required(None)  # the launcher's is: a launch it cannot vouch for


def test_a_during_source_is_written_when_it_ends_at_exited(tmp_path: Path) -> None:
    stopped: list[bool] = []

    def start(_scene: Scene) -> Gathered:
        return Gathered({"running": True},
                        held=lambda: stopped.append(True) or Gathered({"samples": 3}))

    sources = (Evidence("probe", DURING, "probe.json", start),)
    run = ctx(tmp_path)
    running = evidence.gather(DURING, Scene(run), sources)
    assert not (tmp_path / "probe.json").exists() and not stopped
    ended = evidence.gather(EXITED, Scene(run, running), sources)
    assert stopped == [True] and ended["probe"].doc == {"samples": 3}
    assert json.loads((tmp_path / "probe.json").read_text()) == {"samples": 3}


def test_a_start_up_observation_nested_past_the_parser_is_no_time(tmp_path: Path) -> None:
    (tmp_path / layout.OBSERVATIONS).mkdir()
    startup = tmp_path / layout.OBSERVATIONS / layout.STARTUP
    startup.write_text("[" * 200_000 + "]" * 200_000)
    assert sampled.startup_time(tmp_path) is None  # not a RecursionError
    startup.write_text('{"observed": {"time": 12.5}}')
    assert sampled.startup_time(tmp_path) == 12.5


def claim_scene(tmp_path: Path) -> tuple[Scene, Path]:
    run_dir = tmp_path / "runs" / "r2"
    run_dir.mkdir(parents=True)
    scene = Scene(SimpleNamespace(**vars(ctx(run_dir)), run_id="r2"))
    return scene, tmp_path / "drop" / "claims"


def test_the_slurm_claim_is_the_first_evidence_under_the_lock() -> None:
    locked = [s.name for s in evidence.SOURCES if s.phase == LOCKED]
    assert locked[0] == slurmclaim.CLAIM.name


def test_outside_a_claiming_job_the_claim_gathers_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("HARNESS_CLAIMS", raising=False)
    scene, claims = claim_scene(tmp_path)
    got = evidence.gather(LOCKED, scene, (slurmclaim.CLAIM,))
    assert got["slurm-claim"] == Gathered() and not claims.exists()


def test_a_claim_made_launches_and_one_taken_refuses(tmp_path, monkeypatch) -> None:
    scene, claims = claim_scene(tmp_path)
    monkeypatch.setenv("HARNESS_CLAIMS", str(claims))
    assert evidence.gather(LOCKED, scene, (slurmclaim.CLAIM,))["slurm-claim"].reasons == ()
    assert (claims / "r2").is_dir()  # made by this run: the controller's mkdir now fails
    again = evidence.gather(LOCKED, scene, (slurmclaim.CLAIM,))["slurm-claim"].reasons
    assert [r.rule for r in again] == [SLURM_NOT_CLAIMED]
    assert "the controller stopped the night first" in again[0].detail


def claim_after(scene: Scene, claims: Path, before: Path, monkeypatch) -> tuple:
    """The claim's reasons for a run that follows `before` (done) in its job, under
    stop-on-failure."""
    done = claims.parent.parent / "done"
    done.touch()
    monkeypatch.setenv("HARNESS_CLAIMS", str(claims))
    monkeypatch.setenv("HARNESS_STOP_POLICY", "stop-on-failure")
    monkeypatch.setenv("HARNESS_AFTER_RUN", str(before))
    monkeypatch.setenv("HARNESS_AFTER_DONE", str(done))
    return evidence.gather(LOCKED, scene, (slurmclaim.CLAIM,))["slurm-claim"].reasons


def test_a_run_before_without_a_seal_stops_the_night_under_a_policy(tmp_path,
                                                                     monkeypatch) -> None:
    scene, claims = claim_scene(tmp_path)
    before = tmp_path / "runs" / "r1"
    before.mkdir()
    got = claim_after(scene, claims, before, monkeypatch)
    assert [r.rule for r in got] == [SLURM_NIGHT_STOPPED] and "left no seal" in got[0].detail
    assert not (claims / "r2").exists()  # nothing claimed: the controller may take it


ACCEPTED_RUN = (Path(__file__).resolve().parents[1] / "fixtures" / "runfolder"
                 / "rehearsal-compute-20261206T130926Z-091a64dc")


@pytest.mark.parametrize("linked", [False, True])
def test_the_run_before_is_read_where_it_is_never_through_a_link(tmp_path, monkeypatch,
                                                                   linked: bool) -> None:
    """An accepted seal lets the next run launch under stop-on-failure; the same seal
    reached through a link planted under the run before's name is no seal."""
    scene, claims = claim_scene(tmp_path)
    before = tmp_path / "runs" / "r1"
    if linked:
        shutil.copytree(ACCEPTED_RUN, tmp_path / "elsewhere")
        before.symlink_to(tmp_path / "elsewhere")
    else:
        shutil.copytree(ACCEPTED_RUN, before)
    got = claim_after(scene, claims, before, monkeypatch)
    if linked:
        assert [r.rule for r in got] == [SLURM_NIGHT_STOPPED] and "left no seal" in got[0].detail
        assert not (claims / "r2").exists()
    else:
        assert got == () and (claims / "r2").is_dir()


def test_a_malformed_handover_refuses_but_never_as_unclaimed(tmp_path, monkeypatch) -> None:
    """A hostile job value is the harness's error: read as unclaimed, the controller would
    plan the control again on every poll."""
    scene, claims = claim_scene(tmp_path)
    monkeypatch.setenv("HARNESS_CLAIMS", str(claims))
    monkeypatch.setenv("HARNESS_STOP_POLICY", "stop-on-refusal")
    monkeypatch.setenv("HARNESS_AFTER_RUN", str(tmp_path / "elsewhere" / "r1"))
    got = evidence.gather(LOCKED, scene, (slurmclaim.CLAIM,))["slurm-claim"].reasons
    assert [r.rule for r in got] == [HARNESS_ERROR] and "HARNESS_AFTER_RUN" in got[0].detail
    assert not (claims / "r2").exists()
