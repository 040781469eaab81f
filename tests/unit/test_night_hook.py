"""The hook at the end of a night (issue 25, part 6), without Docker: the `hook:` block's
faults at their positions, the payload from the summary.json the report writes, forged
summaries refused, and the command and the webhook against a real child process and a
real HTTP server on 127.0.0.1, with no credential in any text the hook leaves behind."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harness.base.atomic import dumps_json
from harness.base.states import Status
from harness.config.hook import HookConfig, url_problem
from harness.config.loader import load_campaign
from harness.readers.hook.atnightend import HOOK_FILE, Night, after_night
from harness.readers.hook.payload import (
    Bundled,
    SummaryUnreadable,
    build_payload,
    parse_summary,
    read_summary,
)
from harness.readers.hook.redact import Redactor
from harness.readers.hook.send import post_webhook, run_command
from harness.readers.report import ending
from harness.readers.report.summary import build_summary
from tests.campaign_runs import repo_campaign

REPO = Path(__file__).resolve().parents[2]
SECRET_PATH = "/services/T0SECRET/B0SECRET/xoxsecretpath"
TOKEN = "Bearer tok-3f1e-very-secret"


def campaign(tmp_path: Path, hook: str) -> Path:
    return repo_campaign(tmp_path, "[night-a]", hook)


# -- the block, with positions --------------------------------------------------------


def test_a_good_block_loads(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("NIGHT_URL", "https://hooks.example.org" + SECRET_PATH)
    loaded, faults = load_campaign(campaign(tmp_path, """\
        hook:
          command: [/bin/true, --night]
          webhook_env: NIGHT_URL
          headers_env: {Authorization: NIGHT_AUTH}
          bundle: true
          timeout: 1m
        """))
    assert faults == []
    assert loaded.hook == HookConfig(command=["/bin/true", "--night"], webhook_env="NIGHT_URL",
                                     headers_env={"Authorization": "NIGHT_AUTH"},
                                     bundle=True, timeout=60.0)


@pytest.mark.parametrize(("hook", "line", "col", "words"), [
    ("hook:\n  webhook: https://hooks.slack.com/services/T/B/X\n", 7, 12,
     "use `webhook_env: NAME`"),
    ("hook:\n  command: [x]\n  headers: {Authorization: Bearer x}\n", 8, 12,
     "`headers_env: {Header: NAME}`"),
    ("hook:\n  webhook_env: 'https://hooks.slack.com/services/T/B/X'\n", 7, 16,
     "the NAME of an environment variable"),
    ("hook:\n  webhook_env: 1URL\n", 7, 16, "the NAME of an environment variable"),
    ("hook:\n  webhook_env: URL\n  headers_env: {Authorization: 'Bearer abc'}\n", 8, 32,
     "the NAME of an environment variable"),
    ("hook:\n  webhook_env: URL\n  headers_env: {'bad header': AUTH}\n", 8, 17,
     "a header name is"),
    ("hook:\n  command: [x]\n  comand: [y]\n", 8, 3, "unknown key 'comand'"),
    ("hook:\n  bundle: true\n", 7, 3, "needs `command`"),
    ("hook:\n  command: notify --night\n", 7, 12, "never a shell string"),
    ("hook:\n  command: [x]\n  timeout: 2h\n", 8, 12, "at most 600 s"),
    ("hook:\n  headers_env: {Authorization: AUTH}\n  command: [x]\n", 7, 3,
     "give webhook_env too"),
])
def test_a_bad_block_is_refused_at_its_position(tmp_path: Path, hook: str, line: int,
                                                col: int, words: str) -> None:
    camp = campaign(tmp_path, hook)
    loaded, faults = load_campaign(camp)
    assert loaded is None
    [fault] = faults
    assert (fault.line, fault.col) == (line, col), str(fault)
    assert words in fault.message
    assert "hooks.slack.com" not in fault.message and "Bearer" not in fault.message


def test_the_variables_url_is_checked_where_it_is_set_never_shown(tmp_path: Path,
                                                                  monkeypatch) -> None:
    camp = campaign(tmp_path, "hook:\n  webhook_env: NIGHT_URL\n"
                              "  headers_env: {Authorization: NIGHT_AUTH}\n")
    assert load_campaign(camp)[1] == []  # unset: no fault (a check without the secret)
    monkeypatch.setenv("NIGHT_URL", "http://hooks.example.org" + SECRET_PATH)
    monkeypatch.setenv("NIGHT_AUTH", "Bearer x\r\nX-Injected: 1")
    loaded, faults = load_campaign(camp)
    assert loaded is None
    assert [(f.line, f.col) for f in faults] == [(7, 16), (8, 32)]
    assert "http:// URL to another host" in faults[0].message
    assert "localhost, 127.0.0.1 or ::1" in faults[0].message
    assert "a newline" in faults[1].message
    assert all(SECRET_PATH not in f.message and "Injected" not in f.message for f in faults)
    monkeypatch.setenv("NIGHT_URL", "http://127.0.0.1:8080" + SECRET_PATH)
    monkeypatch.setenv("NIGHT_AUTH", TOKEN)
    assert load_campaign(camp)[1] == []


@pytest.mark.parametrize(("url", "ok"), [
    ("https://hooks.slack.com/services/T/B/X", True),
    ("http://localhost:9/x", True), ("http://127.0.0.1/x", True), ("http://[::1]:80/x", True),
    ("http://hooks.slack.com/x", False), ("http://127.0.0.2/x", False),
    ("ftp://host/x", False), ("file:///etc/passwd", False), ("https://", False),
    ("https://host:port/x", False), ("https://a b/", False), ("", False),
])
def test_only_https_or_http_to_this_machine(url: str, ok: bool) -> None:
    assert (url_problem(url) is None) is ok


# -- the payload ------------------------------------------------------------------------


def real_summary(regressions: list | None = None) -> bytes:
    """summary.json as the morning report writes it (build_summary, then its JSON form)."""
    rows = [{"id": 1, "plan_index": 0, "control": "a", "state": Status.ACCEPTED.value,
             "run_id": "a-20261203T010000Z-0000aaaa", "attempt": 1},
            {"id": 2, "plan_index": 1, "control": "b", "state": Status.REFUSED.value,
             "run_id": "b-20261203T010100Z-0000bbbb", "attempt": 1}]
    runs = [{"run_id": rows[0]["run_id"], "control": {"name": "a"},
             "status": Status.ACCEPTED.value, "reasons": []},
            {"run_id": rows[1]["run_id"], "control": {"name": "b"},
             "status": Status.REFUSED.value,
             "reasons": [{"rule": "RUN-EXIT", "by": "harness", "detail": "exit 1"}]}]
    summary = build_summary({"name": "c-20261203T010000Z", "campaign": "c"},
                            [{"row": r, "run": u} for r, u in zip(rows, runs, strict=True)])
    if regressions is not None:
        summary["regressions"] = regressions
    return dumps_json(summary).encode()


def test_the_payload_carries_the_summarys_counts_and_its_digest() -> None:
    import hashlib

    raw = real_summary([{"control": "a", "metric": "duration_s", "runs": ["x", "y"]}])
    summary = parse_summary(raw)
    doc = build_payload(summary, campaign="c", night="c-20261203T010000Z", ended="done",
                        exit_code=1, bundle=Bundled("/r/bundles/n.tar.gz", "ab" * 32))
    assert doc["schema"] == "harness.night-hook/v1"
    assert doc["counts"] == {Status.ACCEPTED.value: 1, Status.REFUSED.value: 1}
    assert doc["headline"] == ("1/2 controls accepted; 1 refused · regressions: not judged: "
                               "no call sealed")
    assert doc["controls"]["controls"] == 2
    assert doc["regressions"] == [{"control": "a", "metric": "duration_s", "runs": ["x", "y"]}]
    assert [(r["control"], r["status"]) for r in doc["runs"]] == [
        ("a", Status.ACCEPTED.value), ("b", Status.REFUSED.value)]
    assert doc["summary_sha256"] == hashlib.sha256(raw).hexdigest()
    assert doc["bundle"] == {"path": "/r/bundles/n.tar.gz", "sha256": "ab" * 32}
    assert (doc["night"], doc["ended"], doc["exit_code"]) == ("c-20261203T010000Z", "done", 1)
    no_bundle = build_payload(summary, campaign="c", night="n", ended="done", exit_code=0,
                              bundle=Bundled(error="a run does not verify"))
    assert no_bundle["bundle"] is None
    assert doc["not_executed"] == []


def test_the_payload_names_the_slots_the_night_left_and_why() -> None:
    doc = json.loads(real_summary())
    left = {"control": "c", "plan_index": 2, "repeat_index": 0, "label": "c",
            "why": "deadline --until 06:30 reached"}
    doc["not_executed"] = [left]
    summary = parse_summary(json.dumps(doc).encode())
    payload = build_payload(summary, campaign="c", night="n", ended="deadline", exit_code=1,
                            bundle=Bundled())
    assert payload["not_executed"] == [left]
    del doc["not_executed"]  # a summary an older harness wrote
    assert parse_summary(json.dumps(doc).encode()).not_executed == []


@pytest.mark.parametrize(("raw", "words"), [
    (b"not json", "not JSON"),
    (b"\xff\xfe", "not JSON"),
    (b'{"schema": "harness.summary/v1", "schema": "x"}', "appears twice"),
    (b'{"schema": "harness.other/v1"}', "not a night summary"),
    (b'[1, 2]', "not a night summary"),
    (b"[" * 100_000 + b"]" * 100_000, "not JSON"),
])
def test_a_forged_summary_is_refused(raw: bytes, words: str) -> None:
    with pytest.raises(SummaryUnreadable, match=words):
        parse_summary(raw)


@pytest.mark.parametrize(("key", "value", "words"), [
    ("counts", {"accepted": -1}, "counts"), ("counts", {"accepted": 1.5}, "counts"),
    ("counts", [], "counts"), ("regressions", {}, "regressions is not a list"),
    ("headline", "x" * 5000, "headline"), ("runs", [1], "not a mapping"),
    ("counts", {"accepted": float("nan")}, "NaN"),
    ("not_executed", {}, "not_executed is not a list"),
    ("not_executed", [1], "not a mapping"), ("not_executed", [{"control": 1}], "control"),
])
def test_a_summary_of_the_wrong_shape_is_refused(key: str, value, words: str) -> None:
    doc = json.loads(real_summary())
    doc[key] = value
    with pytest.raises(SummaryUnreadable, match=words):
        parse_summary(json.dumps(doc).encode())


def test_summary_json_is_read_bounded_regular_and_never_through_a_symlink(
        tmp_path: Path, monkeypatch) -> None:
    night = tmp_path / "night"
    night.mkdir()
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes(real_summary())
    (night / "summary.json").symlink_to(elsewhere)
    with pytest.raises(SummaryUnreadable, match="symlink"):
        read_summary(night)
    (night / "summary.json").unlink()
    os.mkfifo(night / "summary.json")
    with pytest.raises(SummaryUnreadable, match="FIFO"):
        read_summary(night)  # never blocks
    (night / "summary.json").unlink()
    (night / "summary.json").write_bytes(real_summary())
    assert read_summary(night).counts == {Status.ACCEPTED.value: 1, Status.REFUSED.value: 1}
    monkeypatch.setattr(ending, "SUMMARY_LIMIT", 100)  # the one bound of summary.json
    with pytest.raises(SummaryUnreadable, match="over the 100 byte limit"):
        read_summary(night)


# -- sending --------------------------------------------------------------------------


class Recorder(BaseHTTPRequestHandler):
    """Records each request; answers as the server's `answer` says (status, delay)."""

    def do_POST(self) -> None:  # http.server calls it by this name
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.seen.append((self.path, dict(self.headers), body))
        status, delay, location = self.server.answer
        time.sleep(delay)
        self.send_response(status)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    srv.seen, srv.answer = [], (200, 0.0, None)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def url_of(srv, path: str = SECRET_PATH) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}{path}"


