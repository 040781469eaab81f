"""`harness ls`'s rows (pure): what a folder's bytes say, rerun links, filters, the table;
and the thin reader over a runs dir of a thousand runs."""

from __future__ import annotations

import hashlib
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from harness.base.states import Status
from harness.cli.ls import parse_since
from harness.readers.listing import (
    HEADER,
    NOT_INTACT,
    UNREADABLE,
    UNSEALED,
    Listed,
    cells,
    mark_reruns,
    read_rows,
    render,
    row_of,
    select,
)
from harness.readers.report.format import figure_text

A = "ctl-a-20261201T020000Z-aaaaaaaa"
B = "ctl-b-20261201T030000Z-bbbbbbbb"
C = "ctl-a-20261202T020000Z-cccccccc"
NOW = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)


def _record(run_id: str, status: str, campaign: str = "camp", **extra: object) -> bytes:
    doc = {"schema": "harness.run/v2", "run_id": run_id, "attempt": 1, "status": status,
           "campaign": {"name": campaign}, "control": {"name": run_id.rsplit("-", 2)[0]},
           "times": {"started": "2026-12-01T02:00:00.000000Z",
                     "ended": "2026-12-01T02:01:30.500000Z"}, **extra}
    return json.dumps(doc).encode()


def _sums(data: bytes) -> bytes:
    return f"{hashlib.sha256(data).hexdigest()}  run.json\n".encode()


def test_a_sealed_record_gives_its_fields_and_its_status() -> None:
    data = _record(A, Status.REFUSED)
    row = row_of(A, "/r/" + A, data, _sums(data))
    assert (row.status, row.control, row.campaign, row.attempt) == ("refused", "ctl-a", "camp", 1)
    assert row.duration_s() == pytest.approx(90.5)


@pytest.mark.parametrize(("ended", "shown"), [("02:00:02.500000", "2.5 s"),
                                               ("02:04:05.000000", "4m05s"),
                                               ("03:02:00.000000", "1h02m")])
def test_ls_writes_a_duration_as_the_report_does(ended: str, shown: str) -> None:
    """One grammar for one quantity: `ls`'s DURATION column is the report's duration."""
    data = _record(A, Status.ACCEPTED, times={"started": "2026-12-01T02:00:00.000000Z",
                                              "ended": f"2026-12-01T{ended}Z"})
    row = row_of(A, "/r/" + A, data, _sums(data))
    assert cells(row, NOW)[HEADER.index("DURATION")] == shown
    assert figure_text("duration_s", row.duration_s()) == shown
    assert cells(row_of(A, "", None, None), NOW)[HEADER.index("DURATION")] == "-"


def test_no_folder_is_hidden_whatever_it_holds() -> None:
    data = _record(A, Status.ACCEPTED)
    assert row_of(A, "", None, None).status == UNSEALED
    assert row_of(A, "", data, None).status == UNSEALED  # a record, but never sealed
    assert row_of(A, "", None, _sums(data)).status == UNREADABLE
    assert row_of(A, "", b"[1]", _sums(b"[1]")).status == UNREADABLE
    assert row_of(A, "", b"{nope", b"").status == UNREADABLE
    forged = _record(A, Status.ACCEPTED, campaign="other")
    assert row_of(A, "", forged, _sums(data)).status == NOT_INTACT  # edited after the seal
    assert row_of(A, "", None, None).control == "ctl-a"  # still named from its id


def test_reruns_mark_the_original_superseded_and_the_rerun_as_such() -> None:
    rows = [Listed(A, "refused"), Listed(B, "accepted"), Listed(C, "accepted")]
    index = [json.dumps({"rerun": {"run_id": C}, "original": {"run_id": A}, "at": "2"}),
             "torn {", json.dumps({"rerun": {"run_id": B}, "original": {"run_id": A}, "at": "1"})]
    marked = {r.run_id: r for r in mark_reruns(rows, index)}
    assert marked[A].superseded_by == C  # the newest rerun
    assert marked[C].rerun_of == A and marked[B].rerun_of == A
    assert marked[C].superseded_by is None


def test_filters_and_order() -> None:
    rows = [Listed(A, "refused", "ctl-a", "camp", started="2026-12-01T02:00:00Z"),
            Listed(B, "accepted", "ctl-b", "camp", started="2026-12-01T03:00:00Z"),
            Listed(C, UNSEALED, "ctl-a", None)]  # no start time: its id's stamp counts
    assert [r.run_id for r in select(rows)] == [C, B, A]
    assert [r.run_id for r in select(rows, control="ctl-a")] == [C, A]
    assert [r.run_id for r in select(rows, campaign="camp", last=1)] == [B]
    assert [r.run_id for r in select(rows, status=["refused", UNSEALED])] == [C, A]
    assert [r.run_id for r in select(rows, since=NOW - timedelta(hours=2))] == [C]


def test_since_takes_a_duration_or_a_utc_date() -> None:
    assert parse_since("2h", NOW) == NOW - timedelta(hours=2)
    assert parse_since("2026-12-01", NOW) == datetime(2026, 12, 1, tzinfo=UTC)
    assert parse_since("2026-12-01T02:30Z", NOW) == datetime(2026, 12, 1, 2, 30, tzinfo=UTC)
    with pytest.raises(ValueError):
        parse_since("yesterday", NOW)


def test_the_table_is_aligned_and_inert() -> None:
    rows = [Listed(A, "refused", "ctl-a", "c\x1b[31m", started="2026-12-01T02:00:00Z",
                ended="2026-12-01T02:00:01.5Z", attempt=2, superseded_by=C)]
    head, line = render(rows, NOW)
    assert head.split()[:3] == ["RUN", "ID", "CONTROL"]
    assert "\x1b" not in line and "1d ago" in line and "1.5 s" in line
    assert "superseded by " + C in line
    assert line.index("ctl-a   ") == head.index("CONTROL")


def test_a_thousand_runs_list_in_well_under_two_seconds(tmp_path: Path) -> None:
    for i in range(1000):
        rid = f"ctl-{i % 7}-20261201T{i // 3600:02d}{i // 60 % 60:02d}{i % 60:02d}Z-{i:08x}"
        folder = tmp_path / rid
        folder.mkdir()
        data = _record(rid, Status.ACCEPTED)
        (folder / "run.json").write_bytes(data)
        (folder / "SHA256SUMS").write_bytes(_sums(data))
    start = time.monotonic()
    rows = read_rows(tmp_path)
    took = time.monotonic() - start
    assert len(rows) == 1000 and all(r.status == "accepted" for r in rows)
    assert took < 2.0, f"{took:.2f} s for 1000 runs"
