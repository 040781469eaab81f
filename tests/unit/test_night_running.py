"""One answer to "does this night run": `harness status` and `harness ls --nights` both ask
holder.is_running, whether the runs dir is given relative, through a symlink, or the
night lock's holder is stale, of another night or hostile."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from harness.driver.night.nightlock import NightLock
from harness.measure.lock import holder_path
from harness.measure.nightfolder.holder import (
    describe,
    is_running,
    night_lock_path,
    night_running,
    read_night_holder,
)
from harness.measure.nightfolder.journal import Journal
from harness.readers import statuslines
from tests.inprocess import invoke

NIGHT = "kv-20261203T000000Z"
RUN = "echo-20261203T000100Z-0d0d0d0d"
ME = psutil.Process()


def live(night_dir: object, **more: object) -> dict:
    return {"alive": True, "pid": ME.pid, "night_dir": night_dir, **more}


# -- the pure decision ----------------------------------------------------------------------

LINKS = {"/r/link/nights/n": "/r/real/nights/n", "link/nights/n": "/r/real/nights/n"}


def real(path: str) -> str:
    """A resolver with a symlinked runs dir (/r/link -> /r/real) and cwd /r, no disk."""
    return LINKS.get(path, path)


@pytest.mark.parametrize(("night", "holder", "want"), [
    ("/r/real/nights/n", live("/r/real/nights/n"), True),
    ("link/nights/n", live("/r/real/nights/n"), True),  # runs dir given relative
    ("/r/link/nights/n", live("/r/real/nights/n"), True),  # through a symlink
    ("/r/real/nights/n", live("/r/link/nights/n"), True),  # the holder named the link
    ("/r/real/nights/n", live("/r/real/nights/other"), False),  # another night's holder
    ("/r/real/nights/n", {**live("/r/real/nights/n"), "alive": False}, False),  # stale
    ("/r/real/nights/n", None, False),
    ("/r/real/nights/n", {"unreadable": "not JSON", "alive": False}, False),
])
def test_the_holder_names_the_night_compared_resolved(night: str, holder: dict | None,
                                                      want: bool) -> None:
    assert is_running(night, holder, False, real) is want
    assert is_running(night, holder, True, real)  # a live run of its journal: always


@pytest.mark.parametrize("holder", [
    live(["/r/real/nights/n"]), live(7), live(None), live({"a": 1}),
    live("real/nights/n"),  # relative: of the holder's cwd, which is not known here
    {**live("/r/real/nights/n"), "alive": "yes"}, {**live("/r/real/nights/n"), "alive": 1},
    {"night_dir": "/r/real/nights/n"},
])
def test_a_holder_of_the_wrong_shape_names_no_night(holder: dict) -> None:
    assert not is_running("/r/real/nights/n", holder, False, real)


def test_the_resolving_is_the_real_one_on_disk(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    night = tmp_path / "real" / "nights" / "n"
    night.mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.chdir(tmp_path)
    for named in (night, tmp_path / "link" / "nights" / "n", tmp_path / "link/../real/nights/n"):
        assert is_running("link/nights/n", live(str(named)), False)
        assert is_running(str(night), live(str(named)), False)
    assert not is_running("link/nights/n", live(str(tmp_path / "real" / "nights")), False)


# -- the holder record as the night lock leaves it --------------------------------------------

@pytest.fixture
def lock(tmp_path: Path) -> Path:
    return tmp_path / "gpu.lock"


def write_record(lock: Path, doc: object) -> None:
    holder_path(night_lock_path(lock)).write_bytes(
        doc if isinstance(doc, bytes) else json.dumps(doc).encode())


def test_a_holder_whose_process_is_gone_is_stale(tmp_path: Path, lock: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", ""])
    created = psutil.Process(gone.pid).create_time()
    gone.wait()
    write_record(lock, {"pid": gone.pid, "pid_create_time": created, "night_dir": str(tmp_path)})
    assert not night_running(tmp_path, read_night_holder(lock), socket.gethostname())
    write_record(lock, {"pid": ME.pid, "pid_create_time": ME.create_time(),
                        "night_dir": str(tmp_path)})
    assert night_running(tmp_path, read_night_holder(lock), socket.gethostname())


def test_a_deep_night_folder_is_named_whole(tmp_path: Path, lock: Path) -> None:
    """A holder's path is compared with the folder, so it is kept whole (the shown line is
    clipped): a runs dir 300 characters deep still runs its night."""
    night = tmp_path.joinpath(*["d" * 60] * 5, "nights", "kv")
    night.mkdir(parents=True)
    write_record(lock, {"pid": ME.pid, "pid_create_time": ME.create_time(),
                        "night_dir": str(night)})
    holder = read_night_holder(lock)
    assert night_running(night, holder, socket.gethostname())
    assert len(describe(holder)) < 400


@pytest.mark.parametrize("record", [
    {"night_dir": "{night}\n"}, {"night_dir": "{night}\x00"}, {"night_dir": ["{night}"]},
    {"night_dir": "nights/kv"}, {"alive": True, "night_dir": "{night}", "pid": 2**31 + 5},
    b"\xff\xfe", b"[" * 30000, b"1e999",
])
def test_hostile_holder_records_name_no_night(tmp_path: Path, lock: Path,
                                              record: dict | bytes) -> None:
    night = tmp_path / "nights" / "kv"
    night.mkdir(parents=True)
    if isinstance(record, dict):  # a live pid: only the rest of the record is hostile
        record = {"pid": ME.pid, "pid_create_time": ME.create_time(), **{
            k: v.replace("{night}", str(night)) if isinstance(v, str) else v
            for k, v in record.items()}}
    write_record(lock, record)
    assert not night_running(night, read_night_holder(lock), socket.gethostname())


# -- both commands, one night folder ----------------------------------------------------------

@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """RUNS (real/) with one night whose run is planned, reached also as gpu-runs/ (a
    symlink); cwd is tmp_path, so `--runs-dir gpu-runs` is relative."""
    night = tmp_path / "real" / "nights" / NIGHT
    night.mkdir(parents=True)
    Journal.create(night / "journal.sqlite", campaign="kv", campaign_file="kv.yaml",
                   plan=[("echo", 0)]).close()
    (tmp_path / "gpu-runs").symlink_to("real")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HARNESS_RUNS_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(statuslines, "containers", lambda: ([], None))  # no Docker asked
    monkeypatch.setattr(statuslines, "list_timers", lambda: ([], None))  # nor systemd
    return tmp_path / "real"


def answers(runs_dir: str, lock: Path) -> tuple[set[bool], str]:
    """What `status` says of NIGHT (every line it shows it on) and `ls --nights`'s state."""
    code, out = invoke("status", "--json", "--runs-dir", runs_dir, "--lock", str(lock))
    assert code == 0, out
    state = json.loads(out)
    shown = [n for n in [state["night"], *state["nights"]] if n and n["dir"].endswith(NIGHT)]
    assert len([n for n in state["nights"] if n["dir"].endswith(NIGHT)]) == 1  # listed once
    code, out = invoke("ls", "--nights", "--json", "--runs-dir", runs_dir, "--lock", str(lock))
    assert code == 0, out
    (row,) = json.loads(out)
    return {n["active"] for n in shown}, row["state"]


