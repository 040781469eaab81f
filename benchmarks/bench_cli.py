"""The interactive commands' wall time: `harness --help`, `check`, `status` and `show`, each
a fresh process as an operator starts it, against a bare `python -c pass` in the same run,
and against the floors: an interpreter that only imports the libraries `check` (click,
yaml, pydantic) or `run` (those, the docker SDK and psutil) load before any
harness code.

An operator waits for `--help`: it should answer within 150 ms on the bench machine. `check`,
`status` and `show` are one-shot starts bound by their libraries, so they are context,
reported with their share above a floor (`cli_*_above_floor_ms`, benchmarks/run.py): the
readers' floor is click alone, the one library every command loads before harness code. The
bare interpreter start is measured alongside, alternated, so that a loaded machine shows as
a slower `cli_python_ms` rather than as a slower harness.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmarks.common import REPO, Config, Project, alternate, check, median, wall

TRIVIAL = 'command: ["true"]\ntimeout: 1m\n'
FLOOR_CHECK = "import click, yaml; from pydantic import BaseModel"  # `check`'s libraries
FLOOR_RUN = FLOOR_CHECK + "; import docker, psutil"  # and a `run`'s
FLOOR_READ = "import click"  # what `status` and `show` load before any harness code, at least


def _argvs(proj: Project, run_dir: Path) -> dict[str, list[str]]:
    harness = [sys.executable, "-m", "harness"]
    return {
        "cli_help_ms": [*harness, "--help"],
        "cli_check_ms": [*harness, "check", str(REPO / "campaigns" / "rehearsal.yaml")],
        "cli_status_ms": [*harness, "status", "--runs-dir", str(proj.runs),
                          "--lock", str(proj.root / "locks" / "gpu.lock")],
        "cli_show_ms": [*harness, "show", str(run_dir)],
        "cli_python_ms": [sys.executable, "-c", "pass"],
        # The floors: a bare interpreter importing only the libraries a command needs before
        # a line of harness code runs. A goal below its floor cannot be met by any change to
        # the harness's own code (docs/performance.md, "What still bounds the start").
        "cli_floor_check_ms": [sys.executable, "-c", FLOOR_CHECK],
        "cli_floor_run_ms": [sys.executable, "-c", FLOOR_RUN],
        "cli_floor_read_ms": [sys.executable, "-c", FLOOR_READ],
    }


def run_cli(cfg: Config) -> dict[str, float]:
    proj = Project(cfg.work / "cli", cfg.image_id)
    proj.control("trivial", TRIVIAL)
    camp = proj.campaign("cli", ["trivial"])
    check(subprocess.run(proj.run_argv(camp), capture_output=True), "harness run")
    argvs = _argvs(proj, proj.run_dirs()[0])

    def side(argv: list[str]):
        def once() -> float:
            dt, r = wall(argv, cwd=REPO)
            check(r, " ".join(argv[2:]) or "python")
            return dt
        return once

    for argv in argvs.values():  # warm the page cache once, unmeasured
        side(argv)()
    n = 10 if cfg.quick else 20
    times = alternate(n, [side(a) for a in argvs.values()])
    return {name: round(median(ts) * 1000, 1)
            for name, ts in zip(argvs, times, strict=True)}
