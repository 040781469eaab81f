"""Terminal output is best effort: a reader that went away (EPIPE), a descriptor closed
behind the stream (EBADF) or a terminal that hung up (EIO) never raises, never prints
"Exception ignored" at exit and never changes a command's exit code."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import click

from harness.base import terminal
from harness.base.terminal import BestEffort
from harness.measure.ui import Reporter

REPO = Path(__file__).resolve().parents[2]


def _broken_pipe() -> io.TextIOWrapper:
    """A text stream on a pipe whose reader has already gone."""
    r, w = os.pipe()
    os.close(r)
    return open(w, "w", encoding="utf-8")


def _target(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


def test_a_pipe_closed_by_its_reader_is_dropped_and_points_at_dev_null() -> None:
    raw = _broken_pipe()
    out = BestEffort(raw)
    assert out.write("first line\n") == len("first line\n")
    out.flush()  # EPIPE here: swallowed
    assert out.dead
    assert _target(raw.fileno()) == os.devnull, "the failed descriptor now goes nowhere"
    out.write("dropped\n")
    out.flush()
    raw.close()  # what Python does at exit: the buffered bytes go to /dev/null, no error


def test_a_descriptor_closed_behind_the_stream_is_ebadf_and_dropped() -> None:
    r, w = os.pipe()
    raw = open(w, "w", encoding="utf-8")  # noqa: SIM115
    os.close(w)  # EBADF from now on
    out = BestEffort(raw)
    out.write("x\n")
    out.flush()
    assert out.dead
    raw.close()
    os.close(r)


def test_a_terminal_that_hung_up_is_eio_and_dropped() -> None:
    master, slave = os.openpty()
    raw = open(slave, "w", encoding="utf-8")  # noqa: SIM115
    assert BestEffort(raw).isatty()
    os.close(master)  # the ssh connection dropped: writes to the slave give EIO
    out = BestEffort(raw)
    out.write("progress\n")
    out.flush()
    assert out.dead and not out.isatty()
    raw.close()


def test_it_is_a_text_stream_click_and_the_reporter_use_as_it_is() -> None:
    buf = io.StringIO()
    out = BestEffort(buf)
    try:
        out.write(b"")
        raise AssertionError("bytes must be refused, as by any text stream")
    except TypeError:
        pass
    click.echo("via click", file=out)
    Reporter(out).event("progress", done=1, total=3)
    lines = buf.getvalue().splitlines()
    assert lines[0] == "via click" and json.loads(lines[1])["event"] == "progress"
    assert terminal.best_effort(out) is out


def test_a_character_the_encoding_lacks_is_replaced_not_a_failure() -> None:
    raw = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    out = BestEffort(raw)
    out.write("caf\u00e9\n")
    out.flush()
    assert not out.dead
    assert raw.buffer.getvalue() == b"caf?\n"


def test_the_reporter_over_a_broken_stream_never_raises() -> None:
    raw = _broken_pipe()
    ui = Reporter(raw)
    for _ in range(3):
        ui.event("sealed", run_id="r1", status="accepted", dir="d", reasons=[])
    raw.close()


def _harness(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *argv], cwd=REPO, timeout=120,
                          **kw)


def test_a_command_whose_stdout_reader_is_gone_exits_as_it_would_have() -> None:
    r, w = os.pipe()
    os.close(r)  # the reader left before the first line (`| head -0`)
    try:
        done = _harness(["--help"], stdout=w, stderr=subprocess.PIPE)
    finally:
        os.close(w)
    assert done.returncode == 0
    assert done.stderr == b"", done.stderr  # no "Exception ignored … BrokenPipeError"


def test_closed_standard_descriptors_are_reopened_on_dev_null(tmp_path: Path) -> None:
    """`>&- 2>&-`: a file the harness opens must not become its stdout or stderr."""
    probe = tmp_path / "fds.json"
    code = ("from harness.base import terminal; terminal.install(); import json, os, sys; "
            f"fd = os.open({str(tmp_path / 'x')!r}, os.O_CREAT | os.O_WRONLY); "
            "print('dropped'); print('dropped', file=sys.stderr); "
            f"open({str(probe)!r}, 'w').write(json.dumps([fd, os.readlink('/proc/self/fd/1'),"
            " os.readlink('/proc/self/fd/2'), sys.stdout.isatty()]))")
    done = subprocess.run(["sh", "-c", f'"{sys.executable}" -c "$0" >&- 2>&-', code],
                          cwd=REPO, timeout=60)
    assert done.returncode == 0
    fd, one, two, tty = json.loads(probe.read_text())
    assert fd > 2 and one == two == os.devnull and tty is False
