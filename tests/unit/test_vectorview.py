"""`measure.vectorview`: a recorded docker argv read back for `harness diff`. Two launches of
one control must read alike (every token one launch alone has is elided), a change someone
made must show as its own line, and a secret must never come back in clear."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from harness.config.schema import Control
from harness.measure import vectorview
from harness.measure.vector import VectorInput, build, redact
from harness.measure.vectorview import (
    BY_NAME,
    LAUNCH_ONLY,
    RUN_DIR,
    RUN_ID,
    SEAL,
    env_entry,
    split,
    view,
)

IMAGE = "sha256:" + "ab" * 32
SEAL_A, SEAL_B = "sha256:" + "1" * 64, "sha256:" + "2" * 64


def control(**kw: object) -> Control:
    base = {"name": "c1", "image": "rehearsal", "device": "cpu",
            "command": ["python3", "-c", "print('a b')"], "engine": {"dtype": "bfloat16"}}
    return Control.model_validate({**base, **kw})


def launch(tmp: Path, run_id: str, ctl: Control, *, seal: str = SEAL_A, pid: str = "101",
           job: str | None = None, environ: dict[str, str] | None = None) -> tuple[dict, str]:
    """One launch as vector.build writes it (docker-vector.json), in its own run folder."""
    run_dir = tmp / "runs" / run_id
    inp = VectorInput(control=ctl, image_id=IMAGE, run_id=run_id, campaign="camp",
                      lock_path=tmp / "gpu.lock", cidfile=run_dir / "container.cid",
                      observations_dir=run_dir / "observations", instrument_dir=tmp / "inst",
                      extra_env={"HARNESS_SEAL": seal},
                      launcher={"pid": pid, "started": f"{pid}.5", "host": "vm"}, slurm_job=job)
    return build(inp, environ).evidence(), run_id


def test_two_launches_of_one_control_read_alike(tmp_path: Path) -> None:
    ctl = control()
    a = view(*launch(tmp_path, "c1-20260101T000000Z-aaaa1111", ctl, seal=SEAL_A, pid="7"))
    b = view(*launch(tmp_path, "c1-20260102T000000Z-bbbb2222", ctl, seal=SEAL_B, pid="9",
                     job="4242"))
    assert a is not None and b is not None
    assert a.env == b.env
    # the Slurm job label is there on one side only, and elided to the same placeholder
    assert [x for x in b.lines() if x not in a.lines()] == [
        f"--label org.harness.slurm-job={LAUNCH_ONLY}"]
    text = "\n".join([*a.lines(), *a.env_lines()])
    for token in ("c1-20260101T000000Z-aaaa1111", str(tmp_path / "runs"), SEAL_A, "7.5"):
        assert token not in text
    assert f"--name harness-{RUN_ID}" in a.lines()
    assert f"--cidfile {RUN_DIR}/container.cid" in a.lines()
    assert f"--label org.harness.launcher-pid={LAUNCH_ONLY}" in a.lines()
    assert f"--label org.harness.run-id={RUN_ID}" in a.lines()
    assert f"--mount type=bind,source={RUN_DIR}/observations,target=/harness/out" in a.lines()
    assert a.env["HARNESS_RUN_ID"] == RUN_ID and a.env["HARNESS_SEAL"] == SEAL


def test_what_someone_changed_stays_in_view(tmp_path: Path) -> None:
    """Not every run-specific-looking token is elided: the launcher's host, the lock path
    and the image are the same for two launches on one host, and differ when they should."""
    a = view(*launch(tmp_path, "c1-20260101T000000Z-aaaa1111", control()))
    b = view(*launch(tmp_path, "c1-20260102T000000Z-bbbb2222",
                     control(env={"VLLM_ENABLE_V1_MULTIPROCESSING": "0"})))
    assert a is not None and b is not None
    assert a.lines() == b.lines()
    assert set(b.env_lines()) - set(a.env_lines()) == {
        "--env VLLM_ENABLE_V1_MULTIPROCESSING=0"}
    assert "--label org.harness.launcher-host=vm" in a.lines()
    assert f"--label org.harness.lock={tmp_path}/gpu.lock" in a.lines()


def test_options_keep_argv_order_and_the_command_comes_last_shell_quoted(
        tmp_path: Path) -> None:
    v = view(*launch(tmp_path, "c1-20260101T000000Z-aaaa1111", control()))
    assert v is not None
    lines = v.lines()
    assert lines[0] == "--pull=never"  # one token `--flag=value` stays one line
    assert lines.index("--network none") < lines.index("--cap-drop ALL") < lines.index(
        "--pids-limit 4096")
    assert lines[-2:] == [f"image {IMAGE}", "command " + shlex.join(
        ["python3", "-c", "print('a b')"])]
    assert v.image == IMAGE
    assert not any(x.startswith(("--env ", "-e ")) for x in lines)  # the env is apart
    assert list(v.env) == sorted(v.env)  # as vector.build wrote them


def test_split_reads_values_flags_and_the_image() -> None:
    opts, image, cmd = split(["docker", "run", "--rm", "--env", "A=1", "--ipc=host",
                              "--name", "x", "img", "--env", "not-an-option"])
    assert [o.line() for o in opts] == ["--rm", "--env A=1", "--ipc=host", "--name x"]
    assert image == "img" and cmd == ["--env", "not-an-option"]
    assert split(["docker", "run", "--rm"]) == ([vectorview.Option("--rm", None)], None, [])


def test_secrets_never_come_back_in_clear(tmp_path: Path) -> None:
    ctl = control(env={"HF_TOKEN": "hf-clear-text", "PLAIN": "x"}, secrets=["API_KEY"],
                  engine={"dtype": "x", "api_key": "engine-clear"})
    vector, run_id = launch(tmp_path, "c1-20260101T000000Z-aaaa1111", ctl,
                            environ={"API_KEY": "from-env-clear"})
    v = view(vector, run_id)
    assert v is not None
    assert v.env["HF_TOKEN"] == redact("hf-clear-text")  # the vector's marker, checkable
    assert v.env["API_KEY"] == redact("from-env-clear")
    assert v.env["PLAIN"] == "x"
    text = repr(v)
    for clear in ("hf-clear-text", "from-env-clear", "engine-clear"):
        assert clear not in text


def test_an_older_or_edited_argv_holding_a_secret_is_redacted() -> None:
    argv = ["docker", "run", "--env", "DB_PASSWORD=hunter2", "-e", "MY_TOKEN", "--env=X=1",
            "img"]
    v = view({"argv": argv, "passed_env": {"MY_TOKEN": "clear, not a marker"}})
    assert v is not None
    assert v.env == {"DB_PASSWORD": redact("hunter2"), "MY_TOKEN": BY_NAME, "X": "1"}
    assert env_entry("MY_TOKEN", {"MY_TOKEN": "<redacted sha256:ab>"}) == (
        "MY_TOKEN", "<redacted sha256:ab>")
    assert env_entry("HARNESS_SEAL=sha256:9", {}) == ("HARNESS_SEAL", SEAL)
    assert env_entry("tokenizer=gpt2", {}) == ("tokenizer", "gpt2")  # not a secret name


@pytest.mark.parametrize("vector", [
    None, "docker run", {}, {"argv": "docker run x"}, {"argv": ["podman", "run", "x"]},
    {"argv": ["docker", "run", 7]}, {"argv": ["docker", "run"] + ["-x"] * 20_000},
    {"argv": ["docker"]}])
def test_anything_not_shaped_like_docker_run_is_not_read(vector: object) -> None:
    assert view(vector) is None


def test_a_hostile_run_id_elides_nothing_and_no_image_means_no_command() -> None:
    v = view({"argv": ["docker", "run", "--name", "harness-r1", "--env", "HARNESS_RUN_ID=r1"]},
             run_id=["r1"])
    assert v is not None
    assert v.lines() == ["--name harness-r1"] and v.env == {"HARNESS_RUN_ID": "r1"}
    assert v.image is None and v.command is None


@pytest.mark.parametrize("run_id", ["e", "-", "harness", "r-1"])
def test_a_short_forged_run_id_or_folder_blanks_out_nothing(run_id: str) -> None:
    """The run id and folder come from the run's own record: a forged short one must not
    turn every "e" (or every "/") of the argv into a placeholder."""
    argv = ["docker", "run", "--name", f"harness-{run_id}", "--cidfile", "/container.cid",
            "--env", "MODE=engine", "--label", f"org.harness.run={run_id}", "img", "serve"]
    v = view({"argv": argv}, run_id=run_id)
    assert v is not None and v.env == {"MODE": "engine"}
    assert f"--label org.harness.run={run_id}" in v.lines()
    assert vectorview.RUN_ID not in " ".join(v.lines()) and v.command == "serve"


def test_a_run_folder_not_named_for_its_run_id_is_not_elided() -> None:
    run_id = "ctl-20261202T000000Z-0123abcd"
    argv = ["docker", "run", "--cidfile", "/usr/container.cid", "--mount",
            "type=bind,src=/usr/lib,dst=/lib", "--name", f"harness-{run_id}", "img"]
    v = view({"argv": argv}, run_id=run_id)
    assert v is not None
    assert "--mount type=bind,src=/usr/lib,dst=/lib" in v.lines()
    assert f"--name harness-{vectorview.RUN_ID}" in v.lines()
