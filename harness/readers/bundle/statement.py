"""The bundle's in-toto Statement v1 with an SLSA-provenance-v1-shaped predicate.

Subjects are every payload file with its sha256, so in-toto tools check the same bytes
the BagIt manifest covers."""

from __future__ import annotations

import hashlib
import json
import secrets
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any, BinaryIO

from harness.base.atomic import dumps_json, iter_json_spliced
from harness.readers.bundle.facts import RunFacts, model_hashes, provenance, time_span
from harness.readers.bundle.records import BadMember, parse_json
from harness.readers.bundle.sums import BundleFault

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "urn:harness:build-type:gpu-control-runs:v1"
BUILDER_ID = "urn:harness:runner"


def _digest(value: Any) -> dict[str, str] | None:
    """`sha256:<hex>` as an in-toto DigestSet, or None when it is not one."""
    if isinstance(value, str) and ":" in value:
        algorithm, hexdigest = value.split(":", 1)
        if algorithm and hexdigest:
            return {algorithm.lower(): hexdigest.lower()}
    return None


def _request(r: RunFacts) -> dict[str, Any]:
    """What the run asked for: its place in the campaign, its control, image and vector."""
    return {
        "run_id": r.run_id,
        "folder": r.folder,
        "campaign": r.get("campaign"),
        "control": r.get("control"),
        "image": r.get("image"),
        "source_seal": r.get("seal"),
        "docker_argv": r.argv,
        "model_hashes": model_hashes(r),
        "rerun_of": r.get("rerun_of"),
        "provenance": provenance(r),  # the project's git commit, clean or dirty (changed paths)
    }


Dependencies = dict[tuple[str, str], dict[str, Any]]


def _add_dependencies(merged: Dependencies, r: RunFacts) -> None:
    """Merge the image, source seal and model files run `r` resolved into `merged`."""

    def add(name: str, uri: str, value: Any, digest: dict | None = None) -> None:
        digest = digest or _digest(value)
        if digest is None:
            return
        key = (uri, json.dumps(digest, sort_keys=True))
        entry = merged.setdefault(
            key, {"name": name, "uri": uri, "digest": digest, "annotations": {"runs": []}}
        )
        entry["annotations"]["runs"].append(r.run_id)

    image_name = r.get("image", "name") or "image"
    add(str(image_name), f"docker-image:{image_name}", r.get("image", "id"))
    add("source seal", "harness:source-seal", r.get("seal"))
    commit = (provenance(r) or {}).get("commit")
    if commit:
        add("project", "harness:project-git", None, {"gitCommit": commit})
    for path, value in sorted(model_hashes(r).items()):
        add(path, f"model-file:{path}", value)


def _dependency_list(merged: Dependencies) -> list[dict[str, Any]]:
    for entry in merged.values():
        entry["annotations"]["runs"].sort()
    return sorted(merged.values(), key=lambda e: (e["uri"], json.dumps(e["digest"])))


def _outcome(r: RunFacts) -> dict[str, Any]:
    """What happened to the run: times, lock interval, host, outcome and verdict."""
    return {
        "name": f"run:{r.run_id}",
        "annotations": {
            "folder": r.folder,
            "status": r.get("status"),
            "reasons": r.get("reasons"),
            "times": r.get("times"),
            "lock": r.get("lock"),
            "outcome": r.get("outcome"),
            "post_steps": r.get("post_steps"),
            "host": r.host,
            "records_missing": r.notes,
        },
    }


def _subject(path: str, digest: str) -> dict[str, Any]:
    return {"name": path, "digest": {"sha256": digest}}


def subject_json(path: str, digest: str) -> str:
    """`dumps_json(_subject(path, digest))` less its newline, by hand: the indenting encoder is
    pure Python, and a bundle has a subject per file."""
    return (f'{{\n  "digest": {{\n    "sha256": {json.dumps(digest)}\n  }},\n'
            f'  "name": {json.dumps(path, ensure_ascii=False)}\n}}')


def _document(runs: list[RunFacts], subject: list, requests: list, dependencies: list,
              byproducts: list) -> dict[str, Any]:
    """The Statement's one layout, around its four lists."""
    start, end = time_span(runs)
    metadata = {"invocationId": ",".join(r.run_id for r in runs)}
    if start:
        metadata["startedOn"] = start
    if end:
        metadata["finishedOn"] = end
    return {
        "_type": STATEMENT_TYPE,
        "subject": subject,
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {"runs": requests},
                "resolvedDependencies": dependencies,
            },
            "runDetails": {
                "builder": {"id": BUILDER_ID},
                "metadata": metadata,
                "byproducts": byproducts,
            },
        },
    }


