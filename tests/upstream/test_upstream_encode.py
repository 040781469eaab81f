"""The repo's one encoder on real vLLM config objects, and the pinned enum data against the
real CompilationMode (CPU platform, VLLM_TARGET_DEVICE=cpu, set in conftest)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.instrument.harness_observer import snapshot, trace
from harness.instrument.harness_observer.encode import (
    EnumRef,
    canonical,
    decode,
    encode,
    read_observation,
    type_name,
)
from harness.judge.finalize.pins import load_pins, member_of

MODE_TYPE = "vllm.config.compilation.CompilationMode"


def typed(member) -> dict:
    return {"$enum": MODE_TYPE, "name": member.name, "value": member.value}


def test_real_compilation_mode_is_an_int_enum_that_int_first_encoders_lose(vllm):
    """Why the encoder tests Enum first: the real member passes isinstance(int), and vLLM's
    own normalize_value returns it as is, which JSON writes as a bare number."""
    from vllm.config.compilation import CompilationMode
    from vllm.config.utils import normalize_value

    member = CompilationMode.VLLM_COMPILE
    assert isinstance(member, int)
    assert json.dumps(normalize_value(member)) == "3"  # the type is gone in vLLM's form
    assert encode(member) == typed(member) == {"$enum": MODE_TYPE, "name": "VLLM_COMPILE",
                                               "value": 3}


@pytest.mark.parametrize("given", ["member", 3, "VLLM_COMPILE", "vllm_compile"])
def test_compilation_config_mode_encodes_typed_whatever_form_it_was_given(vllm, given):
    """vLLM accepts the member, its value or its name; all reach the encoder as one member."""
    from vllm.config import CompilationConfig
    from vllm.config.compilation import CompilationMode

    value = CompilationMode.VLLM_COMPILE if given == "member" else given
    cfg = CompilationConfig(mode=value)
    assert type(cfg.mode) is CompilationMode
    assert encode(cfg.mode) == typed(CompilationMode.VLLM_COMPILE)
    fields = snapshot.snapshot_fields(SimpleNamespace(compilation_config=cfg))[0]
    assert fields["compilation.mode"] == typed(CompilationMode.VLLM_COMPILE)


def test_default_compilation_config_fields_all_encode_and_read_back(vllm):
    """Every field of a default CompilationConfig goes through the one encoder, and the
    document the instrument writes reads back under the strict reader."""
    from vllm.config import CompilationConfig

    cfg = SimpleNamespace(compilation_config=CompilationConfig())
    doc = snapshot.observation("startup", cfg, rank=0, hook="upstream tier")
    assert doc["errors"] == [] and doc["complete"] is True
    assert doc["fields"]["compilation.mode"] is None  # 0.33.0 leaves it for VllmConfig to set
    assert doc["fields"]["compilation.custom_ops"] == []
    back = read_observation(json.dumps(doc))
    assert back["fields"] == doc["fields"]


def test_vllm_config_mode_is_the_same_on_the_snapshot_and_the_trace_path(vllm, tmp_path):
    """The seed's failure was two paths, two encodings. On a real VllmConfig the start-up
    snapshot, the trace's watched state and a direct encode give one value."""
    from vllm.config import VllmConfig
    from vllm.config.compilation import CompilationMode

    cfg = VllmConfig()
    member = cfg.compilation_config.mode
    assert type(member) is CompilationMode  # the CPU platform picks DYNAMO_TRACE_ONCE in 0.33.0
    fields, errors = snapshot.snapshot_fields(cfg)
    assert errors == []
    watched = trace.Tracer(str(tmp_path)).state(cfg)
    on_snapshot = fields["compilation.mode"]
    on_trace = watched["compilation.mode"]["value"]
    assert on_snapshot == on_trace == encode(member) == typed(member)
    assert canonical(on_snapshot) == canonical(on_trace)
    assert watched["compilation.custom_ops"]["value"] == fields["compilation.custom_ops"]
    assert decode(on_trace) == EnumRef.of(member)


def test_vllm_config_observation_written_and_read_keeps_the_enum_typed(vllm, tmp_path):
    from vllm.config import VllmConfig

    cfg = VllmConfig()
    doc = snapshot.observation("startup", cfg, rank=0, hook="upstream tier")
    path = snapshot.write_document(str(tmp_path), "startup.json", doc)
    back = read_observation(Path(path).read_text())
    assert back["fields"]["compilation.mode"] == typed(cfg.compilation_config.mode)
    assert back["source"]["engine"] == f"vllm@{vllm.__version__}"


