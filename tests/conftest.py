"""Shared fixtures. Docker tests use the real engine and fail (never skip) without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.measure.perflog import PERFLOG_DIR

REPO = Path(__file__).resolve().parent.parent
BUILD = REPO / "images" / "rehearsal" / "build.py"


@pytest.fixture(scope="session")
def docker_engine() -> None:
    """The engine must be there: on these machines it always is, so its absence is a failure."""
    r = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"the Docker engine is required for this test and is not reachable: "
                    f"{r.stderr.strip()}", pytrace=False)


@pytest.fixture(scope="session")
def rehearsal_image(docker_engine) -> str:
    """Build (or find, by its reproducible Id) the rehearsal image; fail loudly if it can't."""
    r = subprocess.run([sys.executable, str(BUILD)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"building the rehearsal image failed:\n{r.stderr}", pytrace=False)
    return r.stdout.strip().splitlines()[-1]


@dataclass
class Project:
    root: Path
    image_id: str

    @property
    def lock(self) -> Path:
        return self.root / "locks" / "gpu.lock"

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    def control(self, name: str, body: str) -> Path:
        p = self.root / "controls" / f"{name}.yaml"
        p.write_text(f"name: {name}\nimage: rehearsal\ndevice: cpu\n"
                     + textwrap.dedent(body))
        return p

    def campaign(self, name: str, controls: list[str], extra: str = "") -> Path:
        p = self.root / "campaigns" / f"{name}.yaml"
        p.write_text(f"name: {name}\nrow: TEST\nlock: {self.lock}\nlock_timeout: 120\n"
                     f"controls: {json.dumps(controls)}\n" + textwrap.dedent(extra))
        return p

    def harness(self, *args: str, timeout: float = 180, **kw) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                              text=True, timeout=timeout, cwd=self.root, **kw)

    def popen(self, *args: str, **kw) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=self.root,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)

    def run_dirs(self) -> list[Path]:
        if not self.runs.exists():
            return []
        return sorted(p for p in self.runs.iterdir() if p.is_dir() and p.name != PERFLOG_DIR)

    def record(self, run_dir: Path) -> dict:
        return json.loads((run_dir / "run.json").read_text())

    def sealed_in_order(self) -> list[Path]:
        """The sealed run folders in the order they were created: a run id's stamp is to the
        second, so two runs of one second sort by their random suffix, not by time."""
        return sorted((d for d in self.run_dirs() if (d / "run.json").is_file()),
                      key=lambda d: self.record(d)["times"]["created"])


@pytest.fixture
def project(tmp_path, rehearsal_image) -> Project:
    for d in ("campaigns", "controls", "locks"):
        (tmp_path / d).mkdir()
    (tmp_path / "images.lock").write_text(
        f"images:\n  rehearsal:\n    id: {rehearsal_image}\n    ref: harness-rehearsal:local\n")
    return Project(tmp_path, rehearsal_image)


def containers_with_label(label: str, *, all_states: bool = True) -> list[str]:
    args = ["docker", "ps", "-q", "--filter", f"label={label}"]
    if all_states:
        args.insert(2, "-a")
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()


@pytest.fixture
def cleanup_containers():
    """Remove, after the test, any container labelled with a lock under this test's tmp."""
    labels: list[str] = []
    yield labels
    for label in labels:
        for cid in containers_with_label(label):
            subprocess.run(["docker", "rm", "-f", cid], capture_output=True)


# `make test` runs the tiers in two pytest-xdist workers: a tier whose session fixture is a
# whole set-up (a Slurm cluster, the engine campaign's runs, the installed wheel) keeps to one
# worker, so it is set up once; every other test goes where a worker is free (each has its own
# tmp folder, lock and runs dir). A scheduler of our own, because xdist's `loadgroup` marks
# a group by rewriting `item._nodeid`, which pytest 9 no longer reads: its groups split.
ONE_WORKER_TIERS = ("slurm", "engine", "installed", "image_gates", "upstream")


def tier_scope(nodeid: str) -> str:
    """The unit of scheduling: a one-worker tier's name, else the test itself."""
    parts = nodeid.split("/")
    tier = parts[1] if len(parts) > 2 and parts[0] == "tests" else ""
    return tier if tier in ONE_WORKER_TIERS else nodeid


def pytest_xdist_make_scheduler(config, log):  # type: ignore[no-untyped-def]
    from xdist.scheduler import LoadScopeScheduling

    class TierScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return tier_scope(nodeid)

    return TierScheduling(config, log)


os.environ.setdefault("HARNESS_TEST", "1")

# The upstream tier installs vLLM into its own venv (`make test-upstream`), the image gates
# mount it into the rehearsal image (`make test-image-gates`), and the Slurm tier brings up
# a private cluster (`make test-slurm`); none is part of the default suite. The engine and
# installed tiers (`make test-engine`, `make test-installed`) run where `make test` turns
# them on.
collect_ignore = [name for name, switch in (("upstream", "HARNESS_UPSTREAM"),
                                            ("image_gates", "HARNESS_IMAGE_GATES"),
                                            ("slurm", "HARNESS_SLURM"),
                                            ("engine", "HARNESS_ENGINE"),
                                            ("installed", "HARNESS_INSTALLED"))
                  if not os.environ.get(switch)]
