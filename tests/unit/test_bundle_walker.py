"""Bundles walk evidence with `harness.base.tree`: nothing followed, nothing but regular files
opened, so a symlink or a FIFO (even one swapped in after the folder was listed) never
leaks a file from elsewhere into a bundle and never hangs export or verify."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from bundle_helpers import make_run, seal

from harness.base.errors import InvalidInput
from harness.readers.bundle.export import export_bundle
from harness.readers.bundle.verify import verify_bundle

HELPERS = str(Path(__file__).resolve().parent)
TIMEOUT = 60  # a blocked open() of a FIFO would never return


def _export_in_child(tmp_path: Path, swap: str) -> subprocess.CompletedProcess:
    """Run `harness bundle export` in a child process; after the folder was listed and
    judged, `swap` (python code with `run` bound) changes it under the exporter's feet."""
    script = textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        sys.path.insert(0, {HELPERS!r})
        from bundle_helpers import make_run
        import harness.readers.bundle.export as export
        from harness.cli.bundle import bundle
        from harness.cli.main import cli, main
        run = make_run(Path({str(tmp_path)!r}) / "gpu-runs", "r", full=False)
        original = export.read_runs
        def swapped(payload, spool):
            {swap}
            return original(payload, spool)
        export.read_runs = swapped
        cli.add_command(bundle)
        main(["bundle", "export", str(run), "-o", {str(tmp_path / "b.tar")!r}])
    """)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)


def test_a_file_swapped_for_a_fifo_during_export_never_hangs_it(tmp_path):
    result = _export_in_child(
        tmp_path, "os.unlink(run / 'logs/stdout.log'); os.mkfifo(run / 'logs/stdout.log')")
    assert result.returncode == 2, result.stderr
    assert "fifo" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "b.tar").exists()


def test_a_folder_swapped_for_a_symlink_during_export_is_not_followed(tmp_path):
    secret = tmp_path / "elsewhere"
    secret.mkdir()
    (secret / "stdout.log").write_text("ko\n")  # same size as the real log: "ok\n"
    result = _export_in_child(
        tmp_path, f"os.rename(run / 'logs', run / 'old'); "
                  f"os.symlink({str(secret)!r}, run / 'logs')")
    assert result.returncode == 2, result.stderr
    assert "symlink" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "b.tar").exists()


@pytest.mark.parametrize("plant", ["symlinked-folder", "fifo-in-folder", "socket"])
def test_export_refuses_what_no_seal_can_hold_inside_a_run(tmp_path, plant, monkeypatch):
    import socket

    run = make_run(tmp_path / "gpu-runs", "r", full=False)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret\n")
    (run / "deep" / "er").mkdir(parents=True)
    if plant == "symlinked-folder":
        (run / "deep" / "er" / "dir").symlink_to(tmp_path / "outside")
    elif plant == "fifo-in-folder":
        os.mkfifo(run / "deep" / "er" / "pipe")
    else:
        monkeypatch.chdir(run / "deep" / "er")  # a socket path must be short
        sock = socket.socket(socket.AF_UNIX)
        sock.bind("sock")
        sock.close()
    with pytest.raises(InvalidInput) as e:
        export_bundle([run], tmp_path / "b.tar")
    assert any("deep/er/" in fault for fault in e.value.faults), e.value.faults
    assert not (tmp_path / "b.tar").exists()


@pytest.mark.parametrize("name", ["log\u2028x.txt", "\u202etxt.exe", "zero\u200bwidth",
                                  "c1\u0085"])
def test_export_refuses_names_no_seal_can_carry(tmp_path, name):
    """Bidi overrides, line separators, zero-width and C1 characters: a manifest line that
    reads differently in different tools. The sealable-name policy of harness.base.tree."""
    run = make_run(tmp_path / "gpu-runs", "r", full=False)
    (run / name).write_text("x\n")
    seal(run)
    with pytest.raises(InvalidInput) as e:
        export_bundle([run], tmp_path / "b.tar")
    assert e.value.faults and all("\u202e" not in f and "\u2028" not in f
                                  for f in e.value.faults)


def _unpacked(tmp_path: Path) -> Path:
    run = make_run(tmp_path / "gpu-runs", "r", full=False)
    export_bundle([run], tmp_path / "b.tar")
    from bundle_helpers import writable_bundle

    return writable_bundle(tmp_path / "b.tar", tmp_path / "x")


def test_verify_refuses_a_bundle_folder_that_is_a_symlink(tmp_path):
    root = _unpacked(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(root)
    with pytest.raises(InvalidInput, match="symlink"):
        verify_bundle(link)


def test_verify_of_a_folder_with_fifo_and_symlinks_names_them_and_returns(tmp_path):
    root = _unpacked(tmp_path)
    os.mkfifo(root / "data/r/logs/pipe")
    (root / "data/r/dirlink").symlink_to(tmp_path / "gpu-runs")
    (root / "bag-info.txt").rename(root / "bag-info.real")
    (root / "bag-info.txt").symlink_to(root / "bag-info.real")
    script = textwrap.dedent(f"""
        from harness.readers.bundle.verify import verify_bundle
        for p in verify_bundle({str(root)!r}).problems:
            print(p.kind, p.path)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=TIMEOUT, check=True)
    lines = set(result.stdout.splitlines())
    assert {"not-a-file data/r/logs/pipe", "not-a-file data/r/dirlink",
            "not-a-file bag-info.txt"} <= lines, result.stdout


def test_verify_names_a_hostile_name_on_one_printable_line(tmp_path, capsys):
    from harness.cli.bundle import bundle
    from harness.cli.main import cli, main

    root = _unpacked(tmp_path)
    (root / "data/r/evil\nFAIL nothing: all good\u202e").write_text("x\n")
    cli.add_command(bundle)
    with pytest.raises(SystemExit) as e:
        main(["bundle", "verify", str(root)])
    out = capsys.readouterr().out
    assert e.value.code == 1
    assert "FAIL bad-name: data/r/evil\\u000aFAIL nothing: all good\\u202e" in out
    assert not any(line.startswith("FAIL nothing") for line in out.splitlines())


def test_a_hostile_name_inside_a_run_is_named_once(tmp_path):
    """The walk and `harness verify` both see it; the report names it once."""
    root = _unpacked(tmp_path)
    (root / "data/r/bidi\u202e.txt").write_text("x\n")
    problems = [p for p in verify_bundle(root).problems if "bidi" in p.path]
    assert [p.kind for p in problems] == ["bad-name"], problems
    assert str(problems[0]).startswith("bad-name: data/r/bidi\\u202e.txt")
