"""Which harness runs, and how its own bytes are vouched for: RECORD for an installed
distribution, git for a checkout (its own, when it is not the campaign's)."""

from __future__ import annotations

import base64
import hashlib
import subprocess
from pathlib import Path

import pytest

from harness.measure import origin, provenance
from harness.measure.origin import CHECKOUT, INSTALLED, Origin, RecordRow, describe, parse_record


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _record(files: dict[str, bytes]) -> str:
    rows = [f"{path},sha256={_b64(data)},{len(data)}" for path, data in sorted(files.items())]
    # pip writes CRLF rows
    rows += ["harness/__pycache__/x.cpython-311.pyc,,", "harness-0.1.0.dist-info/RECORD,,",
             "../../../bin/harness,sha256=" + _b64(b"#!python") + ",8"]
    return "\r\n".join(rows) + "\r\n"


def test_record_rows_parse_as_pip_writes_them():
    listed = parse_record(_record({"harness/a.py": b"x = 1\n"}))
    assert listed["harness/a.py"] == RecordRow(hashlib.sha256(b"x = 1\n").hexdigest(), 6)
    assert listed["harness-0.1.0.dist-info/RECORD"] == RecordRow(None, None)
    assert listed["harness/__pycache__/x.cpython-311.pyc"].sha256 is None


@pytest.mark.parametrize("text", ["a,b\n", "a,b,c,d\n"])
def test_a_record_that_is_not_three_fields_a_row_is_refused(text):
    with pytest.raises(ValueError, match="RECORD line 1"):
        parse_record(text)


def test_a_digest_that_is_not_sha256_reads_as_unhashed():
    listed = parse_record("harness/a.py,md5=abc,3\nharness/b.py,sha256=!!!,3\n")
    assert listed["harness/a.py"].sha256 is None and listed["harness/b.py"].sha256 is None


def test_the_installed_files_as_recorded_have_no_problem():
    files = {"harness/a.py": b"x = 1\n", "harness/data/e.json": b"{}"}
    assert origin.record_problems(parse_record(_record(files)), files) == []


def test_an_edited_added_gone_or_unhashed_file_is_named():
    files = {"harness/a.py": b"x = 1\n", "harness/b.py": b"y = 2\n"}
    listed = parse_record(_record(files))
    listed["harness/c.py"] = RecordRow(None, None)
    found = {"harness/a.py": b"x = 2\n", "harness/new.py": b"evil()\n",
             "harness/c.py": b"", "harness/u.py": None}
    problems = origin.record_problems(listed, found)
    assert problems == [
        "harness/a.py: differs from the distribution's RECORD (edited after install)",
        "harness/c.py: RECORD gives no sha256 for it",
        "harness/new.py: not in the distribution's RECORD (added after install)",
        "harness/u.py: unreadable",
        "harness/b.py: listed in the distribution's RECORD, missing",
    ]


def test_the_running_checkout_is_a_checkout():
    found = origin.which()
    assert found.mode == CHECKOUT and found.record is None
    assert found.location == origin.PACKAGE_DIR.parent


def test_describe_says_where_each_kind_runs_from_and_escapes_values():
    installed = Origin("harness", "1.2", INSTALLED, Path("/v/site"), b"rows\r\n")
    assert installed.record_sha256 == "sha256:" + hashlib.sha256(b"rows\r\n").hexdigest()
    text = describe({**installed.as_dict(), "commit": None, "dirty": None})
    assert text == (f"harness 1.2, installed at /v/site (RECORD {installed.record_sha256})")
    assert describe({"distribution": "harness", "version": "1.2", "mode": CHECKOUT,
                     "location": "/src", "commit": "ab12", "dirty": True}) == \
        "harness 1.2, source checkout /src at commit ab12, dirty"
    assert "\x1b" not in describe({"distribution": "h\x1b[2J", "version": "1",
                                   "mode": "x", "location": "/"})


# ---- clean_at: the harness's bytes vouched for where they come from --------------------------

def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "-c",
                    "commit.gpgsign=false", *args], cwd=cwd, check=True, capture_output=True)


def _repo(root: Path, files: dict[str, str]) -> Path:
    root.mkdir()
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "init")
    return root


@pytest.fixture
def campaign_repo(tmp_path):
    return _repo(tmp_path / "ops", {"campaigns/c.yaml": "name: c\n", ".gitignore": "/runs/\n"})


def _files(ops: Path, package: Path) -> dict[str, Path]:
    out = {"input/campaigns/c.yaml": ops / "campaigns" / "c.yaml"}
    out.update({"harness/" + p.relative_to(package).as_posix(): p
                for p in sorted(package.rglob("*.py"))})
    return out


