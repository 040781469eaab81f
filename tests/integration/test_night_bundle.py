"""A real night with refused rows, its reruns, its morning summary and its bundle, against
the real Docker engine: the summary files follow every change to the night's rows (a
rerun of one run, `rerun --failed`), and `bundle export NIGHT_DIR` bundles the folder
`harness night` writes with every run its journal names, reruns included."""

from __future__ import annotations

import json
from pathlib import Path

from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.naming import JOURNAL_NAME


def summary_runs(night: Path) -> dict[str, str]:
    """run id -> status, as the night's summary.json says."""
    data = json.loads((night / "summary.json").read_text())
    return {r["run_id"]: r["status"] for r in data["runs"]}


def summary_text(night: Path) -> str:
    return (night / "summary.md").read_text() + (night / "summary.html").read_text()


def newest_run_ids(night: Path) -> list[tuple[str, str, str]]:
    with Journal.open(night / JOURNAL_NAME, readonly=True) as j:
        return [(r.control, r.state, r.run_id) for r in j.rows()]


def test_reruns_rewrite_the_summary_and_the_night_bundles(project, cleanup_containers, tmp_path):
    marker = project.root / "repaired"
    for name in ("fa", "fb"):
        project.control(name, f"""\
            command: [python3, -c, "print('ok')"]
            post_steps:
              - exit-code
              - {{name: repaired, run: [test, -f, "{marker}"]}}
            """)
    camp = project.campaign("bundlecamp", ["fa", "fb"])
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    r = project.harness("night", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 1, r.stderr
    [night] = sorted((project.runs / "nights").iterdir())
    rows = newest_run_ids(night)
    assert [(c, s) for c, s, _ in rows] == [("fa", "refused"), ("fb", "refused")]
    fa, fb = (rid for _, _, rid in rows)
    assert summary_runs(night) == {fa: "refused", fb: "refused"}

    marker.touch()  # the fix; one run is repeated by hand, then the rest with --failed
    r = project.harness("rerun", str(project.runs / fa), "--reason", "reseated the card")
    assert r.returncode == 0, r.stderr
    assert f"summary: {night / 'summary.md'}" in r.stdout
    [fa2] = [rid for c, s, rid in newest_run_ids(night) if c == "fa" and s == "accepted"]
    assert summary_runs(night) == {fa: "refused", fa2: "accepted", fb: "refused"}
    assert fa2 in summary_text(night)

    r = project.harness("rerun", "--failed", str(night), "--reason", "the same fix")
    assert r.returncode == 0, r.stderr
    [fb2] = [rid for c, s, rid in newest_run_ids(night) if c == "fb" and s == "accepted"]
    assert summary_runs(night) == {fa: "refused", fa2: "accepted", fb: "refused",
                                   fb2: "accepted"}
    assert fb2 in summary_text(night)

    out = tmp_path / "night.tar.gz"
    r = project.harness("bundle", "export", str(night), "-o", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "4 run(s)" in r.stdout and f"evidence-{night.name}" in r.stdout
    v = project.harness("bundle", "verify", str(out))
    assert v.returncode == 0, v.stdout + v.stderr
    assert "4 run(s)" in v.stdout
    again = tmp_path / "again.tar.gz"  # reading the night (report, status) changes nothing
    assert project.harness("report", str(night), "--format", "json").returncode == 0
    assert project.harness("bundle", "export", str(night), "-o", str(again)).returncode == 0
    assert again.read_bytes() == out.read_bytes()
