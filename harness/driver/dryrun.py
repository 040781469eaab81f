"""`--dry-run` of `run`, `night` and `rerun`: the real loop (`drive`) with `DryExecutor`,
whose launch is its plan: the docker argv (the launch's own `build_vector`) and every
reason preflight would refuse it for. Nothing is launched or written."""

from __future__ import annotations

import io
import os
import shlex
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.base.catalogue import ENV_DOCTOR, ENV_NIGHT_BUSY, MOUNT_UNSAFE_PATH
from harness.base.errors import HarnessError, InvalidInput
from harness.base.flock import is_free
from harness.base.plural import counted
from harness.base.reason import Reason
from harness.base.states import State, Status
from harness.config.loader import Loaded
from harness.driver.drive import drive
from harness.driver.local import LocalExecutor
from harness.driver.night.nightlock import BY_HAND
from harness.driver.night.runner import NightRunner, find_night, hinted, inputs_seal
from harness.driver.night.source import JournalSource
from harness.driver.plan import LaunchRequest, LaunchSource, Outcome, PlanSource
from harness.measure.host import fstype
from harness.measure.lock import describe_holder, read_holder
from harness.measure.nightfolder.holder import describe, night_lock_path, read_night_holder
from harness.measure.nightfolder.journal import STOPPED, Journal
from harness.measure.nightfolder.naming import JOURNAL_NAME, NIGHTS
from harness.measure.seal import SourceSeal, source_seal
from harness.measure.ui import Reporter
from harness.measure.vector import LAUNCHER_PID, LAUNCHER_STARTED
from harness.pipeline import launch, preflight
from harness.pipeline.context import RunContext
from harness.pipeline.results import Preflight
from harness.probe.approval import runcheck as approval

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
    timeout: float | None = None  # the control's container timeout, seconds

    def document(self) -> dict:
        return {"control": self.control, "repeats": self.repeats, "device": self.device,
                "image": self.image, "image_id": self.image_id, "argv": self.argv,
                "timeout_s": self.timeout,
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

    def lines(self, verbose: bool = False) -> list[str]:
        """The plan in words, one fact a line, one line a control (the caller makes each
        line inert); with `verbose`, each control's docker argv under it."""
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
        lock = "free" if self.lock_holder is None else "held"
        for i, c in enumerate(self.controls, 1):
            times = f" ×{c.repeats}" if c.repeats > 1 else ""
            image = (c.image_id or "").removeprefix("sha256:")[:12] or "(not present)"
            timeout = "" if c.timeout is None else f"  timeout {c.timeout:g} s"
            said = ("would refuse: " + ", ".join(dict.fromkeys(r.rule for r in c.reasons))
                    if c.reasons else "ok")
            out.append(f"  {i}. {c.control}{times}  [{c.device}]  image {c.image} {image}  "
                       f"lock {lock}{timeout}  preflight: {said}")
            if verbose:
                out.append(f"     {shlex.join(c.argv)}")
            out += [f"     would be refused: {r}" for r in c.reasons]
        out.append(f"would refuse {len(refused)} of {counted(len(self.controls), 'control')} "
                   "(exit 1)" if refused else
                   f"would launch {counted(len(self.controls), 'control')} (exit 0)")
        return out


def placeholders(argv: list[str]) -> list[str]:
    """Pure: the launcher's pid and start time labels as placeholders (not this run's)."""
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


class DryExecutor(LocalExecutor):
    """A launch is planned, never made, and ends `accepted`, so the walk reaches the plan's
    end; the doctor, approval and lock file system become reasons, not a deferral."""

    def __init__(self, loaded: Loaded, runs_dir: Path, *, doctor: bool = False) -> None:
        super().__init__(loaded, Reporter(io.StringIO()), lock_timeout=None)
        self.runs_dir = Path(os.path.abspath(runs_dir))
        self.doctor = doctor  # the host check a local night runs before each control
        inputs = loaded.files()
        self.seal = source_seal(loaded.project_dir, inputs)
        self.approved, self.shared = approval.for_run(loaded, self.seal.digest, inputs,
                                                      self.runs_dir)
        warning, refused = preflight.lock_fs_check(fstype.lock_fs_problem(
            str(loaded.lock_path), fstype.fs_type(loaded.lock_path),
            fstype.under_slurm(os.environ)))
        self.shared += refused
        self.notes = (warning,) if warning else ()
        self.launched: list[LaunchRequest] = []
        self.planned: dict[str, PlannedControl] = {}

    def launch(self, request: LaunchRequest) -> Outcome:
        if request.control not in self.planned:
            self.planned[request.control] = self.plan(request.control)
        self.launched.append(request)
        return Outcome.of(request.run_dir, Status.ACCEPTED)

    def preflight(self, control: str, runs_dir: Path) -> list[str]:
        return []

    def recover(self, requests: tuple[LaunchRequest, ...], job_id: str | None,
                ) -> list[tuple[LaunchRequest, Outcome | None]]:
        return [(r, Outcome.of(r.run_dir, Status.INTERRUPTED, [STOPPED])) for r in requests]

    def walk(self, source: LaunchSource) -> None:
        drive(source, self, stop_policy=self.loaded.campaign.stop_policy, ui=self.ui)

    def plan(self, name: str) -> PlannedControl:
        """Preflight's, the doctor's and the launch's checks for one control, and its argv."""
        control, control_file = self.loaded.controls[name]
        run_id = f"{name}-{RUN_ID}"
        ctx = RunContext(self.loaded, control, control_file, run_id,  # type: ignore[arg-type]
                         self.runs_dir / run_id, self.ui)
        ctl = ctx.control
        image_id, reasons = preflight.look_up_image(ctx)
        if self.doctor:
            reasons += [Reason(ENV_DOCTOR, f"the doctor would defer it: {line}")
                        for line in super().preflight(name, self.runs_dir)]
        model_real, _, refused = preflight.hash_declared_model(ctx)
        reasons = [*self.shared, *reasons, *refused,
                   *preflight.device_check(ctl.device, preflight.absent_devices(ctl.device))]
        nodes, refused = preflight.render_nodes(ctl.device, os.environ)
        reasons += refused
        pinned = self.loaded.image_lock.images.get(ctl.image) if self.loaded.image_lock else None
        shown_id = image_id or (pinned.id if pinned else "<no pinned image>")
        ctx = replace(ctx, preflight=Preflight(seal=self.seal, image_id=shown_id,
                                               model_real=model_real, render_nodes=nodes))
        mounts, model, refused = launch.resolve_sources(ctx)
        reasons += refused
        try:
            argv = placeholders(launch.build_vector(ctx, mounts, model).evidence()["argv"])
        except HarnessError as e:  # an unsafe mount path, a bad render node: never launched
            argv = []
            reasons.append(Reason(e.rule or MOUNT_UNSAFE_PATH, e.message))
        return PlannedControl(name, 1, ctl.device, ctl.image, image_id, argv, tuple(reasons),
                              ctl.timeout)

    def dry_run(self, command: str, notes: tuple[str, ...] = ()) -> DryRun:
        """What the walk planned, each control once in the order it first launched."""
        loaded = self.loaded
        holder = lock_state(loaded.lock_path)
        held = (f"the GPU lock is held: each launch would wait for it (up to "
                f"{loaded.campaign.lock_timeout:g} s)",) if holder is not None else ()
        counts = Counter(r.control for r in self.launched)
        controls = tuple(replace(self.planned[c], repeats=n) for c, n in counts.items())
        return DryRun(command, loaded.campaign.name, loaded.campaign_file, self.runs_dir,
                      loaded.lock_path, holder, self.seal, self.approved, controls,
                      (*notes, *self.notes, *held),
                      approval_required=loaded.campaign.require_approval)


def plan(loaded: Loaded, rows: list[tuple[str, int]], runs_dir: Path, *, command: str,
         notes: tuple[str, ...] = ()) -> DryRun:
    """What `command` (run, rerun) would do with the plan `rows` (control, repeat)."""
    executor = DryExecutor(loaded, runs_dir)
    executor.walk(PlanSource(rows, executor.runs_dir))
    return executor.dry_run(command, notes)


@dataclass(frozen=True)
class NightPick:
    """Which night a start of `harness night` would walk, and the slots, in order."""

    night_dir: Path | None  # the night it would continue; None: a new night folder
    slots: list[int]
    left_running: int = 0  # rows a stopped harness left `running`, recovered first

    def document(self) -> dict:
        return {"continues": None if self.night_dir is None else str(self.night_dir),
                "slots": self.slots, "left_running": self.left_running}


class DrySource(JournalSource):
    """The night's source over the in-memory journal: it appends to no rerun index."""

    def _index(self, request: LaunchRequest, status: str) -> None:
        return None


def _copy(night_dir: Path, loaded: Loaded) -> Journal:
    """The night's journal copied into memory from a read-only open (nothing migrated)."""
    path = night_dir / JOURNAL_NAME
    with hinted(night_dir), Journal.open(path, readonly=True) as disk:
        if faults := disk.mismatches(campaign=loaded.campaign.name, plan=loaded.plan(),
                                     seal=inputs_seal(loaded)):
            raise InvalidInput(f"journal {path} belongs to another night", faults=faults)
        return disk.copy()


def night_walk(loaded: Loaded, runs_dir: Path, night: str | None, new: bool,
               executor: DryExecutor) -> NightPick:
    """Walk what a start of the night would run: find, recover, loop, in memory."""
    if night is not None and new:
        raise InvalidInput("--night and --new exclude each other")
    found = find_night(Path(os.path.abspath(runs_dir)) / NIGHTS, loaded, night, new)
    journal = _copy(found, loaded) if found is not None else Journal.create(
        Path(":memory:"),  # SQLite's name for a database in memory
        campaign=loaded.campaign.name, campaign_file=str(loaded.campaign_file),
        plan=loaded.plan())
    with journal:
        running = sum(r.state == State.RUNNING for r in journal.rows())
        side = NightRunner(loaded, executor.runs_dir, executor.ui, lock_timeout=None,
                           deadline=None)
        side.executor = executor
        side.recover(journal)
        executor.walk(DrySource(side, journal))
    return NightPick(found, [r.plan_index for r in executor.launched
                             if r.plan_index is not None], running)


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