def test_an_installed_harness_is_clean_while_its_files_are_its_record(tmp_path, monkeypatch,
                                                                      campaign_repo):
    site = tmp_path / "site"
    package = site / "harness"
    (package / "judge").mkdir(parents=True)
    files = {"harness/__init__.py": b"", "harness/judge/verdict.py": b"def decide(): ...\n"}
    for rel, data in files.items():
        (site / rel).write_bytes(data)
    monkeypatch.setattr(provenance, "which", lambda: Origin(
        "harness", "0.1.0", INSTALLED, site, _record(files).encode()))
    check = provenance.clean_at(campaign_repo, _files(campaign_repo, package))
    assert check.clean, check.problems
    assert check.harness["mode"] == INSTALLED and check.harness["version"] == "0.1.0"

    (package / "judge" / "verdict.py").write_text("def decide(): return 'accepted'\n")
    (package / "judge" / "extra.py").write_text("")
    check = provenance.clean_at(campaign_repo, _files(campaign_repo, package))
    assert not check.clean
    assert [p.split(":")[0] for p in check.problems] == ["harness/judge/extra.py",
                                                         "harness/judge/verdict.py"]
    assert "reinstall" in check.problems[0] and str(site) in check.problems[0]


def test_a_forged_record_is_not_pips(tmp_path, monkeypatch, campaign_repo):
    site = tmp_path / "site"
    (site / "harness").mkdir(parents=True)
    (site / "harness" / "__init__.py").write_text("")
    monkeypatch.setattr(provenance, "which", lambda: Origin(
        "harness", "0.1.0", INSTALLED, site, b"one,field\n"))
    check = provenance.clean_at(campaign_repo, _files(campaign_repo, site / "harness"))
    assert not check.clean and "RECORD is not pip's" in check.problems[0]


def test_the_campaign_checkout_is_judged_whatever_the_harness(tmp_path, monkeypatch,
                                                              campaign_repo):
    site = tmp_path / "site"
    (site / "harness").mkdir(parents=True)
    (site / "harness" / "__init__.py").write_text("")
    monkeypatch.setattr(provenance, "which", lambda: Origin(
        "harness", "0.1.0", INSTALLED, site, _record({"harness/__init__.py": b""}).encode()))
    (campaign_repo / "campaigns" / "c.yaml").write_text("name: changed\n")
    check = provenance.clean_at(campaign_repo, _files(campaign_repo, site / "harness"))
    assert not check.clean and check.problems == ("campaigns/c.yaml: differs from HEAD",)


def test_a_harness_checkout_apart_from_the_campaigns_is_judged_at_its_own_commit(
        tmp_path, monkeypatch, campaign_repo):
    src = _repo(tmp_path / "src", {"harness/__init__.py": "", "pyproject.toml": ""})
    monkeypatch.setattr(provenance, "which", lambda: Origin("harness", "0.1.0", CHECKOUT, src))
    check = provenance.clean_at(campaign_repo, _files(campaign_repo, src / "harness"))
    assert check.clean, check.problems
    assert check.harness["mode"] == CHECKOUT and isinstance(check.harness["commit"], str)

    (src / "harness" / "__init__.py").write_text("patched = True\n")
    (src / "notes.txt").write_text("")
    check = provenance.clean_at(campaign_repo, _files(campaign_repo, src / "harness"))
    assert not check.clean
    assert all(p.startswith(f"the harness's checkout {src.resolve()} at ")
               for p in check.problems)
    assert any(p.endswith("harness/__init__.py: differs from HEAD") for p in check.problems)
    assert any("notes.txt" in p for p in check.problems)


def test_a_harness_folder_git_does_not_know_is_dirty(tmp_path, monkeypatch, campaign_repo):
    loose = tmp_path / "loose"
    (loose / "harness").mkdir(parents=True)
    (loose / "harness" / "__init__.py").write_text("")
    monkeypatch.setattr(provenance, "which", lambda: Origin("harness", "0.1.0", CHECKOUT, loose))
    check = provenance.clean_at(campaign_repo, _files(campaign_repo, loose / "harness"))
    assert not check.clean and "not a git work tree" in check.problems[0]


def test_a_checkout_already_read_is_not_asked_of_git_again(tmp_path, monkeypatch):
    src = _repo(tmp_path / "src", {"harness/__init__.py": ""})
    here = Origin("harness", "0.1.0", CHECKOUT, src)
    read = provenance.git_state(src)
    asked: list[Path] = []
    real = provenance.git_state
    monkeypatch.setattr(provenance, "git_state", lambda p: asked.append(p) or real(p))
    state = provenance.harness_state(here, (src, read))
    assert asked == [] and state["commit"] == read["commit"] and state["dirty"] is False
    other = provenance.harness_state(here, (tmp_path, {"commit": "x", "dirty": True}))
    assert asked == [src] and other["commit"] == read["commit"]
