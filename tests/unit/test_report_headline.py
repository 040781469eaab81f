"""The morning headline counts controls, not attempts: a slot's newest attempt speaks for
its control, every older attempt is marked superseded by the one after it, and a row that
did not end accepted carries its Gate-0 values and the commands to go on, as inert text
(harness.readers.report.headline, steps, summary; pure, no Docker, no files)."""

from __future__ import annotations

import re
import shlex
import subprocess
from html.parser import HTMLParser
from pathlib import Path

from harness.readers.report.headline import attempts_text, headline, tally
from harness.readers.report.page import render_html
from harness.readers.report.steps import MAX_FIELDS, OTHER_PLACEHOLDER, gate0_lines
from harness.readers.report.summary import build_summary, render_markdown
from harness.readers.report.table import render_table

NIGHT = {"name": "camp-20261201T020000Z", "dir": "/runs/nights/camp-20261201T020000Z"}


class Rows:
    """Journal rows as `Journal.rows()` gives them (as_dict), built one attempt at a time."""

    def __init__(self) -> None:
        self.records: list[dict] = []

    def add(self, plan: int, control: str, state: str, *, rerun_of: int | None = None,
            origin: str = "plan", run: bool = True, gate0: list | None = None) -> int:
        """One attempt; `rerun_of` is the row id of the attempt it repeats. Returns its id."""
        row_id = len(self.records) + 1
        attempt = 1 + sum(r["row"]["plan_index"] == plan for r in self.records)
        run_id = f"{control}-{row_id}" if run else None
        row = {"id": row_id, "plan_index": plan, "control": control, "attempt": attempt,
               "state": state, "run_id": run_id, "run_dir": run_id, "rerun_of": rerun_of,
               "origin": origin, "link_reason": "fixed" if origin == "rerun" else None}
        record: dict = {"row": row, "gate0": gate0}
        if run:
            record["path"] = f"/runs/{run_id}"
            record["run"] = {"run_id": run_id, "status": state, "control": {"name": control},
                             "reasons": [] if state == "accepted" else [f"{state} on purpose"]}
        self.records.append(record)
        return row_id

    def summary(self, trends: dict | None = None) -> dict:
        return build_summary(NIGHT, self.records, trends)


def by_run(summary: dict) -> dict[str, dict]:
    return {e["run_id"]: e for e in summary["runs"] if e["run_id"]}


def test_all_accepted_is_every_control_and_nothing_superseded() -> None:
    rows = Rows()
    for i, name in enumerate(("a", "b", "c")):
        rows.add(i, name, "accepted")
    s = rows.summary()
    assert s["headline"] == ("3/3 controls accepted · regressions: not judged: 3 controls with "
                             "no call sealed")
    assert s["attempts"] == "3 accepted"
    assert [e["number"] for e in s["runs"]] == [1, 2, 3]  # numbered from 1
    assert all(e["superseded_by"] is None and e["next"] == [] for e in s["runs"])
    assert f"**{s['headline']}**" in render_markdown(s)


def test_refused_then_accepted_after_rerun_counts_the_control_once() -> None:
    rows = Rows()
    rows.add(0, "a", "accepted")
    first = rows.add(1, "b", "refused")
    rows.add(2, "c", "accepted")
    rows.add(1, "b", "accepted", rerun_of=first, origin="rerun")  # the journal adds it last
    s = rows.summary()
    assert s["headline"] == ("3/3 controls accepted (1 after rerun)"
                             " · regressions: not judged: 3 controls with no call sealed")
    assert s["attempts"] == "3 accepted, 1 refused (1 superseded)"
    assert s["controls"]["final"] == {"accepted": 3}
    # the rerun reads under the attempt it replaced, with its slot's number
    assert [(e["number"], e["control"], e["attempt"]) for e in s["runs"]] == [
        (1, "a", 1), (2, "b", 1), (2, "b", 2), (3, "c", 1)]
    old, new = by_run(s)["b-2"], by_run(s)["b-4"]
    assert old["superseded_by"] == "b-4" and new["superseded_by"] is None
    # replaced: no rerun command, only the diff against what replaced it
    assert old["next"] == ["harness diff /runs/b-2 /runs/b-4"] and new["next"] == []


def test_refused_and_not_rerun_says_so_and_offers_both_commands() -> None:
    rows = Rows()
    rows.add(0, "a", "accepted")
    rows.add(1, "b", "refused")
    s = rows.summary()
    assert s["headline"] == ("1/2 controls accepted; 1 refused · regressions: not judged: "
                             "no call sealed")
    assert s["attempts"] == "1 accepted, 1 refused"
    assert by_run(s)["b-2"]["next"] == ["harness rerun /runs/b-2 --reason WHY",
                                        f"harness diff /runs/b-2 {OTHER_PLACEHOLDER}"]


def test_refused_row_diffs_against_an_earlier_nights_accepted_run() -> None:
    rows = Rows()
    rows.add(0, "b", "refused")
    trends = {"b": [("camp-20261130T020000Z", {"status": "accepted", "run_id": "b-old"}),
                    (NIGHT["name"], {"status": "refused", "run_id": "b-1"})]}
    [entry] = rows.summary(trends)["runs"]
    # the earlier run's folder is in the same runs dir as the night's: RUNS_DIR/<run id>
    assert entry["next"][1] == "harness diff /runs/b-1 /runs/b-old"


