"""Hostile night journals: a schema that is not the harness's own (a view posing as `runs`, a
generated column, a trigger, a dropped column), values of the wrong type or of absurd length,
and terminal escapes in journal text. Each is refused as a damaged journal, or shown inert,
by `Journal.open` / the row builders, `report`, `status` and the live night display."""

from __future__ import annotations

import io
import sqlite3
import time
from pathlib import Path

import pytest
from rich.console import Console

from harness.base.errors import EnvironmentFault
from harness.cli.display import NightLive
from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.naming import JOURNAL_NAME
from harness.readers.statuslines import night_state, render
from tests.inprocess import invoke

OSC8 = "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\"
ESC = "\x1b[2J\x1b[31m"
DAMAGED = EnvironmentFault.code  # the existing damaged-journal exit status


def night_dir(tmp_path: Path, campaign: str = "camp", control: str = "kv") -> Path:
    night = tmp_path / "camp-20260101T000000Z"
    night.mkdir()
    Journal.create(night / JOURNAL_NAME, campaign=campaign, campaign_file="c.yaml",
                   plan=[(control, 0), ("b", 0)]).close()
    return night


def edit(night: Path, *sql: str) -> None:
    conn = sqlite3.connect(night / JOURNAL_NAME, isolation_level=None)
    try:
        for statement in sql:
            conn.execute(statement)
    finally:
        conn.close()


def refused(night: Path, why: str) -> None:
    """Refused by every reader (report, status, a writable open for resume), file untouched."""
    path = night / JOURNAL_NAME
    before = path.read_bytes()
    for readonly in (True, False):
        with pytest.raises(EnvironmentFault, match=f"damaged.*{why}"):
            Journal.open(path, readonly=readonly).rows()
    start = time.monotonic()
    code, out = invoke("report", str(night))
    assert code == DAMAGED and "damaged" in out and "internal error" not in out, out
    assert time.monotonic() - start < 10
    state = night_state(night, None)
    assert "damaged" in state["error"]
    assert path.read_bytes() == before


COMPUTED = "hex(zeroblob(3000000))"  # 6 MB per read here; the red team used 200 MB (4 GiB RSS)
COLUMNS = ("id, plan_index, control, repeat_index, attempt, state, run_id, run_dir, {reason}, "
           "rerun_of, origin, link_reason, updated")


@pytest.mark.parametrize("sql", [
    # a VIEW named like the table, computing `reason`
    ("ALTER TABLE runs RENAME TO runs_real",
     f"CREATE VIEW runs AS SELECT {COLUMNS.format(reason=COMPUTED + ' AS reason')} "
     "FROM runs_real"),
    # a generated column next to the real ones
    (f"ALTER TABLE runs ADD COLUMN big TEXT AS ({COMPUTED}) VIRTUAL",),
    # a trigger, an extra index, an extra table
    ("CREATE TRIGGER t AFTER UPDATE ON runs BEGIN SELECT 1; END",),
    ("CREATE INDEX i ON runs(reason)",),
    ("CREATE TABLE extra (x)",),
    # a dropped column (was: internal error, OperationalError: no such column)
    ("ALTER TABLE runs DROP COLUMN link_reason",),
    # the table's SQL itself rewritten: reason computed by a generated column of the same name
    ("PRAGMA writable_schema=ON",
     "UPDATE sqlite_master SET sql = replace(sql, 'reason TEXT,', "
     f"'reason TEXT AS ({COMPUTED}) VIRTUAL,') WHERE name = 'runs'"),
])
def test_a_schema_other_than_the_harness_own_is_refused(tmp_path: Path, sql: tuple) -> None:
    night = night_dir(tmp_path)
    edit(night, *sql)
    refused(night, "schema")


def test_an_over_long_stored_value_is_refused_not_read(tmp_path: Path) -> None:
    night = night_dir(tmp_path)
    edit(night, "UPDATE runs SET reason = hex(zeroblob(3000000))")  # 6 MB, a real value
    refused(night, "too big")


@pytest.mark.parametrize("sql", [
    "UPDATE runs SET reason = X'00ff'",  # BLOB (was: TypeError: can't concat str to bytes)
    "UPDATE runs SET control = X'6b76'",
    "UPDATE runs SET attempt = 1.5",
    "UPDATE runs SET repeat_index = 'x'",  # TEXT affinity keeps 7 as '7': use text
    "UPDATE night SET campaign = X'00'",
    "UPDATE night SET seal = X'01'",
])
def test_values_of_the_wrong_type_are_damage(tmp_path: Path, sql: str) -> None:
    night = night_dir(tmp_path)
    edit(night, sql)
    refused(night, "holds a (bytes|float|str) value")


def test_a_state_outside_the_schema_is_damage(tmp_path: Path) -> None:
    night = night_dir(tmp_path)
    edit(night, "PRAGMA ignore_check_constraints=ON", "UPDATE runs SET state = 'accepted!'")
    refused(night, "state")


@pytest.mark.parametrize("rules", ["not json", '{"ENV-IO": 1}', '[1]', '[""]',
                                   '["' + "R" * 300 + '"]', "[" + ", ".join(['"R"'] * 300) + "]"])
def test_rules_that_are_not_a_short_list_of_rule_ids_are_damage(tmp_path: Path,
                                                                rules: str) -> None:
    night = night_dir(tmp_path)
    edit(night, f"UPDATE runs SET rules = '{rules}', exit_class = 1")
    refused(night, "rules")


def test_an_exit_class_of_another_type_is_damage(tmp_path: Path) -> None:
    night = night_dir(tmp_path)
    edit(night, "PRAGMA ignore_check_constraints=ON", "UPDATE runs SET exit_class = 'x'")
    refused(night, "holds a str value")


def test_a_read_error_after_open_is_the_damaged_journal_error(tmp_path: Path) -> None:
    night = night_dir(tmp_path)
    with Journal.open(night / JOURNAL_NAME, readonly=True) as j:
        edit(night, "DROP TABLE events")
        with pytest.raises(EnvironmentFault, match=r"damaged.*no such table"):
            j.events()


def test_status_shows_journal_text_inert(tmp_path: Path) -> None:
    night = night_dir(tmp_path, campaign="camp" + ESC, control=OSC8)
    state = night_state(night, None)
    assert state["campaign"] == "camp" + ESC  # the data is kept as it is; only display changes
    status = {"lock": {"path": "/l", "held": False, "problem": None, "holder": None,
                       "night_holder": None},
              "containers": [{"id": "c", "name": "n" + ESC, "run_id": "r", "campaign": "c",
                              "control": OSC8, "status": "up"}],
              "engine_error": None, "night": state}
    text = "\n".join(render(status))
    assert "\x1b" not in text and "\\x1b]8;;http://evil.example" in text
    assert "\\x1b[2J" in text


def test_the_live_night_panel_shows_text_inert() -> None:
    live = NightLive.__new__(NightLive)  # without starting rich's Live thread
    buf = io.StringIO()
    live.console = Console(file=buf, force_terminal=True, color_system=None, width=200)
    live.campaign, live.t0, live.done, live.total = "camp" + ESC, time.monotonic(), 0, 2
    live.fields = {"night": "-", "control": "-", "lock": "-", "run": "-"}
    live.event("control-start", control=OSC8, attempt=1)
    live.event("run", run_id="r" + ESC)
    live.console.print(live._render())
    out = buf.getvalue()
    assert "evil.example" in out and "]8;;http" in out
    assert "\x1b]" not in out and "\x1b[2J" not in out and "\x1b[31m" not in out
