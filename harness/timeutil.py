"""UTC time stamps in the one format evidence uses."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> str:
    """ISO-8601 UTC with microseconds and a Z, e.g. 2026-11-30T08:30:00.123456Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def stamp(at: datetime | None = None) -> str:
    """Compact UTC stamp for names: 20261130T083000Z (now, or `at` in any time zone)."""
    return (at or datetime.now(UTC)).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def parse(ts: str) -> datetime:
    return datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
