"""`harness night --wait[=DURATION]`: a night meeting another night on its GPU lock waits
for it, saying who holds it, instead of exit 3 at once; past DURATION it still exits 3."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from harness.driver.night.nightlock import NightLock

REPO = Path(__file__).resolve().parents[2]


def _campaign(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "locks").mkdir()
    lock = tmp_path / "locks" / "gpu.lock"
    camp = tmp_path / "camp.yaml"
    camp.write_text(f"name: waits\nrow: R\nlock: {lock}\nlock_timeout: 10m\n"
                    f"images_lock: {REPO / 'images.lock'}\ncontrols_dir: {REPO / 'controls'}\n"
                    "controls:\n  - night-a\n")
    return camp, lock


def _night(camp: Path, tmp_path: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "harness", "night", str(camp),
                             "--runs-dir", str(tmp_path / "runs"), "--no-json-lines", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_without_wait_a_busy_night_lock_exits_3_at_once_and_names_wait(tmp_path: Path) -> None:
    camp, lock = _campaign(tmp_path)
    held = NightLock(lock, kind="night", campaign="held")
    held.acquire(timeout=5)
    try:
        _, err = _night(camp, tmp_path).communicate(timeout=60)
        t0 = time.monotonic()
        night = _night(camp, tmp_path, "--wait=2")
        _, waited = night.communicate(timeout=60)
    finally:
        held.release()
    assert "ENV-NIGHT-BUSY" in err and "`harness night --wait` waits for it" in err
    assert night.returncode == 3, waited
    assert time.monotonic() - t0 >= 2
    assert "waiting for the night lock held by night of campaign held (pid " in waited
    assert "(waited 2 s)" in waited and "ENV-NIGHT-BUSY" in waited


def test_a_waiting_night_goes_on_once_the_other_night_ends(tmp_path: Path) -> None:
    """The lock is let go only once the night says it waits (a timer would race the
    night's start on a busy host)."""
    camp, lock = _campaign(tmp_path)
    held = NightLock(lock, kind="night", campaign="held")
    held.acquire(timeout=5)
    said = []
    try:  # --night names no night: said only once the lock is taken, so nothing runs
        night = _night(camp, tmp_path, "--wait=2m", "--night", "nosuch")
        assert night.stderr is not None
        for line in night.stderr:
            said.append(line)
            if "waiting for the night lock" in line:
                break
    finally:
        held.release()
    _, rest = night.communicate(timeout=120)
    err = "".join(said) + rest
    assert "waiting for the night lock held by night of campaign held" in err, err
    assert "ENV-NIGHT-BUSY" not in err
    assert night.returncode == 2 and "--night nosuch: no " in err, err


def test_resume_rules_name_spent_and_retried_slots() -> None:
    from harness.base.states import State
    from harness.driver.night import rules
    from harness.driver.policy import RetryPolicy
    from harness.measure.nightfolder.rows import Row

    def row(i: int, state: str, attempt: int = 1) -> Row:
        return Row(id=i, plan_index=i, control=f"c{i}", repeat_index=0, attempt=attempt,
                   state=State(state), run_id=f"c{i}-x", run_dir=f"/r/c{i}-x", reason=None,
                   rerun_of=None, origin="plan", link_reason=None, updated="")

    rows = [row(0, "interrupted"), row(1, "planned"), row(2, "refused")]
    assert [r.control for r in rules.spent(rows, RetryPolicy.extra(0))] == ["c0"]
    assert rules.retried(rows, RetryPolicy.extra(0)) == frozenset()
    assert rules.spent(rows, RetryPolicy.extra(1)) == []
    assert rules.retried(rows, RetryPolicy.extra(1)) == {"c0-x"}


def test_the_git_line_names_the_runs_own_approval_aside() -> None:
    from harness.readers.report.gitline import git_line

    line = git_line({"commit": "a" * 40, "dirty": False, "own_approval": "approvals/c-1.json"})
    assert line == f"{'a' * 40} (clean; its own approval approvals/c-1.json not yet committed)"
