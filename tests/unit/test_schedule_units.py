"""`harness schedule`: unit text, quoting, cron equivalents, calendar checks, systemd-analyze."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.base.errors import InvalidInput
from harness.cli.schedule import schedule
from harness.driver.unitfiles import (
    calendar_start,
    check_calendar,
    cron_schedule,
    night_window,
    render_units,
    systemd_arg,
    unit_name,
)

ANALYZE = shutil.which("systemd-analyze")


def units(tmp: Path, harness: list[str], calendar: str = "*-*-* 02:00:00"):
    return render_units(
        campaign="rehearsal-night", campaign_file=str(tmp / "my campaigns" / "night%1.yaml"),
        on_calendar=calendar, harness=harness, workdir=str(tmp / "work dir"),
    )


def test_unit_text_has_the_contract(tmp_path: Path) -> None:
    u = units(tmp_path, ["/opt/harness/bin/harness"])
    assert u.name == "harness-night-rehearsal-night"
    assert "Type=oneshot" in u.service.splitlines()
    assert "Persistent=true" in u.timer.splitlines()
    assert "OnCalendar=*-*-* 02:00:00" in u.timer.splitlines()
    assert "Unit=harness-night-rehearsal-night.service" in u.timer.splitlines()
    assert "WantedBy=timers.target" in u.timer.splitlines()
    exec_line = next(s for s in u.service.splitlines() if s.startswith("ExecStart="))
    assert exec_line == (
        f'ExecStart=/opt/harness/bin/harness night "{tmp_path}/my campaigns/night%%1.yaml"'
    )
    assert f"WorkingDirectory={tmp_path}/work dir" in u.service.splitlines()


def test_systemd_arg_quoting() -> None:
    assert systemd_arg("plain/path-1.yaml") == "plain/path-1.yaml"
    assert systemd_arg('a "b"\\c') == '"a \\"b\\"\\\\c"'
    assert systemd_arg("$HOME") == '"$$HOME"'
    with pytest.raises(InvalidInput):
        systemd_arg("two\nlines")


def test_unit_name_is_sanitized() -> None:
    assert unit_name("kv warmup/profile") == "harness-night-kv-warmup-profile"


@pytest.mark.parametrize(
    ("calendar", "cron"),
    [
        ("*-*-* 02:00:00", "0 2 * * *"),
        ("*-*-* 2:05", "5 2 * * *"),
        ("daily", "0 0 * * *"),
        ("Mon..Fri *-*-* 01:30:00", "30 1 * * Mon-Fri"),
        ("Mon,Wed *-*-* 23:59:00", "59 23 * * Mon,Wed"),
        ("*-*-* 02:00:30", None),
        ("*-*-01 02:00:00", None),
        ("hourly", None),
        ("*-*-* 25:00:00", None),
    ],
)
def test_cron_schedule(calendar: str, cron: str | None) -> None:
    assert cron_schedule(calendar) == cron


def test_cron_line_quotes_and_escapes_percent(tmp_path: Path) -> None:
    u = units(tmp_path, ["/opt/h"])
    assert u.cron.startswith("0 2 * * * cd ")
    assert "'" + str(tmp_path / "work dir") + "'" in u.cron
    assert "night\\%1.yaml" in u.cron and "%1" not in u.cron.replace("\\%", "")


@pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze not installed")
def test_check_calendar_with_systemd() -> None:
    assert check_calendar("*-*-* 02:00") == "*-*-* 02:00:00"
    with pytest.raises(InvalidInput, match="not a systemd calendar expression"):
        check_calendar("every night at two")


@pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze not installed")
def test_generated_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    # a harness executable in a folder with a space, to prove ExecStart quoting works
    bindir = tmp_path / "my bin"
    bindir.mkdir()
    harness = bindir / "harness"
    harness.write_text("#!/bin/sh\nexit 0\n")
    harness.chmod(harness.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "work dir").mkdir()
    u = render_units(
        campaign="rehearsal-night", campaign_file=str(tmp_path / "my campaigns" / "n%1.yaml"),
        on_calendar="Mon..Fri *-*-* 01:30:00", harness=[str(harness)],
        workdir=str(tmp_path / "work dir"), runs_dir=str(tmp_path / "runs %d"),
        until="06:00", max_hours=4.5, on_failure="notify-failure@%n.service")
    assert "--window 01:30-06:00" in u.service and "OnFailure=" in u.service
    unit_dir = tmp_path / "units"
    unit_dir.mkdir()
    (unit_dir / f"{u.name}.service").write_text(u.service)
    (unit_dir / f"{u.name}.timer").write_text(u.timer)
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    # --user needs a runtime dir; no running systemd is needed for verify
    done = subprocess.run(
        [ANALYZE, "verify", "--user", f"{u.name}.service", f"{u.name}.timer"],
        cwd=unit_dir, capture_output=True, text=True, timeout=60,
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "", done.stderr  # unknown keys only warn: demand silence
    # and a broken unit is caught by the same check (the check can fail)
    (unit_dir / f"{u.name}.timer").write_text(u.timer.replace("Persistent=", "Persistant="))
    bad = subprocess.run(
        [ANALYZE, "verify", "--user", f"{u.name}.timer"], cwd=unit_dir,
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
    )
    assert "Unknown key" in bad.stderr


@pytest.fixture
def campaign(tmp_path: Path) -> Path:
    path = tmp_path / "rehearsal-night.yaml"
    path.write_text("name: rehearsal-night\nrow: R\ncontrols: [echo]\n")
    return path


def test_cli_prints_units_and_cron(campaign: Path, tmp_path: Path) -> None:
    out = CliRunner().invoke(schedule, [str(campaign), "--on-calendar", "*-*-* 02:00",
                                        "--harness", "/opt/h", "--workdir", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert "Persistent=true" in out.output and "Type=oneshot" in out.output
    assert f"ExecStart=/opt/h night {campaign}" in out.output
    assert f"0 2 * * * cd {tmp_path} && /opt/h night {campaign}" in out.output


@pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze not installed")
def test_cli_bad_calendar_is_invalid_input(campaign: Path) -> None:
    out = CliRunner().invoke(schedule, [str(campaign), "--on-calendar", "nonsense"])
    assert isinstance(out.exception, InvalidInput) and out.exception.code == 2


def test_cli_install_writes_units_atomically_and_runs_no_systemctl(
    campaign: Path, tmp_path: Path
) -> None:
    config = tmp_path / "config"
    out = CliRunner(env={"XDG_CONFIG_HOME": str(config)}).invoke(
        schedule,
        [str(campaign), "--on-calendar", "*-*-* 03:00", "--install", "--harness", "/opt/h"],
    )
    assert out.exit_code == 0, out.output
    unit_dir = config / "systemd" / "user"
    names = sorted(p.name for p in unit_dir.iterdir())
    assert names == ["harness-night-rehearsal-night.service", "harness-night-rehearsal-night.timer"]
    assert "OnCalendar=*-*-* 03:00" in (unit_dir / names[1]).read_text()
    assert ("systemctl --user daemon-reload && systemctl --user enable --now "
            "harness-night-rehearsal-night.timer") in out.output


def test_cli_invalid_campaign(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: ok\n")
    out = CliRunner().invoke(schedule, [str(bad), "--on-calendar", "daily"])
    assert isinstance(out.exception, InvalidInput)


@pytest.mark.parametrize(("calendar", "start"), [
    ("*-*-* 02:00:00", (2, 0)), ("02:00", (2, 0)), ("Mon..Fri *-*-* 01:30:00", (1, 30)),
    ("Sat,Sun 23:05", (23, 5)), ("daily", (0, 0)), ("hourly", None),
    ("*-*-* 02,04:00:00", None), ("*-*-01 02:00:00", None), ("*-*-* 24:00:00", None),
    ("*-*-* 02:00:30", None),
])
def test_calendar_start(calendar: str, start: tuple[int, int] | None) -> None:
    assert calendar_start(calendar) == start


def test_night_window_runs_from_the_calendar_time_to_the_end() -> None:
    assert night_window("*-*-* 01:30:00", "06:00", None) == "01:30-06:00"
    assert night_window("*-*-* 22:00:00", None, 3) == "22:00-01:00"  # wraps midnight
    assert night_window("*-*-* 22:00:00", "05:00", 30) == "22:00-05:00"
    assert night_window("*-*-* 22:00:00", None, 24) is None  # a day or more: no window
    assert night_window("hourly", None, None) is None  # no end given: nothing to keep to
    with pytest.raises(InvalidInput, match="no single time of day"):
        night_window("hourly", "06:00", None, "hourly")
    with pytest.raises(InvalidInput, match="would be empty"):
        night_window("*-*-* 06:00:00", "06:00", None)


def test_unit_passes_runs_dir_window_and_hours_and_says_where_things_are(tmp_path) -> None:
    u = render_units(campaign="kv", campaign_file="/c/kv.yaml", on_calendar="*-*-* 02:00:00",
                     harness=["/opt/h"], workdir="/w", runs_dir="/data/gpu runs",
                     until="06:30", max_hours=4)
    exec_line = next(s for s in u.service.splitlines() if s.startswith("ExecStart="))
    assert exec_line == ('ExecStart=/opt/h night /c/kv.yaml --runs-dir "/data/gpu runs" '
                         "--window 02:00-06:30 --max-hours 4")
    assert "# The morning report: /data/gpu runs/nights/kv-<UTC stamp>/summary.md" in u.service
    assert "journalctl --user -u harness-night-kv.service" in u.service
    assert "OnFailure" not in u.service and "SuccessExitStatus" not in u.service
    assert u.cron.endswith("--runs-dir '/data/gpu runs' --window 02:00-06:30 --max-hours 4")
    plain = render_units(campaign="kv", campaign_file="/c/kv.yaml", on_calendar="hourly",
                         harness=["/opt/h"], workdir="/w", until=None)
    assert "ExecStart=/opt/h night /c/kv.yaml\n" in plain.service + "\n"
    with pytest.raises(InvalidInput):
        render_units(campaign="kv", campaign_file="/c/kv.yaml", on_calendar="02:00",
                     harness=["/opt/h"], workdir="/w", until="25:00")
    with pytest.raises(InvalidInput):
        render_units(campaign="kv", campaign_file="/c/kv.yaml", on_calendar="02:00",
                     harness=["/opt/h"], workdir="/w", on_failure="x\nExecStart=/bin/sh")


def test_cli_install_refuses_to_overwrite_an_installed_timer(campaign: Path,
                                                             tmp_path: Path) -> None:
    config = tmp_path / "config"
    runner = CliRunner(env={"XDG_CONFIG_HOME": str(config)})
    args = [str(campaign), "--on-calendar", "*-*-* 03:00", "--install", "--harness", "/opt/h",
            "--until", "06:00"]
    assert runner.invoke(schedule, args).exit_code == 0
    timer = config / "systemd" / "user" / "harness-night-rehearsal-night.timer"
    service = timer.with_suffix(".service")
    before = (service.read_text(), timer.read_text())
    out = runner.invoke(schedule, [*args[:-1], "07:00"])
    assert isinstance(out.exception, InvalidInput) and out.exception.code == 2
    assert "exists" in out.exception.message and "--force" in out.exception.message
    assert (service.read_text(), timer.read_text()) == before  # nothing written
    timer.unlink()  # half installed (only the service left): still refused
    out = runner.invoke(schedule, [*args[:-1], "07:00"])
    assert isinstance(out.exception, InvalidInput)
    out = runner.invoke(schedule, [*args[:-1], "07:00", "--force"])
    assert out.exit_code == 0, out.output
    assert "--window 03:00-07:00" in service.read_text() and timer.is_file()
    assert f"replaced {service}" in out.output and f"wrote {timer}" in out.output
    assert "log: journalctl --user -u harness-night-rehearsal-night.service" in out.output


def test_cli_says_where_the_report_lands(campaign: Path, tmp_path: Path) -> None:
    out = CliRunner().invoke(schedule, [str(campaign), "--on-calendar", "*-*-* 02:00",
                                        "--harness", "/opt/h", "--workdir", str(tmp_path),
                                        "--runs-dir", "nightly"])
    assert out.exit_code == 0, out.output
    assert (f"report: {tmp_path}/nightly/nights/rehearsal-night-<UTC stamp>/summary.md"
            in out.output)
    assert f"--runs-dir {tmp_path}/nightly" in out.output


def test_cli_follows_the_campaign_project_not_the_current_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """From any folder the units are the same: the night runs in the campaign's project
    folder and writes to the runs dir its harness.toml names; a relative --runs-dir is
    still the operator's, from the current folder."""
    ops = tmp_path / "ops"
    (ops / "campaigns").mkdir(parents=True)
    (ops / ".git").mkdir()
    (ops / "harness.toml").write_text('runs_dir = "runs"\n')
    camp = ops / "campaigns" / "n.yaml"
    camp.write_text("name: n\nrow: R\ncontrols: [echo]\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("HARNESS_RUNS_DIR", raising=False)
    args = [str(camp), "--on-calendar", "*-*-* 02:00", "--harness", "/opt/h"]
    out = CliRunner().invoke(schedule, args)
    assert out.exit_code == 0, out.output
    assert f"WorkingDirectory={ops}\n" in out.output
    assert f"--runs-dir {ops}/runs" in out.output and f"cd {ops} && " in out.output
    assert f"report: {ops}/runs/nights/n-<UTC stamp>/summary.md" in out.output
    mine = CliRunner().invoke(schedule, [*args, "--runs-dir", "mine"])
    assert f"--runs-dir {elsewhere}/mine" in mine.output
    assert list(elsewhere.iterdir()) == []
