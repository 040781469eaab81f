"""Bundle problems over the one `sha256sum` format: BagIt manifests are read and compared
by `harness.measure.runfolder.manifest` (the parser and checker of every run's SHA256SUMS), so a
reviewer can check every layer with `sha256sum -c`. This module only words what it finds
as bundle problems. Pure; files are hashed by `harness.base.hashing`.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.base.tree import printable
from harness.measure.runfolder import manifest

MAX_DETAIL = 300  # a hostile value quoted in a message stays one short line


@dataclass(frozen=True)
class BundleFault:
    """One thing wrong with a bundle's evidence: `kind` is changed, missing, extra, or a
    short label."""

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
    """`tree.printable` that leaves backslashes alone, so a path `manifest.verify_folder`
    already rendered printable is shown as it is, not escaped twice. Idempotent."""
    return "\\".join(printable(part) for part in text.split("\\"))


def parse_sums(text: str, source: str) -> tuple[dict[str, str], list[BundleFault]]:
    """{relpath: hex} from `manifest.parse`; every malformed, unsafe or repeated line is a
    `malformed` BundleFault of `source`."""
    lines, bad = manifest.parse(text.encode("utf-8", "surrogatepass"))
    problems = [BundleFault("malformed", source, f"line {n}: {why}") for n, why in bad]
    entries: dict[str, str] = {}
    for path, digest in lines:
        if path in entries:
            problems.append(BundleFault("malformed", source, f"{path} listed twice"))
        else:
            entries[path] = digest
    return entries, problems


_SAYS = {"missing": "listed in {m}, not present", "extra": "present, not listed in {m}",
         "unreadable": "listed in {m}, could not be read"}


def compare(expected: dict[str, str], found: dict[str, str],
            manifest_name: str) -> list[BundleFault]:
    """Changed, missing and extra files between a manifest's entries and what is present
    (`manifest.compare`, the one checker), worded for a bundle report."""
    problems = []
    for path, kind in manifest.compare(expected, found):
        if kind == "changed":
            detail = f"sha256 is {found[path]}, {manifest_name} says {expected[path]}"
        else:
            detail = _SAYS[kind].format(m=manifest_name)
        problems.append(BundleFault(kind, path, detail))
    return problems
