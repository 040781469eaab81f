"""finalize/refinalize commands, contract files, the gate0 post-step, and addenda."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from harness.base.atomic import dumps_json
from harness.base.errors import EnvironmentFault, InvalidInput, Refused
from harness.base.timeutil import stamp
from harness.cli.finalize import finalize, refinalize
from harness.cli.main import cli, main
from harness.config.fieldlist import VLLM_IDENTITY
from harness.judge.finalize.addendum import write_addendum
from harness.judge.finalize.contract import ContractError, load_contract_text, parse_contract
from harness.judge.finalize.documents import DocumentError, read_document
from harness.judge.finalize.observed import expected_source, judge_run, read_run
from harness.judge.finalize.refinalize import (
    refinalize as refinalize_run,
)
from harness.judge.finalize.refinalize import standing
from harness.judge.poststeps import gate0
from harness.measure.runfolder.manifest import write_manifest
from tests.observations import engine_core, write_companions
from tests.verdicts import texts

MODE = {"$enum": "vllm.config.compilation.CompilationMode", "name": "VLLM_COMPILE", "value": 3}
REPO = Path(__file__).resolve().parents[2]


def observation(phase, ops, **over):
    doc = {"schema": "harness.observation/v1", "phase": phase,
           "process": {"role": "EngineCore", "rank": 0, "pid": 659},
           "source": {"seal": "sha256:s", "engine": "vllm@x", "image": "sha256:i"},
           "complete": True,
           "fields": {"compilation.mode": MODE, "compilation.custom_ops": ops, "model.x": 1}}
    doc.update(over)
    return doc


def write(path: Path, obj) -> Path:
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return path


def pair(tmp_path, gen_ops=("a",)):
    s = write(tmp_path / "s.json", observation("startup", ["a"]))
    g = write(tmp_path / "g.json", observation("generation", list(gen_ops)))
    return s, g


cli.add_command(finalize)
cli.add_command(refinalize)


@click.command()
@click.argument("args", nargs=-1)
def entry(args):
    main(list(args))


def invoke(args):
    """Run through the real top-level main, so exit codes and messages are the user's."""
    return CliRunner().invoke(entry, ["--", *args], catch_exceptions=False)


def test_finalize_accepts_and_refuses(tmp_path):
    s, g = pair(tmp_path)
    r = invoke(["finalize", "--startup", str(s), "--generation", str(g), "--all-fields"])
    assert r.exit_code == 0, r.output
    assert r.output == "gate0: accepted (3 fields compared)\n"
    s, g = pair(tmp_path, ("a", "a"))
    r = invoke(["finalize", "--startup", str(s), "--generation", str(g), "--json",
                "--all-fields"])
    assert r.exit_code == 1
    verdict = json.loads(r.output)
    assert verdict["verdict"] == "refused"
    assert verdict["differences"] == [{"field": "compilation.custom_ops", "kind": "value-changed",
                                       "startup": ["a"], "generation": ["a", "a"]}]
    assert r.output == dumps_json(verdict)


