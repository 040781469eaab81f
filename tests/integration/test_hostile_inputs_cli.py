"""Hostile inputs on the real command line (issue 10, items 12-15): FIFOs, devices and huge
files as inputs, non-finite bounds, contract bombs, huge integers, lone surrogates, and a
read-only or full runs folder. Each command runs in a subprocess under a timeout, so a hang
fails the test instead of hanging the suite; none of these cases needs a container."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ID = "sha256:" + "ab" * 32
TIMEOUT = 60


def harness(*args: str, cwd: Path, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                              text=True, timeout=timeout, cwd=cwd,
                              env={**os.environ, "HARNESS_DEBUG": ""})
    except subprocess.TimeoutExpired:
        pytest.fail(f"harness {' '.join(args)} hung for {timeout}s")


def clean(r: subprocess.CompletedProcess, code: int, *words: str) -> None:
    out = r.stdout + r.stderr
    assert r.returncode == code, (r.returncode, out[-3000:])
    assert "Traceback" not in out and "internal error" not in out, out[-3000:]
    for w in words:
        assert w in out, (w, out[-3000:])


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "pipe.yaml"
    os.mkfifo(path)
    return path


@pytest.fixture
def huge(tmp_path) -> Path:
    path = tmp_path / "huge.json"
    with open(path, "wb") as f:
        f.truncate(4 << 30)  # sparse: 4 GiB that costs nothing on disk
    return path


@pytest.fixture
def project(tmp_path) -> Path:
    for d in ("campaigns", "controls", "locks"):
        (tmp_path / d).mkdir()
    (tmp_path / "images.lock").write_text(f"images:\n  img:\n    id: {ID}\n")
    (tmp_path / "controls" / "c1.yaml").write_text(
        'name: c1\nimage: img\ndevice: cpu\ncommand: ["true"]\n')
    (tmp_path / "campaigns" / "camp.yaml").write_text(
        f"name: camp\nrow: R\nlock: {tmp_path / 'locks' / 'gpu.lock'}\nlock_timeout: 30\n"
        "controls: [c1]\n")
    return tmp_path


def observation(phase: str, value: str = "1") -> str:
    doc = {"schema": "harness.observation/v1", "phase": phase,
           "process": {"role": "EngineCore", "rank": 0, "pid": 1},
           "source": {"seal": "s", "engine": "e", "image": "i"}, "complete": True,
           "fields": {"model.x": "VALUE"}}
    return json.dumps(doc).replace('"VALUE"', value)


def pair(tmp_path: Path, startup: str = "1", generation: str = "2") -> tuple[Path, Path]:
    s, g = tmp_path / "s.json", tmp_path / "g.json"
    s.write_text(observation("startup", startup))
    g.write_text(observation("generation", generation))
    return s, g


# --- item 12: FIFOs, devices and huge files as inputs -------------------------------------

@pytest.mark.parametrize("which", ["fifo", "zero", "huge"])
def test_check_refuses_special_and_huge_files(tmp_path, fifo, huge, which):
    target = {"fifo": fifo, "zero": Path("/dev/zero"), "huge": huge}[which]
    r = harness("check", str(target), cwd=tmp_path)
    clean(r, 2, str(target), {"fifo": "FIFO", "zero": "character device",
                              "huge": "byte limit"}[which])


def test_check_campaign_whose_image_lock_is_a_fifo(project):
    (project / "images.lock").unlink()
    os.mkfifo(project / "images.lock")
    clean(harness("check", "campaigns/camp.yaml", cwd=project), 2, "images.lock:1:1:", "FIFO")


@pytest.mark.parametrize("target", ["fifo", "/dev/zero"])
def test_verify_refuses_a_fifo_or_device_argument(tmp_path, fifo, target):
    path = str(fifo) if target == "fifo" else target
    clean(harness("verify", path, cwd=tmp_path), 2)


@pytest.mark.parametrize("target", ["fifo", "/dev/zero"])
def test_report_refuses_a_fifo_or_device_argument(tmp_path, fifo, target):
    path = str(fifo) if target == "fifo" else target
    clean(harness("report", path, cwd=tmp_path), 2, path)


def test_model_pin_names_a_fifo_and_a_device_and_reads_neither(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"w")
    os.mkfifo(model / "pipe")
    (model / "zero").symlink_to("/dev/zero")
    r = harness("model", "pin", str(model), cwd=tmp_path)
    clean(r, 2, f"{model / 'pipe'}: is a fifo", f"{model / 'zero'}: is a char-device")
    assert "sha256:" not in r.stdout


def test_model_pin_still_pins_regular_files_and_symlinked_ones(tmp_path):
    model = tmp_path / "model"
    (model / "sub").mkdir(parents=True)
    (model / "sub" / "a.bin").write_bytes(b"a")
    (tmp_path / "blob").write_bytes(b"b")
    (model / "b.bin").symlink_to(tmp_path / "blob")
    r = harness("model", "pin", str(model), cwd=tmp_path)
    clean(r, 0, '"sub/a.bin"', '"b.bin"')


@pytest.mark.parametrize("option", ["--startup", "--generation", "--contract"])
@pytest.mark.parametrize("which", ["fifo", "zero", "huge"])
def test_finalize_refuses_special_and_huge_inputs(tmp_path, fifo, huge, option, which):
    s, g = pair(tmp_path)
    target = {"fifo": fifo, "zero": Path("/dev/zero"), "huge": huge}[which]
    args = {"--startup": str(s), "--generation": str(g)}
    args[option] = str(target)
    argv = [x for kv in args.items() for x in kv]
    clean(harness("finalize", *argv, cwd=tmp_path), 2, str(target))


# --- item 13: non-finite and absurd bounds on the command line and in YAML ------------------

@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e308", "0", "-5"])
def test_run_lock_timeout_must_be_a_finite_duration(project, value):
    r = harness("run", "campaigns/camp.yaml", "--lock-timeout", value, "--runs-dir", "runs",
                cwd=project)
    clean(r, 2, "--lock-timeout")
    assert not (project / "runs").exists(), "nothing ran"


@pytest.mark.parametrize("value", ["nan", "inf", "1e308", "721"])
def test_night_max_hours_must_be_finite_and_sane(project, value):
    r = harness("night", "campaigns/camp.yaml", "--max-hours", value, "--runs-dir", "runs",
                cwd=project)
    clean(r, 2, "--max-hours")


def test_night_and_rerun_lock_timeout_refuse_nan(project):
    clean(harness("night", "campaigns/camp.yaml", "--lock-timeout", "nan", cwd=project), 2,
          "--lock-timeout")
    clean(harness("rerun", str(project), "--reason", "x", "--lock-timeout", "inf",
                  cwd=project), 2, "--lock-timeout")


@pytest.mark.parametrize("line,words", [
    ("timeout: 1:30", "base-60"), ("timeout: .nan", "finite"), ("stop_grace: .inf", "finite"),
    ("resources: {cpus: .inf}", "finite"), ("timeout: " + "1" * 5000, "too long")])
def test_check_names_the_bad_number_with_its_position(project, line, words):
    ctl = project / "controls" / "c1.yaml"
    ctl.write_text(ctl.read_text() + line + "\n")
    clean(harness("check", str(ctl), cwd=project), 2, f"{ctl}:5:", words)


# --- item 14: contract bombs ----------------------------------------------------------------

@pytest.mark.parametrize("text,words", [
    ('a: &a ["x","x","x","x","x","x","x","x","x"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n'
     'c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n'
     'e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n'
     'fields: [*f]\n', "too large"),
    ("[" * 100_000 + "]" * 100_000, "nesting deeper"),
    ("- " * 3000 + "x\n", "nesting deeper"),
    ("- " + "9" * 5000 + "\n", "too long"),
])
def test_finalize_contract_bombs_are_invalid_input(tmp_path, text, words):
    s, g = pair(tmp_path)
    contract = tmp_path / "c.yaml"
    contract.write_text(text)
    r = harness("finalize", "--startup", str(s), "--generation", str(g), "--contract",
                str(contract), cwd=tmp_path, timeout=30)
    clean(r, 2, f"{contract}:", words)


# --- item 15: huge integers, lone surrogates, a runs folder that cannot be written ---------

@pytest.mark.parametrize("flags", [[], ["--json"], ["--out", "verdict.json"]])
@pytest.mark.parametrize("value,words", [("1" * 5000, "5000 digits"),
                                         ('"\\ud800"', "not valid Unicode"),
                                         ('["ok", "\\udfff"]', "not valid Unicode")])
def test_finalize_huge_integer_or_lone_surrogate_is_invalid(tmp_path, value, words, flags):
    s, g = pair(tmp_path, startup=value, generation='"other"')
    r = harness("finalize", "--startup", str(s), "--generation", str(g), *flags, cwd=tmp_path)
    clean(r, 2, str(s), words)
    assert not (tmp_path / "verdict.json").exists()


def mount_tmpfs(path: Path, options: str) -> None:
    path.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (this test needs root): {r.stderr}")


@pytest.fixture
def mounts(tmp_path):
    made: list[Path] = []

    def make(name: str, options: str) -> Path:
        mount_tmpfs(tmp_path / name, options)
        made.append(tmp_path / name)
        return tmp_path / name
    yield make
    for m in made:
        subprocess.run(["umount", "-l", str(m)], check=False)


def test_run_into_a_read_only_runs_folder_is_an_environment_fault(project, mounts):
    ro = mounts("ro", "ro,size=64k")
    r = harness("run", "campaigns/camp.yaml", "--runs-dir", str(ro), cwd=project)
    clean(r, 3, "[ENV-READ-ONLY]", f"cannot write the runs folder {ro}: read-only file system")


def test_run_into_a_full_runs_folder_is_an_environment_fault(project, mounts):
    full = mounts("full", "size=64k")
    fd = os.open(full / "fill", os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)
    r = harness("run", "campaigns/camp.yaml", "--runs-dir", str(full), cwd=project)
    clean(r, 3, "[ENV-DISK-FULL]", f"cannot write the runs folder {full}: no space left")
    assert [p.name for p in full.iterdir()] == ["fill"], "no ownerless run folder is left"


def test_night_into_a_read_only_runs_folder_is_an_environment_fault(project, mounts):
    ro = mounts("ro", "ro,size=64k")
    r = harness("night", "campaigns/camp.yaml", "--runs-dir", str(ro), cwd=project)
    clean(r, 3, "[ENV-READ-ONLY]", "read-only file system")
