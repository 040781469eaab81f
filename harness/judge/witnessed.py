"""The launcher witness against the recorded vector: the process that ran is the one the
run says it launched.

A witness is evidence only when it saw the launcher after its exec and saw the docker
argv the run recorded; otherwise it refuses the run with its own rule. Pure."""

from __future__ import annotations

from typing import Any

from harness.base.catalogue import WITNESS_ARGV_DIFFERS, WITNESS_EXEC_UNCONFIRMED
from harness.base.reason import HARNESS, Reason
from harness.base.tree import printable

BY = HARNESS


def _shown(value: Any) -> str:
    return printable(repr(value))[:200]


def _interpreted(got: Any, argv: list[str], program: Any) -> bool:
    """A launcher that is a script (a `docker` wrapper) runs as its interpreter: the kernel
    makes its argv `interpreter [option] PATH argv[1:]`, PATH being the one exec'd."""
    extra = len(got) - len(argv) if isinstance(got, list) else 0
    return (isinstance(program, str) and bool(argv) and extra in (1, 2)
            and got[extra:] == [program, *argv[1:]])


def judge(doc: dict[str, Any] | None, argv: list[str]) -> list[Reason]:
    """Why the launcher witness `doc` does not vouch for a launch of `argv` ([] when it
    does): it must have confirmed the exec, and seen exactly `argv`."""
    if not isinstance(doc, dict):
        return [Reason(WITNESS_EXEC_UNCONFIRMED, "no launcher witness was taken", BY)]
    seen = doc.get("exec")
    if doc.get("error") or not isinstance(seen, dict) or seen.get("confirmed") is not True:
        why = (doc.get("error") or
               (f"after {seen.get('waited_s')} s the launcher (pid {doc.get('pid')}) did "
                f"not run {seen.get('program')} with its arguments readable"
                if isinstance(seen, dict) else "the witness did not wait for the exec"))
        return [Reason(WITNESS_EXEC_UNCONFIRMED, printable(str(why))[:500], BY)]
    got = doc.get("argv")
    if got == argv or _interpreted(got, argv, seen.get("program")):
        return []
    if not isinstance(got, list):
        return [Reason(WITNESS_ARGV_DIFFERS, f"the witness read no argv ({_shown(got)})", BY)]
    at = next((i for i, (a, b) in enumerate(zip(got, argv, strict=False)) if a != b),
              min(len(got), len(argv)))
    return [Reason(WITNESS_ARGV_DIFFERS,
                   f"argv[{at}] is {_shown(got[at] if at < len(got) else None)} in the "
                   f"witness, {_shown(argv[at] if at < len(argv) else None)} in the vector "
                   f"({len(got)} and {len(argv)} arguments)", BY)]
