"""`bundle verify`: check a bundle offline and name every file that is wrong.

Each layer is checked on its own so one report names everything; the `bagit` library is
a second opinion on an unpacked folder. Each file is hashed once, serving the bag's manifest
and its run's SHA256SUMS alike; an archive is judged from its stream, and only the members
verify reads are written."""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import bagit

from harness.base.errors import InvalidInput
from harness.base.hashing import sha256_tree_each
from harness.base.tree import MAX_DEPTH, Entry, listed, walk
from harness.measure.runfolder.layout import RECORD, SUMS
from harness.readers.bundle import bag, chain
from harness.readers.bundle.facts import read_run_facts
from harness.readers.bundle.listing import RunLine, approval_docs, run_lines
from harness.readers.bundle.records import BadMember, read_member, read_text_member
from harness.readers.bundle.safe_extract import Limits, Unpacked, open_archive, unpack
from harness.readers.bundle.seals import bag_runs, layout_problems, run_digests, run_problems
from harness.readers.bundle.statement import check_statement
from harness.readers.bundle.sums import BundleFault, compare, one_line, parse_sums
from harness.readers.bundle.trust import BAD, GOOD, STRIPPED, UNCHECKED, UNSIGNED, Policy, Vouch

REQUIRED_TAGS = (bag.BAGIT_TXT, bag.BAG_INFO, bag.MANIFEST, bag.STATEMENT)
UNMANIFESTED = (bag.TAGMANIFEST, bag.SIGNATURE)  # the tag manifest cannot list itself
THREADED_BYTES = 16 << 20


@dataclass
class VerifyReport:
    problems: list[BundleFault] = field(default_factory=list)
    files: int = 0
    runs: list[str] = field(default_factory=list)
    signature: str = "unsigned"  # the bag's own signature, in a word (or who made it)
    vouches: list[Vouch] = field(default_factory=list)  # the bag's, then each approval's
    lines: list[RunLine] = field(default_factory=list)  # each run: status, control, approval
    sha256: str = ""  # of the archive verified (an unpacked folder has none)

    @property
    def ok(self) -> bool:
        return not self.problems


def _scan(root: Path, streamed: Unpacked | None, problems: list[BundleFault]
          ) -> tuple[dict[str, str], dict[str, int]]:
    """{relpath: sha256 hex} and {relpath: size} of every regular file of the bag, sorted: as
    `unpack` listed and hashed the archive, else walked by `harness.base.tree` and hashed with no
    symlink followed, no FIFO opened. Anything else (symlink, FIFO, device, unsealable name, too
    deep) is a problem, as is a file that cannot be hashed (the others are still hashed).
    Threads only pay on large payloads."""
    if streamed is not None:
        sizes = dict(sorted(_files(listed(streamed.sizes, streamed.dirs), problems).items()))
        return {p: streamed.digests[p] for p in sizes}, sizes
    try:
        entries = walk(root)
    except OSError as e:
        raise InvalidInput(
            f"{one_line(str(root))}: cannot read the bundle folder: {e.strerror or e}"
        ) from None
    sizes = _files(entries, problems)
    workers = 1 if sum(sizes.values()) < THREADED_BYTES else None
    hashes: dict[str, str] = {}
    for rel, got in sha256_tree_each(root, sorted(sizes), workers).items():
        if isinstance(got, OSError):
            problems.append(BundleFault("unreadable", rel, got.strerror or str(got)))
        else:
            hashes[rel] = got
    return hashes, {p: sizes[p] for p in hashes}


def _files(entries: list[Entry], problems: list[BundleFault]) -> dict[str, int]:
    """{relpath: size} of the regular files among `entries`; anything else is a problem."""
    sizes: dict[str, int] = {}
    for entry in entries:
        if entry.name_problem:
            problems.append(BundleFault("bad-name", entry.rel, entry.name_problem))
        elif entry.too_deep:
            problems.append(BundleFault("too-deep", entry.rel, f"deeper than {MAX_DEPTH} folders"))
        elif entry.is_file:
            sizes[entry.rel] = entry.size
        elif not entry.is_dir:
            target = f" to {entry.target!r}" if entry.target is not None else ""
            problems.append(BundleFault("not-a-file", entry.rel, f"{entry.kind}{target}"))
    return sizes


def _read(root: Path, rel: str, hashes: dict[str, str], problems: list[BundleFault]) -> str | None:
    """A tag file's text, or None (with a problem) when it is absent, too big or not UTF-8."""
    if rel not in hashes:
        return None
    try:
        return read_text_member(root, rel)
    except BadMember as e:
        problems.append(BundleFault("malformed", rel, str(e)))
        return None


