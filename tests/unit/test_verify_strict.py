"""`verify` is at least as strict as `sha256sum -c --strict`, plus "exactly these files".

Each case tampers with a sealed folder. Wherever coreutils fails, `verify_folder` must
fail too; and it also fails where coreutils cannot see the tampering (a symlink that
coreutils follows, an extra file or folder, an `addenda` that points elsewhere).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.measure.runfolder.layout import SUMS
from harness.measure.runfolder.manifest import make_read_only, verify_folder, write_manifest
from harness.measure.runfolder.manifest import parse as parse_sums

RUN_JSON = b'{"status": "accepted"}\n'


def sealed(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "run.json").write_bytes(RUN_JSON)
    (run / "logs" / "stdout.log").write_bytes(b"hello\n")
    write_manifest(run)
    return run


def coreutils(run: Path) -> bool:
    r = subprocess.run(["sha256sum", "-c", "--strict", SUMS], cwd=run, capture_output=True,
                       timeout=60)
    return r.returncode == 0


def set_sums(run: Path, data: bytes) -> None:
    (run / SUMS).chmod(0o644)
    (run / SUMS).write_bytes(data)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sums_of(run: Path) -> bytes:
    return (run / SUMS).read_bytes()


def dup_wrong_then_right(run: Path, tmp: Path) -> None:
    set_sums(run, f"{'0' * 64}  run.json\n".encode() + sums_of(run))


def file_to_symlink_same_bytes(run: Path, tmp: Path) -> None:
    (tmp / "copy.json").write_bytes(RUN_JSON)
    (run / "run.json").unlink()
    os.symlink(tmp / "copy.json", run / "run.json")


def file_to_symlink_other_bytes(run: Path, tmp: Path) -> None:
    (run / "run.json").unlink()
    os.symlink("/etc/hostname", run / "run.json")


def folder_to_symlink(run: Path, tmp: Path) -> None:
    shutil.copytree(run / "logs", tmp / "logs-copy")
    shutil.rmtree(run / "logs")
    os.symlink(tmp / "logs-copy", run / "logs")


def addenda_symlink_to_folder(run: Path, tmp: Path) -> None:
    outside = tmp / "elsewhere" / "20260101T000000Z-refinalize"
    outside.mkdir(parents=True)
    (outside / "verdict.json").write_text('{"verdict": "accepted"}')
    write_manifest(outside)
    os.symlink(tmp / "elsewhere", run / "addenda")


def new_empty_folder(run: Path, tmp: Path) -> None:
    (run / "logs" / "new").mkdir()


def crlf_lines(run: Path, tmp: Path) -> None:
    set_sums(run, sums_of(run).replace(b"\n", b"\r\n"))


def dot_slash_name(run: Path, tmp: Path) -> None:
    set_sums(run, sums_of(run).replace(b"  run.json", b"  ./run.json"))


def trailing_garbage(run: Path, tmp: Path) -> None:
    set_sums(run, sums_of(run) + b"garbage")


def binary_marker(run: Path, tmp: Path) -> None:
    set_sums(run, sums_of(run).replace(b"  run.json", b" *run.json"))


def uppercase_hex(run: Path, tmp: Path) -> None:
    line = f"{digest(RUN_JSON)}  run.json".encode()
    set_sums(run, sums_of(run).replace(line, line.upper().replace(b"RUN.JSON", b"run.json")))


def empty_line(run: Path, tmp: Path) -> None:
    set_sums(run, b"\n" + sums_of(run))


def escaped_line(run: Path, tmp: Path) -> None:
    line = f"{digest(RUN_JSON)}  run.json".encode()
    set_sums(run, sums_of(run).replace(line, b"\\" + line))


def extra_file(run: Path, tmp: Path) -> None:
    (run / "logs" / "sneaked.log").write_text("x")


def extra_folder_with_file(run: Path, tmp: Path) -> None:
    (run / "more").mkdir()
    (run / "more" / "x").write_text("x")


def stray_manifest(run: Path, tmp: Path) -> None:
    (run / "logs" / SUMS).write_text(f"{digest(b'hello')}  stdout.log\n")


def fifo_in_folder(run: Path, tmp: Path) -> None:
    os.mkfifo(run / "logs" / "pipe")


def addendum_escaping_upwards(run: Path, tmp: Path) -> None:
    add = run / "addenda" / "20260101T000000Z-x"
    add.mkdir(parents=True)
    (add / SUMS).write_text(f"{digest(RUN_JSON)}  ../../run.json\n")


def manifest_claims_itself(run: Path, tmp: Path) -> None:
    set_sums(run, sums_of(run) + f"{'1' * 64}  {SUMS}\n".encode())


CASES = [dup_wrong_then_right, file_to_symlink_same_bytes, file_to_symlink_other_bytes,
         folder_to_symlink, addenda_symlink_to_folder, new_empty_folder, crlf_lines,
         dot_slash_name, trailing_garbage, binary_marker, uppercase_hex, empty_line,
         escaped_line, extra_file, extra_folder_with_file, stray_manifest,
         addendum_escaping_upwards, manifest_claims_itself]


def test_intact(tmp_path):
    run = sealed(tmp_path)
    make_read_only(run)
    assert coreutils(run) and verify_folder(run) == []


@pytest.mark.parametrize("tamper", CASES, ids=[c.__name__ for c in CASES])
def test_verify_fails_wherever_coreutils_fails_and_more(tmp_path, tamper):
    run = sealed(tmp_path)
    tamper(run, tmp_path)
    problems = verify_folder(run)
    assert problems, f"verify accepted {tamper.__name__} (coreutils ok: {coreutils(run)})"
    for p in problems:
        assert p.path.isascii() and p.kind and str(p).isprintable()


def test_the_coreutils_failures_are_real(tmp_path):
    """The differential's other half: these cases fail in coreutils itself."""
    for tamper in (dup_wrong_then_right, file_to_symlink_other_bytes, trailing_garbage):
        case = tmp_path / tamper.__name__
        case.mkdir()
        run = sealed(case)
        tamper(run, case)
        assert not coreutils(run), tamper.__name__
        assert verify_folder(run), tamper.__name__


