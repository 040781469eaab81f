"""The BagIt (RFC 8493) tag files of a bundle, as pure functions of the runs.

No clock is read (Bagging-Date comes from the runs), so exporting the same runs twice
gives the same bytes. Manifests use `sha256sum`'s line format, so `sha256sum -c` checks them."""

from __future__ import annotations

import re

from harness import __version__
from harness.readers.bundle.facts import RunFacts, host_name, time_span
from harness.readers.bundle.sign import NAMESPACE
from harness.readers.bundle.sums import format_sums

BAGIT_TXT = "bagit.txt"
BAG_INFO = "bag-info.txt"
MANIFEST = "manifest-sha256.txt"
TAGMANIFEST = "tagmanifest-sha256.txt"
SIGNATURE = TAGMANIFEST + ".sig"
STATEMENT = "metadata/statement.intoto.json"
PAYLOAD_DIR = "data"
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


def signature_claims(info: str) -> list[str]:
    """The `Bag-Signature` values bag-info.txt's text holds (none: written unsigned). Pure."""
    label = f"{SIGNATURE_LABEL}:"
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


def manifest_text(entries: dict[str, str]) -> str:
    """A manifest or tag manifest in `sha256sum` format, sorted by path."""
    return format_sums(entries)
