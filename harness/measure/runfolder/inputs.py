"""What a run was made from, kept in its folder: the one writer and reader of inputs/.

A reviewer holding only the run folder must see the YAML behind the source seal's digests,
so preflight keeps `campaign.yaml` and `control.yaml` (written only when their sha256 is
the seal's: a file swapped after sealing is never kept as the sealed one), `resolved.json`
(as the loader resolved them, secrets redacted) and `image.json` (the images.lock entry).
The reader serves sealed folders only: each file must hash to what SHA256SUMS claims."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from harness.base.atomic import write_bytes
from harness.base.readfile import InputError, TooLarge, read_bounded, read_fd
from harness.base.tree import open_beneath
from harness.config.yamlsafe import MAX_BYTES as YAML_LIMIT
from harness.measure.runfolder import layout, manifest

SCHEMA = "harness.inputs/v1"
IMAGE_SCHEMA = "harness.inputs.image/v1"
# name -> the file under inputs/: what `harness show RUN --input NAME` prints
KEPT = {"campaign": layout.INPUT_CAMPAIGN, "control": layout.INPUT_CONTROL,
        "resolved": layout.INPUT_RESOLVED, "image": layout.INPUT_IMAGE}
COPY_LIMIT = YAML_LIMIT  # the loader's own bound: a bigger file never loaded
READ_LIMIT = 4 * YAML_LIMIT  # resolved.json holds both files' values, plus the lock entry
NOT_KEPT = "not kept (run made before the harness kept its inputs)"


def read_copy(path: Path) -> tuple[bytes | None, str | None]:
    """An operator's input file's bytes, read once, bounded as the loader reads it; or why not."""
    try:
        return read_bounded(path, COPY_LIMIT, "input file", follow_symlinks=True), None
    except InputError as e:
        return None, e.message


def copy_problem(label: str, sealed_hex: str | None, data: bytes | None,
                 read_error: str | None = None) -> str | None:
    """Pure: why these bytes may not be kept as the sealed file `label`."""
    if data is None:
        return f"{label}: could not be read again to keep a copy ({read_error})"
    if sealed_hex is None:
        return f"{label}: not in the run's source seal, so no copy of it can be vouched for"
    got = hashlib.sha256(data).hexdigest()
    if got != sealed_hex:
        return (f"{label}: changed between the source seal (sha256 {sealed_hex[:12]}) and "
                f"the copy kept in {layout.INPUTS}/ (sha256 {got[:12]})")
    return None


def _write(run_dir: Path, rel: str, data: bytes) -> None:
    (run_dir / layout.INPUTS).mkdir(mode=0o755, exist_ok=True)
    write_bytes(run_dir / rel, data, exclusive=True)  # atomic; evidence is append-only


def write_copy(run_dir: Path, name: str, data: bytes) -> str:
    """Keep `data` as inputs/<name>.yaml; returns the file's name in the run folder."""
    _write(run_dir, KEPT[name], data)
    return KEPT[name]


def write_document(run_dir: Path, name: str, doc: Any) -> str:
    """Keep `doc` as inputs/<name>.json: sorted keys, ASCII, so every value is inert."""
    data = json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True) + "\n"
    _write(run_dir, KEPT[name], data.encode())
    return KEPT[name]


def has_inputs(run_dir: Path) -> bool:
    """Whether the run kept its inputs at all (older runs have no inputs/)."""
    folder = Path(run_dir) / layout.INPUTS
    return folder.is_dir() and not folder.is_symlink()


def read_kept(run_dir: Path, name: str, claims: dict[str, str] | None = None
              ) -> tuple[bytes | None, str | None]:
    """(bytes of inputs/<name> as sealed, None) or (None, why not); `claims`: SHA256SUMS's."""
    rel = KEPT[name]
    run_dir = Path(run_dir)
    if not os.path.lexists(run_dir / rel):
        return None, (NOT_KEPT if not has_inputs(run_dir) else f"{rel} was not kept")
    try:
        claims = claims if claims is not None else dict(manifest.load(run_dir / layout.SUMS)[0])
        fd = open_beneath(run_dir, rel)
        try:
            data = read_fd(fd, READ_LIMIT)
        finally:
            os.close(fd)
    except (OSError, InputError, TooLarge) as e:
        return None, f"{rel}: cannot be read ({getattr(e, 'message', None) or e})"[:500]
    if rel not in claims or hashlib.sha256(data).hexdigest() != claims[rel]:
        return None, f"{rel} is not the file the run's seal vouches for"
    return data, None


def read_kept_json(run_dir: Path, name: str, claims: dict[str, str] | None = None
                   ) -> tuple[Any, str | None]:
    """A kept JSON document (`resolved`, `image`), parsed; or None and why not."""
    data, why = read_kept(run_dir, name, claims)
    if data is None:
        return None, why
    try:
        return json.loads(data.decode("utf-8")), None
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        return None, f"{KEPT[name]} is not valid JSON ({type(e).__name__})"


def kept_digests(run_dir: Path) -> dict[str, str] | None:
    """name -> sha256 hex of each kept input per SHA256SUMS; None when none or unreadable."""
    if not has_inputs(run_dir):
        return None
    try:
        claims = dict(manifest.load(Path(run_dir) / layout.SUMS)[0])
    except (OSError, InputError):
        return None
    return {name: claims[rel] for name, rel in KEPT.items() if rel in claims}