def test_the_webhook_posts_the_json_with_the_headers(server) -> None:
    sent = post_webhook(url_of(server), {"Authorization": TOKEN}, b'{"a": 1}\n', timeout=5)
    assert sent.ok and sent.code == 200 and sent.name == "webhook"
    [(path, headers, body)] = server.seen
    assert path == SECRET_PATH and headers["Authorization"] == TOKEN
    assert headers["Content-Type"] == "application/json" and body == b'{"a": 1}\n'
    assert SECRET_PATH not in json.dumps(sent.record()) + sent.line()
    assert sent.line().startswith("hook: webhook answered 200 in ")


def test_a_500_a_redirect_and_a_slow_server_fail_without_the_url(server) -> None:
    server.answer = (500, 0.0, None)
    sent = post_webhook(url_of(server), {}, b"{}", timeout=5)
    assert not sent.ok and sent.code == 500 and "HTTP 500" in sent.error
    other = url_of(server, "/elsewhere")
    server.answer = (302, 0.0, other)
    sent = post_webhook(url_of(server), {}, b"{}", timeout=5)
    assert (sent.ok, sent.code) == (False, 302) and "not followed" in sent.error
    assert [p for p, _, _ in server.seen].count("/elsewhere") == 0
    server.answer = (200, 3.0, None)
    t0 = time.monotonic()
    sent = post_webhook(url_of(server), {}, b"{}", timeout=0.5)
    assert not sent.ok and time.monotonic() - t0 < 2.5
    for s in (sent,):
        assert SECRET_PATH not in f"{s.error} {s.line()} {json.dumps(s.record())}"


