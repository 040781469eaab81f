"""Load and cross-check campaigns, controls and the image lock, collecting every fault.

`harness check` and `harness run` both come through here, so a file that checks clean is
exactly a file that runs. Faults are GCC style: FILE:LINE:COL: message.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from harness.base.catalogue import IMAGE_NOT_PINNED, MODEL_UNPINNED
from harness.base.errors import InvalidInput
from harness.base.plural import counted
from harness.config import wrongfile
from harness.config.builtins import OPTIONS
from harness.config.checkout import project_of
from harness.config.executor import ExecutorBlock, ExecutorConfig
from harness.config.gatelist import Gate, GateList
from harness.config.hook import HookBlock, HookConfig, environment_faults
from harness.config.mountable import declared_problem, mountable, system_paths
from harness.config.mountinputs import mount_inputs, mount_problems
from harness.config.samehost import SameHostBlock
from harness.config.samehost import faults as same_host_faults
from harness.config.schema import Campaign, Control, ImageLock
from harness.config.suggest import did_you_mean, hint
from harness.config.words import expected, where
from harness.config.yamlsafe import Document, Fault, YamlFaults, load

M = TypeVar("M", bound=BaseModel)


def _message(err: dict[str, Any], model: type[BaseModel] | None = None) -> str:
    """One fault in words: never a regular expression or a Python class name (words.py)."""
    loc = where(tuple(err["loc"]))
    if err["type"] == "extra_forbidden":
        near = did_you_mean(model, tuple(err["loc"])) if model else None
        hint = f" (did you mean {near!r}?)" if near else ""
        return f"unknown key {err['loc'][-1]!r}{hint}"
    if err["type"] == "missing":
        return f"missing required key {loc!r}"
    msg = expected(err) or err["msg"].removeprefix("Value error, ")
    return f"{loc}: {msg}" if loc else msg


def validate(doc: Document, model: type[M]) -> tuple[M | None, list[Fault]]:
    """Validate a loaded document against `model`; map each error to its position."""
    if not isinstance(doc.data, dict):
        kind = "empty" if doc.data is None else type(doc.data).__name__
        return None, [doc.fault((), f"expected a mapping at the top level, got {kind}")]
    try:
        return model.model_validate(doc.data), []
    except ValidationError as e:
        faults = []
        for err in e.errors():
            path, at_key = tuple(err["loc"]), err["type"] == "extra_forbidden"
            if err["type"] == "missing":
                path = path[:-1]
            if path and path[-1] == "[key]":  # a refused mapping key: point at the key
                path, at_key = path[:-1], True
            faults.append(doc.fault(path, _message(err, model), key=at_key))
        return None, faults


def load_model(path: Path, model: type[M]) -> tuple[M | None, Document | None, list[Fault]]:
    try:
        doc = load(path)
    except YamlFaults as e:
        return None, None, e.faults
    obj, faults = validate(doc, model)
    return obj, doc, faults


@dataclass
class Loaded:
    """A campaign with everything it names, resolved to absolute paths.

    The mount roots and the lock path are resolved ONCE, at load: a read-write mount can
    later swap a folder for a symlink, and a root resolved again at launch would widen."""

    campaign: Campaign
    campaign_file: Path
    controls: dict[str, tuple[Control, Path]] = field(default_factory=dict)
    image_lock: ImageLock | None = None
    image_lock_file: Path | None = None
    gates: list[Gate] = field(default_factory=list)  # inline or from gates_file
    gates_file: Path | None = None
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)  # `executor:`, checked
    hook: HookConfig | None = None  # `hook:`, checked (the variables it names, where set)
    same_host: tuple[tuple[str, ...], ...] = ()  # paired controls run on one host, in order
    warnings: list[Fault] = field(default_factory=list)  # what every run would be refused for
    roots: tuple[Path, ...] = field(init=False)
    lock_path: Path = field(init=False)  # its folder canonical: see `canonical_lock`

    def __post_init__(self) -> None:
        declared = self.campaign.mount_roots or [str(self.project_dir)]
        self.roots = tuple(Path(os.path.realpath(r)) for r in declared)
        self.lock_path = canonical_lock(resolve(self.campaign.lock, self.campaign_file.parent))

    @property
    def project_dir(self) -> Path:
        return project_of(self.campaign_file)

    @property
    def controls_dir(self) -> Path:
        return resolve(self.campaign.controls_dir, self.campaign_file.parent)

    def plan(self, only: tuple[str, ...] | list[str] = ()) -> list[tuple[str, int]]:
        """(control, repeat index) in campaign order; `only` keeps just those controls."""
        return [(ref.control, i) for ref in self.campaign.controls for i in range(ref.repeat)
                if not only or ref.control in only]

    def mount_roots(self) -> list[Path]:
        """The real mount roots as resolved at load (never again: see the class)."""
        return list(self.roots)

    def files(self) -> list[Path]:
        """Every input file that defines a run, the one list the seal, the approval and the
        provenance check use: campaign, controls, lock, gates, signers, sealed mounts."""
        out = [self.campaign_file, *(p for _, p in self.controls.values())]
        out += mount_inputs(self.controls.values(), resolve, self.may_mount)
        out += [f for f in (self.image_lock_file, self.gates_file) if f]
        if self.signers_file:  # who may approve is part of what was reviewed
            out.append(self.signers_file)
        return out

    def may_mount(self, real: Path) -> bool:
        """Under the roots fixed at load, and no system path (`mountable.mountable`)."""
        return mountable(real, list(self.roots))

    def next_run_inputs(self) -> list[Path]:
        """What the next run reads, which no read-write mount may reach
        (`mountable.protected_paths`): the campaign, the controls folder and each control,
        images.lock and every input the seal covers."""
        out = [self.campaign_file, self.controls_dir, *(p for _, p in self.controls.values()),
               *self.files()]
        return out if self.image_lock_file is None else [*out, self.image_lock_file]

    @property
    def signers_file(self) -> Path | None:
        signers = self.campaign.allowed_signers
        return resolve(signers, self.campaign_file.parent) if signers else None


def resolve(value: str, base: Path) -> Path:
    """Expand `~` and `$VARS`, and make relative paths relative to `base`."""
    p = Path(os.path.expandvars(os.path.expanduser(value)))
    return Path(os.path.normpath(p if p.is_absolute() else (base / p)))


def canonical_lock(path: Path) -> Path:
    """The lock's folder resolved (one lock, one spelling: labels compare it as text), its
    file name kept: a planted `gpu.lock -> victim` must not move the lock onto the victim."""
    return Path(os.path.realpath(path.parent)) / path.name


def kind_of(path: Path, data: Any) -> str:
    if path.name.endswith(".lock") or (isinstance(data, dict) and "images" in data):
        return "lock"
    if isinstance(data, dict) and "controls" in data:
        return "campaign"
    if isinstance(data, dict) and "gates" in data:
        return "gates"  # a gates_file
    return "control"


def _check_mounts(ctl: Control, ctl_path: Path, doc: Document | None,
                  roots: list[Path]) -> list[Fault]:
    """Each mount source, resolved against the control's folder, must be one the mount
    policy allows (`mountable.declared_problem`: a plain path under the mount roots, no
    system path; targets: the schema)."""
    faults: list[Fault] = []

    def fault(loc: tuple, msg: str) -> None:
        msg = f"{'.'.join(map(str, loc))}: {msg}"
        faults.append(doc.fault(loc, msg) if doc else Fault(str(ctl_path), 1, 1, msg))

    entries: list[tuple[tuple, str]] = [(("mounts", i), m.source)
                                        for i, m in enumerate(ctl.mounts)]
    if ctl.model:
        entries.append((("model",), ctl.model.source))
    system = system_paths(os.environ)
    for loc, source in entries:
        if (why := declared_problem(resolve(source, ctl_path.parent), roots, system)):
            fault((*loc, "source"), why)
    for i, why in mount_problems(ctl, ctl_path, resolve, lambda real: mountable(real, roots)):
        fault(("mounts", i, "source"), why)
    return faults


def _check_options(ctl: Control, doc: Document | None) -> list[Fault]:
    """A built-in post-step's options are only those it reads (builtins.OPTIONS)."""
    return [doc.fault(("post_steps", i, "options", key), f"unknown option {key!r} of the "
                      f"built-in post-step {step.name!r}"
                      + (hint(key, OPTIONS[step.name]) or f" (it reads: "
                         f"{', '.join(OPTIONS[step.name]) or 'none'})"), key=True)
            for i, step in enumerate(ctl.post_steps) if doc is not None
            and step.run is None and step.name in OPTIONS
            for key in step.options if key not in OPTIONS[step.name]]


