"""Preflight keeps what the run is made from in its folder (`runfolder.inputs`, inputs/).

Each campaign and control file is read again and kept only when its sha256 is the seal's
and it still parses to exactly what the run uses (one edited during a night would
otherwise be kept as if it had run); else SEAL-CHANGED refuses before launch. A control
holding a secret-looking value is kept resolved and redacted as the vector stores it, not
byte for byte."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from harness.base.catalogue import SEAL_CHANGED
from harness.base.reason import Reason
from harness.config.loader import validate
from harness.config.schema import Campaign, Control
from harness.config.yamlsafe import YamlFaults, loads
from harness.measure.runfolder import inputs as kept
from harness.measure.seal import SourceSeal, input_label
from harness.measure.vector import env_value, looks_secret, redact
from harness.pipeline.context import RunContext


def secret_names(control: Control) -> list[str]:
    """Pure: the env names and engine keys whose values the vector passes by name only."""
    found = [f"env.{k}" for k in sorted(control.env) if looks_secret(k)]

    def walk(value: Any, where: str) -> None:
        if isinstance(value, dict):
            for key in sorted(value, key=str):
                if looks_secret(str(key)):
                    found.append(f"{where}.{key}")
                else:
                    walk(value[key], f"{where}.{key}")
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{where}.{i}")

    walk(control.engine, "engine")
    return found


def redacted(value: Any) -> Any:
    """Pure: engine args with each secret-looking value replaced by the vector's marker."""
    if isinstance(value, dict):
        return {k: redact(json.dumps(v, sort_keys=True)) if looks_secret(str(k))
                else redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redacted(v) for v in value]
    return value


def redacted_control(control: dict) -> dict:
    """Pure: the resolved control with the values the vector passes by name only replaced
    by the vector's own sha256 markers (matchable with docker-vector.json)."""
    env = control.get("env")
    out = dict(control)
    if isinstance(env, dict):
        out["env"] = {k: redact(env_value(v)) if looks_secret(str(k)) else v
                      for k, v in env.items()}
    out["engine"] = redacted(control.get("engine"))
    return out


def parses_to(data: bytes, name: str, model: type[BaseModel], used: BaseModel) -> bool:
    """Whether these bytes load (as the loader loads them) to exactly the model in use."""
    try:
        found, faults = validate(loads(data.decode("utf-8"), name), model)
    except (UnicodeDecodeError, YamlFaults):
        return False
    return found is not None and not faults and (
        found.model_dump(mode="json") == used.model_dump(mode="json"))


def keep_files(ctx: RunContext, seal: SourceSeal) -> tuple[dict, list[Reason]]:
    """Keep campaign.yaml and control.yaml (checked); their entries and refusals."""
    sources = {"campaign": (ctx.loaded.campaign_file, Campaign, ctx.loaded.campaign),
               "control": (ctx.control_file, Control, ctx.control)}
    secrets = secret_names(ctx.control)
    entries: dict[str, dict] = {}
    reasons: list[Reason] = []
    for name, (path, model, used) in sources.items():
        label = input_label(ctx.loaded.project_dir, path)
        entry = entries[name] = {"path": str(path), "label": label,
                                 "sha256": seal.files.get(label), "kept": None, "why": None}
        data, why = kept.read_copy(path)
        problem = kept.copy_problem(label, entry["sha256"], data, why)
        if problem is None and data is not None and not parses_to(data, label, model, used):
            problem = (f"{label}: no longer the file this run was loaded from (its bytes, as "
                       "sealed, load to another campaign or control)")
        if problem is not None:
            reasons.append(Reason(SEAL_CHANGED, problem))
            entry["why"] = problem
        elif name == "control" and secrets:
            entry["why"] = (f"not kept byte for byte: it holds values under secret-looking "
                            f"names ({', '.join(secrets[:10])}); {kept.KEPT['resolved']} "
                            "shows them redacted")
        elif data is not None:
            entry["kept"] = kept.write_copy(ctx.run_dir, name, data)
    return entries, reasons


def resolved_doc(ctx: RunContext, entries: dict) -> dict:
    """Pure: resolved.json: both documents as loaded, with what the loader derived."""
    loaded = ctx.loaded
    return {
        "schema": kept.SCHEMA,
        "files": entries,
        "campaign": loaded.campaign.model_dump(mode="json"),
        "control": redacted_control(ctx.control.model_dump(mode="json")),
        "loaded": {"lock": str(loaded.lock_path),
                   "mount_roots": [str(r) for r in loaded.mount_roots()],
                   "controls_dir": str(loaded.controls_dir),
                   "images_lock": str(loaded.image_lock_file) if loaded.image_lock_file
                   else None,
                   "gates_file": str(loaded.gates_file) if loaded.gates_file else None,
                   "same_host": [list(g) for g in loaded.same_host]},
    }


def image_doc(ctx: RunContext, seal: SourceSeal) -> dict:
    """Pure: image.json: the images.lock entry of the control's image (None: not pinned)."""
    loaded, name = ctx.loaded, ctx.control.image
    pinned = loaded.image_lock.images.get(name) if loaded.image_lock else None
    lock_file = loaded.image_lock_file
    label = input_label(loaded.project_dir, lock_file) if lock_file else None
    return {"schema": kept.IMAGE_SCHEMA, "name": name,
            "lock_file": str(lock_file) if lock_file else None,
            "lock_sha256": seal.files.get(label) if label else None,
            "entry": pinned.model_dump(mode="json") if pinned is not None else None}


def keep(ctx: RunContext, seal: SourceSeal) -> list[Reason]:
    """Write inputs/ (the copies, resolved.json, image.json); the reasons that refuse."""
    entries, reasons = keep_files(ctx, seal)
    kept.write_document(ctx.run_dir, "resolved", resolved_doc(ctx, entries))
    kept.write_document(ctx.run_dir, "image", image_doc(ctx, seal))
    return reasons
