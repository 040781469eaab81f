"""The BagIt (RFC 8493) layout and tag files of a bundle, as pure functions of the runs.

No clock is read (Bagging-Date comes from the runs), so exporting the same runs twice
gives the same bytes. Manifests use `sha256sum`'s line format, so `sha256sum -c` checks them.

Each bundled folder keeps its place under `data/`, so its relative links still work: a night
goes to `data/nights/<night>/` and each run to `data/<run-id>/`, as in RUNS, so summary.html's
`../../<run-id>/` links resolve inside the bag. Older bags keep a night at `data/<night>/` and
are read the same way, so they still verify and merge.

One detached SSH signature (`ssh-keygen -Y`) over tagmanifest-sha256.txt covers the bundle:
the tag manifest pins every tag file and they pin every payload file."""

from __future__ import annotations

import re
from pathlib import Path

from harness import __version__
from harness.judge.approval.signature import SignatureCheck
from harness.measure.nightfolder.naming import NIGHTS  # data/nights/<night>/, as in RUNS
from harness.probe import sshsig
from harness.readers.bundle.facts import RunFacts, host_name, time_span

BAGIT_TXT = "bagit.txt"
BAG_INFO = "bag-info.txt"
MANIFEST = "manifest-sha256.txt"
TAGMANIFEST = "tagmanifest-sha256.txt"
SIGNATURE = TAGMANIFEST + ".sig"
STATEMENT = "metadata/statement.intoto.json"
PAYLOAD_DIR = "data"
NAMESPACE = "harness-evidence"  # of the bag's own signature
# A signed bag says so in bag-info.txt, which the tag manifest (and so the signature)
# covers: a signature deleted later leaves this line behind (harness.readers.bundle.trust).
SIGNATURE_LABEL = "Bag-Signature"


def bagit_txt() -> str:
    """The bag declaration: version 1.0, UTF-8 tag files."""
    return "BagIt-Version: 1.0\nTag-File-Character-Encoding: UTF-8\n"


def payload_oxum(sizes: list[int]) -> str:
    """RFC 8493 Payload-Oxum: total octets, a dot, the file count."""
    return f"{sum(sizes)}.{len(sizes)}"


def _clean(value: object) -> str:
    """One tag value on one line: RFC 8493 folds long values, we simply drop line breaks."""
    return re.sub(r"[\r\n]+", " ", str(value)).strip()


def _distinct(values: list[object]) -> list[str]:
    return sorted({_clean(v) for v in values if v not in (None, "")})


def signature_claim() -> str:
    """The `Bag-Signature` value of a signed bag: its signature file and namespace."""
    return f"{SIGNATURE} {NAMESPACE}"


def info_values(info: str, label: str) -> list[str]:
    """The values bag-info.txt's text gives `label`, in order (`Bag-Signature`: none when it
    was written unsigned). Pure."""
    label = f"{label}:"
    return [line[len(label):].strip() for line in info.splitlines() if line.startswith(label)]


def bag_info(runs: list[RunFacts], oxum: str, signed: bool = False) -> str:
    """bag-info.txt: campaign, rows, seals, image Ids, hosts, date range, Payload-Oxum, and
    for a bag that is signed as it is written, `Bag-Signature`."""
    runs = sorted(runs, key=lambda r: r.run_id)
    start, end = time_span(runs)
    tags: list[tuple[str, list[str]]] = [
        ("Bag-Software-Agent", [f"harness {__version__}"]),
        ("Bagging-Date", [end[:10]] if end else []),
        ("Date-Range", [f"{start}/{end}"] if start and end else []),
        ("Campaign", _distinct([r.get("campaign", "name") for r in runs])),
        ("Run-Id", [_clean(r.run_id) for r in runs]),
        ("Campaign-Row", [
            _clean(" ".join(str(part) for part in (
                r.run_id, r.get("campaign", "name"), "row", r.get("campaign", "row"),
            ) if part is not None))
            for r in runs if r.get("campaign", "row") is not None
        ]),
        ("Run-Status", [_clean(f"{r.run_id} {r.get('status')}") for r in runs
                        if r.get("status")]),
        ("Image-Id", _distinct([
            f"{r.get('image', 'id')} {r.get('image', 'name') or ''}".strip()
            for r in runs if r.get("image", "id")
        ])),
        ("Source-Seal", _distinct([r.get("seal") for r in runs])),
        ("Host", _distinct([host_name(r) for r in runs])),
        ("Payload-Oxum", [oxum]),
        (SIGNATURE_LABEL, [signature_claim()] if signed else []),
    ]
    return "".join(f"{label}: {value}\n" for label, values in tags for value in values)


def sign(data: bytes, key: Path) -> bytes:
    """An SSHSIG signature of the tag manifest `data` with `key`, namespace harness-evidence."""
    return sshsig.sign(data, key, NAMESPACE, TAGMANIFEST)


def verify(data: bytes, signature: bytes, allowed_signers: Path) -> SignatureCheck:
    """Check a bundle's signature over `data` against an allowed_signers file, offline."""
    return sshsig.verify(data, signature, allowed_signers, NAMESPACE)


def arc_folder(name: str, night: bool) -> str:
    """The folder under data/ for a bundled folder named `name`: nights go to nights/."""
    return f"{NIGHTS}/{name}" if night else name


def bundled_folder(path: str) -> str | None:
    """The bundled folder (`data/<name>` or `data/nights/<name>`) a payload path lies in, or None
    for a path directly in data/ or data/nights/ (not in any bundled folder)."""
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != PAYLOAD_DIR:
        return None
    if parts[1] != NIGHTS:
        return "/".join(parts[:2])
    return "/".join(parts[:3]) if len(parts) >= 4 else None


def is_night_folder(folder: str) -> bool:
    """Whether a bundled folder (`data/...` or relative to data/) is in the nights place."""
    return folder.removeprefix(f"{PAYLOAD_DIR}/").startswith(f"{NIGHTS}/")
