"""The refusals, limits and folder hygiene of Gate-0 refinalize that operators rely on.

Each test pins a behaviour the mutation run (`make mutation`) showed unguarded: the rule id
and exit code of each refusal, the wording that carries information (the file named, the
counts, the byte limit), the size limits at and one byte past them, the stale temporary
addendum folders removed (and only those), and the fixed modes restored after a write."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import socket
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness.base import faultpoint
from harness.base.catalogue import (
    GATE0_MISSING,
    GATE0_SOURCE,
    GATE0_UNREADABLE,
    REFINALIZE_NOT_INTACT,
    REFINALIZE_UNSEALED,
)
from harness.base.errors import EnvironmentFault, InvalidInput, Refused
from harness.config.fieldlist import contract_faults
from harness.config.yamlsafe import Fault
from harness.instrument.harness_observer.encode import DecodeError, loads
from harness.judge.finalize import addendum
from harness.judge.finalize import observed as observed_module
from harness.judge.finalize.contract import ContractError, _loader_faults, load_contract_text
from harness.judge.finalize.documents import DocumentError, read_document
from harness.judge.finalize.observed import SealedReader, judge_run
from harness.judge.finalize.refinalize import refinalize, require_intact
from harness.measure.runfolder import runjson as run_record
from harness.measure.runfolder.manifest import write_manifest
from tests.observations import companions, engine_core
from tests.verdicts import texts

NOW = datetime(2026, 11, 30, 8, 30, tzinfo=UTC)
SOURCE = {"seal": "sha256:s", "engine": "vllm@x", "image": "sha256:i"}


def observation(phase: str, ops: list[str]) -> dict:
    return {"schema": "harness.observation/v1", "phase": phase,
            "process": {"role": "EngineCore", "rank": 0, "pid": 659},
            "source": SOURCE, "complete": True,
            "fields": {"model.x": 1, "compilation.custom_ops": ops}}


RECORD = {"schema": "harness.run/v1", "run_id": "r1", "status": "accepted",
          "seal": "sha256:s", "image": {"name": "img", "id": "sha256:i"}}
DEFAULT = object()


def make_run(tmp_path: Path, *, startup=DEFAULT, generation=DEFAULT, record=DEFAULT,
             extra: dict[str, bytes] | None = None, seal: bool = True) -> Path:
    """A run folder (realpath, as refinalize sees it); None leaves a file out."""
    run = Path(os.path.realpath(tmp_path)) / "runs" / "r1"
    run.mkdir(parents=True)
    startup = engine_core(observation("startup", ["a"]) if startup is DEFAULT else startup)
    generation = engine_core(observation("generation", ["a"]) if generation is DEFAULT
                             else generation)
    files = {
        "observations/startup.json": startup,
        "observations/generation.json": generation,
        **{f"observations/{name}": doc
           for name, doc in companions(startup, generation).items()},
        "run.json": RECORD if record is DEFAULT else record,
        **(extra or {}),
    }
    for rel, content in files.items():
        if content is None:
            continue
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        data = content if isinstance(content, bytes) else json.dumps(content).encode()
        (run / rel).write_bytes(data)
    if seal:
        write_manifest(run)
        for p in sorted(run.rglob("*"), reverse=True):
            p.chmod(0o555 if p.is_dir() else 0o444)
        run.chmod(0o555)
    return run


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# --- require_intact: the two refusals and their wording ------------------------------------

def test_an_unsealed_folder_is_refused_by_its_rule_and_nothing_is_written(tmp_path):
    run = make_run(tmp_path, seal=False)
    with pytest.raises(Refused) as e:
        refinalize(run, NOW)
    assert e.value.rule == REFINALIZE_UNSEALED == "REFINALIZE-UNSEALED"
    assert e.value.code == 1
    assert e.value.message == (f"{run} was never sealed (no SHA256SUMS); refinalize judges "
                               "only sealed runs")
    assert not (run / "addenda").exists()


@pytest.mark.parametrize("extras", [1, 10, 11, 13])
def test_a_folder_failing_verify_names_ten_problems_then_counts_the_rest(tmp_path, extras):
    run = make_run(tmp_path)
    for i in range(extras):
        (run / f"x{i:02d}").write_text("planted")
    with pytest.raises(Refused) as e:
        refinalize(run, NOW)
    assert e.value.rule == REFINALIZE_NOT_INTACT == "REFINALIZE-NOT-INTACT"
    assert e.value.code == 1
    shown = "; ".join(f"x{i:02d}: extra" for i in range(min(extras, 10)))
    more = f"; and {extras - 10} more" if extras > 10 else ""
    assert e.value.message == (
        f"{run} fails verification ({extras} problem(s): {shown}{more}); refinalize judges "
        "only intact runs, nothing was written")
    assert not (run / "addenda").exists()
    with pytest.raises(Refused) as again:
        require_intact(run)
    assert again.value.message == e.value.message


# --- SealedReader: the manifest, the limits, the bytes -------------------------------------

def test_the_sealed_reader_refuses_a_missing_manifest_as_not_intact(tmp_path):
    run = make_run(tmp_path, seal=False)
    with pytest.raises(Refused) as e:
        SealedReader(run)
    assert e.value.rule == REFINALIZE_NOT_INTACT and e.value.code == 1
    assert e.value.message == (f"{run}/SHA256SUMS: cannot read the manifest: "
                               "No such file or directory")


def test_the_sealed_reader_names_the_first_bad_manifest_line(tmp_path):
    run = make_run(tmp_path, seal=False)
    good = hashlib.sha256((run / "run.json").read_bytes()).hexdigest()
    (run / "SHA256SUMS").write_text(f"{good}  run.json\ngarbage\n{'0' * 64}  ../x\n")
    with pytest.raises(Refused) as e:
        SealedReader(run)
    assert e.value.rule == REFINALIZE_NOT_INTACT and e.value.code == 1
    assert e.value.message == (f"{run}/SHA256SUMS: line 2: not a `<64 lowercase hex>  <name>`"
                               " line")


def blob_run(tmp_path: Path) -> Path:
    return make_run(tmp_path, extra={"ten": b"0123456789", "twelve": b"0123456789ab",
                                     "empty": b"", "bad-utf8": b'"a\xffb"'})


def test_a_file_exactly_at_the_limit_is_read_and_one_byte_over_is_refused(tmp_path):
    run = blob_run(tmp_path)
    reader = SealedReader(run)
    assert reader.read("ten", 10) == b"0123456789"
    assert reader.read("empty", 0) == b""
    with pytest.raises(DocumentError) as e:
        reader.read("ten", 9)
    assert e.value.faults == [f"{run}/ten: over the 9 byte limit"]


def test_the_sealed_reader_reads_the_whole_file_through_short_reads(tmp_path, monkeypatch):
    run = blob_run(tmp_path)
    reader = SealedReader(run)
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: real_read(fd, min(n, 4)))
    assert reader.read("twelve", 12) == b"0123456789ab"
    assert reader.read("ten", 10) == b"0123456789"


@pytest.mark.parametrize("chunk", [4, 1 << 20])
def test_a_file_that_grows_past_the_limit_is_refused_reading_one_byte_past_it(
        tmp_path, monkeypatch, chunk):
    """fstat said it fit (it grew after): the reader still stops one byte past the limit."""
    run = make_run(tmp_path, extra={"grows": b"x" * 40})
    reader = SealedReader(run)
    real_read, real_fstat = os.read, os.fstat
    got = []

    def short_read(fd, n):
        data = real_read(fd, min(n, chunk))
        got.append(len(data))
        return data

    def small_fstat(fd):
        fields = list(real_fstat(fd))
        fields[6] = 0  # st_size: it was empty when looked at
        return os.stat_result(fields)

    monkeypatch.setattr(os, "read", short_read)
    monkeypatch.setattr(os, "fstat", small_fstat)
    with pytest.raises(DocumentError) as e:
        reader.read("grows", 12)
    monkeypatch.undo()
    assert e.value.faults == [f"{run}/grows: over the 12 byte limit"]
    assert sum(got) == 13


def test_an_unreadable_or_swapped_file_is_refused_naming_it(tmp_path):
    run = blob_run(tmp_path)
    reader = SealedReader(run)
    with pytest.raises(Refused) as e:
        reader.read("observations/nope.json")
    assert e.value.rule == REFINALIZE_NOT_INTACT and e.value.code == 1
    assert e.value.message == (f"{run}/observations/nope.json: cannot read: "
                               "No such file or directory")
    (run / "ten").chmod(0o644)
    (run / "ten").write_bytes(b"9876543210")
    with pytest.raises(Refused) as e:
        reader.read("ten")
    assert e.value.rule == REFINALIZE_NOT_INTACT
    assert e.value.message == f"{run}/ten is not the file its seal vouches for"


def test_sealed_text_shows_bytes_that_are_not_utf8_as_replacement_characters(tmp_path):
    reader = SealedReader(blob_run(tmp_path))
    assert reader.text("bad-utf8") == '"a\ufffdb"'


def test_the_sealed_run_record_is_bound_by_the_record_limit(tmp_path, monkeypatch):
    run = make_run(tmp_path)
    size = (run / "run.json").stat().st_size
    reader = SealedReader(run)
    monkeypatch.setattr(run_record, "RECORD_LIMIT", size)
    assert reader.record().run_id == "r1"
    monkeypatch.setattr(run_record, "RECORD_LIMIT", size - 1)
    assert reader.record() is None


# --- judge_run over the sealed reader --------------------------------------------------------

def test_sealed_judging_names_every_missing_document(tmp_path):
    run = make_run(tmp_path, startup=None, generation=None)
    verdict = judge_run(run, ["model.x"], sealed=SealedReader(run))
    assert verdict["verdict"] == "refused"
    assert texts(verdict["reasons"]) == [
        f"{GATE0_MISSING}: observations/startup.json was not written",
        f"{GATE0_MISSING}: observations/generation.json was not written"]


def test_sealed_judging_keeps_every_reason_and_names_the_unreadable_file(tmp_path):
    run = make_run(tmp_path, startup=None, generation=b"{")
    verdict = judge_run(run, sealed=SealedReader(run))
    assert verdict["refused_by"] == sorted([GATE0_MISSING, GATE0_UNREADABLE])
    found = texts(verdict["reasons"])
    assert found[0] == f"{GATE0_MISSING}: observations/startup.json was not written"
    assert len(found) == 2
    assert found[1].startswith(
        f"{GATE0_UNREADABLE}: {run}/observations/generation.json: not JSON: ")


def test_sealed_judging_binds_to_the_sealed_run_record(tmp_path):
    run = make_run(tmp_path, record={**RECORD, "seal": "sha256:other"})
    verdict = judge_run(run, sealed=SealedReader(run))
    assert verdict["refused_by"] == [GATE0_SOURCE]
    unbound = make_run(tmp_path / "b", record=None)
    assert judge_run(unbound, sealed=SealedReader(unbound))["verdict"] == "accepted"


def test_a_run_record_swapped_after_verify_is_refused_not_judged(tmp_path):
    run = make_run(tmp_path)
    reader = SealedReader(run)
    (run / "run.json").chmod(0o644)
    (run / "run.json").write_text(json.dumps({**RECORD, "seal": "sha256:other"}))
    with pytest.raises(Refused) as e:
        judge_run(run, sealed=reader)
    assert e.value.rule == REFINALIZE_NOT_INTACT


def test_refinalize_of_a_sealed_folder_without_a_readable_record_is_invalid_input(tmp_path):
    run = make_run(tmp_path, record=b"{not json")
    with pytest.raises(InvalidInput) as e:
        refinalize(run, NOW)
    assert e.value.code == 2
    assert e.value.message == f"{run} is not a run folder with a readable run.json"


def test_refinalize_reads_observations_only_through_the_seal(tmp_path, monkeypatch):
    run = make_run(tmp_path)

    def by_path(path):
        raise AssertionError(f"{path} read by path, not as the sealed bytes")

    monkeypatch.setattr(observed_module, "read_document", by_path)
    record, _ = refinalize(run, NOW, "all")
    assert record["verdict"] == "accepted"


# --- the addendum write: temporary folders and modes ----------------------------------------

STALE = ".r1.addendum-0123456789abcdef"
NOT_STALE = [".r1.addendum-0123456789ABCDEF", ".r1.addendum-0123456789abcdef0",
             ".r1.addendum-0123456789abcde", ".r2.addendum-0123456789abcdef",
             "r1.addendum-0123456789abcdef", ".r1.addendum-XX0123456789abcdefXX"]


def test_stale_temporary_addenda_are_removed_and_nothing_else(tmp_path):
    run = make_run(tmp_path)
    parent = run.parent
    (parent / STALE / "20261130T000000Z-refinalize").mkdir(parents=True, mode=0o700)
    (parent / STALE / "20261130T000000Z-refinalize" / "verdict.json").write_text("{}")
    for name in NOT_STALE:
        (parent / name).mkdir()
    refinalize(run, NOW)
    assert sorted(os.listdir(parent)) == sorted(["r1", *NOT_STALE])


def test_the_addendum_is_sealed_in_a_private_temporary_folder_before_the_rename(
        tmp_path, monkeypatch):
    """What a refinalize killed at `addendum-sealed` leaves: one temporary folder, private
    (0700), that the next refinalize recognises as stale."""
    run = make_run(tmp_path)
    seen = []

    def reach(name):
        temps = [n for n in os.listdir(run.parent) if n.startswith(".r1.addendum-")]
        inner = [run.parent / t / "20261130T083000Z-refinalize" for t in temps]
        seen.append((name, temps, [mode(run.parent / t) for t in temps],
                     [mode(i) for i in inner], [sorted(os.listdir(i)) for i in inner]))

    monkeypatch.setattr(faultpoint, "reach", reach)
    refinalize(run, NOW)
    assert len(seen) == 1
    name, temps, temp_modes, inner_modes, listing = seen[0]
    assert name == "addendum-sealed"
    assert len(temps) == 1 and addendum._temp_pattern(run).fullmatch(temps[0])
    assert temp_modes == [0o700] and inner_modes == [0o700]
    assert listing == [["SHA256SUMS", "verdict.json"]]
    assert not [n for n in os.listdir(run.parent) if n.startswith(".r1.addendum-")]


def test_the_faultpoint_is_reached_by_its_name(tmp_path, monkeypatch):
    run = make_run(tmp_path)
    marker = tmp_path / "marker"
    monkeypatch.setenv(faultpoint.ENV, "addendum-sealed:0")
    monkeypatch.setenv(faultpoint.MARKER, str(marker))
    refinalize(run, NOW)
    assert marker.read_text() == f"{os.getpid()} addendum-sealed\n"


def renames(monkeypatch, run: Path, fail: bool = False) -> list[tuple[int, int | None]]:
    """Record (run mode, addenda mode) at each rename of the addendum into place."""
    real = os.rename
    seen = []

    def rename(src, dst, **kw):
        if kw:  # remove_beneath's staging renames
            return real(src, dst, **kw)
        addenda = run / "addenda"
        seen.append((mode(run), mode(addenda) if os.path.lexists(addenda) else None))
        if fail:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    return seen


def test_the_write_bit_is_lent_only_for_the_rename_and_the_sealed_modes_come_back(
        tmp_path, monkeypatch):
    run = make_run(tmp_path)
    seen = renames(monkeypatch, run)
    _, first = refinalize(run, NOW)
    assert seen == [(0o755, None)]  # the first addendum: `addenda/` appears in the run
    assert mode(run) == 0o555 and mode(run / "addenda") == 0o555 and mode(first) == 0o555
    _, second = refinalize(run, NOW)
    assert seen[1] == (0o555, 0o755)  # later ones: only `addenda/` is opened
    assert second.name == "20261130T083000Z-refinalize-1"
    assert mode(run) == 0o555 and mode(run / "addenda") == 0o555 and mode(second) == 0o555
    for f in (*first.iterdir(), *second.iterdir()):
        assert mode(f) == 0o444


def test_a_failed_rename_is_an_environment_fault_and_leaves_the_run_sealed(
        tmp_path, monkeypatch):
    run = make_run(tmp_path)
    renames(monkeypatch, run, fail=True)
    with pytest.raises(EnvironmentFault) as e:
        refinalize(run, NOW)
    assert e.value.code == 3
    assert e.value.message == (f"cannot write the addendum under {run}/addenda: "
                               "[Errno 18] Invalid cross-device link")
    monkeypatch.undo()
    assert mode(run) == 0o555
    assert not (run / "addenda").exists()
    assert sorted(os.listdir(run.parent)) == ["r1"]


# --- observation documents, contracts, the strict decoder ----------------------------------

def test_read_document_says_what_could_not_be_read_once(tmp_path, monkeypatch):
    folder = tmp_path / "d.json"
    folder.mkdir()
    with pytest.raises(DocumentError) as e:
        read_document(folder)
    assert e.value.faults == [
        f"{folder}: cannot read: the observation is a folder, not a regular file"]
    monkeypatch.chdir(tmp_path)
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind("s.sock")
        with pytest.raises(DocumentError) as e:
            read_document(tmp_path / "s.sock")
    finally:
        sock.close()
    assert e.value.faults == [
        f"{tmp_path / 's.sock'}: cannot read the observation: No such device or address"]


def test_contract_syntax_faults_name_the_file_line_and_column():
    with pytest.raises(ContractError) as e:
        load_contract_text("[a, b")
    assert len(e.value.faults) == 1
    assert re.fullmatch(r"<contract>:\d+:\d+: not YAML or JSON: .+", e.value.faults[0])
    assert "YAML syntax" not in e.value.faults[0]
    fault = _loader_faults([Fault("c.yaml", 3, 7, "YAML syntax: x, YAML syntax: y")])
    assert fault.faults == ["c.yaml:3:7: not YAML or JSON: x, YAML syntax: y"]


def test_a_bad_contract_entry_is_shown_cut_at_200_characters():
    [(where, message)] = contract_faults(["ok", 10 ** 300])
    assert where == (1,)
    assert len(message) == 200
    assert message.startswith("entry 1 is not a non-empty string: 1000")


def test_a_lone_surrogate_is_refused_with_its_reason():
    with pytest.raises(DecodeError) as e:
        loads('{"a": "\\ud800"}')
    assert str(e.value) == ("not JSON this harness reads: a string is not valid Unicode "
                            "(a lone surrogate escape such as \\ud800)")
