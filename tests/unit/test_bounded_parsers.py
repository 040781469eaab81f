"""Every parser of outside text against the same hostile inputs (harness.base.bounds).

A 5000-digit number, a range of 10^8 (or 10^6) elements, a reversed or negative range, a
NUL byte, a 10 MB line and text that is not UTF-8, each in the grammar of each parser:
gres.conf (its File= and NodeName= ranges, and the doctor's `gpu-map-gres` line), Slurm's
answers (sacct, squeue, jobcomp, array ranges), the job's GPU indexes, the GPU tools'
output (rocminfo, amd-smi), vLLM's log lines, a container's launcher labels and
/proc/uptime. Each must give its own bad-input answer (BadText or the parser's typed error,
a skipped line, a field left unknown, a `fail` line) and nothing else: any other exception
fails the test. Then the commands: `harness doctor` says it in a line and exits 1, and
`--slurm-health` takes the drain path. No mock: the only absent hardware is the GPU, and
the GPU map names device paths that are only compared, never opened.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.base import bounds
from harness.base.bounds import BadText
from harness.base.errors import InvalidInput
from harness.judge.doctor import gpulines as dmap
from harness.measure import vector
from harness.measure.host import parsers
from harness.measure.host.identity import _uptime
from harness.measure.host.tools import ToolRun, read_amd_smi, read_rocminfo
from harness.measure.metrics import MetricsParser
from harness.measure.slurm import gres, identity, query
from harness.pipeline import orphans
from harness.probe.doctor.gpufacts import gather

HARNESS = str(Path(sys.executable).parent / "harness")
TEN_MB = 10 * 1024 * 1024
NOT_UTF8 = b"\xff\xfe".decode("utf-8", "surrogateescape")  # how such bytes reach a str

# Each hostile kind as a range list and as a number, in the parsers' own grammars.
RANGES = {
    "5000-digit number": "128-" + "9" * 5000,
    "10^8-element range": "0-99999999",
    "10^6-element range": "0-999999",
    "reversed range": "131-128",
    "negative range": "-1-3",
    "NUL byte": "128\x00-129",
    "10 MB line": "0," * (TEN_MB // 2),
    "non-UTF-8": "128-" + NOT_UTF8,
}
NUMBERS = {
    "5000-digit number": "9" * 5000,
    "NUL byte": "1\x00",
    "10 MB line": "7" * TEN_MB,
    "non-UTF-8": NOT_UTF8,
    "other scripts' digits": "\u0661\u0662",
    "sign and blanks": " +1",
}


def raises(error: type[Exception] | tuple[type[Exception], ...], call: Callable[[], Any]) -> str:
    """The message of the typed error `call` must raise; any other exception escapes."""
    with pytest.raises(error) as caught:
        call()
    return str(caught.value)


# --------------------------------------------------------------------------- ranges


def sacct(line: str, strict: bool = False) -> query.Parsed:
    return query.parse_sacct("12|ok|RUNNING|0:0|node1\n" + line + "\n", strict=strict)


RANGE_PARSERS: dict[str, Callable[[str], None]] = {
    "bounds.parse_ranges": lambda r: raises(BadText, lambda: bounds.parse_ranges(r)),
    "gres.expand": lambda r: raises(BadText, lambda: gres.expand(f"/dev/dri/renderD[{r}]")),
    "gres.conf File=": lambda r: raises(BadText, lambda: gres.gpu_files(
        f"NodeName=n1 Name=gpu File=/dev/dri/renderD[{r}]\n", "n1")),
    "gres.conf File= of another node": lambda r: raises(BadText, lambda: gres.gpu_files(
        f"NodeName=n2 Name=gpu File=/dev/dri/renderD[{r}]\n", "n1")),
    "gres.conf NodeName=": lambda r: raises(BadText, lambda: gres.gpu_files(
        f"NodeName=n[{r}] Name=gpu File=/dev/dri/renderD128\n", "n1")),
    "slurm array range": lambda r: raises(query.Unreadable,
                                          lambda: query.expand_array("12", r)),
    "sacct array id": lambda r: _skipped_only(sacct(f"12_[{r}]|n|PENDING|0:0|")),
    "sacct array id, strict": lambda r: raises(InvalidInput, lambda: sacct(
        f"12_[{r}]|n|PENDING|0:0|", strict=True)),
    "squeue array id": lambda r: _skipped_only(query.parse_squeue(
        f"12_[{r}]|n|PENDING|(null)|None\n"), before=0),
    "jobcomp array id": lambda r: _skipped_only(query.parse_jobcomp(
        f"JobId=12_[{r}] Name=a JobState=PENDING\n"), before=0),
    "SLURM_JOB_GPUS": lambda r: _none(identity.gpu_indexes(
        {"SLURM_JOB_ID": "7", "SLURM_JOB_GPUS": r})),
}


def _skipped_only(parsed: query.Parsed, before: int = 1) -> None:
    assert len(parsed.jobs) == before and len(parsed.skipped) == 1, parsed


def _none(value: object) -> None:
    assert value is None, value


@pytest.mark.parametrize("kind", RANGES)
@pytest.mark.parametrize("parser", RANGE_PARSERS)
def test_every_range_parser_refuses_hostile_ranges_in_bounds(parser: str, kind: str) -> None:
    started = time.monotonic()
    RANGE_PARSERS[parser](RANGES[kind])
    assert time.monotonic() - started < 5, "a bound must be checked before any expansion"


def test_the_messages_say_which_bound() -> None:
    assert raises(BadText, lambda: bounds.parse_ranges(RANGES["5000-digit number"])) \
        .endswith("its high end has 5000 digits, over the 18-digit bound")
    assert "stands for more than 4096 elements" in raises(
        BadText, lambda: bounds.parse_ranges("0-99999999"))
    assert "'131-128' is reversed" in raises(BadText, lambda: bounds.parse_ranges("131-128"))
    assert raises(BadText, lambda: gres.gpu_files(
        "Name=gpu File=/dev/x\nName=gpu File=/dev/r[1-2\n", "n1")).startswith(
        "gres.conf line 2: '/dev/r[1-2' has unpaired or nested brackets")
    assert "line 1 holds the control character '\\x00' at column 10" in raises(
        BadText, lambda: gres.gpu_files("Name=gpu \x00File=/dev/x\n", "n1"))
    assert "line 1 has 10485760 characters, over the 16384 bound" in raises(
        BadText, lambda: gres.gpu_files("x" * TEN_MB, "n1"))


def test_what_is_in_bounds_still_reads() -> None:
    assert [n for s in bounds.parse_ranges("01-03,7") for n in s.names()] == ["01", "02", "03",
                                                                           "7"]
    assert bounds.parse_int("0") == 0 and bounds.parse_int("9" * 18) == 10**18 - 1
    assert gres.names_node("gpu[00001-60000]", "gpu04711")  # a big cluster: counted only
    assert not gres.names_node("gpu[001-100]", "gpu4") and gres.names_node("n[1-3],m", "m")
    assert gres.gpu_files("NodeName=n[0-9] Name=gpu File=/d/r[128-129]\n", "n1") \
        == ["/d/r128", "/d/r129"]
    with pytest.raises(gres.Unsupported, match="2 bracket groups"):
        gres.gpu_files("NodeName=r[1-2]n[1-4] Name=gpu File=/d/r128\n", "r1n1")
    assert query.expand_array("5", "1-3%2") == ["5_1", "5_2", "5_3"]


# --------------------------------------------------------------------------- numbers


ROCMINFO = """\
ROCk module is loaded
HSA Agents
==========
*******
Agent 1
*******
  Name:                    gfx1100
  Device Type:             GPU
  Compute Unit:            {n}
  Node:                    1
  Pool Info:
    Pool 1
      Segment:                 GLOBAL; FLAGS: COARSE GRAINED
      Size:                    {n}(0x0) KB
