"""A rerun of a night's run rewrites the night's summary files through the caller's one
writer; a writer that fails is an event, never a lost rerun (the integration test
tests/integration/test_night_bundle.py runs it for real)."""

from __future__ import annotations

from pathlib import Path

from harness.base.errors import InvalidInput
from harness.driver.rerun import rewrite_summary


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict]] = []

    def event(self, kind: str, **fields: object) -> None:
        self.seen.append((kind, fields))


def test_the_writer_is_called_for_the_night_and_its_files_returned(tmp_path: Path) -> None:
    calls: list[Path] = []

    def write(night: Path) -> list[Path]:
        calls.append(night)
        return [night / "summary.md"]

    ui = Events()
    assert rewrite_summary(tmp_path, write, ui) == [tmp_path / "summary.md"]
    assert calls == [tmp_path] and ui.seen == []
    assert rewrite_summary(tmp_path, None, ui) == []


def test_a_failing_writer_is_an_event(tmp_path: Path) -> None:
    for error in (OSError(28, "No space left on device"), InvalidInput("damaged journal")):
        def write(night: Path, error: Exception = error) -> list[Path]:
            raise error

        ui = Events()
        assert rewrite_summary(tmp_path, write, ui) == []
        [(kind, fields)] = ui.seen
        assert kind == "summary-failed" and fields["night"] == str(tmp_path)
        assert type(error).__name__ in str(fields["error"])
