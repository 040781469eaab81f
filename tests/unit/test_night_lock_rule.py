"""One rule for what an operator starts by hand: `harness run`, like `harness rerun`, waits
for a night on the same GPU lock before launching, instead of slipping between its
controls; a night waits for an operator's run or rerun; two nights never share a lock.
And `status` shows the night the night lock names, wherever its runs folder is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.base.errors import EnvironmentFault
from harness.driver.night.nightlock import NightLock
from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.naming import JOURNAL_NAME
from harness.readers import statuslines

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def lock(tmp_path: Path) -> Path:
    (tmp_path / "locks").mkdir()
    return tmp_path / "locks" / "gpu.lock"


def test_a_night_waits_for_an_operators_run_and_refuses_beside_a_night(lock: Path) -> None:
    for kind, rule in (("run", "ENV-LOCK-TIMEOUT"), ("rerun", "ENV-LOCK-TIMEOUT"),
                       ("night", "ENV-NIGHT-BUSY")):
        held = NightLock(lock, kind=kind, campaign="held")
        held.acquire(timeout=5)
        try:
            with pytest.raises(EnvironmentFault) as e:
                NightLock(lock, kind="night", campaign="n").acquire(timeout=0.6)
            assert e.value.rule == rule, kind
        finally:
            held.release()


def test_harness_run_waits_for_a_running_night_and_launches_nothing(tmp_path: Path,
                                                                    lock: Path) -> None:
    camp = tmp_path / "camp.yaml"
    camp.write_text(f"name: by-hand\nrow: R\nlock: {lock}\nlock_timeout: 10m\n"
                    f"images_lock: {REPO / 'images.lock'}\ncontrols_dir: {REPO / 'controls'}\n"
                    "controls:\n  - night-a\n")
    night = NightLock(lock, kind="night", campaign="rehearsal-night")
    night.acquire(timeout=5)
    night.describe_as(night_dir=str(tmp_path / "nights" / "rehearsal-night-x"))
    try:
        r = subprocess.run([sys.executable, "-m", "harness", "run", str(camp), "--runs-dir",
                            str(tmp_path / "runs"), "--lock-timeout", "1", "--json-lines"],
                           capture_output=True, text=True, timeout=60)
    finally:
        night.release()
    assert r.returncode == 3, r.stderr
    assert "ENV-LOCK-TIMEOUT" in r.stderr and "night of campaign rehearsal-night" in r.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_status_shows_the_night_the_lock_names_not_none_yet(tmp_path: Path, lock: Path,
                                                             monkeypatch) -> None:
    night_dir = tmp_path / "elsewhere" / "nights" / "camp-20260101T000000Z"
    night_dir.mkdir(parents=True)
    Journal.create(night_dir / JOURNAL_NAME, campaign="camp", campaign_file="c.yaml",
                   plan=[("kv", 0)]).close()
    monkeypatch.setattr(statuslines, "containers", lambda: ([], None))
    held = NightLock(lock, kind="night", campaign="camp")
    held.acquire(timeout=5)
    held.describe_as(night_dir=str(night_dir))
    try:
        lines = statuslines.render(statuslines.gather(tmp_path / "gpu-runs", lock))
    finally:
        held.release()
    assert "night: none yet" not in lines
    assert any(line.startswith(f"night {night_dir} (camp, running now)") for line in lines), lines
    after = statuslines.render(statuslines.gather(tmp_path / "gpu-runs", lock))
    assert after[-1] == "night: none yet"  # released: the default runs folder has none
