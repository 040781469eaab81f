"""The `sha256sum` line format, shared by BagIt manifests and each run's SHA256SUMS.

One format everywhere means a reviewer can check every layer with `sha256sum -c`.
Parsing and comparing are pure; files are hashed by `harness.hashing`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.tree import path_problem, printable

# Strict on purpose: lowercase hex and two spaces, exactly as sha256sum writes them, so
# no edit of a manifest (not even a case change) reads as the same manifest.
_LINE = re.compile(r"^([0-9a-f]{64})  (.+)$")
MAX_DETAIL = 300  # a hostile value quoted in a message stays one short line


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the evidence: `kind` is changed, missing, extra, or a short label."""

    kind: str
    path: str
    detail: str = ""

    def __str__(self) -> str:
        """One printable line, whatever hostile name or value the problem quotes."""
        detail = one_line(self.detail)
        if len(detail) > MAX_DETAIL:
            detail = detail[:MAX_DETAIL] + "..."
        tail = f": {detail}" if detail else ""
        return f"{self.kind}: {one_line(self.path)}{tail}"


def one_line(text: str) -> str:
    """`tree.printable` that leaves backslashes alone, so a path `harness.seal` already
    rendered printable is shown as it is, not escaped twice. Idempotent."""
    return "\\".join(printable(part) for part in text.split("\\"))


def unsafe_name_reason(relpath: str) -> str | None:
    """Why a relative path cannot appear in a manifest or an archive, or None if it can:
    the sealable-name policy of `harness.tree`, so a bundle holds exactly what a seal can."""
    return path_problem(relpath)


def format_sums(entries: dict[str, str]) -> str:
    """`sha256sum` output for {relpath: hex}, sorted by path so the bytes are reproducible."""
    return "".join(f"{entries[p]}  {p}\n" for p in sorted(entries))


def parse_sums(text: str, source: str) -> tuple[dict[str, str], list[Problem]]:
    """Read `sha256sum` lines into {relpath: hex}; every malformed or unsafe line is a Problem."""
    entries: dict[str, str] = {}
    problems: list[Problem] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line:
            continue
        match = _LINE.match(line)
        if not match:
            problems.append(Problem("malformed", source, f"line {number} is not a sha256sum line"))
            continue
        digest, path = match.group(1), match.group(2)
        path = path.removeprefix("./")  # `sha256sum ./x` style lines name the same file
        reason = unsafe_name_reason(path)
        if reason:
            problems.append(Problem("malformed", source, f"line {number}: {reason}: {path!r}"))
        elif path in entries:
            problems.append(Problem("malformed", source, f"line {number}: {path} listed twice"))
        else:
            entries[path] = digest
    if text and not text.endswith("\n"):
        problems.append(Problem("malformed", source, "last line has no newline"))
    return entries, problems


def compare(expected: dict[str, str], found: dict[str, str], manifest: str) -> list[Problem]:
    """Changed, missing and extra files between `manifest`'s entries and what is present."""
    problems = []
    for path in sorted(set(expected) | set(found)):
        if path not in found:
            problems.append(Problem("missing", path, f"listed in {manifest}, not present"))
        elif path not in expected:
            problems.append(Problem("extra", path, f"present, not listed in {manifest}"))
        elif expected[path] != found[path]:
            detail = f"sha256 is {found[path]}, {manifest} says {expected[path]}"
            problems.append(Problem("changed", path, detail))
    return problems