"""


def _rocminfo(n: str) -> None:
    _, report, problem = read_rocminfo(ToolRun("rocminfo", True, 0, ROCMINFO.replace("{n}", n)))
    if report is None:
        assert problem is not None and problem.startswith("rocminfo output unreadable: ")
        return
    (gpu,) = report.gpus
    assert gpu.vram_bytes is None or gpu.vram_bytes <= parsers.MAX_VRAM
    assert gpu.compute_units is None or gpu.compute_units < 10**18


def _amd_smi(n: str, quoted: bool) -> None:
    value = f'"{n}"' if quoted else n
    out = f'[{{"gpu": 0, "vram": {{"size": {{"value": {value}, "unit": "MB"}}}}}}]'
    _, gpus, problem = read_amd_smi(ToolRun("amd-smi", True, 0, out))
    if gpus is None:
        assert problem is not None and problem.startswith("amd-smi output unreadable: ")
        return
    assert gpus[0].vram_bytes is None or gpus[0].vram_bytes <= parsers.MAX_VRAM


def _metrics(n: str) -> None:
    parser = MetricsParser()
    parser.feed(f"INFO GPU KV cache size: {n} tokens", "log:1")
    assert parser.metrics()["kv_tokens"] is None, parser.notes


def _reapable(n: str) -> None:
    labels = {vector.LAUNCHER_HOST: "h", vector.LAUNCHER_PID: n, vector.LAUNCHER_STARTED: n}
    assert orphans.reapable({"State": "exited", "Labels": labels}, "h",
                            lambda pid, t: False) is False


NUMBER_PARSERS: dict[str, Callable[[str], None]] = {
    "bounds.parse_int": lambda n: raises(BadText, lambda: bounds.parse_int(n)),
    "bounds.parse_decimal": lambda n: raises(BadText, lambda: bounds.parse_decimal(n)),
    "gres.conf range end": lambda n: raises(BadText, lambda: gres.gpu_files(
        f"Name=gpu File=/dev/dri/renderD[{n}]\n", "n1")),
    "slurm array task": lambda n: _skipped_only(sacct(f"12_{n}|n|PENDING|0:0|")),
    "jobcomp ArrayTaskId": lambda n: _skipped_only(query.parse_jobcomp(
        f"JobId=1 ArrayJobId=1 ArrayTaskId={n} Name=a JobState=COMPLETED\n"), before=0),
    "sacct exit code": lambda n: _skipped_only(sacct(f"13|n|COMPLETED|{n}:0|node1")),
    "SLURM_JOB_GPUS": lambda n: _none(identity.gpu_indexes(
        {"SLURM_JOB_ID": "7", "SLURM_JOB_GPUS": n})),
    "rocminfo": _rocminfo,
    "amd-smi (JSON number)": lambda n: _amd_smi(n, quoted=False),
    "amd-smi (JSON string)": lambda n: _amd_smi(n.replace("\x00", "\\u0000"), quoted=True),
    "vLLM log line": _metrics,
    "launcher labels": _reapable,
    "/proc/uptime": lambda n: _uptime_fallback(n),
}


def _uptime_fallback(n: str) -> None:
    assert _uptime(f"{n} 1.0") == pytest.approx(time.monotonic(), abs=5.0)


@pytest.mark.parametrize("kind", NUMBERS)
@pytest.mark.parametrize("parser", NUMBER_PARSERS)
def test_every_number_parser_refuses_hostile_numbers_in_bounds(parser: str, kind: str) -> None:
    NUMBER_PARSERS[parser](NUMBERS[kind])


def test_tool_outputs_past_a_bound_are_unreadable_in_words() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    for out in (deep, "x" * (17 * 1024 * 1024), '{"gpu": ' + "9" * 5000 + "}"):
        _, gpus, problem = read_amd_smi(ToolRun("amd-smi", True, 0, out))
        assert gpus is None and problem is not None and "bound" in problem, problem
    slow = "HSA Agents\n" + " " * 16000 + "\n"  # a lazy pattern made this quadratic
    started = time.monotonic()
    assert parsers.parse_rocminfo(slow * 200).gpus == []
    assert time.monotonic() - started < 5
    assert parsers.parse_rocminfo(ROCMINFO.replace("{n}", "96")).gpus[0].compute_units == 96


# --------------------------------------------------------------------------- the doctor


GRES_FILES = {
    **{kind: f"NodeName=n1 Name=gpu File=/dev/dri/renderD[{r}]\n".encode("utf-8",
                                                                          "surrogateescape")
       for kind, r in RANGES.items()},
    "a 10 MB file": b"#" * TEN_MB + b"\n",
    "non-UTF-8 bytes": b"NodeName=n1 Name=gpu File=/dev/dri/renderD\xe9\n",
}


def write_map(tmp: Path) -> Path:
    path = tmp / "map.yaml"
    path.write_text("gpus:\n  0: /dev/dri/renderD128\n  1: /dev/dri/renderD129\n")
    return path


@pytest.mark.parametrize("kind", GRES_FILES)
def test_an_unparseable_gres_conf_is_a_fail_line(tmp_path: Path, kind: str) -> None:
    conf = tmp_path / "gres.conf"
    conf.write_bytes(GRES_FILES[kind])
    facts = gather({"SLURMD_NODENAME": "n1"}, given=write_map(tmp_path), required=True,
                        gres_conf=conf)
    checks = {c.name: c for c in dmap.judge(facts)}
    line = checks["gpu-map-gres"]
    assert line.status == "fail", line
    assert line.detail.startswith(f"gres.conf at {conf} ")
    assert line.detail.endswith("which device Slurm gives each GPU index cannot be known")


def test_an_absent_or_unsupported_gres_conf_is_still_a_warning(tmp_path: Path) -> None:
    gmap = write_map(tmp_path)
    for text in (None, "NodeName=r[1-2]n[1-4] Name=gpu File=/dev/dri/renderD128\n"):
        conf = tmp_path / "gres.conf"
        if text is not None:
            conf.write_text(text)
        facts = gather({"SLURMD_NODENAME": "r1n1"}, given=gmap, required=True,
                            gres_conf=conf)
        line = {c.name: c for c in dmap.judge(facts)}["gpu-map-gres"]
        assert line.status == "warn" and line.detail.endswith("indexes not compared"), line


def doctor(tmp: Path, gres_text: str, *extra: str) -> subprocess.CompletedProcess:
    """`harness doctor` on this host with a valid map and `gres_text` as gres.conf. PATH is
    the venv's alone: a Slurm client elsewhere on this machine is never reached."""
    (tmp / "gres.conf").write_text(gres_text)
    (tmp / "images.lock").write_text("images: {}\n")
    env = {**os.environ, "SLURMD_NODENAME": "n1", "PATH": str(Path(sys.executable).parent)}
    return subprocess.run(
        [HARNESS, "doctor", "--lock", str(tmp / "gpu.lock"), "--runs-dir", str(tmp),
         "--images-lock", str(tmp / "images.lock"), "--profile", "cpu",
         "--gpu-map", str(write_map(tmp)), "--gres-conf", str(tmp / "gres.conf"), *extra],
        capture_output=True, text=True, timeout=120, env=env)


