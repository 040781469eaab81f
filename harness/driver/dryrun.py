"""`--dry-run` of `run`, `night` and `rerun`: what would run, and what would be refused.

The plan (each control in order, the image Id it would run, the runs dir, the lock), the
source seal, the docker argv each control would launch with (built by the one pure
`measure.vector.build`, through the launch stage's own `build_vector`, with the run id a
placeholder) and every reason the preflight would refuse a control for (image missing or
not the pinned Id, model pins, approval, device paths, the lock's file system), from the
preflight's own checks. Nothing here launches a container, takes the GPU lock (the lock
is only probed, taken and dropped at once, to say whether it is free), or creates a run
folder, a journal or a perflog row.

A night's dry run first picks what its start would run (`night_pick`): the whole plan in
a new night, or what is left of the night it would continue, found and read as the night
finds it but with every journal opened read-only (no migration, no WAL switch).

`plan` and `night_pick` gather the facts; `DryRun.document`, `DryRun.lines`,
`pending_slots` and `walk_order` are pure.
"""

from __future__ import annotations

import io
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.base.catalogue import ENV_DOCTOR, ENV_NIGHT_BUSY, MOUNT_UNSAFE_PATH
from harness.base.errors import HarnessError, InvalidInput
from harness.base.flock import is_free
from harness.base.plural import counted
from harness.base.reason import Reason
from harness.base.states import State
from harness.config.loader import Loaded
from harness.config.samehost import instances
from harness.driver.local import LocalExecutor
from harness.driver.night.nightlock import BY_HAND
from harness.driver.night.runner import find_night, inputs_seal, policy_of
from harness.driver.policy import RetryPolicy, retry_allowed
from harness.measure.host import fstype
from harness.measure.lock import describe_holder, read_holder
from harness.measure.nightfolder.holder import describe, night_lock_path, read_night_holder
from harness.measure.nightfolder.journal import Journal
from harness.measure.nightfolder.naming import JOURNAL_NAME, NIGHTS
from harness.measure.nightfolder.rows import Row, latest_attempts
from harness.measure.seal import SourceSeal, source_seal
from harness.measure.ui import Reporter
from harness.measure.vector import LAUNCHER_PID, LAUNCHER_STARTED
from harness.pipeline import launch, preflight
from harness.pipeline.context import RunContext
from harness.pipeline.results import Preflight
from harness.probe.approval import check as approval

SCHEMA = "harness.dry-run/v1"
RUN_ID = "<run-id>"  # the placeholder a planned run's id reads as
NOTHING = ("dry run: nothing is launched; no run folder, journal or perflog row is made, "
           "and the GPU lock is not taken")


@dataclass(frozen=True)
class PlannedControl:
    """One control of the plan: what it would launch, and why it would not."""

    control: str
    repeats: int
    device: str
    image: str
    image_id: str | None  # the pinned Id, present locally; None when it is not
    argv: list[str]
    reasons: tuple[Reason, ...] = ()

    def document(self) -> dict:
        return {"control": self.control, "repeats": self.repeats, "device": self.device,
                "image": self.image, "image_id": self.image_id, "argv": self.argv,
                "would_launch": not self.reasons,
                "refused": [r.as_dict() for r in self.reasons]}


