"""`harness report` and `harness status` over real night folders (a journal, run folders):
a table on a terminal (a real pty), Markdown through a pipe, `-o FILE` written atomically,
HTML refused on a terminal, rows numbered from 1, the lines a night ends with, and the
latest night of each campaign with its end time and its progress counted one way."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import click
import pytest

from harness.cli.report import chosen_format
from harness.measure.nightfolder.journal import Journal
from harness.readers.report.ending import end_lines, night_end_lines
from harness.readers.report.morning import summary_for_night, write_night_summary
from harness.readers.statuslines import gather, parse_timers, render, timer_lines
from tests.inprocess import invoke
from tests.unit.terminal_helpers import on_terminal

STAMP = "20261201T020000Z"
DIFF = {"field": "compilation.custom_ops", "process": "engine-core", "kind": "value-changed",
        "startup": ["+sparse_attn_indexer", "none"],
        "generation": ["+sparse_attn_indexer", "none", "+sparse_attn_indexer"]}


def write_run(runs: Path, run_id: str, control: str, status: str, campaign: str,
              rerun_of: str | None = None) -> Path:
    """A run folder as the report reads it: run.json, and a refused run's Gate-0 verdict."""
    folder = runs / run_id
    folder.mkdir(parents=True)
    refused = status == "refused"
    doc = {"schema": "harness.run/v1", "run_id": run_id,
           "campaign": {"name": campaign, "file": f"campaigns/{campaign}.yaml", "row": "R"},
           "control": {"name": control, "file": f"controls/{control}.yaml"},
           "status": status,
           "reasons": ["[gate0] GATE0-FIELD-DIFFERS: compilation.custom_ops differs"]
           if refused else [],
           "times": {"created": "2026-12-01T02:00:00Z", "started": "2026-12-01T02:00:01Z",
                     "ended": "2026-12-01T02:00:04.5Z"},
           "lock": {"acquired": "2026-12-01T02:00:00.5Z", "released": "2026-12-01T02:00:05Z",
                    "wait_s": 0.5},
           "post_steps": [{"name": "gate0", "exit_code": int(refused), "verdict": status}],
           "rerun_of": {"run_id": rerun_of, "reason": "fixed"} if rerun_of else None}
    (folder / "run.json").write_text(json.dumps(doc))
    if refused:
        (folder / "post-steps" / "gate0").mkdir(parents=True)
        (folder / "post-steps" / "gate0" / "verdict.json").write_text(
            json.dumps({"verdict": "refused", "differences": [DIFF]}))
    return folder


def make_night(runs: Path, campaign: str = "camp", stamp: str = STAMP, *,
               ended: str | None = "2026-12-01T02:30:00Z", rerun: str | None = "accepted",
               ) -> Path:
    """a accepted; b refused, then rerun and `rerun` (None: not rerun); c deferred by the
    doctor."""
    night = runs / "nights" / f"{campaign}-{stamp}"
    night.mkdir(parents=True)
    j = Journal.create(night / "journal.sqlite", campaign=campaign,
                       campaign_file=f"campaigns/{campaign}.yaml",
                       plan=[("a", 0), ("b", 0), ("c", 0)], seal="sha256:" + "b" * 64)
    a, b, c = j.rows()
    for row, status in ((a, "accepted"), (b, "refused")):
        run_id = f"{campaign}-{row.control}-{stamp}-1"
        write_run(runs, run_id, row.control, status, campaign)
        r = j.mark_running(row, run_id, run_id)
        j.finish(r, "accepted") if status == "accepted" else j.finish(r, "refused", "gate0 refused")
    j.mark_deferred(c, "doctor: /dev/kfd missing")
    if rerun:
        old, new = f"{campaign}-b-{stamp}-1", f"{campaign}-b-{stamp}-2"
        again = j.mark_running(j.add_rerun(old, "fixed"), new, new)
        write_run(runs, new, "b", rerun, campaign, rerun_of=old)
        j.finish(again, "accepted") if rerun == "accepted" else j.finish(again, "refused", "again")
    j.close()
    if ended:
        (night / "ended.json").write_text(json.dumps({"at": ended, "why": "done"}))
    return night


