"""run.json has one shape, one writer and one reader (harness.measure.runfolder.runjson).

Older harness.run/v1 records (reasons as "RULE: detail" strings) read in the v2 shape; a
hostile record is invalid input (exit 2), never a hang or a crash; and no module but the
record module writes run.json.
"""

from __future__ import annotations

import ast
import json
import os
import time
from pathlib import Path

import pytest

from harness.base.errors import INVALID, InvalidInput
from harness.base.reason import Reason
from harness.base.states import Status
from harness.measure.runfolder import layout, runjson
from harness.measure.runfolder.runjson import SCHEMA, SCHEMA_V1, RunRecord

HARNESS_DIR = Path(runjson.__file__).resolve().parents[2]


def v1_record() -> dict:
    return {
        "schema": SCHEMA_V1, "run_id": "r1", "attempt": 2, "status": "refused",
        "campaign": {"name": "c", "file": "campaigns/c.yaml", "row": "R"},
        "control": {"name": "k", "file": "controls/k.yaml", "device": "cpu"},
        "image": {"name": "img", "id": "sha256:" + "a" * 64},
        "seal": "sha256:" + "b" * 64, "model_hashes": {},
        "reasons": ["RUN-EXIT: the container exited 3",
                    "POST-gate0: GATE0-FIELD-DIFFERS: compilation.custom_ops differs",
                    "POST-exit-code: exited 1",
                    "free text with no rule"],
        "rules": ["POST-exit-code", "POST-gate0", "RUN-EXIT"],
        "times": {"created": "t0", "started": "t1", "ended": "t2", "sealed": "t3"},
        "lock": None, "outcome": {"exit_code": 3}, "post_steps": [], "rerun_of": None,
    }


def write_raw(run_dir: Path, doc: object) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    text = doc if isinstance(doc, str) else json.dumps(doc)
    (run_dir / layout.RECORD).write_text(text)
    return run_dir


def test_a_v1_record_reads_in_the_v2_shape(tmp_path):
    rec = runjson.read(write_raw(tmp_path / "r", v1_record()))
    assert rec.reasons == (
        Reason("RUN-EXIT", "the container exited 3"),
        Reason("GATE0-FIELD-DIFFERS", "compilation.custom_ops differs", "gate0"),
        Reason("POST-REFUSED", "exited 1", "exit-code"),
        Reason("", "free text with no rule"),
    )
    assert rec.rules == ["GATE0-FIELD-DIFFERS", "POST-REFUSED", "RUN-EXIT"]
    assert rec.run_id == "r1" and rec.attempt == 2 and rec.status is Status.REFUSED
    assert rec.campaign == {"name": "c", "file": "campaigns/c.yaml", "row": "R"}
    view = rec.view()
    assert view["reasons"] == [
        {"rule": "RUN-EXIT", "by": "harness", "detail": "the container exited 3"},
        {"rule": "GATE0-FIELD-DIFFERS", "by": "gate0",
         "detail": "compilation.custom_ops differs"},
        {"rule": "POST-REFUSED", "by": "exit-code", "detail": "exited 1"},
        {"rule": "", "by": "harness", "detail": "free text with no rule"},
    ]
    assert view["rules"] == rec.rules
    assert rec.raw == v1_record(), "the file as read is kept for `show --json`"


def test_a_v2_record_round_trips_and_is_never_replaced(tmp_path):
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    rec = RunRecord(
        run_id="r2", status=Status.REFUSED, attempt=1,
        reasons=(Reason("GATE0-SOURCE", "seal differs", "gate0"),),
        rules=["GATE0-SOURCE"], campaign={"name": "c", "file": "f", "row": None},
        control={"name": "k", "file": "g", "device": "cpu"},
        image={"name": "img", "id": "sha256:" + "c" * 64}, seal="sha256:" + "d" * 64,
        times={"created": "t0", "started": None, "ended": None, "sealed": "t3"},
        outcome={"exit_code": 0}, post_steps=[{"name": "gate0", "exit_code": 1,
                                               "verdict": "refused"}],
        rerun_of={"run_id": "r1", "path": "/x", "reason": "again"})
    runjson.write(run_dir, rec)
    doc = json.loads((run_dir / layout.RECORD).read_text())
    assert doc["schema"] == SCHEMA == "harness.run/v2" and "recovered" not in doc
    assert doc["reasons"] == [{"rule": "GATE0-SOURCE", "by": "gate0", "detail": "seal differs"}]
    back = runjson.read(run_dir)
    assert back == rec and back.as_dict() == doc and back.view() == doc
    assert type(back.status) is Status and all(type(r) is Reason for r in back.reasons)
    with pytest.raises(FileExistsError):
        runjson.write(run_dir, rec)


def good() -> dict:
    return RunRecord(run_id="r1", status=Status.REFUSED, attempt=1,
                     campaign={"name": "c", "file": "/p/campaigns/c.yaml", "row": "T"},
                     control={"name": "k", "file": "/p/controls/k.yaml", "device": "cpu"},
                     reasons=(Reason("GATE0-MISSING", "d"),),
                     rules=["GATE0-MISSING"],
                     post_steps=[{"name": "exit-code", "verdict": "accepted"}]).as_dict()


