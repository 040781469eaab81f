"""The night hook keeps its credentials out of everything it leaves, and leaves no process.

A real command (a child process given the secrets in its environment, as an HTTP tool
would be) prints them the ways tools do: the URL's path, its query or one query value,
its user info, the token without `Bearer `, percent-encoded or decoded, cut anywhere,
split across the hook's own 500-character cut, repeated, on stdout and on stderr. After
`after_night` (and `run_command` alone), no run of WINDOW characters of any identifying
part may stand in hook.json or in the lines told for the terminal. Then a command that
leaves a child running (a background `sleep`, a daemon forked twice) must find it gone
when the hook returns. No mocks: real subprocesses, real files.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from harness.base.atomic import dumps_json
from harness.base.states import Status
from harness.config.hook import HookConfig, secret_values
from harness.readers.hook.atnightend import HOOK_FILE, Night, after_night
from harness.readers.hook.redact import WINDOW, Redactor, secret_parts
from harness.readers.hook.send import run_command
from harness.readers.report.summary import build_summary


def closed_port() -> int:
    """A port on this machine nobody listens on: the webhook fails fast, in words."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


USER = "nightbot-ops"
PASSWORD = "pa$$-w0rd-9xq/+"  # `$`, `/`, `+`: percent-encoded in the URL
HOST = f"127.0.0.1:{closed_port()}"
PATH = "/services/T0SECRETX/B0SECRETY/xoxsecretpath"
QUERY_VALUES = ("qv-7c2e91aa", "zz81-4kd0-1fa3")
QUERY = f"token={QUERY_VALUES[0]}&sig={QUERY_VALUES[1]}"
URL = f"http://{USER}:{quote(PASSWORD, safe='')}@{HOST}{PATH}?{QUERY}"
TOKEN = "tok-3f1e-very-secret-44ab"
BASIC_USER, BASIC_PASSWORD = "carol-admin", "c4rol-pass-77"
BASIC = base64.b64encode(f"{BASIC_USER}:{BASIC_PASSWORD}".encode()).decode()
ENVIRON = {"NIGHT_URL": URL, "NIGHT_AUTH": f"Bearer {TOKEN}", "NIGHT_BASIC": f"Basic {BASIC}"}
IDENTIFYING = [USER, PASSWORD, HOST + PATH, PATH, *QUERY_VALUES, TOKEN, BASIC,
               BASIC_USER, BASIC_PASSWORD]


def leaked(text: str) -> list[str]:
    """Every run of WINDOW characters of an identifying part (as it is, or percent-encoded)
    that stands in `text`, ASCII case folded."""
    low = text.lower()
    forms = {f for part in IDENTIFYING for f in (part, quote(part, safe=""), quote(part))}
    return sorted({f[i:i + WINDOW] for f in forms for i in range(len(f) - WINDOW + 1)
                   if f[i:i + WINDOW].lower() in low})


# -- what a tool prints, from the secret in its environment ---------------------------

U = "os.environ['NIGHT_URL']"
S = "urllib.parse.urlsplit(os.environ['NIGHT_URL'])"
T = "os.environ['NIGHT_AUTH']"
LEAKS = {
    "the whole URL": U,
    "the path": f"{S}.path",
    "the query": f"{S}.query",
    "one query value": f"'token is ' + urllib.parse.parse_qs({S}.query)['sig'][0]",
    "the user info": f"{S}.netloc.rpartition('@')[0]",
    "the user": f"'user ' + {S}.username",
    "the password, decoded": f"'password ' + urllib.parse.unquote({S}.password)",
    "the password, as in the URL": f"{S}.password",
    "host and path": f"{S}.hostname + ':' + str({S}.port) + {S}.path",
    "host and path, no port": f"{S}.hostname + {S}.path",
    "the header": T,
    "the token without its scheme": f"{T}.split()[1]",
    "the token in another scheme": f"'Authorization: token ' + {T}.split()[1]",
    "the Basic token": "os.environ['NIGHT_BASIC'].split()[1]",
    "the Basic user:password decoded":
        "base64.b64decode(os.environ['NIGHT_BASIC'].split()[1]).decode()",
    "the URL percent-encoded": f"urllib.parse.quote({U}, safe='')",
    "the URL percent-encoded, lower-case escapes":
        f"urllib.parse.quote({U}, safe='').lower()",
    "the URL percent-decoded": f"urllib.parse.unquote({U})",
    "the path percent-encoded": f"urllib.parse.quote({S}.path, safe='')",
    "the URL JSON-escaped": f"{U}.replace('/', '\\\\/')",
    "the URL's first half": f"{U}[:len({U}) // 2]",
    "the URL's second half": f"{U}[len({U}) // 2:]",
    "the URL upper-cased": f"{U}.upper()",
    "the URL wrapped at 30 columns": f"'\\n'.join(textwrap.wrap({U}, 30))",
    "repeated": f"' '.join([{U}] * 6)",
    "repeated, run together": f"{U} * 6",
    "across the 500-character cut": f"{U} + '.' * (500 - len({U}) // 2)",
    "the token across the 500-character cut": f"{T} + '.' * (500 - len({T}) // 2)",
    "past the 2 KiB tail, ending the text": f"'x' * 3000 + {U}",
    "between control characters": f"'\\x1b[31m' + {U} + '\\r\\x00' + {T}",
}