def test_an_unreachable_or_plain_http_webhook_fails_in_words_without_the_url() -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sent = post_webhook(f"http://127.0.0.1:{port}{SECRET_PATH}", {}, b"{}", timeout=2)
    assert not sent.ok and sent.code is None and "ConnectionRefusedError" in sent.error
    assert SECRET_PATH not in sent.error + sent.line()
    sent = post_webhook("http://hooks.example.org" + SECRET_PATH, {}, b"{}", timeout=2)
    assert not sent.ok and "another host" in sent.error and SECRET_PATH not in sent.error


def test_the_command_gets_the_payload_on_stdin_and_its_failures_are_words(
        tmp_path: Path) -> None:
    out = tmp_path / "got.json"
    script = tmp_path / "notify.py"
    script.write_text("import sys, pathlib\n"
                      f"pathlib.Path({str(out)!r}).write_bytes(sys.stdin.buffer.read())\n"
                      "sys.exit(int(sys.argv[1]))\n")
    sent = run_command([sys.executable, str(script), "0"], b'{"n": 1}\n', timeout=10,
                       cwd=tmp_path, env=os.environ)
    assert sent.ok and sent.code == 0 and out.read_bytes() == b'{"n": 1}\n'
    assert sent.name == Path(sys.executable).name
    loud = [sys.executable, "-c", f"import sys; print('token {TOKEN}', file=sys.stderr); "
                                  "sys.exit(3)"]
    sent = run_command(loud, b"{}", timeout=10, cwd=tmp_path, env=os.environ,
                       redactor=Redactor.of([TOKEN]))
    assert (sent.ok, sent.code) == (False, 3) and "exited 3" in sent.error
    assert TOKEN not in sent.error and "<redacted>" in sent.error
    t0 = time.monotonic()
    sent = run_command([sys.executable, "-c", "import time; time.sleep(30)"], b"{}",
                       timeout=0.5, cwd=tmp_path, env=os.environ)
    assert not sent.ok and "killed" in sent.error and time.monotonic() - t0 < 10
    sent = run_command([str(tmp_path / "absent")], b"{}", timeout=1, cwd=tmp_path,
                       env=os.environ)
    assert not sent.ok and "cannot start" in sent.error


