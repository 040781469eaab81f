"""Readers of Slurm's answers (squeue, sacct -P, jobcomp/filetxt) into one small state. Pure.

A run's status never comes from here (a `node-fail` job may have sealed `accepted`), and
a job missing from every answer is `unknown`, never failed. A line that cannot be read is
skipped and counted (or raised under `strict=True`); job steps only fill in a node."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from harness.base import bounds
from harness.base.bounds import BadText
from harness.base.errors import InvalidInput

SQUEUE_FORMAT = "%i|%j|%T|%N|%r"  # id, name, long state, nodes, reason
SACCT_FIELDS = "JobID,JobName,State,ExitCode,NodeList"
MAX_LINE = 8192
MAX_LINES = 500_000
MAX_ARRAY_TASKS = 100_000  # one compact id may stand for at most this many tasks


class JobState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"  # ended on its own: exit 0 or not (the sealed run says which status)
    CANCELLED = "cancelled"  # scancel, --deadline, preemption
    TIMEOUT = "timeout"
    NODE_FAIL = "node-fail"  # the host was lost to Slurm: retry elsewhere, after the seal
    UNKNOWN = "unknown"  # not found, or a state this module does not know


ENDED = frozenset({JobState.DONE, JobState.CANCELLED, JobState.TIMEOUT, JobState.NODE_FAIL})

_P, _R, _D = JobState.PENDING, JobState.RUNNING, JobState.DONE
_C, _T, _N = JobState.CANCELLED, JobState.TIMEOUT, JobState.NODE_FAIL
# Slurm's long names and squeue's short codes (%t). REQUEUED jobs go back to pending:
# a site may requeue even though the harness submits with --no-requeue.
STATE_MAP: dict[str, JobState] = {
    "PENDING": _P, "PD": _P, "REQUEUED": _P, "RQ": _P, "REQUEUE_HOLD": _P, "RH": _P,
    "REQUEUE_FED": _P, "RF": _P, "RESV_DEL_HOLD": _P, "RD": _P, "POWER_UP_NODE": _P,
    "CONFIGURING": _R, "CF": _R, "RUNNING": _R, "R": _R, "COMPLETING": _R, "CG": _R,
    "SUSPENDED": _R, "S": _R, "STOPPED": _R, "ST": _R, "RESIZING": _R, "RS": _R,
    "SIGNALING": _R, "SI": _R, "STAGE_OUT": _R, "SO": _R, "UPDATE_DB": _R,
    "COMPLETED": _D, "CD": _D, "FAILED": _D, "F": _D, "SPECIAL_EXIT": _D, "SE": _D,
    "OUT_OF_MEMORY": _D, "OOM": _D,
    "CANCELLED": _C, "CA": _C, "DEADLINE": _C, "DL": _C, "PREEMPTED": _C, "PR": _C,
    "REVOKED": _C, "RV": _C,
    "TIMEOUT": _T, "TO": _T,
    "NODE_FAIL": _N, "NF": _N, "BOOT_FAIL": _N, "BF": _N,
}

_JOB_ID = re.compile(r"(?P<job>[0-9]{1,12})(?:\+[0-9]{1,6})?"
                     r"(?:_(?P<task>[0-9]{1,10}|\[(?P<range>[0-9,\-%]{1,1000})\]))?"
                     r"(?:\.(?P<step>batch|extern|interactive|[0-9]{1,10}(?:\+[0-9]{1,6})?))?")
_CANCELLED_BY = re.compile(r"CANCELLED by ([0-9]{1,10})")
_NO_NODE = frozenset({"", "None assigned", "(null)", "(None)"})
_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9]{0,40})=")


@dataclass(frozen=True)
class Job:
    """What Slurm says about one job (or one array task)."""

    job_id: str  # "123" or "123_4"
    name: str
    state: JobState
    raw_state: str = ""
    node: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None  # squeue's %r (Resources, ReqNodeNotAvail, ...)
    cancelled_by: str | None = None  # the uid in sacct's "CANCELLED by 0"


@dataclass
class Parsed:
    """The jobs read, by id; the lines skipped, each as `line N: why`."""

    jobs: dict[str, Job] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)


class Unreadable(ValueError):
    """One line that is not what the format promises; its message says why."""


def map_state(raw: str) -> JobState:
    """Slurm's state text (`CANCELLED by 0`, `RUNNING`, `CD`, `CANCELLED+`) -> JobState."""
    word = raw.strip().split(" ", 1)[0].rstrip("+") if raw.strip() else ""
    return STATE_MAP.get(word, JobState.UNKNOWN)


