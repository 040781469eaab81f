"""The approval chain in a bundle: run -> seal -> approval -> gate record.

Export carries the approval the run names (and its `.sig`) and its gate record byte for
byte as tag files, so the tag manifest and the bundle's signature cover them. Verify checks
each link; who vouches for the approval is `trust.Policy`'s to say: the bundle's own
signature cannot stand in for the reviewer's."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from harness.base.errors import InvalidInput
from harness.base.names import RUN_ID_MAX, is_name
from harness.base.readfile import InputError, read_bounded
from harness.base.tree import walk
from harness.config.checkout import project_of
from harness.judge.approval import basis
from harness.judge.approval.check import SIG_SUFFIX, read_doc
from harness.judge.approval.document import APPROVALS_DIR, parse, reviewed_commit
from harness.readers.bundle.facts import RunFacts
from harness.readers.bundle.records import BadMember, read_member
from harness.readers.bundle.sums import BundleFault, one_line
from harness.readers.bundle.trust import Policy, Vouch

APPROVALS_TAGS = "metadata/approvals"
GATES_TAGS = "metadata/gates"
GATE_FILES_LIMIT = 64 << 20


def _carriable(name: str) -> bool:
    """A name a tag file may carry: one path component in the one name alphabet, no
    longer than a run id (an approval's file, a gate record's folder)."""
    return is_name(name, RUN_ID_MAX)


def _approval_name(run: RunFacts) -> str | None:
    """The approval's file name, when run.json names one in approvals/ (else None)."""
    approval = run.get("approval")
    file = approval.get("file") if isinstance(approval, dict) else None
    if not isinstance(file, str):
        return None
    folder, _, name = file.partition("/")
    return name if folder == APPROVALS_DIR and _carriable(name) else ""


def _record_name(doc: dict[str, Any]) -> str:
    name = PurePosixPath(doc["gates"]["record"]).name
    return name if _carriable(name) else ""


def _folder_files(folder: Path) -> dict[str, bytes]:
    out = {}
    for entry in walk(folder):
        if entry.name_problem or not (entry.is_file or entry.is_dir):
            raise InvalidInput(f"{one_line(str(folder))}/{one_line(entry.rel)}: not carried")
        if entry.is_file:
            out[entry.rel] = read_bounded(folder / entry.rel, GATE_FILES_LIMIT, "gate file")
    return out


def _collect_one(run: RunFacts, name: str, tags: dict[str, bytes],
                 runs_dir: Path | None = None) -> list[BundleFault]:
    record = run.get("campaign", "file")
    if not isinstance(record, str):
        return [BundleFault("approval-missing", run.folder, "run.json names no campaign file")]
    project = project_of(Path(record))
    path = project / APPROVALS_DIR / name
    data, doc, bad = read_doc(path)
    if doc is None:
        return [BundleFault("approval-missing", run.folder, f"{rule}: {detail}")
                for rule, detail in bad]
    if "sha256:" + hashlib.sha256(data).hexdigest() != run.get("approval", "digest"):
        return [BundleFault("approval-changed", one_line(str(path)), "not the approval the run "
                                                                 "ran under (digest)")]
    # found by name in the run's own runs dir (`approval.basis.locate`), never at a path
    folder, found = basis.locate(doc["gates"]["record"], runs_dir)
    if folder is None:
        return [BundleFault("gates", one_line(str(doc["gates"]["record"]))[:300],
                            f"{rule}: {detail}") for rule, detail in found]
    found = basis.recheck(folder, doc["gates"]["digest"], wanted(run, doc))
    record = _record_name(doc)
    if found or not record:
        return [BundleFault("gates", one_line(str(folder)), f"{rule}: {detail}")
                for rule, detail in found] or [BundleFault("gates", one_line(str(folder)),
                                                       "not a carriable folder name")]
    prefix = f"{GATES_TAGS}/{record}/"
    carried = {prefix + rel: content for rel, content in _folder_files(folder).items()}
    earlier = {k: v for k, v in tags.items() if k.startswith(prefix)}
    if earlier and earlier != carried:  # two records of one folder name: never merged
        return [BundleFault("gates", one_line(str(folder)), "another run's gate record has the "
                        f"same folder name {record}; export them separately")]
    tags[f"{APPROVALS_TAGS}/{name}"] = data
    sig = path.with_name(name + SIG_SUFFIX)
    if sig.is_file():
        tags[f"{APPROVALS_TAGS}/{name}{SIG_SUFFIX}"] = read_bounded(sig, 64 * 1024, "signature")
    tags.update(carried)
    return []


