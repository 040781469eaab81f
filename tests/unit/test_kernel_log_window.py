"""The kernel-log window can be trusted (harness/measure/kmsg.py, harness/judge/kernellog.py):
a fault is matched only on the driver's and the kernel's own message shapes, so a process's
name or arguments quoted in a kernel line can never forge one; and a window the log lost
part of (a file rotated, copy-truncated or rewritten, a ring buffer that overwrote records)
is a gap, which refuses a control requiring the kernel log, while a fault however far into
the window is still found.

Real lines come from tests/fixtures/kernellog/ (each file names where its lines were
posted); the forged ones are real kernel message formats with a process's text put where
the kernel puts it (its name in a segfault, an OOM kill, an audit record, amdgpu's own
"Process x pid n"). /dev/kmsg is stood in for by a file of real record syntax."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from harness.base import catalogue
from harness.judge import kernellog
from harness.judge.kernellog import Tally, fault, refusals
from harness.measure import kmsg
from harness.measure.kmsg import Record, record

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernellog"
RESET = "[  312.774536] amdgpu 0000:28:00.0: GPU reset begin!. Source:  1"  # gfx-ring-timeout
TIMEOUT = ("[  312.522692] amdgpu 0000:28:00.0: ring gfx_0.0.0 timeout, signaled seq=57638, "
           "emitted seq=57641")


def parsed(line: str) -> Record:
    return record(line) or Record(0, line)


def fixture_lines(name: str) -> list[str]:
    return [x for x in (FIXTURES / name).read_text().splitlines() if x and x[0] != "#"]


# Every fault line kept as a fixture, and the rule it must earn.
REAL = [
    (name, line, rule)
    for name, needles in [
        ("amdgpu-gfx-ring-timeout.dmesg", {
            "ring gfx_0.0.0 timeout": catalogue.KERNEL_LOG_RING_TIMEOUT,
            "GPU reset begin!": catalogue.KERNEL_LOG_GPU_RESET,
            "BACO reset": catalogue.KERNEL_LOG_GPU_RESET,
            "VRAM is lost": catalogue.KERNEL_LOG_GPU_RESET}),
        ("amdgpu-sdma-timeout-older-kernel.dmesg", {
            "ring sdma0 timeout": catalogue.KERNEL_LOG_RING_TIMEOUT,
            "GPU reset begin!": catalogue.KERNEL_LOG_GPU_RESET,
            "MODE2 reset": catalogue.KERNEL_LOG_GPU_RESET}),
        ("amdgpu-compute-ring-recovered.dmesg", {
            "ring comp_1.1.0 timeout": catalogue.KERNEL_LOG_RING_TIMEOUT,
            "device wedged": catalogue.KERNEL_LOG_GPU_RESET}),
        ("amdgpu-syslog-forms.log", {
            "ring sdma0 timeout": catalogue.KERNEL_LOG_RING_TIMEOUT,
            "GPU reset begin!": catalogue.KERNEL_LOG_GPU_RESET,
            "MODE2 reset": catalogue.KERNEL_LOG_GPU_RESET,
            "VRAM is lost": catalogue.KERNEL_LOG_GPU_RESET}),
        ("mce.dmesg", {"[Hardware Error]": catalogue.KERNEL_LOG_MCE}),
        ("aer.dmesg", {"PCIe Bus Error": catalogue.KERNEL_LOG_AER,
                       "error received": catalogue.KERNEL_LOG_AER}),
    ]
    for line in fixture_lines(name)
    for needle, rule in needles.items() if needle in line
]


@pytest.mark.parametrize(("name", "line", "rule"), REAL, ids=[f"{n}:{i}" for i, (n, _, _)
                                                              in enumerate(REAL)])
def test_each_real_fault_line_matches_its_rule(name: str, line: str, rule: str) -> None:
    assert fault(parsed(line)) == rule


def test_the_real_table_holds_every_fault_kind() -> None:
    assert {rule for _, _, rule in REAL} == {
        catalogue.KERNEL_LOG_RING_TIMEOUT, catalogue.KERNEL_LOG_GPU_RESET,
        catalogue.KERNEL_LOG_MCE, catalogue.KERNEL_LOG_AER}
    assert len(REAL) >= 20


OOM = ("{} out of memory: Killed process 77 ({}) total-vm:538000kB, anon-rss:48236kB, "
       "file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:156kB oom_score_adj:0")
FORGED = [
    # a process named like a fault: the kernel prints its name (comm, 15 characters)
    "traps: GPU reset begin[1234] general protection fault ip:7f3a sp:7ffd error:0 in "
    "libc.so.6[7f3a+16e000]",
    "GPU reset begin[1234]: segfault at 0 ip 0000000000401000 sp 00007ffd0000 error 4 in "
    "a.out[401000+1000]",
    "ring gfx timeou[77]: segfault at 0 ip 0000000000401000 sp 00007ffd0000 error 4",
    "[drm] GPU reset[77]: segfault at 0 ip 0000000000401000 sp 00007ffd0000 error 4",
    "mce: [Hardware[77]: segfault at 0 ip 0000000000401000 sp 00007ffd0000 error 4",
    OOM.format("Out of memory:", "MODE1 reset").replace("out of memory: ", ""),
    OOM.format("Memory cgroup", "BACO reset"),
    OOM.format("Memory cgroup", "device wedged"),
    'audit: type=1701 audit(1700000000.123:42): auid=1000 uid=1000 gid=1000 ses=3 pid=77 '
    'comm="ring gfx timeout" exe="/usr/bin/python3.11" sig=11 res=1',
    'audit: type=1701 audit(1700000000.123:43): pid=77 comm="mce: [Hardware Error]: x" sig=11',
    # amdgpu's own lines quote the process that submitted the job: never a fault themselves
    "amdgpu 0000:28:00.0:  Process GPU reset begin! pid 2288 thread GPU reset begi:cs0 pid 2316",
    "amdgpu 0000:03:00.0: amdgpu:  Process ring comp timeout pid 4087 thread x:cs0 pid 4213",
    "[drm:amdgpu_job_timedout [amdgpu]] *ERROR* Process information: process ring gfx "
    "timeout pid 77 thread ring:cs0 pid 78",
    "amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:3 pasid:32769, "
    "for process MODE1 reset pid 77 thread MODE1 reset pid 77)",
    # the shape anywhere but at the start of the kernel's text
    "harness test suite: amdgpu 0000:03:00.0: amdgpu: GPU reset begin! (not a real fault)",
    "x amdgpu 0000:28:00.0: ring gfx_0.0.0 timeout, signaled seq=1, emitted seq=2",
    "pcieport 0000:00:1c.0: AER: enabled with IRQ 122",
    "amdgpu: MES might be in unrecoverable state, issue a GPU reset",
    # a line its source marks as a process's: /dev/kmsg records of the user facility ...
    "12,340,978724431,-;amdgpu 0000:28:00.0: GPU reset begin!. Source:  1",
    "14,341,978724432,-;amdgpu 0000:28:00.0: ring gfx_0.0.0 timeout, signaled seq=1, "
    "emitted seq=2",
    "12,342,978724433,-;mce: [Hardware Error]: Machine check events logged",
    # ... and syslog lines tagged with a process's name, not `kernel`
    "Oct  7 12:58:23 Ubuntu-Desktop logger[77]: amdgpu 0000:0a:00.0: amdgpu: GPU reset begin!",
    "Oct 07 15:47:47 sanori-laptop myapp: kernel: amdgpu 0000:03:00.0: amdgpu: MODE2 reset",
    "2026-12-02T09:00:01.123456+00:00 node1 python3[77]: [drm] VRAM is lost due to GPU reset!",
]


@pytest.mark.parametrize("line", FORGED)
def test_a_forged_fault_never_matches(line: str) -> None:
    assert fault(parsed(line)) is None
    assert kernellog.findings([parsed(line)]) == []


def test_the_kernels_own_facility_and_tag_still_match() -> None:
    """The same text, where the source says the kernel wrote it, is a fault."""
    assert fault(parsed("4,340,978724431,-;amdgpu 0000:28:00.0: GPU reset begin!. Source:  1"))
    assert fault(parsed("2026-12-02T09:00:01.123456+00:00 node1 kernel: [drm] VRAM is lost "
                        "due to GPU reset!")) == catalogue.KERNEL_LOG_GPU_RESET
    [user] = [parsed(x) for x in fixture_lines("user-write.kmsg")][1:2]
    assert not user.kernel and parsed(fixture_lines("user-write.kmsg")[0]).kernel


# -- a file's window: rotations, truncations, floods -------------------------------------

def _append(path: Path, text: str) -> None:
    with path.open("a") as f:
        f.write(text)


def _rename_rotate(log: Path) -> None:
    os.rename(log, log.with_name(log.name + ".1"))


def _rotate_then(size: int):
    def rotate(log: Path) -> None:
        _rename_rotate(log)
        log.write_text("[ 400.000000] quiet after the rotation\n" * size)
    return rotate


def _copytruncate(log: Path) -> None:
    log.with_name(log.name + ".1").write_bytes(log.read_bytes())
    with log.open("r+") as f:
        f.truncate(0)


def _copytruncate_then_grow(log: Path) -> None:
    _copytruncate(log)
    _append(log, TIMEOUT + "\n" + "[ 400.000000] quiet after the truncation\n" * 200)


def _rotated_away(log: Path) -> None:
    os.rename(log, log.with_name(log.name + ".2"))
    log.write_text("[ 400.000000] a new file\n")


BEFORE = "[ 100.000000] an old line before the mark\n" * 50  # 2,200 bytes at the mark


# (what happens to the file inside the window, where the fault is written, gap expected)
FILE_CASES = [
    ("appended", None, "after", False),
    ("renamed, new file bigger than the mark", _rotate_then(200), "rotated", False),
    ("renamed, new file smaller than the mark", _rotate_then(1), "rotated", False),
    ("renamed, fault in the new file", _rotate_then(1), "after", False),
    ("renamed, not recreated yet", _rename_rotate, "rotated", False),
    ("copy-truncated, smaller", _copytruncate, "after", True),
    ("copy-truncated, grown past the mark", _copytruncate_then_grow, "after", True),
    ("renamed out of reach", _rotated_away, "after", True),
]


@pytest.mark.parametrize(("case", "change", "where", "gap"), FILE_CASES,
                         ids=[c[0] for c in FILE_CASES])
@pytest.mark.parametrize("required", [True, False])
def test_a_file_changed_in_the_window_loses_no_fault_silently(
        tmp_path: Path, case: str, change, where: str, gap: bool, required: bool) -> None:
    log = tmp_path / "kern.log"
    log.write_text(BEFORE)
    start = kmsg.mark({kmsg.ENV: str(log)})
    assert start.inode == log.stat().st_ino and start.device == log.stat().st_dev
    if where == "rotated":
        _append(log, RESET + "\n")  # after the mark, then the file is rotated
    if change is not None:
        change(log)
    if where == "after":
        _append(log, RESET + "\n")
    tally = Tally()
    window = kmsg.read(start, each=tally.add)
    rules = [r.rule for r in refusals(tally.findings(), window.gaps, required=required)]
    assert catalogue.KERNEL_LOG_GPU_RESET in rules
    assert bool(window.gaps) is gap
    assert (catalogue.KERNEL_LOG_GAP in rules) is (gap and required)
    assert not any("an old line before the mark" in x for x in window.lines) or gap


@pytest.mark.parametrize("required", [True, False])
def test_a_rotation_that_lost_the_fault_is_a_gap(tmp_path: Path, required: bool) -> None:
    """The fault went into the marked file, which was then rotated out of reach: nothing
    read shows it, and only the gap can say so."""
    log = tmp_path / "kern.log"
    log.write_text(BEFORE)
    start = kmsg.mark({kmsg.ENV: str(log)})
    _append(log, RESET + "\n")
    _rotated_away(log)
    tally = Tally()
    window = kmsg.read(start, each=tally.add)
    assert tally.findings() == [] and len(window.gaps) == 1
    assert str(start.inode) in window.gaps[0].why
    reasons = refusals(tally.findings(), window.gaps, required=required)
    assert [r.rule for r in reasons] == ([catalogue.KERNEL_LOG_GAP] if required else [])


def test_a_fault_after_five_mib_of_other_lines_is_found_and_kept(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text(BEFORE)
    start = kmsg.mark({kmsg.ENV: str(log)})
    filler = "[ 200.000000] " + "a quiet kernel line " * 5 + "\n"
    with log.open("a") as f:
        for _ in range(5 * 1024 * 1024 // len(filler) + 1):
            f.write(filler)
        f.write(RESET + "\n")
    tally = Tally()
    window = kmsg.read(start, each=tally.add)
    assert [f.rule for f in tally.findings()] == [catalogue.KERNEL_LOG_GPU_RESET]
    assert window.truncated and window.gaps == ()
    assert sum(len(x.encode()) + 1 for x in window.lines) <= kmsg.MAX_BYTES
    assert window.lines[-1] == RESET  # kept past the first lines: the report shows it


def test_an_endless_line_is_read_in_bounded_pieces(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text(BEFORE)
    start = kmsg.mark({kmsg.ENV: str(log)})
    _append(log, "[ 300.000000] " + "z" * (3 * 1024 * 1024) + "\n" + RESET + "\n")
    window = kmsg.read(start, each=Tally().add)
    assert [len(x) <= kmsg.MAX_LINE for x in window.lines] == [True, True]
    assert window.lines[1] == RESET


def test_a_mark_inside_a_line_leaves_that_line_out(tmp_path: Path) -> None:
    """The rest of a line begun before the mark is no line of the window: its tail must
    not be read as a line's start."""
    log = tmp_path / "kern.log"
    log.write_text(BEFORE + "[ 101.000000] traps: x[1] general protection fault: ")
    start = kmsg.mark({kmsg.ENV: str(log)})
    _append(log, "amdgpu 0000:28:00.0: GPU reset begin!\n[ 102.000000] quiet\n")
    window = kmsg.read(start)
    assert window.lines == ("[ 102.000000] quiet",)


