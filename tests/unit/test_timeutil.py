"""The one evidence time format: written by utc_now()/iso(), read back by parse()."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from harness.base import timeutil

EVIDENCE = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z"


def test_utc_now_is_the_evidence_format_and_round_trips():
    now = timeutil.utc_now()
    assert re.fullmatch(EVIDENCE, now)
    assert timeutil.iso(timeutil.parse(now)) == now


def test_iso_converts_any_zone_to_utc_and_refuses_a_naive_time():
    paris = datetime(2026, 11, 30, 9, 30, 0, 5, tzinfo=timezone(timedelta(hours=1)))
    assert timeutil.iso(paris) == "2026-11-30T08:30:00.000005Z"
    with pytest.raises(ValueError, match="time zone"):
        timeutil.iso(datetime(2026, 11, 30, 8, 30))


@pytest.mark.parametrize(
    "old",
    [
        "2026-11-30T08:30:00Z",  # whole seconds, as journals wrote them
        "2026-11-30T08:30:00+00:00",  # datetime.isoformat(), as finalize addenda wrote it
        "2026-11-30T09:30:00.000000+01:00",
    ],
)
def test_parse_still_reads_the_older_forms(old):
    assert timeutil.parse(old) == datetime(2026, 11, 30, 8, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    "bad", ["2026-11-30T08:30:00", "20261130T083000Z", "2026-11-30", "yesterday", "", None]
)
def test_parse_refuses_what_is_not_an_evidence_stamp(bad):
    with pytest.raises(ValueError):
        timeutil.parse(bad)


def test_parse_or_none_reads_evidence_times_leniently_and_never_raises():
    from datetime import UTC, datetime

    from harness.base.timeutil import parse_or_none

    assert parse_or_none("2026-01-01T00:00:05Z") == datetime(2026, 1, 1, 0, 0, 5, tzinfo=UTC)
    assert parse_or_none("2026-01-01T01:00:05+01:00") == datetime(2026, 1, 1, 0, 0, 5,
                                                                  tzinfo=UTC)
    assert parse_or_none("2026-01-01T00:00:05") == datetime(2026, 1, 1, 0, 0, 5, tzinfo=UTC)
    for bad in (None, 5, "", "yesterday", "2026-13-01T00:00:00Z", "2026-01-01 00:00:00",
                "2026-01-01T00:00:00Z\n"):
        assert parse_or_none(bad) is None
