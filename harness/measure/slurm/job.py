"""The sbatch argv of one control attempt (or one `same_host` group). Pure.

Pure and golden-tested, so a controller restarted after `kill -9` rebuilds the very same
job from the same row. Why these options:
- `--job-name` is an idempotency token a restarted controller finds in squeue/sacct.
- `--time` covers the whole attempt plus the signal lead, in whole minutes.
- `--signal=B:TERM@N`: the harness stops its container and seals `interrupted` before
  the time limit kills it.
- `--no-requeue`: a run is sealed once; a retry is a new attempt with a new token.
- `--export=ALL` of `submit_env` alone: nothing of the controller's environment reaches
  the job; `NIL`/`NONE` would build it from a login shell on the node (docs/slurm.md).
- `--deadline` from `--until`, in UTC (sbatch runs with TZ=UTC).
Every value is checked by `slurm.values` first."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from harness.base.errors import InvalidInput
from harness.base.names import is_name
from harness.base.timeutil import iso
from harness.config.samehost import MAX_GROUP
from harness.measure.slurm.values import (
    ID_MAX,
    MAX_TIME_S,
    count,
    has_control,
    matching,
    name,
    path,
    seconds,
)

TOKEN_PREFIX = "harness"
SEP = "+"  # token fields: never in a name, safe for the shell and for `--name=` filters
GROUP_SEP = ":"  # control names within a same_host group's token
SIGNAL_SLACK_S = 60  # Slurm may deliver --signal up to a minute early (its event resolution)
MAX_SIGNAL_S = 65535  # Slurm's bound on --signal's @time
MAX_EXCLUDE = 256
TOKEN_MAX = 240  # job names are stored in 255-character columns by slurmdbd
# Runs one job carries: a slot's next controls (at most MAX_GROUP), where the last launch
# taken may be a whole same_host group (at most MAX_GROUP more).
MAX_JOB_RUNS = 2 * MAX_GROUP
DROP_BUNDLES = "bundles"  # hosts export sealed runs to <drop>/bundles/<run-id>.tar.gz
SCRIPT_PATH_ENV = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# sbatch parses --deadline in its own local time; PATH is the job script's own.
SUBMIT_ENV = {"TZ": "UTC", "PATH": SCRIPT_PATH_ENV}
SUBMIT_PASSED = ("SLURM_CONF",)  # which cluster: the only setting taken from the controller

_GFX = re.compile(r"gfx[0-9a-f]{3,6}")
_COUNT = re.compile(r"0|[1-9][0-9]{0,5}")


@dataclass(frozen=True)
class ControlTime:
    """One control's share of the job's time: its timeout, stop grace and post-steps."""

    name: str
    timeout_s: float
    stop_grace_s: float
    post_steps_s: float = 0.0


@dataclass(frozen=True)
class JobSpec:
    """What one job runs: which night, slot and attempt, which controls, how long."""

    night: str  # the night's id (its folder name, `<campaign>-<UTC stamp>`)
    campaign_file: str  # as `harness run` takes it, relative to Site.workdir or absolute
    controls: tuple[ControlTime, ...]  # one, or several (a group, a slot's next) in this order
    slot: int  # the plan slot (index) of the first control
    attempt: int
    preflight_s: float = 120.0  # image and device checks before the first control
    seal_s: float = 60.0  # seal, verify and export after each control
    lock_wait_s: float = 600.0  # passed to `harness run --lock-timeout`, and budgeted
    until: datetime | None = None  # the night's --until: becomes --deadline
    exclude: tuple[str, ...] = ()  # nodes this attempt must avoid (earlier node failures)
    run_id: str | None = None  # the run folder's name the controller journaled (one control)
    runs: tuple[tuple[str, int], ...] = ()  # several runs' (run id, attempt), per control
    stop_policy: str = "continue"  # the night's: under a stop policy a run waits for the verdict


@dataclass(frozen=True)
class Site:
    """Where things are on the hosts, and which slice of the cluster the night uses."""

    harness: str  # absolute path of the `harness` executable on every host
    workdir: str  # absolute: the checkout the campaign's relative paths start from
    runs_dir: str  # run folders, on the host's local disk
    drop: str  # shared folder: job scripts and logs land in <drop>/jobs
    partition: str | None = None
    account: str | None = None
    gfx: str | None = None  # e.g. gfx1100: ask for a typed GPU
    home_root: str | None = None  # HOME=<home_root>/<node>: simulated hosts, NFS homes


@dataclass(frozen=True)
class Token:
    """A job name read back: which night, slot, attempt and controls it runs."""

    night: str
    slot: int
    attempt: int
    controls: tuple[str, ...]


def make_token(night: str, slot: int, attempt: int, controls: tuple[str, ...]) -> str:
    """The job name: `harness+<night>+<slot>+<attempt>+<control>[:<control>...]`. Pure and
    deterministic, so a query by name finds a job a dead controller already submitted."""
    night = name("night", night, ID_MAX)
    count("slot", slot, 0, 999_999)
    count("attempt", attempt, 1, 999)
    if not controls or len(controls) > MAX_JOB_RUNS:
        raise InvalidInput(f"slurm job: a job runs 1..{MAX_JOB_RUNS} controls, "
                           f"not {len(controls)}")
    names = [name("control", c) for c in controls]
    token = SEP.join([TOKEN_PREFIX, night, str(slot), str(attempt), GROUP_SEP.join(names)])
    if len(token) > TOKEN_MAX:
        raise InvalidInput(f"slurm job: the job name would be {len(token)} characters "
                           f"(at most {TOKEN_MAX}); shorten the night or control names")
    return token


def parse_token(token: str) -> Token | None:
    """The token's fields, or None when `token` is not a token this module made. Pure."""
    if not isinstance(token, str) or len(token) > TOKEN_MAX or has_control(token):
        return None
    parts = token.split(SEP)
    if len(parts) != 5 or parts[0] != TOKEN_PREFIX:
        return None
    _, night, slot, attempt, group = parts
    controls = tuple(group.split(GROUP_SEP))
    if not is_name(night, ID_MAX) or not _COUNT.fullmatch(slot) \
            or not _COUNT.fullmatch(attempt) or int(attempt) < 1 or int(attempt) > 999 \
            or not 1 <= len(controls) <= MAX_JOB_RUNS \
            or not all(is_name(c) for c in controls):
        return None
    return Token(night, int(slot), int(attempt), controls)


