"""The sbatch argv and job script of one control attempt: golden files, limits, hostile values.

Golden files live in tests/fixtures/slurm/ (<case>.argv.json, <case>.sh). After an intended
change, regenerate them and review the diff like code:

    HARNESS_REGEN_GOLDEN=1 .venv/bin/python -m pytest -q tests/unit/test_slurm_job.py
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from harness.base.errors import InvalidInput
from harness.measure.slurm import job
from harness.measure.slurm import script as jobscript
from harness.measure.slurm.job import ControlTime, JobSpec, Site, Token

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
REGEN = os.environ.get("HARNESS_REGEN_GOLDEN") == "1"

NIGHT = "rehearsal-20261130T021500Z"
SITE = Site(harness="/opt/harness/.venv/bin/harness", workdir="/srv/harness",
            runs_dir="/var/lib/harness/gpu-runs", drop="/shared/drop")
ONE = JobSpec(night=NIGHT, campaign_file="campaigns/rehearsal.yaml",
              controls=(ControlTime("rehearsal-compute", 600, 10, 30),), slot=0, attempt=1)
FULL_SITE = replace(SITE, partition="gfx1100", account="lab-7", gfx="gfx1100",
                    home_root="/scratch/harness homes", workdir="/srv/it's here")
GROUP = JobSpec(night=NIGHT, campaign_file="/srv/harness/campaigns/night a.yaml",
                controls=(ControlTime("rehearsal-gate0", 3600, 10, 120),
                          ControlTime("rehearsal-gate0-inproc", 1800, 30, 60)),
                slot=4, attempt=2, preflight_s=90, seal_s=45, lock_wait_s=1200,
                until=datetime(2026, 12, 1, 8, 30, tzinfo=timezone(timedelta(hours=2))),
                exclude=("node7", "node2", "node7"))
# A night's job: `harness run` makes exactly the run folder the journal committed.
NIGHT_RUN = replace(ONE, attempt=2, run_id="rehearsal-compute-20261130T021501Z-0a1b2c3d")
# A night's same_host group: one job, each member's own run (run id, attempt), in order.
GROUP_RUNS = replace(GROUP, runs=(("rehearsal-gate0-20261130T021501Z-0a1b2c3d", 2),
                                  ("rehearsal-gate0-inproc-20261130T021502Z-4e5f6a7b", 1)))
CASES = {"single": (ONE, SITE), "group-typed-until-exclude": (GROUP, FULL_SITE),
         "night-run-id": (NIGHT_RUN, SITE), "group-runs": (GROUP_RUNS, FULL_SITE)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_argv_and_script(case: str) -> None:
    spec, site = CASES[case]
    argv = job.sbatch_argv(spec, site)
    script = jobscript.job_script(spec, site)
    argv_file, script_file = GOLDEN / f"{case}.argv.json", GOLDEN / f"{case}.sh"
    if REGEN:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        argv_file.write_text(json.dumps(argv, indent=1) + "\n")
        script_file.write_text(script)
    assert argv == json.loads(argv_file.read_text())
    assert script == script_file.read_text()


def test_time_and_signal_cover_every_allowance() -> None:
    # lead: stop grace + post-steps + seal + 60 s of Slurm's signal slack
    assert job.signal_lead_s(ONE) == 10 + 30 + 60 + 60
    # 600 lock + 120 preflight + (600 + 10 + 30 + 60) + 160 lead = 1580 s -> 27 min
    assert job.time_limit_s(ONE) == 27 * 60
    # group: the largest grace and post-steps make the lead
    assert job.signal_lead_s(GROUP) == 30 + 120 + 45 + 60
    # 1200 + 90 + (3600+10+120+45) + (1800+30+60+45) + 255 = 7255 -> 121 min
    assert job.time_limit_s(GROUP) == 121 * 60
    assert "--time=02:01:00" in job.sbatch_argv(GROUP, FULL_SITE)
    # the harness's own timeout comes before Slurm's SIGTERM, however long each step took
    for spec in (ONE, GROUP):
        used = spec.lock_wait_s + spec.preflight_s + sum(
            c.timeout_s + c.stop_grace_s + c.post_steps_s + spec.seal_s for c in spec.controls)
        assert job.time_limit_s(spec) - job.signal_lead_s(spec) >= used
    exact = replace(ONE, lock_wait_s=0, preflight_s=0, seal_s=0,
                    controls=(ControlTime("a", 60, 0, 0),))
    assert job.time_limit_s(exact) == 120  # 60 + 60 slack: whole minutes, not rounded up
    assert job.time_limit_s(replace(exact, controls=(ControlTime("a", 61, 0, 0),))) == 180


def test_duration_format_is_slurms() -> None:
    assert job.slurm_duration(60) == "00:01:00"
    assert job.slurm_duration(86400 + 3 * 3600 + 120) == "1-03:02:00"


def test_deadline_is_utc_and_needs_a_zone() -> None:
    assert "--deadline=2026-12-01T06:30:00" in job.sbatch_argv(GROUP, FULL_SITE)
    with pytest.raises(InvalidInput, match="zone"):
        job.sbatch_argv(replace(GROUP, until=datetime(2026, 12, 1)), FULL_SITE)
    assert job.submit_env({})["TZ"] == "UTC"


def test_every_slurm_command_runs_with_the_clean_environment_alone() -> None:
    controller = {"SLURM_CONF": "/etc/slurm/other.conf", "ROCR_VISIBLE_DEVICES": "7",
                  "HARNESS_GPU_MAP": "/tmp/map", "SBATCH_RESERVATION": "x", "SQUEUE_FORMAT": "%i",
                  "LD_PRELOAD": "/tmp/x.so", "PYTHONPATH": "/tmp", "HOME": "/home/op",
                  "PATH": "/opt/slurm/bin:/usr/bin", "TZ": "Europe/Paris"}
    assert job.submit_env(controller) == {"SLURM_CONF": "/etc/slurm/other.conf", "TZ": "UTC",
                                          "PATH": job.SCRIPT_PATH_ENV}
    assert job.submit_env({"SLURM_CONF": ""}) == {"TZ": "UTC", "PATH": job.SCRIPT_PATH_ENV}


def test_gres_typed_only_with_a_gfx_target() -> None:
    assert "--gres=gpu:1" in job.sbatch_argv(ONE, SITE)
    assert "--gres=gpu:gfx1100:1" in job.sbatch_argv(ONE, replace(SITE, gfx="gfx1100"))
    with pytest.raises(InvalidInput, match="gfx target"):
        job.sbatch_argv(ONE, replace(SITE, gfx="gpu:8"))


def test_excludes_sorted_deduplicated_bounded() -> None:
    assert "--exclude=node2,node7" in job.sbatch_argv(GROUP, FULL_SITE)
    many = tuple(f"n{i}" for i in range(job.MAX_EXCLUDE + 1))
    with pytest.raises(InvalidInput, match="excluded nodes"):
        job.sbatch_argv(replace(ONE, exclude=many), SITE)
    with pytest.raises(InvalidInput, match="excluded node"):
        job.sbatch_argv(replace(ONE, exclude=("node[1-9]",)), SITE)


def test_token_round_trip_and_determinism() -> None:
    token = job.token_of(GROUP)
    assert token == "harness+rehearsal-20261130T021500Z+4+2+rehearsal-gate0:rehearsal-gate0-inproc"
    assert token == job.token_of(replace(GROUP, exclude=()))  # a retry's exclude is no part
    assert job.parse_token(token) == Token(NIGHT, 4, 2, ("rehearsal-gate0",
                                                         "rehearsal-gate0-inproc"))
    assert job.token_of(replace(ONE, attempt=2)) != job.token_of(ONE)
    assert job.token_of(replace(ONE, slot=1)) != job.token_of(ONE)


@pytest.mark.parametrize("name", [
    "wrap", "", "harness", "harness+n+1+1", "harness+n+1+1+a+b", "harness+n+x+1+a",
    "harness+n+1+0+a", "harness+n+01+1+a", "harness+n+1+1+", "harness+n+1+1+a::b",
    "harness+.n+1+1+a", "harness+n+1+1+a\nb", "x" * 300, "harness+n+1+1+" + ":".join("a" * 17),
    "harness+n+1+1000+a",
])
def test_parse_token_refuses_what_it_did_not_make(name: str) -> None:
    assert job.parse_token(name) is None


@pytest.mark.parametrize("control", ["a\nb", "a b", "-rf", "a;b", "ä", "a/b", "", "x" * 65,
                                     "a'b", "a\x1bb", "a+b", "a:b", "a,b"])
def test_hostile_control_names_refused(control: str) -> None:
    spec = replace(ONE, controls=(ControlTime(control, 60, 10),))
    with pytest.raises(InvalidInput, match="control"):
        jobscript.job_script(spec, SITE)


@pytest.mark.parametrize("field,value,match", [
    ("harness", "harness", "absolute"), ("harness", "/bin/h\narness", "control character"),
    ("workdir", "/srv/../etc", "'..'"), ("drop", "/shared/%j", "'%'"),
    ("runs_dir", "/r\u2028x", "control character"), ("runs_dir", "/" + "r" * 2000, "1..1024"),
    ("partition", "a b", "partition"), ("account", "a\tb", "control character"),
    ("home_root", "home", "absolute"), ("runs_dir", "-rf", "start with '-'"),
])
def test_hostile_site_values_refused(field: str, value: str, match: str) -> None:
    site = replace(SITE, **{field: value})
    with pytest.raises(InvalidInput, match=match):
        job.sbatch_argv(ONE, site)
        jobscript.job_script(ONE, site)


@pytest.mark.parametrize("change,match", [
    ({"attempt": 0}, "attempt"), ({"attempt": True}, "attempt"), ({"slot": -1}, "slot"),
    ({"night": "a b"}, "night"), ({"controls": ()}, "1..16"),
    ({"controls": tuple(ControlTime(f"c{i}", 1, 1) for i in range(17))}, "1..16"),
    ({"controls": (ControlTime("a", float("nan"), 1),)}, "timeout"),
    ({"controls": (ControlTime("a", 40 * 86400, 1),)}, "timeout"),
    ({"controls": (ControlTime("a", 29 * 86400, 86400, 86400),)}, "more than"),
    ({"controls": (ControlTime("a", 60, 60000, 10000),)}, "--signal"),
    ({"preflight_s": -1}, "preflight"), ({"campaign_file": "c\n.yaml"}, "control character"),
    ({"campaign_file": "-h"}, "start with '-'"),  # `harness run -h` would print help, exit 0
])
def test_hostile_spec_values_refused(change: dict, match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        job.sbatch_argv(replace(ONE, **change), SITE)


def test_a_job_of_runs_needs_an_absolute_runs_dir() -> None:
    """Each member is told the run before by its path, which the run takes only absolute."""
    with pytest.raises(InvalidInput, match="runs_dir must be an absolute path"):
        job.sbatch_argv(GROUP_RUNS, replace(SITE, runs_dir="gpu-runs"))
    assert job.run_argv(ONE, replace(SITE, runs_dir="gpu-runs"))[-4] == "gpu-runs"  # one run


def test_script_execs_harness_run_with_every_value_quoted() -> None:
    script = jobscript.job_script(GROUP, FULL_SITE)
    lines = script.splitlines()
    assert lines[0] == "#!/bin/sh" and "set -eu" in lines
    exec_line = lines[-1]
    assert exec_line.startswith("exec ")
    argv = shlex.split(exec_line)[1:]
    assert argv == job.run_argv(GROUP, FULL_SITE)
    assert argv[:3] == [FULL_SITE.harness, "run", GROUP.campaign_file]
    assert argv[3:7] == ["--control", "rehearsal-gate0", "--control", "rehearsal-gate0-inproc"]
    assert argv[argv.index("--lock-timeout") + 1] == "1200s"
    assert shlex.split(next(x for x in lines if x.startswith("cd ")))[2] == FULL_SITE.workdir
    assert "HOME='/scratch/harness homes'/\"$SLURMD_NODENAME\"" in lines


def test_argv_shape_and_script_path() -> None:
    argv = job.sbatch_argv(ONE, SITE, sbatch="/usr/bin/sbatch")
    token = job.token_of(ONE)
    assert argv[0] == "/usr/bin/sbatch" and argv[1] == "--parsable"
    assert argv[-1] == f"/shared/drop/jobs/{token}.sh" == job.script_path(SITE, token)
    for option in ("--no-requeue", "--export=ALL", f"--job-name={token}",
                   "--signal=B:TERM@160", "--time=00:27:00",
                   f"--output=/shared/drop/jobs/{token}.%j.log"):
        assert option in argv
    assert not any(a.startswith(("--partition", "--account", "--deadline", "--exclude"))
                   for a in argv)


def test_run_id_names_one_controls_run_only() -> None:
    argv = job.run_argv(NIGHT_RUN, SITE)
    assert argv[argv.index("--run-id") + 1] == NIGHT_RUN.run_id
    assert argv[argv.index("--attempt") + 1] == "2"
    assert "--run-id" not in job.run_argv(ONE, SITE)
    with pytest.raises(InvalidInput, match="one control"):
        job.run_argv(replace(GROUP, run_id="x-1"), SITE)
    for bad in ("../etc", "a b", "x;rm", "-rf", "x" * 101):
        with pytest.raises(InvalidInput, match="run id"):
            job.run_argv(replace(ONE, run_id=bad), SITE)


def test_a_slurm_command_is_found_on_the_callers_path_and_sees_only_the_clean_env(tmp_path):
    from harness.measure.slurm import calls

    tool = tmp_path / "bin" / "fake-sbatch"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\nexec /usr/bin/env\n")
    tool.chmod(0o755)
    controller = {"PATH": f"{tool.parent}:/usr/bin", "SLURM_CONF": "/etc/slurm/c.conf",
                  "ROCR_VISIBLE_DEVICES": "7", "SBATCH_QOS": "high", "HOME": "/home/op"}
    r = calls._run(["fake-sbatch"], controller, 10)
    assert not isinstance(r, str) and r.returncode == 0, r
    seen = dict(line.split("=", 1) for line in r.stdout.splitlines())
    seen.pop("PWD", None)  # the shell's own
    seen.pop("SHLVL", None)
    assert seen == {"SLURM_CONF": "/etc/slurm/c.conf", "TZ": "UTC", "PATH": job.SCRIPT_PATH_ENV}
    assert calls._run(["no-such-sbatch"], controller, 10) == "no-such-sbatch: command not found"
