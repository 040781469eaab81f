"""`harness night` and `harness rerun` against the real Docker engine: kill -9 and resume,
two nights on one lock, a rerun of a refused run, a corrupted journal, a deferring doctor."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.naming import JOURNAL_NAME
from harness.measure.nightfolder.rows import chain_of
from harness.measure.runfolder.manifest import verify_folder
from harness.measure.runfolder.reruns import reruns_of
from tests.conftest import containers_with_label

SLEEP = """\
command: [python3, -c, "import time; print('start', flush=True); time.sleep({s}); print('end')"]
timeout: 1m
"""


def runs(project) -> list[Path]:
    return [p for p in project.run_dirs() if (p / "run.json").is_file()]


def nights(project) -> list[Path]:
    folder = project.runs / "nights"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def by_status(project) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in runs(project):
        rec = project.record(p)
        out.setdefault(rec["status"], []).append(rec["control"]["name"] if rec.get("control")
                                                 and rec["control"].get("name")
                                                 else p.name.rsplit("-", 2)[0])
    return {k: sorted(v) for k, v in out.items()}


def running_container(lock: Path, control: str) -> list[str]:
    args = ["docker", "ps", "-q", "--filter", f"label=org.harness.lock={lock}",
            "--filter", f"label=org.harness.control={control}"]
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()


def test_kill_9_mid_container_then_resume_finishes_without_repeating(project,
                                                                   cleanup_containers):
    for name in ("na", "nb", "nc"):
        project.control(name, SLEEP.format(s=2))
    camp = project.campaign("nightcamp", ["na", "nb", "nc"], "retry: {interrupted: 1}\n")
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    night = project.popen("night", str(camp), "--runs-dir", str(project.runs))
    t0 = time.monotonic()
    while not running_container(project.lock, "nb"):  # the second control is mid-container
        assert night.poll() is None, night.communicate()
        assert time.monotonic() - t0 < 60, "the second control never started"
        time.sleep(0.1)
    night.kill()
    night.communicate()
    assert running_container(project.lock, "nb"), "the orphan container outlives kill -9"
    assert by_status(project) == {"accepted": ["na"]}

    r = project.harness("night", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 0, r.stderr
    assert by_status(project) == {"accepted": ["na", "nb", "nc"], "interrupted": ["nb"]}
    for p in runs(project):  # all four sealed, the cut-off one too
        assert verify_folder(p) == [], p
    [cut] = [p for p in runs(project) if project.record(p)["status"] == "interrupted"]
    assert "RUN-INTERRUPTED" in project.record(cut)["rules"]
    assert containers_with_label(f"org.harness.lock={project.lock}") == [], \
        "resume stopped and removed the orphan"
    [night_dir] = nights(project)  # resumed, not a second night
    with Journal.open(night_dir / JOURNAL_NAME, readonly=True) as j:
        rows = [(r.control, r.attempt, r.state, r.origin) for r in j.rows()]
    assert rows == [("na", 1, "accepted", "plan"), ("nb", 1, "interrupted", "plan"),
                    ("nb", 2, "accepted", "retry"), ("nc", 1, "accepted", "plan")]
    retry = next(p for p in runs(project) if p != cut and p.name.startswith("nb-"))
    assert project.record(retry)["rerun_of"]["run_id"] == cut.name  # linked as a rerun is
    listed = {e["run_id"]: e for e in json.loads(project.harness(
        "ls", "--json", "--runs-dir", str(project.runs)).stdout)}
    assert listed[cut.name]["superseded_by"] == retry.name
    assert listed[retry.name]["rerun_of"] == cut.name
    shown = project.harness("show", retry.name, "--runs-dir", str(project.runs)).stdout
    assert cut.name in shown
    assert "<html" in (night_dir / "summary.html").read_text().lower()
    assert str(night_dir / "summary.md") in r.stdout
    again = project.harness("night", str(camp), "--runs-dir", str(project.runs))
    assert again.returncode == 0, again.stderr  # that night ended: the next start is new
    assert len(nights(project)) == 2 and len(runs(project)) == 7


def test_two_nights_at_once_on_one_lock(project, cleanup_containers):
    for name in ("ta", "tb"):
        project.control(name, SLEEP.format(s=1))
    camp = project.campaign("twocamp", ["ta", "tb"])
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    procs = [project.popen("night", str(camp), "--runs-dir", str(project.runs))
             for _ in range(2)]
    results = [(p.wait(timeout=120), p.communicate()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 3], results
    loser_err = next(err for code, (_, err) in results if code == 3)
    assert "another night is driving this GPU lock" in loser_err
    assert "Traceback" not in loser_err
    assert len(nights(project)) == 1
    assert by_status(project) == {"accepted": ["ta", "tb"]}


def test_rerun_of_a_refused_run_is_linked_both_ways(project, cleanup_containers):
    marker = project.root / "repaired"
    project.control("flaky", f"""\
        command: [python3, -c, "print('ok')"]
        post_steps:
          - exit-code
          - {{name: repaired, run: [test, -f, "{marker}"]}}
        """)
    camp = project.campaign("rerancamp", ["flaky"])
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    r = project.harness("night", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 1, r.stderr
    [orig] = runs(project)
    assert project.record(orig)["status"] == "refused"
    sums_before = (orig / "SHA256SUMS").read_bytes()

    marker.touch()
    r = project.harness("rerun", str(orig), "--reason", "reseated the card")
    assert r.returncode == 0, r.stderr
    [new] = [p for p in runs(project) if p != orig]
    rec = project.record(new)
    assert rec["status"] == "accepted"
    assert rec["rerun_of"] == {"run_id": orig.name, "path": str(orig),
                               "reason": "reseated the card"}
    # the original is untouched: still refused, still intact
    assert project.record(orig)["status"] == "refused"
    assert (orig / "SHA256SUMS").read_bytes() == sums_before and verify_folder(orig) == []
    # forward link: the index beside the run folders, the journal, the report, status
    [link] = reruns_of(orig)
    assert link["run_id"] == new.name and link["status"] == "accepted"
    [night_dir] = nights(project)
    with Journal.open(night_dir / JOURNAL_NAME, readonly=True) as j:
        chain = chain_of(j.rows(), orig.name)
    assert [(c.run_id, c.state, c.origin) for c in chain] == [
        (orig.name, "refused", "plan"), (new.name, "accepted", "rerun")]
    assert chain[1].link_reason == "reseated the card"
    rep = project.harness("report", str(night_dir), "--format", "json")
    assert rep.returncode == 0, rep.stderr
    entries = {e["run_id"]: e for e in json.loads(rep.stdout)["runs"]}
    assert entries[orig.name]["reruns"] == [new.name]
    assert entries[new.name]["rerun_of"] == orig.name
    st = project.harness("status", "--runs-dir", str(project.runs), "--lock", str(project.lock))
    assert st.returncode == 0, st.stderr
    assert f"flaky #2 accepted {new.name} (rerun)" in st.stdout


def test_corrupted_journal_is_a_clear_error_and_loses_nothing(project, cleanup_containers):
    project.control("solo", SLEEP.format(s=1))
    camp = project.campaign("corruptcamp", ["solo"])
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    assert project.harness("night", str(camp), "--runs-dir", str(project.runs)).returncode == 0
    [night_dir] = nights(project)
    journal = night_dir / JOURNAL_NAME
    with open(journal, "r+b") as f:
        f.write(b"this is not a database any more" * 64)
    damaged = journal.read_bytes()
    before = runs(project)

    for extra in ([], ["--night", str(night_dir)]):
        r = project.harness("night", str(camp), "--runs-dir", str(project.runs), *extra)
        assert r.returncode == 3, (r.stdout, r.stderr)
        assert "damaged" in r.stderr and "--new" in r.stderr
        assert "Traceback" not in r.stderr
    assert journal.read_bytes() == damaged, "the damaged journal is left as it was"
    assert runs(project) == before and all(verify_folder(p) == [] for p in before)
    st = project.harness("status", "--runs-dir", str(project.runs), "--lock", str(project.lock))
    assert "damaged" in st.stdout and "Traceback" not in st.stderr

    r = project.harness("night", str(camp), "--runs-dir", str(project.runs), "--new")
    assert r.returncode == 0, r.stderr
    assert len(nights(project)) == 2 and len(runs(project)) == 2


def test_failing_doctor_defers_without_launching(project):
    project.control("big", SLEEP.format(s=1))
    camp = project.campaign("diskcamp", ["big"], "host: {min_free_gib: 100000000}\n")
    r = project.harness("night", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 3, r.stderr
    assert runs(project) == []
    [night_dir] = nights(project)
    with Journal.open(night_dir / JOURNAL_NAME, readonly=True) as j:
        [row] = j.rows()
    assert row.state == "deferred" and row.reason.startswith("ENV-DOCTOR: disk:")
    assert not (night_dir / "ended.json").exists()  # the next start tries the host again