def build_statement(runs: list[RunFacts], subjects: dict[str, str]) -> dict[str, Any]:
    """The Statement for the payload files `subjects` and their runs, whole."""
    runs = sorted(runs, key=lambda r: r.folder)
    merged: Dependencies = {}  # image, source seal and model files, merged across runs
    for r in runs:
        _add_dependencies(merged, r)
    return _document(runs, [_subject(p, subjects[p]) for p in sorted(subjects)],
                     [_request(r) for r in runs], _dependency_list(merged),
                     [_outcome(r) for r in runs])


class StatementSpool:
    """`build_statement`, written run by run so that memory does not grow with the runs: each run's
    request and outcome are encoded into temporary files as the run is read (`add`, in folder
    order), and only what spans the runs (their dependencies) is kept. `write` streams the same
    bytes as `dumps_json(build_statement(...))`."""

    def __init__(self) -> None:
        self._files = ExitStack()  # closed by __exit__: the spool is a context manager
        self._requests = self._files.enter_context(tempfile.TemporaryFile())  # noqa: SIM115
        self._outcomes = self._files.enter_context(tempfile.TemporaryFile())  # noqa: SIM115
        self._dependencies: Dependencies = {}
        self._last: str | None = None

    def __enter__(self) -> StatementSpool:
        return self

    def __exit__(self, *exc: object) -> None:
        self._files.close()

    def add(self, r: RunFacts) -> None:
        if self._last is not None and r.folder <= self._last:
            raise ValueError(f"runs must come in folder order: {r.folder} after {self._last}")
        self._last = r.folder
        _append(self._requests, _request(r))
        _append(self._outcomes, _outcome(r))
        _add_dependencies(self._dependencies, r)

    def write(self, out: BinaryIO, runs: list[RunFacts], subjects: dict[str, str]) -> str:
        """Write the statement to `out`; returns its sha256 hex."""
        keys = {name: f"splice:{name}:{secrets.token_hex(16)}" for name in _LISTS}
        skeleton = _document(runs, [keys["subject"]], [keys["requests"]],
                             _dependency_list(self._dependencies), [keys["byproducts"]])
        lists = {keys["subject"]: (subject_json(p, subjects[p]) for p in sorted(subjects)),
                 keys["requests"]: _items(self._requests),
                 keys["byproducts"]: _items(self._outcomes)}
        digest = hashlib.sha256()
        pending: list[str] = []
        for chunk in iter_json_spliced(skeleton, lists):
            pending.append(chunk)
            if len(pending) >= 1024:
                _flush(out, digest, pending)
        _flush(out, digest, pending)
        return digest.hexdigest()


_LISTS = ("subject", "requests", "byproducts")


def _append(spool: BinaryIO, item: dict[str, Any]) -> None:
    data = dumps_json(item)[:-1].encode("utf-8")
    spool.write(b"%d\n" % len(data))
    spool.write(data)


def _items(spool: BinaryIO) -> Iterator[str]:
    """The items `_append` wrote, in order, one at a time."""
    spool.seek(0)
    while line := spool.readline():
        yield spool.read(int(line)).decode("utf-8")


def _flush(out: BinaryIO, digest: Any, pending: list[str]) -> None:
    data = "".join(pending).encode("utf-8")
    digest.update(data)
    out.write(data)
    pending.clear()


def _read_by_check(obj: dict[str, Any]) -> bool:
    """The objects `check_statement` reads: the Statement itself, its subjects and their
    digest sets. The predicate (about 10 KiB a run) is checked as strict JSON and dropped."""
    return "_type" in obj or "name" in obj or "sha256" in obj


def check_statement(text: str, manifest: dict[str, str], source: str) -> list[BundleFault]:
    """The statement must be an in-toto Statement v1 whose subjects are exactly the manifest."""
    try:
        statement = parse_json(text, keep=_read_by_check)
    except BadMember as e:
        return [BundleFault("malformed", source, str(e))]
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        return [BundleFault("malformed", source, f"not an in-toto Statement ({STATEMENT_TYPE})")]
    listed = statement.get("subject")
    if not isinstance(listed, list):
        return [BundleFault("malformed", source, "its subject is not a list")]
    subjects: dict[str, str] = {}
    problems: list[BundleFault] = []
    for index, item in enumerate(listed):
        name = item.get("name") if isinstance(item, dict) else None
        digest = item.get("digest") if isinstance(item, dict) else None
        value = digest.get("sha256") if isinstance(digest, dict) else None
        if not isinstance(name, str) or not isinstance(value, str):
            problems.append(BundleFault("malformed", source,
                                    f"subject {index} has no name or no sha256 string"))
        elif name in subjects:
            problems.append(BundleFault("malformed", source, f"subject {index} repeats {name}"))
        else:
            subjects[name] = value
    for path in sorted(set(subjects) | set(manifest)):
        if path not in subjects:
            problems.append(BundleFault("statement", path, "in the manifest, not a subject"))
        elif path not in manifest:
            problems.append(BundleFault("statement", path, "a subject, not in the manifest"))
        elif subjects[path] != manifest[path]:
            problems.append(BundleFault("statement", path, "subject digest differs from manifest"))
    return problems