def test_finalize_with_contract_and_out(tmp_path):
    s, g = pair(tmp_path, ("a", "a"))
    contract = write(tmp_path / "c.yaml", "fields:\n  - compilation.mode\n  - model.x\n")
    out = tmp_path / "v.json"
    r = invoke(["finalize", "--startup", str(s), "--generation", str(g), "--contract",
                str(contract), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["contract"] == ["compilation.mode", "model.x"]
    r = invoke(["finalize", "--startup", str(s), "--generation", str(g), "--out", str(out)])
    assert r.exit_code == 2
    assert "exists; a verdict is never overwritten" in r.output
    r = invoke(["finalize", "--startup", str(s), "--generation", str(g), "--out",
                str(tmp_path / "no" / "v.json")])
    assert r.exit_code == 2 and "cannot write" in r.output


@pytest.mark.parametrize("garbage", ["", "{", "[]", "null", '{"phase": "startup"}',
                                     '{"a": NaN}', "\udcff"])
def test_finalize_garbage_exits_2_without_traceback(tmp_path, garbage):
    s, _ = pair(tmp_path)
    bad = tmp_path / "bad.json"
    if garbage == "\udcff":
        bad.write_bytes(b"\xff\xfe\x00")
    else:
        bad.write_text(garbage)
    r = invoke(["finalize", "--startup", str(s), "--generation", str(bad)])
    assert r.exit_code == 2
    assert "Traceback" not in r.output
    assert str(bad) in r.output


def test_finalize_missing_files_and_bad_contract(tmp_path):
    s, g = pair(tmp_path)
    r = invoke(["finalize", "--startup", str(tmp_path / "none.json"), "--generation", str(g)])
    assert r.exit_code == 2 and "no such file" in r.output
    for text in ("[]", "{a: [", "[1]", "{fields: [x], more: 1}", "[a, a]", "'x'"):
        contract = write(tmp_path / "c.yaml", text)
        r = invoke(["finalize", "--startup", str(s), "--generation", str(g), "--contract",
                    str(contract)])
        assert r.exit_code == 2, (text, r.output)
        assert "Traceback" not in r.output
    r = invoke(["finalize", "--startup", str(s), "--generation", str(g), "--contract",
                str(tmp_path / "absent.yaml")])
    assert r.exit_code == 2 and "cannot read the contract" in r.output
    r = invoke(["finalize", "--startup", str(s)])
    assert r.exit_code == 2


def test_finalize_command_object_directly(tmp_path):
    s, g = pair(tmp_path, ("b",))
    r = CliRunner().invoke(finalize, ["--startup", str(s), "--generation", str(g)])
    assert r.exit_code == 1
    assert "compilation.custom_ops: value-changed" in r.output


def test_contract_parsing():
    assert parse_contract(["a.b", "c"]) == ["a.b", "c"]
    assert parse_contract({"fields": ["x"]}) == ["x"]
    assert load_contract_text('["a", "b"]') == ["a", "b"]
    assert load_contract_text("- a\n- b\n") == ["a", "b"]
    with pytest.raises(ContractError) as e:
        parse_contract(["a", "", 3, "a", " ", ["unhashable"]])
    assert str(e.value).startswith("entry 1 is not a non-empty string: ''; entry 2 ")
    assert e.value.faults == ["entry 1 is not a non-empty string: ''",
                              "entry 2 is not a non-empty string: 3",
                              "entry 4 is not a non-empty string: ' '",
                              "entry 5 is not a non-empty string: ['unhashable']",
                              "field 'a' is listed twice"]
    for bad, fault in (([], "a contract is a non-empty list of dotted field names"),
                       ("a", "a contract is a non-empty list of dotted field names"),
                       ({"fields": ["a"], "x": 1},
                        "a contract object has exactly one key, 'fields'"),
                       ({}, "a contract object has exactly one key, 'fields'")):
        with pytest.raises(ContractError) as e:
            parse_contract(bad)
        assert e.value.faults == [fault]
    with pytest.raises(ContractError, match="not YAML or JSON"):
        load_contract_text("{a: [")
    with pytest.raises(ContractError):
        parse_contract([3, 3])


def test_read_document_faults(tmp_path):
    with pytest.raises(DocumentError) as e:
        read_document(tmp_path / "x.json")
    assert e.value.faults == [f"{tmp_path / 'x.json'}: no such file"]
    bad = write(tmp_path / "b.json", {"phase": 1})
    with pytest.raises(DocumentError) as e:
        read_document(bad)
    assert e.value.faults[0] == f"{bad}: phase must be a string"
    assert len(e.value.faults) == 5
    assert str(e.value).startswith(f"{bad}: phase must be a string; {bad}: process must")
    (tmp_path / "d").mkdir()
    with pytest.raises(DocumentError, match="cannot read"):
        read_document(tmp_path / "d")


# --- run folders: gate0 post-step and refinalize -------------------------------------------

def run_folder(tmp_path, gen_ops=("a",), status="refused", seal=True, gate0_verdict=None):
    run = tmp_path / "gpu-runs" / "r1"
    (run / "observations").mkdir(parents=True)
    startup = engine_core(observation("startup", ["a"]))
    generation = None if gen_ops is None else engine_core(observation("generation", list(gen_ops)))
    write(run / "observations" / "startup.json", startup)
    if generation is not None:
        write(run / "observations" / "generation.json", generation)
    write_companions(run / "observations", startup, generation)
    write(run / "run.json", {"schema": "harness.run/v1", "run_id": "r1", "status": status,
                             "seal": "sha256:s", "image": {"name": "img", "id": "sha256:i"}})
    if gate0_verdict is not None:
        (run / "post-steps" / "gate0").mkdir(parents=True)
        write(run / "post-steps" / "gate0" / "verdict.json", gate0_verdict)
    if seal:
        seal_run(run)
    return run


def seal_run(run):
    """Seal as the harness does: SHA256SUMS over every file, then read-only."""
    write_manifest(run)
    for p in sorted(run.rglob("*"), reverse=True):
        p.chmod(0o555 if p.is_dir() else 0o444)
    run.chmod(0o555)


def test_gate0_post_step(tmp_path):
    run = run_folder(tmp_path, ("a", "a"), seal=False)
    out = tmp_path / "out"
    out.mkdir()
    assert gate0.run(run, out, {"contract": "all"}) == 1
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["refused_by"] == ["GATE0-FIELD-DIFFERS"]
    assert verdict["contract"] is None  # every field, by choice
    out2 = tmp_path / "out2"
    out2.mkdir()
    assert gate0.run(run, out2, {"contract": ["model.x", "compilation.mode"]}) == 0
    assert json.loads((out2 / "verdict.json").read_text())["contract"] == ["model.x",
                                                                          "compilation.mode"]


def test_gate0_missing_and_bad_options(tmp_path, capsys):
    run = run_folder(tmp_path, None, seal=False)
    out = tmp_path / "o1"
    out.mkdir()
    assert gate0.run(run, out, {}) == 1
    verdict = json.loads((out / "verdict.json").read_text())
    assert texts(verdict["reasons"]) == [
        "GATE0-MISSING: observations/generation.json was not written"]
    assert verdict["refused_by"] == ["GATE0-MISSING"]
    assert verdict["compared"] == 0 and verdict["differences"] == []
    for options, reason in (([], "GATE0-OPTIONS: the options must be a JSON object"),
                            ({"contract": []}, "GATE0-OPTIONS: contract: a contract is a "
                                               "non-empty list of dotted field names")):
        o = tmp_path / f"o{len(str(options))}"
        o.mkdir()
        assert gate0.run(run, o, options) == 1
        assert texts(json.loads((o / "verdict.json").read_text())["reasons"]) == [reason]
    write(run / "observations" / "generation.json", "{nope")
    o = tmp_path / "o3"
    o.mkdir()
    assert gate0.run(run, o, {}) == 1
    verdict = json.loads((o / "verdict.json").read_text())
    assert verdict["refused_by"] == ["GATE0-UNREADABLE"]
    assert "GATE0-UNREADABLE" in capsys.readouterr().out


def test_gate0_through_the_post_step_runner(tmp_path):
    run = run_folder(tmp_path, ("a",), seal=False)
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "harness.judge.poststeps", "gate0",
                        str(run), str(out),
                        "--options", '{"contract": ["compilation.custom_ops"]}'],
                       cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "gate0: accepted (1 fields compared)" in r.stdout


def record_doc(**fields) -> dict:
    """A run.json of the record's shape (the one strict reader reads nothing less)."""
    from harness.measure.runfolder.runjson import RunRecord
    return {**RunRecord(run_id="r", status="accepted", campaign={"name": "c"},
                        control={"name": "k"}).as_dict(), **fields}


def test_judge_run_binds_to_the_runs_seal_and_image(tmp_path):
    run = run_folder(tmp_path, ("a",), seal=False)
    assert judge_run(run)["verdict"] == "accepted"
    write(run / "run.json", record_doc(seal="sha256:other", image={"id": "sha256:i"}))
    v = judge_run(run)
    assert v["refused_by"] == ["GATE0-SOURCE"]
    assert expected_source(None) == {}
    assert expected_source({"seal": 1, "image": {"id": 2}}) == {}
    assert expected_source({"seal": "a", "image": "b"}) == {"seal": "a"}
    assert expected_source({"image": {"id": "x"}}) == {"image": "x"}
    write(run / "run.json", "[1]")
    assert read_run(run) is None
    write(run / "run.json", "{")
    assert read_run(run) is None


def tree(path: Path) -> dict[str, tuple[int, bytes | None]]:
    return {str(p.relative_to(path)): (stat.S_IMODE(p.stat().st_mode),
                                       None if p.is_dir() else p.read_bytes())
            for p in sorted(path.rglob("*")) if "addenda" not in p.parts}


def test_sealed_folder_is_really_read_only():
    """Root ignores permission bits, so under root the writes are tried as `nobody`; a
    writable folder beside the run shows that only the run's own bits stop the write."""
    base = Path(tempfile.mkdtemp(prefix="harness-ro-"))
    try:
        base.chmod(0o755)
        run = run_folder(base)
        open_dir = base / "open"
        open_dir.mkdir()
        open_dir.chmod(0o777)

        def write_as_other(target: Path) -> subprocess.CompletedProcess:
            code = "import sys; open(sys.argv[1], 'w').write('x')"
            argv = [sys.executable, "-c", code, str(target)]
            if os.geteuid() == 0:
                argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
            return subprocess.run(argv, capture_output=True, text=True)

        assert write_as_other(open_dir / "x").returncode == 0, "the control write works"
        r = write_as_other(run / "x")
        assert r.returncode != 0 and "PermissionError" in r.stderr, r.stderr
        assert not (run / "x").exists()
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(base)], check=False)
        shutil.rmtree(base, ignore_errors=True)


