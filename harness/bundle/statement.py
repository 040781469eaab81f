"""The bundle's in-toto Statement v1 with an SLSA-provenance-v1-shaped predicate.

Subjects are every payload file with its sha256, so supply-chain tools that speak
in-toto can check the same bytes the BagIt manifest covers. The predicate keeps one
buildDefinition / runDetails (the SLSA v1 shape) and lists each run inside it:
what was asked for (docker vector, image Id, source seal) under externalParameters,
what it depended on (image, models, seal) under resolvedDependencies, and what happened
(lock interval, host, verdict) as one byproduct per run.
"""

from __future__ import annotations

import json
from typing import Any

from harness.bundle.facts import RunFacts, model_hashes, provenance, time_span
from harness.bundle.records import BadMember, parse_json
from harness.bundle.sums import Problem

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


def _dependencies(runs: list[RunFacts]) -> list[dict[str, Any]]:
    """Image, source seal and model files each run resolved, merged across runs."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}

    def add(name: str, uri: str, value: Any, run_id: str, digest: dict | None = None) -> None:
        digest = digest or _digest(value)
        if digest is None:
            return
        key = (uri, json.dumps(digest, sort_keys=True))
        entry = merged.setdefault(
            key, {"name": name, "uri": uri, "digest": digest, "annotations": {"runs": []}}
        )
        entry["annotations"]["runs"].append(run_id)

    for r in runs:
        image_name = r.get("image", "name") or "image"
        add(str(image_name), f"docker-image:{image_name}", r.get("image", "id"), r.run_id)
        add("source seal", "harness:source-seal", r.get("seal"), r.run_id)
        commit = (provenance(r) or {}).get("commit")
        if commit:
            add("project", "harness:project-git", None, r.run_id, {"gitCommit": commit})
        for path, value in sorted(model_hashes(r).items()):
            add(path, f"model-file:{path}", value, r.run_id)
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


def build_statement(runs: list[RunFacts], subjects: dict[str, str]) -> dict[str, Any]:
    """The Statement for the payload files `subjects` ({bag path: sha256 hex}) and their runs."""
    runs = sorted(runs, key=lambda r: r.folder)
    start, end = time_span(runs)
    metadata = {"invocationId": ",".join(r.run_id for r in runs)}
    if start:
        metadata["startedOn"] = start
    if end:
        metadata["finishedOn"] = end
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": p, "digest": {"sha256": subjects[p]}} for p in sorted(subjects)],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {"runs": [_request(r) for r in runs]},
                "resolvedDependencies": _dependencies(runs),
            },
            "runDetails": {
                "builder": {"id": BUILDER_ID},
                "metadata": metadata,
                "byproducts": [_outcome(r) for r in runs],
            },
        },
    }


def check_statement(text: str, manifest: dict[str, str], source: str) -> list[Problem]:
    """The statement must be an in-toto Statement v1 whose subjects are exactly the manifest."""
    try:
        statement = parse_json(text)
    except BadMember as e:
        return [Problem("malformed", source, str(e))]
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        return [Problem("malformed", source, f"not an in-toto Statement ({STATEMENT_TYPE})")]
    listed = statement.get("subject")
    if not isinstance(listed, list):
        return [Problem("malformed", source, "its subject is not a list")]
    subjects: dict[str, str] = {}
    problems: list[Problem] = []
    for index, item in enumerate(listed):
        name = item.get("name") if isinstance(item, dict) else None
        digest = item.get("digest") if isinstance(item, dict) else None
        value = digest.get("sha256") if isinstance(digest, dict) else None
        if not isinstance(name, str) or not isinstance(value, str):
            problems.append(Problem("malformed", source,
                                    f"subject {index} has no name or no sha256 string"))
        elif name in subjects:
            problems.append(Problem("malformed", source, f"subject {index} repeats {name}"))
        else:
            subjects[name] = value
    for path in sorted(set(subjects) | set(manifest)):
        if path not in subjects:
            problems.append(Problem("statement", path, "in the manifest, not a subject"))
        elif path not in manifest:
            problems.append(Problem("statement", path, "a subject, not in the manifest"))
        elif subjects[path] != manifest[path]:
            problems.append(Problem("statement", path, "subject digest differs from manifest"))
    return problems