def token_of(spec: JobSpec) -> str:
    return make_token(spec.night, spec.slot, spec.attempt, tuple(c.name for c in spec.controls))


def signal_lead_s(spec: JobSpec) -> int:
    """Seconds before the time limit that SIGTERM is sent: enough to stop and seal. Pure."""
    grace = max(seconds("stop_grace", c.stop_grace_s) for c in spec.controls)
    post = max(seconds("post_steps", c.post_steps_s) for c in spec.controls)
    lead = math.ceil(grace + post + seconds("seal", spec.seal_s)) + SIGNAL_SLACK_S
    if lead > MAX_SIGNAL_S:
        raise InvalidInput(f"slurm job: the stop grace, post-steps and seal need {lead} s, "
                           f"more than Slurm's --signal allows ({MAX_SIGNAL_S} s)")
    return lead


def time_limit_s(spec: JobSpec) -> int:
    """The job's --time in seconds, rounded up to whole minutes. Pure.

    Every second the harness may use (per run: lock wait, preflight, timeout, stop grace,
    post-steps, seal) plus the signal lead, so the harness's own timeout always fires first."""
    starts = len(spec.runs) or 1
    total = starts * (seconds("lock_wait", spec.lock_wait_s)
                      + seconds("preflight", spec.preflight_s))
    for c in spec.controls:
        total += sum(seconds(label, v) for label, v in (
            ("timeout", c.timeout_s), ("stop_grace", c.stop_grace_s),
            ("post_steps", c.post_steps_s), ("seal", spec.seal_s)))
    total += signal_lead_s(spec)
    limit = math.ceil(total / 60) * 60
    if limit > MAX_TIME_S:
        raise InvalidInput(f"slurm job: the attempt needs {limit} s, more than {MAX_TIME_S}")
    return max(limit, 60)


def slurm_duration(seconds: int) -> str:
    """Slurm's `[D-]HH:MM:SS` for whole minutes (sbatch reads a bare number as minutes)."""
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    text = f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def slurm_deadline(until: datetime) -> str:
    """--deadline's value, in UTC (sbatch must parse it with TZ=UTC: SUBMIT_ENV). Pure."""
    if not isinstance(until, datetime) or until.tzinfo is None:
        raise InvalidInput("slurm job: --until must be a time with a zone")
    return iso(until)[:19]  # whole seconds, no zone: Slurm's form (cut, so never later)


def gres(gfx: str | None) -> str:
    """One GPU, typed by gfx target when the campaign names one (gres.conf `Type=`)."""
    return "gpu:1" if gfx is None else f"gpu:{matching('gfx target', gfx, _GFX)}:1"


