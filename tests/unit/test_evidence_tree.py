"""Cleaning and sealing hostile evidence trees, and recovering them, without Docker.

Each test builds what a workload could leave in a run folder (symlinks to host files,
FIFOs, unsealable names, deep nesting) and checks the one cleaner, `write_manifest`,
`make_read_only` and recovery: nothing is followed, nothing blocks, nothing is lost
without a record, and what is sealed verifies under both `harness verify` and coreutils.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from harness.base.tree import Entry, NotRegular, chmod_beneath, name_problem, remove_beneath
from harness.measure.runfolder.layout import REMOVED, SUMS
from harness.measure.runfolder.manifest import (
    Unsealable,
    make_read_only,
    verify_folder,
    write_manifest,
)
from harness.pipeline import clean as cleaner
from harness.pipeline.recover import seal_orphans

BAD_NAMES = ["a\rb", "a\nb", "a\u0085b", "a\u2028b", "a\\b", "a\u202eb"]


def coreutils_ok(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["sha256sum", "-c", "--strict", SUMS], cwd=folder,
                          capture_output=True)


def host_file(tmp_path: Path) -> Path:
    host = tmp_path / "host-secret"
    host.write_text("not yours")
    host.chmod(0o600)
    return host


def hostile_run(tmp_path: Path, host: Path) -> Path:
    run = tmp_path / "run"
    obs = run / "observations"
    obs.mkdir(parents=True)
    (run / "run.json").write_text('{"status": "accepted"}\n')
    (obs / "ok.json").write_text("{}")
    os.symlink(host, obs / "link")
    os.mkfifo(obs / "fifo")
    raw = os.fsencode(obs) + b"/bad\xffdir"
    os.mkdir(raw)
    with open(raw + b"/inner.txt", "wb") as f:
        f.write(b"kept as a digest")
    for name in BAD_NAMES:
        (obs / name).write_text(name)
    (obs / "empty").mkdir()
    deep = obs / "deep"
    for _ in range(100):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "f").write_text("x")
    return run


# ---- the decision, pure --------------------------------------------------------------------

def entry(rel: str, kind: str = "file", problem: str | None = None, **kw) -> Entry:
    return Entry(rel, kind, 1, 0o100644, problem, **kw)


def test_plan_names_every_entry_and_removes_each_tree_once():
    entries = [entry("a", "dir"), entry("a/ok"), entry("a/l", "symlink", target="/etc/x"),
               entry("b\n", "dir", "nl"), entry("b\n/x", problem="nl"),
               entry("b\n/s", "symlink", "nl"), entry("c", "fifo"),
               entry("deep", "dir", too_deep=True), entry("e", "dir")]
    got = [(r.entry.rel, r.why, r.top) for r in cleaner.plan(entries)]
    assert got == [("a/l", "not-regular", True), ("b\n", "bad-name", True),
                   ("b\n/x", "bad-name", False), ("b\n/s", "bad-name", False),
                   ("c", "not-regular", True), ("deep", "too-deep", True)]
    rules = [r.rule for r in cleaner.reasons(cleaner.plan(entries))]
    assert rules == ["EVIDENCE-NOT-REGULAR"] * 2 + ["EVIDENCE-BAD-NAME", "EVIDENCE-TOO-DEEP"]
    assert "b\\u000a: nl; removed (dir, with 2 entries below it)" in str(
        cleaner.reasons(cleaner.plan(entries))[2])


def test_reasons_are_capped_but_the_count_is_kept():
    many = [entry(f"f{i}", "fifo") for i in range(50)]
    rs = cleaner.reasons(cleaner.plan(many))
    assert len(rs) == cleaner.MAX_REASONS + 1
    assert "and 30 more" in rs[-1].detail


# ---- the cleaner on a real tree ------------------------------------------------------------

def test_clean_then_seal_verifies_in_both_tools_and_never_touches_the_host(tmp_path):
    host = host_file(tmp_path)
    run = hostile_run(tmp_path, host)
    reasons = cleaner.clean(run)
    rules = {r.rule for r in reasons}
    assert rules == {"EVIDENCE-NOT-REGULAR", "EVIDENCE-BAD-NAME", "EVIDENCE-TOO-DEEP"}
    record = json.loads((run / REMOVED).read_text())
    by_path = {r["path"]: r for r in record}
    assert by_path["observations/link"]["target"] == str(host)
    assert by_path["observations/fifo"]["kind"] == "fifo"
    inner = by_path["observations/bad\\xffdir/inner.txt"]
    assert inner["why"] == "bad-name" and inner["size"] == 16
    assert inner["sha256"] == hashlib.sha256(b"kept as a digest").hexdigest()
    for name in ("a\\u000db", "a\\u000ab", "a\\u0085b", "a\\u2028b", "a\\\\b", "a\\u202eb"):
        assert by_path[f"observations/{name}"]["sha256"], name
    assert by_path["observations/empty"]["why"] == "empty-folder"
    assert all(r["path"].isascii() and "\n" not in r["path"] for r in record)
    write_manifest(run)
    make_read_only(run)
    assert verify_folder(run) == []
    assert coreutils_ok(run).returncode == 0
    sums = (run / SUMS).read_text()
    assert "host-secret" not in sums and "link" not in sums
    assert stat.S_IMODE(host.stat().st_mode) == 0o600
    assert sorted(p.name for p in (run / "observations").iterdir()) == ["ok.json"]


def test_a_clean_tree_is_left_alone_and_no_record_is_written(tmp_path):
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "logs" / "x.log").write_text("x")
    (run / "observations").mkdir()  # empty: pruned, refuses nothing
    assert cleaner.clean(run) == []
    assert not (run / REMOVED).exists()
    assert not (run / "observations").exists()
    write_manifest(run)
    assert verify_folder(run) == []


def test_a_second_pass_keeps_the_first_pass_reasons(tmp_path):
    run = tmp_path / "run"
    (run / "observations").mkdir(parents=True)
    (run / "observations" / "keep").write_text("x")
    os.mkfifo(run / "observations" / "p")
    first = cleaner.clean(run)
    second = cleaner.clean(run)  # a pass cut off before sealing, then recovery
    assert [r.rule for r in first] == ["EVIDENCE-NOT-REGULAR"]
    assert [r.rule for r in second] == ["EVIDENCE-NOT-REGULAR"]
    assert "earlier pass" in second[0].detail


# ---- sealing refuses what it cannot vouch for, by construction -----------------------------

@pytest.mark.parametrize("plant", ["symlink", "fifo", "bad-name", "empty-folder", "deep"])
def test_write_manifest_refuses_an_unsealable_tree(tmp_path, plant):
    run = tmp_path / "run"
    run.mkdir()
    (run / "a").write_text("a")
    if plant == "symlink":
        os.symlink("/etc/passwd", run / "l")
    elif plant == "fifo":
        os.mkfifo(run / "p")
    elif plant == "bad-name":
        (run / "x\u2028y").write_text("x")
    elif plant == "empty-folder":
        (run / "e").mkdir()
    else:
        d = run
        for _ in range(80):
            d = d / "d"
        d.mkdir(parents=True)
        (d / "f").write_text("x")
    with pytest.raises(Unsealable, match="cannot seal"):
        write_manifest(run)
    assert not (run / SUMS).exists()


def test_make_read_only_never_chmods_through_a_symlink(tmp_path):
    host = host_file(tmp_path)
    run = tmp_path / "run"
    (run / "sub").mkdir(parents=True)
    (run / "sub" / "f").write_text("x")
    (run / "sub" / "f").chmod(0o4755)  # a setuid bit from the workload is dropped too
    os.symlink(host, run / "sub" / "l")
    make_read_only(run)
    assert stat.S_IMODE(host.stat().st_mode) == 0o600
    assert stat.S_IMODE((run / "sub" / "f").stat().st_mode) == 0o444
    assert stat.S_IMODE((run / "sub").stat().st_mode) == 0o555
    assert stat.S_IMODE(run.stat().st_mode) == 0o555


def test_tree_helpers_follow_nothing(tmp_path):
    host = host_file(tmp_path)
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(host, root / "l")
    os.symlink(tmp_path, root / "dirlink")
    with pytest.raises(NotRegular):
        chmod_beneath(root, "l", 0o777)
    with pytest.raises(NotRegular):
        chmod_beneath(root, "dirlink/host-secret", 0o777)
    remove_beneath(root, "dirlink")  # the link goes; what it points to stays
    remove_beneath(root, "l")
    assert host.exists() and stat.S_IMODE(host.stat().st_mode) == 0o600
    assert list(root.iterdir()) == []


def test_remove_beneath_takes_a_very_deep_tree_without_recursion(tmp_path):
    root = tmp_path / "root"
    chain = os.fsencode(root) + b"/t"
    os.makedirs(chain)
    fd = os.open(chain, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(3000):  # deeper than Python's recursion limit and PATH_MAX
        os.mkdir("d", dir_fd=fd)
        nxt = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    os.mkfifo("p", dir_fd=fd)
    os.close(fd)
    remove_beneath(root, "t")
    assert list(root.iterdir()) == []


# ---- recovery of a hostile runs folder -----------------------------------------------------

def dead_owner(run: Path, **about) -> None:
    p = subprocess.Popen(["true"])
    p.wait()
    (run / "harness.json").write_text(json.dumps({
        "schema": "harness.owner/v1", "pid": p.pid, "create_time": 1.0,
        "host": socket.gethostname(), "run_id": run.name, **about}))


def test_seal_orphans_never_hangs_or_follows_on_a_hostile_runs_folder(tmp_path):
    host = host_file(tmp_path)
    runs = tmp_path / "runs"
    runs.mkdir()
    victim = hostile_run(tmp_path / "v", host)
    (victim / "run.json").unlink()
    victim = victim.rename(runs / "victim")
    dead_owner(victim)
    decoy = tmp_path / "decoy"  # a real orphan outside, reached only through a symlink
    decoy.mkdir()
    dead_owner(decoy)
    os.symlink(decoy, runs / "link-to-orphan")
    os.mkfifo(runs / "fifo")
    (runs / "file").write_text("x")
    for name, make in (("fifo-owner", lambda p: os.mkfifo(p)),
                       ("link-owner", lambda p: os.symlink(decoy / "harness.json", p)),
                       ("huge-owner", lambda p: p.write_bytes(b" " * (2 << 20))),
                       ("deep-owner", lambda p: p.write_text("[" * 100000)),
                       ("odd-owner", lambda p: p.write_text('{"host": [1], "pid": "x"}'))):
        d = runs / name
        d.mkdir()
        make(d / "harness.json")
    code = ("import sys; from pathlib import Path; from harness.pipeline.recover import "
            "seal_orphans; print([p.name for p in seal_orphans(Path(sys.argv[1]))])")
    r = subprocess.run([sys.executable, "-c", code, str(runs)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "['victim']"
    assert not (decoy / SUMS).exists(), "a symlinked folder is not ours to seal"
    rec = json.loads((victim / "run.json").read_text())
    assert rec["status"] == "interrupted"
    assert {"RUN-INTERRUPTED", "EVIDENCE-NOT-REGULAR", "EVIDENCE-BAD-NAME",
            "EVIDENCE-TOO-DEEP"} <= set(rec["rules"])
    assert stat.S_IMODE(host.stat().st_mode) == 0o600
    assert "host-secret" not in (victim / SUMS).read_text()
    assert verify_folder(victim) == []
    assert coreutils_ok(victim).returncode == 0
    assert seal_orphans(runs) == []  # idempotent, and the odd folders stay untouched


def test_one_folder_that_cannot_be_sealed_does_not_stop_the_others(tmp_path, monkeypatch):
    from harness.pipeline import recover

    runs = tmp_path / "runs"
    for d in ("a-bad", "b-good"):
        (runs / d).mkdir(parents=True)
        dead_owner(runs / d)
        (runs / d / "f").write_text("x")
    real_clean = recover.clean

    def failing(run_dir):
        if run_dir.name == "a-bad":
            raise OSError(5, "Input/output error")
        return real_clean(run_dir)

    monkeypatch.setattr(recover, "clean", failing)
    errors = []
    sealed = seal_orphans(runs, on_error=lambda d, e: errors.append((d.name, e)))
    assert [p.name for p in sealed] == ["b-good"]
    assert errors == [("a-bad", "OSError: [Errno 5] Input/output error")]
    assert verify_folder(runs / "b-good") == []
    assert not (runs / "a-bad" / SUMS).exists()


def test_only_folders_the_workload_left_empty_are_listed_when_pruned(tmp_path):
    run = tmp_path / "run"
    (run / "observations" / "made-empty").mkdir(parents=True)
    (run / "observations" / "nested" / "empty").mkdir(parents=True)
    (run / "run.json").write_text("{}")
    os.mkfifo(run / "observations" / "made-empty" / "p")
    assert [r.rule for r in cleaner.clean(run)] == ["EVIDENCE-NOT-REGULAR"]
    record = json.loads((run / REMOVED).read_text())
    assert sorted((r["path"], r["why"]) for r in record) == [
        ("observations/made-empty/p", "not-regular"),
        ("observations/nested", "empty-folder"), ("observations/nested/empty", "empty-folder")]
    assert sorted(os.listdir(run)) == [
        REMOVED, "run.json"]


def test_a_path_too_long_for_coreutils_is_removed_not_sealed(tmp_path):
    run = tmp_path / "run"
    d = run / "observations"
    for _ in range(8):
        d = d / ("x" * 200)  # 8 x 200 bytes: past MAX_PATH_BYTES, well within MAX_DEPTH
    d.mkdir(parents=True)
    (d / "f").write_text("x")
    (run / "run.json").write_text("{}")
    assert {r.rule for r in cleaner.clean(run)} == {"EVIDENCE-TOO-DEEP"}
    write_manifest(run)
    assert verify_folder(run) == [] and coreutils_ok(run).returncode == 0


def test_every_ascii_character_is_judged_as_by_its_unicode_category() -> None:
    """name_problem's ASCII shortcut agrees with the category rule on every character: a
    control character (Cc), '/' and a backslash are refused anywhere in a name; any other
    ASCII character, space included, is allowed."""
    import unicodedata

    for code in range(128):
        ch = chr(code)
        refused = unicodedata.category(ch) == "Cc" or ch in "/\\"
        for name in (ch, f"a{ch}", f"{ch}b", f"run-{ch}-1.json"):
            if name in (".", ".."):
                continue
            assert (name_problem(name) is not None) == refused, (code, name)
