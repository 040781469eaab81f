"""The batch script of one job: a clean environment, `harness run`, the export. Pure."""

from __future__ import annotations

import shlex

from harness.measure.slurm.job import (
    DROP_BUNDLES,
    SCRIPT_PATH_ENV,
    JobSpec,
    Site,
    drop_dir,
    group_runs,
    run_argv,
    token_of,
)
from harness.measure.slurm.values import ID_MAX, name, path


def _home_lines(site: Site) -> list[str]:
    if site.home_root is None:
        return []
    root = shlex.quote(path("home_root", site.home_root).rstrip("/") or "/")
    return [
        "# One HOME per host: the GPU lock (~/gpu.lock) must be the host's, never shared.",
        'case "${SLURMD_NODENAME:-}" in',
        "  ''|.|..|*/*) echo 'harness job: no usable SLURMD_NODENAME' >&2; exit 3 ;;",
        "esac",
        f'HOME={root}/"$SLURMD_NODENAME"',
        "export HOME",
        'mkdir -p -- "$HOME"',
    ]


def _export_lines(spec: JobSpec, site: Site, run_id: str | None = None,
                  indent: str = "") -> list[str]:
    """After the run: export its sealed folder as a bundle into `<drop>/bundles/`."""
    run_id = name("run id", run_id or spec.run_id, ID_MAX)
    run_dir = f"{path('runs_dir', site.runs_dir, relative_ok=True).rstrip('/')}/{run_id}"
    bundles = f"{drop_dir(site)}/{DROP_BUNDLES}"
    export = [path("harness", site.harness), "bundle", "export", run_dir,
              "-o", f"{bundles}/{run_id}.tar.gz"]
    return [indent + line for line in (
        "# Evidence comes home as a bundle. Export writes a temporary name and links it into",
        "# place, so a bundle in the drop is whole; a host that cannot reach the drop keeps",
        "# its sealed run (export it later, then `harness bundle collect` again).",
        f"if [ -f {shlex.quote(run_dir + '/SHA256SUMS')} ]; then",
        f"  mkdir -p -- {shlex.quote(bundles)} && {shlex.join(export)} \\",
        "    || echo 'harness job: the sealed run was not exported to the drop' >&2",
        "fi",
    )]


def job_script(spec: JobSpec, site: Site) -> str:
    """The batch script: a clean environment, `harness run`, then the export. Pure.

    The harness must get Slurm's SIGTERM to stop its container and seal. Without a run id
    to export the shell `exec`s the harness; with one, it runs it as a child, forwards TERM
    (`--signal=B:` signals the shell alone), waits for it to exit, exports, and exits with
    the harness's code."""
    token = token_of(spec)
    names = " ".join(c.name for c in spec.controls)
    lines = [
        "#!/bin/sh",
        f"# harness Slurm job {token}",
        f"# night {spec.night}, slot {spec.slot}, attempt {spec.attempt}: {names}",
        "# Built by harness.measure.slurm.job from the night's journal; rebuilt, never edited.",
        "set -eu",
        f"PATH={SCRIPT_PATH_ENV}",
        "export PATH",
        *_home_lines(site),
        f"HARNESS_SLURM_TOKEN={shlex.quote(token)}",
        "export HARNESS_SLURM_TOKEN",
        f"cd -- {shlex.quote(path('workdir', site.workdir))}",
        "# The runs dir (on this host's disk) is made here: `harness run` makes one only in a",
        "# folder that exists, so a mistyped --runs-dir is an error, never a new tree.",
        f"mkdir -p -- {shlex.quote(path('runs_dir', site.runs_dir, relative_ok=True))}",
    ]
    if spec.runs:
        return "\n".join([*lines, *_group_lines(spec, site)]) + "\n"
    run = shlex.join(run_argv(spec, site))
    if spec.run_id is None:
        return "\n".join([*lines, "exec " + run]) + "\n"
    lines += [
        "# Not exec: the run is exported after it is sealed. TERM is forwarded to the harness.",
        "harness_pid= stop=",
        "trap 'stop=1; [ -z \"$harness_pid\" ] || kill -TERM \"$harness_pid\" 2>/dev/null"
        " || :' TERM",
        f"{run} &",
        "harness_pid=$!",
        '[ -z "$stop" ] || kill -TERM "$harness_pid" 2>/dev/null || :',
        "set +e",
        'wait "$harness_pid"',
        "code=$?",
        'while kill -0 "$harness_pid" 2>/dev/null; do wait "$harness_pid"; code=$?; done',
        "trap - TERM",
        *_export_lines(spec, site),
        'exit "$code"',
    ]
    return "\n".join(lines) + "\n"


def _group_lines(spec: JobSpec, site: Site) -> list[str]:
    """A same_host group: each member's `harness run` in order, each exported once sealed.
    TERM goes to the running member and no later one starts; a refusal does not stop the
    next. The job exits with the worst member's code."""
    lines = [
        "# A same_host group: each member's own run, in this order, on this node.",
        "# TERM is forwarded to the harness running then; no member starts after it.",
        "harness_pid= stop= code=0",
        "trap 'stop=1; [ -z \"$harness_pid\" ] || kill -TERM \"$harness_pid\" 2>/dev/null"
        " || :' TERM",
        "set +e",
    ]
    for i, (run_id, _) in enumerate(group_runs(spec)):
        lines += [
            f"# member {i + 1} of {len(spec.runs)}: {spec.controls[i].name}, run {run_id}",
            'if [ -z "$stop" ]; then',
            f"  {shlex.join(run_argv(spec, site, i))} &",
            "  harness_pid=$!",
            '  [ -z "$stop" ] || kill -TERM "$harness_pid" 2>/dev/null || :',
            '  wait "$harness_pid"',
            "  rc=$?",
            '  while kill -0 "$harness_pid" 2>/dev/null; do wait "$harness_pid"; rc=$?; done',
            "  harness_pid=",
            '  [ "$rc" -le "$code" ] || code=$rc',
            *_export_lines(spec, site, run_id, "  "),
            "fi",
        ]
    return [*lines, "trap - TERM", 'exit "$code"']
