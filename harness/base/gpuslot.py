"""A GPU slot, named by its lock file: the night lock, the container label and the holder
record are derived here from that one path, so no caller spells a suffix itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

HOLDER_SUFFIX = ".holder.json"
NIGHT_SUFFIX = ".night"


@dataclass(frozen=True)
class GpuSlot:
    lock: Path

    @classmethod
    def at(cls, path: str | os.PathLike[str]) -> GpuSlot:
        """The slot of the lock at `path` (`~` and variables expanded, made absolute)."""
        return cls(Path(os.path.abspath(os.path.expandvars(os.path.expanduser(str(path))))))

    @property
    def night_lock(self) -> Path:
        """The lock a night or a rerun holds for this slot while it drives it."""
        return self.lock.with_name(self.lock.name + NIGHT_SUFFIX)

    @property
    def label(self) -> str:
        """The value of a container's lock label: which GPU slot it runs on."""
        return str(self.lock)


def holder_path(lock: Path) -> Path:
    """The holder record beside any lock file (the GPU's, a night's)."""
    return lock.with_name(lock.name + HOLDER_SUFFIX)
