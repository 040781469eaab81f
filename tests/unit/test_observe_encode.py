"""The one canonical encoder: red-before reproduction, exact forms, properties, the reader."""

from __future__ import annotations

import enum
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.instrument.harness_observer.encode import (
    SCHEMA,
    DecodeError,
    EnumRef,
    ReprRef,
    canonical,
    decode,
    encode,
    loads,
    observation_faults,
    read_observation,
    type_name,
)
from harness.judge.finalize.compare import classify
from harness.judge.finalize.pins import load_pins


class CompilationMode(enum.IntEnum):
    """Same members as vllm/config/compilation.py:37-48; module renamed below to match."""

    NONE = 0
    STOCK_TORCH_COMPILE = 1
    DYNAMO_TRACE_ONCE = 2
    VLLM_COMPILE = 3


CompilationMode.__module__ = "vllm.config.compilation"


class Color(enum.Enum):
    RED = "r"
    PAIR = (2, 1)


# --- red-before: the seed's two paths, held here exactly as they behaved ---------------

def old_generation_plain(value):
    """The seed's state observer (upstream_state_observer.py:86-92): int before Enum."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return int(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if isinstance(value, enum.Enum):
        return value.name
    return repr(value)


def old_startup_comparable(value):
    """The seed's start-up finalizer: enum members by name."""
    if isinstance(value, enum.Enum):
        return value.name
    return value


def test_red_before_old_paths_produce_the_seeds_mismatch():
    mode = CompilationMode.VLLM_COMPILE
    startup, generation = old_startup_comparable(mode), old_generation_plain(mode)
    assert (startup, generation) == ("VLLM_COMPILE", 3)
    assert classify("compilation.mode", startup, generation, load_pins()) == "encoding-mismatch"


def test_repaired_encoder_gives_both_phases_one_encoding():
    mode = CompilationMode.VLLM_COMPILE
    typed = {"$enum": "vllm.config.compilation.CompilationMode", "name": "VLLM_COMPILE",
             "value": 3}
    assert encode(mode) == typed
    assert canonical(encode(mode)) == canonical(encode(CompilationMode(3)))
    assert classify("compilation.mode", encode(mode), encode(mode), load_pins()) is None


# --- exact forms -------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "expected"), [
    (None, None), (True, True), (False, False), (0, 0), (4, 4), (4.0, 4.0), ("x", "x"),
    (-0.5, -0.5), ([], []), ([1, "a", None], [1, "a", None]),
    ((1, 2), {"$tuple": [1, 2]}), ((), {"$tuple": []}),
    (float("nan"), {"$float": "nan"}), (float("inf"), {"$float": "inf"}),
    (float("-inf"), {"$float": "-inf"}),
    ({"a": 1}, {"a": 1}), ({"$a": 1}, {"$dict": {"$a": 1}}),
    ({"a": {"$b": 2}}, {"a": {"$dict": {"$b": 2}}}),
    (Color.PAIR, {"$enum": f"{__name__}.Color", "name": "PAIR", "value": {"$tuple": [2, 1]}}),
    (Color.RED, {"$enum": f"{__name__}.Color", "name": "RED", "value": "r"}),
])
def test_exact_encoding(value, expected):
    assert encode(value) == expected
    assert canonical(encode(value)) == canonical(expected)


def test_bool_int_float_stay_apart_in_canonical_text():
    assert canonical(encode(True)) == "true"
    assert canonical(encode(1)) == "1"
    assert canonical(encode(1.0)) == "1.0"
    assert type(encode(True)) is bool and type(encode(4)) is int and type(encode(4.0)) is float


def test_subclasses_lose_only_their_class():
    class MyInt(int):
        pass

    class MyStr(str):
        def __str__(self):
            return "lies"

    class MyFloat(float):
        pass

    assert type(encode(MyInt(5))) is int and encode(MyInt(5)) == 5
    assert type(encode(MyStr("ab"))) is str and encode(MyStr("ab")) == "ab"
    assert type(encode(MyFloat(2.5))) is float and encode(MyFloat(2.5)) == 2.5


def test_other_values_become_typed_reprs():
    class Thing:
        def __repr__(self):
            return "Thing()"

    assert encode(Thing()) == {"$repr": "Thing()", "type": f"{__name__}.{Thing.__qualname__}"}
    assert encode({1: "a"}) == {"$repr": "{1: 'a'}", "type": "builtins.dict"}
    assert encode({"b", "a", "c"}) == {"$repr": "{'a', 'b', 'c'}", "type": "builtins.set"}
    assert encode(frozenset({2, 1})) == {"$repr": "{1, 2}", "type": "builtins.frozenset"}


