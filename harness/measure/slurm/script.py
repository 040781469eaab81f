"""The batch script of one job: a clean environment, `harness run`, the export. Pure.

A job of several runs (a same_host group, or a slot's next controls) starts each member's
`harness run` once the member before holds the GPU lock, so its start and preflight are
over, and it waits on the host's flock, when the lock is released: the GPU's handoff is the
lock's, not Slurm's. The claim and the verdict before a launch are `slurm.claim`'s."""

from __future__ import annotations

import shlex

from harness.base.errors import InvalidInput
from harness.base.stoprule import STOP_POLICIES
from harness.measure.slurm.claim import (
    AFTER_DONE_ENV,
    AFTER_RUN_ENV,
    CLAIMS_ENV,
    LOCKED_ENV,
    POLICY_ENV,
    claims_dir,
)
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
    if spec.runs or spec.run_id is not None:
        lines += _claim_lines(spec, site)
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


def _claim_lines(spec: JobSpec, site: Site) -> list[str]:
    """Where each run claims itself once it holds the GPU lock, and the night's stop policy
    (the verdict of the run before decides whether it claims at all)."""
    if spec.stop_policy not in STOP_POLICIES:
        raise InvalidInput(f"slurm job: unknown stop policy {spec.stop_policy!r}")
    claims = shlex.quote(claims_dir(drop_dir(site)))
    return [
        "# A run launches only once it made its claim here; a controller that stopped the",
        "# night made it first, so nothing starts after the stop (slurm.claim).",
        f"{CLAIMS_ENV}={claims}",
        f"{POLICY_ENV}={spec.stop_policy}",
        f"export {CLAIMS_ENV} {POLICY_ENV}",
        f"mkdir -p -- {claims}",
    ]


def _group_lines(spec: JobSpec, site: Site) -> list[str]:
    """Each member's `harness run` in order, each exported once sealed. Member k+1 starts
    once member k holds the GPU lock (the empty file it makes then, or its exit) and waits on the
    flock; under a stop policy it launches only if member k's seal lets the night go on. TERM
    goes to the members running then and no later one starts. The job exits with the worst
    member's code."""
    runs = group_runs(spec)
    runs_dir = path("runs_dir", site.runs_dir, relative_ok=True).rstrip("/")
    lines = [
        "# Several runs, in this order, on this node: the next one starts once the one",
        "# before holds the GPU lock, and waits on it. TERM goes to the harnesses running then;",
        "# no member starts after it.",
        "cur= nxt= stop= code=0",
        "trap 'stop=1; for p in $cur $nxt; do kill -TERM \"$p\" 2>/dev/null || :; done' TERM",
        "tmp=$(mktemp -d) || exit 3",
        "trap 'rm -rf -- \"$tmp\"' EXIT",
        "set +e",
    ]

    def start(i: int) -> list[str]:
        run_id = runs[i][0]
        env = f"{LOCKED_ENV}=\"$tmp/{i}.locked\" "
        if i:
            env += (f"{AFTER_RUN_ENV}={shlex.quote(f'{runs_dir}/{runs[i - 1][0]}')} "
                   f"{AFTER_DONE_ENV}=\"$tmp/{i - 1}.done\" ")
        return [
            f"# member {i + 1} of {len(runs)}: {spec.controls[i].name}, run {run_id}",
            'if [ -z "$stop" ]; then',
            f"  {env}{shlex.join(run_argv(spec, site, i))} &",
            "  nxt=$!",
            '  [ -z "$stop" ] || kill -TERM "$nxt" 2>/dev/null || :',
            "fi",
        ]

    lines += start(0)
    for i, (run_id, _) in enumerate(runs):
        lines += [f"# member {i + 1} ({run_id}) runs; the next starts once it holds the lock",
                  'cur=$nxt nxt=']
        if i + 1 < len(runs):
            lines += [
                'while [ -z "$stop" ] && [ -n "$cur" ] && kill -0 "$cur" 2>/dev/null \\',
                f'    && [ ! -e "$tmp/{i}.locked" ]; do',
                "  sleep 0.05",
                "done",
                *start(i + 1),
            ]
        lines += [
            'if [ -n "$cur" ]; then',
            '  wait "$cur"',
            "  rc=$?",
            '  while kill -0 "$cur" 2>/dev/null; do wait "$cur"; rc=$?; done',
            '  [ "$rc" -le "$code" ] || code=$rc',
            "fi",
            f': > "$tmp/{i}.done"',
            *_export_lines(spec, site, run_id),
        ]
    return [*lines, "trap - TERM", 'exit "$code"']