def loud(expression: str, stream: str) -> list[str]:
    """A command that prints `expression` (over its environment) on `stream` and fails."""
    return [sys.executable, "-c",
            "import base64, os, sys, textwrap, urllib.parse\n"
            f"print({expression}, file=sys.{stream}, flush=True)\n"
            "sys.exit(4)\n"]


def night_dir(tmp_path: Path) -> Path:
    """A night folder with summary.json as the morning report writes it."""
    night = tmp_path / "runs" / "nights" / "c-20261203T010000Z"
    night.mkdir(parents=True)
    row = {"id": 1, "plan_index": 0, "control": "a", "state": Status.ACCEPTED.value,
           "run_id": "a-20261203T010000Z-0000aaaa", "attempt": 1}
    run = {"run_id": row["run_id"], "control": {"name": "a"},
           "status": Status.ACCEPTED.value, "reasons": []}
    summary = build_summary({"name": night.name, "campaign": "c"}, [{"row": row, "run": run}])
    (night / "summary.json").write_bytes(dumps_json(summary).encode())
    return night


def hook_of(command: list[str], timeout: float = 20) -> HookConfig:
    return HookConfig(command=command, webhook_env="NIGHT_URL", timeout=timeout,
                      headers_env={"Authorization": "NIGHT_AUTH", "X-Basic": "NIGHT_BASIC"})


def run_hook(tmp_path: Path, command: list[str], timeout: float = 20) -> tuple[dict, str]:
    """after_night over a real night: hook.json and every line it told, as written."""
    night = night_dir(tmp_path)
    told = after_night(hook_of(command, timeout),
                       Night("c", night, tmp_path / "runs", "done", 0, tmp_path),
                       {**os.environ, **ENVIRON})
    return json.loads((night / HOOK_FILE).read_text()), "\n".join(told.said + told.failed)


@pytest.mark.parametrize("stream", ["stderr", "stdout"])
@pytest.mark.parametrize("expression", LEAKS.values(), ids=LEAKS.keys())
def test_no_part_of_a_secret_reaches_hook_json_or_the_terminal(
        tmp_path: Path, expression: str, stream: str) -> None:
    document, printed = run_hook(tmp_path, loud(expression, stream))
    [command, webhook] = document["sent"]
    assert (command["kind"], command["ok"], command["code"]) == ("command", False, 4)
    assert webhook["kind"] == "webhook" and not webhook["ok"]
    assert "exited 4" in printed
    assert leaked(json.dumps(document)) == [] and leaked(printed) == []
    if stream == "stderr" and "control" not in expression:
        assert "<redacted>" in command["error"]  # said, masked: not merely dropped


@pytest.mark.parametrize("cut", range(len(URL) + 1))
def test_a_url_cut_at_any_position_leaves_no_identifying_fragment(
        tmp_path: Path, cut: int) -> None:
    """Each half of the URL cut at `cut`, printed by the command, as a tool bounding its
    line would."""
    expression = f"{U}[:{cut}] + ' ... ' + {U}[{cut}:]"
    sent = run_command(loud(expression, "stderr"), b"{}", timeout=20, cwd=tmp_path,
                       env={**os.environ, **ENVIRON},
                       redactor=Redactor.of(ENVIRON.values()))
    assert sent.code == 4
    assert leaked(json.dumps(sent.record())) == [] and leaked(sent.line()) == []