def test_refinalize_writes_a_new_addendum_and_never_rewrites(tmp_path):
    run = run_folder(tmp_path, ("a", "a"), status="refused",
                     gate0_verdict={"verdict": "refused", "contract": ["model.x"]})
    before = tree(run)
    run_mode = stat.S_IMODE(run.stat().st_mode)
    now = datetime(2026, 11, 30, 8, 30, tzinfo=UTC)
    record, folder = refinalize_run(run, now)
    assert folder == run / "addenda" / "20261130T083000Z-refinalize"
    assert tree(run) == before
    assert stat.S_IMODE(run.stat().st_mode) == run_mode
    assert stat.S_IMODE((run / "addenda").stat().st_mode) == 0o555
    assert stat.S_IMODE(folder.stat().st_mode) == 0o555
    assert record["verdict"] == "accepted"  # judged by the original contract, model.x only
    assert record["contract"] == ["model.x"]
    assert record["refinalize"] == {
        "run_id": "r1", "time": "2026-11-30T08:30:00.000000Z", "original_status": "refused",
        "original_gate0": "refused",
        "note": "a new judgement beside the old; the run's recorded status stands"}
    assert standing(record) == 1  # a refused run stays refused
    data = (folder / "verdict.json").read_bytes()
    assert json.loads(data) == record
    assert (folder / "SHA256SUMS").read_text() == (
        f"{hashlib.sha256(data).hexdigest()}  verdict.json\n")
    assert sorted(p.name for p in folder.iterdir()) == ["SHA256SUMS", "verdict.json"]
    for p in folder.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o444
    record2, folder2 = refinalize_run(run, now, contract=["compilation.custom_ops"])
    assert folder2.name == "20261130T083000Z-refinalize-1"
    assert record2["verdict"] == "refused"
    assert stat.S_IMODE((run / "addenda").stat().st_mode) == 0o555


