"""Build the harness's sdist and wheel from the files git tracks: what a fresh clone builds.

    python scripts/dist.py OUTDIR

Every tracked file, as it is in the work tree (a tracked file deleted there is left out),
is copied into a temporary folder, and `python -m build` runs there: the sdist first, then
the wheel built from the sdist (build's default), so a file the sdist lacks is missing
from the wheel too. A file git does not track never ships, and the work tree gains no
build/ or *.egg-info. `make dist` and the installed tier (tests/installed) build this way.
OUTDIR must be empty or new. Prints the sdist's and the wheel's paths, one a line; exits
non-zero, with build's output, when the build fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def tracked_files(repo: Path) -> list[str]:
    """The paths git tracks under `repo`, relative to it."""
    out = subprocess.run(["git", "-C", str(repo), "ls-files", "-z"], capture_output=True,
                         check=True).stdout
    return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]


def copy_tracked(repo: Path, dest: Path) -> int:
    """Copy every tracked file that exists in the work tree into `dest` (symlinks as
    symlinks); the number copied."""
    copied = 0
    for rel in tracked_files(repo):
        src = repo / rel
        if not os.path.lexists(src) or (src.is_dir() and not src.is_symlink()):
            continue  # deleted in the work tree, or a submodule's folder
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target, follow_symlinks=False)
        copied += 1
    return copied


def build(repo: Path, outdir: Path) -> tuple[Path, Path]:
    """(sdist, wheel) built into `outdir` from the tracked files of `repo`."""
    outdir.mkdir(parents=True, exist_ok=True)
    if any(outdir.iterdir()):
        raise SystemExit(f"{outdir} is not empty: the build writes into an empty folder")
    with tempfile.TemporaryDirectory(prefix="harness-dist-") as tmp:
        src = Path(tmp) / "src"
        copy_tracked(repo, src)
        r = subprocess.run([sys.executable, "-m", "build", "--outdir", str(outdir), str(src)],
                           capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"python -m build failed (exit {r.returncode}):\n{r.stdout}\n{r.stderr}")
    made = sorted(outdir.iterdir())
    sdists = [p for p in made if p.name.endswith(".tar.gz")]
    wheels = [p for p in made if p.suffix == ".whl"]
    if len(sdists) != 1 or len(wheels) != 1:
        raise SystemExit(f"python -m build made {[p.name for p in made]}, not one sdist "
                         "and one wheel")
    return sdists[0], wheels[0]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python scripts/dist.py OUTDIR (an empty or new folder)", file=sys.stderr)
        return 2
    for path in build(REPO, Path(argv[0]).resolve()):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