def _manifest(root: Path, rel: str, hashes: dict[str, str], problems: list[BundleFault],
              payload: bool) -> dict[str, str]:
    text = _read(root, rel, hashes, problems)
    if text is None:
        if rel in hashes:
            return {}
        problems.append(BundleFault("missing", rel, "the bag has no such manifest"))
        return {}
    entries, bad = parse_sums(text, rel)
    problems.extend(bad)
    for path in sorted(entries):
        if path.startswith(f"{bag.PAYLOAD_DIR}/") != payload:
            problems.append(BundleFault("malformed", rel, f"lists {path}, which it may not cover"))
            del entries[path]
    return entries


def _check_declarations(root: Path, hashes: dict[str, str], sizes: dict[str, int],
                        problems: list[BundleFault]) -> str:
    """bagit.txt must declare 1.0 / UTF-8; Payload-Oxum must match the payload."""
    declared = _read(root, bag.BAGIT_TXT, hashes, problems)
    if declared is not None and declared != bag.bagit_txt():
        problems.append(BundleFault("malformed", bag.BAGIT_TXT, "not BagIt-Version 1.0, UTF-8"))
    info = _read(root, bag.BAG_INFO, hashes, problems) or ""
    oxums = bag.info_values(info, "Payload-Oxum")
    actual = bag.payload_oxum([s for p, s in sizes.items() if p.startswith("data/")])
    if bag.BAG_INFO in hashes and oxums != [actual]:
        said = ", ".join(oxums) or "nothing"
        problems.append(BundleFault("payload-oxum", bag.BAG_INFO,
                                f"Payload-Oxum says {said}, the payload is {actual} (bytes.files)"))
    return info


def _bagit_opinion(root: Path) -> list[BundleFault]:
    """The reference implementation's verdict on the bag's structure. Consulted only when ours
    found nothing; its fixity pass is skipped, as it would rehash the same bytes against the
    same manifest."""
    logging.getLogger("bagit").setLevel(logging.CRITICAL)
    try:
        bagit.Bag(str(root)).validate(completeness_only=True)
    except bagit.BagValidationError as e:
        details = "; ".join(str(d) for d in e.details) or e.message
        return [BundleFault("bagit", str(root.name), details)]
    except bagit.BagError as e:
        return [BundleFault("bagit", str(root.name), str(e))]
    return []


def verify_tree(root: Path, allowed_signers: Policy | Path | None = None,
                streamed: Unpacked | None = None) -> VerifyReport:
    """Verify an extracted bundle (its top folder) and report every problem found. `streamed`:
    the archive as `unpack` listed and hashed it; the tree is then judged from that listing, not
    walked, and only the members verify reads (`read_by_verify`) need be on disk."""
    policy = allowed_signers if isinstance(allowed_signers, Policy) else Policy(allowed_signers)
    report = VerifyReport()
    problems = report.problems
    unscanned: list[BundleFault] = []
    hashes, sizes = _scan(root, streamed, unscanned)
    problems.extend(unscanned)
    payload = {p: h for p, h in hashes.items() if p.startswith(f"{bag.PAYLOAD_DIR}/")}
    tags = {p: h for p, h in hashes.items() if p not in payload and p not in UNMANIFESTED}
    report.files = len(payload)
    report.runs = bag_runs(list(payload))

    manifest = _manifest(root, bag.MANIFEST, hashes, problems, payload=True)
    tagmanifest = _manifest(root, bag.TAGMANIFEST, hashes, problems, payload=False)
    if bag.MANIFEST in hashes:
        problems.extend(compare(manifest, payload, bag.MANIFEST))
    if bag.TAGMANIFEST in hashes:
        problems.extend(compare(tagmanifest, tags, bag.TAGMANIFEST))
    seen = {(p.kind, p.path) for p in problems}
    problems.extend(BundleFault("missing", name, "required tag file")
                    for name in REQUIRED_TAGS if name not in hashes
                    and ("missing", name) not in seen)
    info = _check_declarations(root, hashes, sizes, problems)
    statement = _read(root, bag.STATEMENT, hashes, problems)  # not held beyond this check
    if statement is not None and bag.MANIFEST in hashes:
        problems.extend(check_statement(statement, manifest, bag.STATEMENT))
    problems.extend(_check_runs(root, payload, report.runs, unscanned, streamed))
    records = [read_run_facts(r, root / r, record_only=True).slim() for r in report.runs]
    found, approvals = chain.judge(root, records, hashes, policy)
    problems.extend(found)
    report.lines = run_lines(records, approval_docs(_carried_approvals(root, hashes)))
    signed, found = policy.bag(root, hashes, bag.info_values(info, bag.SIGNATURE_LABEL))
    problems.extend(found)
    report.vouches = [signed, *approvals]
    report.signature = _in_a_word(signed)
    if not problems and streamed is None:  # it walks the disk; an archive's listing had
        problems.extend(_bagit_opinion(root))  # the same checks from ours, as it streamed
    return report


