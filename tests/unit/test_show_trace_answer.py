"""`harness show` of a Gate-0 refusal answers from the transitions trace in one line per
change: which call changed the field, in which process, at which source line, on which
list; the trace is the workload's, so its text reaches the terminal inert."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.base.catalogue import GATE0_FIELD_DIFFERS
from harness.cli.main import cli
from harness.judge.finalize.attribute import (
    LIST,
    MAX_BYTES,
    answer,
    attribute,
    describe,
    trace_answers,
)
from harness.measure.runfolder import runjson
from harness.measure.runfolder.manifest import write_manifest

FIELD = "compilation.custom_ops"
SITE = "/opt/vllm/platforms/rocm.py:301 apply_config_platform_defaults"


def _trace() -> list[dict]:
    base = {"pid": 412, "process": "EngineCore", "config_id": 7, "time": 0.0}
    return [
        {**base, "event": "snapshot", "label": "startup-captured", "watched": {}},
        {**base, "event": "enter", "hook": "VllmConfig.__post_init__", "call": 1, "ordinal": 2},
        {**base, "event": "enter", "hook": "RocmPlatform.apply_config_platform_defaults",
         "call": 2},
        {**base, "event": "change", "field": FIELD, "hook": "RocmPlatform."
         "apply_config_platform_defaults", "call": 2, "before": ["+x"],
         "after": ["+x", "+x\x1b[2J"], "id_before": 99, "id_after": 99,
         "stack": ["/opt/vllm/engine/core.py:80 run", SITE]},
        {**base, "event": "exit", "hook": "RocmPlatform.apply_config_platform_defaults",
         "call": 2},
        {**base, "event": "exit", "hook": "VllmConfig.__post_init__", "call": 1},
        {**base, "event": "snapshot", "label": "generation-step", "watched": {}},
    ]


def _refused_run(folder: Path, trace: list[dict] | None) -> Path:
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({
        "schema": runjson.SCHEMA, "run_id": "run-refused", "attempt": 1, "status": "refused",
        "reasons": [], "rules": [GATE0_FIELD_DIFFERS], "seal": "sha256:s",
        "image": {"name": "r", "id": "sha256:i"}, "campaign": {"name": "c"},
        "control": {"name": "k"}}))
    step = folder / "post-steps" / "gate0"
    step.mkdir(parents=True)
    (step / "verdict.json").write_text(json.dumps({"differences": [
        {"field": FIELD, "kind": "value-changed", "startup": ["+x"],
         "generation": ["+x", "+x"]}]}))
    if trace is not None:
        (folder / "observations").mkdir()
        (folder / "observations" / "transitions.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in trace))
    write_manifest(folder)
    return folder


def _show(folder: Path) -> str:
    r = CliRunner().invoke(cli, ["show", str(folder)], terminal_width=400)
    assert r.exit_code == 0, r.output
    return r.output


def test_show_names_the_call_the_process_the_line_and_the_list(tmp_path: Path) -> None:
    out = _show(_refused_run(tmp_path / "run", _trace()))
    [line] = [x.strip() for x in out.splitlines() if "which call:" in x]
    assert line.startswith(f"which call: {FIELD}: VllmConfig.__post_init__ #2 > "
                           "RocmPlatform.apply_config_platform_defaults #1, in EngineCore "
                           f"(pid 412), at {SITE}, on the same list, changed in place: ")
    assert "\x1b" not in out  # the trace's values are shown inert


def test_a_replaced_list_and_a_run_without_a_trace(tmp_path: Path) -> None:
    trace = _trace()
    trace[3] = {**trace[3], "id_after": 100}
    [line] = answer(attribute(trace, FIELD, "startup-captured", "generation-step"))
    assert "on a new list put in its place" in line
    out = _show(_refused_run(tmp_path / "old", None))
    assert "Gate 0 differences:" in out and "which call" not in out
    no_window = _show(_refused_run(tmp_path / "cut", _trace()[:3]))
    assert (f"which call: {FIELD}: the trace has no 'startup-captured' checkpoint followed "
            "by 'generation-step'") in no_window


def _change(id_before: object, id_after: object, **more: object) -> dict:
    [result] = [attribute([*_trace()[:3], {**_trace()[3], "id_before": id_before,
                                            "id_after": id_after, **more}, *_trace()[4:]],
                          FIELD, "startup-captured", "generation-step")]
    return result


@pytest.mark.parametrize(("ids", "same"), [
    ((99, 99), True), ((99, 100), False), ((None, 99), None), ((99, None), None),
    ((True, True), None), (("99", "99"), None)],
    ids=["same", "replaced", "no-before", "no-after", "bools", "strings"])
def test_the_list_is_the_same_only_when_both_ids_are_whole_numbers_and_equal(
        ids: tuple, same: bool | None) -> None:
    found = _change(*ids)
    assert [c["same_list"] for c in found["changes"]] == [same]
    [line] = answer(found)
    assert LIST[same] in line and all(LIST[o] not in line for o in LIST if o is not same)


def test_the_answer_keeps_the_values_text_and_says_what_it_does_not_know(tmp_path: Path) -> None:
    found = _change(99, 99, after=["é"], stack=[], process=None)
    [line] = answer(found)
    assert line.endswith(': ["+x"] -> ["é"]') and "\\u00e9" not in line
    assert "in a process (pid 412), at no source line," in line
    outside = [r for r in _trace() if r["event"] != "enter" and r["event"] != "exit"]
    [bare] = answer(attribute(outside, FIELD, "startup-captured", "generation-step"))
    assert bare.startswith(f"{FIELD}: no hooked call (seen at a checkpoint), in EngineCore")
    assert answer({**found, "changes": []}) == [describe({**found, "changes": []})]
    assert answer({**found, "found": False}) == [describe({**found, "found": False})]
    trace = tmp_path / "transitions.jsonl"
    assert trace_answers(trace, [FIELD]) == []  # no trace kept: nothing to answer
    trace.write_text("".join(json.dumps(r) + "\n" for r in _trace()))
    assert trace_answers(trace, [FIELD, "model"]) == [
        *answer(attribute(_trace(), FIELD, "startup-captured", "generation-step")),
        *answer(attribute(_trace(), "model", "startup-captured", "generation-step"))]
    trace.write_bytes(b"x" * (MAX_BYTES + 1))
    [said] = trace_answers(trace, [FIELD])
    assert said == (f"{trace}: the transition trace is {MAX_BYTES + 1} bytes, over the "
                    f"{MAX_BYTES} byte limit")