def expand_array(job: str, ranges: str) -> list[str]:
    """`123`, `1-5%2` -> 123_1 ... 123_5 (the `%2` is a throttle, not a task). Pure."""
    spec, pct, throttle = ranges.partition("%")
    try:
        if pct:
            bounds.parse_int(throttle, "array throttle", max_digits=6)
        spans = bounds.parse_ranges(spec, "array range", max_elements=MAX_ARRAY_TASKS,
                                    max_digits=10)
    except BadText as e:
        raise Unreadable(f"[{ranges[:80]}]: {e.message}") from None
    return [f"{job}_{n}" for span in spans for n in range(span.low, span.high + 1)]


def split_id(text: str) -> tuple[list[str], str | None]:
    """A JobID field -> (the job ids it names, its step or None). Pure."""
    m = _JOB_ID.fullmatch(text.strip())
    if not m:
        raise Unreadable(f"not a job id: {text.strip()[:80]!r}")
    job, task, ranges = m.group("job"), m.group("task"), m.group("range")
    if ranges is not None:
        ids = expand_array(job, ranges)
    else:
        ids = [f"{job}_{task}" if task is not None else job]
    return ids, m.group("step")


def parse_exit(text: str) -> tuple[int | None, int | None]:
    """`code:signal` -> (code, signal); empty -> (None, None)."""
    text = text.strip()
    if not text:
        return None, None
    m = re.fullmatch(r"([0-9]{1,3}):([0-9]{1,3})", text)
    if not m:
        raise Unreadable(f"not an exit code: {text[:40]!r}")
    return int(m.group(1)), int(m.group(2))


def _node(text: str) -> str | None:
    text = text.strip()
    return None if text in _NO_NODE else text


def _lines(text: str, what: str, strict: bool, parsed: Parsed) -> Iterable[tuple[int, str]]:
    """Non-empty lines with their numbers; overlong ones and control characters skipped."""
    for number, line in enumerate(text.splitlines(), 1):
        if number > MAX_LINES:
            _skip(parsed, what, number, f"more than {MAX_LINES} lines", strict)
            return
        if not line.strip():
            continue
        try:
            bounds.check_line(line, "the line", max_len=MAX_LINE)
        except BadText as e:
            _skip(parsed, what, number, e.message, strict)
            continue
        yield number, line


def _skip(parsed: Parsed, what: str, number: int, why: str, strict: bool) -> None:
    if strict:
        raise InvalidInput(f"{what} line {number}: {why}")
    parsed.skipped.append(f"line {number}: {why}")


def _fields(line: str, count: int) -> list[str]:
    """`|`-separated fields; a name holding `|` is rejoined (it is the 2nd field)."""
    parts = line.split("|")
    if len(parts) < count:
        raise Unreadable(f"{len(parts)} fields, expected {count}")
    tail = count - 2
    return [parts[0], "|".join(parts[1:len(parts) - tail]), *parts[len(parts) - tail:]]


def _cancelled_by(raw: str) -> str | None:
    m = _CANCELLED_BY.fullmatch(raw.strip())
    return m.group(1) if m else None


def parse_sacct(text: str, *, strict: bool = False) -> Parsed:
    """`sacct -P -n -o JobID,JobName,State,ExitCode,NodeList` -> Parsed. Pure."""
    parsed, steps = Parsed(), []
    for number, line in _lines(text, "sacct", strict, parsed):
        try:
            job_id, name, raw, exit_text, nodes = _fields(line, 5)
            ids, step = split_id(job_id)
            code, sig = parse_exit(exit_text)
        except Unreadable as e:
            _skip(parsed, "sacct", number, str(e), strict)
            continue
        for one in ids:
            job = Job(one, name, map_state(raw), raw.strip(), _node(nodes), code, sig,
                      None, _cancelled_by(raw))
            if step is None:
                parsed.jobs[one] = job
            else:
                steps.append(job)
    for step in steps:
        parent = parsed.jobs.get(step.job_id)
        if parent is not None and parent.node is None and step.node is not None:
            parsed.jobs[step.job_id] = replace(parent, node=step.node)
    return parsed


def parse_squeue(text: str, *, strict: bool = False) -> Parsed:
    """`squeue -h -t all -o '%i|%j|%T|%N|%r'` (SQUEUE_FORMAT) -> Parsed. Pure."""
    parsed = Parsed()
    for number, line in _lines(text, "squeue", strict, parsed):
        try:
            job_id, name, raw, nodes, reason = _fields(line, 5)
            ids, step = split_id(job_id)
            if step is not None:
                raise Unreadable(f"squeue lists jobs, not steps: {job_id!r}")
        except Unreadable as e:
            _skip(parsed, "squeue", number, str(e), strict)
            continue
        reason = reason.strip()
        for one in ids:
            parsed.jobs[one] = Job(one, name, map_state(raw), raw.strip(), _node(nodes),
                                   reason=None if reason in ("", "None") else reason)
    return parsed


