"""The Slurm shell: sbatch's answer and its failures (messages from 22.05), and the jobcomp
file followed from poll to poll."""

from __future__ import annotations

import os

import pytest

from harness.base.errors import InvalidInput
from harness.measure.slurm import calls


@pytest.mark.parametrize("out,job_id", [("123\n", "123"), ("  77;cluster-a \n", "77")])
def test_parse_job_id(out: str, job_id: str) -> None:
    assert calls.parse_job_id(out) == job_id


@pytest.mark.parametrize("out", ["", "Submitted batch job 12", "12;", "12;a b", "-1", "1\n2",
                                 "1" * 13])
def test_parse_job_id_refuses_anything_else(out: str) -> None:
    with pytest.raises(InvalidInput, match="not a job id"):
        calls.parse_job_id(out)


REFUSED = [
    (1, "sbatch: error: invalid partition specified: nope\n"
        "sbatch: error: Batch job submission failed: Invalid partition name specified"),
    (1, "sbatch: error: Batch job submission failed: Requested node configuration is not "
        "available"),
    (1, "sbatch: error: Batch job submission failed: Invalid node name specified"),
    (1, "sbatch: error: Batch job submission failed: Requested time limit is invalid "
        "(missing or exceeds some limit)"),
    (255, "sbatch: error: Invalid --time specification"),
]
TRANSIENT = [
    (1, "sbatch: error: Batch job submission failed: Unable to contact slurm controller "
        "(connect failure)"),
    (1, "sbatch: error: s_p_parse_file: cannot stat file /etc/slurm/slurm.conf: No such file "
        "or directory, retrying in 1sec up to 60sec\nsbatch: fatal: Unable to process "
        "configuration file"),
    (1, "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation"),
    (1, "sbatch: error: Slurm temporarily unable to accept job, sleeping and retrying"),
    (1, "sbatch: error: something new\n"),  # unknown: the token lookup keeps it safe
    (-9, ""),
]


@pytest.mark.parametrize("rc,stderr", REFUSED)
def test_refused_submissions(rc: int, stderr: str) -> None:
    assert calls.classify(rc, stderr) == calls.SubmitAnswer.REJECTED


@pytest.mark.parametrize("rc,stderr", TRANSIENT)
def test_transient_submissions(rc: int, stderr: str) -> None:
    assert calls.classify(rc, stderr) == calls.SubmitAnswer.TRANSIENT


def _line(job_id: int, state: str = "COMPLETED", name: str = "n") -> str:
    return f"JobId={job_id} UserId=u(1) Name={name} JobState={state} NodeList=node1 " \
           f"ExitCode=0:0\n"


def test_the_first_read_keeps_the_newest_whole_lines(tmp_path, monkeypatch) -> None:
    path = tmp_path / "jobcomp.txt"
    path.write_text("".join(_line(i) for i in range(100)))
    monkeypatch.setattr(calls, "MAX_JOBCOMP_BYTES", 400)
    tail = calls.JobcompTail(path)
    parsed = tail.read()
    assert "99" in parsed.jobs and not parsed.skipped  # the bound's cut line is not parsed
    assert len(parsed.jobs) < 100 and tail.offset == path.stat().st_size


def test_a_tail_reads_only_whole_lines_appended_since(tmp_path, monkeypatch) -> None:
    """Each poll takes the lines appended since the last; a line still being written waits,
    and no line is parsed twice (a poll's skipped lines are its own)."""
    path = tmp_path / "jobcomp.txt"
    path.write_text(_line(1) + "garbage\n")
    tail = calls.JobcompTail(path)
    first = tail.read()
    assert set(first.jobs) == {"1"} and len(first.skipped) == 1
    seen: list[bytes] = []
    real = calls.query.parse_jobcomp
    monkeypatch.setattr(calls.query, "parse_jobcomp",
                        lambda text: seen.append(text) or real(text))
    whole, half = _line(2), _line(3, "TIMEOUT")
    with open(path, "a") as f:
        f.write(whole + half[:20])
    second = tail.read()
    assert set(second.jobs) == {"1", "2"} and second.skipped == []
    assert seen == [whole]
    with open(path, "a") as f:
        f.write(half[20:])
    third = tail.read()
    assert third.jobs["3"].state == "timeout" and seen[-1] == half
    assert tail.read().jobs.keys() == {"1", "2", "3"} and seen[-1] == ""  # nothing new


def test_a_requeued_job_keeps_its_newest_line(tmp_path) -> None:
    path = tmp_path / "jobcomp.txt"
    path.write_text(_line(4, "NODE_FAIL"))
    tail = calls.JobcompTail(path)
    tail.read()
    with open(path, "a") as f:
        f.write(_line(5) + _line(4, "COMPLETED"))
    jobs = tail.read().jobs
    assert jobs["4"].state == "done" and list(jobs) == ["5", "4"]


