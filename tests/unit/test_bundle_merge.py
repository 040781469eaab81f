"""`bundle merge` and `bundle collect`: one bundle from many, and the drop hosts fill."""

from __future__ import annotations

import json
import tarfile

import pytest
from bundle_helpers import make_keys, make_run, pack, writable_bundle

from harness.base.errors import InvalidInput
from harness.cli.bundle import bundle
from harness.readers.bundle.collect import RECORD, collect_drop, collect_run, collected_digests
from harness.readers.bundle.export import export_bundle
from harness.readers.bundle.merge import MergeRefused, combine, merge_bundles, split_manifest
from harness.readers.bundle.verify import verify_bundle


def _exports(tmp_path, *ids, compress="tar.gz"):
    out = []
    for row, run_id in enumerate(ids):
        run = make_run(tmp_path / f"host{row}", run_id, row=row)
        path = tmp_path / f"{run_id}.{compress}"
        export_bundle([run], path)
        out.append(path)
    return out


def test_merge_of_exports_equals_exporting_the_runs_together(tmp_path):
    a, b = _exports(tmp_path, "run-a", "run-b")
    merged = tmp_path / "night.tar.gz"
    result = merge_bundles([b, a], merged)
    assert sorted(result.runs) == ["run-a", "run-b"]
    assert verify_bundle(merged).ok
    together = tmp_path / "together.tar.gz"
    export_bundle([tmp_path / "host0" / "run-a", tmp_path / "host1" / "run-b"], together)
    assert merged.read_bytes() == together.read_bytes()
    assert {name.rsplit("/", 1)[-1] for name, _ in result.inputs} == {a.name, b.name}


def test_identical_duplicates_are_kept_once_and_differing_ones_refused(tmp_path):
    a, b = _exports(tmp_path, "run-a", "run-b")
    again = tmp_path / "again.tar"
    export_bundle([tmp_path / "host0" / "run-a"], again)  # same run, another archive form
    merged = tmp_path / "m.tar"
    result = merge_bundles([a, again, b], merged)
    assert len(result.runs) == 2 and verify_bundle(merged).ok
    other = make_run(tmp_path / "elsewhere", "run-a", row=7)  # same id, other bytes
    forged = tmp_path / "other.tar"
    export_bundle([other], forged)
    with pytest.raises(MergeRefused) as refused:
        merge_bundles([a, forged], tmp_path / "no.tar")
    assert [p.kind for p in refused.value.problems] == ["collision"]
    assert "data/run-a" in refused.value.problems[0].path
    assert not (tmp_path / "no.tar").exists()


def test_a_tampered_input_refuses_the_merge_naming_it(tmp_path):
    a, b = _exports(tmp_path, "run-a", "run-b")
    root = writable_bundle(b, tmp_path / "x")
    (root / "data/run-b/logs/stdout.log").write_text("forged\n")
    tampered = pack(root, tmp_path / "tampered.tar.gz")
    with pytest.raises(MergeRefused) as refused:
        merge_bundles([a, tampered], tmp_path / "no.tar.gz")
    paths = [p.path for p in refused.value.problems]
    assert paths and all(p.startswith(str(tampered)) for p in paths)
    assert any("stdout.log" in p for p in paths)
    assert not (tmp_path / "no.tar.gz").exists()


def test_hostile_input_is_invalid_and_writes_nothing(tmp_path):
    (a,) = _exports(tmp_path, "run-a")
    evil = tmp_path / "evil.tar"
    with tarfile.open(evil, "w") as tar:
        info = tarfile.TarInfo("top/../../escape")
        tar.addfile(info)
    with pytest.raises(InvalidInput):
        merge_bundles([a, evil], tmp_path / "no.tar")
    assert not (tmp_path / "no.tar").exists() and not (tmp_path.parent / "escape").exists()


