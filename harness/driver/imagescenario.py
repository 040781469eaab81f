"""The image gate an installed harness runs: the instrument's scenario in a campaign's image.

For each image the campaign pins, it stages a campaign of the two controls shipped in the
wheel (harness/data/selftest/image-gate/): the image's own vLLM runs the scenario on the
CPU, and the image-gate post-step accepts only the expected Gate 0 findings. The staged
campaign takes only the operator's images.lock, GPU lock and lock timeout, lives in a
temporary folder (the checkout stays clean), and runs through the one loop; the scenario
is mounted read-only from the installed package, so the seal covers the wheel's bytes."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from harness.base.errors import EnvironmentFault, InvalidInput, Refused
from harness.base.names import RunId
from harness.base.readfile import InputError, read_bounded
from harness.base.states import Status
from harness.base.tree import printable
from harness.config.loader import Loaded, require_campaign
from harness.config.suggest import hint
from harness.config.yamlsafe import YamlFaults, load
from harness.driver.drive import drive
from harness.driver.local import LocalExecutor
from harness.driver.plan import Outcome, PlanSource
from harness.judge.gate0cases import CaseResult
from harness.measure.runfolder.layout import SUMS
from harness.measure.runfolder.sealed import read_record
from harness.measure.ui import Reporter

DATA = Path(__file__).resolve().parents[1] / "data" / "selftest" / "image-gate"
SCENARIO = DATA / "scenario"
TEMPLATES = DATA / "controls"
CONTROLS = ("selftest-image-gate", "selftest-image-gate-inproc")
CAMPAIGN = "selftest-image-gate"
SCENARIO_FILE = "image_scenario.py"
HEADER = ("# Staged by `harness selftest --image-gate` from the control shipped in the harness "
          "wheel\n# (harness/data/selftest/image-gate/controls/), in the image the operator's "
          "campaign pins.\n")


def images_of(loaded: Loaded, asked: tuple[str, ...]) -> list[str]:
    """Pure: the images asked (each pinned), else every image the controls name."""
    pinned = set(loaded.image_lock.images) if loaded.image_lock is not None else set()
    for name in asked:
        if name not in pinned:
            raise InvalidInput(f"--image {name[:100]!r}: not pinned in "
                               f"{loaded.image_lock_file}{hint(name, pinned)}")
    if asked:
        return list(dict.fromkeys(asked))
    return list(dict.fromkeys(loaded.controls[c][0].image for c, _ in loaded.plan()))


def _plain(path: Path, what: str) -> str:
    """A path the staged YAML can name as it is: the loader expands `~` and `$` in one."""
    text = str(path)
    if "$" in text or text.startswith("~"):
        raise InvalidInput(f"{what} {printable(text)}: a path with '$' or a leading '~' "
                           "cannot be staged (the loader would expand it)")
    return text


def campaign_doc(loaded: Loaded, image: str, scenario: Path) -> dict[str, Any]:
    """Pure: the staged campaign (the operator's lock files, the scenario, two controls)."""
    if loaded.image_lock_file is None:
        raise InvalidInput(f"{loaded.campaign_file}: names no images.lock")
    return {"name": CAMPAIGN, "row": "SELFTEST",
            "description": (f"The image gate of campaign {loaded.campaign.name} "
                            f"({printable(str(loaded.campaign_file))}) in its image {image}, "
                            "staged by harness selftest --image-gate."),
            "lock": _plain(loaded.lock_path, "the GPU lock"),
            "lock_timeout": loaded.campaign.lock_timeout,
            "images_lock": _plain(loaded.image_lock_file, "images.lock"),
            "mount_roots": [_plain(scenario, "the scenario folder")],
            "controls": list(CONTROLS), "stop_policy": "continue"}


def control_doc(template: dict[str, Any], image: str, scenario: Path) -> dict[str, Any]:
    """Pure: a shipped control in `image`, its one mount the scenario folder."""
    mounts = template.get("mounts")
    if not isinstance(mounts, list) or len(mounts) != 1 or not isinstance(mounts[0], dict):
        raise EnvironmentFault(f"{TEMPLATES}: a shipped image-gate control has not the one "
                               "scenario mount it should: this installation is damaged")
    return {**template, "image": image,
            "mounts": [{**mounts[0], "source": _plain(scenario, "the scenario folder")}]}


def _template(name: str) -> dict[str, Any]:
    path = TEMPLATES / f"{name}.yaml"
    try:
        data = load(path, "image-gate control").data
    except YamlFaults as e:
        raise EnvironmentFault(f"{path}: the image gate's control is not readable "
                               f"({e.faults[0].message}): this installation lacks or has "
                               "damaged the harness's package data") from None
    if not isinstance(data, dict):
        raise EnvironmentFault(f"{path}: not a control: this installation is damaged")
    return data


def scenario_dir() -> Path:
    """The installed scenario folder (real path); EnvironmentFault when it is not there."""
    real = Path(os.path.realpath(SCENARIO))
    if not (real / SCENARIO_FILE).is_file():
        raise EnvironmentFault(f"{SCENARIO / SCENARIO_FILE} is missing: this installation "
                               "lacks the harness's package data (reinstall the wheel)")
    return real


def stage(loaded: Loaded, image: str, folder: Path) -> Loaded:
    """Write the staged campaign for `image` under `folder` and load it as any campaign."""
    scenario = scenario_dir()
    (folder / "campaigns").mkdir(parents=True)
    (folder / "controls").mkdir()
    for name in CONTROLS:
        doc = control_doc(_template(name), image, scenario)
        (folder / "controls" / f"{name}.yaml").write_text(
            HEADER + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False))
    campaign = folder / "campaigns" / f"{CAMPAIGN}.yaml"
    campaign.write_text(HEADER.replace("the control", "the controls") + yaml.safe_dump(
        campaign_doc(loaded, image, scenario), sort_keys=False, default_flow_style=False))
    return require_campaign(campaign)