def _check_roots(loaded: Loaded, doc: Document) -> list[Fault]:
    """A mount root may not resolve to `/` (the schema refuses `/` as written; a symlink to
    `/` is caught here). A root inside another root is allowed: roots are fixed at load, so
    a nested root swapped later for a symlink widens nothing."""
    declared = loaded.campaign.mount_roots  # empty: the root is the project folder
    return [doc.fault(("mount_roots", i), f"mount_roots.{i}: {r!r} resolves to '/'; name "
                                          "the folders that hold mount sources instead")
            for i, (r, real) in enumerate(zip(declared, loaded.roots[:len(declared)],
                                              strict=True))
            if real == Path("/")]


def _stems(folder: Path, limit: int = 10_000) -> list[str]:
    """The control names a folder offers (its *.yaml files), for a "did you mean"."""
    try:
        return [p.name[:-5] for _, p in zip(range(limit), folder.glob("*.yaml"), strict=False)]
    except OSError:
        return []


def load_campaign(path: Path) -> tuple[Loaded | None, list[Fault]]:
    """Load a campaign and everything it names; return all faults found, not just the first."""
    path = Path(os.path.abspath(path))
    campaign, doc, faults = load_model(path, Campaign)
    if campaign is None or doc is None:
        return None, faults
    loaded = Loaded(campaign, path)
    faults += _check_roots(loaded, doc)
    faults += _load_gates(loaded, doc)
    if campaign.executor is not None:
        block, executor_faults = validate(replace(doc, data={"executor": campaign.executor}),
                                          ExecutorBlock)
        faults += executor_faults
        loaded.executor = block.executor if block else ExecutorConfig()
    faults += _load_hook(loaded, doc)
    if campaign.same_host is not None:
        groups, group_faults = validate(replace(doc, data={"same_host": campaign.same_host}),
                                        SameHostBlock)
        faults += group_faults or same_host_faults(groups.same_host, loaded.plan(), doc)
        loaded.same_host = tuple(tuple(g) for g in groups.same_host) if groups else ()
    if loaded.signers_file and not loaded.signers_file.is_file():
        faults.append(doc.fault(("allowed_signers",), f"allowed_signers: "
                                f"{loaded.signers_file} is not a file"))
    lock_file = resolve(campaign.images_lock, path.parent)
    image_lock, _, lock_faults = load_model(lock_file, ImageLock)
    faults += lock_faults
    loaded.image_lock, loaded.image_lock_file = image_lock, lock_file
    controls_dir = loaded.controls_dir
    roots = loaded.mount_roots()
    for i, ref in enumerate(campaign.controls):
        if ref.control in loaded.controls:
            continue
        ctl_path = controls_dir / f"{ref.control}.yaml"
        if not ctl_path.is_file():
            faults.append(doc.fault(("controls", i), f"control {ref.control!r} not found: "
                                                     f"no file {ctl_path}"
                                                     f"{hint(ref.control, _stems(controls_dir))}"))
            continue
        ctl, ctl_doc, ctl_faults = load_model(ctl_path, Control)
        faults += ctl_faults
        if ctl is None:
            continue
        if ctl.name != ref.control:
            faults.append(ctl_doc.fault(("name",), f"control name {ctl.name!r} does not match "
                                                   f"its file name {ctl_path.name!r}"))
        if image_lock is not None and ctl.image not in image_lock.images:
            near = hint(ctl.image, set(image_lock.images))
            if near:  # a pinned name is near: a typo, not an image still to pin
                faults.append(ctl_doc.fault(("image",), f"image {ctl.image!r} is not in "
                                                        f"{lock_file}{near}"))
            else:
                loaded.warnings.append(ctl_doc.fault(("image",), _unpinned(ctl.image,
                                                                           lock_file)))
        faults += _check_mounts(ctl, ctl_path, ctl_doc, roots) + _check_options(ctl, ctl_doc)
        loaded.controls[ref.control] = (ctl, ctl_path)
    return (loaded if not faults else None), faults