def test_a_rotated_file_is_read_again_from_its_newest_bound(tmp_path, monkeypatch) -> None:
    """logrotate renames the file and Slurm opens a new one: another inode, so the new file
    is read from its beginning (its newest bound), and what the old one said is gone."""
    path = tmp_path / "jobcomp.txt"
    path.write_text(_line(1) + _line(2))
    tail = calls.JobcompTail(path)
    tail.read()
    path.rename(tmp_path / "jobcomp.txt.1")
    path.write_text(_line(3) * 3)  # longer than the old file's offset: not a truncation
    assert set(tail.read().jobs) == {"3"}
    monkeypatch.setattr(calls, "MAX_JOBCOMP_BYTES", 300)
    path.rename(tmp_path / "jobcomp.txt.2")
    path.write_text("".join(_line(i) for i in range(10, 20)))
    jobs = tail.read().jobs
    assert "19" in jobs and "10" not in jobs and "3" not in jobs


def test_a_truncated_file_is_read_again_from_its_start(tmp_path) -> None:
    path = tmp_path / "jobcomp.txt"
    path.write_text(_line(1) + _line(2) + _line(3))
    tail = calls.JobcompTail(path)
    tail.read()
    with open(path, "r+") as f:  # copytruncate: the same inode, now shorter
        f.truncate(0)
        f.write(_line(7))
    assert set(tail.read().jobs) == {"7"} and tail.offset == path.stat().st_size


def test_a_line_that_never_ends_is_dropped_to_its_newline(tmp_path) -> None:
    """Another user may write the file: a line without end is waited for only while it could
    still be a line the parser reads; past that it is skipped, up to its newline, once."""
    path = tmp_path / "jobcomp.txt"
    path.write_text(_line(1) + "JobId=2 Name=" + "x" * (calls.MAX_TAIL + 1))
    tail = calls.JobcompTail(path)
    first = tail.read()
    assert set(first.jobs) == {"1"} and len(first.skipped) == 1
    with open(path, "a") as f:
        f.write("y" * 100)
    assert tail.read().skipped == []  # still the same line: dropped, not counted again
    with open(path, "a") as f:
        f.write(" JobState=COMPLETED\n" + _line(3))
    assert set(tail.read().jobs) == {"1", "3"}


def test_a_jobcomp_that_is_not_a_regular_file_is_an_error_never_a_wait(tmp_path) -> None:
    """A FIFO (or a link to one) put in the file's place would block a plain open forever;
    the poll reports it and goes on with squeue's answer alone."""
    path = tmp_path / "jobcomp.txt"
    path.write_text(_line(1))
    tail = calls.JobcompTail(path)
    tail.read()
    path.unlink()
    os.mkfifo(tmp_path / "fifo")
    path.symlink_to(tmp_path / "fifo")
    with pytest.raises(OSError, match="not a regular file"):
        tail.read()
    answer = calls.poll(["t"], [], jobcomp=tail, env={"PATH": str(tmp_path / "none")})
    assert any("jobcomp" in e and "not a regular file" in e for e in answer.errors)
    assert not answer.history_complete
    path.unlink()
    (tmp_path / "real.txt").write_text(_line(2))
    path.symlink_to(tmp_path / "real.txt")  # a link to a regular file: followed
    assert set(tail.read().jobs) == {"2"}


def test_a_tail_remembers_only_the_jobs_it_keeps(tmp_path) -> None:
    path = tmp_path / "jobcomp.txt"
    path.write_text(_line(1, name="mine") + _line(2, name="theirs"))
    tail = calls.JobcompTail(path, keep=lambda j: j.name == "mine")
    assert set(tail.read().jobs) == {"1"}


CONFIG = """\
Configuration data as of 2026-11-30T19:30:00
AccountingStorageType   = accounting_storage/none
JobCompHost             = localhost
JobCompLoc              = /var/spool/slurm/jobcomp.txt
JobCompType             = jobcomp/filetxt
"""


def test_history_sources_from_scontrol_show_config() -> None:
    found = calls.parse_config(CONFIG)
    assert found.use_sacct is False and str(found.jobcomp) == "/var/spool/slurm/jobcomp.txt"
    dbd = CONFIG.replace("accounting_storage/none", "accounting_storage/slurmdbd")
    assert calls.parse_config(dbd).use_sacct is True
    assert calls.parse_config(CONFIG.replace("jobcomp/filetxt", "jobcomp/none")).jobcomp is None
    assert calls.parse_config(CONFIG.replace("/var/spool", "spool")).jobcomp is None
    assert calls.parse_config("").use_sacct is False and calls.parse_config("").jobcomp is None