def run_staged(staged: Loaded, runs_dir: Path, ui: Reporter, *, lock_timeout: float | None,
               before_launch: Callable[[], None] | None,
               on_outcome: Callable[[Outcome], None] = lambda o: None) -> list[Outcome]:
    """Both controls through the one loop (every control runs, whatever the first did)."""
    executor = LocalExecutor(staged, ui, lock_timeout=lock_timeout,
                             before_launch=before_launch, wait_first=True)
    driven = drive(PlanSource(staged.plan(), runs_dir), executor, stop_policy="continue",
                   ui=ui, raise_errors=True, on_outcome=on_outcome)
    return driven.outcomes


def sums_digest(run_dir: Path) -> str | None:
    """sha256 of the run's SHA256SUMS, which binds a gate record's output to this run."""
    try:
        return "sha256:" + hashlib.sha256(read_bounded(run_dir / SUMS, 64 << 20,
                                                       "manifest")).hexdigest()
    except InputError:
        return None


def result_of(image: str, proves: dict[str, str], outcome: Outcome) -> CaseResult:
    """One staged run as a result: passed only when it verifies and was accepted."""
    run_id = RunId(outcome.run_dir.name)
    control = max((c for c in CONTROLS if run_id.of_control(c)), key=len, default=run_id)
    name = f"{image}/{control}"
    where = f"{outcome.run_dir} (SHA256SUMS {sums_digest(outcome.run_dir) or 'none'})"
    try:
        record = read_record(outcome.run_dir)
    except (Refused, InvalidInput) as e:
        return CaseResult(name, proves.get(control, ""), False, f"not sealed: {where}",
                          e.message)
    reasons = "; ".join(r.text() for r in record.reasons)
    passed = record.status == Status.ACCEPTED
    return CaseResult(name, proves.get(control, ""), passed, f"{record.status}: {where}",
                      None if passed else reasons or f"sealed {record.status}")


def proofs() -> dict[str, str]:
    """Each shipped control's description: what its run proves."""
    return {name: str(_template(name).get("description", "")) for name in CONTROLS}