def test_signed_merge_and_signed_inputs(tmp_path):
    key, line = make_keys(tmp_path, "alice")
    signers = tmp_path / "allowed"
    signers.write_text(line)
    run = make_run(tmp_path / "h", "run-a")
    signed_in = tmp_path / "in.tar.gz"
    export_bundle([run], signed_in, key)
    with pytest.raises(MergeRefused) as refused:  # an unchecked signature proves nothing
        merge_bundles([signed_in], tmp_path / "no.tar.gz")
    assert refused.value.problems[0].kind == "unverified-signature"
    out = tmp_path / "out.tar.gz"
    assert merge_bundles([signed_in], out, key, signers).signed
    assert verify_bundle(out, signers).ok


def test_combine_is_pure_and_first_input_wins():
    held = {"r": {"run.json": "1" * 64}}
    chosen, tags, problems = combine([("a", held, {"metadata/approvals/x": "2"}),
                                      ("b", held, {"metadata/approvals/x": "3"})])
    assert chosen == {"r": 0} and tags == {"metadata/approvals/x": 0}
    assert [(p.kind, p.path) for p in problems] == [("collision", "metadata/approvals/x")]
    assert split_manifest({"data/r/a/b": "x", "data/n/j": "y"}) == {
        "r": {"a/b": "x"}, "n": {"j": "y"}}


def _main(argv):
    from harness.cli.main import cli, main

    cli.add_command(bundle)
    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code


def test_merge_cli_exit_codes(tmp_path, capsys):
    a, b = _exports(tmp_path, "run-a", "run-b")
    out = str(tmp_path / "n.tar.gz")
    assert _main(["bundle", "merge", str(a), str(b), "-o", out]) in (0, None)
    assert "2 run(s)" in capsys.readouterr().out
    assert _main(["bundle", "merge", str(a), "-o", out]) == 2  # never overwritten
    assert _main(["bundle", "merge", str(a), "-o", str(tmp_path / "n.zip")]) == 2
    other = make_run(tmp_path / "o", "run-a", row=3)
    export_bundle([other], tmp_path / "o.tar")
    assert _main(["bundle", "merge", str(a), str(tmp_path / "o.tar"), "-o",
                  str(tmp_path / "c.tar")]) == 1
    err = capsys.readouterr().err
    assert "FAIL collision: data/run-a" in err and "Traceback" not in err


def test_collect_unpacks_new_runs_once_and_picks_up_late_ones(tmp_path):
    drop, runs = tmp_path / "drop", tmp_path / "RUNS"
    (drop / "bundles").mkdir(parents=True)
    a, b = _exports(tmp_path, "run-a", "run-b")
    a.rename(drop / "bundles" / a.name)
    (drop / "bundles" / ".run-x.tar.gz.tmp").write_bytes(b"half")  # still being written
    first = collect_drop(drop, runs)
    assert [(x.ok, x.unpacked) for x in first] == [(True, ["run-a"])]
    assert (runs / "run-a" / "run.json").is_file()
    assert collect_drop(drop, runs) == []  # collected already: skipped by digest
    b.rename(drop / "bundles" / b.name)  # the host that could not deliver before
    later = collect_drop(drop, runs)
    assert [x.unpacked for x in later] == [["run-b"]]
    records = [json.loads(line) for line in (runs / RECORD).read_text().splitlines()]
    assert [r["runs"] for r in records] == [["run-a"], ["run-b"]]
    assert collected_digests((runs / RECORD).read_text()) == {r["sha256"] for r in records}


def test_collect_refuses_a_tampered_bundle_and_keeps_what_runs_holds(tmp_path):
    drop, runs = tmp_path / "drop", tmp_path / "RUNS"
    (drop / "bundles").mkdir(parents=True)
    (a,) = _exports(tmp_path, "run-a")
    root = writable_bundle(a, tmp_path / "x")
    (root / "data/run-a/logs/stdout.log").write_text("forged\n")
    pack(root, drop / "bundles" / "run-a.tar.gz")
    (arrival,) = collect_drop(drop, runs)
    assert not arrival.ok and arrival.problems and not (runs / "run-a").exists()
    # not recorded as collected: judged again, refused again
    assert _main(["bundle", "collect", str(drop), "--runs-dir", str(runs)]) == 1
    other = make_run(tmp_path / "o", "run-a", row=3)
    (drop / "bundles" / "run-a.tar.gz").unlink()
    export_bundle([other], drop / "bundles" / "run-a.tar.gz")
    (runs / "run-a").mkdir(parents=True)
    (runs / "run-a" / "SHA256SUMS").write_text("")
    (conflict,) = collect_drop(drop, runs)
    assert conflict.ok and conflict.problems and conflict.unpacked == []
    assert (runs / "run-a" / "SHA256SUMS").read_text() == ""  # never rewritten


