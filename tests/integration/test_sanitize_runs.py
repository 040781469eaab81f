"""On the real engine: a root workload's setuid file and setgid folder in a read-write
mount (the red team's evil2) are undone on the host right after the run, and refuse it."""

from __future__ import annotations

import json
import stat

from tests.conftest import containers_with_label


def test_a_planted_setuid_file_and_setgid_folder_are_cleared_and_refuse_the_run(
        project, cleanup_containers):
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    scratch = project.root / "scratch"
    scratch.mkdir()
    scratch.chmod(0o777)
    project.control("planter", """\
        command:
          - sh
          - -c
          - cp /bin/sh /s/euid && chmod 4755 /s/euid && mkdir /s/g && chmod 2755 /s/g && ls -ln /s
        mounts:
          - {source: ../scratch, target: /s, read_only: false}
        """)
    camp = project.campaign("camp", ["planter"])
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode == 1, r.stderr
    [run] = project.run_dirs()
    rec = project.record(run)
    assert rec["status"] == "refused" and rec["rules"] == ["MOUNT-SETUID-PLANTED"], rec
    log = (run / "logs/stdout.log").read_text()
    assert "-rwsr-xr-x" in log and "drwxr-sr-x" in log, "the attack really ran"
    assert stat.S_IMODE((scratch / "euid").stat().st_mode) == 0o755
    assert stat.S_IMODE((scratch / "g").stat().st_mode) == 0o755
    [m] = json.loads((run / "mounts-sanitized.json").read_text())["mounts"]
    rows = {e["path"]: (e["old_mode"], e["kind"], e["done"]) for e in m["entries"]}
    assert rows == {"euid": ("4755", "file", True), "g": ("2755", "dir", True)}, rows
    assert m["complete"] is True and m["source"] == str(scratch)
    assert project.harness("verify", str(run)).returncode == 0
    assert containers_with_label(f"org.harness.lock={project.lock}") == []