def test_type_name():
    assert type_name(CompilationMode) == "vllm.config.compilation.CompilationMode"
    assert type_name(int) == "builtins.int"


# --- properties ---------------------------------------------------------------------------

scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
           | st.text(max_size=8) | st.sampled_from(list(CompilationMode))
           | st.sampled_from(list(Color)))
values = st.recursive(
    scalars,
    lambda inner: (st.lists(inner, max_size=4) | st.lists(inner, max_size=4).map(tuple)
                   | st.dictionaries(st.text(max_size=4), inner, max_size=4)),
    max_leaves=12,
)


def expected_decoded(value):
    """What `decode(encode(value))` must give back."""
    if isinstance(value, enum.Enum):
        return EnumRef(type_name(type(value)), value.name, expected_decoded(value.value))
    if isinstance(value, list):
        return [expected_decoded(v) for v in value]
    if isinstance(value, tuple):
        return tuple(expected_decoded(v) for v in value)
    if isinstance(value, dict):
        return {k: expected_decoded(v) for k, v in value.items()}
    return value


def same(a, b):
    """Type-strict equality with NaN equal to itself."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, EnumRef):
        return a.type == b.type and a.name == b.name and same(a.value, b.value)
    return a == b


@settings(max_examples=150, deadline=None)
@given(values)
def test_property_deterministic_and_json_safe(value):
    first = canonical(encode(value))
    assert first == canonical(encode(value))
    assert canonical(loads(first)) == first


@settings(max_examples=150, deadline=None)
@given(values)
def test_property_decodes_back(value):
    assert same(decode(encode(value)), expected_decoded(value))


@settings(max_examples=100, deadline=None)
@given(st.integers())
def test_property_bool_int_float_apart(n):
    texts = {canonical(encode(n)), canonical(encode(float(n))) if abs(n) < 2**53 else "f"}
    assert len(texts) == 2
    if n in (0, 1):
        assert canonical(encode(bool(n))) not in texts


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(list(CompilationMode)))
def test_property_enum_typed_never_bare(member):
    out = encode(member)
    assert out == {"$enum": "vllm.config.compilation.CompilationMode", "name": member.name,
                   "value": int(member)}
    assert type(out["value"]) is int


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=3), max_size=8))
def test_property_list_order_and_duplicates_kept(items):
    assert encode(items) == items
    assert decode(encode(items)) == items


# --- decoder strictness ---------------------------------------------------------------

@pytest.mark.parametrize(("bad", "message"), [
    ({"$enum": "T", "name": "A"}, "malformed $enum object: keys ['$enum', 'name']"),
    ({"$enum": "T", "name": "A", "value": 1, "x": 2},
     "malformed $enum object: keys ['$enum', 'name', 'value', 'x']"),
    ({"$enum": 1, "name": "A", "value": 1}, "$enum type and name must be strings"),
    ({"$enum": "T", "name": 1, "value": 1}, "$enum type and name must be strings"),
    ({"$float": "NaN"}, "$float must be one of ['-inf', 'inf', 'nan']"),
    ({"$float": "nan", "x": 1}, "malformed $float object: keys ['$float', 'x']"),
    ({"$tuple": {}}, "$tuple must hold an array"),
    ({"$tuple": [], "y": 1}, "malformed $tuple object: keys ['$tuple', 'y']"),
    ({"$dict": []}, "$dict must hold an object"),
    ({"$dict": {}, "z": 1}, "malformed $dict object: keys ['$dict', 'z']"),
    ({"$repr": 1, "type": "t"}, "$repr text and type must be strings"),
    ({"$repr": "r", "type": 2}, "$repr text and type must be strings"),
    ({"$repr": "r"}, "malformed $repr object: keys ['$repr']"),
    ({"$other": 1}, "unknown marker in keys ['$other']"),
    ([{"$nope": 1}], "unknown marker in keys ['$nope']"),
    ({"a": {"$nope": 1}}, "unknown marker in keys ['$nope']"),
    (float("nan"), 'a bare NaN or infinity is not canonical; use {"$float": ...}'),
    (float("inf"), 'a bare NaN or infinity is not canonical; use {"$float": ...}'),
])
def test_decode_refuses_malformed(bad, message):
    with pytest.raises(DecodeError) as e:
        decode(bad)
    assert str(e.value) == message


def test_canonical_refuses_a_nan_that_escaped_the_encoder():
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        canonical([float("nan")])


def test_decode_markers():
    assert decode({"$repr": "X()", "type": "m.X"}) == ReprRef("m.X", "X()")
    assert decode({"$dict": {"$a": [1]}}) == {"$a": [1]}
    assert math.isnan(decode({"$float": "nan"}))
    assert decode({"$float": "-inf"}) == -math.inf
    assert decode({"$float": "inf"}) == math.inf
    assert EnumRef.of(CompilationMode.NONE) == EnumRef("vllm.config.compilation.CompilationMode",
                                                       "NONE", 0)


def test_loads_is_strict():
    assert loads('{"a": [1, 2.0, true]}') == {"a": [1, 2.0, True]}
    for text, message in (('{"a": NaN}', "NaN is not JSON"),
                          ('{"a": Infinity}', "Infinity is not JSON"),
                          ("-Infinity", "-Infinity is not JSON"),
                          ('{"a": 1, "a": 2}', "duplicate key 'a'"),
                          ("{", "not JSON: Expecting property name enclosed in double quotes: "
                                "line 1 column 2 (char 1)")):
        with pytest.raises(DecodeError) as e:
            loads(text)
        assert str(e.value) == message


# --- the reader ---------------------------------------------------------------------------

def doc(**over):
    base = {"schema": SCHEMA, "phase": "startup",
            "process": {"role": "EngineCore", "rank": 0, "pid": 659},
            "source": {"seal": "sha256:a", "engine": "vllm@x", "image": "sha256:b"},
            "complete": True, "fields": {"compilation.mode": encode(CompilationMode(3))}}
    base.update(over)
    return base


def test_reader_accepts_typed_and_legacy_documents():
    assert read_observation(json.dumps(doc())) == doc()
    legacy = doc(fields={"compilation.mode": "VLLM_COMPILE", "x": 3})
    del legacy["schema"]
    assert read_observation(json.dumps(legacy))["fields"] == {"compilation.mode": "VLLM_COMPILE",
                                                              "x": 3}
    assert observation_faults(doc(source={"seal": None, "engine": None, "image": None})) == []


@pytest.mark.parametrize(("over", "fault"), [
    ({"schema": "other/v9"},
     "schema must be 'harness.observation/v1' (or absent in a legacy document)"),
    ({"phase": 1}, "phase must be a string"),
    ({"process": []}, "process must be an object with role, rank and pid"),
    ({"process": {"role": 1, "rank": 0, "pid": 1}}, "process.role must be a string"),
    ({"process": {"role": "E", "rank": True, "pid": 1}}, "process.rank must be an integer"),
    ({"process": {"role": "E", "rank": 0, "pid": "1"}}, "process.pid must be an integer"),
    ({"source": "x"}, "source must be an object with seal, engine and image"),
    ({"source": {"seal": 1, "engine": None, "image": None}},
     "source.seal must be a string or null"),
    ({"source": {"seal": None, "image": None}}, "source.engine must be a string or null"),
    ({"complete": 1}, "complete must be true or false"),
    ({"fields": []}, "fields must be an object of dotted names to encoded values"),
    ({"fields": {"a": {"$x": 1}}}, "fields['a']: unknown marker in keys ['$x']"),
])
def test_reader_names_each_fault(over, fault):
    assert observation_faults(doc(**over)) == [fault]
    with pytest.raises(DecodeError, match=r"must|unknown"):
        read_observation(json.dumps(doc(**over)))


def test_reader_refuses_non_objects_and_lists_all_faults():
    assert observation_faults([]) == ["an observation must be a JSON object"]
    assert len(observation_faults({})) == 5


def test_too_deep_json_is_a_decode_error_not_a_crash():
    from harness.instrument.harness_observer.encode import DecodeError, loads

    with pytest.raises(DecodeError) as e:
        loads("[" * 200_000 + "]" * 200_000)
    assert str(e.value) == "not JSON this harness reads: nested too deeply"


def test_depth_counts_nesting_and_stops_past_the_limit():
    from harness.instrument.harness_observer.encode import depth

    assert depth(1, 5) == 0 and depth([], 5) == 1 and depth({"a": [1, {"b": []}]}, 5) == 4
    deep: list = []
    for _ in range(100_000):  # deeper than any recursion limit
        deep = [deep]
    assert 6 <= depth(deep, 5) <= 7  # stops just past the limit, never walks it all
    assert depth(deep, 200_000) == 100_001


def test_deeper_than_agrees_with_depth_and_counts_brackets_in_strings_safely():
    import json

    from harness.instrument.harness_observer.encode import deeper_than

    deep = "[" * 40 + "]" * 40
    assert deeper_than(deep, json.loads(deep), 32) and deeper_than(deep.encode(),
                                                                   json.loads(deep), 32)
    shallow = json.dumps({"a": ["[" * 100, {"b": "{" * 100}]})  # brackets in strings only
    assert not deeper_than(shallow, json.loads(shallow), 3)
    assert deeper_than(shallow, json.loads(shallow), 2)  # three containers: 3 deep
    assert not deeper_than("{}", {}, 1)