def _approved(runs: list[RunFacts], problems: list[BundleFault]
              ) -> Iterator[tuple[RunFacts, str]]:
    """The runs made under an approval, with its file name; a run naming a bad file name
    is a problem (in `problems`), not a run to follow."""
    for run in runs:
        name = _approval_name(run)
        if name is None:
            continue
        if not name:
            problems.append(BundleFault("approval-missing", run.folder, "bad approval file name"))
            continue
        yield run, name


def collect(runs: list[RunFacts], runs_dirs: Mapping[str, Path] | None = None
            ) -> tuple[dict[str, bytes], list[BundleFault]]:
    """The chain's tag files for the runs that ran under an approval; a problem for each link that
    cannot be carried whole (export refuses then: exit 1)."""
    tags: dict[str, bytes] = {}
    problems: list[BundleFault] = []
    for run, name in _approved(runs, problems):
        try:
            problems += _collect_one(run, name, tags, (runs_dirs or {}).get(run.folder))
        except (InputError, OSError, InvalidInput) as e:
            problems.append(BundleFault("approval-missing", run.folder, str(e)[:500]))
    return tags, problems


def _check_one(root: Path, run: RunFacts, name: str, hashes: dict[str, str],
               policy: Policy, vouched: dict[str, Vouch]) -> list[BundleFault]:
    tag = f"{APPROVALS_TAGS}/{name}"
    if tag not in hashes:
        return [BundleFault("approval-missing", run.folder, f"the bundle does not carry {tag}")]
    if "sha256:" + hashes[tag] != run.get("approval", "digest"):
        return [BundleFault("approval-changed", tag, "not the approval the run ran under")]
    try:
        data = read_member(root, tag)
    except BadMember as e:
        return [BundleFault("approval-malformed", tag, str(e))]
    try:
        doc = parse(data)
    except ValueError as e:
        return [BundleFault("approval-malformed", tag, str(e))]
    signed: list[BundleFault] = []  # who vouches for it: judged once, however many runs name it
    if tag not in vouched:
        vouched[tag], signed = policy.approval(root, tag, data, hashes)
    if doc["source_seal"] != run.get("seal"):
        return [*signed, BundleFault("approval-seal", tag, f"approves {doc['source_seal']}, the "
                                 f"run's seal is {one_line(str(run.get('seal')))}")]
    if not _record_name(doc):  # '..', '/', a dotted or odd name: never a path under root
        return [*signed, BundleFault("gates", tag, f"names the gate record "
                                 f"{one_line(str(doc['gates']['record']))[:200]}, "
                                 "whose folder name no bundle carries")]
    folder = root / GATES_TAGS / _record_name(doc)
    return signed + [BundleFault("approval-dirty", tag, f"{rule}: {detail}")
                     for rule, detail in reviewed_commit(doc)] + [
        BundleFault("gates", f"{GATES_TAGS}/{_record_name(doc)}", f"{rule}: {detail}")
        for rule, detail in basis.recheck(folder, doc["gates"]["digest"], wanted(run, doc))]


def wanted(run: RunFacts, doc: dict[str, Any]) -> basis.Wanted:
    """What the carried approval needs of its gate record: the run's campaign, the approved seal and
    the approved commit (`basis.judge_record`, the rule approve and the run-time check apply).
    The record is bound by its digest, so no gate list is asked of it again."""
    commit = doc["git"].get("commit")
    return basis.Wanted(str(run.get("campaign", "name")), (), doc["source_seal"],
                        commit if isinstance(commit, str) else None)


def judge(root: Path, runs: list[RunFacts], hashes: dict[str, str], policy: Policy
          ) -> tuple[list[BundleFault], list[Vouch]]:
    """Each run that names an approval: the chain run -> seal -> approval -> gates holds,
    and the approval is signed as `policy` asks; with who vouches for each approval."""
    problems: list[BundleFault] = []
    vouched: dict[str, Vouch] = {}
    for run, name in _approved(runs, problems):
        problems += _check_one(root, run, name, hashes, policy, vouched)
    return problems, [vouched[tag] for tag in sorted(vouched)]