def _unpinned(name: str, lock_file: Path) -> str:
    """The warning for an image the lock does not pin yet: the run-time refusal
    (IMAGE-NOT-PINNED, at preflight, before any lock) and the command that lifts it."""
    lock = "" if lock_file == Path.cwd() / "images.lock" else (
        f" --images-lock {shlex.quote(os.path.relpath(lock_file))}")
    return (f"warning: image {name!r} is not pinned in {lock_file.name}, so every run is "
            f"refused ({IMAGE_NOT_PINNED}) until `harness images pin {name} REF{lock}` "
            "pins the local image REF (a tag or repo digest) on the host that runs it")


def _load_hook(loaded: Loaded, doc: Document) -> list[Fault]:
    """The campaign's `hook:` block into `loaded.hook`, with the faults of the block and of
    the environment variables it names that are set here (their values never shown)."""
    if loaded.campaign.hook is None:
        return []
    block, faults = validate(replace(doc, data={"hook": loaded.campaign.hook}), HookBlock)
    if block is None:
        return faults
    loaded.hook = block.hook
    return environment_faults(block.hook, doc, os.environ)


def _load_gates(loaded: Loaded, doc: Document) -> list[Fault]:
    """The campaign's gates, inline (`gates:`) or from the file `gates_file:` names, into
    `loaded.gates`; faults at their positions in whichever file holds them."""
    inline, named = loaded.campaign.gates, loaded.campaign.gates_file
    if inline is not None and named is not None:
        return [doc.fault(("gates_file",), "gates_file: give `gates` or `gates_file`, not both",
                          key=True)]
    if named is not None:
        loaded.gates_file = resolve(named, loaded.campaign_file.parent)
        listed, _, faults = load_model(loaded.gates_file, GateList)
    elif inline is not None:
        listed, faults = validate(replace(doc, data={"gates": inline}), GateList)
    else:
        return []
    loaded.gates = list(listed.gates) if listed else []
    return faults


