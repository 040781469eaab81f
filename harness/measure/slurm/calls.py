"""The thin shell between the Slurm executor and the Slurm commands: submit, poll, cancel.

Every call has a timeout: a Slurm client without its controller retries for a minute.
A transiently failed submission may still have been accepted, so the executor looks its
token up before sending it again; only a rejected one is final."""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from harness.base import atomic
from harness.base.errors import InvalidInput
from harness.base.names import is_name
from harness.measure.slurm import job, query
from harness.measure.slurm import script as jobscript
from harness.measure.slurm.query import Job, Parsed

# Messages after which the same sbatch may well succeed later (or did succeed already).
TRANSIENT = ("unable to contact slurm controller", "socket timed out", "temporarily unable",
             "resource temporarily unavailable", "zero bytes were transmitted",
             "connection refused", "connection reset", "transport endpoint",
             "communication connection failure", "slurm_persist_conn", "retrying")
MAX_JOBCOMP_BYTES = 64 * 1024 * 1024  # read the newest part of a larger file only
MAX_TAIL = 4 * query.MAX_LINE + 4  # bytes of an unfinished jobcomp line waited for
MAX_OUTPUT = 16 * 1024 * 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class SubmitAnswer(StrEnum):
    """What one sbatch answered; REJECTED is final, TRANSIENT may be tried again."""

    SUBMITTED = "submitted"
    TRANSIENT = "transient"
    REJECTED = "rejected"


@dataclass(frozen=True)
class Submitted:
    """What one sbatch gave: its answer (job_id set when SUBMITTED) and Slurm's message."""

    kind: SubmitAnswer
    job_id: str | None = None
    message: str = ""


@dataclass
class Poll:
    """One batched status query: the jobs seen, whether squeue answered (without it absence
    means nothing), whether sacct or jobcomp answered, and each failed source's message."""

    jobs: dict[str, Job] = field(default_factory=dict)
    live: bool = True
    history_complete: bool = False
    errors: list[str] = field(default_factory=list)
    skipped: int = 0


def parse_job_id(stdout: str) -> str:
    """`sbatch --parsable` prints `<job id>` or `<job id>;<cluster>`. Pure."""
    text = stdout.strip()
    m = re.fullmatch(r"([0-9]{1,12})(?:;[A-Za-z0-9._-]{1,64})?", text)
    if not m:
        raise InvalidInput(f"sbatch: not a job id: {text[:80]!r}")
    return m.group(1)


def classify(returncode: int, stderr: str) -> SubmitAnswer:
    """TRANSIENT or REJECTED for a failed sbatch. Pure. Unknown failures are transient: the
    token lookup before any resubmission keeps that safe; a wrong REJECTED could lose a run."""
    text = stderr.lower()
    if returncode != 0 and not any(t in text for t in TRANSIENT) \
            and ("batch job submission failed" in text or "invalid" in text):
        return SubmitAnswer.REJECTED
    return SubmitAnswer.TRANSIENT


def _run(argv: list[str], env: Mapping[str, str] | None, timeout_s: float,
         ) -> subprocess.CompletedProcess | str:
    """The finished process or why it could not run; it runs with `job.submit_env` alone."""
    environ = os.environ if env is None else env
    command = shutil.which(argv[0], path=environ.get("PATH", os.defpath))
    if command is None:
        return f"{argv[0]}: command not found"
    try:
        return subprocess.run([command, *argv[1:]], capture_output=True, text=True,
                              env=job.submit_env(environ), timeout=timeout_s, check=False)
    except FileNotFoundError:
        return f"{argv[0]}: command not found"
    except subprocess.TimeoutExpired:
        return f"{argv[0]}: no answer within {timeout_s:g} s"


def submit(spec: job.JobSpec, site: job.Site, *, env: Mapping[str, str] | None = None,
           timeout_s: float = 30.0, sbatch: str = "sbatch") -> Submitted:
    """Write the job's script into the drop (atomically) and sbatch it once."""
    token = job.token_of(spec)
    argv = job.sbatch_argv(spec, site, sbatch)  # checks every value before any write
    script = Path(job.script_path(site, token))
    script.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(script, jobscript.job_script(spec, site), mode=0o644)
    r = _run(argv, env, timeout_s)
    if isinstance(r, str):
        return Submitted(SubmitAnswer.TRANSIENT, message=r)
    message = r.stderr.strip()[-2000:]
    if r.returncode != 0:
        return Submitted(classify(r.returncode, r.stderr), message=message)
    try:
        return Submitted(SubmitAnswer.SUBMITTED, parse_job_id(r.stdout), message)
    except InvalidInput as e:  # accepted, we cannot tell as what: the token will say
        return Submitted(SubmitAnswer.TRANSIENT, message=e.message)