def on_tty(*argv: str, columns: int = 100) -> tuple[int, str]:
    """(exit code, output) of `harness ARGV…` with stdout and stderr on a real terminal."""
    env = {**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1"}
    code, out, _ = on_terminal(list(argv), env, stderr_too=True)
    return code, out.replace("\r\n", "\n")


@pytest.fixture
def night(tmp_path: Path) -> Path:
    return make_night(tmp_path / "runs")


def test_chosen_format_follows_the_flag_the_suffix_and_the_terminal() -> None:
    assert chosen_format(None, None, tty=True) == "table"
    assert chosen_format(None, None, tty=False) == "md"
    assert chosen_format(None, Path("x.HTML"), tty=True) == "html"
    assert chosen_format(None, Path("x.txt"), tty=False) == "table"
    assert chosen_format(None, Path("x.report"), tty=True) == "md"
    assert chosen_format("json", Path("x.html"), tty=True) == "json"
    assert chosen_format("html", None, tty=False) == "html"  # piped: the caller's choice
    with pytest.raises(click.UsageError, match=r"-o FILE\.html"):
        chosen_format("html", None, tty=True)


def test_a_terminal_gets_the_table_rows_numbered_from_1(night: Path) -> None:
    code, out = on_tty("report", str(night), columns=100)
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == f"Night {night.name} (camp)"
    assert lines[1] == ("2/3 controls accepted (1 after rerun); 1 deferred"
                        " · regressions: not judged: 2 controls with no call sealed")
    assert lines[2] == "attempts: 2 accepted, 1 deferred, 1 refused (1 superseded)"
    head = next(i for i, line in enumerate(lines) if line.lstrip().startswith("#  CONTROL"))
    rows = lines[head + 1: head + 5]
    assert [r.split()[:3] for r in rows] == [["1", "a", "1"], ["2", "b", "1"], ["2", "b", "2"],
                                            ["3", "c", "1"]]
    assert "(refused)" in rows[1] and "superseded by camp-b-" in rows[1]
    assert all(len(line) <= 100 for line in lines[head: head + 5])
    assert "Gate 0" not in out  # a replaced attempt's block only says how to compare it
    assert f"  next: harness rerun {night.parent.parent}" not in out  # the rerun replaced it
    assert (f"  next: harness diff {night.parent.parent / f'camp-b-{STAMP}-1'} "
            f"{night.parent.parent / f'camp-b-{STAMP}-2'}") in out
    assert "row 3: c attempt 1, deferred" in out and "doctor: /dev/kfd missing" in out
    assert lines[-1] == f"full report: harness report {night} --format md (or -o FILE.html)"


def test_a_refused_control_shows_its_gate0_values_and_commands(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    night = make_night(runs, rerun="refused")
    code, out = on_tty("report", str(night))
    assert code == 0, out
    assert out.splitlines()[1] == ("1/3 controls accepted; 1 deferred, 1 refused (1 after rerun)"
                                   " · regressions: not judged: no call sealed")
    block = out.split("row 2: b attempt 2, refused\n", 1)[1].split("\n\n", 1)[0].splitlines()
    first, second = runs / f"camp-b-{STAMP}-1", runs / f"camp-b-{STAMP}-2"
    assert block == [
        "  [gate0] GATE0-FIELD-DIFFERS: compilation.custom_ops differs",
        "  again",
        '  Gate 0 in engine-core: compilation.custom_ops: start-up ["+sparse_attn_indexer", '
        '"none"], generation ["+sparse_attn_indexer", "none", "+sparse_attn_indexer"]',
        f"  run: {second}",
        f"  next: harness rerun {second} --reason WHY",
        f"  next: harness diff {second} OTHER"]
    assert f"row 2: b attempt 1, refused, superseded by camp-b-{STAMP}-2\n" \
           f"  next: harness diff {first} {second}\n" in out


def test_a_narrow_terminal_shortens_the_control_column_not_the_note(tmp_path: Path) -> None:
    night = make_night(tmp_path / "runs", campaign="a-campaign-name")
    code, out = on_tty("report", str(night), columns=82)
    assert code == 0, out
    table = [line for line in out.splitlines() if re.match(r"\s+\d+\s+[abc]\s", line)
             or "CONTROL" in line]
    assert len(table) == 5 and all(len(line) <= 82 for line in table)


def test_piped_output_is_markdown_and_table_on_request(night: Path) -> None:
    code, out = invoke("report", str(night))
    assert code == 0 and out.startswith(f"# Night {night.name}\n")
    assert ("**2/3 controls accepted (1 after rerun); 1 deferred · regressions: not judged: "
            "2 controls with no call sealed**") in out
    assert "| 1 | a | 1 | **accepted** |" in out and "| 3 | c | 1 | **deferred** |" in out
    code, table = invoke("report", str(night), "--format", "table")
    assert code == 0 and table.startswith(f"Night {night.name} (camp)\n")


def test_html_on_a_terminal_is_refused_unless_written_to_a_file(night: Path,
                                                               tmp_path: Path) -> None:
    code, out = on_tty("report", str(night), "--format", "html")
    assert code == 2 and "-o FILE.html" in out and "<html" not in out
    page = tmp_path / "morning.html"
    code, out = on_tty("report", str(night), "--format", "html", "-o", str(page))
    assert code == 0 and out.strip() == str(page)
    assert page.read_text().startswith("<!DOCTYPE html>")
    code, out = invoke("report", str(night), "--format", "html")  # piped: the page
    assert code == 0 and out.startswith("<!DOCTYPE html>")


def test_output_file_takes_its_format_from_the_suffix(night: Path, tmp_path: Path) -> None:
    for name, start in (("r.html", "<!DOCTYPE html>"), ("r.json", "{"), ("r.md", "# Night"),
                        ("r.txt", "Night "), ("r.csv", "sealed,campaign,control")):
        target = tmp_path / name
        code, out = invoke("report", str(night), "-o", str(target))
        assert code == 0 and out == f"{target}\n"
        assert target.read_text().startswith(start), name
    assert json.loads((tmp_path / "r.json").read_text())["headline"].startswith("2/3 controls")


def test_output_file_replaces_atomically_and_never_follows_a_symlink(night: Path,
                                                                    tmp_path: Path) -> None:
    target = tmp_path / "out" / "summary.md"
    target.parent.mkdir()
    target.write_text("yesterday's report\n")
    code, _ = invoke("report", str(night), "-o", str(target))
    assert code == 0 and target.read_text().startswith(f"# Night {night.name}")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    link = tmp_path / "out" / "link.md"
    link.symlink_to(victim)
    code, _ = invoke("report", str(night), "-o", str(link))
    assert code == 0 and victim.read_text() == "keep me\n"  # the link was replaced
    assert not link.is_symlink() and link.read_text().startswith("# Night")
    assert sorted(p.name for p in target.parent.iterdir()) == ["link.md", "summary.md"]


def test_output_file_bad_targets_are_bad_input_and_write_nothing(night: Path,
                                                                tmp_path: Path) -> None:
    code, out = invoke("report", str(night), "-o", str(tmp_path))  # a folder
    assert code == 2, out
    code, out = invoke("report", str(night), "-o", str(tmp_path / "no" / "such.md"))
    assert code == 2 and "no such folder" in out
    broken = tmp_path / "broken-night"
    broken.mkdir()
    target = tmp_path / "never.md"
    code, out = invoke("report", str(broken), "-o", str(target))
    assert code == 2 and not target.exists(), out  # no night, no file


def test_the_night_ends_naming_both_summaries_and_the_next_steps(night: Path) -> None:
    written = write_night_summary(night)
    lines = night_end_lines(night, written)
    assert lines == ["controls: 2/3 controls accepted (1 after rerun); 1 deferred · "
                     "regressions: not judged: 2 controls with no call sealed",
                     f"summary: {night / 'summary.md'}", f"summary: {night / 'summary.html'}",
                     f"next: harness report {night}"]  # nothing left to rerun: c has no run
    refused = make_night(night.parent.parent.parent / "other", rerun=None)
    lines = night_end_lines(refused, write_night_summary(refused))
    assert lines[0] == ("controls: 1/3 controls accepted; 1 deferred, 1 refused · regressions: "
                        "not judged: no call sealed")
    assert lines[-2:] == [f"next: harness rerun --failed {refused} --reason WHY   (1 control "
                          "to rerun once fixed)", f"next: harness report {refused}"]
    odd = night.parent / "it's $(odd)\x1b[2J"
    lines = end_lines(odd, [odd / "summary.md"], None)
    assert "\x1b" not in "".join(lines)
    assert lines[-1] == "next: harness report '" + str(odd.parent) + "/it'\"'\"'s $(odd)\\x1b[2J'"
    assert end_lines(night, [], None) == []


def test_status_shows_the_latest_night_of_each_campaign_with_its_end(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    make_night(runs, "alpha", "20261130T020000Z", ended="2026-11-30T02:40:00Z")
    make_night(runs, "alpha", STAMP, ended="2026-12-01T02:30:00Z")
    make_night(runs, "beta", "20261201T010000Z", ended=None)  # stopped, never ended
    state = gather(runs, tmp_path / "gpu.lock", timers=False)
    assert [os.path.basename(n["dir"]) for n in state["nights"]] == [
        f"alpha-{STAMP}", "beta-20261201T010000Z"]
    lines = render(state)
    start = lines.index("latest night per campaign:")
    alpha, beta = lines[start + 1: start + 3]
    assert alpha == (f"  alpha: alpha-{STAMP}, ended 2026-12-01T02:30:00Z (done): "
                     "2/3 done; accepted 2, deferred 1")
    assert beta.startswith("  beta: beta-20261201T010000Z, stopped, last change 20")
    assert beta.endswith(": 2/3 done; accepted 2, deferred 1")
    # one count: the report's final statuses per control are status's states
    report = summary_for_night(runs / "nights" / f"alpha-{STAMP}")
    assert report["controls"]["final"] == {"accepted": 2, "deferred": 1}
    assert any(line.startswith(f"night {runs / 'nights' / f'alpha-{STAMP}'} (alpha, ended ")
               for line in lines)


def test_status_command_prints_each_campaign(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    make_night(runs, "alpha")
    make_night(runs, "beta", "20261201T010000Z")
    code, out = invoke("status", "--runs-dir", str(runs), "--lock", str(tmp_path / "gpu.lock"))
    assert code == 0, out
    assert "latest night per campaign:\n" in out
    assert f"  alpha: alpha-{STAMP}, ended 2026-12-01T02:30:00Z (done): 2/3 done" in out
    assert "  beta: beta-20261201T010000Z, ended 2026-12-01T02:30:00Z (done): 2/3 done" in out


def test_timers_are_parsed_from_systemctl_and_shown_inert() -> None:
    text = "\n".join([
        "Thu 2026-12-03 02:15:00 UTC 9h left Wed 2026-12-02 02:15:03 UTC 14h ago "
        "harness-night-rehearsal.timer harness-night-rehearsal.service",
        "Thu 2026-12-03 00:00:00 UTC 6h left n/a n/a logrotate.timer logrotate.service",
        "n/a n/a n/a n/a harness-night-idle.timer harness-night-idle.service",
        "-   -  -  - harness-night-x\\x2dy.timer harness-night-x\\x2dy.service",
        "garbage",
    ])
    timers = parse_timers(text)
    assert timers == [
        {"unit": "harness-night-rehearsal.timer", "next": "Thu 2026-12-03 02:15:00 UTC",
         "left": "9h left"},
        {"unit": "harness-night-idle.timer", "next": None, "left": None},
        {"unit": "harness-night-x\\x2dy.timer", "next": None, "left": None},
    ]
    assert timer_lines(timers) == [
        "next night: harness-night-rehearsal.timer at Thu 2026-12-03 02:15:00 UTC (9h left)",
        "next night: harness-night-idle.timer has no next trigger (inactive)",
        "next night: harness-night-x\\x2dy.timer has no next trigger (inactive)"]
    [hostile] = parse_timers("Thu 2026-12-03 02:15:00 UTC 1h left\x1b[2J "
                             "harness-night-a.timer b")
    assert "\x1b" not in json.dumps(hostile, ensure_ascii=False)
