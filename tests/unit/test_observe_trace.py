"""Trace, snapshot and driver helpers without any engine: plain objects stand in for configs."""

from __future__ import annotations

import dataclasses
import enum
import json
import os

import pytest

from harness.instrument.harness_observer import driver, snapshot, trace
from harness.instrument.harness_observer.encode import read_observation


class Mode(enum.IntEnum):
    A = 1
    B = 3


@dataclasses.dataclass
class Inner:
    depth: int = 1


@dataclasses.dataclass
class Compilation:
    mode: Mode = Mode.B
    custom_ops: list = dataclasses.field(default_factory=list)
    inner: Inner = dataclasses.field(default_factory=Inner)
    _private: int = 0


@dataclasses.dataclass
class Config:
    compilation_config: Compilation = dataclasses.field(default_factory=Compilation)
    lora_config: object = None
    name: str = "not a section"


class Platform:
    calls = 0

    @classmethod
    def defaults(cls, vllm_config):
        cls.calls += 1
        vllm_config.compilation_config.custom_ops.append("+x")
        return "result"

    @staticmethod
    def static(vllm_config):
        vllm_config.compilation_config.mode = Mode.A

    def plain(self, vllm_config):
        raise KeyError("boom")


def read(directory):
    return [json.loads(line) for line in (directory / trace.FILE).read_text().splitlines()]


def test_snapshot_fields_walks_sections():
    fields, errors = snapshot.snapshot_fields(Config())
    assert errors == []
    assert fields == {"compilation.mode": {"$enum": f"{__name__}.Mode", "name": "B", "value": 3},
                      "compilation.custom_ops": [], "compilation.inner.depth": 1, "lora": None}
    assert snapshot.section_name("cache_config") == "cache"
    assert snapshot.section_name("other") == "other"
    config = Config()
    ops = config.compilation_config.custom_ops
    assert snapshot.resolve(config, "compilation.custom_ops") is ops
    assert snapshot.resolve(config, "name") == "not a section"


@dataclasses.dataclass
class Section:
    a: int = 1
    b: list = dataclasses.field(default_factory=list)


class Holder:
    def __init__(self):
        self.x_config = Section()
        del self.x_config.b  # reading it now raises, as a broken property would


def test_snapshot_records_errors_as_incomplete():
    fields, errors = snapshot.snapshot_fields(Holder())
    assert fields == {"x.a": 1}
    assert errors == ["x.b: AttributeError: 'Section' object has no attribute 'b'"]
    doc = snapshot.observation("startup", Holder(), rank=0, hook="test")
    assert doc["complete"] is False and doc["errors"] == errors
    assert doc["process"]["pid"] == os.getpid()


def test_observation_document_is_readable(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_SEAL", "sha256:s")
    monkeypatch.setenv("HARNESS_IMAGE_ID", "sha256:i")
    doc = snapshot.observation("generation", Config(), rank=2, hook="h")
    assert doc["process"]["rank"] == 2 and doc["source"]["seal"] == "sha256:s"
    path = snapshot.write_document(str(tmp_path), "generation.json", doc)
    with open(path) as f:
        assert read_observation(f.read())["fields"] == doc["fields"]
    with pytest.raises(FileExistsError):
        snapshot.write_document(str(tmp_path), "generation.json", doc)
    assert sorted(os.listdir(tmp_path)) == ["generation.json"]


def test_wrapped_calls_are_passive_and_recorded(tmp_path):
    tracer = trace.Tracer(str(tmp_path))
    owner = type("P", (Platform,), {})
    assert trace.wrap_method(owner, "defaults", tracer, "P.defaults", trace._config_arg)
    assert not trace.wrap_method(owner, "defaults", tracer, "P.defaults", trace._config_arg)
    assert trace.wrap_method(owner, "static", tracer, "P.static", trace._config_arg)
    assert trace.wrap_method(owner, "plain", tracer, "P.plain", trace._config_arg)
    config = Config()
    ops = config.compilation_config.custom_ops
    assert owner.defaults(config) == "result"
    assert owner.defaults(vllm_config=config) == "result"
    owner.static(config)
    with pytest.raises(KeyError, match="boom"):
        owner().plain(config)
    assert ops == ["+x", "+x"] and config.compilation_config.custom_ops is ops
    recs = read(tmp_path)
    assert [(r["event"], r.get("hook")) for r in recs] == [
        ("enter", "P.defaults"), ("change", "P.defaults"), ("exit", "P.defaults"),
        ("enter", "P.defaults"), ("change", "P.defaults"), ("exit", "P.defaults"),
        ("enter", "P.static"), ("change", "P.static"), ("exit", "P.static"),
        ("enter", "P.plain"), ("exit", "P.plain")]
    first_change = recs[1]
    assert first_change["before"] == [] and first_change["after"] == ["+x"]
    assert first_change["id_before"] == first_change["id_after"] == id(ops)
    assert first_change["config_id"] == id(config)
    assert recs[-1]["raised"] == "KeyError: 'boom'"
    assert recs[7]["field"] == "compilation.mode"
    assert any(__file__ in frame for frame in recs[0]["stack"])
    assert not any(trace.HERE in frame for frame in recs[0]["stack"])


def test_unhooked_change_is_detected_at_the_next_checkpoint(tmp_path):
    tracer = trace.Tracer(str(tmp_path))
    config = Config()
    tracer.checkpoint(config, "one")
    config.compilation_config.custom_ops = ["new"]
    tracer.checkpoint(config, "two")
    change = [r for r in read(tmp_path) if r["event"] == "change"]
    assert len(change) == 1
    assert change[0]["hook"] is None and change[0]["detected_at"] == "two"
    assert change[0]["id_before"] != change[0]["id_after"]


def test_trace_failures_never_reach_the_engine(tmp_path):
    tracer = trace.Tracer(str(tmp_path / "missing-dir"))
    wrapped = tracer.wrap(lambda vllm_config: 42, "h", trace._config_arg)
    assert wrapped(Config()) == 42
    tracer.checkpoint(Config(), "x")
    state = trace.Tracer(str(tmp_path)).state(object())
    assert state["compilation.custom_ops"]["id"] is None
    assert "AttributeError" in state["compilation.custom_ops"]["error"]


def test_driver_helpers():
    ext = "harness_observer.plugin.ObserverExtension"
    assert driver.engine_args('{"max_model_len": 8}') == {"max_model_len": 8,
                                                          "worker_extension_cls": ext}
    given = json.dumps({"worker_extension_cls": ext})
    assert driver.engine_args(given)["worker_extension_cls"] == ext
    assert driver.plugins_env(None) is None
    assert driver.plugins_env("a,b") == "a,b,harness_observer"
    assert driver.plugins_env("harness_observer") == "harness_observer"
    assert driver.plugins_env("") == "harness_observer"
    args = driver.parse(["--model", "/m"])
    assert (args.max_tokens, args.engine_args_json) == (8, "{}")
