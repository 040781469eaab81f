"""Reading observation documents from files, with every fault named.

The files come out of a container, so they are hostile: they are read only through the
bounded reader (a FIFO, a device or a huge file is a fault, never a hang) and parsed by the
strict decoder (no huge integers, no lone surrogates, no NaN literals)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from harness.base.readfile import InputError, read_text_bounded
from harness.instrument.harness_observer.encode import DecodeError, read_observation

MAX_BYTES = 16 * 1024 * 1024  # a real observation is a few hundred KiB


class DocumentError(ValueError):
    """An observation that is missing or unreadable; `faults` says why."""

    def __init__(self, faults: list[str]) -> None:
        super().__init__("; ".join(faults))
        self.faults = faults


def read_document(path: Path) -> dict[str, Any]:
    try:
        text = read_text_bounded(path, MAX_BYTES, "observation")
    except InputError as e:
        if not os.path.lexists(path):
            raise DocumentError([f"{path}: no such file"]) from None
        why = e.message.removeprefix(f"{os.fspath(path)}: ")
        if not why.startswith("cannot read"):
            why = f"cannot read: {why}"
        raise DocumentError([f"{path}: {why}"]) from None
    return parse_document(text, str(path))


def parse_document(text: str, where: str) -> dict[str, Any]:
    """Parse one observation's text (already read, bounded); `where` names it in faults."""
    try:
        return read_observation(text)
    except DecodeError as e:
        raise DocumentError([f"{where}: {fault}" for fault in str(e).split("; ")]) from None
    except RecursionError:
        raise DocumentError([f"{where}: values nested too deeply to compare"]) from None
