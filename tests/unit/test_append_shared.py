"""The shared logs and indexes beside the run folders (the performance log, the rerun index,
collect's record) are appended by one function, `base.atomic.append_bytes`: a FIFO or a link
planted at one of their names is refused at once, never waited on, never written through."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.base.atomic import append_bytes
from harness.base.errors import InvalidInput
from harness.measure import perflog
from harness.measure.runfolder.reruns import INDEX, append_index
from harness.readers.bundle import collect

HANG_S = 5.0  # far past an open that fails at once; a FIFO's open would wait forever


def _outcome(call: Callable[[], object]) -> BaseException | None:
    """What `call` raised (None: it returned); fails the test when it is still waiting."""
    got: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            got.append(None)
        except BaseException as e:  # handed to the test to judge
            got.append(e)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(HANG_S)
    assert not worker.is_alive(), "the append waited on what was planted at its name"
    return got[0]


def test_the_header_is_written_once_and_lines_follow(tmp_path: Path) -> None:
    log = tmp_path / "log.csv"
    append_bytes(log, b"1,2\n", header=b"a,b\n")
    append_bytes(log, b"3,4\n", header=b"a,b\n")
    assert log.read_bytes() == b"a,b\n1,2\n3,4\n"


def test_a_planted_fifo_or_link_is_refused_at_once(tmp_path: Path) -> None:
    fifo, target, link = tmp_path / "fifo", tmp_path / "target", tmp_path / "link"
    os.mkfifo(fifo)
    target.write_bytes(b"")
    link.symlink_to(target)
    assert isinstance(_outcome(lambda: append_bytes(fifo, b"x\n")), OSError)
    assert isinstance(_outcome(lambda: append_bytes(link, b"x\n")), OSError)
    assert target.read_bytes() == b""


def _perflog(runs: Path) -> None:
    (runs / perflog.PERFLOG_DIR).mkdir()
    os.mkfifo(runs / perflog.PERFLOG_DIR / f"{perflog.file_stem('camp')}.jsonl")
    perflog.append(runs, "camp", [])


def _rerun_index(runs: Path) -> None:
    os.mkfifo(runs / INDEX)
    append_index(runs, {"run": "r1"})


def _collect_record(runs: Path) -> None:
    os.mkfifo(runs / collect.RECORD)
    collect._append(runs, collect.Arrival("b.tar", "0" * 64))


@pytest.mark.parametrize(("plant", "raised"), [(_perflog, OSError),
                                               (_rerun_index, InvalidInput),
                                               (_collect_record, InvalidInput)])
def test_each_shared_file_refuses_a_fifo_at_its_name(tmp_path: Path, plant, raised) -> None:
    """The performance log is appended as a just-sealed run finishes, under the GPU lock: a
    FIFO there hung the run (and the night) before."""
    assert isinstance(_outcome(lambda: plant(tmp_path)), raised)


def test_collect_reads_its_record_as_opened_never_a_fifo(tmp_path: Path) -> None:
    """Collect reads its record before appending: a FIFO there is refused, not waited on."""
    assert collect._read_record(tmp_path) == ""
    os.mkfifo(tmp_path / collect.RECORD)
    got = _outcome(lambda: collect._read_record(tmp_path))
    assert isinstance(got, InvalidInput) and "regular file" in got.message
