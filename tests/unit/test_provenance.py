"""The project's git provenance: the pure parsers, a real repository, the record, the lines."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from harness.measure import provenance
from harness.measure.provenance import (
    GitOutputError,
    git_state,
    parse_head,
    parse_status,
    unsafe_filters,
)
from harness.measure.runfolder.runjson import RunRecord, from_dict, provenance_of
from harness.readers.bundle.facts import RunFacts
from harness.readers.bundle.statement import build_statement
from harness.readers.report.gitline import git_line
from harness.readers.report.page import render_html
from harness.readers.report.summary import build_summary, render_markdown

COMMIT = "0123456789abcdef0123456789abcdef01234567"


# --- pure parsers -----------------------------------------------------------------------

def test_clean_status_is_no_change():
    assert parse_status(b"") == ([], 0)


def test_modified_and_untracked_paths_sorted():
    data = b" M src/b.py\0?? new.txt\0M  a.py\0A  added\0 D gone\0"
    assert parse_status(data) == (["a.py", "added", "gone", "new.txt", "src/b.py"], 5)


def test_rename_takes_the_new_path_and_skips_the_source():
    data = b"R  new name.py\0old name.py\0 M x\0C  copy\0orig\0"
    assert parse_status(data) == (["copy", "new name.py", "x"], 3)


def test_a_path_with_a_newline_or_escapes_stays_one_path():
    data = b"?? line\nbreak\0?? \x1b[31mred\0?? caf\xc3\xa9\0?? bad\xff\0"
    changed, total = parse_status(data)
    assert total == 4
    assert "line\nbreak" in changed and "\x1b[31mred" in changed and "café" in changed
    assert "bad\\xff" in changed  # not UTF-8: escaped, so run.json can hold it
    json.dumps(changed, ensure_ascii=False).encode("utf-8")


def test_over_the_limit_keeps_the_first_sorted_and_counts_all():
    data = b"".join(b"?? f%04d\0" % i for i in range(450))
    changed, total = parse_status(data)
    assert total == 450 and len(changed) == provenance.MAX_CHANGED == 200
    assert changed == sorted(changed) and changed[0] == "f0000" and changed[-1] == "f0199"


@pytest.mark.parametrize("data", [
    b" M a",  # no trailing NUL
    b"XY a\0",  # unknown status codes
    b"M\0",  # too short
    b" Ma\0",  # no space after the codes
    b"R  new\0",  # a rename without its source
    b"R  new\0\0",  # an empty source
])
def test_malformed_status_is_refused(data):
    with pytest.raises(GitOutputError):
        parse_status(data)


def test_head_is_a_full_object_name():
    assert parse_head(COMMIT.encode() + b"\n") == COMMIT
    assert parse_head(b"a" * 64 + b"\n") == "a" * 64  # SHA-256 repositories
    for bad in (b"", b"HEAD\n", COMMIT[:12].encode(), COMMIT.upper().encode(), b"g" * 40):
        with pytest.raises(GitOutputError):
            parse_head(bad)


def test_only_the_repositorys_own_filters_are_unsafe():
    data = (b"global\0filter.lfs.clean\ngit-lfs clean -- %f\0"
            b"local\0filter.evil.clean\ntouch /tmp/pwned\0"
            b"worktree\0filter.w.process\nx\0")
    assert unsafe_filters(data) == ["filter.evil.clean", "filter.w.process"]
    assert unsafe_filters(b"") == []


# --- a real repository --------------------------------------------------------------------

def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                    "-c", "commit.gpgsign=false", *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path) -> Path:
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.txt").write_text("one\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("two\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "first")
    return tmp_path


def test_a_clean_repository(repo):
    state = git_state(repo)
    assert state["error"] is None and state["dirty"] is False and state["changed"] == []
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert state["commit"] == head


def test_a_modified_repository_names_the_paths_from_a_subfolder(repo):
    (repo / "a.txt").write_text("changed\n")
    (repo / "sub" / "new\nline.txt").write_text("x")
    state = git_state(repo / "sub")  # relative to the repository root, not the folder
    assert state["dirty"] is True and state["error"] is None
    assert state["changed"] == ["a.txt", "sub/new\nline.txt"] and state["changed_total"] == 2


def test_the_callers_git_variables_do_not_redirect_it(repo, tmp_path_factory, monkeypatch):
    other = tmp_path_factory.mktemp("other")
    monkeypatch.setenv("GIT_DIR", str(other))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    assert git_state(repo)["dirty"] is False


def test_a_hostile_fsmonitor_or_filter_never_runs(repo):
    marker = repo.parent / f"{repo.name}-ran"
    _git(repo, "config", "core.fsmonitor", f"touch {marker}; false")
    (repo / "a.txt").write_text("changed\n")
    assert git_state(repo)["dirty"] is True and not marker.exists()
    _git(repo, "config", "filter.evil.clean", f"touch {marker}; cat")
    (repo / ".gitattributes").write_text("*.txt filter=evil\n")
    later = (repo / "sub" / "b.txt").stat().st_mtime + 5
    os.utime(repo / "sub" / "b.txt", (later, later))  # same bytes, new time: git would filter
    state = git_state(repo)
    assert not marker.exists()
    assert state["dirty"] is None and "filter.evil.clean" in state["error"]
    assert state["commit"]  # the commit is still known


def test_not_a_repository(tmp_path):
    state = git_state(tmp_path)
    assert state["commit"] is None and state["dirty"] is None
    assert "not a git work tree" in state["error"]


def test_a_repository_without_a_commit(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / "x").write_text("x")
    state = git_state(tmp_path)
    assert state["commit"] is None and state["dirty"] is True and "no commit" in state["error"]


def test_no_git_binary(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    state = git_state(tmp_path)
    assert state["commit"] is None and state["dirty"] is None and "git not found" in state["error"]


# --- the record and the lines -----------------------------------------------------------------

def test_the_record_round_trips_and_reads_odd_types_as_absent():
    prov = {"commit": COMMIT, "dirty": True, "changed": ["a"], "changed_total": 1, "error": None}
    rec = RunRecord(run_id="r", status="accepted", provenance=prov)
    assert from_dict(rec.as_dict()).provenance == prov
    assert "provenance" not in RunRecord(run_id="r", status="accepted").as_dict()
    assert from_dict({"run_id": "r"}).provenance is None  # older records
    assert from_dict({"provenance": "dirty"}).provenance is None
    odd = provenance_of({"commit": 5, "dirty": "yes", "changed": ["a", 3], "changed_total": True,
                         "error": []})
    assert odd == {"commit": None, "dirty": None, "changed": ["a"], "changed_total": 1,
                   "error": None}


def test_git_line_says_clean_dirty_or_why_not():
    assert git_line(None) == "not recorded"
    clean = {"commit": COMMIT, "dirty": False, "changed": [], "changed_total": 0, "error": None}
    assert git_line(clean) == f"{COMMIT} (clean)"
    dirty = dict(clean, dirty=True, changed=["a", "b\n\x1b[2J", "c,d"], changed_total=250)
    line = git_line(dirty, shown=2)
    assert line == f"{COMMIT} dirty: 250 changed (a, b\\x0a\\x1b[2J, …)"
    assert "\n" not in git_line(dict(dirty, changed=["x\ny"] * 3)) and "\x1b" not in line
    assert git_line(dict(dirty, changed=["c,d"], changed_total=1)) == \
        f"{COMMIT} dirty: 1 changed (c\\x2cd)"
    unknown = dict(clean, commit=None, dirty=None, error="not a git work tree: fatal\x07")
    assert git_line(unknown) == "no commit (state unknown: not a git work tree: fatal\\x07)"


def test_a_bundle_statement_carries_each_runs_git_state():
    dirty = {"commit": COMMIT, "dirty": True, "changed": ["a"], "changed_total": 1,
             "error": None}
    runs = [RunFacts(folder="data/r1", record={"run_id": "r1", "provenance": dirty}),
            RunFacts(folder="data/r2", record={"run_id": "r2"},
                     preflight={"provenance": dict(dirty, dirty=False, changed=[],
                                                   changed_total=0)}),
            RunFacts(folder="data/r3", record={"run_id": "r3", "provenance": ["odd"]})]
    predicate = build_statement(runs, {})["predicate"]
    provs = [r["provenance"] for r in predicate["buildDefinition"]["externalParameters"]["runs"]]
    assert provs[0] == dirty and provs[1]["dirty"] is False and provs[2] is None
    [dep] = [d for d in predicate["buildDefinition"]["resolvedDependencies"]
             if d["uri"] == "harness:project-git"]
    assert dep["digest"] == {"gitCommit": COMMIT} and dep["annotations"]["runs"] == ["r1", "r2"]


def test_the_morning_report_says_which_runs_came_from_a_dirty_tree():
    dirty = {"commit": COMMIT, "dirty": True, "changed": ["<script>x</script>\n| forged |"],
             "changed_total": 1, "error": None}
    records = [{"row": None, "run": {"run_id": "r1", "status": "accepted",
                                     "provenance": dirty}},
               {"row": None, "run": {"run_id": "r0", "status": "accepted"}}]
    summary = build_summary({"name": "n"}, records)
    assert [e["git_dirty"] for e in summary["runs"]] == [True, None]
    md, page = render_markdown(summary), render_html(summary)
    assert f"{COMMIT} dirty: 1 changed" in md and f"{COMMIT} dirty: 1 changed" in page
    assert "<script>" not in page and "<script>" not in md and "\n| forged" not in md
