"""Witnesses are plug-ins with one interface: a registry, one moment each, one file each."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.base.atomic import write_json
from harness.measure import witness
from harness.measure.witness.base import MOMENTS, Subject


def test_registry_names_and_files_are_unique_and_moments_known() -> None:
    names = [w.name for w in witness.WITNESSES]
    files = [w.file for w in witness.WITNESSES]
    assert len(set(names)) == len(names) and len(set(files)) == len(files)
    assert {w.moment for w in witness.WITNESSES} <= set(MOMENTS)
    assert {"launcher", "container"} <= set(names)


def test_take_writes_only_the_witnesses_of_that_moment(tmp_path: Path) -> None:
    taken = witness.take(witness.LAUNCHED, Subject(os.getpid()), tmp_path, write_json)
    assert set(taken) == {w.name for w in witness.WITNESSES if w.moment == witness.LAUNCHED}
    doc = json.loads((tmp_path / "launcher-witness.json").read_text())
    assert doc["pid"] == os.getpid() and doc["schema"] == "harness.measure.witness.launcher/v1"
    assert not (tmp_path / "container-inspect.json").exists()


@dataclass(frozen=True)
class Broken:
    name: str = "broken"
    moment: str = witness.LAUNCHED
    file: str = "broken-witness.json"

    def collect(self, subject: Subject) -> dict:
        raise RuntimeError("no /proc here")


def test_a_raising_witness_is_recorded_and_never_loses_the_others(tmp_path: Path) -> None:
    plugins = (Broken(), *witness.WITNESSES)
    taken = witness.take(witness.LAUNCHED, Subject(os.getpid()), tmp_path, write_json,
                         witnesses=plugins)
    assert taken["broken"]["error"] == "RuntimeError: no /proc here"
    assert json.loads((tmp_path / "broken-witness.json").read_text())["error"]
    assert (tmp_path / "launcher-witness.json").is_file()


def test_unknown_moment_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown witness moment"):
        witness.take("afterwards", Subject(1), tmp_path, write_json)


def test_container_witness_needs_an_id(tmp_path: Path) -> None:
    taken = witness.take(witness.STARTED, Subject(os.getpid()), tmp_path, write_json)
    assert "needs a container id" in taken["container"]["error"]
