"""Sending a night's payload: a command given it on stdin, a webhook given it in a POST.

The thin I/O shell of the hook. Each way returns a `Sent` (what ran, its exit code or
HTTP status, seconds, an error in words) and never raises for what the other side did:
a hook that fails is said and recorded, and the night's exit code stays as it was.

Credentials: the webhook's URL (Slack's and Teams' embed their secret) and its header
values come from the environment only, and every text that leaves here (the error, a
command's stderr) has each of them replaced by `<redacted>` first; the URL is never
named, only "webhook". Errors from urllib can quote the URL, so they are put in words
from their kind and errno instead, and redacted as well.

Bounds: the command runs in its own session with the payload on stdin from a file (a
command that never reads it cannot block us), its stdout and stderr drained as it runs
keeping the last few KiB, and its whole session killed at the timeout. The POST follows
no redirect (a 3xx is an answer, not a hop to a host nobody configured), reads at most
RESPONSE_LIMIT bytes of the answer, and is abandoned at the timeout however the server
drips its bytes.
"""

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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from harness.config.hook import LOCAL_HOSTS, url_problem
from harness.readers.report.inert import inert

RESPONSE_LIMIT = 64 * 1024
TAIL = 2048  # bytes of a command's stdout/stderr kept, from its end
ERROR_CHARS = 600
REDACTED = "<redacted>"
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


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with each secret (longest first) replaced, then one inert bounded line."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return inert(text, ERROR_CHARS)


def url_secrets(url: str) -> list[str]:
    """The URL and the parts of it that carry its secret (path, query, user info)."""
    parts = urlsplit(url)
    found = [url, parts.netloc if "@" in parts.netloc else "", parts.query]
    if len(parts.path) > 1:
        found.append(parts.path)
    return [s for s in found if s]


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


def _kill_session(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def run_command(argv: list[str], body: bytes, *, timeout: float, cwd: Path,
                env: Mapping[str, str], secrets: Iterable[str] = ()) -> Sent:
    """Run `argv` (no shell) in `cwd` with `body` on stdin, for at most `timeout` s."""
    name, secrets, t0 = Path(argv[0]).name, list(secrets), time.monotonic()
    with tempfile.TemporaryFile() as stdin:
        stdin.write(body)
        stdin.seek(0)
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=dict(env), stdin=stdin,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True, close_fds=True)
        except OSError as e:
            return Sent("command", name, False, None, time.monotonic() - t0,
                        redact(f"cannot start {argv[0]}: {e.strerror or type(e).__name__}",
                               secrets))
    out, err = _Tail(proc.stdout), _Tail(proc.stderr)
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_session(proc)
        return Sent("command", name, False, None, time.monotonic() - t0,
                    f"still running after its timeout of {timeout:g} s: killed")
    seconds = time.monotonic() - t0
    stderr, _ = err.text(), out.text()
    if code == 0:
        return Sent("command", name, True, 0, seconds)
    why = f"killed by signal {-code}" if code < 0 else f"exited {code}"
    return Sent("command", name, False, code, seconds,
                redact(f"{why}{': ' + stderr[-500:] if stderr else ''}", secrets))


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
    secrets = [*url_secrets(url), *headers.values()]
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
                    redact(result["error"], secrets))
    code = result["code"]
    ok = 200 <= code < 300
    return Sent("webhook", "webhook", ok, code, seconds,
                None if ok else f"answered HTTP {code}"
                + (" (a redirect: not followed)" if 300 <= code < 400 else ""))
