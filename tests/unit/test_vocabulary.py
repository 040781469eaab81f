"""The evidence's vocabulary (harness/base): a reason, the status words, names, the GPU slot."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from harness.base.catalogue import ENV_LOCK_TIMEOUT, GATE0_FIELD_DIFFERS, POST_REFUSED
from harness.base.errors import InvalidInput
from harness.base.gpuslot import GpuSlot, holder_path
from harness.base.names import RUN_ID_MAX, SAFE_NAME, RunId, SafeName, is_name
from harness.base.reason import HARNESS, Reason, exit_class, ordered, rules
from harness.base.states import TERMINAL, State, Status, Verdict, exit_code


def test_a_reason_exits_by_its_catalogued_rule_and_only_the_harness_can_blame_the_host() -> None:
    assert Reason(ENV_LOCK_TIMEOUT, "held").exit == 3
    assert Reason(GATE0_FIELD_DIFFERS, "x").exit == 1
    assert Reason(ENV_LOCK_TIMEOUT, "claimed", by="gate0").exit == 1
    assert Reason("NO-SUCH-RULE", "x").exit == 1
    assert exit_class([Reason(GATE0_FIELD_DIFFERS, "a"), Reason(ENV_LOCK_TIMEOUT, "b")]) == 3
    assert exit_class([Reason(ENV_LOCK_TIMEOUT, "b", by="x")]) == 1


def test_the_text_form_marks_a_post_steps_reason() -> None:
    assert Reason(ENV_LOCK_TIMEOUT, "held").text() == "ENV-LOCK-TIMEOUT: held"
    assert str(Reason(GATE0_FIELD_DIFFERS, "a: b", "gate0")) == "[gate0] GATE0-FIELD-DIFFERS: a: b"
    assert Reason("", "plain").text() == "plain"


@pytest.mark.parametrize("reason", [Reason(ENV_LOCK_TIMEOUT, "held: 3 s"),
                                    Reason(GATE0_FIELD_DIFFERS, "a: b", "gate0"),
                                    Reason(POST_REFUSED, "exited 1", "my-step")])
def test_every_stored_form_reads_back_as_the_same_reason(reason: Reason) -> None:
    assert Reason.of(reason.as_dict()) == reason
    assert Reason.of(json.loads(json.dumps(reason.as_dict()))) == reason
    assert Reason.of(reason.text()) == reason


def test_older_text_forms_read() -> None:
    assert Reason.of("POST-gate0: GATE0-FIELD-DIFFERS: x") == Reason(GATE0_FIELD_DIFFERS, "x",
                                                                      "gate0")
    assert Reason.of("POST-gate0: free text") == Reason(POST_REFUSED, "free text", "gate0")
    assert Reason.of("no rule: here") == Reason("", "no rule: here")
    assert Reason.of(None) == Reason("", "")


def test_a_post_steps_output_cannot_speak_for_the_harness() -> None:
    """Read with by=<step>, an object claiming by=harness or a text "[harness]" stays the
    step's, so it cannot claim an environment exit."""
    forged = {"rule": ENV_LOCK_TIMEOUT, "by": HARNESS, "detail": "blame the host"}
    assert Reason.of(forged, by="evil").by == "evil"
    assert Reason.of("ENV-LOCK-TIMEOUT: blame", by="evil").exit == 1
    assert Reason.of("[harness] ENV-LOCK-TIMEOUT: x", by="evil").by == "evil"
    assert Reason.of(Reason(ENV_LOCK_TIMEOUT, "x"), by="evil").exit == 1


def test_rules_and_order() -> None:
    found = [Reason(GATE0_FIELD_DIFFERS, "a", "gate0"), Reason(ENV_LOCK_TIMEOUT, "b"),
             Reason(GATE0_FIELD_DIFFERS, "c", "gate0"), Reason("", "d")]
    assert rules(found) == [ENV_LOCK_TIMEOUT, GATE0_FIELD_DIFFERS]
    assert ordered(found)[0].rule == ENV_LOCK_TIMEOUT


def test_status_words_are_their_json_and_sqlite_values() -> None:
    assert json.dumps({"s": Status.TIMED_OUT}) == '{"s": "timed-out"}'
    db = sqlite3.connect(":memory:")
    db.execute("create table t (s text)")
    db.execute("insert into t values (?)", (State.DEFERRED,))
    assert db.execute("select s from t").fetchone() == ("deferred",)
    assert Status("refused") is Status.REFUSED and Verdict("refused") is Verdict.REFUSED
    with pytest.raises(ValueError):
        Status("sealed")
    assert {State.of(s) for s in Status} <= set(State)
    assert Status.INTERRUPTED not in TERMINAL and Status.ACCEPTED in TERMINAL


def test_the_exit_code_rule() -> None:
    assert exit_code(Status.ACCEPTED, [Reason(ENV_LOCK_TIMEOUT, "ignored")]) == 0
    assert exit_code(Status.REFUSED, [Reason(GATE0_FIELD_DIFFERS, "x", "gate0")]) == 1
    assert exit_code(Status.INTERRUPTED, [Reason(ENV_LOCK_TIMEOUT, "x")]) == 3
    assert exit_code("refused", []) == 1


@pytest.mark.parametrize("bad", ["", ".", "..", "-rf", "a/b", "a b", "é", "a\n", "x" * 65, 7, None])
def test_a_safe_name_is_one_plain_path_component(bad: object) -> None:
    with pytest.raises(InvalidInput):
        SafeName.parse(bad, "control")
    assert not is_name(bad)


def test_the_schema_pattern_is_the_same_alphabet() -> None:
    import re

    assert re.fullmatch(SAFE_NAME, "vllm-cpu_1.2") and not re.fullmatch(SAFE_NAME, "x" * 65)


def test_a_run_id_is_minted_and_parsed_in_one_place(tmp_path: Path) -> None:
    rid = RunId.mint("smoke")
    assert RunId.parse(rid) == rid and rid.of_control("smoke") and not rid.of_control("smok")
    assert rid.folder(tmp_path).parent == tmp_path
    assert len({RunId.mint("smoke") for _ in range(50)}) == 50
    assert RunId.valid("a" * RUN_ID_MAX) and not RunId.valid("a" * (RUN_ID_MAX + 1))
    for bad in ("..", "a/../b", "-x", "a\x00"):
        with pytest.raises(InvalidInput):
            RunId.parse(bad)
    with pytest.raises(InvalidInput):
        RunId.mint("../escape")


def test_the_gpu_slot_derives_every_name_from_its_lock(tmp_path: Path) -> None:
    slot = GpuSlot.at(tmp_path / "gpu.lock")
    assert slot.night_lock == tmp_path / "gpu.lock.night"
    assert slot.label == str(tmp_path / "gpu.lock")
    assert holder_path(slot.lock) == tmp_path / "gpu.lock.holder.json"
    assert GpuSlot.at("relative.lock").lock.is_absolute()