def test_a_rerun_refused_again_is_one_refused_control() -> None:
    rows = Rows()
    first = rows.add(0, "g", "refused")
    rows.add(0, "g", "refused", rerun_of=first, origin="rerun")
    s = rows.summary()
    assert s["headline"] == "0/1 control accepted; 1 refused (1 after rerun)"
    assert s["attempts"] == "2 refused (1 superseded)"
    old, new = s["runs"]
    assert old["superseded_by"] == "g-2"
    assert old["next"] == ["harness diff /runs/g-1 /runs/g-2"]
    assert new["next"] == ["harness rerun /runs/g-2 --reason WHY",
                           f"harness diff /runs/g-2 {OTHER_PLACEHOLDER}"]


def test_deferred_interrupted_and_planned_slots_end_as_they_stand() -> None:
    rows = Rows()
    rows.add(0, "a", "deferred", run=False)
    rows.add(1, "b", "interrupted")
    rows.add(2, "c", "planned", run=False)
    cut = rows.add(3, "d", "interrupted")
    rows.add(3, "d", "accepted", rerun_of=cut, origin="retry")
    s = rows.summary()
    assert s["headline"] == ("1/4 controls accepted (1 after retry); 1 deferred, "
                             "1 interrupted, 1 planned · regressions: not judged: no call sealed")
    assert s["attempts"] == "1 accepted, 1 deferred, 2 interrupted, 1 planned (1 superseded)"
    runs = {(e["control"], e["attempt"]): e for e in s["runs"]}
    assert runs[("d", 1)]["superseded_by"] == "d-5"
    assert runs[("b", 1)]["next"][0] == "harness rerun /runs/b-2 --reason WHY"
    assert runs[("a", 1)]["next"] == runs[("c", 1)]["next"] == []  # no run folder to go on from
    [line] = [x for x in render_table(s, 100).splitlines() if re.match(r"\s+4\s+d\s+1\s", x)]
    assert " (interrupted) " in line  # the STATUS column fits a superseded attempt's status


def test_two_reruns_of_the_same_run_are_one_control() -> None:
    rows = Rows()
    first = rows.add(0, "k", "refused")
    rows.add(0, "k", "refused", rerun_of=first, origin="rerun")
    rows.add(0, "k", "accepted", rerun_of=first, origin="rerun")  # both name the original
    s = rows.summary()
    assert s["headline"] == ("1/1 control accepted (1 after rerun) · regressions: not judged: "
                             "no call sealed")
    assert s["attempts"] == "1 accepted, 2 refused (2 superseded)"
    one, two, three = s["runs"]
    assert (one["superseded_by"], two["superseded_by"], three["superseded_by"]) == (
        "k-2", "k-3", None)
    assert one["reruns"] == ["k-2", "k-3"] and two["rerun_of"] == three["rerun_of"] == "k-1"
    assert [e["number"] for e in s["runs"]] == [1, 1, 1]


def test_without_a_journal_the_rerun_index_ties_attempts_to_their_slot() -> None:
    entries = [{"run_id": "x-1", "status": "refused", "attempt": None},
               {"run_id": "y-1", "status": "accepted", "attempt": None},
               {"run_id": "x-2", "status": "accepted", "attempt": None}]
    untied = tally(entries)
    assert headline(untied) == "2/3 controls accepted; 1 refused"
    tied = tally(entries, {"x-2": "x-1"})  # RUNS_DIR/reruns.jsonl: x-2 reran x-1
    assert headline(tied) == "2/2 controls accepted (1 after rerun)"
    assert tied["superseded"] == {0: "x-2"}
    assert attempts_text(tied) == "2 accepted, 1 refused (1 superseded)"
    assert headline(tally([])) == "no controls" and attempts_text(tally([])) == "no runs"


def test_a_superseded_attempt_is_marked_in_every_form() -> None:
    rows = Rows()
    first = rows.add(0, "b", "refused")
    rows.add(0, "b", "accepted", rerun_of=first, origin="rerun")
    s = rows.summary()
    md = render_markdown(s).splitlines()
    [old] = [line for line in md if line.startswith("| 1 | b | 1 |")]
    [new] = [line for line in md if line.startswith("| 1 | b | 2 |")]
    assert "| refused, superseded by b-2 |" in old and "**" not in old  # not bold: replaced
    assert "| **accepted** |" in new
    page = render_html(s)
    rows_html = re.findall(r"<tr[^>]*>.*?</tr>", page, flags=re.S)
    assert rows_html[1].startswith('<tr class="superseded">')  # greyed by the page's CSS
    assert "refused (superseded)" in rows_html[1] and "tr.superseded td{color:#888" in page
    assert not rows_html[2].startswith('<tr class="superseded"')
    table = render_table(s, 100).splitlines()
    [old_line] = [line for line in table if re.match(r"\s+1\s+b\s+1\s", line)]
    assert "(refused)" in old_line and "superseded by b-2" in old_line


