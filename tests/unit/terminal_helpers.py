"""`harness ARGV…` with its stdout on a real pseudo-terminal: what a person would see
(colours, widths), read until the child closes the terminal."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def on_terminal(argv: list[str], env: dict[str, str], *, stderr_too: bool = False,
                timeout: float = 60) -> tuple[int, str, str]:
    """(exit code, the terminal's text, stderr): stderr is on the terminal too with
    `stderr_too` (then ""), else piped apart. `env` is the child's whole environment."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "harness", *argv], cwd=REPO, env=env,
                            stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=slave if stderr_too else subprocess.PIPE)
    os.close(slave)
    chunks = []
    try:
        while select.select([master], [], [], timeout)[0]:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace"), \
        (err or b"").decode("utf-8", "replace")
