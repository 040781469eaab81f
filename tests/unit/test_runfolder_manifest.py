"""SHA256SUMS has one format, one parser and one checker (harness.measure.runfolder.manifest).

What the writer writes, `sha256sum -c --strict` accepts; what `sha256sum` writes, the
parser reads; every other line is refused, and no other module parses such lines.
"""

from __future__ import annotations

import ast
import hashlib
import re
import subprocess
from pathlib import Path

import pytest

from harness.measure.runfolder import manifest
from harness.measure.runfolder.layout import SUMS
from harness.readers.bundle.sums import compare as bundle_compare
from harness.readers.bundle.sums import parse_sums as bundle_parse

HARNESS_DIR = Path(manifest.__file__).resolve().parents[2]
H = "ab" * 32
FILES = {"run.json": b"{}\n", "logs/stdout.log": b"hello\n", "a b/c d.txt": b"spaces\n",
         "observations/\u00e9t\u00e9.json": b"[]\n"}


def folder(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    for rel, data in FILES.items():
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_bytes(data)
    return run


def test_what_the_writer_writes_coreutils_accepts_and_the_parser_reads(tmp_path):
    run = folder(tmp_path)
    digests = manifest.write_manifest(run)
    r = subprocess.run(["sha256sum", "-c", "--strict", SUMS], cwd=run, capture_output=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    entries, bad = manifest.parse((run / SUMS).read_bytes())
    assert bad == [] and dict(entries) == digests
    assert digests == {rel: hashlib.sha256(data).hexdigest() for rel, data in FILES.items()}
    assert manifest.verify_folder(run) == []


def test_what_sha256sum_writes_the_parser_reads_and_verify_accepts(tmp_path):
    run = folder(tmp_path)
    out = subprocess.run(["sha256sum", "--", *sorted(FILES)], cwd=run, capture_output=True,
                         check=True, timeout=60).stdout
    entries, bad = manifest.parse(out)
    assert bad == []
    assert dict(entries) == {rel: hashlib.sha256(d).hexdigest() for rel, d in FILES.items()}
    (run / SUMS).write_bytes(out)
    assert manifest.verify_folder(run) == []


@pytest.mark.parametrize(("data", "why"), [
    (f"{H} x\n", "not a"),  # one space
    (f"{H.upper()}  x\n", "not a"),  # sha256sum would accept it; we never write it
    (f"{H} *x\n", "not a"),  # the binary marker
    (f"{H[:-1]}  x\n", "not a"),
    (f"\\{H}  a\\nb\n", "not a"),  # coreutils' escaped form
    (f"{H}  x\r\n", "control"),
    ("\n", "not a"),  # an empty line
    (f"{H}  ./x\n", ""),
    (f"{H}  ../x\n", ""),
    (f"{H}  /etc/passwd\n", ""),
    (f"{H}  x", "no newline"),
])
def test_the_parser_refuses_every_other_line(data, why):
    entries, bad = manifest.parse(data.encode())
    assert entries == [] or why == "no newline"
    assert len(bad) == 1 and why in bad[0][1], bad


def test_a_name_that_is_not_utf8_is_refused():
    entries, bad = manifest.parse(H.encode() + b"  a\xffb\n")
    assert entries == [] and bad == [(1, "the name is not UTF-8")]


def test_duplicates_are_kept_in_order_for_the_checkers_to_name():
    entries, bad = manifest.parse(f"{H}  a\n{'0' * 64}  a\n".encode())
    assert bad == [] and entries == [("a", H), ("a", "0" * 64)]
    _, problems = bundle_parse(f"{H}  a\n{'0' * 64}  a\n", "m")
    assert [p.detail for p in problems] == ["a listed twice"]


def test_the_writer_refuses_names_the_parser_would_refuse():
    for name in ("a\nb", "c\\d", "./x", "/abs", "e\rf"):
        with pytest.raises(ValueError, match="cannot be sealed"):
            manifest.render({name: H})
        entries, bad = manifest.parse(f"{H}  {name}\n".encode())
        assert (name, H) not in entries and bad


def test_compare_is_the_one_checker_of_coverage_and_hashes():
    err = OSError(5, "I/O error")
    found = {"a": H, "b": "0" * 64, "d": H, "e": err, "f": None}
    claims = {"a": H, "b": H, "c": H, "e": H}
    assert manifest.compare(claims, found) == [
        ("b", "changed"), ("c", "missing"), ("d", "extra"), ("e", "unreadable"),
        ("f", "extra")]
    kinds = [(p.kind, p.path) for p in bundle_compare({"a": H, "c": H}, {"a": "0" * 64,
                                                                         "d": H}, "m")]
    assert kinds == [("changed", "a"), ("missing", "c"), ("extra", "d")]


def test_bundle_manifests_read_through_the_one_parser():
    """A bundle refuses exactly what a run seal refuses (no `./`, no missing newline)."""
    for data in (f"{H}  ./data/x\n", f"{H}  data/x", f"{H}  data/x\n\n"):
        _, bad = manifest.parse(data.encode())
        _, problems = bundle_parse(data, "manifest-sha256.txt")
        assert bad and len(problems) == len(bad)
        assert all(p.kind == "malformed" for p in problems)


SUMS_LINE = re.compile(r"\{64\}\)?\s*(?: |\\s)")


def test_exactly_one_function_parses_sha256sum_lines():
    """Only `manifest.parse` holds a `<64 hex>  <name>` line pattern, and only it splits
    manifest data into lines: every other reader goes through it."""
    holders = []
    for path in sorted(HARNESS_DIR.rglob("*.py")):
        rel = path.relative_to(HARNESS_DIR).as_posix()
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
                text = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
                if "{64}" in text and SUMS_LINE.search(text):
                    holders.append(rel)
    assert holders == ["measure/runfolder/manifest.py"]
    tree = ast.parse(Path(manifest.__file__).read_text())
    users = [f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
             and any(isinstance(n, ast.Name) and n.id == "_LINE" for n in ast.walk(f))]
    assert users == ["parse"]
