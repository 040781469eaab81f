"""`bundle verify` of an archive writes only the members it reads (tag files, run records,
seals) and judges the rest from the stream: the same report as verifying the unpacked tree,
the same refusals as unpacking it."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from bundle_helpers import make_run, writable_bundle

from harness.base.errors import InvalidInput
from harness.readers.bundle.export import export_bundle
from harness.readers.bundle.safe_extract import unpack
from harness.readers.bundle.verify import read_by_verify, verify_archive, verify_bundle, verify_tree

TOP = "evidence-x"


def _pack(root: Path, out: Path) -> Path:
    with tarfile.open(out, "w:gz") as tar:
        tar.add(root, arcname=root.name)
    return out


def _deep(root: Path) -> None:
    folder = root / "data" / "r1" / "/".join(["d"] * 70)
    folder.mkdir(parents=True)
    (folder / "f").write_text("x")


TAMPER = {
    "untouched": lambda root: None,
    "changed-log": lambda root: (root / "data/r1/logs/stdout.log").write_text("forged\n"),
    "extra-file": lambda root: (root / "data/r1/logs/extra.log").write_text("x"),
    "removed-file": lambda root: (root / "data/r2/logs/stderr.log").unlink(),
    "empty-folder": lambda root: (root / "data/r1/empty").mkdir(),
    "stray-payload": lambda root: (root / "data/stray.txt").write_text("x"),
    "changed-seal": lambda root: (root / "data/r2/SHA256SUMS").write_text(""),
    "too-deep": _deep,
}


@pytest.mark.parametrize("case", sorted(TAMPER))
def test_streamed_verify_reports_what_the_unpacked_tree_shows(tmp_path, case):
    runs = [make_run(tmp_path / "runs", name) for name in ("r1", "r2")]
    export_bundle(runs, tmp_path / "b.tar.gz")
    root = writable_bundle(tmp_path / "b.tar.gz", tmp_path / "x")
    TAMPER[case](root)
    archive = _pack(root, tmp_path / "t.tar.gz")
    streamed = verify_bundle(archive)
    unpacked = verify_tree(root)
    assert [str(p) for p in streamed.problems] == [str(p) for p in unpacked.problems]
    assert streamed.ok == (case == "untouched")
    assert (streamed.files, streamed.runs) == (unpacked.files, unpacked.runs)


def test_verify_writes_only_the_members_it_reads(tmp_path):
    runs = [make_run(tmp_path / "runs", name) for name in ("r1", "r2")]
    export_bundle(runs, tmp_path / "b.tar.gz")
    dest = tmp_path / "d"
    dest.mkdir()
    root, report = verify_archive(tmp_path / "b.tar.gz", dest, payload=False)
    assert report.ok and report.files > 10
    written = {p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()}
    assert written and all(read_by_verify(n) for n in written)
    assert f"{root.name}/data/r1/run.json" in written
    assert f"{root.name}/data/r1/logs/stdout.log" not in written


def _member(name: str, data: bytes | None = b"x") -> tuple[tarfile.TarInfo, io.BytesIO | None]:
    info = tarfile.TarInfo(name)
    if data is None:
        info.type = tarfile.DIRTYPE
        return info, None
    info.size = len(data)
    return info, io.BytesIO(data)


CLASHES = {
    "file-twice": [f"{TOP}/data/a", f"{TOP}/data/a"],
    "folder-then-file": [f"{TOP}/data/a/", f"{TOP}/data/a"],
    "file-then-folder": [f"{TOP}/data/a", f"{TOP}/data/a/"],
    "file-under-a-file": [f"{TOP}/data/a", f"{TOP}/data/a/b"],
    "folder-under-a-file": [f"{TOP}/data/a", f"{TOP}/data/a/b/"],
}


@pytest.mark.parametrize("case", sorted(CLASHES))
def test_a_clash_is_refused_alike_written_or_streamed(tmp_path, case):
    archive = tmp_path / "c.tar"
    with tarfile.open(archive, "w") as tar:
        for name in CLASHES[case]:
            tar.addfile(*_member(name.rstrip("/"), None if name.endswith("/") else b"x"))
    dest = tmp_path / "d"
    dest.mkdir()
    with pytest.raises(InvalidInput, match="refused hostile archive") as written:
        unpack(archive, dest)
    with pytest.raises(InvalidInput) as streamed:
        verify_bundle(archive)
    assert streamed.value.message == written.value.message
