"""Reading observation documents from files, with every fault named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.instrument.harness_observer.encode import DecodeError, read_observation


class DocumentError(ValueError):
    """An observation that is missing or unreadable; `faults` says why."""

    def __init__(self, faults: list[str]) -> None:
        super().__init__("; ".join(faults))
        self.faults = faults


def read_document(path: Path) -> dict[str, Any]:
    try:
        text = Path(path).read_bytes().decode()
    except FileNotFoundError:
        raise DocumentError([f"{path}: no such file"]) from None
    except (OSError, UnicodeDecodeError) as e:
        raise DocumentError([f"{path}: cannot read: {e}"]) from None
    try:
        return read_observation(text)
    except DecodeError as e:
        raise DocumentError([f"{path}: {fault}" for fault in str(e).split("; ")]) from None
    except RecursionError:
        raise DocumentError([f"{path}: values nested too deeply to compare"]) from None