def script_path(site: Site, token: str) -> str:
    """Where the job's script is written: in the shared drop, named by its token."""
    return f"{drop_dir(site)}/jobs/{token}.sh"


def log_path(site: Site, token: str) -> str:
    """The job's stdout and stderr (`%j`: Slurm puts the job id in)."""
    return f"{drop_dir(site)}/jobs/{token}.%j.log"


def drop_dir(site: Site) -> str:
    """The shared drop folder, checked: job scripts, logs and bundles go below it."""
    drop = path("drop", site.drop).rstrip("/") or "/"
    if "%" in drop or "\\" in drop:  # sbatch would expand them as filename patterns
        raise InvalidInput(f"slurm job: drop must not contain '%' or '\\': {drop!r}")
    return drop


def _excludes(nodes: tuple[str, ...]) -> list[str]:
    if len(nodes) > MAX_EXCLUDE:
        raise InvalidInput(f"slurm job: at most {MAX_EXCLUDE} excluded nodes, not {len(nodes)}")
    return sorted({name("excluded node", n) for n in nodes})


def submit_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The whole environment of every Slurm command and job: SUBMIT_ENV plus SUBMIT_PASSED."""
    passed = {k: environ[k] for k in SUBMIT_PASSED if environ.get(k)}
    return {**passed, **SUBMIT_ENV}


def sbatch_argv(spec: JobSpec, site: Site, sbatch: str = "sbatch") -> list[str]:
    """The submit command, options in a fixed order, the script last. Pure. The script's
    values are checked here too: a job that could not be scripted is never submitted."""
    token = token_of(spec)
    run_argv(spec, site)
    group_runs(spec)
    argv = [sbatch, "--parsable", f"--job-name={token}", f"--gres={gres(site.gfx)}",
            "--nodes=1", "--ntasks=1", f"--time={slurm_duration(time_limit_s(spec))}",
            f"--signal=B:TERM@{signal_lead_s(spec)}", "--no-requeue", "--export=ALL",
            f"--output={log_path(site, token)}"]
    if site.partition is not None:
        argv.append(f"--partition={name('partition', site.partition)}")
    if site.account is not None:
        argv.append(f"--account={name('account', site.account)}")
    if spec.until is not None:
        argv.append(f"--deadline={slurm_deadline(spec.until)}")
    if spec.exclude:
        argv.append(f"--exclude={','.join(_excludes(spec.exclude))}")
    argv.append(script_path(site, token))
    return argv


def run_argv(spec: JobSpec, site: Site, member: int | None = None) -> list[str]:
    """The `harness run` command the job becomes (for a group member, its own run)."""
    argv = [path("harness", site.harness), "run",
            path("campaign file", spec.campaign_file, relative_ok=True)]
    if member is not None:
        run_id, attempt = group_runs(spec)[member]
        argv += ["--control", spec.controls[member].name, "--run-id", run_id,
                 "--attempt", str(attempt)]
    else:
        for c in spec.controls:
            argv += ["--control", c.name]
    if member is None and spec.run_id is not None:  # the controller finds the sealed run
        if len(spec.controls) != 1:
            raise InvalidInput("slurm job: a run id names one control's run, not a group's")
        argv += ["--run-id", name("run id", spec.run_id, ID_MAX),
                 "--attempt", str(count("attempt", spec.attempt, 1, 999))]
    # a job of several runs names the run before by its path (claim.handover_of): absolute
    argv += ["--runs-dir", path("runs_dir", site.runs_dir, relative_ok=not spec.runs),
             "--lock-timeout", f"{math.ceil(seconds('lock_wait', spec.lock_wait_s))}s",
             "--json-lines"]
    return argv


def group_runs(spec: JobSpec) -> tuple[tuple[str, int], ...]:
    """A group's (run id, attempt) per member, checked: one per control, each the control's."""
    if not spec.runs:
        return ()
    if spec.run_id is not None or len(spec.runs) != len(spec.controls):
        raise InvalidInput(f"slurm job: a group needs one run per control ({len(spec.controls)})"
                           f", not {len(spec.runs)}, and no single run id")
    checked = []
    for c, (run_id, attempt) in zip(spec.controls, spec.runs, strict=True):
        run_id = name("run id", run_id, ID_MAX)
        if not run_id.startswith(f"{c.name}-"):
            raise InvalidInput(f"slurm job: run id {run_id!r} is not control {c.name!r}'s")
        checked.append((run_id, count("attempt", attempt, 1, 999)))
    if len({r for r, _ in checked}) != len(checked):
        raise InvalidInput("slurm job: a job names one run id twice")
    return tuple(checked)
