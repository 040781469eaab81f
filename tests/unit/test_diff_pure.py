"""`harness diff` as a pure comparison over dict fixtures (v1 and v2 records, hostile
values), its text rendering, `show`'s Gate-0 values and attempt, and the rerun's seal
lines and `--failed` selection."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from rich.console import Console

from harness.base.catalogue import RUN_NOT_INTACT
from harness.base.errors import Refused
from harness.cli.diff import render
from harness.cli.main import main
from harness.driver.rerun import RerunPlan, failed_rows, seal_lines
from harness.judge.difference import compare, diff_runs, engine_args, file_changes, seal_files
from harness.measure.nightfolder.rows import Row
from harness.measure.runfolder import runjson
from harness.measure.runfolder.manifest import write_manifest
from harness.measure.seal import SourceSeal, seal_digest
from harness.readers.runview import render_run

FILES_A = {"harness/a.py": "11", "input/controls/c.yaml": "22", "input/old.yaml": "33"}
FILES_B = {"harness/a.py": "11", "input/controls/c.yaml": "99", "input/new.yaml": "44"}
CUSTOM_OPS = "compilation.custom_ops"


def rec(status: str, seal: str, **kw) -> dict:
    doc = {"schema": runjson.SCHEMA, "run_id": f"run-{status}", "attempt": 1, "status": status,
           "reasons": [], "rules": [], "seal": seal, "image": {"name": "r", "id": "sha256:i"},
           "model_hashes": {"w.bin": "sha256:1"}, "campaign": {"name": "c"},
           "control": {"name": "k"}}
    doc.update(kw)
    return doc


def vector(args: dict | str) -> dict:
    text = args if isinstance(args, str) else json.dumps(args)
    return {"argv": ["docker", "run", "--env", f"HARNESS_ENGINE_ARGS={text}", "img"]}


def side(status: str, files: dict, **kw) -> dict:
    seal = seal_digest(files)
    out = {"dir": f"/runs/{status}", "record": {**rec(status, seal), **kw.pop("record", {})},
           "preflight": {"source_seal": {"seal": seal, "files": files}, "mounts": []},
           "notes": []}
    out.update(kw)
    return out


def refused_side() -> dict:
    diff = {"field": CUSTOM_OPS, "kind": "value-changed", "startup": ["+x", "none"],
            "generation": ["+x", "none", "+x"]}
    return side("refused", FILES_A, record={
        "reasons": [{"rule": "GATE0-FIELD-DIFFERS", "by": "gate0", "detail": "custom_ops"}],
        "rules": ["GATE0-FIELD-DIFFERS"]},
        verdict={"verdict": "refused", "differences": [diff]},
        vector=vector({"dtype": "bfloat16"}), metrics={"metrics": {"kv_cache_gib": 19.0}})


def accepted_side(**kw) -> dict:
    return side("accepted", FILES_B, verdict={"verdict": "accepted", "differences": []},
                startup={CUSTOM_OPS: ["+x", "none"]}, generation={CUSTOM_OPS: ["+x", "none"]},
                vector=vector({"dtype": "bfloat16"}), metrics={"metrics": {"kv_cache_gib": 19.5}},
                **kw)


def test_refused_against_its_fix_names_every_topic_that_differs() -> None:
    doc = compare(refused_side(), accepted_side())
    assert doc["schema"] == "harness.diff/v4"
    assert doc["differs"] == ["status", "rules", "seal", "gate0"]  # kv cache: within 5 %
    t = doc["topics"]
    assert t["seal"]["files"] == {"added": ["input/new.yaml"], "removed": ["input/old.yaml"],
                                  "changed": ["input/controls/c.yaml"]}
    assert t["rules"]["only_a"] == ["GATE0-FIELD-DIFFERS"] and t["rules"]["only_b"] == []
    [field] = t["gate0"]["fields"]
    assert field["a"]["generation"] == ["+x", "none", "+x"]
    assert field["b"] == {"kind": None, "startup": ["+x", "none"], "generation": ["+x", "none"]}
    assert t["gate0"]["only_a"] == [CUSTOM_OPS] and t["gate0"]["both"] == []
    [kv] = [f for f in t["figures"]["figures"] if f["figure"] == "kv_cache_gib"]
    assert (kv["a"], kv["b"], kv["change"], kv["way"]) == (19.0, 19.5, "within", "better")
    assert t["image"]["same"] and t["model"]["same"] and t["engine"]["same"]
    assert t["git"] == {"a": None, "b": None, "same": None}  # not recorded: not compared


def test_a_run_against_itself_differs_in_nothing() -> None:
    doc = compare(refused_side(), refused_side())
    assert doc["differs"] == [] and doc["topics"]["gate0"]["both"] == [CUSTOM_OPS]


def test_a_v1_record_reads_in_the_v2_shape() -> None:
    v1 = side("refused", FILES_A, record={
        "schema": runjson.SCHEMA_V1, "reasons": ["POST-gate0: GATE0-FIELD-DIFFERS: x differs"],
        "rules": "not a list"})
    doc = compare(v1, accepted_side())
    assert doc["a"]["schema"] == runjson.SCHEMA_V1
    assert doc["topics"]["rules"]["a"] == ["GATE0-FIELD-DIFFERS"]
    assert doc["topics"]["gate0"]["recorded"] == {"a": False, "b": True}
    assert doc["topics"]["gate0"]["same"] is None and "gate0" not in doc["differs"]


def test_provenance_is_compared_only_when_both_runs_have_it() -> None:
    prov = {"commit": "abc", "dirty": False, "changed": []}
    a = side("accepted", FILES_A, record={"provenance": prov})
    b = side("accepted", FILES_A, record={"provenance": {**prov, "dirty": True,
                                                          "changed": ["harness/x.py"]}})
    assert compare(a, b)["topics"]["git"]["same"] is False
    assert "git" in compare(a, b)["differs"]
    assert compare(a, side("accepted", FILES_A))["topics"]["git"]["same"] is None


def test_approvals_compared_and_a_run_at_another_commit_than_reviewed_named() -> None:
    approval = {"file": "approvals/x.json", "digest": "d", "seal": "s", "commit": "abc"}
    a = side("accepted", FILES_A, record={"approval": approval,
                                          "provenance": {"commit": "abc", "dirty": False}})
    b = side("accepted", FILES_A, record={"approval": {**approval, "commit": "old"},
                                          "provenance": {"commit": "new", "dirty": False}})
    topic = compare(a, b)["topics"]["approval"]
    assert topic["same"] is False and "approval" in compare(a, b)["differs"]
    assert (topic["commit_differs_a"], topic["commit_differs_b"]) == (False, True)
    assert "    b ran at another commit than its approval reviewed" in render(compare(a, b))
    assert compare(a, side("accepted", FILES_A))["topics"]["approval"]["same"] is None


def test_hostile_values_never_crash_and_are_compared_as_written() -> None:
    a = side("refused", FILES_A, record={"image": "not a dict", "model_hashes": [1],
                                         "attempt": True, "status": 7},
             verdict={"differences": [7, {"field": ["x"]}, {"field": "f", "startup": 1}]},
             metrics={"metrics": {"m": float("nan")}}, vector={"argv": "docker run"})
    b = side("refused", FILES_A, record={"rules": [{"no": "str"}]},
             verdict={"differences": "junk"}, metrics={"metrics": {"m": float("nan")}},
             vector=vector("{not json"))
    doc = compare(a, b)
    t = doc["topics"]
    assert t["figures"]["same"] is None  # no figure of the judge's, NaN none either
    assert doc["a"]["attempt"] is None and doc["a"]["status"] is None
    assert [f["field"] for f in t["gate0"]["fields"]] == ["f"]
    assert t["gate0"]["recorded"]["b"] is False
    assert t["engine"] == {"a": None, "b": "{not json", "same": None}
    assert compare({"record": "x"}, {})["topics"]["status"]["same"] is True


def test_true_and_one_are_not_the_same_value() -> None:
    a = side("accepted", FILES_A, metrics={"metrics": {"kv_tokens": 1}})
    b = side("accepted", FILES_A, metrics={"metrics": {"kv_tokens": True}})
    t = compare(a, b)["topics"]["figures"]
    assert t["same"] is False and t["figures"][0] == {
        "figure": "kv_tokens", "a": 1, "b": None, "unit": "tokens", "worse": "lower",
        "shift": None, "way": None, "change": "only in a"}


def test_a_seal_file_list_that_does_not_hash_to_the_seal_is_not_trusted() -> None:
    files, why = seal_files({"source_seal": {"files": FILES_A}}, "sha256:" + "0" * 64)
    assert files is None and "does not hash" in why
    assert seal_files({"source_seal": {"files": {"a": 1}}}, None)[0] is None
    assert seal_files("junk", None) == (None, "no source seal file list in preflight.json")
    forged = side("accepted", FILES_A)
    forged["preflight"]["source_seal"]["files"] = FILES_B
    topic = compare(forged, accepted_side())["topics"]["seal"]
    assert topic["files"] is None and topic["note"].startswith("a: ")


def test_engine_args_come_from_the_launched_env() -> None:
    assert engine_args(vector({"dtype": "x"})) == {"dtype": "x"}
    assert engine_args({"argv": ["docker", "--env=HARNESS_ENGINE_ARGS={}"]}) == {}
    assert engine_args({"argv": ["docker", "--env"]}) is None
    assert file_changes({"a": "1"}, {"a": "1"}) == {"added": [], "removed": [], "changed": []}


def test_text_is_grouped_and_every_value_inert() -> None:
    evil = "\x1b[2J\u202eaccepted\n"
    a = refused_side()
    a["record"]["run_id"] = evil
    a["verdict"]["differences"] += [{"field": f"f{i}\x07", "kind": "value-changed",
                                     "startup": evil, "generation": i} for i in range(30)]
    a["notes"] = [evil]
    lines = render(compare(a, accepted_side()))
    text = "\n".join(lines)
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    assert all("\n" not in line for line in lines)
    assert "status: refused -> accepted" in lines
    assert "seal: " in text and "(3 files)" in text and "    changed input/controls/c.yaml" in lines
    assert "… and 11 more fields" in text  # 31 fields, 20 shown
    assert "note (a): \\x1b[2J\\u202eaccepted\\x0a" in lines


def _sealed_pair(tmp_path: Path) -> tuple[Path, Path]:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "run.json").write_text(json.dumps(rec("refused", "sha256:s")))
    return tmp_path / "a", tmp_path / "b"


def test_hostile_folder_files_become_notes_and_nothing_is_written(tmp_path: Path) -> None:
    a, b = _sealed_pair(tmp_path)
    (a / "metrics.json").write_text('{"metrics": {"x": 1e999}}')
    (a / "preflight.json").write_text('{"source_seal": Infinity}')
    (a / "docker-vector.json").write_text('{"argv": [NaN]}')
    (a / "post-steps" / "gate0").mkdir(parents=True)
    (a / "post-steps" / "gate0" / "verdict.json").write_text("[" * 100_000)
    (a / "observations").mkdir()
    (a / "observations" / "startup.json").write_text('{"fields": {"x": 1' + "0" * 5000 + "}}")
    write_manifest(a)
    write_manifest(b)
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    doc = diff_runs(a, b)
    notes = "\n".join(doc["a"]["notes"])
    for name in ("metrics.json", "preflight.json", "docker-vector.json", "verdict.json",
                 "startup.json"):
        assert name in notes, (name, notes)
    assert doc["topics"]["figures"]["same"] is None and doc["topics"]["seal"]["files"] is None
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before


def test_a_fifo_or_symlink_planted_after_the_seal_is_refused_unread(tmp_path: Path) -> None:
    """A FIFO (which would block a naive open() forever) or a symlink planted in a sealed
    folder fails verification: the side is refused before any of its files is opened."""
    a, b = _sealed_pair(tmp_path)
    (a / "metrics.json").write_text("{}")
    (a / "preflight.json").write_text("{}")
    write_manifest(a)
    write_manifest(b)
    (a / "metrics.json").unlink()
    os.mkfifo(a / "metrics.json")
    (a / "preflight.json").unlink()
    (a / "preflight.json").symlink_to("/etc/passwd")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(Refused) as e:
        diff_runs(a, b)
    assert e.value.rule == RUN_NOT_INTACT
    assert "metrics.json: not-regular (a fifo)" in e.value.message
    assert "preflight.json: not-regular (a symlink" in e.value.message
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def _exit(args: list[str], capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as e:
        main(["diff", *args])
    return e.value.code, capsys.readouterr().out


def test_the_command_exits_0_when_both_read_and_2_when_one_does_not(tmp_path: Path,
                                                                     capsys) -> None:
    for name, status in (("a", "refused"), ("b", "accepted")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "run.json").write_text(json.dumps(rec(status, "sha256:s")))
        write_manifest(tmp_path / name)
    code, out = _exit([str(tmp_path / "a"), str(tmp_path / "b"), "--json"], capsys)
    assert code == 0 and json.loads(out)["differs"] == ["status"]
    code, out = _exit([str(tmp_path / "a"), str(tmp_path / "a")], capsys)
    assert code == 0 and "differs: nothing" in out
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "run.json").write_text("[1]")
    write_manifest(tmp_path / "c")
    assert _exit([str(tmp_path / "a"), str(tmp_path / "c")], capsys)[0] == 2


def _shown(tmp_path: Path, differences: object, rules: list[str]) -> str:
    (tmp_path / "run.json").write_text(json.dumps(rec("refused", "sha256:s", rules=rules,
                                                      attempt=3)))
    step = tmp_path / "post-steps" / "gate0"
    step.mkdir(parents=True)
    (step / "verdict.json").write_text(json.dumps({"differences": differences}))
    console = Console(record=True, width=400, color_system=None)
    render_run(tmp_path, runjson.read(tmp_path), console)
    return console.export_text()


def test_show_prints_the_attempt_and_a_gate0_refusals_values(tmp_path: Path) -> None:
    diffs = [{"field": f"f{i}\x1b[31m", "kind": "value-changed", "startup": [i],
              "generation": [i, "\u202e"]} for i in range(25)]
    out = _shown(tmp_path, diffs, ["GATE0-FIELD-DIFFERS"])
    assert "attempt" in out and " 3" in out
    assert "Gate 0 differences:" in out and "f0\\x1b[31m (value-changed): startup [0], " \
        "generation [0, \"\\u202e\"]" in out
    assert "… and 5 more fields" in out and "f20" not in out
    assert "\x1b" not in out and "\u202e" not in out


def test_show_prints_no_gate0_values_for_other_refusals(tmp_path: Path) -> None:
    out = _shown(tmp_path, [{"field": "f", "kind": "x"}], ["RUN-EXIT"])
    assert "Gate 0 differences" not in out
    (tmp_path / "x").mkdir()
    assert "Gate 0 differences" not in _shown(tmp_path / "x", "junk", ["GATE0-FIELD-DIFFERS"])


NO_MOUNTS = {"same": True, "mounts": [], "note": None}


def _plan(original_seal: str, files: dict, changes: dict | None,
          mounts: dict | None = NO_MOUNTS) -> RerunPlan:
    original = runjson.from_dict(rec("refused", original_seal))
    return RerunPlan(Path("/r"), original, None, "c",  # type: ignore[arg-type]
                     SourceSeal(seal_digest(files), files), changes, "unreadable", mounts)


def test_rerun_says_plainly_whether_the_seal_changed() -> None:
    same = _plan(seal_digest(FILES_A), FILES_A, file_changes(FILES_A, FILES_A))
    assert seal_lines(same) == ["plain repeat: seal unchanged"]
    changed = _plan(seal_digest(FILES_A), FILES_B, file_changes(FILES_A, FILES_B))
    assert seal_lines(changed) == ["seal changed: 3 files", "  added input/new.yaml",
                                   "  removed input/old.yaml", "  changed input/controls/c.yaml"]
    unknown = _plan(seal_digest(FILES_A), FILES_B, None)
    assert seal_lines(unknown) == [
        "seal changed: the original's file list is unreadable (unreadable)"]


def _row(i: int, plan: int, attempt: int, state: str, run_dir: str | None = "/r") -> Row:
    return Row(i, plan, f"c{plan}", 0, attempt, state, f"id{i}", run_dir, None, None, "plan",
               None, "t")


def test_rerun_failed_takes_each_slots_newest_attempt_that_did_not_succeed() -> None:
    rows = [_row(1, 0, 1, "refused"), _row(2, 0, 2, "accepted"),  # fixed by a rerun
            _row(3, 1, 1, "interrupted"), _row(4, 2, 1, "timed-out"), _row(5, 3, 1, "failed"),
            _row(6, 4, 1, "accepted"), _row(7, 5, 1, "planned"), _row(8, 6, 1, "deferred"),
            _row(9, 7, 1, "refused", None)]  # no folder: nothing to rerun from
    assert [r.id for r in failed_rows(rows)] == [3, 4, 5]


def test_a_difference_is_matched_by_its_process_and_field_never_by_its_label_text() -> None:
    """A field name holding `: ` (the workload names fields) is still the engine core's
    field when the verdict says so; a worker's difference has no engine-core fallback."""
    odd = "compilation.custom_ops: evil"
    a = refused_side()
    a["verdict"]["differences"] = [
        {"process": "engine-core", "field": odd, "kind": "value-changed",
         "startup": [1], "generation": [2]},
        {"process": "worker-0", "field": CUSTOM_OPS, "kind": "value-changed",
         "startup": [1], "generation": [2]}]
    b = accepted_side()
    b["startup"], b["generation"] = {odd: [1], CUSTOM_OPS: [1]}, {odd: [1], CUSTOM_OPS: [1]}
    fields = {f["field"]: f["b"] for f in compare(a, b)["topics"]["gate0"]["fields"]}
    assert fields == {f"engine-core: {odd}": {"kind": None, "startup": [1], "generation": [1]},
                      f"worker-0: {CUSTOM_OPS}": None}