def test_refused_row_shows_its_gate0_values_inline_capped() -> None:
    diffs = [{"field": f"compilation.f{i}", "process": "engine-core", "kind": "value-changed",
              "startup": ["+a", "none"], "generation": ["+a", "none", "+a"]}
             for i in range(MAX_FIELDS + 2)]
    rows = Rows()
    rows.add(0, "g", "refused", gate0=diffs)
    s = rows.summary()
    [entry] = s["runs"]
    lines = gate0_lines(entry["gate0"])
    assert lines[0] == ('in engine-core: compilation.f0: start-up ["+a", "none"], '
                        'generation ["+a", "none", "+a"]')
    assert len(lines) == MAX_FIELDS + 1 and lines[-1].startswith("… and 2 more fields")
    assert f"Gate 0 {lines[0]}" in render_table(s, 100)
    assert "Gate 0 in engine-core: compilation.f0: start-up" in render_markdown(s)
    assert "compilation.f6" not in render_markdown(s)  # past MAX_FIELDS: `harness show`


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.hrefs += [v or "" for k, v in attrs if k == "href"]


EVIL = ("x$(touch pwned)`touch pwned2`;touch pwned3 '\"<script>alert(1)</script>"
        "<img src=x onerror=alert(2)>\x1b[2J\x1b]8;;http://evil\x07\n| fake | row |"
        "*_[l](javascript:1)")


def hostile_summary() -> dict:
    diff = {"field": "f<script>" + EVIL, "process": "p\x1b[31m", "startup": [EVIL],
            "generation": {"k": EVIL}}
    record = {"row": {"id": 1, "plan_index": 0, "control": EVIL, "attempt": 1,
                      "state": "refused", "run_id": "r" + EVIL, "run_dir": "/runs/" + EVIL,
                      "rerun_of": None, "origin": "plan"},
              "run": {"status": "refused", "reasons": [EVIL]}, "gate0": [diff]}
    return build_summary({"name": "n", "dir": "/runs/nights/" + EVIL}, [record])


def test_hostile_names_stay_inert_in_every_form() -> None:
    s = hostile_summary()
    for text in (render_table(s, 100), render_markdown(s), render_html(s)):
        assert "\x1b" not in text and "\x07" not in text
    md = render_markdown(s)
    # every character that could start markup is backslash-escaped: none is live
    assert not re.search(r"(?<!\\)[<>`]", md) and not re.search(r"(?<!\\)\]\(", md)
    # one row in the table, however many pipes and newlines the name holds
    assert len([line for line in md.splitlines() if line.startswith("| 1 |")]) == 1
    assert "| fake | row |" not in md
    tags = Tags()
    tags.feed(render_html(s))
    assert "script" not in tags.tags and "img" not in tags.tags
    assert not any(h.startswith("javascript") for h in tags.hrefs)
    table = render_table(s, 100)
    assert all(not line.startswith("| fake") for line in table.splitlines())


def test_next_commands_are_quoted_shell_words(tmp_path: Path) -> None:
    [entry] = hostile_summary()["runs"]
    rerun, diff = entry["next"]
    words = shlex.split(rerun)
    assert words[:2] == ["harness", "rerun"] and words[3:] == ["--reason", "WHY"]
    assert words[2].startswith("/runs/x$(touch pwned)`touch pwned2`;touch pwned3 '")
    assert shlex.split(diff)[3:] == [OTHER_PLACEHOLDER]
    # a real shell reads each command as exactly these words, and runs nothing inside them
    for cmd, expected in ((rerun, words[1:]), (diff, shlex.split(diff)[1:])):
        out = subprocess.run(["sh", "-c", "printf '%s\\n' " + cmd.removeprefix("harness ")],
                             cwd=tmp_path, capture_output=True, text=True, check=True)
        assert out.stdout.splitlines() == expected
    assert list(tmp_path.iterdir()) == []  # no `touch` ran
    md = render_markdown(hostile_summary())
    # a command holding markup is escaped text in Markdown, never a raw code line
    assert "\n    harness rerun" not in md and "- harness rerun '/runs/x$(touch" in md


def test_the_table_fits_the_terminal_by_shortening_long_control_names() -> None:
    rows = Rows()
    rows.add(0, "rehearsal-gate0-inproc", "accepted")
    rows.add(1, "b", "refused")
    s = rows.summary()
    wide = render_table(s, 100).splitlines()
    [row] = [line for line in wide if line.lstrip().startswith("1  ")]
    assert "rehearsal-gate0-inproc " in row and len(row) <= 100  # 22 characters fit whole
    narrow = [line for line in render_table(s, 82).splitlines()
              if re.match(r"\s+(#|\d)\s", line)]
    assert len(narrow) == 3 and all(len(line) <= 82 for line in narrow)
    assert "rehearsal-gate0…" in narrow[1]  # the name gave up width, marked where cut
    short = [line for line in render_table(s, 60).splitlines() if re.match(r"\s+\d\s", line)]
    assert all(len(line) <= 78 for line in short)  # the narrowest the columns allow
