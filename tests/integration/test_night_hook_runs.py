"""The hook at the end of a real night (issue 25, part 6), against the real Docker engine:
`harness night` with a hook command (a tiny Python script keeping its stdin) and a webhook
served by a real http.server on 127.0.0.1. The payload's counts are the night's, the
header comes from the environment, the bundle's sha256 is that of the exported file, and
no credential is in any file under the runs dir (the bundle unpacked included); a hook
that fails (exit 1, a 500, a timeout) leaves the night's exit code as it was."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harness.base.states import Status

pytestmark = pytest.mark.docker

PYTHON = Path(sys.executable).name

SECRET_PATH = "/services/T0NIGHT/B0HOOK/s3cr3t-webhook-path"
TOKEN = "Bearer night-hook-token-71c9e0"
KEEP_STDIN = """\
import pathlib, sys, time
data = sys.stdin.buffer.read()
pathlib.Path(sys.argv[1]).write_bytes(data)
time.sleep(float(sys.argv[3]))
sys.exit(int(sys.argv[2]))
"""


class Recorder(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # http.server calls it by this name
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.seen.append((self.path, dict(self.headers), body))
        status, delay = self.server.answer
        time.sleep(delay)
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def webhook():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    srv.seen, srv.answer = [], (200, 0.0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def hook_campaign(project, name: str, controls: list[str], out: Path, *, exit_code: int = 0,
                  sleep: float = 0.0, timeout: str = "10s") -> Path:
    script = project.root / "keep_stdin.py"
    script.write_text(KEEP_STDIN)
    return project.campaign(name, controls, f"""\
        hook:
          command: [{sys.executable}, {script}, {out}, "{exit_code}", "{sleep}"]
          webhook_env: NIGHT_HOOK_URL
          headers_env: {{Authorization: NIGHT_HOOK_AUTH}}
          bundle: true
          timeout: {timeout}
        """)


def env_for(webhook) -> dict[str, str]:
    port = webhook.server_address[1]
    return {**os.environ, "NIGHT_HOOK_URL": f"http://127.0.0.1:{port}{SECRET_PATH}",
            "NIGHT_HOOK_AUTH": TOKEN}


def every_byte_under(folder: Path) -> list[tuple[Path, bytes]]:
    """Each regular file's bytes (a gzip'd bundle unpacked), never following a symlink."""
    out = []
    for p in sorted(folder.rglob("*")):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            out.append((p, gzip.decompress(data) if p.name.endswith(".gz") else data))
    return out


def test_a_night_tells_its_command_and_webhook_and_writes_no_secret(
        project, cleanup_containers, webhook) -> None:
    project.control("hook-ok", 'command: [python3, -c, "print(\'ok\')"]\n')
    project.control("hook-bad", 'command: [python3, -c, "import sys; sys.exit(1)"]\n')
    out = project.root / "payload.json"
    camp = hook_campaign(project, "hookcamp", ["hook-ok", "hook-bad"], out)
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    r = project.harness("night", str(camp), "--runs-dir", str(project.runs),
                        env=env_for(webhook))
    assert r.returncode == 1, r.stdout + r.stderr  # a refused run, as without a hook
    assert "hook: webhook answered 200 in " in r.stdout, r.stdout + r.stderr
    assert f"hook: command {PYTHON} exited 0" in r.stdout and "hook: failed" not in r.stderr
    [night] = sorted((project.runs / "nights").iterdir())

    sent = out.read_bytes()
    payload = json.loads(sent)
    statuses = [project.record(p)["status"] for p in project.run_dirs()
                if (p / "run.json").is_file()]
    assert sorted(statuses) == [Status.ACCEPTED.value, Status.FAILED.value]
    assert payload["counts"] == {Status.ACCEPTED.value: 1, Status.FAILED.value: 1}
    summary_raw = (night / "summary.json").read_bytes()
    assert payload["counts"] == json.loads(summary_raw)["counts"]
    assert payload["summary_sha256"] == hashlib.sha256(summary_raw).hexdigest()
    assert (payload["night"], payload["ended"], payload["exit_code"]) == (night.name, "done", 1)
    assert payload["regressions"] == json.loads(summary_raw).get("regressions", [])

    [(path, headers, body)] = webhook.seen
    assert path == SECRET_PATH and headers["Authorization"] == TOKEN and body == sent

    bundle = Path(payload["bundle"]["path"])
    assert bundle == project.runs / "bundles" / f"{night.name}.tar.gz"
    assert payload["bundle"]["sha256"] == hashlib.sha256(bundle.read_bytes()).hexdigest()
    assert project.harness("bundle", "verify", str(bundle)).returncode == 0

    record = (night / "hook.json").read_text()
    doc = json.loads(record)
    assert [(s["kind"], s["ok"], s["code"]) for s in doc["sent"]] == [
        ("command", True, 0), ("webhook", True, 200)]
    assert "127.0.0.1" not in record and "http" not in record
    for p, data in every_byte_under(project.runs):
        for secret in (SECRET_PATH, TOKEN, "night-hook-token"):
            assert secret.encode() not in data, f"{secret!r} is written in {p}"
    assert SECRET_PATH not in r.stdout + r.stderr and TOKEN not in r.stdout + r.stderr


@pytest.mark.parametrize(("exit_code", "sleep", "answer", "timeout", "words"), [
    (1, 0.0, (500, 0.0), "10s", [f"command {PYTHON}: exited 1", "webhook: answered HTTP 500"]),
    (0, 30.0, (200, 30.0), "2s", ["killed", "webhook: timed out"]),
])
def test_a_failing_hook_leaves_the_nights_exit_code(project, cleanup_containers, webhook,
                                                    exit_code, sleep, answer, timeout,
                                                    words) -> None:
    project.control("hook-ok", 'command: [python3, -c, "print(\'ok\')"]\n')
    out = project.root / "payload.json"
    camp = hook_campaign(project, "hookfail", ["hook-ok"], out, exit_code=exit_code,
                         sleep=sleep, timeout=timeout)
    cleanup_containers.append(f"org.harness.lock={project.lock}")
    webhook.answer = answer
    t0 = time.monotonic()
    r = project.harness("night", str(camp), "--runs-dir", str(project.runs),
                        env=env_for(webhook))
    assert r.returncode == 0, r.stdout + r.stderr  # every control accepted: the hook failed
    assert time.monotonic() - t0 < 120
    assert r.stderr.count("hook: failed: ") == 2, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr
    [night] = sorted((project.runs / "nights").iterdir())
    assert (night / "summary.json").is_file() and (night / "summary.md").is_file()
    doc = json.loads((night / "hook.json").read_text())
    assert [s["ok"] for s in doc["sent"]] == [False, False]
    assert json.loads(out.read_bytes())["counts"] == {Status.ACCEPTED.value: 1}
    assert SECRET_PATH not in r.stdout + r.stderr + (night / "hook.json").read_text()
