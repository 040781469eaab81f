"""The GPU is idle and clean before launch (harness/measure/gpuproc.py, harness/judge/idlegpu.py,
harness/probe/idlewait.py): the parsers on a real `amd-smi process --json` capture and a
fixture KFD tree laid out as the kernel writes it (tests/fixtures/amdsmi/SOURCES.md,
tests/fixtures/kfd/README.md); the pure judge; the poll bound on an injected clock."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.base import catalogue
from harness.config.schema import Control
from harness.judge import idlegpu
from harness.judge.idlegpu import Ours
from harness.measure import gpuproc
from harness.measure.gpuproc import Box, GpuFacts, Holder
from harness.measure.telemetry.amdsmi import AmdSmiError
from harness.probe import idlewait as probe

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
KFD = FIXTURES / "kfd"
VLLM = (FIXTURES / "amdsmi" / "process-r9700x4-rocm7.2-vllm.json").read_text()
IDLE = (FIXTURES / "amdsmi" / "process-idle.json").read_text()
IN_DOCKER = "4f6c1e0f2b8a9d7c6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d"
MIB = 1024 * 1024
PROC = str(KFD / "proc") + "/{pid}"


def control(**kw) -> Control:
    base = {"name": "c1", "image": "img", "device": "rocm", "command": ["true"]}
    base.update(kw)
    return Control.model_validate(base)


# ------------------------------------------------------------------ amd-smi process --json


def test_the_vllm_capture_names_each_process_once_with_its_process_wide_vram():
    holders = {h.pid: h for h in gpuproc.parse_amd_smi_process(VLLM)}
    assert sorted(holders) == [1882331, 1883200, 1883505, 1883506, 1883507, 1883508]
    worker = holders[1883505]
    assert worker.name == "/usr/bin/python3.12"
    assert worker.gpus == (0, 1, 2, 3)
    assert worker.vram_bytes == 29429556000  # listed under 4 GPUs, never summed 4 times
    assert holders[1882331].vram_bytes == 76000


def test_the_idle_answer_is_no_holder_and_garbage_is_an_error():
    assert gpuproc.parse_amd_smi_process(IDLE) == []
    with pytest.raises(AmdSmiError):
        gpuproc.parse_amd_smi_process("WARNING: no JSON")


# ------------------------------------------------------------------ the KFD tree


def test_the_kfd_tree_names_pid_user_container_vram_and_gpu_index():
    holders = {h.pid: h for h in gpuproc.kfd_holders(KFD / "sys" / "proc", PROC,
                                                     KFD / "sys" / "topology" / "nodes")}
    me = gpuproc.user_of(os.getuid())
    assert holders[4242] == Holder(4242, "python3", me, 2353860608, (0,), None, "kfd")
    assert holders[5151].vram_bytes == 2 * 1024**3
    assert holders[5151].gpus == (0, 1)
    assert holders[5151].container == IN_DOCKER


def test_no_kfd_tree_is_unknown_never_idle(tmp_path):
    facts = gpuproc.rocm_facts(None, kfd=tmp_path / "absent", proc=PROC,
                               process_command=None, metric_command=None)
    assert facts.holders == () and facts.errors and "absent" in facts.errors[0]


def test_amd_smi_names_a_kfd_holder_it_also_lists(tmp_path):
    tool = tmp_path / "amd-smi"
    tool.write_text("#!/bin/sh\ncat " + str(FIXTURES / "amdsmi" / "process-idle.json") + "\n")
    tool.chmod(0o755)
    facts = gpuproc.rocm_facts(None, kfd=KFD / "sys" / "proc", proc=PROC,
                               nodes=KFD / "sys" / "topology" / "nodes",
                               process_command=(str(tool),), metric_command=None)
    assert {h.pid for h in facts.holders} == {4242, 5151} and facts.errors == ()


def test_cpuset_lists():
    assert gpuproc.cpuset("0-3,8") == frozenset({0, 1, 2, 3, 8})
    assert gpuproc.cpuset("") == frozenset()
    assert gpuproc.cpuset("x") == frozenset()


# ------------------------------------------------------------------ the judge


FOREIGN = Holder(4242, "python3", "alice", 512 * MIB, (0,))
OURS = Ours("c1-20260101T000000Z-abcd", "/locks/gpu.lock", None, None)


def test_a_foreign_holder_refuses_naming_pid_user_name_and_memory():
    (reason,) = idlegpu.judge(GpuFacts("rocm", (FOREIGN,)), "locked", OURS, 512)
    assert reason.rule == catalogue.ENV_GPU_BUSY and reason.environment
    for part in ("pid 4242", "python3", "user alice", "512 MiB"):
        assert part in reason.detail


def test_a_holder_on_another_gpu_of_the_host_does_not_count():
    ours = Ours(OURS.run_id, OURS.lock, (1,), None)
    assert idlegpu.judge(GpuFacts("rocm", (FOREIGN,)), "locked", ours, 512) == []


def test_vram_in_use_over_the_bound_refuses():
    facts = GpuFacts("rocm", (), (), vram_used_bytes=600 * MIB)
    (reason,) = idlegpu.judge(facts, "locked", OURS, 512)
    assert reason.rule == catalogue.ENV_GPU_VRAM_IN_USE and "600 MiB" in reason.detail
    assert idlegpu.judge(facts, "locked", OURS, 1024) == []


def test_our_own_container_does_not_count_and_another_runs_does():
    mine = Box("a" * 64, "c1", "img", "", OURS.run_id, OURS.lock)
    left = Box("b" * 64, "old", "img:1", "", "c0-20251231T000000Z-0000", OURS.lock)
    elsewhere = Box("c" * 64, "other", "img", "", "x-1", "/locks/other.lock")
    facts = GpuFacts("cpu", (), (mine, left, elsewhere), cpus=frozenset({0, 1}))
    (reason,) = idlegpu.judge(facts, "locked", OURS, 512)
    assert reason.rule == catalogue.ENV_ORPHAN_CONTAINER
    assert "bbbbbbbbbbbb" in reason.detail and "old" in reason.detail and "img:1" in reason.detail


def test_on_rocm_a_rocm_container_of_another_lock_counts_and_a_cpu_one_does_not():
    gpu = Box("f" * 64, "gpu", "img", "", "x-1", "/locks/other.lock", "rocm")
    cpu = Box("0" * 64, "cpu", "img", "", "x-2", "/locks/other.lock", "cpu")
    reasons = idlegpu.judge(GpuFacts("rocm", (), (gpu, cpu)), "locked", OURS, 512)
    assert [r.rule for r in reasons] == [catalogue.ENV_ORPHAN_CONTAINER]
    assert "ffffffffffff" in reasons[0].detail


def test_on_cpu_a_foreign_container_refuses_only_pinned_on_the_controls_cpus():
    pinned = Box("d" * 64, "db", "postgres", "4-5")
    free = Box("e" * 64, "web", "nginx", "")  # a developer's unpinned container: listed only
    on_ours = GpuFacts("cpu", (), (pinned, free), cpus=frozenset({0, 1, 4}))
    reasons = idlegpu.judge(on_ours, "locked", OURS, 512)
    assert [r.rule for r in reasons] == [catalogue.ENV_GPU_BUSY]
    assert "dddddddddddd (db, image postgres)" in reasons[0].detail
    assert "CPUs 4-5" in reasons[0].detail
    apart = GpuFacts("cpu", (), (pinned,), cpus=frozenset({0, 1}))
    assert idlegpu.judge(apart, "locked", OURS, 512) == []


def test_after_exit_only_what_the_run_left_refuses():
    ours = Ours(OURS.run_id, OURS.lock, None, IN_DOCKER)
    left = Holder(5151, "vllm", "root", MIB, (0,), IN_DOCKER)
    facts = GpuFacts("rocm", (FOREIGN, left), (Box(IN_DOCKER, "c1", "img", "", OURS.run_id),))
    reasons = idlegpu.judge(facts, "exited", ours, 512)
    assert [r.rule for r in reasons] == [catalogue.GPU_LEFT_BEHIND] * 2
    assert "pid 5151" in reasons[0].detail and not reasons[0].environment
    assert idlegpu.judge(GpuFacts("rocm", (FOREIGN,)), "exited", ours, 512) == []


# ------------------------------------------------------------------ the wait


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def test_a_wait_of_zero_refuses_at_once():
    clock, looks = Clock(), []
    doc, reasons = probe.check(control(), phase="locked", run_id="r",
                               looker=lambda: looks.append(1) or GpuFacts("rocm", (FOREIGN,)),
                               clock=clock, sleep=clock.sleep)
    assert len(looks) == 1 and reasons and doc["idle"] is False and doc["polls"] == 1


def test_the_wait_stops_at_its_bound_and_ends_when_the_holder_leaves():
    clock = Clock()
    busy = probe.check(control(idle_gpu={"wait_s": 5}), phase="locked", run_id="r",
                       looker=lambda: GpuFacts("rocm", (FOREIGN,)), clock=clock,
                       sleep=clock.sleep)
    assert busy[1] and busy[0]["polls"] == 6 and busy[0]["waited_s"] == 5.0
    clock, states = Clock(), [(FOREIGN,), (FOREIGN,), ()]
    doc, reasons = probe.check(control(idle_gpu={"wait_s": 60}), phase="locked", run_id="r",
                               looker=lambda: GpuFacts("rocm", states.pop(0)), clock=clock,
                               sleep=clock.sleep)
    assert reasons == [] and doc["idle"] and doc["polls"] == 3 and doc["waited_s"] == 2.0


def test_the_control_field_defaults_refuse_at_once():
    ctl = control()
    assert ctl.idle_gpu.wait_s == 0 and ctl.idle_gpu.vram_max_mb == 512
    with pytest.raises(ValueError):
        control(idle_gpu={"wait_s": -1})
