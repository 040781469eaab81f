"""What `harness init` writes (texts in harness/data/scaffold/) and what to do with each
path given what lies there (`decide`, pure): a file is only created, never replaced, and
nothing in the way is followed or touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import PurePosixPath
from typing import Literal

RUNS_DIR = "runs"  # harness.toml's runs_dir, git-ignored by .gitignore
DATA = "data/scaffold"
NEXT_STEPS = "next-steps.txt"
README_SLOT = "@NEXT_STEPS@"

# (path in the repository, template under harness/data/scaffold/): a package data file
# never starts with a dot, so .gitignore travels as `gitignore`.
FILES: tuple[tuple[str, str], ...] = (
    ("harness.toml", "harness.toml"),
    (".gitignore", "gitignore"),
    ("README.md", "README.md"),
    ("images.lock", "images.lock"),
    ("campaigns/cpu-example.yaml", "campaigns/cpu-example.yaml"),
    ("campaigns/vllm-gfx1100.yaml", "campaigns/vllm-gfx1100.yaml"),
    ("controls/cpu-example.yaml", "controls/cpu-example.yaml"),
    ("controls/vllm-native.yaml", "controls/vllm-native.yaml"),
)

Kind = Literal["missing", "file", "folder", "symlink", "other"]
_WORDS: dict[str, str] = {"file": "file", "folder": "folder", "symlink": "symlink",
                          "other": "special file (not a regular file)"}


@dataclass(frozen=True)
class ScaffoldFile:
    path: str  # relative to the repository, with '/'
    text: str


@dataclass(frozen=True)
class InitStep:
    """What init does with one file: `create` it, `keep` the file there, or leave it
    `blocked` by something else in the way (`why` names it)."""

    path: str
    action: Literal["create", "keep", "blocked"]
    why: str = ""

    @property
    def done(self) -> bool:
        """Whether a regular file is at the path afterwards (created, or kept)."""
        return self.action != "blocked"

    def line(self, shown: str) -> str:
        verb = {"create": "created", "keep": "kept", "blocked": "blocked"}[self.action]
        return f"{verb:8} {shown}" + (f" ({self.why})" if self.why else "")


def template(name: str) -> str:
    """One text of the scaffold, from the package's data."""
    return resources.files("harness").joinpath(f"{DATA}/{name}").read_text(encoding="utf-8")


def next_steps() -> list[str]:
    """The commands that follow init, one a line (the README shows them too)."""
    return template(NEXT_STEPS).splitlines()


def files() -> list[ScaffoldFile]:
    """Every file init writes, with its text."""
    steps = "".join(f"{line}\n" for line in next_steps())
    return [ScaffoldFile(path, template(name).replace(README_SLOT, steps))
            for path, name in FILES]


def parents(path: str) -> list[str]:
    """The folders above `path` inside the repository, outermost first."""
    parts = PurePosixPath(path).parts
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def decide(path: str, kinds: Mapping[str, Kind]) -> InitStep:
    """Pure: what to do with `path`, given what lstat saw at it and above it (`kinds`):
    only a missing file below real folders is created; anything else is left alone."""
    for folder in parents(path):
        kind = kinds.get(folder, "missing")
        if kind not in ("missing", "folder"):
            return InitStep(path, "blocked", f"{folder} is a {_WORDS[kind]}, not a folder: not "
                                         "followed, nothing written")
    kind = kinds.get(path, "missing")
    if kind == "missing":
        return InitStep(path, "create")
    if kind == "file":
        return InitStep(path, "keep", "a file is there: not overwritten")
    return InitStep(path, "blocked", f"a {_WORDS[kind]} is in the way: not followed, nothing "
                                 "written")
