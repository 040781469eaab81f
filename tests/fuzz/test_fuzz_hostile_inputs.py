"""Hostile values fuzzed (issue 10, items 13-15; bounded by HARNESS_FUZZ_EXAMPLES).

Every duration and number field, given any YAML scalar, is either refused with a
positioned fault or becomes a finite value within its bound; contracts of any text are a
contract or a ContractError; observation documents with huge integers, lone surrogates or
odd numbers end in exit 0, 1 or 2 with a printable verdict or a message, never a crash.
"""

from __future__ import annotations

import json
import math
import os
import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.base.timeutil import MAX_DURATION
from harness.config.loader import validate
from harness.config.schema import MAX_CPUS, Campaign, Control
from harness.config.yamlsafe import YamlFaults, loads
from harness.judge.finalize.contract import ContractError, load_contract_text
from tests.inprocess import invoke

EXAMPLES = int(os.environ.get("HARNESS_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=5000,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])

TRICKY = [".nan", ".NaN", ".inf", "-.inf", "+.inf", "1:30", "-1:30", "1:30:00.5", "017",
          "00", "0b101", "0x1f", "0o17", "1_000", "1e308", "1.0e+308", "1.0e+999", "-1.5e+3",
          "on", "off", "yes", "No", "y", "~", "null", "true", '"nan"', '"inf"', '"Infinity"',
          '"1e308"', '"-0"', "9" * 5000, "9" * 101, "1" * 40 + "d", "30d", "31d", "90s",
          "2h", "0", "-1", "0.0000001", '"\\ud800"', "'1:30'", "!!float .nan", "!!int 1:30",
          "[1]", "{a: 1}", "*x", "&x 5"]
scalars = st.one_of(st.sampled_from(TRICKY),
                    st.text(string.digits + ".:_-+eExXoObB", min_size=1, max_size=24),
                    st.floats().map(repr), st.integers(-10**30, 10**30).map(str))

CONTROL = 'name: c1\nimage: img\ndevice: cpu\ncommand: ["true"]\n'
CAMPAIGN = "name: camp\nrow: R\ncontrols: [c1]\n"
CONTROL_FIELDS = ["timeout: {}", "stop_grace: {}", "resources: {{cpus: {}}}",
                  "resources: {{pids: {}}}", "post_steps: [{{name: x, timeout: {}}}]",
                  "env: {{A: {}}}"]
CAMPAIGN_FIELDS = ["lock_timeout: {}", "host: {{min_free_gib: {}}}",
                   "controls: [{{control: c1, repeat: {}}}]", "retry: {{interrupted: {}}}"]


def finite_bounds(obj) -> None:
    """Every float anywhere in a validated model is finite."""
    stack = [obj.model_dump()]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, float):
            assert math.isfinite(item), obj


def outcome(text: str, model) -> None:
    try:
        doc = loads(text, "f.yaml")
    except YamlFaults as e:
        assert all(str(f).startswith("f.yaml:") for f in e.faults)
        return
    obj, faults = validate(doc, model)
    if obj is None:
        assert faults and all(str(f).startswith("f.yaml:") for f in faults)
        return
    finite_bounds(obj)
    if isinstance(obj, Control):
        assert 0 < obj.timeout <= MAX_DURATION and 0 < obj.stop_grace <= MAX_DURATION
        assert all(0 < p.timeout <= MAX_DURATION for p in obj.post_steps)
        assert obj.resources.cpus is None or 0 < obj.resources.cpus <= MAX_CPUS
    else:
        assert 0 < obj.lock_timeout <= MAX_DURATION


@FUZZ
@given(st.sampled_from(CONTROL_FIELDS), scalars)
def test_control_numbers_are_finite_or_refused(field, scalar):
    outcome(CONTROL + field.format(scalar) + "\n", Control)


@FUZZ
@given(st.sampled_from(CAMPAIGN_FIELDS), scalars)
def test_campaign_numbers_are_finite_or_refused(field, scalar):
    text = CAMPAIGN + field.format(scalar) + "\n"
    if field.startswith("controls:"):
        text = text.replace("controls: [c1]\n", "")
    outcome(text, Campaign)


contract_texts = st.one_of(
    st.text(string.printable, max_size=200),
    st.lists(st.one_of(st.sampled_from(TRICKY), st.text(string.ascii_letters + ".", max_size=9)),
             max_size=6).map(lambda xs: "fields: [" + ", ".join(xs) + "]\n"),
    st.integers(1, 20000).map(lambda n: "[" * n + "]" * n),
    st.integers(1, 20000).map(lambda n: "- " * n + "x"),
    st.integers(4000, 6000).map(lambda n: "- " + "7" * n + "\n"),
)


@FUZZ
@given(contract_texts)
def test_any_contract_text_is_a_contract_or_a_positioned_fault(text):
    try:
        fields = load_contract_text(text, "c.yaml")
    except ContractError as e:
        assert e.faults and all(f.startswith("c.yaml:") for f in e.faults), e.faults
        return
    assert fields and all(isinstance(f, str) and f.strip() for f in fields)




raw_values = st.one_of(
    st.integers(4290, 6000).map(lambda n: "9" * n), st.integers(-10**20, 10**20).map(str),
    st.sampled_from(['"\\ud800"', '"\\udfff"', '"a\\udc80"', '"\\ud83d\\ude00"', "1e400",
                     "-1e400", "1.5", '{"$float": "nan"}', '{"\\ud800": 1}', "NaN",
                     '{"$tuple": ["\\ud801"]}', "[" * 3000 + "]" * 3000, '"\\u0000"']),
    st.text(max_size=20).map(json.dumps))


@FUZZ
@given(raw_values, raw_values, st.sampled_from([[], ["--json"]]))
def test_observations_with_huge_ints_and_surrogates(tmp_path_factory, a, b, flags):
    d = tmp_path_factory.mktemp("obs")
    for name, phase, value in (("s.json", "startup", a), ("g.json", "generation", b)):
        doc = {"schema": "harness.observation/v1", "phase": phase,
               "process": {"role": "EngineCore", "rank": 0, "pid": 1},
               "source": {"seal": "s", "engine": "e", "image": "i"}, "complete": True,
               "fields": {"model.x": "VALUE", "model.y": 1}}
        (d / name).write_text(json.dumps(doc).replace('"VALUE"', value))
    code, output = invoke("finalize", "--startup", str(d / "s.json"), "--generation",
                          str(d / "g.json"), *flags)
    assert code in (0, 1, 2), (code, output[-2000:])
    assert "Traceback" not in output and "internal error" not in output, output[-2000:]
    output.encode("utf-8")  # whatever was printed can be written
    if code == 2:
        assert str(d / "s.json") in output or str(d / "g.json") in output
