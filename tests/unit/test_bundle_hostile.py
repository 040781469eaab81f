"""Hostile archives are refused with exit 2 and nothing lands outside a temporary folder."""

from __future__ import annotations

import bz2
import gzip
import io
import tarfile
import tempfile
from pathlib import Path

import pytest

from harness.base.errors import INVALID, InvalidInput
from harness.readers.bundle.safe_extract import Limits, unpack
from harness.readers.bundle.verify import verify_bundle

TOP = "evidence-x"


def member(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"", link: str = ""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    info.linkname = link
    return info, (io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def write_tar(path: Path, members, mode: str = "w") -> Path:
    with tarfile.open(path, mode, format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, data)
    return path


# Builders, not lists: each test needs fresh member data streams.
HOSTILE = {
    "dotdot": lambda: [member(f"{TOP}/../escaped", data=b"x")],
    "dotdot-top": lambda: [member("../escaped", data=b"x")],
    "absolute": lambda: [member("/tmp/harness-escaped-abs", data=b"x")],
    "symlink": lambda: [member(f"{TOP}/link", tarfile.SYMTYPE, link="/etc/passwd")],
    "symlink-then-write": lambda: [
        member(f"{TOP}/link", tarfile.SYMTYPE, link=".."),
        member(f"{TOP}/link/escaped", data=b"x"),
    ],
    "hardlink": lambda: [member(f"{TOP}/hard", tarfile.LNKTYPE, link="/etc/passwd")],
    "char-device": lambda: [member(f"{TOP}/null", tarfile.CHRTYPE)],
    "block-device": lambda: [member(f"{TOP}/sda", tarfile.BLKTYPE)],
    "fifo": lambda: [member(f"{TOP}/pipe", tarfile.FIFOTYPE)],
    "duplicate": lambda: [member(f"{TOP}/a", data=b"1"), member(f"{TOP}/a", data=b"2")],
    "control-char": lambda: [member(f"{TOP}/a\nb", data=b"x")],
    "bidi-override": lambda: [member(f"{TOP}/data/r/\u202etxt.exe", data=b"x")],
    "line-separator": lambda: [member(f"{TOP}/data/r/a\u2028b", data=b"x")],
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_member_is_refused(tmp_path, kind):
    archive = write_tar(tmp_path / f"{kind}.tar", HOSTILE[kind]())
    dest = tmp_path / "sandbox" / "dest"
    dest.mkdir(parents=True)
    with pytest.raises(InvalidInput, match="refused hostile archive") as e:
        unpack(archive, dest)
    assert e.value.code == INVALID
    assert not (tmp_path / "sandbox" / "escaped").exists()
    assert not (tmp_path / "escaped").exists()
    assert not Path("/tmp/harness-escaped-abs").exists()
    for path in dest.rglob("*"):
        assert not path.is_symlink()


def test_too_many_members(tmp_path):
    archive = write_tar(tmp_path / "many.tar",
                        [member(f"{TOP}/f{i}", data=b"x") for i in range(11)])
    with pytest.raises(InvalidInput, match="more than 10 members"):
        unpack(archive, tmp_path, Limits(max_members=10))


def test_too_many_bytes(tmp_path):
    archive = write_tar(tmp_path / "big.tar", [member(f"{TOP}/big", data=b"x" * 5000)])
    with pytest.raises(InvalidInput, match="bomb"):
        unpack(archive, tmp_path, Limits(max_total_bytes=4000))


def test_gzip_bomb_ratio(tmp_path):
    archive = write_tar(tmp_path / "bomb.tar.gz",
                        [member(f"{TOP}/zeros", data=bytes(4 << 20))], mode="w:gz")
    assert archive.stat().st_size < 20_000
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(InvalidInput, match="times its compressed size"):
        unpack(archive, dest, Limits(ratio_floor=1 << 20, max_ratio=50))


def test_gzip_bomb_total_in_the_stream_itself(tmp_path):
    """The bound counts decompressed bytes, not just what members declare."""
    payload = gzip.compress(bytes(8 << 20))  # not even a tar: still stopped by the count
    archive = tmp_path / "stream.gz"
    archive.write_bytes(payload)
    with pytest.raises(InvalidInput):
        unpack(archive, tmp_path, Limits(max_total_bytes=1 << 20, max_members=10))


@pytest.mark.parametrize("content,message", [
    (bz2.compress(b"x" * 100), "bzip2"),
    (b"this is not a tar archive" * 40, "not a readable tar"),
    (gzip.compress(b"\0" * 10, mtime=0)[:-4], "not a readable tar"),
])
def test_unsupported_or_unreadable(tmp_path, content, message):
    archive = tmp_path / "odd.tar"
    archive.write_bytes(content)
    with pytest.raises(InvalidInput, match=message):
        unpack(archive, tmp_path / "d")


def test_two_top_folders_is_not_a_bundle(tmp_path):
    archive = write_tar(tmp_path / "two.tar", [member("a/x", data=b"1"), member("b/y", data=b"2")])
    dest = tmp_path / "d"
    dest.mkdir()
    with pytest.raises(InvalidInput, match="one top folder"):
        unpack(archive, dest)


def test_verify_refuses_and_leaves_no_temporary_files(tmp_path, monkeypatch):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    archive = write_tar(tmp_path / "h.tar", HOSTILE["symlink-then-write"]())
    with pytest.raises(InvalidInput) as e:
        verify_bundle(archive)
    assert "symlink" in e.value.message
    assert list(scratch.iterdir()) == []


def test_cli_exits_2_with_a_clear_message(tmp_path, capsys):
    from harness.cli.bundle import bundle
    from harness.cli.main import cli, main

    cli.add_command(bundle)
    archive = write_tar(tmp_path / "h.tar", HOSTILE["dotdot"]())
    with pytest.raises(SystemExit) as e:
        main(["bundle", "verify", str(archive)])
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert "refused hostile archive" in err and "Traceback" not in err