def test_refinalize_command(tmp_path):
    run = run_folder(tmp_path, ("a",), status="accepted")
    r = invoke(["refinalize", str(run), "--all-fields"])
    assert r.exit_code == 0, r.output
    assert "run status stands: accepted" in r.output
    assert "gate0: accepted (5 fields compared)" in r.output  # and the one-worker layout
    r = invoke(["refinalize", str(run), "--json", "--all-fields"])
    assert r.exit_code == 0
    assert json.loads(r.output)["addendum"].startswith(str(run / "addenda"))
    refused = run_folder(tmp_path / "b", ("a",), status="refused")
    r = CliRunner().invoke(refinalize, [str(refused)])
    assert r.exit_code == 1
    assert "run status stands: refused" in r.output
    r = invoke(["refinalize", str(tmp_path / "nowhere")])
    assert r.exit_code == 2 and "is not a run folder" in r.output
    contract = write(tmp_path / "c.json", '{"fields": ["compilation.custom_ops"]}')
    r = invoke(["refinalize", str(run), "--contract", str(contract), "--json"])
    assert json.loads(r.output)["contract"] == ["compilation.custom_ops"]


def test_standing_only_accepted_and_accepted_is_zero():
    for status, verdict, code in (("accepted", "accepted", 0), ("accepted", "refused", 1),
                                  ("refused", "accepted", 1), ("failed", "accepted", 1)):
        assert standing({"verdict": verdict, "refinalize": {"original_status": status}}) == code


