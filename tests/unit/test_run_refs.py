"""Run references: ids, unique prefixes, hex tails, `latest` and `@-N`, resolved over a list
of names (pure), plus the thin reader of a runs dir (real folders only, named like runs)."""

from __future__ import annotations

import os
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from harness.base.errors import InvalidInput
from harness.cli.params import RUN
from harness.config import runsdir
from harness.measure.runfolder.refs import newest_first, resolve_ref, run_names, run_parts

OLD = "rehearsal-gate0-20261201T201825Z-8684abca"
MID = "rehearsal-gate0-inproc-20261201T201900Z-1234abcd"
NEW = "rehearsal-compute-20261202T010000Z-ffee0011"
NAMES = [MID, "nights", OLD, NEW, "perflog", "reruns.jsonl"]


def test_a_minted_id_parts_and_newest_first_by_its_stamp() -> None:
    assert run_parts(OLD) == ("rehearsal-gate0", "20261201T201825Z", "8684abca")
    assert run_parts("nights") is None and run_parts("x-20261201T201825Z-XYZ") is None
    assert newest_first(NAMES) == [NEW, MID, OLD]


@pytest.mark.parametrize(("ref", "want"), [
    (OLD, OLD), ("rehearsal-gate0-2026", OLD), ("rehearsal-gate0-i", MID), ("rehearsal-c", NEW),
    ("8684", OLD), ("ffee0011", NEW), ("latest", NEW), ("@-0", NEW), ("@-1", MID), ("@-2", OLD),
])
def test_a_reference_names_one_run(ref: str, want: str) -> None:
    assert resolve_ref(ref, NAMES, "R") == want


def test_an_ambiguous_prefix_lists_the_candidates_and_points_at_ls() -> None:
    with pytest.raises(InvalidInput) as e:
        resolve_ref("rehearsal-gate0", NAMES, "R (from --runs-dir)")
    assert "ambiguous in R (from --runs-dir): 2 runs match" in e.value.message
    assert MID in e.value.message and OLD in e.value.message
    assert "harness ls --control rehearsal-gate0" in e.value.message
    many = [f"c-20261201T0000{i:02d}Z-{i:08x}" for i in range(15)]
    with pytest.raises(InvalidInput, match=r"15 runs match .* and 5 more"):
        resolve_ref("c-", many, "R")


def test_a_missing_reference_says_did_you_mean() -> None:
    with pytest.raises(InvalidInput, match=rf"no run 'gate0-inproc' in R; did you mean {MID}"):
        resolve_ref("gate0-inproc", NAMES, "R")
    with pytest.raises(InvalidInput, match=r"no such run in R .it holds 3 run"):
        resolve_ref("@-3", NAMES, "R")
    with pytest.raises(InvalidInput, match="it holds no run"):
        resolve_ref("latest", [], "R")
    with pytest.raises(InvalidInput, match="no run 'abc'"):  # a hex tail needs 4 digits
        resolve_ref("abc", NAMES, "R")


def test_the_reader_lists_real_run_folders_only(tmp_path: Path) -> None:
    for name in (OLD, NEW, "nights"):
        (tmp_path / name).mkdir()
    (tmp_path / MID).write_text("a file")
    os.symlink(tmp_path / OLD, tmp_path / "rehearsal-x-20261203T000000Z-00000000")
    assert sorted(run_names(tmp_path)) == sorted([OLD, NEW])
    assert len(run_names(tmp_path, limit=1)) == 1


@click.command()
@click.argument("run", type=RUN)
def _take(run: Path) -> None:
    click.echo(str(run))


def test_the_param_type_prefers_an_existing_path_and_resolves_ids(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = tmp_path / "runs"
    (runs / OLD).mkdir(parents=True)
    monkeypatch.setenv(runsdir.ENV, str(runs))
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(_take, ["8684"]).output.strip() == str(runs / OLD)
    (tmp_path / "8684").mkdir()  # a folder of that name here wins
    assert CliRunner().invoke(_take, ["8684"]).output.strip() == "8684"
    assert CliRunner().invoke(_take, ["no/such/path"]).output.strip() == "no/such/path"
    monkeypatch.setenv(runsdir.ENV, str(tmp_path / "gone"))
    r = CliRunner().invoke(_take, ["latest"])
    assert isinstance(r.exception, InvalidInput)
    assert "no such runs dir" in r.exception.message and "HARNESS_RUNS_DIR" in r.exception.message