def test_the_mask_comes_before_every_cut_of_every_part() -> None:
    """The pure rule, over every part: any prefix and suffix of it (a cut anywhere), in a
    text cut to its last characters right through the secret."""
    redactor = Redactor.of(ENVIRON.values())
    for part in IDENTIFYING:
        for cut in range(len(part) + 1):
            for text in (f"a {part[:cut]}", f"{part[cut:]} b", part[:cut] + "." * 500):
                for kept in (redactor.clean(text, 40), redactor.clean(text, 40, keep_end=True),
                             redactor.clean(text)):
                    assert leaked(kept) == [], (part, cut, text, kept)


def test_the_secrets_are_the_variables_the_hook_names_and_their_parts() -> None:
    assert secret_values(hook_of(["/bin/true"]), {**ENVIRON, "OTHER": "x" * 20}) == (
        URL, f"Bearer {TOKEN}", f"Basic {BASIC}")
    assert secret_values(hook_of(["/bin/true"]), {"NIGHT_URL": ""}) == ()
    parts = secret_parts(URL)
    assert {PATH, QUERY, *QUERY_VALUES, USER, quote(PASSWORD, safe="")} <= set(parts)
    assert not any(p.startswith("http://") for p in parts)  # no window masks every URL
    assert TOKEN in secret_parts(f"Bearer {TOKEN}")
    assert f"{BASIC_USER}:{BASIC_PASSWORD}" in secret_parts(f"Basic {BASIC}")


@pytest.mark.parametrize(("text", "kept"), [
    ("curl: (6) see https://docs.example.org/errors for help",
     "curl: (6) see https://docs.example.org/errors for help"),
    ("auth failed (Bearer)", "auth failed (Bearer)"),
    ("retrying in 5 s", "retrying in 5 s"),
])
def test_text_without_a_secret_is_kept(text: str, kept: str) -> None:
    """Neither `http://` nor a scheme word is a part: other URLs and words stay readable."""
    assert Redactor.of(ENVIRON.values()).clean(text) == kept


# -- no process outlives the hook -----------------------------------------------------


def gone(pid: int, within: float = 5.0) -> bool:
    """`pid` no longer runs (a zombie awaiting a reaper that is not us counts as gone)."""
    deadline = time.monotonic() + within
    while True:  # looked at once at least, however short `within`
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def kill_left(pid: int) -> None:
    """Clean up after a failed check: the process may be gone by now (reaped), never raise."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


LEFT_RUNNING = {
    "a background child, the command failing": "sleep 100 & echo $! > {pids}; exit 1",
    "a background child, the command succeeding": "sleep 100 & echo $! > {pids}; exit 0",
    "a daemon forked twice": "( sleep 100 & echo $! > {pids} ); exit 0",
    "a child ignoring SIGTERM and SIGHUP":
        "( trap '' TERM HUP; sleep 100 ) & echo $! > {pids}; exit 0",
    "a child holding stdout and stderr open": "sleep 100 >&2 & echo $! > {pids}; exit 3",
}


@pytest.mark.parametrize("script", LEFT_RUNNING.values(), ids=LEFT_RUNNING.keys())
def test_a_child_the_command_leaves_running_is_killed_with_its_group(
        tmp_path: Path, script: str) -> None:
    pids = tmp_path / "pids"
    t0 = time.monotonic()
    sent = run_command(["/bin/sh", "-c", script.format(pids=pids)], b"{}", timeout=20,
                       cwd=tmp_path, env=os.environ)
    assert sent.code is not None and time.monotonic() - t0 < 10
    pid = int(pids.read_text())
    try:
        assert gone(pid), f"pid {pid} outlived the hook"
    finally:
        if not gone(pid, 0):
            kill_left(pid)


def test_a_child_is_killed_at_the_timeout_too_and_after_night_leaves_none(
        tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = f"sleep 100 & echo $! > {pids}; sleep 100"
    document, printed = run_hook(tmp_path, ["/bin/sh", "-c", script], timeout=1)
    pid = int(pids.read_text())
    try:
        assert gone(pid), f"pid {pid} outlived the hook's timeout"
    finally:
        if not gone(pid, 0):
            kill_left(pid)
    assert document["sent"][0]["code"] is None and "timeout of 1 s" in printed