def _parsed(r: subprocess.CompletedProcess | str, what: str,
            reader: Callable[[str], Parsed], poll: Poll) -> Parsed | None:
    if isinstance(r, str) or r.returncode != 0:
        poll.errors.append(r if isinstance(r, str) else f"{what}: {r.stderr.strip()[:500]}")
        return None
    parsed = reader(r.stdout[:MAX_OUTPUT])
    poll.skipped += len(parsed.skipped)
    return parsed


class JobcompTail:
    """The jobcomp file followed from poll to poll: the first read takes its newest
    MAX_JOBCOMP_BYTES, each later one only the whole lines appended since (a line still
    being written waits for the next poll). A file replaced (another inode) or truncated is
    read again from the newest bound. The file is the cluster's, writable by others: it must
    be a regular file, each read is bounded, and every line goes through the parser's checks.
    `keep` picks the jobs remembered between polls (a night's own, not the cluster's)."""

    def __init__(self, path: Path, keep: Callable[[Job], bool] | None = None) -> None:
        self.path, self.keep = path, keep
        self.file: tuple[int, int] | None = None  # (st_dev, st_ino) of the file followed
        self.offset = 0  # bytes of it taken: up to the end of the last whole line
        self.mid_line = False  # the next bytes end a line that is dropped, not parsed
        self.jobs: dict[str, Job] = {}  # every kept job read so far; the last line wins

    def read(self) -> Parsed:
        """Take what was appended since the last read: the jobs known, and the lines skipped
        by this read alone. OSError when the file cannot be read or is not a regular file."""
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC  # a FIFO never blocks
        with open(os.open(self.path, flags), "rb") as f:
            found = os.fstat(f.fileno())
            if not stat.S_ISREG(found.st_mode):
                raise OSError(errno.EINVAL, "not a regular file")
            size = found.st_size
            if (found.st_dev, found.st_ino) != self.file or size < self.offset:
                self.file, self.offset, self.mid_line, self.jobs = \
                    (found.st_dev, found.st_ino), 0, False, {}
            if size - self.offset > MAX_JOBCOMP_BYTES:  # first read, or far behind: the newest
                self.offset, self.mid_line = size - MAX_JOBCOMP_BYTES, True
            f.seek(self.offset)
            chunk = f.read(size - self.offset)
        return self._take(chunk)

    def _take(self, chunk: bytes) -> Parsed:
        """Parse the chunk's whole lines and move past them; a line that outgrew MAX_TAIL
        without its newline is dropped (the parser would refuse it) up to that newline."""
        start, skipped = 0, []
        if self.mid_line:
            cut = chunk.find(b"\n")
            if cut < 0:
                self.offset += len(chunk)
                return Parsed(self.jobs)
            start, self.mid_line = cut + 1, False
        end = chunk.rfind(b"\n", start) + 1 or start
        parsed = query.parse_jobcomp(chunk[start:end].decode("utf-8", errors="replace"))
        if len(chunk) - end > MAX_TAIL:
            skipped.append(f"a line longer than {MAX_TAIL} bytes")
            end, self.mid_line = len(chunk), True
        self.offset += end
        for one in parsed.jobs.values():
            if self.keep is None or self.keep(one):
                self.jobs.pop(one.job_id, None)  # newest last: a requeued job's end moves on
                self.jobs[one.job_id] = one
        return Parsed(self.jobs, [*parsed.skipped, *skipped])


def poll(names: Iterable[str], job_ids: Iterable[str], *, use_sacct: bool = False,
         jobcomp: Path | JobcompTail | None = None, env: Mapping[str, str] | None = None,
         timeout_s: float = 30.0) -> Poll:
    """One squeue call (by token), plus sacct (by id) or the jobcomp file (a path: read once;
    a tail: what was appended since its last read). A failed source is an error, never a
    state: its jobs are absent, which means unknown."""
    out = Poll()
    live = _parsed(_run(query.squeue_argv(names), env, timeout_s), "squeue",
                   query.parse_squeue, out)
    history = []
    ids = list(job_ids)
    if use_sacct and ids:
        history.append(_parsed(_run(query.sacct_argv(ids), env, timeout_s), "sacct",
                               query.parse_sacct, out))
    if jobcomp is not None:
        tail = jobcomp if isinstance(jobcomp, JobcompTail) else JobcompTail(jobcomp)
        try:
            history.append(tail.read())
            out.skipped += len(history[-1].skipped)
        except OSError as e:
            out.errors.append(f"jobcomp: {tail.path}: {e.strerror or e}")
    out.live = live is not None
    out.history_complete = any(h is not None for h in history)
    out.jobs = query.combine(live, *history)
    return out


