"""What a run inside a Slurm job records and labels, and the night's `executor:` keys.

The job's variables are hostile (anyone can set them), the host's ROCR_VISIBLE_DEVICES is
recorded but never forwarded to the container, and `harness run --run-id` (what a night's
job runs) names exactly one run folder.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.base.errors import InvalidInput
from harness.config.executor import ExecutorBlock, ExecutorConfig, merged
from harness.config.schema import Control
from harness.measure.slurm import identity
from harness.measure.vector import SLURM_JOB_LABEL, VectorInput, build, labels


def control(**kw) -> Control:
    return Control.model_validate({"name": "c1", "image": "img", "device": "cpu",
                                   "command": ["python3", "-V"], **kw})


def vinput(ctl: Control, **kw) -> VectorInput:
    return VectorInput(control=ctl, image_id="sha256:" + "ab" * 32, run_id="c1-x",
                       campaign="camp", lock_path=Path("/locks/gpu.lock"),
                       cidfile=Path("/r/container.cid"), observations_dir=Path("/r/obs"),
                       instrument_dir=Path("/src/instrument"), **kw)


REPO = Path(__file__).resolve().parents[2]
HARNESS = str(Path(sys.executable).parent / "harness")
TOKEN = "harness+rehearsal-night-20261130T192354Z+0+1+night-a"
JOB_ENV = {"SLURM_JOB_ID": "4711", "HARNESS_SLURM_TOKEN": TOKEN, "SLURMD_NODENAME": "node2",
           "SLURM_JOB_GPUS": "1", "ROCR_VISIBLE_DEVICES": "1"}


def test_outside_a_job_nothing_is_recorded_or_labelled() -> None:
    assert identity.record({"ROCR_VISIBLE_DEVICES": "0"}) is None
    assert identity.job_id({"SLURM_JOB_ID": ""}) is None
    assert SLURM_JOB_LABEL not in labels(vinput(control()))


def test_a_job_records_its_id_token_node_and_gpus() -> None:
    assert identity.record(JOB_ENV) == {
        "job_id": "4711", "token": TOKEN, "node": "node2", "gpus": "1",
        "rocr_visible_devices": "1"}


@pytest.mark.parametrize("name", ["HARNESS_SLURM_TOKEN", "SLURMD_NODENAME", "SLURM_JOB_GPUS",
                                  "ROCR_VISIBLE_DEVICES"])
@pytest.mark.parametrize("forged", ["../x", "a\nb", "1,,2", "x" * 300, "$(id)"])
def test_forged_values_are_left_out_not_recorded(name: str, forged: str) -> None:
    got = identity.record({**JOB_ENV, name: forged})
    key = {"HARNESS_SLURM_TOKEN": "token", "SLURMD_NODENAME": "node",
           "SLURM_JOB_GPUS": "gpus", "ROCR_VISIBLE_DEVICES": "rocr_visible_devices"}[name]
    assert got is not None and got[key] is None and got["job_id"] == "4711"


@pytest.mark.parametrize("job_id", ["12a", "-1", "1 2", "1234567890123", "１２"])
def test_a_forged_job_id_means_no_job(job_id: str) -> None:
    assert identity.record({**JOB_ENV, "SLURM_JOB_ID": job_id}) is None


def test_the_container_is_labelled_with_the_job_and_never_gets_the_hosts_gpu_mask() -> None:
    ctl = control(device="rocm")
    v = build(vinput(ctl, slurm_job="4711"), dict(JOB_ENV))
    assert f"{SLURM_JOB_LABEL}=4711" in v.argv
    assert not any("ROCR_VISIBLE_DEVICES" in a for a in v.argv)
    assert "ROCR_VISIBLE_DEVICES" not in v.passed_env


def test_executor_block_defaults_and_command_line_on_top() -> None:
    block = ExecutorBlock.model_validate({"executor": {"kind": "slurm", "partition": "gpu",
                                                      "seal_grace": "3m"}})
    assert block.executor.seal_grace == 180.0 and block.executor.account is None
    got = merged(block.executor, kind=None, partition="mi300", account="lab-7", drop=None)
    assert (got.kind, got.partition, got.account) == ("slurm", "mi300", "lab-7")
    assert ExecutorConfig().kind == "local"
    assert block.executor.window == 4  # a small submit window unless the campaign says
    assert merged(block.executor, window=16).window == 16  # --jobs 16
    assert merged(block.executor, window=None).window == 4


@pytest.mark.parametrize("given", [{"kind": "ssh"}, {"partition": "a b"},
                                   {"account": "x;y"}, {"seal_grace": -1}, {"queue": "q"},
                                   {"window": 0}, {"window": "many"}, {"window": 10_001}])
def test_bad_executor_values_are_refused(given: dict) -> None:
    with pytest.raises(ValueError):
        ExecutorBlock.model_validate({"executor": given})
    if set(given) <= {"kind", "partition", "account"}:
        with pytest.raises(InvalidInput):
            merged(ExecutorConfig(), **given)


def test_check_gives_the_position_of_a_bad_executor_key(tmp_path: Path) -> None:
    text = (REPO / "campaigns" / "rehearsal-night.yaml").read_text()
    camp = tmp_path / "campaigns" / "night.yaml"
    camp.parent.mkdir()
    camp.write_text(text.replace("../images.lock", str(REPO / "images.lock"))
                    .replace("controls:\n", f"controls_dir: {REPO / 'controls'}\ncontrols:\n", 1)
                    + "executor:\n  kind: slurm\n  partition: 'no spaces'\n")
    r = subprocess.run([HARNESS, "check", str(camp)], capture_output=True, text=True)
    assert r.returncode == 2, r.stdout + r.stderr
    line = len(camp.read_text().splitlines())
    assert f"{camp}:{line}:" in r.stdout + r.stderr


@pytest.mark.parametrize(("args", "match"), [
    (["--run-id", "night-a-20261130T000000Z-0a1b2c3d"], "exactly one --control"),
    (["--control", "night-a", "--run-id", "night-b-20261130T000000Z-0a1b2c3d"], "--run-id"),
    (["--control", "night-a", "--run-id", "night-a-../x"], "--run-id"),
    (["--control", "night-a", "--run-id", "night-a-x", "--attempt", "0"], "--attempt"),
])
def test_run_with_a_controllers_run_id_names_exactly_one_run(tmp_path: Path, args: list,
                                                           match: str) -> None:
    r = subprocess.run([HARNESS, "run", "campaigns/rehearsal-night.yaml", *args,
                        "--runs-dir", str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2, r.stdout + r.stderr
    assert match in r.stderr and list(tmp_path.iterdir()) == []