def test_pinned_compilation_mode_members_match_the_real_class(vllm):
    from vllm.config.compilation import CompilationMode

    pin = load_pins()["enums"][type_name(CompilationMode)]
    assert pin["kind"] == "enum.IntEnum" and issubclass(CompilationMode, __import__(
        "enum").IntEnum)
    assert pin["members"] == {m.name: encode(m.value) for m in CompilationMode}
    for m in CompilationMode:  # the legacy forms resolve to the real member, by the pins
        want = member_of("compilation.mode", encode(m), load_pins())
        assert member_of("compilation.mode", m.name, load_pins()) == want
        assert member_of("compilation.mode", m.value, load_pins()) == want


def test_pinned_cudagraph_mode_members_match_the_real_class(vllm):
    from vllm.config.compilation import CUDAGraphMode

    pin = load_pins()["enums"][type_name(CUDAGraphMode)]
    assert pin["kind"] == "enum.Enum"
    assert pin["members"] == {m.name: encode(m.value) for m in CUDAGraphMode}


def installed_lines(cls) -> tuple[str, int, int]:
    """(file relative to site-packages, first line, last line) of a class as installed."""
    import vllm

    lines, start = inspect.getsourcelines(cls)
    base = Path(vllm.__file__).resolve().parent.parent
    return str(Path(inspect.getsourcefile(cls)).resolve().relative_to(base)), start, \
        start + len(lines) - 1


def test_pinned_compilation_mode_source_location_matches_the_install(vllm):
    """The pin records lines 37-48 (class statement to the last member) at the pinned
    commit. A different line here is reported, not silently re-pinned: the message gives
    the installed location so a person can check the pin against its commit."""
    from vllm.config.compilation import CompilationMode

    source = load_pins()["enums"][MODE_TYPE]["source"]
    first, last = (int(n) for n in source["lines"].split("-"))
    file, start, end = installed_lines(CompilationMode)
    where = (f"installed vllm {vllm.__version__}: {file}:{start}-{end}; pinned "
             f"{source['file']}:{source['lines']} at {source['commit'][:12]}")
    assert file == source["file"], where
    assert start == first, where
    text = Path(inspect.getsourcefile(CompilationMode)).read_text().splitlines()
    last_member = max(CompilationMode, key=lambda m: m.value).name
    assert text[last - 1].strip().startswith(f"{last_member} ="), where


def test_pinned_cudagraph_mode_source_range_holds_the_installed_class(vllm):
    """The CUDAGraphMode pin gives a range with a note (51-60; copies place it at 53)."""
    from vllm.config.compilation import CUDAGraphMode

    source = load_pins()["enums"]["vllm.config.compilation.CUDAGraphMode"]["source"]
    first, last = (int(n) for n in source["lines"].split()[0].split("-"))
    file, start, _ = installed_lines(CUDAGraphMode)
    assert file == source["file"]
    assert first <= start <= last, f"installed vllm {vllm.__version__}: {file}:{start}"


def test_the_second_witness_is_vllms_own_compute_hash(vllm, tmp_path):
    """Each document records `VllmConfig.compute_hash()` as vLLM 0.33.0 computes it: the
    same value, read back from the file; a change vLLM hashes changes it, whether or not
    the observer encodes the field; a field vLLM leaves out of its hash does not."""
    from vllm.config import VllmConfig

    from harness.judge.finalize.enginehash import witness
    from harness.judge.finalize.rules import assess

    cfg = VllmConfig()
    start = snapshot.observation("startup", cfg, rank=0, hook="upstream tier")
    assert start["engine_hash"] == {"value": cfg.compute_hash(), "note": None}
    path = snapshot.write_document(str(tmp_path), "startup.json", start)
    start = read_observation(Path(path).read_text())
    assert start["engine_hash"]["value"] == cfg.compute_hash()

    # a private field: vLLM hashes it, the observer never encodes it
    hidden = "_allow_auto_resolve_cp_interleave_size"
    setattr(cfg.parallel_config, hidden, not getattr(cfg.parallel_config, hidden))
    gen = snapshot.observation("generation", cfg, rank=0, hook="upstream tier")
    assert gen["fields"] == start["fields"]
    assert gen["engine_hash"]["value"] == cfg.compute_hash() != start["engine_hash"]["value"]
    pair = {"startup": start, "generation": gen}
    found, comparison = assess(start, gen, contract=None, pins=load_pins())
    assert comparison["differences"] == []
    assert {r.rule for r in found} == {"GATE0-SOURCE"}  # no seal or image in this tier
    reasons, entry = witness("engine-core", pair, [], set(start["fields"]))
    assert [r.rule for r in reasons] == ["GATE0-HASH-DIFFERS"] and entry["agrees"] is False

    # a field vLLM leaves out of its hash: ours sees it, vLLM's agrees
    setattr(cfg.parallel_config, hidden, not getattr(cfg.parallel_config, hidden))
    cfg.cache_config.num_gpu_blocks = 12345
    later = snapshot.observation("generation", cfg, rank=0, hook="upstream tier")
    assert later["engine_hash"] == start["engine_hash"]
    assert later["fields"]["cache.num_gpu_blocks"] == 12345
