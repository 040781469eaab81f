"""A private Slurm cluster for the session (scripts/slurm-cluster.sh), torn down by pid.

Real Slurm, never a mock of it: two simulated hosts (node1, node2 on 127.0.0.2/3), two fake
GPUs each. Under CI=true a cluster that cannot be brought up fails the run; elsewhere it
skips (a laptop without root cannot install Slurm). Run with `make test-slurm`.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.measure.slurm import query
from harness.measure.slurm.job import SUBMIT_ENV
from harness.measure.slurm.query import ENDED, Job

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "slurm-cluster.sh"
NODES, GPUS = 2, 2


@dataclass
class Cluster:
    dir: Path
    conf: Path

    @property
    def env(self) -> dict[str, str]:
        """An operator's environment pointed at this cluster (TZ=UTC for the tests' own
        sbatch --deadline); the harness's Slurm calls keep only `job.submit_env` of it."""
        return {**os.environ, "TZ": SUBMIT_ENV["TZ"], "SLURM_CONF": str(self.conf)}

    def cli(self, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), capture_output=True, text=True, env=self.env,
                              timeout=timeout)

    def sbatch(self, argv: list[str]) -> str:
        """Submit; the job id from `--parsable` (`<id>` or `<id>;<cluster>`)."""
        r = self.cli(*argv)
        assert r.returncode == 0, f"sbatch failed: {r.stderr}"
        return r.stdout.strip().split(";", 1)[0]

    def jobs(self) -> dict[str, Job]:
        r = self.cli(*query.squeue_argv())
        assert r.returncode == 0, r.stderr
        return query.parse_squeue(r.stdout, strict=True).jobs

    def history(self) -> dict[str, Job]:
        """Finished jobs from jobcomp/filetxt (this cluster has no accounting database)."""
        return query.parse_jobcomp((self.dir / "jobcomp.txt").read_text(), strict=True).jobs

    def wait_ended(self, job_ids: list[str], timeout: float = 180) -> dict[str, Job]:
        """Poll squeue (ended jobs stay listed for MinJobAge) until every job has ended."""
        deadline = time.monotonic() + timeout
        while True:
            jobs = self.jobs()
            if all(i in jobs and jobs[i].state in ENDED for i in job_ids):
                return jobs
            if time.monotonic() > deadline:
                pytest.fail(f"jobs {job_ids} not ended after {timeout} s: "
                            f"{ {i: jobs.get(i) for i in job_ids} }")
            time.sleep(0.3)

    def wait_nodes_up(self, timeout: float = 60) -> None:
        """Every node back in service (ReturnToService=2 brings a DOWN node back when its
        slurmd answers), so a test that downed one leaves the cluster as it found it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = self.cli("sinfo", "-h", "-N", "-o", "%T").stdout.split()
            if len(states) == NODES and all(s in ("idle", "mixed", "allocated")
                                            for s in states):
                return
            time.sleep(0.3)
        pytest.fail(f"nodes not back in service after {timeout} s")

    def wait_running(self, job_id: str, timeout: float = 60) -> Job:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.jobs().get(job_id)
            if job is not None and job.state == query.JobState.RUNNING:
                return job
            time.sleep(0.2)
        pytest.fail(f"job {job_id} not running after {timeout} s")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory) -> Cluster:
    where = tmp_path_factory.mktemp("slurm")
    r = subprocess.run(["bash", str(SCRIPT), "up", str(where), str(NODES), str(GPUS)],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        message = f"a Slurm cluster could not be brought up:\n{r.stderr}"
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    line = r.stdout.strip().splitlines()[-1]
    assert line.startswith("export SLURM_CONF="), r.stdout
    yield Cluster(where, Path(line.split("=", 1)[1]))
    subprocess.run(["bash", str(SCRIPT), "down", str(where)], capture_output=True, timeout=60)