@pytest.mark.parametrize(("runs_dir", "named"), [
    ("gpu-runs", "real"), ("real", "gpu-runs"), ("real", "real"), ("./gpu-runs/", "gpu-runs"),
])
def test_status_and_ls_nights_agree_on_a_night_the_lock_names(
        runs: Path, lock: Path, runs_dir: str, named: str) -> None:
    held = NightLock(lock, kind="night", campaign="kv")
    held.acquire(timeout=5)
    try:
        held.describe_as(night_dir=str(runs.parent / named / "nights" / NIGHT))
        assert answers(runs_dir, lock) == ({True}, "running")
    finally:
        held.release()
    assert answers(runs_dir, lock) == ({False}, "interrupted")


def test_status_and_ls_nights_agree_on_a_night_a_live_run_writes(runs: Path,
                                                                  lock: Path) -> None:
    """No night lock names it (a night of another GPU lock): its running run's launcher."""
    with Journal.open(runs / "nights" / NIGHT / "journal.sqlite") as j:
        j.mark_running(j.rows()[0], RUN, "/elsewhere/" + RUN)  # found by its name only
    (runs / RUN).mkdir()
    owner = {"pid": ME.pid, "create_time": ME.create_time(), "host": socket.gethostname()}
    (runs / RUN / "harness.json").write_text(json.dumps(owner))
    assert answers("gpu-runs", lock) == ({True}, "running")
    (runs / "nights" / NIGHT / "ended.json").write_text("{}")  # a rerun into an ended night
    assert answers("gpu-runs", lock) == ({True}, "running")
    os.remove(runs / RUN / "harness.json")
    assert answers("gpu-runs", lock) == ({False}, "done")
