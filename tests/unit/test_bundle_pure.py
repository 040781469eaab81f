"""The bundle's decisions as pure functions: manifests, seals, bag-info, statement."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from harness.base.errors import InvalidInput
from harness.base.tree import path_problem as unsafe_name_reason
from harness.measure.runfolder.manifest import render as format_sums
from harness.readers.bundle.archive import tar_header
from harness.readers.bundle.bag import bag_info, bagit_txt, payload_oxum
from harness.readers.bundle.export import archive_mtime, compression_for, top_folder
from harness.readers.bundle.facts import RunFacts, time_span
from harness.readers.bundle.payload import find_run_dirs
from harness.readers.bundle.seals import bag_runs, layout_problems
from harness.readers.bundle.statement import build_statement, check_statement
from harness.readers.bundle.sums import compare, parse_sums

H1, H2, H3 = "1" * 64, "2" * 64, "3" * 64


def facts(run_id: str, **record) -> RunFacts:
    return RunFacts(folder=f"data/{run_id}", record={"run_id": run_id, **record},
                    argv=["docker", "run"], host={"hostname": "box"})


def test_sums_round_trip_sorted():
    text = format_sums({"b": H2, "a/x": H1})
    assert text == f"{H1}  a/x\n{H2}  b\n"
    assert parse_sums(text, "m") == ({"a/x": H1, "b": H2}, [])


@pytest.mark.parametrize("line", [
    f"{H1} x",  # one space
    f"{'ab' * 32}  x".upper(),  # sha256sum would accept it, but we never write it: a flip
    f"{H1[:-1]}  x",
    f"{H1}  ../x",
    f"{H1}  /etc/passwd",
    f"{H1}  a\x0bb",
])
def test_parse_sums_rejects_bad_lines(line):
    entries, problems = parse_sums(line + "\n", "m")
    assert entries == {}
    assert problems and problems[0].kind == "malformed"


def test_parse_sums_flags_duplicates_and_missing_newline():
    _, problems = parse_sums(f"{H1}  a\n{H2}  a", "m")
    details = " ".join(p.detail for p in problems)
    assert "twice" in details and "no newline" in details


def test_compare_names_each_kind():
    problems = compare({"a": H1, "b": H2, "c": H3}, {"a": H1, "b": H3, "d": H1}, "manifest")
    assert [(p.kind, p.path) for p in problems] == [
        ("changed", "b"), ("missing", "c"), ("extra", "d")]


@pytest.mark.parametrize("name,ok", [
    ("data/r/run.json", True), ("../x", False), ("/x", False), ("a/./b", False),
    ("a\\b", False), ("a\nb", False), ("", False), ("a//b", False),
])
def test_unsafe_names(name, ok):
    assert (unsafe_name_reason(name) is None) == ok


def test_find_run_dirs_ignores_runs_nested_in_runs():
    paths = ["night/r1/run.json", "night/r1/addenda/x/run.json", "night/r2/run.json",
             "night/summary.json"]
    assert find_run_dirs(paths) == ["night/r1", "night/r2"]
    assert find_run_dirs(["run.json", "addenda/a/run.json"]) == [""]


def test_layout_allows_seals_only_in_runs_and_needs_a_run_per_folder():
    payload = [
        "data/r/run.json", "data/r/SHA256SUMS", "data/r/addenda/a/SHA256SUMS",
        "data/night/runs/r1/run.json", "data/night/runs/r1/SHA256SUMS",
        "data/night/summary.md", "data/night/SHA256SUMS", "data/night/x/SHA256SUMS",
        "data/loose/file", "data/SHA256SUMS", "data/run.json",
        "data/kv-night/journal.sqlite", "data/kv-night/summary.md",
    ]
    assert bag_runs(payload) == ["data/night/runs/r1", "data/r"]
    assert {(p.kind, p.path) for p in layout_problems(payload)} == {
        ("misplaced-seal", "data/night/SHA256SUMS"), ("misplaced-seal", "data/night/x/SHA256SUMS"),
        ("not-a-run", "data/loose"), ("stray", "data/SHA256SUMS"), ("stray", "data/run.json"),
    }


def test_bag_info_is_from_the_runs_not_the_clock():
    runs = [
        facts("r2", campaign={"name": "kv", "row": 1}, status="refused", seal="sha256:ab",
              image={"name": "i", "id": "sha256:cd"},
              times={"started": "2026-11-30T09:00:00Z", "ended": "2026-12-01T01:00:00Z"}),
        facts("r1", campaign={"name": "kv", "row": 0}, status="accepted", seal="sha256:ab",
              image={"name": "i", "id": "sha256:cd"},
              times={"started": "2026-11-30T08:00:00Z", "ended": "2026-11-30T08:30:00Z"}),
    ]
    text = bag_info(runs, payload_oxum([3, 4]))
    assert text == bag_info(list(reversed(runs)), "7.2")
    lines = text.splitlines()
    assert "Bagging-Date: 2026-12-01" in lines
    assert "Date-Range: 2026-11-30T08:00:00Z/2026-12-01T01:00:00Z" in lines
    assert lines.count("Campaign: kv") == 1
    assert "Campaign-Row: r1 kv row 0" in lines and "Campaign-Row: r2 kv row 1" in lines
    assert "Image-Id: sha256:cd i" in lines and "Source-Seal: sha256:ab" in lines
    assert "Host: box" in lines and "Payload-Oxum: 7.2" in lines
    assert bagit_txt() == "BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n"


def test_bag_info_tolerates_empty_records():
    text = bag_info([RunFacts(folder="data/r")], "0.0")
    assert "Run-Id: r" in text and "Bagging-Date" not in text


def test_statement_subjects_and_predicate():
    run = facts("r1", image={"name": "i", "id": "sha256:CD"}, seal="sha256:ab",
                status="refused", reasons=["X"], lock={"acquired": "a", "released": "b"},
                model_hashes={"m/w.bin": "sha256:ef"},
                times={"started": "2026-11-30T08:00:00Z", "ended": "2026-11-30T08:30:00Z"})
    statement = build_statement([run], {"data/r1/b": H2, "data/r1/a": H1})
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["subject"] == [{"name": "data/r1/a", "digest": {"sha256": H1}},
                                    {"name": "data/r1/b", "digest": {"sha256": H2}}]
    build = statement["predicate"]["buildDefinition"]
    assert build["externalParameters"]["runs"][0]["docker_argv"] == ["docker", "run"]
    deps = {d["uri"]: d["digest"] for d in build["resolvedDependencies"]}
    assert deps == {"docker-image:i": {"sha256": "cd"}, "harness:source-seal": {"sha256": "ab"},
                    "model-file:m/w.bin": {"sha256": "ef"}}
    details = statement["predicate"]["runDetails"]
    assert details["metadata"]["startedOn"] == "2026-11-30T08:00:00Z"
    byproduct = details["byproducts"][0]["annotations"]
    assert byproduct["status"] == "refused" and byproduct["lock"]["released"] == "b"
    assert byproduct["host"] == {"hostname": "box"}
    text = json.dumps(statement)
    assert check_statement(text, {"data/r1/a": H1, "data/r1/b": H2}, "s") == []
    kinds = {(p.path, p.detail) for p in check_statement(text, {"data/r1/a": H2, "c": H1}, "s")}
    assert kinds == {("data/r1/a", "subject digest differs from manifest"),
                     ("data/r1/b", "a subject, not in the manifest"),
                     ("c", "in the manifest, not a subject")}
    assert check_statement("{", {}, "s")[0].kind == "malformed"


def test_time_span_and_mtime_ignore_unparseable_times():
    runs = [facts("a", times={"started": "nonsense"}), facts("b")]
    assert time_span(runs) == (None, None)
    assert archive_mtime(runs) == 0
    ended = facts("c", times={"started": "1970-01-01T00:00:00Z", "ended": "1970-01-01T00:01:40Z"})
    assert archive_mtime([ended]) == 100


def test_output_names_and_top_folder():
    assert compression_for(Path("x.tar.gz")) is True
    assert compression_for(Path("x.tar")) is False
    with pytest.raises(InvalidInput):
        compression_for(Path("x.zip"))
    assert top_folder(["r1"]) == "evidence-r1"
    assert top_folder(["a", "b"]) == top_folder(["b", "a"]) != top_folder(["a", "c"])


@pytest.mark.parametrize("name,kind,size,mtime", [
    ("evidence-x/data/run/logs/stdout.log", tarfile.REGTYPE, 8192, 1_700_000_000),
    ("evidence-x/data/run", tarfile.DIRTYPE, 0, 0),
    ("evidence-x/data/run/", tarfile.DIRTYPE, 0, 0),
    ("e/" + "a" * 98, tarfile.REGTYPE, 1, 1),  # exactly 100 bytes: plain ustar
    ("e/" + "a" * 99, tarfile.REGTYPE, 1, 1),  # 101: a pax path record
    ("e/" + "a" * 98, tarfile.DIRTYPE, 0, 1),  # 101 with its slash
    ("e/caf\u00e9.txt", tarfile.REGTYPE, 3, 1),
    ("e/big.log", tarfile.REGTYPE, 8 ** 11, 1),  # past the ustar size field
    ("e/bad\udcff", tarfile.REGTYPE, 0, 1),  # a byte that was not UTF-8
], ids=["file", "dir", "dir-slash", "name-100", "name-101", "dir-101", "unicode", "8gib",
        "surrogate"])
def test_tar_headers_are_tarfiles_own(name, kind, size, mtime):
    info = tarfile.TarInfo(name)
    info.type, info.size, info.mode, info.mtime = kind, size, 0o444, mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    want = info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
    assert tar_header(name, kind, size, 0o444, mtime) == want


@pytest.mark.parametrize("name", ["data/r/run.json", 'data/r/"q"\\b', "data/r/caf\u00e9\u2028\x7f",
                                  "data/r/\udcff"], ids=["plain", "quotes", "unicode", "surrogate"])
def test_subject_json_is_the_evidence_layout(name):
    from harness.base.atomic import dumps_json
    from harness.readers.bundle.statement import _subject, subject_json

    assert subject_json(name, H1) == dumps_json(_subject(name, H1))[:-1]
