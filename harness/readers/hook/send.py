"""Sending a night's payload: a command given it on stdin, a webhook given it in a POST.

Never raises for what the other side did: a failed hook is recorded and the night's exit
code stays. Every error goes through a `Redactor` before any cut; the URL is never named.
The command's whole process group dies at its end or timeout; the POST follows no
redirect (a 3xx is an answer, not a hop to a host nobody configured), reads at most
RESPONSE_LIMIT bytes and is abandoned at the timeout. The payload is on stdin from a file,
so a command that never reads it cannot block us; urllib errors can quote the URL, so they
are put in words from their kind and errno."""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from harness.config.hook import LOCAL_HOSTS, url_problem
from harness.readers.hook.redact import Redactor

RESPONSE_LIMIT = 64 * 1024
TAIL = 2048  # bytes of a command's stdout/stderr kept, from its end
STDERR_CHARS = 500  # of the masked stderr, from its end, in the error
ERROR_CHARS = 600
USER_AGENT = "harness-night-hook/1"


@dataclass(frozen=True)
class Sent:
    """One way the payload went out: `kind` command or webhook, `name` argv[0]'s base name
    (never the URL), `code` the exit code or HTTP status (None: none came)."""

    kind: str
    name: str
    ok: bool
    code: int | None
    seconds: float
    error: str | None = None

    def record(self) -> dict:
        return {"kind": self.kind, "name": self.name, "ok": self.ok, "code": self.code,
                "seconds": round(self.seconds, 3), "error": self.error}

    def line(self) -> str:
        """The one line said on the terminal."""
        took = f"{self.seconds:.1f} s"
        if self.ok and self.kind == "webhook":
            return f"hook: webhook answered {self.code} in {took}"
        if self.ok:
            return f"hook: command {self.name} exited 0 in {took}"
        what = self.kind if self.kind == self.name else f"{self.kind} {self.name}"
        return f"hook: failed: {what}: {self.error} (after {took})"


# -- the command -----------------------------------------------------------------------


class _Tail:
    """Drains one pipe on its own thread, keeping only its last TAIL bytes."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.kept = b""
        self.thread = threading.Thread(target=self._drain, args=(stream,), daemon=True)
        self.thread.start()

    def _drain(self, stream: IO[bytes]) -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := stream.read1(65536):
                self.kept = (self.kept + chunk)[-TAIL:]

    def text(self) -> str:
        self.thread.join(timeout=2)
        return self.kept.decode("utf-8", "replace").strip()


def _wait_and_end_group(proc: subprocess.Popen, timeout: float) -> int | None:
    """The command's exit code (None: still running at `timeout`), its whole process group killed
    either way. It is killed while its leader is exited but not yet reaped, so its id cannot
    have been given to another process's group."""
    deadline, delay, exited = time.monotonic() + timeout, 0.0005, False
    while True:
        try:
            exited = os.waitid(os.P_PID, proc.pid,
                               os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:  # reaped already (cannot be by us): nothing to wait on
            exited = True
        left = deadline - time.monotonic()
        if exited or left <= 0:
            break
        time.sleep(min(delay, left))
        delay = min(delay * 2, 0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    return proc.returncode if exited else None


def run_command(argv: list[str], body: bytes, *, timeout: float, cwd: Path,
                env: Mapping[str, str], redactor: Redactor | None = None) -> Sent:
    """Run `argv` (no shell) in `cwd` with `body` on stdin, for at most `timeout` s; its
    process group is gone when this returns."""
    name, t0 = Path(argv[0]).name, time.monotonic()
    redactor = redactor if redactor is not None else Redactor()
    with tempfile.TemporaryFile() as stdin:
        stdin.write(body)
        stdin.seek(0)
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=dict(env), stdin=stdin,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True, close_fds=True)
        except OSError as e:
            return Sent("command", name, False, None, time.monotonic() - t0, redactor.clean(
                f"cannot start {argv[0]}: {e.strerror or type(e).__name__}", ERROR_CHARS))
    out, err = _Tail(proc.stdout), _Tail(proc.stderr)
    code = _wait_and_end_group(proc, timeout)
    seconds = time.monotonic() - t0
    stderr, _ = err.text(), out.text()
    if code == 0:
        return Sent("command", name, True, 0, seconds)
    if code is None:
        why = f"still running after its timeout of {timeout:g} s: killed"
    else:
        why = f"killed by signal {-code}" if code < 0 else f"exited {code}"
    said = f": {redactor.clean(stderr, STDERR_CHARS, keep_end=True)}" if stderr else ""
    return Sent("command", name, False, code, seconds,
                redactor.clean(f"{why}{said}", ERROR_CHARS))


# -- the webhook -----------------------------------------------------------------------


class RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx is the answer: the payload goes nowhere the campaign's owner did not name."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> None:
        return None


def _opener(url: str) -> urllib.request.OpenerDirector:
    """No redirects; no proxy for this machine (a proxy would see a local secret)."""
    handlers: list[Any] = [RefuseRedirects()]
    if urlsplit(url).hostname in LOCAL_HOSTS:
        handlers.append(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener(*handlers)


def _post(url: str, headers: Mapping[str, str], body: bytes, timeout: float) -> int:
    """The POST itself: the answer's status (its body read bounded and dropped)."""
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "User-Agent": USER_AGENT, **headers})
    try:
        with _opener(url).open(request, timeout=timeout) as answer:
            answer.read(RESPONSE_LIMIT)
            return answer.status
    except urllib.error.HTTPError as e:  # an answer all the same: 4xx, 5xx, a 3xx
        with contextlib.suppress(OSError, http.client.HTTPException):
            e.read(RESPONSE_LIMIT)
        e.close()
        return e.code


def _failure(e: BaseException) -> str:
    """An exception from the POST in words that do not quote it (it may hold the URL)."""
    if isinstance(e, urllib.error.URLError):
        e = e.reason if isinstance(e.reason, BaseException) else e
    if isinstance(e, TimeoutError):
        return "timed out"
    if isinstance(e, OSError):
        return f"{type(e).__name__}: {e.strerror or 'no answer'}"
    if isinstance(e, ValueError):  # a header value http.client refuses
        return "the request was refused by the HTTP client (a header value?)"
    return type(e).__name__


def post_webhook(url: str, headers: Mapping[str, str], body: bytes, *,
                 timeout: float) -> Sent:
    """POST `body` to `url` for at most `timeout` s in all; 2xx is success."""
    redactor = Redactor.of([url, *headers.values()])
    if (why := url_problem(url)) is not None:
        return Sent("webhook", "webhook", False, None, 0.0, f"the URL {why}")
    result: dict[str, Any] = {}

    def attempt() -> None:
        try:
            result["code"] = _post(url, headers, body, timeout)
        except Exception as e:  # every failure is said, none is raised
            result["error"] = _failure(e)

    t0 = time.monotonic()
    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(timeout + 1)
    seconds = time.monotonic() - t0
    if worker.is_alive():
        return Sent("webhook", "webhook", False, None, seconds,
                    f"no answer within its timeout of {timeout:g} s")
    if "error" in result:
        return Sent("webhook", "webhook", False, None, seconds,
                    redactor.clean(result["error"], ERROR_CHARS))
    code = result["code"]
    ok = 200 <= code < 300
    return Sent("webhook", "webhook", ok, code, seconds,
                None if ok else f"answered HTTP {code}"
                + (" (a redirect: not followed)" if 300 <= code < 400 else ""))