def test_addendum_helpers(tmp_path):
    assert stamp(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "20260102T030405Z"
    d = tmp_path / "d"
    d.mkdir(mode=0o755)
    folder = write_addendum(d, "x", {"f": b"1"}, datetime(2026, 1, 1, tzinfo=UTC))
    assert folder.name == "20260101T000000Z-x"
    assert stat.S_IMODE((d / "addenda").stat().st_mode) == 0o555
    for n in range(1, 100):
        (d / "addenda").chmod(0o755)
        (d / "addenda" / f"20260101T000000Z-x-{n}").mkdir()
    with pytest.raises(EnvironmentFault, match="could not create a new addendum folder"):
        write_addendum(d, "x", {"f": b"1"}, datetime(2026, 1, 1, tzinfo=UTC))
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "addenda").write_text("a file, not a folder")
    with pytest.raises(EnvironmentFault, match="cannot write the addendum"):
        write_addendum(blocked, "x", {"f": b"1"}, datetime(2026, 1, 1, tzinfo=UTC))
    open_run = tmp_path / "open"
    open_run.mkdir()
    open_run.chmod(0o700)
    write_addendum(open_run, "y", {"f": b"1"}, datetime(2026, 1, 1, tzinfo=UTC))
    assert stat.S_IMODE((open_run / "addenda").stat().st_mode) == 0o555
    assert stat.S_IMODE(open_run.stat().st_mode) == 0o700


NOW = datetime(2026, 11, 30, 8, 30, tzinfo=UTC)


def test_invalid_input_is_the_error_type(tmp_path):
    with pytest.raises(InvalidInput, match=r"is not a run folder with a readable run\.json"):
        refinalize_run(Path("/nonexistent/run"), NOW)
    with pytest.raises(Refused, match="was never sealed"):
        refinalize_run(tmp_path, NOW)  # a folder, but never sealed


def test_stamps_are_utc_whatever_the_local_zone(tmp_path, monkeypatch):
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        tokyo = datetime(2026, 11, 30, 17, 30, tzinfo=timezone(timedelta(hours=9)))
        assert stamp(tokyo) == "20261130T083000Z"
        run = run_folder(tmp_path, ("a",), status="accepted")
        record, folder = refinalize_run(run, tokyo)
        assert folder.name == "20261130T083000Z-refinalize"
        assert record["refinalize"]["time"] == "2026-11-30T08:30:00.000000Z"
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_judge_run_refusals_name_every_missing_or_unreadable_document(tmp_path):
    run = run_folder(tmp_path, None, seal=False)
    (run / "observations" / "startup.json").unlink()
    assert judge_run(run, ["x"]) == {
        "schema": "harness.verdict/v2", "verdict": "refused", "compared": 0,
        "reasons": [{"rule": "GATE0-MISSING",
                     "detail": "observations/startup.json was not written"},
                    {"rule": "GATE0-MISSING",
                     "detail": "observations/generation.json was not written"}],
        "refused_by": ["GATE0-MISSING"], "differences": [], "contract": ["x"]}
    write(run / "observations" / "startup.json", "[]")
    write(run / "observations" / "generation.json", "{")
    v = judge_run(run)
    assert [r.split(":")[0] for r in texts(v["reasons"])] == ["GATE0-UNREADABLE"] * 2
    assert texts(v["reasons"])[1].endswith("generation.json: not JSON: Expecting property "
                                           "name enclosed in double quotes: line 1 column 2 "
                                           "(char 1)")