def test_collect_takes_the_good_bundles_beside_a_hostile_one(tmp_path):
    drop, runs = tmp_path / "drop", tmp_path / "RUNS"
    (drop / "bundles").mkdir(parents=True)
    (a,) = _exports(tmp_path, "run-a")
    a.rename(drop / "bundles" / a.name)
    for name in ("evil.tar", "run-evil.tar.gz"):  # named for no run; named for run-evil
        with tarfile.open(drop / "bundles" / name, "w") as tar:
            tar.addfile(tarfile.TarInfo("top/../../escape"))
    (drop / "bundles" / "link.tar.gz").symlink_to(drop / "bundles" / a.name)
    arrivals = {x.bundle: x for x in collect_drop(drop, runs)}
    assert set(arrivals) == {"evil.tar", "run-evil.tar.gz", "link.tar.gz", a.name}
    assert "hostile" in arrivals["run-evil.tar.gz"].problems[0]
    for name in ("evil.tar", "link.tar.gz"):  # refused by name or kind: a symlink is never
        assert arrivals[name].problems and not arrivals[name].ok  # followed, nothing read
        assert arrivals[name].sha256 == "" and "BUNDLE-DROP-NAME" in arrivals[name].problems[0]
    assert arrivals[a.name].unpacked == ["run-a"]
    assert sorted(p.name for p in runs.iterdir()) == [RECORD, "run-a"]  # no temp left
    assert not (tmp_path / "escape").exists()


def test_collect_run_takes_only_its_own_runs_bundle_once(tmp_path):
    """The controller's collect as a job ends: `<drop>/bundles/<run id>.tar.gz` only, and
    only if it holds that run alone, so one host's bundle never plants another's run."""
    drop, runs = tmp_path / "drop", tmp_path / "RUNS"
    (drop / "bundles").mkdir(parents=True)
    assert collect_run(drop, runs, "run-a") is None  # nothing arrived yet
    a, b = _exports(tmp_path, "run-a", "run-b")
    b.rename(drop / "bundles" / "run-a.tar.gz")  # named after run-a, holds run-b
    forged = collect_run(drop, runs, "run-a")
    assert not forged.ok and "holds data/run-b" in forged.problems[0]
    assert not (runs / "run-b").exists() and not (runs / "run-a").exists()
    assert collect_run(drop, runs, "run-a") is None  # that bundle was judged: not again
    (drop / "bundles" / "run-a.tar.gz").unlink()
    a.rename(drop / "bundles" / "run-a.tar.gz")
    arrival = collect_run(drop, runs, "run-a")
    assert arrival.ok and arrival.unpacked == ["run-a"] and not arrival.problems
    assert verify_bundle(drop / "bundles" / "run-a.tar.gz").ok
    assert (runs / "run-a" / "SHA256SUMS").is_file()
    assert collect_run(drop, runs, "run-a") is None
    records = [json.loads(line) for line in (runs / RECORD).read_text().splitlines()]
    assert [(r["ok"], r["runs"]) for r in records] == [(False, []), (True, ["run-a"])]
    two = tmp_path / "two.tar.gz"
    export_bundle([make_run(tmp_path / "h5", "run-c", row=5),
                   make_run(tmp_path / "h6", "run-d", row=6)], two)
    two.rename(drop / "bundles" / "run-c.tar.gz")
    assert not collect_run(drop, runs, "run-c").ok and not (runs / "run-c").exists()
    (drop / "bundles" / "run-e.tar.gz").symlink_to(drop / "bundles" / "run-a.tar.gz")
    assert collect_run(drop, runs, "run-e") is None  # a symlink is never followed
    with pytest.raises(InvalidInput):
        collect_run(drop, runs, "../run-a")