HOSTILE_GRES = f"NodeName=n1 Name=gpu File=/dev/dri/renderD[128-{'9' * 5000}]\n"


def test_doctor_says_an_unparseable_gres_conf_in_a_line_and_exits_1(tmp_path: Path) -> None:
    r = doctor(tmp_path, HOSTILE_GRES)
    assert "internal error" not in r.stderr, r.stderr
    assert r.returncode == 1, r.stdout + r.stderr
    (line,) = [s for s in r.stdout.splitlines() if "gpu-map-gres" in s]
    assert line.startswith("fail  gpu-map-gres") and "over the 18-digit bound" in line, line


def test_the_health_check_drains_a_node_with_an_unparseable_gres_conf(tmp_path: Path) -> None:
    """The drain is the health check's own path; with no Slurm on this machine, scontrol is
    missing, so the drain itself fails as documented (exit 3, said on stderr). The Slurm
    tier (tests/slurm/test_slurm_health.py) sees the node drained by a real cluster."""
    r = doctor(tmp_path, HOSTILE_GRES, "--slurm-health")
    assert "internal error" not in r.stderr, r.stderr
    assert r.stdout == ""
    assert "fail  gpu-map-gres" in r.stderr and "cannot be parsed" in r.stderr, r.stderr
    assert "could not drain node n1: scontrol: command not found" in r.stderr, r.stderr
    assert r.returncode == 3