def check(paths: list[Path]) -> tuple[list[Fault], list[Fault]]:
    """(faults, warnings) for any mix of campaigns, controls and image locks; a warning is
    what every run of a valid file is refused for until the operator acts on the GPU host."""
    faults: list[Fault] = []
    pending: list[Fault] = []  # the campaigns' own warnings (an image to pin)
    controls: dict[str, tuple[Path, Control, Document | None]] = {}  # once per real file
    for p in paths:
        try:
            doc = load(p)
        except YamlFaults as e:
            faults += e.faults
            continue
        kind = kind_of(p, doc.data)
        if kind == "campaign":
            loaded, found = load_campaign(p)
            faults += found
            pending += [w for w in (loaded.warnings if loaded else ()) if w not in pending]
            for ctl, ctl_path in (loaded.controls.values() if loaded else ()):
                controls.setdefault(os.path.realpath(ctl_path), (ctl_path, ctl, None))
        else:
            model = {"lock": ImageLock, "gates": GateList}.get(kind, Control)
            obj, found = validate(doc, model)
            faults += found + (_check_options(obj, doc) if isinstance(obj, Control) else [])
            if isinstance(obj, Control):
                controls[os.path.realpath(p)] = (p, obj, doc)
    warnings = [w for path, ctl, doc in controls.values() for w in _warnings(path, ctl, doc)]
    return faults, pending + warnings


def _warnings(path: Path, ctl: Control, doc: Document | None) -> list[Fault]:
    if ctl.model is None or ctl.model.sha256:
        return []
    text = (f"warning: model.sha256 pins no file, so every run is refused "
            f"({MODEL_UNPINNED}) until `harness model pin FOLDER` on the GPU host fills it")
    doc = doc or _document(path)
    return [doc.fault(("model", "sha256"), text) if doc else Fault(str(path), 1, 1, text)]


def _document(path: Path) -> Document | None:
    try:
        return load(path)
    except YamlFaults:
        return None


def require_campaign(path: Path) -> Loaded:
    """The loaded campaign, or bad input in words: a missing file with the name it most
    likely meant, a control with the campaign that runs it, else every fault."""
    if not os.path.lexists(path):
        raise InvalidInput(wrongfile.missing_file_message(Path(path)))
    loaded, faults = load_campaign(path)
    if loaded is None:
        doc = _document(Path(path))
        if doc is not None and wrongfile.looks_like_control(doc.data):
            raise InvalidInput(wrongfile.control_message(Path(path), doc.data, Path.cwd()))
        raise InvalidInput(f"{path}: campaign is not valid ({counted(len(faults), 'fault')})",
                           faults=[str(f) for f in faults])
    return loaded
