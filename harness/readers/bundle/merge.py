"""`bundle merge`: several bundles (one per host, say) -> one bundle of all their runs.

Each input is judged by `verify_archive`, the path `bundle verify` takes; one failing
input refuses the whole merge and nothing is written. A merge that signs vouches for every
byte, so it first authenticates every input (`trust.merging`); a stripped signature is
refused, never merged as "unsigned". The result is written by the export writer, so it
verifies like any export and merging exports of A and B gives the bytes of exporting both.
A name two inputs hold is kept once if byte-identical, else refused."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from harness.base.errors import InvalidInput, Refused
from harness.readers.bundle import bag, chain
from harness.readers.bundle.bag import arc_folder, bundled_folder, is_night_folder
from harness.readers.bundle.export import ExportResult, check_output, read_runs, write_bundle
from harness.readers.bundle.payload import NIGHT_RECORD, Payload, PayloadFile
from harness.readers.bundle.records import read_member, read_text_member
from harness.readers.bundle.safe_extract import open_archive
from harness.readers.bundle.statement import StatementSpool
from harness.readers.bundle.sums import BundleFault, one_line, parse_sums
from harness.readers.bundle.trust import Policy, merging
from harness.readers.bundle.verify import verify_archive

CARRIED_TAGS = (f"{chain.APPROVALS_TAGS}/", f"{chain.GATES_TAGS}/")


class MergeRefused(Refused):
    """An input does not verify, or two inputs disagree; `problems` names each (exit 1)."""

    def __init__(self, problems: list[BundleFault]) -> None:
        super().__init__(f"not merged: {len(problems)} problem(s) in the given bundles")
        self.problems = problems


@dataclass
class MergeResult(ExportResult):
    """The bundle written, as export reports it, and the inputs it was merged from."""

    inputs: list[tuple[str, str]] = field(default_factory=list)  # (bundle, sha256 hex)
    vouches: list[tuple[str, list[str]]] = field(default_factory=list)  # (bundle, who for what)


@dataclass
class _Input:
    """One verified input: its unpacked top folder and what its manifests list."""

    name: str  # as given, for messages
    sha256: str  # of the archive's bytes, as they were unpacked
    vouches: list[str]  # who vouched for what in it (trust.Vouch, as lines)
    root: Path
    folders: dict[str, dict[str, str]]  # folder under the merged data/ -> {rel: sha256}
    tags: dict[str, str]  # carried tag files (approvals, gate records) -> sha256
    sources: dict[str, str] = field(default_factory=dict)  # that folder -> its place here


def split_manifest(manifest: dict[str, str]) -> dict[str, dict[str, str]]:
    """{data/<folder>/<rel>: sha} -> {folder: {rel: sha}}, a folder being the bundled
    folder's path under data/ (`<run-id>`, or `nights/<night>`: `places`). Pure."""
    folders: dict[str, dict[str, str]] = {}
    for path, digest in manifest.items():
        where = bundled_folder(path) or path.rsplit("/", 1)[0]  # verified: never the latter
        folder = where.removeprefix(f"{bag.PAYLOAD_DIR}/")
        folders.setdefault(folder, {})[path[len(where) + 1:]] = digest
    return folders


def placed(folders: dict[str, dict[str, str]]) -> dict[str, str]:
    """{folder under data/ in the merged bag: folder under data/ in the input}. An older bundle's
    night at data/<night>/ moves to data/nights/<night>/, where its summary's links resolve."""
    out: dict[str, str] = {}
    for folder, files in folders.items():
        night = NIGHT_RECORD in files and not is_night_folder(folder)
        out[arc_folder(folder, night)] = folder
    return out