def test_kinds_name_the_problem(tmp_path):
    expect = {dup_wrong_then_right: ("run.json", "duplicate"),
              file_to_symlink_same_bytes: ("run.json", "not-regular"),
              folder_to_symlink: ("logs", "not-regular"),
              addenda_symlink_to_folder: ("addenda", "not-a-folder"),
              new_empty_folder: ("logs/new", "extra-folder"),
              crlf_lines: (SUMS, "bad-line"),
              extra_file: ("logs/sneaked.log", "extra"),
              stray_manifest: (f"logs/{SUMS}", "stray-manifest"),
              fifo_in_folder: ("logs/pipe", "not-regular"),
              addendum_escaping_upwards: (f"addenda/20260101T000000Z-x/{SUMS}", "bad-line"),
              manifest_claims_itself: (SUMS, "claims-a-manifest")}
    for tamper, (path, kind) in expect.items():
        case = tmp_path / tamper.__name__
        case.mkdir()
        run = sealed(case)
        tamper(run, case)
        got = {(p.path, p.kind) for p in verify_folder(run)}
        assert (path, kind) in got, (tamper.__name__, got)


def test_a_fifo_as_the_manifest_never_blocks(tmp_path):
    run = sealed(tmp_path)
    (run / SUMS).unlink()
    os.mkfifo(run / SUMS)
    code = ("import sys; from pathlib import Path; "
            "from harness.measure.runfolder.manifest import verify_folder; "
            "print(sorted({p.kind for p in verify_folder(Path(sys.argv[1]))}))")
    r = subprocess.run([sys.executable, "-c", code, str(run)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "not-regular" in r.stdout and "extra" in r.stdout


def test_a_symlinked_run_folder_is_not_walked_but_the_command_resolves_it(tmp_path):
    run = sealed(tmp_path)
    link = tmp_path / "link"
    os.symlink(run, link)
    assert [p.kind for p in verify_folder(link)] == ["not-a-folder"]
    r = subprocess.run([sys.executable, "-m", "harness", "verify", str(link)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_verify_command_exit_2_for_a_run_dir_that_is_not_a_folder(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "file").write_text("x")
    for target in ("fifo", "file", "absent"):
        r = subprocess.run([sys.executable, "-m", "harness", "verify", str(tmp_path / target)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, (target, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr and "internal error" not in r.stderr


def test_parse_sums_splits_on_newline_only():
    hexd = "a" * 64
    data = f"{hexd}  a\u2028b\n{hexd}  c\u0085d\n{hexd}  e\rf\n{hexd}  ok\n".encode()
    entries, bad = parse_sums(data)
    assert entries == [("ok", hexd)]
    assert [n for n, _ in bad] == [1, 2, 3]


@pytest.mark.parametrize("name", ["observations", "logs"])
def test_an_empty_folder_the_harness_made_in_an_older_seal_still_verifies(tmp_path, name):
    """Seals made before empty folders were pruned kept an empty observations/ or logs/."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text("{}")
    write_manifest(run)
    (run / name).mkdir()
    make_read_only(run)
    assert verify_folder(run) == []
    assert coreutils(run)


@pytest.mark.parametrize("name", ["evil", "observations/nested", "post-steps"])
def test_any_other_empty_folder_is_extra(tmp_path, name):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text("{}")
    write_manifest(run)
    (run / name).mkdir(parents=True)
    assert [p.kind for p in verify_folder(run) if p.path == name] == ["extra-folder"]
