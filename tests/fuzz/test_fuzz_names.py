"""Any name a workload can create seals into a folder that coreutils and `verify` both accept.

hypothesis builds trees of arbitrary names (any bytes but '/' and NUL: not UTF-8, \\r, \\n,
U+0085, U+2028, bidi overrides, backslashes...) and entry kinds (files, folders, FIFOs,
symlinks); the one cleaner runs, the folder is sealed, then `sha256sum -c --strict` and
`verify_folder` must both say OK. A second property mutates a sealed manifest: wherever
coreutils fails, `verify` fails too. Bounded by HARNESS_FUZZ_EXAMPLES like the others.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.measure.runfolder.layout import SUMS
from harness.measure.runfolder.manifest import make_read_only, verify_folder, write_manifest
from harness.pipeline.clean import clean

EXAMPLES = int(os.environ.get("HARNESS_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

SPECIAL = "\r\n\x85\u2028\u2029\u202e\u200b\\ \t*é日"
text_names = st.text(st.one_of(st.sampled_from(SPECIAL), st.characters(
    blacklist_characters="/\x00", blacklist_categories=("Cs",))), min_size=1, max_size=12)
byte_names = st.binary(min_size=1, max_size=12)
names = st.one_of(text_names.map(lambda s: s.encode("utf-8")), byte_names).filter(
    lambda b: b"/" not in b and b"\x00" not in b and b not in (b".", b".."))
paths = st.lists(names, min_size=1, max_size=3)
kinds = st.sampled_from(["file", "file", "file", "dir", "fifo", "symlink"])
trees = st.lists(st.tuples(paths, kinds, st.binary(max_size=64)), min_size=1, max_size=12)


def sha256sum_ok(folder: Path) -> bool:
    r = subprocess.run(["sha256sum", "-c", "--strict", SUMS], cwd=folder,
                       capture_output=True, timeout=60)
    return r.returncode == 0


def build(root: Path, tree: list[tuple[list[bytes], str, bytes]]) -> None:
    base = os.fsencode(root)
    for parts, kind, data in tree:
        path = base + b"/" + b"/".join(parts)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if kind == "file":
                with open(path, "xb") as f:
                    f.write(data)
            elif kind == "dir":
                os.mkdir(path)
            elif kind == "fifo":
                os.mkfifo(path)
            else:
                os.symlink(b"/etc/passwd" if data[:1] < b"\x80" else b"..", path)
        except OSError:
            continue  # a name used twice, a file where a folder was wanted: skip it


@FUZZ
@given(trees)
def test_any_names_clean_and_seal_into_what_both_tools_accept(tree):
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        (run / "observations").mkdir(parents=True)
        (run / "run.json").write_text("{}")
        build(run / "observations", tree)
        clean(run)
        write_manifest(run)
        make_read_only(run)
        try:
            assert verify_folder(run) == []
            assert sha256sum_ok(run)
        finally:
            subprocess.run(["chmod", "-R", "u+w", tmp], check=False)


lines_edit = st.sampled_from(["dup-first", "drop-first", "flip-hex", "crlf", "insert",
                              "append", "star", "dot"])


@FUZZ
@given(st.lists(st.tuples(lines_edit, st.binary(max_size=40)), min_size=1, max_size=4))
def test_wherever_coreutils_fails_on_a_mutated_manifest_verify_fails(edits):
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        (run / "logs").mkdir(parents=True)
        (run / "run.json").write_text("{}")
        (run / "logs" / "a.log").write_text("a")
        write_manifest(run)
        lines = (run / SUMS).read_bytes().split(b"\n")[:-1]
        for edit, junk in edits:
            if edit == "dup-first" and lines:
                lines.insert(0, lines[0])
            elif edit == "drop-first" and lines:
                lines.pop(0)
            elif edit == "flip-hex" and lines:
                lines[0] = (b"0" if lines[0][:1] != b"0" else b"1") + lines[0][1:]
            elif edit == "crlf" and lines:
                lines[-1] += b"\r"
            elif edit == "insert":
                lines.insert(len(junk) % (len(lines) + 1), junk)
            elif edit == "append" and lines:
                lines[-1] += junk
            elif edit == "star" and lines:
                lines[0] = lines[0].replace(b"  ", b" *", 1)
            elif edit == "dot" and lines:
                lines[0] = lines[0].replace(b"  ", b"  ./", 1)
        (run / SUMS).chmod(0o644)
        (run / SUMS).write_bytes(b"".join(line + b"\n" for line in lines))
        if not sha256sum_ok(run):
            assert verify_folder(run), "coreutils failed, verify passed"
