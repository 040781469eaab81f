"""Variants found by a red-team pass over config values and secret names (each failed
before its fix): a file that checks clean must be a file that runs as it says."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from harness.config.loader import validate
from harness.config.schema import Control, size_bytes
from harness.config.yamlsafe import YamlFaults, loads
from harness.measure.vector import looks_secret

CONTROL = 'name: c1\nimage: img\ndevice: cpu\ncommand: ["true"]\n'


def faults(extra: str) -> list[str]:
    _obj, found = validate(loads(CONTROL + extra, "c1.yaml"), Control)
    return [str(f) for f in found]


def faults_of(text: str) -> list[str]:
    try:
        doc = loads(text, "c1.yaml")
    except YamlFaults as e:
        return [str(f) for f in e.faults]
    return [str(f) for f in validate(doc, Control)[1]]


@pytest.mark.parametrize(("extra", "line"), [
    ('env: {A: "x\\0y"}\n', 5),
    ('entrypoint: "/bin/sh\\0-c"\n', 5),
    ('workdir: "/w\\0"\n', 5),
    ('post_steps: [{name: judge, run: ["a\\0b"]}]\n', 5),
    ('command: ["a\\0b"]\n'.replace("command", "description"), 5),
])
def test_a_nul_anywhere_fails_check_at_its_position_instead_of_the_run(extra, line):
    found = faults_of(CONTROL + extra)
    assert len(found) == 1 and found[0].startswith(f"c1.yaml:{line}:"), found
    assert "NUL" in found[0]


def test_a_nul_in_a_key_fails_check_at_its_position():
    found = faults_of(CONTROL + 'env: {"A\\0": "x"}\n')
    assert found and found[0].startswith("c1.yaml:5:") and "NUL" in found[0]


def test_the_schema_refuses_a_nul_even_without_the_yaml_loader():
    with pytest.raises(ValidationError, match=r"command\[0\] contains a NUL"):
        Control.model_validate({"name": "c1", "image": "img", "device": "cpu",
                                "command": ["a\x00b"]})


@pytest.mark.parametrize("memory", ["0", "0g", "5m", "1k", "٣g", "99999999999999g"])
def test_memory_limits_docker_would_not_enforce_fail_check(memory):
    assert faults(f"resources: {{memory: {json.dumps(memory)}}}\n"), memory


@pytest.mark.parametrize("shm", ["0", "٣g", "999999999999999g"])
def test_shm_sizes_docker_would_refuse_fail_check(shm):
    assert faults(f"resources: {{shm_size: {json.dumps(shm)}}}\n"), shm


@pytest.mark.parametrize("memory,n", [("6m", 6 << 20), ("256M", 256 << 20), ("2g", 2 << 30),
                                      ("7340032", 7340032)])
def test_sane_sizes_pass(memory, n):
    assert faults(f"resources: {{memory: {json.dumps(memory)}}}\n") == []
    assert size_bytes(memory, 1, 1 << 44) == n


def test_unicode_digits_are_not_gpu_indexes():
    doc = loads('name: c1\nimage: img\ndevice: rocm\ncommand: ["true"]\ngpus: "٣"\n', "c.yaml")
    assert validate(doc, Control)[1]
    doc = loads('name: c1\nimage: img\ndevice: rocm\ncommand: ["true"]\ngpus: "0,1"\n', "c.yaml")
    assert validate(doc, Control)[1] == []


@pytest.mark.parametrize("name", ["Hf_ToKeN", "hfToKen", "HF_AUTH", "DB_PASSPHRASE", "MY_PWD",
                                  "oauth", "x-api-key", "ssh.private_key", "HF_TOKEN"])
def test_secret_names_in_any_case_or_spelling(name):
    assert looks_secret(name)


@pytest.mark.parametrize("name", ["max_num_batched_tokens", "tokenizer", "max_tokens",
                                  "TOKENIZERS_PARALLELISM", "AUTHOR", "kv_cache_dtype",
                                  "keystone_dir"])
def test_sizes_and_ordinary_words_are_not_secrets(name):
    assert not looks_secret(name)


def test_error_lines_never_carry_terminal_escapes_from_a_file_name(tmp_path):
    """Every message the CLI prints on failure goes through one inert writer."""
    import subprocess
    import sys

    bad = tmp_path / "a\x1b[2Jb\x07.yaml"
    bad.write_text("name: [x\n")
    r = subprocess.run([sys.executable, "-m", "harness", "check", str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "\x1b" not in r.stderr and "\x07" not in r.stderr
    assert "a\\x1b[2Jb\\x07.yaml:2:1: YAML syntax" in r.stderr


@pytest.mark.parametrize(("extra", "line", "words"), [
    ("post_steps: [exit-code, gate-zero]\n", 5, "unknown built-in post-step 'gate-zero'"),
    ("post_steps: [{name: judge, run: []}]\n", 5, "empty command"),
    ("post_steps: [{name: gate0, options: {contract: [a.b, a.b]}}]\n", 5, "listed twice"),
    ("post_steps: [{name: gate0, options: {contract: []}}]\n", 5, "non-empty list"),
])
def test_post_steps_that_would_fail_at_run_time_fail_check(extra, line, words):
    """A file that checks clean is a file that runs: found after issue 10, listed in 11."""
    found = faults_of(CONTROL + extra)
    assert len(found) == 1 and found[0].startswith(f"c1.yaml:{line}:"), found
    assert words in found[0]


def test_a_campaign_contract_with_a_duplicate_fails_check_at_its_line():
    from harness.config.schema import Campaign

    doc = loads("name: camp\nrow: R\ncontrols: [c1]\ncontract:\n  - model.dtype\n"
                "  - model.dtype\n", "camp.yaml")
    found = [str(f) for f in validate(doc, Campaign)[1]]
    assert len(found) == 1 and found[0].startswith("camp.yaml:5:"), found
    assert "'model.dtype' is listed twice" in found[0]


def test_a_command_post_step_may_have_any_name():
    assert faults_of(CONTROL + "post_steps: [{name: my-judge, run: [python3, -V]}]\n") == []