def test_redact_replaces_every_secret_and_makes_one_line() -> None:
    assert Redactor.of([TOKEN, SECRET_PATH]).clean(f"a {TOKEN}\nb {SECRET_PATH}") == (
        "a <redacted>\\x0ab <redacted>")


def test_after_night_records_what_ran_and_no_credential(tmp_path: Path, server) -> None:
    night = tmp_path / "runs" / "nights" / "c-20261203T010000Z"
    night.mkdir(parents=True)
    (night / "summary.json").write_bytes(real_summary())
    hook = HookConfig(command=[sys.executable, "-c", "import sys; sys.stdin.read()"],
                      webhook_env="NIGHT_URL", headers_env={"Authorization": "NIGHT_AUTH"})
    environ = {**os.environ, "NIGHT_URL": url_of(server), "NIGHT_AUTH": TOKEN}
    told = after_night(hook, Night("c", night, tmp_path / "runs", "done", 1, tmp_path),
                       environ)
    assert told.failed == [] and len(told.said) == 2
    doc = json.loads((night / HOOK_FILE).read_text())
    assert [(s["kind"], s["ok"], s["code"]) for s in doc["sent"]] == [
        ("command", True, 0), ("webhook", True, 200)]
    text = (night / HOOK_FILE).read_text() + "\n".join(told.said)
    assert SECRET_PATH not in text and TOKEN not in text and "127.0.0.1" not in text
    [(_, headers, body)] = server.seen
    assert headers["Authorization"] == TOKEN
    assert json.loads(body)["counts"] == {Status.ACCEPTED.value: 1, Status.REFUSED.value: 1}
    again = after_night(hook, Night("c", night, tmp_path / "runs", "done", 1, tmp_path),
                        environ)
    assert "already ran" in again.said[0] and len(server.seen) == 1  # once per night


def test_after_night_says_an_unset_variable_and_a_forged_summary(tmp_path: Path) -> None:
    night = tmp_path / "n1"
    night.mkdir()
    (night / "summary.json").write_bytes(real_summary())
    hook = HookConfig(webhook_env="NIGHT_URL_UNSET_HERE")
    told = after_night(hook, Night("c", night, tmp_path, "done", 0, tmp_path), {})
    assert "NIGHT_URL_UNSET_HERE is not set" in told.failed[0]
    forged = tmp_path / "n2"
    forged.mkdir()
    (forged / "summary.json").write_text("{not json")
    told = after_night(HookConfig(command=["/bin/true"]),
                       Night("c", forged, tmp_path, "done", 0, tmp_path), {})
    assert "not sent" in told.failed[0]
    assert json.loads((forged / HOOK_FILE).read_text())["sent"] == []
