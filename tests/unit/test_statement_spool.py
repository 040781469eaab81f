"""The bundle statement written run by run (`StatementSpool`) is byte for byte the whole
document (`dumps_json(build_statement(...))`), for any runs, and memory keeps only slim
facts; `iter_json_spliced` is the layout that makes that possible."""

from __future__ import annotations

import hashlib
import io
import json

import pytest

from harness.base.atomic import dumps_json, iter_json_spliced
from harness.readers.bundle.bag import bag_info
from harness.readers.bundle.facts import RunFacts
from harness.readers.bundle.statement import StatementSpool, build_statement

H = "ab" * 32


def _facts(run_id: str, **record) -> RunFacts:
    return RunFacts(folder=f"data/{run_id}", record={"run_id": run_id, **record},
                    argv=["docker", "run", "--name", run_id],
                    host={"hostname": "box", "kernel": "6.1", "docker": {"Version": "28"}},
                    preflight={"model_hashes": {"m/w.bin": "sha256:ef"}},
                    notes=["metrics.json absent"])


def _runs() -> list[RunFacts]:
    hostile = {"splice": "splice:subject:" + "0" * 32, "nl": "a\nb\u2028c", "uni": "é✓"}
    return [
        _facts("r1", image={"name": "i", "id": "sha256:CD"}, seal="sha256:ab",
               status="accepted", campaign={"name": "c", "row": 1, "file": "/p/c.yaml"},
               times={"started": "2026-11-30T08:00:00Z", "ended": "2026-11-30T08:30:00Z"},
               outcome={"exit_code": 0, "weird": hostile}),
        _facts("r2", image={"name": "i", "id": "sha256:cd"}, seal="sha256:ab",
               status="refused", reasons=["HOST-DRIFT"], lock={"acquired": "a"},
               times={"started": "2026-11-30T09:00:00Z"}, post_steps=[[], {}, [[]]]),
        RunFacts(folder="data/r3"),  # an unreadable run: no record at all
    ]


def _spooled(runs: list[RunFacts], subjects: dict[str, str]) -> bytes:
    out = io.BytesIO()
    with StatementSpool() as spool:
        for r in runs:
            spool.add(r)
        digest = spool.write(out, [r.slim() for r in runs], subjects)
    assert digest == hashlib.sha256(out.getvalue()).hexdigest()
    return out.getvalue()


@pytest.mark.parametrize("count", [0, 1, 3])
def test_the_spooled_statement_is_the_whole_document_byte_for_byte(count):
    runs = _runs()[:count]
    subjects = {f"data/r{i}/f{j}": H for i in range(count) for j in range(3)}
    whole = dumps_json(build_statement(runs, subjects)).encode("utf-8")
    assert _spooled(runs, subjects) == whole
    assert len(json.loads(whole)["subject"]) == 3 * count


def test_runs_must_be_added_in_folder_order():
    with StatementSpool() as spool:
        spool.add(RunFacts(folder="data/b"))
        with pytest.raises(ValueError, match="folder order"):
            spool.add(RunFacts(folder="data/a"))


def test_slim_facts_give_the_same_bag_info_and_hold_none_of_the_big_records():
    runs = _runs()
    assert bag_info([r.slim() for r in runs], "1.2") == bag_info(runs, "1.2")
    slim = runs[0].slim()
    assert slim.argv is None and slim.preflight is None and slim.host == {"hostname": "box"}
    assert "outcome" not in slim.record and slim.get("approval") is None
    assert slim.run_id == "r1" and slim.get("campaign", "file") == "/p/c.yaml"


@pytest.mark.parametrize("items", [[], [{}], [1, "x\ny", {"a": [1, {"b": []}]}, [[]]]])
def test_a_spliced_list_is_encoded_as_the_list_itself(items):
    key = "splice:k:" + "f" * 32
    doc = {"z": {"deep": {"list": [key]}}, "a": [key + "x"], "s": "[\n  \"" + key}
    text = "".join(iter_json_spliced(doc, {key: (dumps_json(i)[:-1] for i in items)}))
    assert text == dumps_json({**doc, "z": {"deep": {"list": items}}})


def test_a_placeholder_must_appear_exactly_once():
    key = "splice:k:" + "f" * 32
    with pytest.raises(ValueError, match="2 times"):
        list(iter_json_spliced({"a": [key], "b": [key]}, {key: iter(())}))
    with pytest.raises(ValueError, match="0 times"):
        list(iter_json_spliced({"a": key}, {key: iter(())}))


def _statement_text(predicate: str) -> str:
    return ('{"_type": "https://in-toto.io/Statement/v1", "predicate": ' + predicate +
            ', "subject": [{"name": "data/r/a", "digest": {"sha256": "' + H + '"}}]}')


def test_check_statement_keeps_only_what_it_reads_and_still_judges_the_whole_text():
    from harness.readers.bundle.records import BadMember, Pruned, parse_json
    from harness.readers.bundle.statement import _read_by_check, check_statement

    text = _statement_text(json.dumps({"runs": [{"run_id": "r", "argv": ["a"]}] * 3}))
    parsed = parse_json(text, keep=_read_by_check)
    assert isinstance(parsed["predicate"], Pruned) and parsed["predicate"].depth == 4
    assert parsed["subject"] == [{"name": "data/r/a", "digest": {"sha256": H}}]
    assert check_statement(text, {"data/r/a": H}, "s") == []
    # what is dropped is still checked: nesting (of objects, and of lists inside a dropped
    # object), duplicate keys, NaN, long integers
    for bad, why in [(_statement_text('{"x": ' * 70 + "1" + "}" * 70), "nested deeper"),
                     (_statement_text('{"x": ' + "[" * 70 + "1" + "]" * 70 + "}"),
                      "nested deeper"),
                     (_statement_text('{"a": 1, "a": 2}'), "twice"),
                     (_statement_text('{"a": NaN}'), "not JSON"),
                     (_statement_text('{"a": ' + "9" * 70 + "}"), "digits")]:
        with pytest.raises(BadMember, match=why):
            parse_json(bad, keep=_read_by_check)
        problems = check_statement(bad, {"data/r/a": H}, "s")
        assert [p.kind for p in problems] == ["malformed"]
