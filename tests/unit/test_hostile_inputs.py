"""Hostile inputs, pure parts (issue 10, items 13, 14, 15): every bound is finite, YAML 1.1
surprises are refused at their position, contracts go through the safe loader, huge
integers and lone surrogates are invalid input, and OS errors have words and a rule."""

from __future__ import annotations

import errno
import json
import math
import time
from datetime import UTC, datetime

import pytest

from harness.base.errors import InvalidInput
from harness.base.iofault import describe, io_fault
from harness.base.timeutil import MAX_DURATION, parse_duration
from harness.cli.params import parse_hours
from harness.config.loader import validate
from harness.config.schema import Campaign, Control, Resources
from harness.config.yamlsafe import YamlFaults, loads, yaml11_surprise
from harness.driver.night.rules import night_deadline
from harness.instrument.harness_observer.encode import DecodeError, read_observation
from harness.instrument.harness_observer.encode import loads as json_loads
from harness.judge.finalize.contract import ContractError, load_contract_text
from harness.judge.finalize.explain import render
from harness.judge.finalize.rules import judge

NOW = datetime(2026, 3, 1, 22, 15, tzinfo=UTC)
CONTROL = "name: c1\nimage: img\ndevice: cpu\ncommand: [\"true\"]\n"
CAMPAIGN = "name: camp\nrow: R\ncontrols: [c1]\n"


def faults_of(text: str, model) -> list[str]:
    """The faults of a YAML document against `model`, as FILE:LINE:COL strings."""
    try:
        doc = loads(text, "f.yaml")
    except YamlFaults as e:
        return [str(f) for f in e.faults]
    obj, faults = validate(doc, model)
    assert obj is None or not faults
    return [str(f) for f in faults]


# --- item 13: durations and every float bound are finite and capped ----------------------

@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 1e308, 10**400, 1e-300 * 0,
                                   "31d", "nan", "inf", "1e308", "9" * 40 + "d", True])
def test_parse_duration_refuses_what_would_switch_the_bound_off(value):
    with pytest.raises(ValueError):
        parse_duration(value)


def test_parse_duration_keeps_ordinary_durations():
    assert parse_duration("90s") == 90 and parse_duration("30m") == 1800
    assert parse_duration(2.5) == 2.5 and parse_duration("30d") == MAX_DURATION


@pytest.mark.parametrize("line", ["timeout: .nan", "timeout: .inf", "stop_grace: .inf",
                                  "stop_grace: -.inf", "timeout: 1.0e+999", 'timeout: "nan"',
                                  'timeout: "inf"', "timeout: 1e308", "timeout: 99999999999",
                                  "post_steps: [{name: exit-code, timeout: .nan}]"])
def test_control_durations_never_non_finite(line):
    assert not faults_of(CONTROL, Control)
    faults = faults_of(CONTROL + line + "\n", Control)
    assert faults and all(f.startswith("f.yaml:5:") for f in faults), faults


@pytest.mark.parametrize("line", ["lock_timeout: .nan", "lock_timeout: .inf",
                                  'lock_timeout: "nan"', "lock_timeout: 1e400",
                                  "host: {min_free_gib: .inf}", 'host: {min_free_gib: "inf"}'])
def test_campaign_bounds_never_non_finite(line):
    assert not faults_of(CAMPAIGN, Campaign)
    faults = faults_of(CAMPAIGN + line + "\n", Campaign)
    assert faults, line
    assert faults[0].startswith("f.yaml:4:"), faults


@pytest.mark.parametrize("cpus", [".inf", ".nan", '"inf"', '"nan"', '"Infinity"', "1e9",
                                  "100000", "0"])
def test_resources_cpus_finite_and_capped(cpus):
    faults = faults_of(CONTROL + f"resources: {{cpus: {cpus}}}\n", Control)
    assert len(faults) == 1 and faults[0].startswith("f.yaml:5:"), faults


def test_resources_still_accept_real_limits():
    assert Resources(cpus=2, pids=512, memory="64m").cpus == 2.0
    assert not faults_of(CONTROL + "resources: {cpus: 0.5, pids: 100}\ntimeout: 2h\n", Control)


@pytest.mark.parametrize("text,expected", [
    ("timeout: 1:30", "base-60"), ("timeout: 1:30:00", "base-60"),
    ("stop_grace: 0:10.5", "base-60"), ("timeout: 017", "octal"), ("timeout: 0b101", "binary"),
    ("timeout: 1_000", "'_'"), ("timeout: on", "boolean"), ("stop_grace: Yes", "boolean"),
    ("timeout: " + "9" * 5000, "too long")])
def test_yaml11_surprises_refused_at_their_position(text, expected):
    faults = faults_of(CONTROL + text + "\n", Control)
    assert len(faults) == 1 and faults[0].startswith("f.yaml:5:"), faults
    assert expected in faults[0]
    if expected == "base-60":
        assert "90s" in faults[0]  # the message says what to write instead


def test_yaml11_surprise_is_pure_and_leaves_plain_values_alone():
    int_, bool_ = "tag:yaml.org,2002:int", "tag:yaml.org,2002:bool"
    assert yaml11_surprise(int_, "90") is None and yaml11_surprise(int_, "0") is None
    assert yaml11_surprise(int_, "0x1f") is None and yaml11_surprise(bool_, "true") is None
    assert "base-60" in yaml11_surprise(int_, "1:30")
    assert loads('a: "1:30"\nb: "on"\nc: 0o17\n').data == {"a": "1:30", "b": "on", "c": "0o17"}


