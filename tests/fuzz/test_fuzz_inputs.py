"""Bad input never becomes a crash or a hang (`make fuzz`; bounded in time).

hypothesis builds campaign, control, images.lock and observation documents: valid shapes,
mutated values, broken YAML/JSON, huge and deeply nested inputs. Each goes through the real
command in-process; every one must end in exit 0, 1 or 2 with a message, never a traceback
and never the internal-error path.
"""

from __future__ import annotations

import json
import os
import string
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.inprocess import invoke

EXAMPLES = int(os.environ.get("HARNESS_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=5000,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])

ID = "sha256:" + "ab" * 32




def assert_clean(code: int, output: str, allowed=(0, 2)) -> None:
    assert code in allowed, (code, output[-2000:])
    assert "Traceback" not in output, output[-2000:]
    assert "internal error" not in output, output[-2000:]
    if code != 0:
        assert output.strip(), "a failure must say why"


scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                    st.floats(allow_nan=True, allow_infinity=True),
                    st.text(string.printable, max_size=30))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(string.ascii_letters + "_.", max_size=12),
                                                  inner, max_size=4)), max_leaves=20)

CONTROL = {"name": "c1", "image": "img", "device": "cpu", "command": ["python3", "-V"],
           "timeout": "5m", "env": {"A": "1"}, "network": "none",
           "resources": {"memory": "64m", "cpus": 1}, "post_steps": ["exit-code"]}
CAMPAIGN = {"name": "camp", "row": "R", "controls": [{"control": "c1", "repeat": 2}],
            "stop_policy": "continue", "retry": {"interrupted": 1}}
LOCK = {"images": {"img": {"id": ID, "ref": "x:y"}}}


@st.composite
def mutated(draw, base: dict) -> dict:
    doc = json.loads(json.dumps(base))
    for _ in range(draw(st.integers(1, 3))):
        action = draw(st.sampled_from(["set", "drop", "add"]))
        key = draw(st.sampled_from(sorted(doc)))
        if action == "set":
            doc[key] = draw(values)
        elif action == "drop":
            doc.pop(key, None)
        else:
            doc[draw(st.text(string.ascii_lowercase, min_size=1, max_size=8))] = draw(values)
        if not doc:
            break
    return doc


def broken_text(text: str, data) -> str:
    if not text:
        return text
    i = data.draw(st.integers(0, len(text) - 1))
    junk = data.draw(st.sampled_from(["{", "[", ": :", "\t", "&a", "*b", "!!python/object x",
                                      "\x00", "'", '"', "- -", "\ufeff"]))
    return text[:i] + junk + text[i:]


def write_project(tmp: Path, control: str, campaign: str, lock: str) -> Path:
    for d in ("campaigns", "controls"):
        (tmp / d).mkdir(exist_ok=True)
    (tmp / "controls" / "c1.yaml").write_text(control)
    (tmp / "images.lock").write_text(lock)
    camp = tmp / "campaigns" / "camp.yaml"
    camp.write_text(campaign)
    return camp


@FUZZ
@given(data=st.data(), which=st.sampled_from(["control", "campaign", "lock"]),
       kind=st.sampled_from(["mutate", "break", "valid"]))
def test_check_never_crashes(tmp_path_factory, data, which, kind):
    tmp = tmp_path_factory.mktemp("fz")
    docs = {"control": CONTROL, "campaign": CAMPAIGN, "lock": LOCK}
    texts = {k: yaml.safe_dump(v) for k, v in docs.items()}
    if kind == "mutate":
        texts[which] = yaml.safe_dump(data.draw(mutated(docs[which])))
    elif kind == "break":
        texts[which] = broken_text(texts[which], data)
    camp = write_project(tmp, texts["control"], texts["campaign"], texts["lock"])
    code, out = invoke("check", str(camp), str(tmp / "controls/c1.yaml"), str(tmp / "images.lock"))
    assert_clean(code, out)
    if kind == "valid":
        assert code == 0, out


@settings(max_examples=max(4, EXAMPLES // 10), deadline=20000)
@given(depth=st.integers(50, 3000), width=st.integers(1, 3))
def test_deep_and_huge_yaml_is_refused_quickly(tmp_path_factory, depth, width):
    tmp = tmp_path_factory.mktemp("deep")
    p = tmp / "deep.yaml"
    p.write_text("a: " + "[" * depth + ", ".join(["1"] * width) + "]" * depth + "\n")
    code, out = invoke("check", str(p))
    assert_clean(code, out)
    assert code == 2
    big = tmp / "big.yaml"
    big.write_text("name: c1\nx: '" + "y" * (2 << 20) + "'\n")
    code, out = invoke("check", str(big))
    assert_clean(code, out)
    assert "larger than" in out


def observation(phase: str, fields: dict) -> dict:
    return {"schema": "harness.observation/v1", "phase": phase,
            "process": {"role": "EngineCore", "rank": 0, "pid": 7},
            "source": {"seal": "sha256:" + "0" * 64, "engine": "vllm@x", "image": ID},
            "complete": True, "fields": fields}


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
              st.text(max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=5),
                            st.dictionaries(st.text(max_size=10), inner, max_size=5)),
    max_leaves=30)


@FUZZ
@given(data=st.data(), kind=st.sampled_from(["fields", "mutate", "break", "nest"]))
def test_finalize_never_crashes(tmp_path_factory, data, kind):
    tmp = tmp_path_factory.mktemp("obs")
    fields = data.draw(st.dictionaries(st.text(min_size=1, max_size=20), json_values, max_size=8))
    s, g = observation("startup", fields), observation("generation", dict(fields))
    if kind == "fields":
        g["fields"] = data.draw(st.dictionaries(st.text(min_size=1, max_size=20), json_values,
                                                max_size=8))
    elif kind == "mutate":
        key = data.draw(st.sampled_from(sorted(g)))
        g[key] = data.draw(json_values)
    s_text, g_text = json.dumps(s), json.dumps(g)
    if kind == "break":
        g_text = broken_text(g_text, data)
    elif kind == "nest":
        depth = data.draw(st.integers(100, 5000))
        g_text = g_text[:-1] + ', "deep": ' + "[" * depth + "]" * depth + "}"
    (tmp / "s.json").write_text(s_text)
    (tmp / "g.json").write_text(g_text)
    code, out = invoke("finalize", "--startup", str(tmp / "s.json"), "--generation",
                       str(tmp / "g.json"), "--json")
    assert_clean(code, out, allowed=(0, 1, 2))