def _carried_approvals(root: Path, hashes: dict[str, str]) -> dict[str, bytes]:
    """The approval documents the bag carries, for the run listing."""
    out = {}
    for rel in sorted(hashes):
        if rel.startswith(f"{chain.APPROVALS_TAGS}/") and rel.endswith(".json"):
            try:
                out[rel] = read_member(root, rel)
            except BadMember:
                continue
    return out


def _check_runs(root: Path, payload: dict[str, str], runs: list[str],
                found: list[BundleFault], streamed: Unpacked | None = None) -> list[BundleFault]:
    """The payload's shape, then `harness verify`'s verdict on each run folder, from the digests the
    bag check used (streamed: every digest and each run's listing, as `walk` would list it)."""
    problems = layout_problems(sorted(payload), runs)
    named = {one_line(p.path) for p in found}  # verify_folder's paths are printable already
    known = payload if streamed is None else streamed.digests
    listings: dict[str, list[Entry]] = {}
    if streamed is not None:
        sizes = run_digests(streamed.sizes, runs)
        dirs = run_digests(dict.fromkeys(streamed.dirs, 0), runs)
        listings = {run: listed(sizes[run], dirs[run]) for run in runs}
    for run, digests in run_digests(known, runs).items():
        problems.extend(p for p in run_problems(root / run, run, digests, listings.get(run))
                        if one_line(p.path) not in named)
    return problems


def _in_a_word(signed: Vouch) -> str:
    """`VerifyReport.signature`: the bag's own signature in a word."""
    return {GOOD: f"good signature by {signed.signer}", BAD: "bad",
            UNCHECKED: "signed, not checked", STRIPPED: "stripped"}.get(signed.state, UNSIGNED)


def read_by_verify(name: str) -> bool:
    """Whether verify reads a member's bytes (`name` under the top folder): the tag files, and
    in the payload only run records and seals. The rest is hashed as it streams, never written."""
    rel = name.partition("/")[2]
    return not rel.startswith(f"{bag.PAYLOAD_DIR}/") or rel.rpartition("/")[2] in (RECORD,
                                                                                   SUMS)


def verify_archive(source: Path, dest: Path, allowed_signers: Policy | Path | None = None,
                   limits: Limits | None = None, opened: BinaryIO | None = None,
                   payload: bool = True) -> tuple[Path, VerifyReport]:
    """Unpack the archive `source` (or the file `opened` for it) safely into the private, empty
    folder `dest` and verify it: the one path by which `bundle verify`, `merge` and `collect` judge
    a bundle that came from someone else. `payload=False` writes only what verify reads, for a
    caller that needs the verdict, not the files. A hostile or unreadable archive raises
    InvalidInput (exit 2)."""
    unpacked = unpack(source, dest, limits, opened=opened,
                      keep=None if payload else read_by_verify)
    return unpacked.root, verify_tree(unpacked.root, allowed_signers, streamed=unpacked)


def verify_bundle(source: Path, allowed_signers: Path | None = None,
                  limits: Limits | None = None, reviewers: Path | None = None) -> VerifyReport:
    """Verify a bundle archive or an extracted bundle folder. Hostile or unreadable archives raise
    InvalidInput (exit 2)."""
    source = Path(source)
    policy = Policy.given(allowed_signers, reviewers)
    if source.is_symlink():
        raise InvalidInput(f"{one_line(str(source))}: is a symlink; give the bundle itself")
    if source.is_dir():
        if not (source / bag.BAGIT_TXT).exists() and not (source / bag.TAGMANIFEST).exists():
            raise InvalidInput(f"{one_line(str(source))}: not a bundle folder (no {bag.BAGIT_TXT})")
        return verify_tree(source, policy)
    if not source.is_file():  # as safe_extract says it, before anything is opened
        raise InvalidInput(f"{one_line(str(source))}: not a file")
    with tempfile.TemporaryDirectory(prefix="harness-bundle-") as tmp, \
            open_archive(source) as (fh, digest):
        report = verify_archive(source, Path(tmp), policy, limits, opened=fh, payload=False)[1]
    report.sha256 = digest  # of the very bytes unpacked and judged
    return report
