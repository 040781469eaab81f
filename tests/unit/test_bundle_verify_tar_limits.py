"""Holes a red team found in `bundle verify`, each refused by construction (exit 2).

Data past where Python's tarfile stops (other tar readers extract it), gzip trailers
never checked, extension headers read whole into memory, a compression ratio judged
against appended junk, a signer principal printed raw, and over-long member names.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zlib
from pathlib import Path

import pytest
from bundle_helpers import make_keys, make_run

from harness.base.errors import INVALID, InvalidInput
from harness.readers.bundle.export import export_bundle
from harness.readers.bundle.safe_extract import Limits, unpack
from harness.readers.bundle.verify import verify_bundle

TOP = "evidence-x"


@pytest.fixture
def good_tar(tmp_path) -> bytes:
    """The bytes of a good, uncompressed bundle."""
    run = make_run(tmp_path / "runs", "r", full=False)
    out = tmp_path / "good.tar"
    export_bundle([run], out)
    assert verify_bundle(out).ok
    return out.read_bytes()


def _members_end(raw: bytes) -> int:
    """Offset just past the last member's data: where the end-of-archive blocks start."""
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        last = tar.getmembers()[-1]
    return last.offset_data + -(-last.size // 512) * 512


def _evil_member(top: str) -> bytes:
    info = tarfile.TarInfo(f"{top}/data/r/evil.sh")
    data = b"#!/bin/sh\necho pwned\n"
    info.size = len(data)
    return info.tobuf(format=tarfile.USTAR_FORMAT) + data + bytes(512 - len(data))


def _refused(tmp_path: Path, content: bytes, match: str, name: str = "b.tar",
             limits: Limits | None = None) -> None:
    archive = tmp_path / name
    archive.write_bytes(content)
    with pytest.raises(InvalidInput, match=match) as e:
        verify_bundle(archive, limits=limits)
    assert e.value.code == INVALID


# 1. data after what tarfile reads; gzip trailers and trailing data


@pytest.mark.parametrize("between", [b"G" * 512, bytes(1024), bytes(512)],
                         ids=["garbage-header", "after-end-blocks", "after-lone-zero-block"])
def test_member_after_where_tarfile_stops_is_refused(tmp_path, good_tar, between):
    end = _members_end(good_tar)
    with tarfile.open(fileobj=io.BytesIO(good_tar)) as tar:
        top = tar.getnames()[0].split("/")[0]
    hostile = good_tar[:end] + between + _evil_member(top) + bytes(10240)
    _refused(tmp_path, hostile, "data after the end of the archive")


def test_nul_padding_after_the_end_is_fine(tmp_path, good_tar):
    archive = tmp_path / "padded.tar"
    archive.write_bytes(good_tar + bytes(3 * 10240 + 512))
    assert verify_bundle(archive).ok


def test_gzip_with_a_bad_crc_is_refused(tmp_path, good_tar):
    gz = bytearray(gzip.compress(good_tar))
    gz[-8] ^= 0xFF  # CRC-32 of the trailer
    _refused(tmp_path, bytes(gz), "incorrect data check", "b.tar.gz")


def test_gzip_with_a_bad_length_is_refused(tmp_path, good_tar):
    gz = bytearray(gzip.compress(good_tar))
    gz[-1] ^= 0x01  # ISIZE
    _refused(tmp_path, bytes(gz), "incorrect length check", "b.tar.gz")


def test_gzip_without_its_trailer_is_refused(tmp_path, good_tar):
    _refused(tmp_path, gzip.compress(good_tar)[:-8], "cut short", "b.tar.gz")


@pytest.mark.parametrize("junk", [b"junk", bytes(16), b"\x1f"])
def test_data_after_the_gzip_stream_is_refused(tmp_path, good_tar, junk):
    _refused(tmp_path, gzip.compress(good_tar) + junk, "after the end of the gzip stream",
             "b.tar.gz")


def test_concatenated_gzip_members_are_one_stream(tmp_path, good_tar):
    half = len(good_tar) // 2
    archive = tmp_path / "two.tar.gz"
    archive.write_bytes(gzip.compress(good_tar[:half]) + gzip.compress(good_tar[half:]))
    assert verify_bundle(archive).ok


# 2. memory: extension headers are bounded before tarfile reads them; honest ratio


def _header(name: str, size: int, kind: bytes) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.type = size, kind
    return info._create_header(info.get_info(), tarfile.GNU_FORMAT, "utf-8", "surrogateescape")


RSS_PROBE = """
import resource, sys
from pathlib import Path
from harness.readers.bundle.safe_extract import unpack
from harness.base.errors import InvalidInput
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    unpack(Path(sys.argv[1]), Path(sys.argv[2]))
    print("accepted")
except InvalidInput as e:
    print("refused", e)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


@pytest.mark.parametrize("kind", [tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK,
                                  tarfile.XHDTYPE, tarfile.XGLTYPE])
def test_huge_extension_header_is_refused_before_it_is_read(tmp_path, kind):
    size = 256 << 20  # a sparse file: 256 MiB that tarfile used to read whole into memory
    archive = tmp_path / "huge.tar"
    with open(archive, "wb") as f:
        f.write(_header("././@LongLink", size, kind))
        f.truncate(512 + size + 1024)
    dest = tmp_path / "dest"
    dest.mkdir()
    probe = subprocess.run([sys.executable, "-c", RSS_PROBE, str(archive), str(dest)],
                           capture_output=True, text=True, timeout=120, check=True)
    verdict, grown = probe.stdout.strip().rsplit("\n", 1)
    assert verdict.startswith("refused") and "extension header" in verdict, probe.stdout
    assert int(grown) < 32, f"peak RSS grew by {grown} MiB"


def test_long_run_of_small_extension_headers_is_refused(tmp_path):
    raw = b"".join(_header("././@LongLink", 10, tarfile.GNUTYPE_LONGNAME) + b"n" * 10
                   + bytes(502) for _ in range(100))
    _refused(tmp_path, raw + bytes(1024), "extension headers in a row")


def test_gnu_sparse_member_is_refused_before_its_map_is_read(tmp_path):
    _refused(tmp_path, _header(f"{TOP}/s", 0, tarfile.GNUTYPE_SPARSE) + bytes(1024),
             "sparse file")


def test_ratio_counts_compressed_bytes_consumed_not_appended_junk(tmp_path):
    """Appended junk used to enlarge the allowance: the ratio was judged by file size."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo(f"{TOP}/zeros")
        info.size = 4 << 20
        tar.addfile(info, io.BytesIO(bytes(info.size)))
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    gz = packer.compress(buf.getvalue()) + packer.flush()
    junk = os.urandom(200_000)  # file size 50x the stream: ratio 20 by file size, ~1000 honest
    _refused(tmp_path, gz + junk, "times its compressed size", "b.tar.gz",
             Limits(ratio_floor=1 << 20, max_ratio=50))


# 3. the signer principal comes from a file and reaches a terminal


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH")
def test_signer_principal_is_printed_escaped(tmp_path, capsys):
    from harness.cli.bundle import bundle
    from harness.cli.main import cli, main

    cli.add_command(bundle)
    key, line = make_keys(tmp_path, "alice")
    run = make_run(tmp_path / "runs", "r", full=False)
    out = tmp_path / "signed.tar"
    export_bundle([run], out, sign_key=key)
    evil = "x\x1b]8;;http://evil\x07y\x1b[2J"
    allowed = tmp_path / "allowed"
    allowed.write_text(line.replace("alice@example", evil, 1))
    with pytest.raises(SystemExit) as e:
        main(["bundle", "verify", str(out), "--allowed-signers", str(allowed)])
    printed = capsys.readouterr()
    assert e.value.code == 0, printed
    assert "good signature by x\\u001b]8;;http://evil\\u0007y" in printed.out
    assert "\x1b" not in printed.out + printed.err and "\x07" not in printed.out + printed.err


# 4. over-long names are refused by the sealable-name policy before anything is created


@pytest.mark.parametrize("name", [
    f"{TOP}/" + "a" * 300,  # a component over 255 bytes
    f"{TOP}/" + "/".join(["b" * 200] * 6) + "/f",  # a path over 1024 bytes
    f"{TOP}/" + "c" * 256 + "/f",  # an over-long folder component
])
def test_over_long_names_are_refused_before_anything_is_created(tmp_path, name):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo(name)
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    archive = tmp_path / "long.tar"
    archive.write_bytes(buf.getvalue())
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(InvalidInput, match=r"refused hostile archive.*longer than") as e:
        unpack(archive, dest)
    assert e.value.code == INVALID
    assert list(dest.iterdir()) == []


def test_refusal_messages_are_one_escaped_line(tmp_path):
    archive = tmp_path / "a\x1b]8;;evil\x07.tar"
    archive.write_bytes(b"not a tar" * 100)
    with pytest.raises(InvalidInput) as e:
        verify_bundle(archive)
    assert "\x1b" not in str(e.value) and "\x07" not in str(e.value)
    json.dumps(str(e.value))
