"""The attribution's replay of a hostile trace, at its edges (harness.judge.finalize.attribute).

The trace comes out of the workload: a record may name a pid with no open call, an exit
may close calls left open inside it, an ordinal may sit on a bound, an id may be reused
by a new config, a frame may be huge. Each test builds the records the instrument writes
and asserts what the attribution reports, or which lines `read_trace` refuses to trust."""

from __future__ import annotations

import json
import os

import pytest

from harness.base.readfile import InputError
from harness.judge.finalize.attribute import MAX_NAME, MAX_ORDINAL, attribute, read_trace

BASE = {"pid": 28, "process": "EngineCore", "config_id": 7, "time": 0.0}


def rec(event: str, **kw) -> dict:
    return {**BASE, "event": event, **kw}


def snap(label: str) -> dict:
    return rec("snapshot", label=label, watched={})


def enter(hook: str, call: int, **kw) -> dict:
    return rec("enter", hook=hook, call=call, **kw)


def leave(hook: str, call: int, **kw) -> dict:
    return rec("exit", hook=hook, call=call, **kw)


def change(**kw) -> dict:
    return rec("change", **{"field": "f", "hook": None, "call": None, "before": 0,
                            "after": 1, **kw})


def window(*middle: dict) -> list[dict]:
    return [snap("start"), *middle, snap("end")]


def only_change(records: list[dict]) -> dict:
    [found] = attribute(records, "f", "start", "end")["changes"]
    return found


# --- the window ----------------------------------------------------------------------------


def test_without_a_start_checkpoint_nothing_is_found_and_no_change_is_listed():
    result = attribute([change(), snap("end")], "f", "start", "end")
    assert result["found"] is False
    assert result["changes"] == []


def test_a_start_after_an_end_opens_a_new_window_that_must_close_again():
    result = attribute([*window(change()), snap("start"), change(after=2)], "f", "start", "end")
    assert result["found"] is False  # the last start has no end after it
    assert [c["after"] for c in result["changes"]] == [2]


# --- open calls ----------------------------------------------------------------------------


def test_an_exit_of_a_call_never_entered_is_ignored():
    records = window(leave("H", 9), leave("H", 9, pid=99), change())
    assert only_change(records)["within"] == []


def test_an_exit_closes_its_call_and_every_call_left_open_inside_it():
    records = window(enter("Outer", 1), enter("Inner", 2), leave("Outer", 1), change())
    assert only_change(records)["within"] == []
    records = window(enter("Outer", 1), enter("Inner", 2), enter("Innermost", 3),
                     leave("Inner", 2), change())
    assert only_change(records)["within"] == ["Outer #1"]


def test_open_calls_are_per_process():
    records = window(enter("H", 1), enter("H", 1, pid=29), leave("H", 1, pid=29), change())
    assert only_change(records)["within"] == ["H #1"]


@pytest.mark.parametrize("ordinal", [1, 2, MAX_ORDINAL])
def test_an_ordinal_the_instrument_counted_is_believed_up_to_its_bound(ordinal):
    # A second call on the same config id: the replay's own count would say #2.
    records = window(enter("H", 1, ordinal=1), leave("H", 1),
                     enter("H", 2, ordinal=ordinal), change())
    assert only_change(records)["within"] == [f"H #{ordinal}"]


def test_past_its_bound_an_ordinal_is_the_replays_own_count():
    records = window(enter("H", 1), leave("H", 1), enter("H", 2, ordinal=MAX_ORDINAL + 1),
                     change())
    assert only_change(records)["within"] == ["H #2"]


# --- what a change carries -----------------------------------------------------------------


def test_the_site_is_the_innermost_frame_cut_to_a_bound():
    frames = ["/x/a.py:1 outer", "/x/b.py:2 middle", "/x/c.py:3 inner"]
    assert only_change(window(change(stack=frames)))["site"] == "/x/c.py:3 inner"
    huge = "/x/" + "d" * 5000
    site = only_change(window(change(stack=[*frames, huge])))["site"]
    assert huge.startswith(site) and 0 < len(site) == 1000


@pytest.mark.parametrize("stack", [[], "/x/a.py:1 not a list", ["/x/a.py:1 f", 7],
                                   ["/x/a.py:1 f", ["/x/b.py"]], None, {"0": "/x/a.py"}])
def test_a_stack_that_is_not_a_list_of_frames_gives_no_site(stack):
    assert only_change(window(change(stack=stack)))["site"] is None


# --- read_trace: what is trusted -----------------------------------------------------------


def write_trace(tmp_path, records: list[dict]):
    path = tmp_path / "transitions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.mark.parametrize("name", ["x", "y" * MAX_NAME])
def test_a_name_from_one_character_to_the_bound_is_trusted(tmp_path, name):
    records = [enter(name, 1), change(field=name, hook=name, call=1), snap(name)]
    got, bad = read_trace(write_trace(tmp_path, records))
    assert (got, bad) == (records, 0)


@pytest.mark.parametrize("record", [
    enter("", 1), enter("y" * (MAX_NAME + 1), 1), change(field=""),
    change(field="y" * (MAX_NAME + 1)), snap("y" * (MAX_NAME + 1)),
    change(call="1"), change(call=True), change(call=1.0), change(hook=""),
])
def test_a_record_whose_names_or_call_are_not_the_instruments_is_not_trusted(tmp_path, record):
    got, bad = read_trace(write_trace(tmp_path, [snap("start"), record]))
    assert (got, bad) == ([snap("start")], 1)


def test_a_change_with_an_integer_call_or_none_is_trusted(tmp_path):
    records = [change(call=3, hook="H"), change(call=None, hook=None)]
    assert read_trace(write_trace(tmp_path, records)) == (records, 0)


def test_an_unreadable_trace_is_named_as_the_transition_trace(tmp_path):
    target = tmp_path / "elsewhere.jsonl"
    target.write_text("")
    os.symlink(target, tmp_path / "link.jsonl")
    with pytest.raises(InputError, match="the transition trace is a symlink"):
        read_trace(tmp_path / "link.jsonl")
    (tmp_path / "latin1.jsonl").write_bytes(b'{"event": "error", "pid": 1, "m": "\xe9"}\n')
    with pytest.raises(InputError, match="the transition trace is not UTF-8 text"):
        read_trace(tmp_path / "latin1.jsonl")