@pytest.mark.parametrize("change, fault", [
    ({"run_id": ["x"]}, "run_id has the wrong type"),
    ({"run_id": "../x"}, "run_id is not a run folder's name"),
    ({"status": {"evil": 1}}, "status has the wrong type"),
    ({"status": "approved"}, "is not one of"),
    ({"attempt": True}, "attempt has the wrong type"),
    ({"attempt": 0}, "attempt is below 1"),
    ({"campaign": "c"}, "campaign has the wrong type"),
    ({"campaign": {"file": "x.yaml"}}, "campaign.name is missing"),
    ({"campaign": {"name": "c", "file": 3}}, "campaign.file has the wrong type"),
    ({"control": {"name": 1}}, "control.name has the wrong type"),
    ({"reasons": "not a list"}, "reasons has the wrong type"),
    ({"reasons": [{"rule": "X-Y"}]}, "reasons[0].by is missing"),
    ({"reasons": [5]}, "reasons[0] is neither"),
    ({"rules": [1]}, "rules[0] is not a rule id"),
    ({"post_steps": [5]}, "post_steps[0] is not an object"),
    ({"post_steps": [{"verdict": "accepted"}]}, "post_steps[0] has no name"),
    ({"post_steps": [{"name": ""}]}, "post_steps[0] has no name"),
    ({"stages": [{"result": "ok"}]}, "stages[0] has no name"),
    ({"image": 7}, "image has the wrong type"),
    ({"approval": "yes"}, "approval has the wrong type"),
    ({"schema": None}, "schema has the wrong type"),
])
def test_a_document_that_is_not_a_run_record_is_bad_input(tmp_path, change, fault):
    """Every reader shares the one strict reader: a record of the wrong shape is exit 2,
    never a record printed as fact with some fields silently absent."""
    with pytest.raises(InvalidInput) as e:
        runjson.read(write_raw(tmp_path / "r", {**good(), **change}))
    assert fault in e.value.message and e.value.code == INVALID


def test_a_record_of_the_right_shape_reads_and_keeps_unknown_keys(tmp_path):
    rec = runjson.read(write_raw(tmp_path / "r", {**good(), "later": {"x": 1}}))
    assert rec.run_id == "r1" and rec.rules == ["GATE0-MISSING"]
    assert rec.view()["later"] == {"x": 1}


@pytest.mark.parametrize(("content", "message"), [
    ("[1, 2]", "a JSON list, not an object"),
    ('"accepted"', "a JSON str, not an object"),
    ('{"a": ' + "[" * 40 + "]" * 40 + "}", "nested deeper than"),
    ('{"a": ' + "[" * 5000 + "]" * 5000 + "}", "nested too deeply"),
    ("{not json", "not valid JSON"),
])
def test_a_record_that_is_not_a_sane_object_is_invalid_input(tmp_path, content, message):
    with pytest.raises(InvalidInput, match=message) as e:
        runjson.read(write_raw(tmp_path / "r", content))
    assert e.value.code == INVALID


def test_a_fifo_or_symlink_record_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / layout.RECORD)
    link = tmp_path / "link"
    link.mkdir()
    (tmp_path / "real.json").write_text(json.dumps(v1_record()))
    (link / layout.RECORD).symlink_to(tmp_path / "real.json")
    start = time.monotonic()
    cases = ((fifo, "FIFO"), (link, "symlink"), (tmp_path / "absent", "no readable run.json"))
    for run_dir, word in cases:
        with pytest.raises(InvalidInput, match=word) as e:
            runjson.read(run_dir)
        assert e.value.code == INVALID
    assert time.monotonic() - start < 5


def _imports_record_name(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.ImportFrom)
               and node.module == "harness.measure.runfolder.layout"
               and any(alias.name == "RECORD" for alias in node.names)
               for node in ast.walk(tree))


def _names_the_record(node: ast.AST, bare_name: bool) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and sub.value == layout.RECORD:
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "RECORD" and isinstance(
                sub.value, ast.Name) and sub.value.id == "layout":
            return True
        if bare_name and isinstance(sub, ast.Name) and sub.id == "RECORD":
            return True
    return False


WRITERS = {"write_json", "write_text", "write_bytes", "open", "dump", "rename", "replace"}


def record_writes(source: str) -> list[int]:
    """Lines of `source` where a write call's target path names run.json."""
    tree = ast.parse(source)
    bare = _imports_record_name(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        targets = [*node.args[:1], *(k.value for k in node.keywords
                                     if k.arg in ("path", "file", "dst"))]
        if name in WRITERS and any(_names_the_record(a, bare) for a in targets):
            found.append(node.lineno)
    return found


def test_the_scan_finds_a_record_write_and_only_that():
    assert record_writes('write_json(d / "run.json", x, exclusive=True)') == [1]
    assert record_writes("write_json(ctx.run_dir / layout.RECORD, doc)") == [1]
    assert record_writes("from harness.measure.runfolder.layout import RECORD\n"
                         "p = open(run_dir / RECORD, 'w')") == [2]
    assert record_writes('write_json(d / RECOVERED, {"why": f"{layout.RECORD} was"})') == []
    assert record_writes("RECORD = 'x.json'\nwrite_json(d / RECORD, x)") == []


def test_only_the_record_module_writes_run_json():
    """No write call outside harness/measure/runfolder/runjson.py has run.json (a literal or the
    layout constant) in the path it writes: every record goes through `runjson.write`."""
    offenders = []
    for path in sorted(HARNESS_DIR.rglob("*.py")):
        rel = path.relative_to(HARNESS_DIR).as_posix()
        if rel == "measure/runfolder/runjson.py" or rel.startswith("instrument/"):
            continue
        offenders += [f"{rel}:{line}" for line in record_writes(path.read_text())]
    assert offenders == []


def test_the_finish_and_recovery_writers_both_use_record_write():
    for rel in ("pipeline/finish.py", "pipeline/recover.py"):
        text = (HARNESS_DIR / rel).read_text()
        assert "runjson.write(" in text, rel
