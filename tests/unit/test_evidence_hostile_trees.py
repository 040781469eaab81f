"""Variants found by a red-team pass over evidence trees (each failed before its fix)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from harness.base.errors import Refused
from harness.base.tree import path_problem, walk
from harness.judge.finalize.observed import SealedReader, judge_run
from harness.measure.runfolder.layout import REMOVED
from harness.measure.runfolder.manifest import (
    MAX_WORKLOAD_FILE,
    Unsealable,
    make_read_only,
    verify_folder,
    write_manifest,
)
from harness.pipeline import clean as cleaner
from harness.pipeline.recover import seal_orphans


def observation(phase: str, ops: list[str]) -> dict:
    return {"schema": "harness.observation/v1", "phase": phase,
            "process": {"role": "EngineCore", "rank": 0, "pid": 659},
            "source": {"seal": "sha256:s", "engine": "vllm@x", "image": "sha256:i"},
            "complete": True, "fields": {"model.x": 1, "compilation.custom_ops": ops}}


def sealed_run(tmp_path: Path, generation_ops: list[str]) -> Path:
    run = tmp_path / "runs" / "r1"
    (run / "observations").mkdir(parents=True)
    (run / "observations" / "startup.json").write_text(
        json.dumps(observation("startup", ["a"])))
    (run / "observations" / "generation.json").write_text(
        json.dumps(observation("generation", generation_ops)))
    (run / "run.json").write_text(json.dumps({
        "schema": "harness.run/v1", "run_id": "r1", "status": "refused",
        "seal": "sha256:s", "image": {"name": "img", "id": "sha256:i"}}))
    write_manifest(run)
    make_read_only(run)
    return run


def test_a_sparse_huge_workload_file_is_removed_unhashed_and_sealing_stays_fast(tmp_path):
    run = tmp_path / "run"
    (run / "observations").mkdir(parents=True)
    (run / "run.json").write_text("{}")
    with open(run / "observations" / "big", "wb") as f:
        f.truncate(15 * 1024**4)  # 15 TiB, no blocks: one `truncate` for the workload
    with pytest.raises(Unsealable, match="over the"):
        write_manifest(run)  # refused by construction, without reading it
    t0 = time.monotonic()
    reasons = cleaner.clean(run)
    write_manifest(run)
    assert time.monotonic() - t0 < 10
    assert [r.rule for r in reasons] == ["EVIDENCE-TOO-BIG"]
    record = json.loads((run / REMOVED).read_text())
    assert record[0]["path"] == "observations/big" and record[0]["why"] == "too-big"
    assert record[0]["size"] == 15 * 1024**4 and "sha256" not in record[0]
    assert verify_folder(run) == []


def test_a_big_file_the_harness_wrote_itself_is_sealed_whatever_its_size(tmp_path):
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    with open(run / "logs" / "stdout.log", "wb") as f:
        f.truncate(MAX_WORKLOAD_FILE + 1)  # the size rule is for the workload's folder only
    assert cleaner.plan(walk(run)) == []


def test_recovery_of_a_folder_holding_a_sparse_trap_does_not_stall_the_next_run(tmp_path):
    runs = tmp_path / "runs"
    cut = runs / "cut-1"
    (cut / "observations").mkdir(parents=True)
    with open(cut / "observations" / "trap", "wb") as f:
        f.truncate(15 * 1024**4)
    (cut / "harness.json").write_text(json.dumps(
        {"pid": 2**22 + 7, "create_time": 1.0, "host": os.uname().nodename, "run_id": "cut-1"}))
    t0 = time.monotonic()
    assert seal_orphans(runs) == [cut]
    assert time.monotonic() - t0 < 10
    assert "EVIDENCE-TOO-BIG" in json.loads((cut / "run.json").read_text())["rules"]
    assert verify_folder(cut) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give files away (as a workload)")
def test_sealing_takes_ownership_so_another_host_user_cannot_unseal(tmp_path):
    run = tmp_path / "run"
    (run / "observations").mkdir(parents=True)
    (run / "observations" / "startup.json").write_text("{}")
    nobody = 65534
    os.chown(run / "observations", nobody, nobody)  # what a root workload can do
    os.chown(run / "observations" / "startup.json", nobody, nobody)
    write_manifest(run)
    make_read_only(run)
    for p in (run / "observations", run / "observations" / "startup.json"):
        st = p.stat()
        assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid()), p
    r = subprocess.run(["runuser", "-u", "nobody", "--", "chmod", "u+w",
                        str(run / "observations" / "startup.json")], capture_output=True)
    assert r.returncode != 0, "nobody could make a sealed file writable again"


def test_refinalize_judges_only_the_bytes_the_seal_vouches_for(tmp_path):
    """A file swapped between `verify` and the reading is never judged."""
    run = sealed_run(tmp_path, ["a", "b"])  # sealed: refused (custom_ops differ)
    reader = SealedReader(run)
    target = run / "observations" / "generation.json"
    os.chmod(target.parent, 0o755)
    target.unlink()  # swapped after verify: now the same as start-up (would be accepted)
    target.write_text(json.dumps(observation("generation", ["a"])))
    with pytest.raises(Refused) as e:
        judge_run(run, sealed=reader)
    assert e.value.rule == "REFINALIZE-NOT-INTACT"


def test_the_sealed_reader_judges_a_sealed_run_as_the_plain_reader_does(tmp_path):
    run = sealed_run(tmp_path, ["a", "b"])
    plain = judge_run(run)
    sealed = judge_run(run, sealed=SealedReader(run))
    assert plain["verdict"] == sealed["verdict"] == "refused"
    assert plain["differences"] == sealed["differences"]


def test_a_file_named_dash_is_never_sealable():
    """`sha256sum -c` reads standard input for a line naming "-"."""
    assert path_problem("-") is not None
    assert path_problem("observations/-") is None  # only the bare name is special


def flood(run: Path, n: int) -> None:
    (run / "observations" / "d").mkdir(parents=True)
    for i in range(n):
        (run / "observations" / "d" / f"f{i}").write_bytes(b"")
    (run / "run.json").write_text("{}")


def test_a_flood_of_workload_files_is_removed_whole_and_sealing_stays_bounded(
        tmp_path, monkeypatch):
    monkeypatch.setattr("harness.measure.runfolder.manifest.MAX_ENTRIES", 50)
    monkeypatch.setattr("harness.pipeline.clean.MAX_ENTRIES", 50)
    run = tmp_path / "run"
    flood(run, 200)
    with pytest.raises(Unsealable, match="more than 50 entries"):
        write_manifest(run)  # by construction: never a seal verify could not read
    reasons = cleaner.clean(run)
    assert [r.rule for r in reasons] == ["EVIDENCE-TOO-MANY"]
    assert not (run / "observations").exists()
    write_manifest(run)
    assert verify_folder(run) == []
    record = json.loads((run / REMOVED).read_text())
    assert record == [{"path": "observations", "kind": "dir", "why": "too-many",
                       "detail": record[0]["detail"]}]
    again = cleaner.earlier_reasons(run)  # a cut-off second pass keeps the refusal
    assert [r.rule for r in again] == ["EVIDENCE-TOO-MANY"]


def test_verify_of_a_tree_with_too_many_entries_is_one_problem_not_a_stall(
        tmp_path, monkeypatch):
    run = tmp_path / "run"
    flood(run, 30)
    write_manifest(run)
    monkeypatch.setattr("harness.measure.runfolder.manifest.MAX_ENTRIES", 10)
    assert [p.kind for p in verify_folder(run)] == ["too-many"]


def test_a_walk_with_a_bound_stops_at_it(tmp_path):
    from harness.base.tree import TooMany

    flood(tmp_path, 30)
    assert len(walk(tmp_path, 100)) == 33  # 2 folders, 30 files, run.json
    with pytest.raises(TooMany):
        walk(tmp_path, 20)
