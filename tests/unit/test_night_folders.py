"""Night folder names have one owner: made by the runner, parsed by reports and status."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.measure.nightfolder.naming import (
    latest_night,
    night_folders,
    night_name,
    parse_night_name,
)


def test_a_name_made_is_parsed_back() -> None:
    name = night_name("rehearsal-night", "20261130T021500Z")
    assert name == "rehearsal-night-20261130T021500Z"
    assert parse_night_name(name) == ("rehearsal-night", "20261130T021500Z")
    with pytest.raises(ValueError):
        night_name("camp", "yesterday")


@pytest.mark.parametrize("name", ["camp", "camp-20261130T0215Z", "-20261130T021500Z",
                                  "camp-20261130T021500Z.bak", "camp_20261130T021500Z"])
def test_other_names_are_not_nights(name: str) -> None:
    assert parse_night_name(name) is None


def test_folders_of_one_campaign_oldest_first_and_the_latest_of_any(tmp_path: Path) -> None:
    for name in ("a-20261129T000000Z", "a-b-20261130T000000Z", "a-20261128T000000Z",
                 "notes", "a-20261127T000000Z.old"):
        (tmp_path / name).mkdir()
    (tmp_path / "a-20261201T000000Z").write_text("a file, not a night")
    assert [p.name for p in night_folders(tmp_path, "a")] == [
        "a-20261128T000000Z", "a-20261129T000000Z"]
    assert [p.name for p in night_folders(tmp_path, "a-b")] == ["a-b-20261130T000000Z"]
    assert latest_night(tmp_path).name == "a-b-20261130T000000Z"
    assert latest_night(tmp_path / "none") is None and night_folders(tmp_path / "x", "a") == []
