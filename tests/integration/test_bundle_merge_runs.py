"""Real runs from `harness run`, sealed by two "hosts" (two runs folders), each exported
as a bundle, then merged into one night bundle that verifies with the harness and with the
coreutils recipe of docs/bundles.md; a tampered input refuses the merge, and `bundle
collect` brings the runs of a drop home, once, picking up a late bundle later."""

from __future__ import annotations

import json
import re
import subprocess
import tarfile
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "bundles.md"


def recipe() -> str:
    match = re.search(r"<!-- bundle-doc-test: coreutils -->\n```sh\n(.*?)```", DOC.read_text(),
                      re.DOTALL)
    assert match
    return match.group(1)


def one_run(project, host: str) -> Path:
    camp = project.root / "campaigns" / "merge.yaml"
    runs = project.root / host
    r = project.harness("run", str(camp), "--control", "hello", "--runs-dir", str(runs))
    assert r.returncode == 0, r.stdout + r.stderr
    [run] = [p for p in runs.iterdir() if (p / "run.json").is_file()]
    return run


def test_two_hosts_runs_merge_into_one_bundle_that_verifies(project, cleanup_containers,
                                                           tmp_path):
    project.control("hello", 'command: [python3, -c, "print(\'hello\')"]\n')
    project.campaign("merge", ["hello"])
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    drop = tmp_path / "drop" / "bundles"
    drop.mkdir(parents=True)
    exported = []
    for host in ("host1", "host2"):
        run = one_run(project, host)
        out = drop / f"{run.name}.tar.gz"
        r = project.harness("bundle", "export", str(run), "-o", str(out))
        assert r.returncode == 0, r.stdout + r.stderr
        exported.append(out)

    night = tmp_path / "evidence.tar.gz"
    r = project.harness("bundle", "merge", *map(str, exported), "-o", str(night))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 run(s)" in r.stdout
    v = project.harness("bundle", "verify", str(night), "--json")
    assert v.returncode == 0, v.stdout + v.stderr
    assert len(json.loads(v.stdout)["runs"]) == 2
    with tarfile.open(night) as tar:
        names = tar.getnames()
    assert {f"data/{p.name.removesuffix('.tar.gz')}/SHA256SUMS" for p in exported} <= {
        n.split("/", 1)[1] for n in names if "/" in n}
    by_hand = subprocess.run(["bash", "-c", recipe()], cwd=tmp_path, capture_output=True,
                             text=True)
    assert by_hand.returncode == 0 and "bundle verified" in by_hand.stdout, by_hand.stderr

    # a tampered input: one log byte changed, the archive repacked by a forger
    work = tmp_path / "forge"
    work.mkdir()
    with tarfile.open(exported[1]) as tar:
        tar.extractall(work, filter="fully_trusted")
    [top] = work.iterdir()
    [log] = (top / "data").glob("*/logs/stdout.log")
    log.chmod(0o644)
    log.write_text("HELLO\n")
    tampered = tmp_path / "tampered.tar.gz"
    with tarfile.open(tampered, "w:gz") as tar:
        tar.add(top, arcname=top.name)
    refused = project.harness("bundle", "merge", str(exported[0]), str(tampered),
                              "-o", str(tmp_path / "no.tar.gz"))
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert str(tampered) in refused.stderr and "stdout.log" in refused.stderr
    assert not (tmp_path / "no.tar.gz").exists()

    # the controller collects the drop; a later collect takes only what is new
    late = exported.pop()
    hidden = tmp_path / late.name
    late.rename(hidden)
    home = tmp_path / "RUNS"
    c = project.harness("bundle", "collect", str(drop.parent), "--runs-dir", str(home))
    assert c.returncode == 0, c.stdout + c.stderr
    hidden.rename(late)
    c = project.harness("bundle", "collect", str(drop.parent), "--runs-dir", str(home))
    assert c.returncode == 0 and "collected 1 new bundle(s)" in c.stdout, c.stdout
    collected = sorted(p.name for p in home.iterdir() if p.is_dir())
    assert collected == sorted(p.name.removesuffix(".tar.gz") for p in [*exported, late])
    for run in home.iterdir():
        if run.is_dir():
            ok = project.harness("verify", str(run))
            assert ok.returncode == 0, ok.stdout + ok.stderr