@dataclass(frozen=True)
class DryRun:
    """What `command` would do with a campaign (pure once gathered)."""

    command: str
    campaign: str
    campaign_file: Path
    runs_dir: Path
    lock: Path
    lock_holder: str | None  # None: free
    seal: SourceSeal
    approval: dict | None
    controls: tuple[PlannedControl, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    approval_required: bool = False

    @property
    def exit_code(self) -> int:
        """0 when every control would launch, 1 when any would be refused."""
        return 1 if any(c.reasons for c in self.controls) else 0

    def document(self) -> dict:
        return {"schema": SCHEMA, "command": self.command, "campaign": self.campaign,
                "campaign_file": str(self.campaign_file), "runs_dir": str(self.runs_dir),
                "lock": {"path": str(self.lock), "free": self.lock_holder is None,
                         "holder": self.lock_holder},
                "seal": {"digest": self.seal.digest, "files": len(self.seal.files)},
                "approval": self.approval, "approval_required": self.approval_required,
                "run_id": RUN_ID,
                "controls": [c.document() for c in self.controls],
                "notes": list(self.notes), "would_launch": not self.exit_code,
                "exit_code": self.exit_code}

    def lines(self) -> list[str]:
        """The plan in words, one fact a line (the caller makes each line inert)."""
        refused = [c for c in self.controls if c.reasons]
        out = [f"{NOTHING} (`harness {self.command} --dry-run`)",
               f"campaign  {self.campaign} ({self.campaign_file})",
               f"runs dir  {self.runs_dir}",
               f"lock      {self.lock}: " + ("free" if self.lock_holder is None else
                                             f"held by {self.lock_holder}"),
               f"seal      {self.seal.digest} ({counted(len(self.seal.files), 'file')})",
               f"approval  {approval_line(self.approval, self.approval_required)}",
               *(f"note      {n}" for n in self.notes),
               f"plan      {counted(len(self.controls), 'control')}, in this order:"]
        for i, c in enumerate(self.controls, 1):
            times = f" ×{c.repeats}" if c.repeats > 1 else ""
            out.append(f"  {i}. {c.control}{times}  [{c.device}]  image {c.image} "
                       f"{c.image_id or '(not present with its pinned Id)'}")
            out.append(f"     {shlex.join(c.argv)}")
            out += [f"     would be refused: {r}" for r in c.reasons]
        out.append(f"would refuse {len(refused)} of {counted(len(self.controls), 'control')} "
                   "(exit 1)" if refused else
                   f"would launch {counted(len(self.controls), 'control')} (exit 0)")
        return out


def placeholders(argv: list[str]) -> list[str]:
    """Pure: the launching process's pid and start time (labels the orphan reaper reads)
    as placeholders: they are the real launch's, not this dry run's."""
    marks = {LAUNCHER_PID: "<pid>", LAUNCHER_STARTED: "<start time>"}
    out = []
    for arg in argv:
        label, eq, _ = arg.partition("=")
        out.append(f"{label}={marks[label]}" if eq and label in marks else arg)
    return out


def approval_line(found: dict | None, required: bool) -> str:
    """Pure: the approval the runs would run under, in words."""
    if not required:
        return "not required by the campaign"
    if not found:
        return "required, and none of this seal that the runs could run under (see below)"
    return (f"{found.get('file')} (seal {found.get('seal')}, commit "
            f"{str(found.get('commit') or '?')[:12]})")


def lock_state(lock: Path) -> str | None:
    """Who holds the GPU lock (one line), or None when it is free. A probe only."""
    try:
        if is_free(lock):
            return None
    except OSError as e:
        return f"nobody known (the lock cannot be probed: {e.strerror or e})"
    return describe_holder(read_holder(lock))


def _context(loaded: Loaded, name: str, runs_dir: Path) -> RunContext:
    """The run context a launch of `name` would have, its folder never made."""
    control, control_file = loaded.controls[name]
    run_id = f"{name}-{RUN_ID}"
    return RunContext(loaded, control, control_file, run_id,  # type: ignore[arg-type]
                      runs_dir / run_id, Reporter(io.StringIO()))


def doctor_reasons(loaded: Loaded, name: str, runs_dir: Path) -> list[Reason]:
    """What the doctor a night runs before each control would defer `name` for."""
    failing = LocalExecutor(loaded, Reporter(io.StringIO()), lock_timeout=None).preflight(
        name, runs_dir)
    return [Reason(ENV_DOCTOR, f"the doctor would defer it: {line}") for line in failing]


def plan_control(loaded: Loaded, name: str, repeats: int, runs_dir: Path, seal: SourceSeal,
                 shared: list[Reason], *, doctor: bool = False) -> PlannedControl:
    """The preflight's checks for one control (image, model pins, devices, GPU map), the
    launch's mount checks, and the argv it would launch; `shared`: the campaign's own
    reasons (approval, the lock's file system), which refuse every control; `doctor`: the
    host check a night runs before each control, too."""
    ctx = _context(loaded, name, runs_dir)
    ctl = ctx.control
    image_id, reasons = preflight.look_up_image(ctx)
    if doctor:
        reasons += doctor_reasons(loaded, name, runs_dir)
    model_real, _, refused = preflight.hash_declared_model(ctx)
    reasons = [*shared, *reasons, *refused,
               *preflight.device_check(ctl.device, preflight.absent_devices(ctl.device))]
    nodes, refused = preflight.render_nodes(ctl.device, os.environ)
    reasons += refused
    pinned = loaded.image_lock.images.get(ctl.image) if loaded.image_lock else None
    shown_id = image_id or (pinned.id if pinned else "<no pinned image>")
    ctx = replace(ctx, preflight=Preflight(seal=seal, image_id=shown_id,
                                           model_real=model_real, render_nodes=nodes))
    mounts, model, refused = launch.resolve_sources(ctx)
    reasons += refused
    try:
        argv = placeholders(launch.build_vector(ctx, mounts, model).evidence()["argv"])
    except HarnessError as e:  # an unsafe mount path, a bad render node: never launched
        argv = []
        reasons.append(Reason(e.rule or MOUNT_UNSAFE_PATH, e.message))
    return PlannedControl(name, repeats, ctl.device, ctl.image, image_id, argv,
                          tuple(reasons))


def plan(loaded: Loaded, rows: list[tuple[str, int]], runs_dir: Path, *, command: str,
         notes: tuple[str, ...] = (), doctor: bool = False) -> DryRun:
    """Gather what `command` would do with `rows` (the plan's (control, repeat) rows);
    `doctor`: also the host check a local night runs before each control."""
    runs_dir = Path(os.path.abspath(runs_dir))
    inputs = loaded.files()
    seal = source_seal(loaded.project_dir, inputs)
    approved, shared = approval.for_run(loaded, seal.digest, inputs, runs_dir)
    warning, refused = preflight.lock_fs_check(fstype.lock_fs_problem(
        str(loaded.lock_path), fstype.fs_type(loaded.lock_path),
        fstype.under_slurm(os.environ)))
    shared += refused
    notes = (*notes, *([warning] if warning else []))
    order: dict[str, int] = {}
    for name, _ in rows:
        order[name] = order.get(name, 0) + 1
    controls = tuple(plan_control(loaded, name, n, runs_dir, seal, shared, doctor=doctor)
                     for name, n in order.items())
    holder = lock_state(loaded.lock_path)
    if holder is not None:
        notes = (*notes, f"the GPU lock is held: each launch would wait for it (up to "
                         f"{loaded.campaign.lock_timeout:g} s)")
    return DryRun(command, loaded.campaign.name, loaded.campaign_file, runs_dir,
                  loaded.lock_path, holder, seal, approved, controls, notes,
                  approval_required=loaded.campaign.require_approval)


@dataclass(frozen=True)
class NightPick:
    """Which night a start of `harness night` would walk, and the plan rows (control,
    repeat) it would launch, in the order it would launch them."""

    night_dir: Path | None  # the night it would continue; None: a new night folder
    rows: list[tuple[str, int]]
    slots: list[int]  # the plan slots of `rows`
    left_running: int = 0  # rows a stopped harness left `running`, recovered first

    def document(self) -> dict:
        return {"continues": None if self.night_dir is None else str(self.night_dir),
                "slots": self.slots, "left_running": self.left_running}


def pending_slots(rows: Sequence[Row], policy: RetryPolicy) -> list[int]:
    """Pure: the plan slots a start of this night would run, as its resume and its loop
    decide (`resume_steps`, `next_step`): a row left running is recovered as interrupted,
    a deferred one is planned again; then every slot whose newest attempt is planned, or
    interrupted with a retry left. A finished slot never runs again."""
    after_resume = {State.RUNNING: State.INTERRUPTED, State.DEFERRED: State.PLANNED}
    out = []
    for slot, row in sorted(latest_attempts(rows).items()):
        state = after_resume.get(row.state, row.state)
        if state == State.PLANNED or retry_allowed(policy, state, row.attempt):
            out.append(slot)
    return out


def walk_order(pending: Sequence[int], groups: Mapping[int, tuple[int, ...]]) -> list[int]:
    """Pure: the order a night launches the `pending` slots: plan order, except that a
    same_host group's pending members go together, in the group's order, when the first
    of them comes up (`source.group_rows`)."""
    todo, out = set(pending), []
    for slot in sorted(todo):
        if slot in out:
            continue
        out += [m for m in groups.get(slot, (slot,)) if m in todo and m not in out]
    return out


def _night_rows(night_dir: Path, loaded: Loaded) -> list[Row]:
    """The journal's rows, read-only (no migration, no WAL switch), refused as a start
    would refuse them when the journal is another night's (exit 2)."""
    path = night_dir / JOURNAL_NAME
    hint = (f" (night {night_dir}; start with --new to leave it as it is and begin a new "
            "night)")
    try:
        with Journal.open(path, readonly=True) as journal:
            faults = journal.mismatches(campaign=loaded.campaign.name, plan=loaded.plan(),
                                        seal=inputs_seal(loaded))
            rows = journal.rows()
    except HarnessError as e:
        e.message += hint
        raise
    if faults:
        raise InvalidInput(f"journal {path} belongs to another night{hint}", faults=faults)
    return rows


def night_pick(loaded: Loaded, runs_dir: Path, night: str | None, new: bool) -> NightPick:
    """What a start of the night would run: the whole plan in a new night, or what is left
    of the night it would continue. Reads only."""
    if night is not None and new:
        raise InvalidInput("--night and --new exclude each other")
    nights_dir = Path(os.path.abspath(runs_dir)) / NIGHTS
    plan_rows = loaded.plan()
    found = find_night(nights_dir, loaded, night, new,
                       rows_of=lambda folder: _night_rows(folder, loaded))
    pending, running = list(range(len(plan_rows))), 0
    if found is not None:
        rows = _night_rows(found, loaded)
        pending = pending_slots(rows, policy_of(loaded))
        running = sum(r.state == State.RUNNING for r in rows)
    order = walk_order(pending, instances(plan_rows, loaded.same_host))
    return NightPick(found, [plan_rows[s] for s in order], order, running)


def night_notes(loaded: Loaded, runs_dir: Path, pick: NightPick) -> list[str]:
    """The night's own facts in words: which night folder, what is left, the night lock."""
    nights = Path(os.path.abspath(runs_dir)) / NIGHTS
    if pick.night_dir is None:
        out = [f"a new night folder would go to {nights}/{loaded.campaign.name}-<UTC stamp>/"]
    else:
        out = [f"would continue night {pick.night_dir}: {counted(len(pick.slots), 'slot')} "
               f"of {len(loaded.plan())} left to run"]
    if pick.left_running:
        out.append(f"{counted(pick.left_running, 'row')} left running by a stopped harness "
                   "would be recovered first (sealed as found; an interrupted one runs "
                   "again if retry.interrupted allows)")
    return out + night_lock_notes(loaded.lock_path)


def night_lock_notes(gpu_lock: Path) -> list[str]:
    """Who holds the night lock, and what a start would do about it. A probe only."""
    path = night_lock_path(gpu_lock)
    try:
        if is_free(path):
            return []
    except OSError as e:
        return [f"night lock {path}: cannot be probed ({e.strerror or e})"]
    holder = read_night_holder(gpu_lock)
    if (holder or {}).get("kind") in BY_HAND:
        return [f"night lock {path} held by {describe(holder)}: the night would wait for it"]
    return [f"night lock {path} held by {describe(holder)}: this night would refuse at once "
            f"(exit 3, {ENV_NIGHT_BUSY})"]