def combine(inputs: list[tuple[str, dict[str, dict[str, str]], dict[str, str]]]
            ) -> tuple[dict[str, int], dict[str, int], list[BundleFault]]:
    """Which input each folder and carried tag file is taken from (by index), and a problem for each
    name two inputs hold with different bytes."""
    folders: dict[str, int] = {}
    tags: dict[str, int] = {}
    problems: list[BundleFault] = []
    for index, (name, held, carried) in enumerate(inputs):
        for folder, files in sorted(held.items()):
            first = folders.setdefault(folder, index)
            if first != index and inputs[first][1][folder] != files:
                problems.append(BundleFault(
                    "collision", f"{bag.PAYLOAD_DIR}/{folder}",
                    f"{inputs[first][0]} and {name} hold different files under this name"))
        for tag, digest in sorted(carried.items()):
            first = tags.setdefault(tag, index)
            if first != index and inputs[first][2][tag] != digest:
                problems.append(BundleFault(
                    "collision", tag, f"{inputs[first][0]} and {name} carry different bytes"))
    return folders, tags, problems


def _open_input(source: Path, dest: Path, policy: Policy
                ) -> tuple[_Input | None, list[BundleFault]]:
    """Unpack and verify one input as `bundle verify` does, under `policy`; InvalidInput
    (exit 2) for a hostile or unreadable one."""
    shown = one_line(str(source))
    dest.mkdir()
    with open_archive(source) as (fh, digest):
        root, report = verify_archive(source, dest, policy, opened=fh)
    if not report.ok:
        return None, [BundleFault(p.kind, f"{shown}: {p.path}", p.detail) for p in report.problems]
    manifest, _ = parse_sums(read_text_member(root, bag.MANIFEST), bag.MANIFEST)
    tagmanifest, _ = parse_sums(read_text_member(root, bag.TAGMANIFEST), bag.TAGMANIFEST)
    carried = {t: d for t, d in tagmanifest.items() if t.startswith(CARRIED_TAGS)}
    held = split_manifest(manifest)
    sources = placed(held)
    return _Input(shown, digest, [str(v) for v in report.vouches], root,
                  {arc: held[src] for arc, src in sources.items()}, carried, sources), []


def _payload(inputs: list[_Input], chosen: dict[str, int]) -> Payload:
    files: list[PayloadFile] = []
    roots: list[tuple[str, Path]] = []
    for folder, index in sorted(chosen.items()):
        source = inputs[index].root / bag.PAYLOAD_DIR / inputs[index].sources[folder]
        roots.append((folder, source))
        files.extend(PayloadFile(f"{bag.PAYLOAD_DIR}/{folder}/{rel}", source, rel,
                                 os.lstat(source / rel).st_size)
                     for rel in inputs[index].folders[folder])
    files.sort(key=lambda f: f.arcname)
    return Payload(files=files, roots=roots, named=[name.rsplit("/", 1)[-1] for name, _ in roots])


def merge_bundles(bundles: list[Path], output: Path, sign_key: Path | None = None,
                  allowed_signers: Path | None = None) -> MergeResult:
    """Verify each bundle, then write one bundle of all their folders to `output`. MergeRefused
    (exit 1) names every failing input or collision; a key without signers is exit 2."""
    output = Path(output)
    compress = check_output(output, sign_key)
    if not bundles:
        raise InvalidInput("give at least one bundle to merge")
    policy = merging(sign_key, allowed_signers)
    # Unpacked beside the output: a night's inputs may be far larger than /tmp.
    with tempfile.TemporaryDirectory(prefix=".harness-merge-", dir=output.parent) as tmp:
        inputs: list[_Input] = []
        problems: list[BundleFault] = []
        for index, source in enumerate(bundles):
            opened, bad = _open_input(Path(source), Path(tmp) / str(index), policy)
            problems += bad
            if opened is not None:
                inputs.append(opened)
        if problems:
            raise MergeRefused(problems)
        chosen, tag_from, problems = combine([(i.name, i.folders, i.tags) for i in inputs])
        if problems:
            raise MergeRefused(problems)
        payload = _payload(inputs, chosen)
        tags = {tag: read_member(inputs[index].root, tag)
                for tag, index in sorted(tag_from.items())}
        with StatementSpool() as spool:
            runs = read_runs(payload, spool)
            top, digest = write_bundle(output, payload, runs, spool, compress=compress,
                                       sign_key=sign_key, chain_tags=tags)
    return MergeResult(output, top, len(payload.files), [r.run_id for r in runs],
                       sign_key is not None, digest, [(i.name, i.sha256) for i in inputs],
                       [(i.name, i.vouches) for i in inputs])