def _provenance(commit: str) -> dict:
    return {"provenance": {"commit": commit, "dirty": False, "changed": []}}


def test_a_rerun_that_changed_nothing_is_a_plain_repeat_whatever_its_figures() -> None:
    kept = {"inputs": {"control": {"text": "name: k\n"}, "campaign": {"text": "name: c\n"}}}
    a = accepted_side(record=_provenance("1" * 40), **kept)
    b = accepted_side(record=_provenance("1" * 40), **kept)
    b["metrics"] = {"metrics": {"kv_cache_gib": 12.0}}  # a slow or odd run: figures only
    doc = compare(a, b)
    assert doc["differs"] == ["figures"]
    assert doc["repeat"]["plain"] is True and doc["repeat"]["changed"] == []
    assert "plain repeat: same seal, inputs, git" in "\n".join(render(doc))


def test_a_changed_input_or_an_unrecorded_one_is_not_called_a_repeat() -> None:
    base = accepted_side(record=_provenance("1" * 40))
    changed = accepted_side(record=_provenance("2" * 40))
    changed["vector"] = vector({"dtype": "half"})
    doc = compare(base, changed)
    assert doc["repeat"]["plain"] is False
    assert doc["repeat"]["changed"] == ["git", "engine"]
    assert "not a repeat: git, engine changed" in render(doc)
    unrecorded = compare(side("accepted", FILES_B), side("accepted", FILES_B))
    assert unrecorded["repeat"]["plain"] is None and "docker" in unrecorded["repeat"]["unknown"]
    assert any(line.startswith("repeat: not known (") for line in render(unrecorded))


