"""When a command that wants a campaign is given something else (a mistyped file name, a
control): say what the file is and what to type instead, as git does, rather than the
schema's faults for the wrong kind.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.config.suggest import nearest
from harness.config.yamlsafe import YamlFaults, load

SCAN_LIMIT = 200  # YAML files looked at per folder: a hint, never a crawl
YAML_SUFFIXES = (".yaml", ".yml")


def nearest_file(typed: str, names: list[str]) -> str | None:
    """Pure: the file `typed` most likely meant, spelled as the user spelled its folder
    (`campaigns/rehersal.yaml` -> `campaigns/rehearsal.yaml`); None when nothing is near."""
    folder, _, base = typed.rpartition("/")
    near = nearest(base, names)
    if near is None or near == base:
        return None
    return f"{folder}/{near}" if folder else near


def yaml_names(folder: Path, limit: int = SCAN_LIMIT) -> list[str]:
    """The YAML file names in `folder` (at most `limit`; none when it cannot be read)."""
    try:
        with os.scandir(folder) as it:
            out = []
            for entry in it:
                if entry.name.endswith(YAML_SUFFIXES):
                    out.append(entry.name)
                    if len(out) >= limit:
                        break
            return out
    except OSError:
        return []


def missing_file_message(path: Path) -> str:
    """"X: no such campaign file (did you mean Y?)" for a campaign path that does not exist."""
    typed = str(path)
    near = nearest_file(typed, yaml_names(path.parent))
    return f"{typed}: no such campaign file" + (f" (did you mean {near}?)" if near else "")


def names_control(data: object, control: str) -> bool:
    """Pure: does a campaign document (as loaded) list `control` among its controls?"""
    if not isinstance(data, dict) or not isinstance(data.get("controls"), list):
        return False
    for ref in data["controls"]:
        name = ref.get("control") if isinstance(ref, dict) else ref
        if name == control:
            return True
    return False


def campaign_folders(control_file: Path, cwd: Path) -> list[Path]:
    """Where a campaign naming this control is looked for: `campaigns/` here, and the
    control's parent's sibling `campaigns/` folder (controls/x.yaml -> campaigns/)."""
    out: list[Path] = []
    for folder in (cwd / "campaigns", Path(os.path.abspath(control_file)).parent.parent
                   / "campaigns"):
        real = Path(os.path.realpath(folder))
        if real not in [Path(os.path.realpath(f)) for f in out]:
            out.append(folder)
    return out


def campaigns_naming(control: str, folders: list[Path]) -> list[Path]:
    """The campaign files in `folders` that list `control`, in name order."""
    found: list[Path] = []
    for folder in folders:
        for name in sorted(yaml_names(folder)):
            try:
                doc = load(folder / name)
            except YamlFaults:
                continue
            if names_control(doc.data, control):
                found.append(folder / name)
    return found


def control_hint(typed: Path, control: str | None, campaign: Path | None) -> str:
    """Pure: the one line for a control given where a campaign belongs."""
    if not control or campaign is None:
        return f"{typed}: this is a control, not a campaign"
    return (f"{typed}: this is a control; run it with `harness run {campaign} "
            f"--control {control}`")


def shown(path: Path, cwd: Path) -> Path:
    """`path` relative to `cwd` when it lies under it (as a user would type it)."""
    try:
        return Path(os.path.abspath(path)).relative_to(cwd)
    except ValueError:
        return path


def control_message(path: Path, data: object, cwd: Path) -> str:
    """What to say for a control file passed as a campaign: which campaign runs it."""
    name = data.get("name") if isinstance(data, dict) else None
    name = name if isinstance(name, str) and name.isprintable() and len(name) < 200 else None
    found = campaigns_naming(name, campaign_folders(path, cwd)) if name else []
    return control_hint(path, name, shown(found[0], cwd) if found else None)


def looks_like_control(data: object) -> bool:
    """Pure: a document that is a control (a name and an image, no controls list)."""
    return isinstance(data, dict) and "image" in data and "controls" not in data