def parse_jobcomp_line(line: str) -> dict[str, str]:
    """`JobId=1 Name=a b JobState=...` -> {key: value}; a value runs to the next ` Key=`. Pure."""
    marks = list(_KEY.finditer(line))
    if not marks or marks[0].start() != 0:
        raise Unreadable("not key=value text")
    out: dict[str, str] = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(line)
        key = m.group(1)
        if key in out:
            raise Unreadable(f"key {key} twice")
        out[key] = line[m.end():end].strip()
    return out


def _jobcomp_job(fields: Mapping[str, str]) -> Job:
    for key in ("JobId", "Name", "JobState"):
        if key not in fields:
            raise Unreadable(f"no {key}=")
    job_id = fields["JobId"]
    array, task = fields.get("ArrayJobId", ""), fields.get("ArrayTaskId", "")
    if array and task:  # Slurm 22.05 writes the last task under the array's own JobId
        job_id = f"{array}_{task}"
    ids, step = split_id(job_id)
    if len(ids) != 1 or step is not None:
        raise Unreadable(f"jobcomp names one job, not {job_id!r}")
    code, sig = parse_exit(fields.get("ExitCode", ""))
    raw = fields["JobState"]
    return Job(ids[0], fields["Name"], map_state(raw), raw, _node(fields.get("NodeList", "")),
               code, sig, None, _cancelled_by(raw))


def parse_jobcomp(text: str, *, strict: bool = False) -> Parsed:
    """jobcomp/filetxt lines -> Parsed. A job listed twice (requeued) keeps its last line."""
    parsed = Parsed()
    for number, line in _lines(text, "jobcomp", strict, parsed):
        try:
            job = _jobcomp_job(parse_jobcomp_line(line.strip()))
        except Unreadable as e:
            _skip(parsed, "jobcomp", number, str(e), strict)
            continue
        parsed.jobs[job.job_id] = job
    return parsed


def combine(live: Parsed | None, *history: Parsed | None) -> dict[str, Job]:
    """One view, pure: squeue's live answer wins (a requeued job's history holds its earlier
    end); sacct/jobcomp fill in jobs it no longer lists, and the exit code of a live end."""
    jobs: dict[str, Job] = {}
    for source in reversed([p for p in history if p is not None]):
        jobs.update(source.jobs)
    for job_id, job in (live.jobs.items() if live is not None else ()):
        old = jobs.get(job_id)
        if old is not None and job.exit_code is None and job.state in ENDED \
                and old.state in ENDED:
            job = replace(job, exit_code=old.exit_code, signal=old.signal,
                          cancelled_by=job.cancelled_by or old.cancelled_by)
        jobs[job_id] = job
    return jobs


def by_name(jobs: Mapping[str, Job]) -> dict[str, list[Job]]:
    """Jobs grouped by name (the idempotency token), oldest job id first."""
    out: dict[str, list[Job]] = {}
    for job in jobs.values():
        out.setdefault(job.name, []).append(job)
    for found in out.values():
        found.sort(key=lambda j: _id_key(j.job_id))
    return out


def _id_key(job_id: str) -> tuple[int, int]:
    job, _, task = job_id.partition("_")
    return int(job), int(task) if task else -1


def squeue_argv(names: Iterable[str] = (), squeue: str = "squeue") -> list[str]:
    """One squeue call for the night's jobs, all states: ended jobs stay listed for MinJobAge,
    which lets a restarted controller find a job without accounting."""
    argv = [squeue, "-h", "-t", "all", "-o", SQUEUE_FORMAT]
    wanted = sorted(set(names))
    for name in wanted:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+:-]{0,239}", name):
            raise InvalidInput(f"squeue: not a job name to ask for: {name[:80]!r}")
    return [*argv, f"--name={','.join(wanted)}"] if wanted else argv


def sacct_argv(job_ids: Iterable[str], sacct: str = "sacct") -> list[str]:
    """One batched sacct call by job id (per-job polling exhausts Slurm's RPC limits)."""
    ids = set(job_ids)
    for one in ids:
        if not re.fullmatch(r"[0-9]{1,12}(?:_[0-9]{1,10})?", one):
            raise InvalidInput(f"sacct: not a job id: {one[:80]!r}")
    if not ids:  # sacct without -j lists every job of the day: never what is meant
        raise InvalidInput("sacct: no job ids to ask for")
    return [sacct, "-P", "-n", "-o", SACCT_FIELDS, "-j", ",".join(sorted(ids, key=_id_key))]