def test_two_launches_of_a_control_that_is_no_engine_are_a_plain_repeat() -> None:
    plain = {"argv": ["docker", "run", "--env", "A=1", "img"]}
    kept = {"inputs": {"control": {"text": "name: k\n"}, "campaign": {"text": "name: c\n"}}}
    a, b = (side("accepted", FILES_B, record=_provenance("1" * 40), vector=plain, **kept)
            for _ in range(2))
    doc = compare(a, b)
    assert doc["topics"]["engine"]["same"] is True and doc["repeat"]["plain"] is True
    assert "engine args: none in either run" in render(doc)
    other = side("accepted", FILES_B, record=_provenance("1" * 40), vector=vector({"x": 1}),
                 **kept)
    assert compare(a, other)["repeat"]["changed"] == ["engine", "env"]


def test_show_marks_a_difference_vllms_own_hash_did_not_see(tmp_path: Path) -> None:
    diffs = [{"field": "model.dtype", "kind": "value-changed", "process": "engine-core",
              "processes": ["engine-core", "worker-0"], "startup": "a", "generation": "b",
              "outside_engine_hash": True},
             {"field": "compilation.custom_ops", "kind": "value-changed", "startup": [1],
              "generation": [1, 1], "outside_engine_hash": "yes"}]  # only true marks
    out = _shown(tmp_path, diffs, ["GATE0-FIELD-DIFFERS"])
    assert "in engine-core, worker-0: model.dtype (value-changed) (outside vLLM's own hash, " \
        "which agreed): startup a, generation b" in out
    assert "compilation.custom_ops (value-changed): startup [1]" in out