def cancel(job_ids: Iterable[str], *, env: Mapping[str, str] | None = None,
           timeout_s: float = 30.0) -> str | None:
    """scancel the jobs whatever their state (a token's duplicates); None when Slurm took it."""
    ids = _checked(job_ids)
    if not ids:
        return None
    return _answer(_run(["scancel", *ids], env, timeout_s), "scancel")


def cancel_pending(job_ids: Iterable[str], *, env: Mapping[str, str] | None = None,
                   timeout_s: float = 30.0) -> str | None:
    """Cancel only those of the jobs that have not started; None when Slurm took it.

    A plain scancel can kill a job that started since the last poll. So: `scontrol uhold`
    (under the controller's lock) stops pending jobs from starting, `scancel --state=PENDING`
    cancels exactly those, and the release lifts the hold from the running ones (a requeued
    job would otherwise wait forever)."""
    ids = _checked(job_ids)
    if not ids:
        return None
    _run(["scontrol", "uhold", *ids], env, timeout_s)  # a running job: no effect
    problem = _answer(_run(["scancel", "--state=PENDING", *ids], env, timeout_s), "scancel")
    _run(["scontrol", "release", *ids], env, timeout_s)
    return problem


DRAIN_REASON_MAX = 200


def drain_argv(node: str, reason: str) -> list[str]:
    """`scontrol update NodeName=N State=DRAIN Reason=...`. Pure. The node must be one plain
    name (a pattern would drain others); the reason is cut to one printable ASCII line."""
    if not is_name(node):  # one plain name, never a list or a pattern
        raise InvalidInput(f"scontrol: not a node name: {str(node)[:80]!r}")
    text = " ".join("".join(c if " " <= c <= "~" else " " for c in reason).split())
    return ["scontrol", "update", f"NodeName={node}", "State=DRAIN",
            f"Reason={text[:DRAIN_REASON_MAX] or 'harness doctor'}"]


def drain(node: str, reason: str, *, env: Mapping[str, str] | None = None,
          timeout_s: float = 30.0) -> str | None:
    """Drain the node (Slurm's HealthCheckProgram way); None when Slurm took it, else why."""
    return _answer(_run(drain_argv(node, reason), env, timeout_s), "scontrol update")


def _checked(job_ids: Iterable[str]) -> list[str]:
    ids = sorted(set(job_ids))
    if ids:
        query.sacct_argv(ids)  # the same check of every id
    return ids


def _answer(r: subprocess.CompletedProcess | str, what: str) -> str | None:
    if isinstance(r, str):
        return r
    return None if r.returncode == 0 else f"{what}: {r.stderr.strip()[:500]}"


@dataclass(frozen=True)
class History:
    """Where ended jobs can still be read after squeue forgets them (MinJobAge)."""

    use_sacct: bool = False  # accounting storage (slurmdbd) is configured
    jobcomp: Path | None = None  # a jobcomp/filetxt file this host can read


def parse_config(text: str) -> History:
    """`scontrol show config` (`Key = value` lines) -> the history sources. Pure."""
    values = {}
    for line in text.splitlines()[:10_000]:
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    accounting = values.get("AccountingStorageType", "accounting_storage/none")
    loc = values.get("JobCompLoc", "")
    filetxt = values.get("JobCompType") == "jobcomp/filetxt" and loc.startswith("/") \
        and not _CONTROL.search(loc)
    return History(use_sacct=accounting not in ("", "accounting_storage/none", "(null)"),
                   jobcomp=Path(loc) if filetxt else None)


def history(*, env: Mapping[str, str] | None = None, timeout_s: float = 30.0) -> History:
    """The cluster's history sources (none when scontrol fails: squeue and time decide)."""
    r = _run(["scontrol", "show", "config"], env, timeout_s)
    if isinstance(r, str) or r.returncode != 0:
        return History()
    found = parse_config(r.stdout[:MAX_OUTPUT])
    if found.jobcomp is not None and not found.jobcomp.is_file():
        found = History(found.use_sacct, None)  # on another host's disk: not readable here
    return found
