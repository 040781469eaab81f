"""`harness night --window START-END`: a start outside the window starts nothing (exit 1),
inside it the window's end is a deadline, so a timer catching up a missed night at boot
never holds the GPU through the day (harness schedule passes it)."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from harness.base.errors import InvalidInput, Refused
from harness.driver.night.rules import deadline_named, in_window, night_deadline, parse_window

REPO = Path(__file__).resolve().parents[2]
TZ = timezone(timedelta(hours=1))


def at(hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 11, 30, hour, minute, tzinfo=TZ)


@pytest.mark.parametrize(("now", "window", "inside"), [
    (at(2), "01:30-06:00", True), (at(1, 30), "01:30-06:00", True),
    (at(6), "01:30-06:00", False), (at(14), "01:30-06:00", False),
    (at(23), "22:00-06:00", True), (at(3), "22:00-06:00", True),
    (at(12), "22:00-06:00", False), (at(22), "22:00-06:00", True),
])
def test_in_window(now: datetime, window: str, inside: bool) -> None:
    assert in_window(now, *parse_window(window)) is inside


@pytest.mark.parametrize("bad", ["06:00", "1-2-3", "25:00-06:00", "06:00-06:00", "a-b"])
def test_bad_windows_are_invalid_input(bad: str) -> None:
    with pytest.raises(InvalidInput):
        parse_window(bad)


def test_a_late_start_is_refused_and_an_early_one_ends_with_its_window() -> None:
    with pytest.raises(Refused, match="outside the night's window"):
        night_deadline(at(14), None, None, "01:30-06:00")  # the timer caught up at boot
    assert night_deadline(at(3), None, None, "01:30-06:00") == at(6)
    assert night_deadline(at(23), None, None, "22:00-06:00") == at(6) + timedelta(days=1)
    assert night_deadline(at(3), "05:00", None, "01:30-06:00") == at(5)
    assert night_deadline(at(3), None, 1, "01:30-06:00") == at(4)
    assert night_deadline(at(3), None, None, None) is None


def test_the_deadline_is_named_by_what_set_it() -> None:
    """The earliest of --until, --max-hours and the window's end names the deadline, so
    the controls it leaves say which one ended the night."""
    assert deadline_named(at(3), None, None, "01:30-06:00") == "window 01:30-06:00"
    assert deadline_named(at(3), "05:00", None, "01:30-06:00") == "--until 05:00"
    assert deadline_named(at(3), "07:00", None, "01:30-06:00") == "window 01:30-06:00"
    assert deadline_named(at(3), "05:00", 1, None) == "--max-hours 1"
    assert deadline_named(at(3), None, None, None) is None


def test_night_outside_its_window_starts_nothing(tmp_path: Path) -> None:
    now = datetime.now().astimezone()
    opens, closes = now + timedelta(hours=2), now + timedelta(hours=3)
    window = f"{opens:%H:%M}-{closes:%H:%M}"
    r = subprocess.run([sys.executable, "-m", "harness", "night",
                        str(REPO / "campaigns" / "rehearsal-night.yaml"), "--runs-dir",
                        str(tmp_path / "runs"), "--window", window],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    assert "outside the night's window; nothing was started" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "runs").exists()