def test_the_mark_is_recorded_by_identity(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text(BEFORE)
    st = log.stat()
    assert kmsg.mark({kmsg.ENV: str(log)}).recorded() == {
        "device": st.st_dev, "inode": st.st_ino, "offset": st.st_size,
        "tail_sha256": kmsg.hashlib.sha256(BEFORE.encode()).hexdigest()}


# -- /dev/kmsg: sequence numbers -----------------------------------------------------------

CLEAN = fixture_lines("clean-host.kmsg")  # real records, seq 53..92 and 601..615
REAL_RESET = "4,{},{},-;amdgpu 0000:28:00.0: GPU reset begin!. Source:  1"


@pytest.fixture
def ring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A file of /dev/kmsg records standing in for the ring buffer."""
    path = tmp_path / "kmsg"
    monkeypatch.setattr(kmsg, "KMSG", str(path))
    return path


def _write(path: Path, lines: list[str]) -> None:
    path.write_text("".join(x + "\n" for x in lines))


# (the ring at the read, given the mark at seq 92; the gap expected)
KMSG_CASES = [
    ("every record after the mark", [*CLEAN[:40], REAL_RESET.format(93, 255500)], False),
    ("a number skipped inside the window",
     [*CLEAN[:40], "6,93,255497,-;quiet", REAL_RESET.format(95, 255500)], True),
    ("the mark's successors overwritten", [REAL_RESET.format(96, 255500)], True),
    ("the whole ring overwritten past the mark", [*CLEAN[40:], REAL_RESET.format(616, 5714778900)],
     True),
]


@pytest.mark.parametrize(("case", "after", "gap"), KMSG_CASES, ids=[c[0] for c in KMSG_CASES])
def test_a_kmsg_window_with_a_number_missing_is_a_gap(ring: Path, case: str, after: list[str],
                                                       gap: bool) -> None:
    _write(ring, CLEAN[:40])  # seq 53..92
    start = kmsg.mark({})
    assert (start.kind, start.seq, start.error) == ("kmsg", 92, None)
    _write(ring, after)
    tally = Tally()
    window = kmsg.read(start, each=tally.add)
    assert [f.rule for f in tally.findings()] == [catalogue.KERNEL_LOG_GPU_RESET]
    assert bool(window.gaps) is gap
    rules = [r.rule for r in refusals(tally.findings(), window.gaps, required=True)]
    assert (catalogue.KERNEL_LOG_GAP in rules) is gap


def test_a_record_written_from_user_space_is_kept_but_never_a_fault(ring: Path) -> None:
    _write(ring, CLEAN[:40])
    start = kmsg.mark({})
    forged = "12,93,255500,-;amdgpu 0000:28:00.0: GPU reset begin!. Source:  1"
    _write(ring, [*CLEAN[:40], forged, " SUBSYSTEM=pci"])
    tally = Tally()
    window = kmsg.read(start, each=tally.add)
    assert window.lines == (forged,) and window.gaps == () and tally.findings() == []


def test_an_overwrite_said_by_the_last_read_is_a_gap(ring: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """EPIPE: the kernel says the reader's next record was overwritten; with no record read
    after it, only the EPIPE says the window lost records."""
    _write(ring, CLEAN[:40])
    start = kmsg.mark({})
    real_read = os.read
    calls = {"n": 0}

    def read_then_overrun(fd: int, n: int) -> bytes:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(errno.EPIPE, "Broken pipe")
        return real_read(fd, n)

    monkeypatch.setattr(kmsg.os, "read", read_then_overrun)
    window = kmsg.read(start)
    assert [g.where for g in window.gaps] == [str(ring)] and "overwrote" in window.gaps[0].why


def test_kmsg_records_split_any_chunking_and_pass_overruns_on() -> None:
    chunks = [b"6,1,10,-;first\n SUBSYSTEM=pci\n6,2,2", None, b"0,-;second\n", b"junk\n"]
    events = list(kmsg.kmsg_records(chunks))
    assert events[1] is None
    assert [(line, r.seq) for line, r in [e for e in events if e is not None]] == [
        ("6,1,10,-;first", 1), ("6,2,20,-;second", 2)]


@pytest.mark.parametrize("required", [True, False])
def test_the_run_records_the_mark_and_the_gap(tmp_path: Path, required: bool) -> None:
    """run.json's block names the marked file and each gap; the gap refuses only a control
    that requires the kernel log (harness/pipeline/evidence/kernelwindow.py)."""
    from types import SimpleNamespace

    from harness.pipeline.evidence import kernelwindow
    from harness.pipeline.evidence.source import Gathered, Scene

    log = tmp_path / "kern.log"
    log.write_text(BEFORE)
    start = kmsg.mark({kmsg.ENV: str(log)})
    _rotated_away(log)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    ctx = SimpleNamespace(run_dir=run_dir,
                          control=SimpleNamespace(kernel_log=SimpleNamespace(required=required)))
    got = kernelwindow.window(Scene(ctx, {"kernel-mark": Gathered(held=start)}))
    block, reasons = got.doc, got.reasons
    assert block["mark"]["inode"] == start.inode and block["read"] == 1
    assert len(block["gaps"]) == 1 and "rotated out of reach" in block["gaps"][0]
    assert [r.rule for r in reasons] == ([catalogue.KERNEL_LOG_GAP] if required else [])