def test_pins_reach_the_judge_through_run_folders(tmp_path):
    run = run_folder(tmp_path, ("a",), status="accepted", seal=False)
    write(run / "observations" / "generation.json",
          observation("generation", ["a"], fields={"compilation.mode": 3,
                                                   "compilation.custom_ops": ["a"],
                                                   "model.x": 1}))
    no_pins = {"fields": {}, "enums": {}}
    assert judge_run(run)["differences"][0]["kind"] == "encoding-mismatch"
    assert judge_run(run, pins=no_pins)["differences"][0]["kind"] == "value-changed"
    seal_run(run)
    record, _ = refinalize_run(run, NOW, pins=no_pins)
    assert record["differences"][0]["kind"] == "value-changed"


def test_refinalize_ignores_a_malformed_original_verdict(tmp_path):
    run = run_folder(tmp_path, ("a",), status="accepted", gate0_verdict=[1])
    record, _ = refinalize_run(run, NOW)
    assert record["refinalize"]["original_gate0"] is None
    assert record["contract"] == list(VLLM_IDENTITY)  # no usable verdict: today's default


def test_too_deep_observation_is_an_invalid_document(tmp_path):
    from harness.judge.finalize.documents import DocumentError, read_document

    p = tmp_path / "deep.json"
    p.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(DocumentError) as e:
        read_document(p)
    assert e.value.faults == [f"{p}: not JSON this harness reads: nested too deeply"]


def test_values_too_deep_to_compare_are_an_invalid_document(tmp_path):
    """JSON that parses but whose values nest past what the reader can walk."""
    from harness.judge.finalize.documents import DocumentError, read_document

    doc = {"schema": "harness.observation/v1", "phase": "startup",
           "process": {"role": "EngineCore", "rank": 0, "pid": 1},
           "source": {"seal": "s", "engine": "e", "image": "i"}, "complete": True,
           "fields": {"x": None}}
    p = tmp_path / "deep.json"
    p.write_text(json.dumps(doc).replace('"x": null', '"x": ' + "[" * 900 + "]" * 900))
    with pytest.raises(DocumentError) as e:
        read_document(p)
    assert e.value.faults == [f"{p}: values nested too deeply to compare"]


def test_gate0_binds_to_preflight_before_run_json_exists(tmp_path):
    """The post-step runs before run.json is written: the seal and image the harness took
    at preflight are what both observations must carry."""
    from harness.judge.finalize.observed import recorded_source

    run = tmp_path / "r"
    run.mkdir()
    assert recorded_source(run) == {}
    (run / "preflight.json").write_text(json.dumps(
        {"source_seal": {"seal": "sha256:aa"}, "image": {"name": "x", "id": "sha256:bb"}}))
    assert recorded_source(run) == {"seal": "sha256:aa", "image": "sha256:bb"}
    (run / "run.json").write_text(json.dumps(record_doc(seal="sha256:cc",
                                                         image={"id": "sha256:dd"})))
    assert recorded_source(run) == {"seal": "sha256:cc", "image": "sha256:dd"}
    (run / "run.json").unlink()
    (run / "preflight.json").write_text("[]")
    assert recorded_source(run) == {}
    (run / "preflight.json").write_text('{"source_seal": "x", "image": null}')
    assert recorded_source(run) == {}
