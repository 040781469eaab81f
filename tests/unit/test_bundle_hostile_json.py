"""Issue 10 item 15 (bundles): hostile JSON in a bundle's statement or in a run's records is
a named problem (verify: exit 1, naming the file) or a noted absence (export), never an
internal error (exit 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bundle_helpers import make_run, rebag, seal, writable_bundle

from harness.cli.bundle import bundle
from harness.cli.main import cli, main
from harness.readers.bundle.export import export_bundle
from harness.readers.bundle.records import BadMember, parse_json
from harness.readers.bundle.verify import verify_bundle

STATEMENT = "metadata/statement.intoto.json"


def _cli(args: list[str], capsys) -> tuple[int, str]:
    cli.add_command(bundle)
    with pytest.raises(SystemExit) as e:
        main(args)
    captured = capsys.readouterr()
    return e.value.code, captured.out + captured.err


def _with_statement(statement: bytes):
    def edit(text: str) -> bytes:
        return statement
    return edit


def _inject(where: str, value: str):
    """Put `value` (raw JSON text) somewhere inside the real statement."""
    def edit(text: str) -> bytes:
        return text.replace('"predicate": {', f'"predicate": {{"{where}": {value}, ', 1).encode()
    return edit


def _duplicate_subject(text: str) -> bytes:
    """Two `subject` keys: jq and Python read the last, other tools the first."""
    doc = json.loads(text)
    forged = json.dumps([{"name": "data/r/forged", "digest": {"sha256": "0" * 64}}])
    return text.replace('"subject": [', f'"subject": {forged}, "subject": [', 1).encode() \
        if doc else b""


HOSTILE = {
    "huge-int": _inject("n", "1" * 5000),
    "huge-int-alone": _with_statement(b"9" * 5000),
    "deep-list": _with_statement(b"[" * 100_000 + b"]" * 100_000),
    "deep-object": _with_statement(b'{"a":' * 50_000 + b"1" + b"}" * 50_000),
    "nested-100": _inject("deep", "[" * 100 + "]" * 100),
    "nan": _inject("x", "NaN"),
    "infinity": _inject("x", "-Infinity"),
    "overflow-float": _inject("x", "1e999"),
    "duplicate-subject": _duplicate_subject,
    "not-utf8": _with_statement(b'{"_type": "\xff"}'),
    "subject-not-a-list": _with_statement(
        b'{"_type": "https://in-toto.io/Statement/v1", "subject": {"name": 1}}'),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_statement_fails_verification_naming_it(tmp_path, kind, capsys):
    run = make_run(tmp_path / "gpu-runs", "r", full=False)
    export_bundle([run], tmp_path / "b.tar")
    root = writable_bundle(tmp_path / "b.tar", tmp_path / "x")
    path = root / STATEMENT
    path.write_bytes(HOSTILE[kind](path.read_text()))
    rebag(root, statement=False)  # the tag manifest agrees: only the statement is wrong
    code, text = _cli(["bundle", "verify", str(root)], capsys)
    assert code == 1, text
    assert f"FAIL malformed: {STATEMENT}" in text
    assert "internal error" not in text and "Traceback" not in text
    assert len(text) < 5000  # the hostile value is not echoed back


@pytest.mark.parametrize("text,reason", [
    ("1" * 65, "digits"), ('{"a": 1, "a": 2}', "twice"), ("[" * 65 + "]" * 65, "deeper"),
    ("NaN", "not JSON"), ("1e400", "out of range"), ("{", "not JSON"),
], ids=["long-int", "duplicate-key", "deep", "nan", "overflow", "truncated"])
def test_strict_json_reader(text, reason):
    with pytest.raises(BadMember, match=reason):
        parse_json(text)


def test_strict_json_reader_accepts_plain_json():
    assert parse_json('{"a": [1, -2.5, "x", null, true], "b": {"c": 12345678901234567890}}') \
        == {"a": [1, -2.5, "x", None, True], "b": {"c": 12345678901234567890}}


@pytest.mark.parametrize("record", [
    '{"run_id": "r", "status": "accepted", "n": ' + "7" * 5000 + "}",
    '{"run_id": "r", "status": "accepted", "x": NaN}',
    '{"run_id": "r", "status": "accepted", "x": ' + "[" * 5000 + "]" * 5000 + "}",
    '{"run_id": "r", "run_id": "other"}',
], ids=["huge-int", "nan", "deep", "duplicate-key"])
def test_hostile_run_record_is_noted_not_a_crash(tmp_path, record, capsys):
    """A sealed run whose run.json is hostile still exports: the statement says the
    record was unreadable, and the bundle verifies."""
    run = make_run(tmp_path / "gpu-runs", "r", full=False)
    (run / "run.json").write_text(record)
    seal(run)
    out = tmp_path / "b.tar"
    code, text = _cli(["bundle", "export", str(run), "-o", str(out)], capsys)
    assert code == 0, text
    assert verify_bundle(out).ok
    root = writable_bundle(out, tmp_path / "x")
    statement = json.loads((root / STATEMENT).read_text())
    notes = statement["predicate"]["runDetails"]["byproducts"][0]["annotations"]
    assert any(n.startswith("run.json unreadable") for n in notes["records_missing"])


def test_oversized_tag_file_is_malformed_not_read(tmp_path, monkeypatch):
    import harness.readers.bundle.records as records

    run = make_run(tmp_path / "gpu-runs", "r", full=False)
    export_bundle([run], tmp_path / "b.tar")
    root = writable_bundle(tmp_path / "b.tar", tmp_path / "x")
    monkeypatch.setattr(records, "TAG_LIMIT", 100)
    problems = {(p.kind, p.path) for p in verify_bundle(Path(root)).problems}
    assert ("malformed", "manifest-sha256.txt") in problems
