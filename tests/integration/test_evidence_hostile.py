"""A real container writes what no seal should hold; a real sealed run is tampered with.

The run must still be sealed, refused with the rule that names why, and verify in both
`harness verify` and `sha256sum -c`; refinalize must judge only what the seal vouches for.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from harness.measure.runfolder.layout import SUMS
from harness.measure.runfolder.manifest import verify_folder
from tests.conftest import REPO

NAMER = """\
command:
  - python3
  - -c
  - |
    import os
    out = os.fsencode(os.environ["HARNESS_OBSERVATIONS_DIR"])
    names = [b"byte\\xffname", "cr\\rname".encode(), "nl\\nname".encode(),
             "nel\\x85name".encode(), "ls\\u2028name".encode(), b"back\\\\slash",
             "bidi\\u202egnp.exe".encode()]
    for n in names:
        with open(out + b"/" + n, "wb") as f:
            f.write(b"content of " + n)
    os.mkdir(out + b"/dir\\rname")
    with open(out + b"/dir\\rname/inner.json", "wb") as f:
        f.write(b"{}")
    with open(out + b"/plain.json", "wb") as f:
        f.write(b"{}")
"""

PRINTED = ["byte\\xffname", "cr\\u000dname", "nl\\u000aname", "nel\\u0085name",
           "ls\\u2028name", "back\\\\slash", "bidi\\u202egnp.exe", "dir\\u000dname",
           "dir\\u000dname/inner.json"]


def coreutils(run: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["sha256sum", "-c", "--strict", SUMS], cwd=run,
                          capture_output=True, text=True, timeout=60)


def test_unsealable_names_are_removed_listed_refused_and_both_tools_verify(project):
    project.control("namer", NAMER)
    r = project.harness("run", str(project.campaign("camp", ["namer"])),
                        "--runs-dir", str(project.runs))
    assert r.returncode == 1, r.stderr
    [run] = project.run_dirs()
    rec = project.record(run)
    assert rec["status"] == "refused" and "EVIDENCE-BAD-NAME" in rec["rules"], rec["reasons"]
    removed = {e["path"]: e for e in json.loads((run / "non-regular-removed.json").read_text())}
    for name in PRINTED:
        entry = removed[f"observations/{name}"]
        assert entry["why"] == "bad-name", entry
        if entry["kind"] == "file":
            assert len(entry["sha256"]) == 64
    assert sorted(os.listdir(run / "observations")) == ["plain.json"]
    assert project.harness("verify", str(run)).returncode == 0
    assert coreutils(run).returncode == 0, coreutils(run).stdout
    assert verify_folder(run) == []


CONTRACT = ["compilation.custom_ops", "compilation.mode", "model.dtype"]


def gate0_run(project) -> Path:
    shutil.copytree(REPO / "controls" / "models", project.root / "controls" / "models")
    shutil.copy(REPO / "controls" / "rehearsal-gate0-inproc.yaml", project.root / "controls")
    camp = project.campaign("g0", ["rehearsal-gate0-inproc"],
                            extra=f"contract: {json.dumps(CONTRACT)}\n")
    r = project.harness("run", str(camp), "--runs-dir", str(project.runs))
    assert r.returncode in (0, 1), r.stderr
    [run] = project.run_dirs()
    return run


def test_refinalize_on_a_real_run_then_refuses_it_once_tampered(project, tmp_path):
    run = gate0_run(project)
    r = project.harness("refinalize", str(run), "--json")
    assert r.returncode in (0, 1) and json.loads(r.stdout)["addendum"], r.stderr
    assert len(os.listdir(run / "addenda")) == 1
    assert project.harness("verify", str(run)).returncode == 0
    assert coreutils(run).returncode == 0
    # forge an observation after sealing (root can chmod it writable): refused, no addendum
    obs = run / "observations" / "generation.json"
    original = obs.read_bytes()
    obs.chmod(0o644)
    doc = json.loads(original)
    doc["fields"]["compilation.custom_ops"] = json.loads(
        (run / "observations" / "startup.json").read_text())["fields"]["compilation.custom_ops"]
    obs.write_text(json.dumps(doc))
    r = project.harness("refinalize", str(run))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "REFINALIZE-NOT-INTACT" in r.stderr and "generation.json: changed" in r.stderr
    assert "accepted" not in r.stdout
    assert len(os.listdir(run / "addenda")) == 1, "no addendum vouches for forged evidence"
    # put the bytes back, then swap addenda/ for a symlink to a folder outside the run
    obs.write_bytes(original)
    obs.chmod(0o444)
    assert verify_folder(run) == []
    elsewhere = tmp_path / "elsewhere"
    run.chmod(0o755)
    (run / "addenda").rename(elsewhere)
    os.symlink(elsewhere, run / "addenda")
    run.chmod(0o555)
    r = project.harness("refinalize", str(run))
    assert r.returncode == 1 and "REFINALIZE-NOT-INTACT" in r.stderr, r.stderr
    assert len(os.listdir(elsewhere)) == 1, "nothing was written through the symlink"
    assert project.harness("verify", str(run)).returncode == 1