def test_mapping_keys_keep_their_text():
    assert loads("env: {yes: 1, 0001: 2, 1:30: 3}\n").data == {
        "env": {"yes": 1, "0001": 2, "1:30": 3}}


def test_lone_surrogate_and_bad_escape_in_yaml_are_faults():
    for text in ('a: "\\ud800"\n', '"\\udc00": 1\n', 'a: "\\U00110000"\n'):
        with pytest.raises(YamlFaults) as e:
            loads(text, "f.yaml")
        assert str(e.value).startswith("f.yaml:1:"), str(e.value)


@pytest.mark.parametrize("hours", [math.nan, math.inf, 1e308, -1.0, 0.0, 721.0])
def test_deadline_refuses_non_finite_or_absurd_hours(hours):
    with pytest.raises(InvalidInput, match="--max-hours"):
        night_deadline(NOW, None, hours, None)


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e308", "0", "x", "721"])
def test_cli_hours_parser(text):
    with pytest.raises(ValueError):
        parse_hours(text)
    assert parse_hours("8") == 8.0


# --- item 14: a contract goes through the bounded, safe YAML loader ----------------------

BOMB = ('a: &a ["x","x","x","x","x","x","x","x","x"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n'
        'c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n'
        'e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n'
        'g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nfields: [*g]\n')


@pytest.mark.parametrize("text,expected", [
    (BOMB, "document too large"), ("[" * 5000 + "]" * 5000, "nest"),
    ("- " + "1" * 5000 + "\n", "too long"), ('- "\\ud800"\n', "Unicode"),
    ("- a\n- 1:30\n", "base-60")])
def test_contract_hostile_text_is_a_positioned_fault(text, expected):
    t0 = time.monotonic()
    with pytest.raises(ContractError) as e:
        load_contract_text(text, "c.yaml")
    assert time.monotonic() - t0 < 5
    assert e.value.faults[0].startswith("c.yaml:"), e.value.faults
    assert expected in str(e.value)


def test_contract_entry_faults_carry_positions():
    with pytest.raises(ContractError) as e:
        load_contract_text("fields:\n  - a\n  - ''\n  - a\n", "c.yaml")
    assert e.value.faults == ["c.yaml:3:5: entry 1 is not a non-empty string: ''",
                              "c.yaml:4:5: field 'a' is listed twice"]


# --- item 15: huge integers and lone surrogates in observations ----------------------------

def observation(phase: str, value) -> dict:
    return {"schema": "harness.observation/v1", "phase": phase,
            "process": {"role": "EngineCore", "rank": 0, "pid": 1},
            "source": {"seal": "s", "engine": "e", "image": "i"}, "complete": True,
            "fields": {"model.x": value}}


@pytest.mark.parametrize("raw", ["1" * 5000, "-" + "7" * 4301])
def test_observation_with_a_huge_integer_is_invalid(raw):
    text = json.dumps(observation("startup", 0)).replace('"model.x": 0', f'"model.x": {raw}')
    with pytest.raises(DecodeError, match=r"integer with (4301|5000) digits"):
        read_observation(text)


def test_observation_integer_at_the_limit_is_kept():
    text = json.dumps(observation("startup", 0)).replace('"model.x": 0',
                                                         '"model.x": ' + "9" * 4300)
    assert read_observation(text)["fields"]["model.x"] == int("9" * 4300)


@pytest.mark.parametrize("escape", ["\\ud800", "\\udfff", "a\\udc80b"])
def test_observation_with_a_lone_surrogate_is_invalid(escape):
    text = json.dumps(observation("startup", "X")).replace('"X"', f'"{escape}"')
    with pytest.raises(DecodeError, match="not valid Unicode"):
        read_observation(text)
    key = json.dumps(observation("startup", 1)).replace('"model.x"', f'"{escape}"')
    with pytest.raises(DecodeError, match="not valid Unicode"):
        json_loads(key)


def test_surrogate_pair_is_ordinary_text():
    assert json_loads('["\\ud83d\\ude00"]') == ["\U0001f600"]


def test_verdict_rendering_never_crashes_on_a_lone_surrogate():
    verdict = judge(observation("startup", "\ud800"), observation("generation", "ok"))
    text = render(verdict)
    text.encode("utf-8")  # printable and writable
    assert "\\ud800" in text and "model.x: value-changed" in text


def test_os_errors_have_rules_and_words():
    assert describe(OSError(errno.EROFS, "x")) == ("ENV-READ-ONLY", "read-only file system")
    assert describe(OSError(errno.ENOSPC, "x"))[0] == "ENV-DISK-FULL"
    assert describe(OSError(errno.EDQUOT, "x"))[0] == "ENV-DISK-FULL"
    assert describe(OSError(errno.EACCES, "x"))[0] == "ENV-PERMISSION"
    fault = io_fault(OSError(errno.EROFS, "Read-only file system"), "cannot write the runs "
                     "folder /r")
    assert fault.code == 3 and fault.rule == "ENV-READ-ONLY"
    assert fault.message == "cannot write the runs folder /r: read-only file system"
