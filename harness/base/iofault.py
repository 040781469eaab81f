"""OS errors that say the host cannot take our writes, in words an operator acts on.

A read-only, full or forbidden runs folder is an environment fault (exit 3), not a bug: it
must never surface as "internal error: OSError ...". One table, used by the place that
creates the runs folder and by the command line's last-resort handler."""

from __future__ import annotations

import errno

from harness.base.catalogue import ENV_DISK_FULL, ENV_IO, ENV_PERMISSION, ENV_READ_ONLY
from harness.base.errors import EnvironmentFault, HarnessError

_WORDS = {
    errno.EROFS: (ENV_READ_ONLY, "read-only file system"),
    errno.ENOSPC: (ENV_DISK_FULL, "no space left on device"),
    errno.EDQUOT: (ENV_DISK_FULL, "disk quota exceeded"),
    errno.EACCES: (ENV_PERMISSION, "permission denied"),
    errno.EPERM: (ENV_PERMISSION, "operation not permitted"),
}


def describe(e: OSError) -> tuple[str, str]:
    """(rule id, lower-case words) for an OSError. Pure."""
    if e.errno in _WORDS:
        return _WORDS[e.errno]
    return ENV_IO, (e.strerror or type(e).__name__).lower()


def io_fault(e: OSError, doing: str) -> EnvironmentFault:
    """`doing` is what failed, e.g. "cannot write the runs folder /x"; the rule names why."""
    rule, words = describe(e)
    return EnvironmentFault(f"{doing}: {words}", rule=rule)


def io_fault_anywhere(e: OSError) -> EnvironmentFault:
    """For an OSError nobody caught: name the file it was about, if it says."""
    where = e.filename if e.filename is not None else "a file"
    return io_fault(e, f"cannot use {where}")


def as_fault(error: HarnessError | OSError) -> HarnessError:
    """The harness error a failure is: itself, or for a read or write the host refused
    (read-only, full: not a bug) the environment fault naming its file. The plain form
    (`cli.main`) and the JSON form (`cli.jsonout`) say the same."""
    return error if isinstance(error, HarnessError) else io_fault_anywhere(error)
