"""The installed tier: the harness as an operator has it, installed from its wheel.

The session builds the sdist and the wheel once, from the files git tracks
(scripts/dist.py, as `make dist` does), installs the wheel (not editable; its dependencies
from PyPI or pip's cache) into a fresh venv outside the source tree, and runs the installed
`harness` console script with a clean environment: no PYTHONPATH, HOME kept, the current
folder outside the source tree. Nothing of the checkout is on its `sys.path`, so what the
wheel lacks, a run lacks.

Run by `make test-installed`, and by `make test` (HARNESS_INSTALLED=1) wherever Docker is
there, and always under CI=true. A wheel that cannot be built or installed fails every
test here: the tier never skips, because a skipped installed tier would look like a wheel
that works.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DIST_SCRIPT = REPO / "scripts" / "dist.py"
# What an operator's shell passes on besides PATH and HOME: locale, user, temp folder,
# and how to reach the Docker engine. PIP_* keeps a CI's package index for the install.
KEEP_ENV = ("USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR", "DOCKER_HOST",
            "DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY")
GIT_IDENTITY = ("-c", "user.name=Installed Tier", "-c", "user.email=installed@example.invalid")


def inside_repo(path: Path) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(REPO))


def fail(message: str, proc: subprocess.CompletedProcess | None = None) -> None:
    if proc is not None:
        message += f" (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    pytest.fail(message, pytrace=False)


@dataclass(frozen=True)
class Dist:
    sdist: Path
    wheel: Path


@dataclass(frozen=True)
class Installed:
    """A venv with the harness installed from its wheel, and a clean environment to run
    its console script in."""

    venv: Path
    site_packages: Path

    @property
    def env(self) -> dict[str, str]:
        """HOME, PATH (the venv's bin first, no folder of the source tree) and KEEP_ENV
        from this process's environment; nothing else (no PYTHONPATH, no GIT_*)."""
        path = [str(self.venv / "bin")] + [
            p for p in os.environ.get("PATH", "").split(os.pathsep)
            if p and not inside_repo(Path(p))]
        env = {k: os.environ[k] for k in (*KEEP_ENV, "HOME") if k in os.environ}
        env |= {k: v for k, v in os.environ.items() if k.startswith("PIP_")}
        return env | {"PATH": os.pathsep.join(path)}

    def run(self, argv: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
        assert not inside_repo(cwd), f"{cwd} is inside the source tree"
        return subprocess.run(argv, cwd=cwd, env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def harness(self, *args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
        """The installed `harness` console script, run from `cwd` (never the source tree)."""
        return self.run([str(self.venv / "bin" / "harness"), *args], cwd, timeout)

    def python(self, *args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
        return self.run([str(self.venv / "bin" / "python"), *args], cwd, timeout)

    def git(self, repo: Path, *args: str) -> str:
        """git in an operator's repository, with a fixed identity; fails the test on error."""
        r = self.run(["git", *GIT_IDENTITY, *args], repo, 60)
        if r.returncode != 0:
            fail(f"git {' '.join(args)} in {repo}", r)
        return r.stdout


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """The sdist and the wheel of the tracked files, built once per session."""
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run([sys.executable, str(DIST_SCRIPT), str(out)], capture_output=True,
                       text=True, timeout=600)
    if r.returncode != 0:
        fail("the sdist and wheel could not be built (scripts/dist.py)", r)
    sdist, wheel = (Path(line) for line in r.stdout.split())
    return Dist(sdist, wheel)


@pytest.fixture(scope="session")
def installed(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """A fresh venv outside the source tree with the wheel installed (not editable)."""
    where = tmp_path_factory.mktemp("installed")
    venv = where / "venv"
    assert not inside_repo(venv)
    r = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True,
                       text=True, timeout=300)
    if r.returncode != 0:
        fail("a venv could not be made", r)
    probe = Installed(venv, venv)
    r = probe.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                   "--disable-pip-version-check", str(dist.wheel)], where, 900)
    if r.returncode != 0:
        fail(f"the wheel {dist.wheel.name} could not be installed", r)
    r = probe.python("-c", "import harness, sysconfig; print(harness.__file__); "
                     "print(sysconfig.get_paths()['purelib'])", cwd=where)
    if r.returncode != 0:
        fail("the installed harness does not import", r)
    module, purelib = (Path(line) for line in r.stdout.split())
    assert Path(purelib).is_relative_to(venv), purelib
    assert module == Path(purelib) / "harness" / "__init__.py", (
        f"the venv imports harness from {module}, not from its site-packages {purelib}")
    assert not inside_repo(module)
    return Installed(venv, Path(purelib))


@dataclass(frozen=True)
class CampaignRepo:
    """An operator's campaign repository, made by the installed `harness init`."""

    root: Path
    installed: Installed

    def harness(self, *args: str, cwd: Path | None = None,
                timeout: float = 300) -> subprocess.CompletedProcess:
        """The installed harness, from the repository's root unless `cwd` says otherwise."""
        return self.installed.harness(*args, cwd=cwd or self.root, timeout=timeout)

    def git(self, *args: str) -> str:
        return self.installed.git(self.root, *args)

    def commit(self, message: str) -> str:
        """Commit everything in the work tree; the new head's commit id."""
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD").strip()

    @property
    def runs_dir(self) -> Path:
        """The runs dir its harness.toml names (relative to that file)."""
        config = tomllib.loads((self.root / "harness.toml").read_text())
        return (self.root / config.get("runs_dir", "gpu-runs")).resolve()


# The rehearsal campaign's controls, copied from the source tree (their model folder too).
REHEARSAL_CONTROLS = ("rehearsal-compute", "rehearsal-gate0", "rehearsal-gate0-inproc")
NIGHT_CONTROLS = ("rehearsal-compute", "rehearsal-gate0-inproc")


def add_rehearsal(repo: CampaignRepo, lock: Path) -> None:
    """The rehearsal campaign and its controls in an operator's repository: its
    `gates:` (this source tree's own suites) left out, its contract kept, its images_lock
    the repository's own, its GPU lock `lock`; and a two-control night over them."""
    controls = repo.root / "controls"
    for name in REHEARSAL_CONTROLS:
        shutil.copy(REPO / "controls" / f"{name}.yaml", controls)
    shutil.copytree(REPO / "controls" / "models" / "tiny-double",
                    controls / "models" / "tiny-double")
    campaign = yaml.safe_load((REPO / "campaigns" / "rehearsal.yaml").read_text())
    del campaign["gates"]
    campaign |= {"lock": str(lock), "lock_timeout": "5m", "images_lock": "../images.lock"}
    campaigns = repo.root / "campaigns"
    (campaigns / "rehearsal.yaml").write_text(yaml.safe_dump(campaign, sort_keys=False))
    night = {"name": "rehearsal-night", "row": "REHEARSAL-NIGHT", "lock": str(lock),
             "lock_timeout": "5m", "images_lock": "../images.lock",
             "controls": list(NIGHT_CONTROLS), "stop_policy": "continue"}
    (campaigns / "rehearsal-night.yaml").write_text(yaml.safe_dump(night, sort_keys=False))


def make_campaign_repo(installed: Installed, where: Path, image: str) -> CampaignRepo:
    """`harness init DIR` (which makes the folder and its git repository), the rehearsal
    campaign added, the rehearsal image pinned with `harness images pin`, all committed."""
    r = installed.harness("init", where.name, cwd=where.parent)
    if r.returncode != 0:
        fail(f"harness init {where.name} failed", r)
    assert (where / ".git").is_dir(), "harness init made no git repository"
    repo = CampaignRepo(where, installed)
    add_rehearsal(repo, where.parent / f"{where.name}-gpu.lock")
    r = repo.harness("images", "pin", "rehearsal", "harness-rehearsal:local")
    if r.returncode != 0:
        fail("harness images pin failed", r)
    assert image in (where / "images.lock").read_text()
    repo.commit("a campaign repository for the rehearsal")
    return repo


@pytest.fixture(scope="session")
def campaign_repo(installed: Installed, rehearsal_image: str,
                  tmp_path_factory: pytest.TempPathFactory) -> CampaignRepo:
    """One operator repository for the session (tests that change it make their own with
    make_campaign_repo)."""
    return make_campaign_repo(installed, tmp_path_factory.mktemp("operator") / "repo",
                              rehearsal_image)
