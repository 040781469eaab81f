"""The Slurm shell's pure parts: sbatch's answer and its failures (messages from 22.05)."""

from __future__ import annotations

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


def test_read_jobcomp_keeps_the_newest_whole_lines(tmp_path, monkeypatch) -> None:
    path = tmp_path / "jobcomp.txt"
    path.write_text("".join(f"JobId={i} Name=n JobState=COMPLETED\n" for i in range(100)))
    monkeypatch.setattr(calls, "MAX_JOBCOMP_BYTES", 200)
    text = calls.read_jobcomp(path)
    assert text.endswith("JobId=99 Name=n JobState=COMPLETED\n")
    assert text.startswith("JobId=") and len(text) <= 200


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
